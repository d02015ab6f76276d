# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""container_runtime_facts, with its check=verify judged on the controller in the same task.

The module reads on the node and judges there what needs nothing newer than the node's Python (preflight, offers).
Verification parses the TOML of ``containerd config dump``, which needs Python 3.11's tomllib: Ubuntu 22.04's and
EL 9's Python lack it, the controller has it. So the module returns what it read unjudged and this action judges it as
the container_runtime_verify filter does (module_utils/_container_runtime.py), failing with the same sentences.
"""

from __future__ import annotations

from ansible.plugins.action import ActionBase
from ansible.utils.vars import merge_hash

from ansible_collections.onprem.gpu.plugins.module_utils._container_runtime import judgement

CONTROLLER_CHECKS = ("verify",)


class ActionModule(ActionBase):
    """Run the module; where its check is one the controller judges, judge what it read."""

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        result = merge_hash(result, self._execute_module(task_vars=task_vars))
        self._remove_tmp_path(self._connection._shell.tmpdir)
        check = self._task.args.get("check")
        if check not in CONTROLLER_CHECKS or result.get("failed") or result.get("skipped"):
            return result
        problems = judgement(check, result["container_runtime"], self._task.args["settings"])[0]
        if problems:
            result.update(failed=True, msg="; ".join(problems) + ".", problems=problems)
        return result
