# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A directory of generated text files, written so that nothing lands outside it.

The directories it writes (a GitOps tree, a report) are often Git checkouts, where anyone can commit a symbolic link:
``apps -> /etc`` or ``kustomization.yaml.tmp -> ~/.bashrc`` would make a plain ``open(..., "w")`` write elsewhere. So
below ``root`` every directory and file read, written or removed must be a real one (``root`` itself and its parents
may be links: an operator's choice, not the tree's), files are written through a new temporary file in their own
directory (``tempfile.mkstemp``: created, never opened through a link) moved over the target with ``os.replace``, and
every failure is ``FileTreeError`` with one sentence and no errno text. Nothing here imports Ansible.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile

# What an operator can act on, instead of "[Errno 13] Permission denied: '...'".
_REASONS = {
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EROFS: "the file system is read-only",
    errno.ENOSPC: "the file system is full",
    errno.EDQUOT: "the disk quota is used up",
    errno.ENOTDIR: "part of the path is a file, not a directory",
    errno.EISDIR: "it is a directory",
    errno.ENAMETOOLONG: "the name is too long",
}


class FileTreeError(Exception):
    """Why the tree cannot be read or written, in one sentence."""


def _failure(action, path, error):
    reason = _REASONS.get(error.errno) or (error.strerror or type(error).__name__).lower()
    return FileTreeError(f"Cannot {action} {path}: {reason}.")


def relative_path(root, relative):
    """``relative`` normalised, refused when it is absolute or leaves ``root``."""
    normal = os.path.normpath(relative)
    if os.path.isabs(normal) or normal.split(os.sep)[0] in (os.curdir, os.pardir):
        raise FileTreeError(f"File {relative!r} is not a relative path inside {root}.")
    return normal


def check_root(root, prune=False):
    """Refuse a ``root`` that (or whose first existing parent) is not a directory. With ``prune`` (files under ``root`` that are not written are
    removed) also one with . or .. in it (clusters/.. is every datacenter's tree) or that is a link (another directory's)."""
    if prune and any(part in (os.curdir, os.pardir) for part in root.split(os.sep)):
        raise FileTreeError(f"The directory {root} has a '.' or '..' in it: name the directory itself, so that nothing is written or pruned outside it.")
    if prune and os.path.islink(root):
        raise FileTreeError(f"{root} is a symbolic link: the tree is pruned, so it must be a real directory.")
    _missing(root)


def _missing(root):
    """``root`` and its parents that do not exist yet, deepest first; refused when the first that exists is no directory."""
    missing = []
    path = root
    while not os.path.lexists(path):
        missing.append(path)
        path = os.path.dirname(path) or os.curdir
    if not os.path.isdir(path):
        raise FileTreeError(f"{path} is not a directory, so nothing can be written under it.")
    return missing


def _check_below(root, relative):
    """Refuse a link or a file among the directories of ``relative`` under ``root``, and a link at ``relative`` itself."""
    path = root
    parts = relative.split(os.sep)
    for position, part in enumerate(parts):
        path = os.path.join(path, part)
        if os.path.islink(path):
            raise FileTreeError(f"{path} is a symbolic link: files are written only through real directories and files inside {root}.")
        if position < len(parts) - 1 and os.path.lexists(path) and not os.path.isdir(path):
            raise FileTreeError(f"{path} is a file where {os.path.join(root, relative)} needs a directory.")


def read(root, relative):
    """The text of ``root/relative``, or None when it does not exist."""
    _check_below(root, relative)
    path = os.path.join(root, relative)
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise _failure("read", path, error) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise FileTreeError(f"{path} is not UTF-8 text, so it is neither replaced nor removed: fix or delete it and run again.") from None


def _make_directories(root, relative_directory, mode):
    """Create ``root`` (with its parents) and ``relative_directory`` under it where missing."""
    missing = _missing(root)
    below = root
    for part in relative_directory.split(os.sep) if relative_directory else []:
        below = os.path.join(below, part)
        missing.insert(0, below)
    for path in reversed(missing):
        try:
            os.mkdir(path, mode)
        except FileExistsError:
            pass
        except OSError as error:
            raise _failure("create the directory", path, error) from None


def write(root, relative, text, mode=0o644, directory_mode=0o755):
    """Write ``text`` to ``root/relative`` in one move, creating the directories on the way."""
    _check_below(root, relative)
    _make_directories(root, os.path.dirname(relative), directory_mode)
    _check_below(root, relative)  # again: nothing on the way may have become a link while the directories were made
    target = os.path.join(root, relative)
    directory, name = os.path.split(target)
    try:
        handle, temporary = tempfile.mkstemp(dir=directory, prefix=f".{name}.")
    except OSError as error:
        raise _failure("write", target, error) from None
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except OSError as error:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise _failure("write", target, error) from None


def stale(root, wanted, suffix):
    """Files under ``root`` ending in ``suffix`` that ``wanted`` (relative paths) does not hold, sorted. Linked
    directories are not walked, so nothing is pruned through them."""
    found = []
    for directory, _subdirectories, names in os.walk(root):
        for name in names:
            relative = os.path.relpath(os.path.join(directory, name), root)
            if name.endswith(suffix) and relative not in wanted:
                found.append(relative)
    return sorted(found)


def remove(root, relative):
    """Remove ``root/relative`` (a file, not through a link)."""
    _check_below(root, relative)
    try:
        os.remove(os.path.join(root, relative))
    except FileNotFoundError:
        pass
    except OSError as error:
        raise _failure("remove", os.path.join(root, relative), error) from None


def remove_empty_directories(root):
    """Remove the directories under ``root`` left empty, bottom-up: a parent emptied by removing its last subdirectory
    goes too."""
    for directory, _subdirectories, _names in os.walk(root, topdown=False):
        if directory != root and not os.path.islink(directory) and not os.listdir(directory):
            try:
                os.rmdir(directory)
            except OSError as error:
                raise _failure("remove the empty directory", directory, error) from None
