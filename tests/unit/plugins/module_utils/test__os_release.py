# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from ansible_collections.onprem.gpu.plugins.module_utils._os_release import parse_os_release, read_os_release

# Debian 12's /usr/lib/os-release, as the distribution ships it.
DEBIAN_12 = """PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
NAME="Debian GNU/Linux"
VERSION_ID="12"
VERSION="12 (bookworm)"
VERSION_CODENAME=bookworm
ID=debian
HOME_URL="https://www.debian.org/"
"""


def test_quoted_and_bare_values():
    values = parse_os_release(DEBIAN_12)
    assert values["ID"] == "debian" and values["VERSION_ID"] == "12" and values["VERSION_CODENAME"] == "bookworm"
    assert values["PRETTY_NAME"] == "Debian GNU/Linux 12 (bookworm)" and values["HOME_URL"] == "https://www.debian.org/"


def test_comments_blank_and_other_lines_are_skipped():
    assert parse_os_release("# a comment=1\n\nnot a pair\nID_LIKE='rhel centos fedora'\n") == {"ID_LIKE": "rhel centos fedora"}


def test_the_first_file_that_exists_is_read(tmp_path):
    usr_lib = tmp_path / "usr-lib-os-release"
    usr_lib.write_text("ID=rocky\n", encoding="utf-8")
    assert read_os_release((str(tmp_path / "etc-os-release"), str(usr_lib))) == {"ID": "rocky"}
    assert read_os_release((str(tmp_path / "none"),)) == {}
