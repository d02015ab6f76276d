# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from ansible_collections.onprem.gpu.plugins.filter.package_source import package_source_pins_file


def test_the_pins_file_of_a_roles_holds_at_versions():
    pins = package_source_pins_file(["kubelet=1.35.4", "nccl-tests=2.19.6-1+cuda13.2", "kubectl"], "kube_node")
    assert pins == {"path": "/etc/apt/preferences.d/onprem-gpu-kube_node.pref", "text": (
        "# Written by the onprem.gpu collection (package_source): the versions this role installed and holds.\n"
        "Package: kubelet\nPin: version 1.35.4-*\nPin-Priority: 1001\n\n"
        "Package: nccl-tests\nPin: version 2.19.6-1+cuda13.2\nPin-Priority: 1001\n")}


def test_holds_without_versions_have_no_file():
    assert package_source_pins_file(["kubelet"], "kube_node") == {"path": "/etc/apt/preferences.d/onprem-gpu-kube_node.pref", "text": None}
