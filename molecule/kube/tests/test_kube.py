"""The molecule-kube cluster after converge, idempotence and the side effect, read back through its own API.

cp2 joined cp1's cluster as a second control plane (HA) and w1 as a worker in converge; w2 joined later in a run limited
to it while w1 was stopped; then w1's rack label left the inventory. Cluster-wide checks run on the control plane; node checks on every node.
"""
import json
import os
import pathlib

import pytest

from lab_files import assert_file_is_exactly

ADMIN = "/etc/kubernetes/admin.conf"
VERSION = "1.35.4"
PINS = "/etc/apt/preferences.d/onprem-gpu-kube_node.pref"
# kube_node holds kubelet, kubeadm and kubectl at the cluster's version: one stanza each, in name order.
PINS_TEXT = "# Written by the onprem.gpu collection (package_source): the versions this role installed and holds.\n" + "\n".join(
    f"Package: {name}\nPin: version {VERSION}-*\nPin-Priority: 1001\n" for name in ("kubeadm", "kubectl", "kubelet"))


@pytest.fixture()
def cluster(host):
    if host.backend.get_hostname() != "molecule-kube-cp1":
        pytest.skip("cluster-wide checks run on the control plane")
    return host


def nodes(host):
    listing = json.loads(host.check_output(f"kubectl --kubeconfig {ADMIN} get nodes --output json"))
    assert listing["kind"] == "List"
    return {node["metadata"]["name"]: node for node in listing["items"]}


def test_both_workers_registered_in_their_pools(cluster):
    found = nodes(cluster)
    assert sorted(found) == ["molecule-kube-cp1", "molecule-kube-cp2", "molecule-kube-w1", "molecule-kube-w2"]
    w1, w2 = found["molecule-kube-w1"], found["molecule-kube-w2"]
    assert w1["metadata"]["labels"]["onprem.gpu/pool"] == "training"
    assert w1["spec"]["taints"] == [{"key": "onprem.gpu/pool", "value": "training", "effect": "NoSchedule"}]
    assert w2["metadata"]["labels"]["onprem.gpu/pool"] == "inference"
    assert w2["spec"]["taints"] == [{"key": "onprem.gpu/pool", "value": "inference", "effect": "NoSchedule"},
                                    {"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
    for node in (w1, w2):
        assert node["status"]["nodeInfo"]["kubeletVersion"] == f"v{VERSION}"
        ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
        assert ready["status"] != "Unknown", f"kubelet of {node['metadata']['name']} does not post its status"


def test_a_label_dropped_from_the_inventory_left_the_node(cluster):
    w1 = nodes(cluster)["molecule-kube-w1"]
    assert "example.com/rack" not in w1["metadata"]["labels"]
    assert w1["metadata"]["annotations"]["onprem.gpu/managed-labels"] == "onprem.gpu/pool"
    # kubelet's own labels are not the collection's to remove.
    assert w1["metadata"]["labels"]["kubernetes.io/hostname"] == "molecule-kube-w1"


def test_both_control_planes_keep_their_role_and_taint(cluster):
    found = nodes(cluster)
    for name in ("molecule-kube-cp1", "molecule-kube-cp2"):
        cp = found[name]
        assert "node-role.kubernetes.io/control-plane" in cp["metadata"]["labels"]
        # The HA join leaves kubeadm's control-plane taint alone (an empty taints list would remove it).
        assert cp["spec"]["taints"] == [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]


def test_the_second_control_plane_has_the_clusters_shared_certificates(host):
    if host.backend.get_hostname() != "molecule-kube-cp2":
        pytest.skip("the certificates of the control plane that joined")
    assert host.file("/etc/kubernetes/pki/ca.key").mode == 0o600
    assert host.file("/etc/kubernetes/manifests/kube-apiserver.yaml").exists
    assert "molecule-kube-cp1" in host.check_output(f"kubectl --kubeconfig {ADMIN} get nodes")


def test_one_token_per_run_that_joined_and_none_for_the_idempotence_run(cluster):
    listing = cluster.check_output(f"kubeadm token list --kubeconfig {ADMIN} --output json")
    # kubeadm prints one JSON object per token, one after the other.
    decoder, tokens, position = json.JSONDecoder(), [], 0
    while listing[position:].strip():
        token, position = decoder.raw_decode(listing, position + len(listing[position:]) - len(listing[position:].lstrip()))
        tokens.append(token)
    joins = [token for token in tokens if token["description"].startswith("onprem.gpu: join")]
    # converge joined cp2 (the control-plane play) and w1 (the workers' play), a token each; the side effect w2;
    # idempotence joined nobody, so made no token.
    assert len(joins) == 3
    assert len(tokens) == 4  # and the one kubeadm init always makes
    for token in tokens:
        assert token["ttl"] in [f"{minutes}m" for minutes in range(16)], token["ttl"]


def test_the_admin_kubeconfig_is_on_the_controller_mode_0600(cluster):
    local = pathlib.Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "artifacts" / "molecule-kube" / "admin.conf"
    assert local.stat().st_mode & 0o777 == 0o600
    # testinfra's content_string comes through a command's output, without the file's last newline.
    assert local.read_text().rstrip("\n") == cluster.file(ADMIN).content_string.rstrip("\n")


def test_node_base(host):
    listing = host.check_output("dpkg-query -W -f='${Package} ${Version}\\n' kubelet kubeadm kubectl")
    assert dict(line.split() for line in listing.splitlines()) == {name: f"{VERSION}-1.1" for name in ("kubelet", "kubeadm", "kubectl")}
    assert {"kubelet", "kubeadm", "kubectl"} <= set(host.check_output("apt-mark showhold").split())
    assert host.file("/etc/modules-load.d/kubernetes.conf").content_string.split("\n")[1:3] == ["overlay", "br_netfilter"]
    assert "net.ipv4.ip_forward=1" in host.file("/etc/sysctl.d/90-kubernetes.conf").content_string.replace(" ", "")
    assert host.file("/proc/sys/net/ipv4/ip_forward").content_string.strip() == "1"
    assert host.check_output("systemctl is-enabled swap.target || true") == "masked"
    assert host.service("kubelet").is_enabled and host.service("kubelet").is_running


def test_the_packages_are_pinned_at_the_clusters_version(host):
    # Every node ran kube_node (cp1, cp2 and w1 in converge, w2 in the side effect), so every node holds and pins the three.
    assert_file_is_exactly(host, PINS, PINS_TEXT)
    # APT reads the file: the installed version has the pin's priority, over the newer one the mirror offers.
    for name in ("kubelet", "kubeadm", "kubectl"):
        assert f" *** {VERSION}-1.1 1001\n" in host.check_output(f"apt-cache policy {name}"), name


def test_joined_nodes_keep_no_token_on_disk(host):
    assert host.file("/etc/kubernetes/kubelet.conf").exists
    assert not host.file("/etc/kubernetes/kubeadm-join.yaml").exists
    assert not host.file("/etc/kubernetes/bootstrap-kubelet.conf").exists
