# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Read the results of ``dcgmi diag -r N -j``.

Two shapes exist (DCGM's ``nvvs`` JSON output and its schema, ``testing/python3/dcgm_diag_schema.json``): before DCGM
4 the document is ``{"DCGM GPU Diagnostic": {"test_categories": [...]}}`` with results keyed by ``gpu_ids`` (a GPU id
or a comma-separated list for the deployment tests); since DCGM 4 it is ``{"DCGM Diagnostic": ...}`` with
``entity_group``/``entity_id`` per result. Status words vary in case (``PASS``, ``Pass``, ``SKIP``, ``Skipped``).
``dcgmi`` may print a line such as ``Successfully ran diagnostic for group.`` before the JSON.
"""

from __future__ import annotations

import json


class DcgmDiagError(Exception):
    """The text holds no ``dcgmi diag -j`` document; the message is one sentence."""


def parse_dcgm_diag(text):
    """Return ``{"results": [...], "runtime_error": str or None}``.

    Each result: ``category``, ``test``, ``status`` (``pass``, ``fail``, ``warn``, ``skip``), ``gpus`` (list of GPU
    indices; empty when the result is not about GPUs) and ``messages`` (the warning texts).
    """
    start, end = text.find("{"), text.rfind("}")
    try:
        document = json.loads(text[start:end + 1]) if start >= 0 else None
    except ValueError as error:
        raise DcgmDiagError(f"dcgmi diag printed JSON that cannot be read ({error}).") from None
    body = None
    if isinstance(document, dict):
        body = document.get("DCGM Diagnostic", document.get("DCGM GPU Diagnostic"))
    if not isinstance(body, dict):
        raise DcgmDiagError("dcgmi diag printed no diagnostic document.")
    results = []
    for category in body.get("test_categories") or []:
        for test in category.get("tests") or []:
            for result in test.get("results") or []:
                results.append({
                    "category": category.get("category"),
                    "test": test.get("name"),
                    "status": _status(result.get("status")),
                    "gpus": _gpus(result),
                    "messages": [_message(item) for item in result.get("warnings") or []],
                })
    return {"results": results, "runtime_error": body.get("runtime_error") or None}


def _status(word):
    word = (word or "").strip().lower()
    return "skip" if word.startswith("skip") else word


def _gpus(result):
    if "entity_id" in result:
        return [int(result["entity_id"])] if result.get("entity_group", "GPU") == "GPU" else []
    ids = str(result.get("gpu_ids", result.get("gpu_id", "")))
    return [int(part) for part in ids.split(",") if part.strip().isdigit()]


def _message(item):
    return item.get("warning", "") if isinstance(item, dict) else str(item)
