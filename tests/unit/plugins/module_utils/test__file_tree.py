# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""_file_tree writes through real directories only, in one move per file, and says why it cannot in one sentence."""

from __future__ import annotations

import errno
import os

import pytest

from ansible_collections.onprem.gpu.plugins.module_utils import _file_tree
from ansible_collections.onprem.gpu.plugins.module_utils._file_tree import FileTreeError, check_root, read, relative_path, stale, write


def test_write_creates_the_directories_and_replaces_the_file_in_one_move(tmp_path):
    write(str(tmp_path / "tree"), "apps/kueue.yaml", "kind: A\n")
    write(str(tmp_path / "tree"), "apps/kueue.yaml", "kind: B\n")
    assert read(str(tmp_path / "tree"), "apps/kueue.yaml") == "kind: B\n"
    assert os.listdir(tmp_path / "tree" / "apps") == ["kueue.yaml"]  # no temporary file left
    assert oct((tmp_path / "tree" / "apps" / "kueue.yaml").stat().st_mode & 0o777) == "0o644"


def test_the_root_may_be_a_link_when_nothing_is_pruned(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    check_root(str(tmp_path / "link"))
    write(str(tmp_path / "link"), "report.md", "# r\n")
    assert (tmp_path / "real" / "report.md").read_text() == "# r\n"


@pytest.mark.parametrize("relative", ["../x.yaml", "/etc/x.yaml", "a/../../x.yaml", "."])
def test_paths_leaving_the_root_are_refused(relative):
    with pytest.raises(FileTreeError, match=r"^File .* is not a relative path inside /root\.$"):
        relative_path("/root", relative)


def test_a_name_starting_with_dots_is_a_plain_name():
    assert relative_path("/root", "..data.yaml") == "..data.yaml"


def test_a_file_where_a_directory_is_needed(tmp_path):
    (tmp_path / "apps").write_text("x\n")
    with pytest.raises(FileTreeError) as raised:
        read(str(tmp_path), "apps/kueue.yaml")
    assert str(raised.value) == f"{tmp_path}/apps is a file where {tmp_path}/apps/kueue.yaml needs a directory."


def test_stale_does_not_walk_linked_directories(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "theirs.yaml").write_text("x\n")
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "linked").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "tree" / "old.yaml").write_text("x\n")
    assert stale(str(tmp_path / "tree"), {"kustomization.yaml"}, ".yaml") == ["old.yaml"]


@pytest.mark.parametrize(("number", "reason"), [(errno.EACCES, "permission denied"), (errno.ENOSPC, "the file system is full")])
def test_os_errors_become_one_sentence_without_errno_text(tmp_path, monkeypatch, number, reason):
    def failing(*args, **kwargs):
        raise OSError(number, os.strerror(number))

    monkeypatch.setattr(_file_tree.tempfile, "mkstemp", failing)
    with pytest.raises(FileTreeError) as raised:
        write(str(tmp_path), "a.yaml", "a: 1\n")
    assert str(raised.value) == f"Cannot write {tmp_path}/a.yaml: {reason}."
