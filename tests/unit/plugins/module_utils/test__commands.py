# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from unittest import mock

import pytest

from ansible_collections.onprem.gpu.plugins.module_utils._commands import find_command


@pytest.fixture(name="module")
def fixture_module():
    module = mock.Mock()
    module.get_bin_path.side_effect = {"nvidia-smi": "/usr/bin/nvidia-smi"}.get
    return module


def test_bare_name_is_looked_up(module):
    assert find_command(module, "nvidia-smi") == "/usr/bin/nvidia-smi"
    assert find_command(module, "mpirun") is None


def test_path_is_taken_as_it_is_when_executable(module, tmp_path):
    tool = tmp_path / "all_reduce_perf"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    assert find_command(module, str(tool)) == str(tool)
    module.get_bin_path.assert_not_called()


@pytest.mark.parametrize("mode", [0o644, None], ids=["not-executable", "missing"])
def test_path_that_cannot_run_is_absent(module, tmp_path, mode):
    tool = tmp_path / "nvidia-smi"
    if mode is not None:
        tool.write_text("")
        tool.chmod(mode)
    assert find_command(module, str(tool)) is None
