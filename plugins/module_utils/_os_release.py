# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The host's os-release(5) file, which the modules read to tell Debian/Ubuntu from Enterprise Linux."""

from __future__ import annotations

import os

# os-release(5): /etc/os-release first, /usr/lib/os-release where /etc has none.
OS_RELEASE_PATHS = ("/etc/os-release", "/usr/lib/os-release")


def parse_os_release(text):
    """``KEY=value`` lines as {KEY: value}, quotes removed; comments and other lines are skipped."""
    values = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        key = key.strip()
        if sep and key and not key.startswith("#"):
            values[key] = value.strip().strip("'\"")
    return values


def is_debian_family(release):
    """Whether an os-release (parsed) is Debian or one built on it (ID_LIKE names debian: Ubuntu)."""
    return "debian" in {release.get("ID", "")} | set(release.get("ID_LIKE", "").split())


def read_os_release(paths=OS_RELEASE_PATHS):
    """The first os-release file of ``paths`` that exists, parsed; {} when there is none."""
    for path in paths:
        if os.path.exists(path):
            with open(path, encoding="utf-8") as handle:
                return parse_os_release(handle.read())
    return {}
