# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from ansible.errors import AnsibleFilterError, AnsibleTypeError

from ansible_collections.onprem.gpu.plugins.module_utils._gpu_models import BUSBW_KINDS, expected_busbw, known_model_names, model_info


def gpu_model_info(name):
    """Return the catalogue entry for a GPU model name, or only its name when unknown; always with the known names.

    known_models is there for known models too because ansible-core templates an assert's fail_msg
    even when the assertion holds.
    """
    if not isinstance(name, str):
        raise AnsibleTypeError(f"gpu_model_info expects a GPU model name as a string, not {type(name).__name__}.")
    info = model_info(name)
    if info is None:
        return {"known": False, "name": name, "known_models": known_model_names()}
    return dict(info, known=True, known_models=known_model_names())


def gpu_model_busbw(name, kind, overrides=None):
    """Return the busbw threshold ``kind`` of an 8-GPU node of model ``name``: the inventory's ``overrides`` merged over the catalogue."""
    if not isinstance(name, str):
        raise AnsibleTypeError(f"gpu_model_busbw expects a GPU model name as a string, not {type(name).__name__}.")
    if kind not in BUSBW_KINDS:
        raise AnsibleFilterError(f"gpu_model_busbw: the kind must be one of {', '.join(BUSBW_KINDS)}, not {kind!r}.")
    if overrides is not None and not isinstance(overrides, dict):
        raise AnsibleTypeError(f"gpu_model_busbw: network_benchmark_{kind} must be a mapping, not {type(overrides).__name__}.")
    try:
        return expected_busbw(name, kind, overrides)
    except ValueError as error:
        raise AnsibleFilterError(str(error)) from None


class FilterModule:
    """Filters that expose the GPU model catalogue to playbooks."""

    def filters(self):
        return {"gpu_model_info": gpu_model_info, "gpu_model_busbw": gpu_model_busbw}
