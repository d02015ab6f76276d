# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from ansible.errors import AnsibleTypeError

from ansible_collections.onprem.gpu.plugins.module_utils._nccl import parse


def nccl_results(output):
    """Return the parsed result of an nccl-tests ``*_perf`` run from its stdout (text or lines) or its -J JSON."""
    if isinstance(output, list) and all(isinstance(line, str) for line in output):
        output = "\n".join(output)
    if not isinstance(output, str):
        raise AnsibleTypeError(f"nccl_results expects the output of an nccl-tests run as a string or a list of lines, not {type(output).__name__}.")
    return parse(output)


class FilterModule:
    """Filters that read nccl-tests results in playbooks."""

    def filters(self):
        return {"nccl_results": nccl_results}
