# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from ansible_collections.onprem.gpu.plugins.module_utils._package_source import desired_files, role_pins_file


def package_source_files(repositories, keys, family="Debian", codename=""):
    """{path: content} of the key and source file of each repository, as the package_source role writes them."""
    return desired_files(family, repositories, keys, codename)


def package_source_pins_file(holds, role):
    """{path, text} of the APT preferences file package_source writes for a role's holds at versions ("name=version")."""
    return role_pins_file(holds, role)


class FilterModule:
    def filters(self):
        return {"package_source_files": package_source_files, "package_source_pins_file": package_source_pins_file}
