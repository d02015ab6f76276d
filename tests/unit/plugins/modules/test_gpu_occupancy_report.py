# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""gpu_occupancy_report writes the report's files, only when they change, and nothing in check mode."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.onprem.gpu.plugins.modules import gpu_occupancy_report

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import occupancy_answers as costed  # noqa: E402

FILES = ["cost-dc1.svg", "gpu-cost.csv", "gpu-occupancy.csv", "gpu-occupancy.html", "gpu-occupancy.json", "gpu-occupancy.md",
         "idle-heatmap.svg", "occupancy.svg", "teams.svg"]


def run_module(args, capsys):
    with patch_module_args(args), pytest.raises(SystemExit):
        gpu_occupancy_report.main()
    return json.loads(capsys.readouterr().out)


def test_writes_once_and_then_changes_nothing(tmp_path, capsys):
    datacenters = [costed.measured_datacenter()]
    target = tmp_path / "reports" / "2026-10"
    first = run_module({"path": str(target), "datacenters": datacenters}, capsys)
    assert first["changed"] is True
    assert sorted(path.name for path in target.iterdir()) == FILES
    assert oct(target.joinpath("gpu-occupancy.md").stat().st_mode & 0o777) == "0o644"
    second = run_module({"path": str(target), "datacenters": datacenters}, capsys)
    assert second["changed"] is False
    assert sorted(second["files"]) == FILES


def test_check_mode_writes_nothing(tmp_path, capsys):
    result = run_module({"path": str(tmp_path / "report"), "datacenters": [costed.measured_datacenter()], "_ansible_check_mode": True}, capsys)
    assert result["changed"] is True
    assert all(entry["changed"] for entry in result["files"].values())
    assert not (tmp_path / "report").exists()


def test_refuses_what_is_not_a_costed_datacenter(tmp_path, capsys):
    result = run_module({"path": str(tmp_path), "datacenters": [{"datacenter": "dc1"}]}, capsys)
    assert result["msg"] == ("Each datacenter needs datacenter, occupancy, costs (the gpu_occupancy_cost filter's output); "
                             "one lacks occupancy, costs.")
