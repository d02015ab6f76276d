# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.onprem.gpu.plugins.filter.cluster_addons import kubeconfig
from ansible_collections.onprem.gpu.plugins.filter.kube import kube_controller_kubeconfigs

HOSTVARS = {
    "dc1-cp1": {"inventory_dir": "/srv/inventories/onprem", "datacenter": "dc1"},
    "dc2-cp1": {"inventory_dir": "/srv/inventories/onprem", "datacenter": "dc2", "kube_cluster_name": "gpu-west",
                "kube_control_plane_kubeconfig_dir": "/etc/onprem-gpu/kubeconfigs"},
}


def test_each_datacenter_gets_the_path_its_first_control_plane_host_sets():
    assert kube_controller_kubeconfigs({"dc1": "dc1-cp1", "dc2": "dc2-cp1"}, HOSTVARS) == {
        "dc1": "/srv/inventories/onprem/artifacts/dc1/admin.conf",
        "dc2": "/etc/onprem-gpu/kubeconfigs/gpu-west/admin.conf",
    }


def test_kube_node_and_cluster_addons_find_the_same_kubeconfig():
    paths = kube_controller_kubeconfigs({"dc1": "dc1-cp1", "dc2": "dc2-cp1"}, HOSTVARS)
    for datacenter, host in (("dc1", "dc1-cp1"), ("dc2", "dc2-cp1")):
        assert kubeconfig(HOSTVARS[host], datacenter, "") == paths[datacenter]


def test_a_datacenter_without_a_name_is_refused():
    with pytest.raises(AnsibleFilterError, match="kube_controller_kubeconfigs: a datacenter"):
        kube_controller_kubeconfigs({"": "dc1-cp1"}, {"dc1-cp1": {}})
