# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""cluster_addons_tree writes a tree of files in one call, only what differs; prune removes stale YAML, nothing else does."""

from __future__ import annotations

import json

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.onprem.gpu.plugins.modules import cluster_addons_tree


def run_module(args, capsys):
    with patch_module_args(args), pytest.raises(SystemExit):
        cluster_addons_tree.main()
    return json.loads(capsys.readouterr().out)


def test_writes_what_differs_and_a_second_run_changes_nothing(tmp_path, capsys):
    files = {"kustomization.yaml": "resources: [apps/kueue.yaml]\n", "apps/kueue.yaml": "kind: Application\n"}
    first = run_module({"path": str(tmp_path / "dc1"), "files": files}, capsys)
    assert first["changed"] is True and first["written"] == ["apps/kueue.yaml", "kustomization.yaml"]
    assert (tmp_path / "dc1" / "apps" / "kueue.yaml").read_text() == "kind: Application\n"
    second = run_module({"path": str(tmp_path / "dc1"), "files": files}, capsys)
    assert second["changed"] is False and second["written"] == [] and second["removed"] == []


def test_prune_removes_stale_yaml_and_the_directories_it_empties(tmp_path, capsys):
    (tmp_path / "apps" / "old").mkdir(parents=True)
    (tmp_path / "apps" / "old" / "gone.yaml").write_text("kind: Gone\n")
    (tmp_path / "README.md").write_text("kept\n")
    result = run_module({"path": str(tmp_path), "files": {"kustomization.yaml": "resources: []\n"}}, capsys)
    assert result["removed"] == ["apps/old/gone.yaml"]
    assert not (tmp_path / "apps").exists() and (tmp_path / "README.md").exists()


def test_without_prune_nothing_but_the_files_is_touched(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    (tmp_path / "old.yaml").write_text("kind: Old\n")
    result = run_module({"path": str(tmp_path), "files": {"charts/a.svg": "<svg/>\n"}, "prune": False}, capsys)
    assert result["written"] == ["charts/a.svg"] and result["removed"] == []
    assert (tmp_path / "empty").is_dir() and (tmp_path / "old.yaml").exists()


def test_check_mode_writes_nothing(tmp_path, capsys):
    result = run_module({"path": str(tmp_path / "dc1"), "files": {"a.yaml": "a: 1\n"}, "_ansible_check_mode": True}, capsys)
    assert result["changed"] is True and result["written"] == ["a.yaml"]
    assert not (tmp_path / "dc1").exists()


def test_a_path_outside_the_tree_is_refused(tmp_path, capsys):
    result = run_module({"path": str(tmp_path / "dc1"), "files": {"../escape.yaml": "a: 1\n"}}, capsys)
    assert result["failed"] is True
    assert result["msg"] == f"File '../escape.yaml' is not a relative path inside {tmp_path / 'dc1'}."
    assert not (tmp_path / "escape.yaml").exists()
