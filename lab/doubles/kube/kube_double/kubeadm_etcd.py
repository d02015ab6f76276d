"""kubeadm's stacked etcd on a control plane that joins or is reset: its etcd member added to the cluster at `kubeadm join
--control-plane` (the control-plane-join etcd phase) and removed at `kubeadm reset` (the remove-etcd-member phase), as
kubeadm's cmd/kubeadm/app/phases/etcd/local.go does it with its etcd client. The lab's cluster keeps one etcd, on the first
control plane; the other control planes reach its membership through the API server's lab path (etcd_member.ETCD_MEMBERS) with
their admin.conf, as kubeadm reaches the members it finds through the API."""

import os
import re

from kube_double.core import Fail, node_address, path, read_file
from kube_double.etcd_member import ETCD_MEMBERS
from kube_double.kubeadm_certs import klog_warning


# etcdHealthyCheckInterval * etcdHealthyCheckRetries in kubeadm's phases/etcd/local.go.
JOIN_WAIT = "40s"


def peer_url(address):
    return f"https://{address}:2380"


def client_url(address):
    return f"https://{address}:2379"


def join_member(admin, name, address):
    """CreateStackedEtcdStaticPodManifestFile: the member added (kubeadm's addMember leaves a member already there with this peer URL
    as it is, so that a join can be run again), its manifest, the wait for the cluster."""
    try:
        members = admin.call("GET", ETCD_MEMBERS)["members"]
        if not any(member["peerURLs"][0] == peer_url(address) for member in members):
            admin.call("POST", ETCD_MEMBERS, {"name": name, "peerURLs": [peer_url(address)], "clientURLs": [client_url(address)]})
    except Fail as error:
        raise Fail(f"error execution phase control-plane-join/etcd: {error}") from None
    print("[etcd] Announced new etcd member joining to the existing etcd cluster")
    print('[etcd] Creating static Pod manifest for "etcd"')
    print(f"[etcd] Waiting for the new etcd member to join the cluster. This can take up to {JOIN_WAIT}")


def advertise_address():
    """This control plane's etcd address: the API endpoint's advertise address (kubeadm's LocalAPIEndpoint, which reset reads from
    the kube-apiserver manifest), else the node's address."""
    manifest = "/etc/kubernetes/manifests/kube-apiserver.yaml"
    if os.path.exists(path(manifest)):
        found = re.search(r"--advertise-address=([^\s\"']+)", read_file(manifest))
        if found:
            return found.group(1)
    return node_address()


def remove_member(admin):
    """RemoveStackedEtcdMemberFromCluster: nothing when this node's is the only member left or is already gone; a failure is only a
    warning (runRemoveETCDMemberPhase), and the reset goes on."""
    address = advertise_address()
    try:
        members = admin.call("GET", ETCD_MEMBERS)["members"]
        if len(members) == 1 and client_url(address) in members[0]["clientURLs"]:
            return
        for member in members:
            if member["peerURLs"][0] == peer_url(address):
                admin.call("DELETE", f"{ETCD_MEMBERS}/{member['ID']:x}")
    except Fail as error:
        klog_warning("removeetcdmember.go:65", f"[reset] Failed to remove etcd member: {error}, please manually remove this etcd member using etcdctl")
