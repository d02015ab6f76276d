"""Checks of files on a lab node shared by the molecule scenarios' testinfra tests (on the verifier's PYTHONPATH,
.config/molecule/config.yml)."""

import hashlib


def assert_file_is_exactly(host, path, text, mode=0o644, user="root", group="root"):
    """The file at ``path`` has this owner, group and mode, and holds ``text`` byte for byte."""
    written = host.file(path)
    assert (written.mode, written.user, written.group) == (mode, user, group)
    # content_string comes through a command's output, without the file's last newline; sha256sum reads every byte.
    assert written.content_string.rstrip("\n") == text.rstrip("\n")
    assert host.check_output(f"sha256sum {path}").split()[0] == hashlib.sha256(text.encode()).hexdigest()
