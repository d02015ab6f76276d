# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""cluster_addons_tree writes a tree of files in one call, only what differs; prune removes stale YAML, nothing else does."""

from __future__ import annotations

import errno
import json
import tempfile

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


# Issue #30: a datacenter named "." or "..", links committed into the tree, and a render dir that is a file, read-only
# or holds a file that is not UTF-8 each end in one sentence, with nothing written or removed outside the tree.

def test_a_path_with_dot_dot_is_refused_before_pruning_other_trees(tmp_path, capsys):
    (tmp_path / "clusters" / "dc2").mkdir(parents=True)
    (tmp_path / "clusters" / "dc2" / "kustomization.yaml").write_text("resources: []\n")
    for name in (".", ".."):
        result = run_module({"path": f"{tmp_path}/clusters/{name}", "files": {"kustomization.yaml": "resources: []\n"}}, capsys)
        assert result["msg"] == (f"The directory {tmp_path}/clusters/{name} has a '.' or '..' in it: name the directory itself, "
                                 "so that nothing is written or pruned outside it.")
    assert (tmp_path / "clusters" / "dc2" / "kustomization.yaml").exists()


def test_a_linked_directory_inside_the_tree_is_refused_and_nothing_lands_outside(tmp_path, capsys):
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "dc1").mkdir()
    (tmp_path / "dc1" / "apps").symlink_to(outside)
    result = run_module({"path": str(tmp_path / "dc1"), "files": {"kustomization.yaml": "resources: []\n", "apps/kueue.yaml": "kind: A\n"}}, capsys)
    assert result["msg"] == f"{tmp_path}/dc1/apps is a symbolic link: files are written only through real directories and files inside {tmp_path}/dc1."
    assert list(outside.iterdir()) == [] and not (tmp_path / "dc1" / "kustomization.yaml").exists()


def test_a_committed_tmp_link_is_not_written_through(tmp_path, capsys):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (tmp_path / "dc1").mkdir()
    (tmp_path / "dc1" / "kustomization.yaml.tmp").symlink_to(victim)
    result = run_module({"path": str(tmp_path / "dc1"), "files": {"kustomization.yaml": "resources: []\n"}}, capsys)
    assert result["changed"] is True and (tmp_path / "dc1" / "kustomization.yaml").read_text() == "resources: []\n"
    assert victim.read_text() == "precious\n"


def test_a_linked_target_file_is_refused(tmp_path, capsys):
    victim = tmp_path / "victim.yaml"
    victim.write_text("precious\n")
    (tmp_path / "dc1").mkdir()
    (tmp_path / "dc1" / "kustomization.yaml").symlink_to(victim)
    result = run_module({"path": str(tmp_path / "dc1"), "files": {"kustomization.yaml": "resources: []\n"}}, capsys)
    assert result["msg"] == (f"{tmp_path}/dc1/kustomization.yaml is a symbolic link: files are written only through real directories "
                             f"and files inside {tmp_path}/dc1.")
    assert victim.read_text() == "precious\n"


def test_a_linked_tree_is_not_pruned(tmp_path, capsys):
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.yaml").write_text("kind: Keep\n")
    (tmp_path / "dc1").symlink_to(other)
    result = run_module({"path": str(tmp_path / "dc1"), "files": {"kustomization.yaml": "resources: []\n"}}, capsys)
    assert result["msg"] == f"{tmp_path}/dc1 is a symbolic link: the tree is pruned, so it must be a real directory."
    assert (other / "keep.yaml").exists()


def test_a_render_dir_that_is_a_file_is_one_sentence(tmp_path, capsys):
    (tmp_path / "out").write_text("not a directory\n")
    result = run_module({"path": str(tmp_path / "out" / "clusters" / "dc1"), "files": {"kustomization.yaml": "resources: []\n"}}, capsys)
    assert result["msg"] == f"{tmp_path}/out is not a directory, so nothing can be written under it."


def test_a_read_only_render_dir_is_one_sentence(tmp_path, capsys, monkeypatch):
    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system", str(tmp_path / "dc1"))

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    result = run_module({"path": str(tmp_path / "dc1"), "files": {"kustomization.yaml": "resources: []\n"}}, capsys)
    assert result["msg"] == f"Cannot write {tmp_path}/dc1/kustomization.yaml: the file system is read-only."


def test_a_file_that_is_not_utf8_is_one_sentence(tmp_path, capsys):
    (tmp_path / "apps").mkdir()
    (tmp_path / "apps" / "old.yaml").write_bytes(b"name: caf\xe9\n")
    result = run_module({"path": str(tmp_path), "files": {"kustomization.yaml": "resources: []\n"}}, capsys)
    assert result["msg"] == f"{tmp_path}/apps/old.yaml is not UTF-8 text, so it is neither replaced nor removed: fix or delete it and run again."
    assert not (tmp_path / "kustomization.yaml").exists()
