# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The restore of one etcd member: refusals before any change, the DR steps in order, the manifests always back."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.onprem.gpu.plugins.module_utils._etcd_restore import RestoreError, manifest_flags, member_settings, restore

STATUS = '{"hash":2947614305,"revision":412,"totalKey":96,"totalSize":65536,"version":"3.6.0"}'
# kubeadm's etcd manifest (the command part), as kubeadm 1.35 writes it.
KUBEADM_ETCD = """spec:
  containers:
  - command:
    - etcd
    - --advertise-client-urls=https://10.0.0.10:2379
    - --data-dir=/var/lib/etcd
    - --initial-advertise-peer-urls=https://10.0.0.10:2380
    - --initial-cluster=cp1=https://10.0.0.10:2380
    - --name=cp1
"""


APISERVER = "    - kube-apiserver\n    - --advertise-address=10.0.0.10\n    - --secure-port=6443\n"


class Node:
    """A control plane: etcd and the API answer while the manifests are in place and the data directory has its member."""

    def __init__(self, tmp_path, data=True):
        self.root = tmp_path
        self.manifests = tmp_path / "manifests"
        self.manifests.mkdir()
        for name in ("etcd.yaml", "kube-apiserver.yaml", "kube-scheduler.yaml"):
            (self.manifests / name).write_text(KUBEADM_ETCD.replace("/var/lib/etcd", str(tmp_path / "etcd")) if name == "etcd.yaml" else APISERVER)
        if data:
            (tmp_path / "etcd" / "member").mkdir(parents=True)
            (tmp_path / "etcd" / "member" / "db").write_text("current")
        (tmp_path / "backups").mkdir()
        self.calls = []

    def serving(self):
        return (self.manifests / "etcd.yaml").exists() and (self.root / "etcd" / "member").exists()

    def run(self, argv):
        self.calls.append(argv)
        if argv[-2:] == ["endpoint", "health"]:
            return (0, "healthy", "") if self.serving() else (1, "", "Error: unhealthy cluster")
        if argv[1:3] == ["snapshot", "status"]:
            return (0, STATUS, "") if Path(argv[3]).read_text() == "snapshot" else (1, "", "Error: invalid database")
        if argv[1:3] == ["snapshot", "restore"]:
            target = Path(argv[4].split("=", 1)[1])
            (target / "member").mkdir(parents=True)
            (target / "member" / "db").write_text("restored")
            return 0, "", ""
        raise AssertionError(argv)

    def ready(self, url, _ca):
        assert url == "https://10.0.0.10:6443/readyz"
        return self.serving()

    def config(self, **extra):
        return {"snapshot": None, "backup_dir": str(self.root / "backups"), "manifest_dir": str(self.manifests),
                "held_dir": str(self.root / "held"), "member_name": "cp1", "peer_url": None, "initial_cluster": None, "force": False,
                "api_url": None, "api_ca": None, "timeout": 10, "endpoints": "https://127.0.0.1:2379",
                "cacert": "ca", "cert": "c", "key": "k", "etcdctl": "etcdctl", "etcdutl": "etcdutl", **extra}

    def snapshot(self, name="etcd-snapshot-20260101T000000Z.db", status=True):
        (self.root / "backups" / name).write_text("snapshot")
        if status:
            (self.root / "backups" / f"{name}.json").write_text(STATUS)
        return str(self.root / "backups" / name)


def do_restore(node, **extra):
    return restore(node.config(**extra), node.run, ready=node.ready, sleep=lambda _s: None, clock=iter(range(1000)).__next__)


def test_manifest_flags_and_member_defaults():
    flags = manifest_flags(KUBEADM_ETCD)
    assert member_settings(flags, "ignored") == {"data_dir": "/var/lib/etcd", "name": "cp1", "peer_url": "https://10.0.0.10:2380",
                                                 "initial_cluster": "cp1=https://10.0.0.10:2380"}
    bare = manifest_flags("    - --advertise-client-urls=https://10.1.0.5:2379\n    - --data-dir=/var/lib/etcd\n")
    assert member_settings(bare, "dc2-cp1")["initial_cluster"] == "dc2-cp1=https://10.1.0.5:2380"
    with pytest.raises(RestoreError, match="give peer_url"):
        member_settings({}, "x")


def test_a_healthy_cluster_is_refused_without_force_and_nothing_moves(tmp_path):
    node = Node(tmp_path)
    node.snapshot()
    with pytest.raises(RestoreError, match=r"etcd answers and the API serves .* \(revision 412\); set the force option"):
        do_restore(node)
    assert sorted(p.name for p in node.manifests.iterdir()) == ["etcd.yaml", "kube-apiserver.yaml", "kube-scheduler.yaml"]
    assert (tmp_path / "etcd" / "member" / "db").read_text() == "current"


def test_refusals_before_any_change(tmp_path):
    node = Node(tmp_path, data=False)
    with pytest.raises(RestoreError, match="There is no verified snapshot in"):
        do_restore(node)
    with pytest.raises(RestoreError, match="does not exist on this node"):
        do_restore(node, snapshot=str(tmp_path / "nope.db"))
    (tmp_path / "bad.db").write_text("garbage")
    with pytest.raises(RestoreError, match="etcdutl does not accept"):
        do_restore(node, snapshot=str(tmp_path / "bad.db"))
    (tmp_path / "held").mkdir()
    (tmp_path / "held" / "etcd.yaml").write_text("x")
    with pytest.raises(RestoreError, match="earlier restore that did not finish"):
        do_restore(node)


def test_a_lost_member_is_restored_from_the_newest_snapshot(tmp_path):
    node = Node(tmp_path, data=False)
    node.snapshot("etcd-snapshot-20260101T000000Z.db")
    newest = node.snapshot("etcd-snapshot-20260102T000000Z.db")
    node.snapshot("etcd-snapshot-20260103T000000Z.db", status=False)  # never verified: not a candidate
    planned = restore(node.config(), node.run, check_mode=True, ready=node.ready)
    assert planned["snapshot"] == newest and not (tmp_path / "held").exists() and len(planned["actions"]) == 4
    result = do_restore(node)
    assert result["snapshot"] == newest and result["status"]["revision"] == 412 and result["cluster_was_healthy"] is False
    assert (tmp_path / "etcd" / "member" / "db").read_text() == "restored"
    assert result["previous_data_dir"] is None or Path(result["previous_data_dir"]).exists()
    assert sorted(p.name for p in node.manifests.iterdir()) == ["etcd.yaml", "kube-apiserver.yaml", "kube-scheduler.yaml"]
    assert not (tmp_path / "held").exists()
    restore_call = next(call for call in node.calls if call[1:3] == ["snapshot", "restore"])
    assert restore_call[3] == newest and "--name=cp1" in restore_call and "--initial-cluster=cp1=https://10.0.0.10:2380" in restore_call


def test_force_rolls_a_healthy_cluster_back_keeping_the_old_data(tmp_path):
    node = Node(tmp_path)
    node.snapshot()
    result = do_restore(node, force=True)
    assert result["cluster_was_healthy"] is True
    assert Path(result["previous_data_dir"], "member", "db").read_text() == "current"
    assert (tmp_path / "etcd" / "member" / "db").read_text() == "restored"


def test_a_failed_restore_puts_the_manifests_back(tmp_path):
    node = Node(tmp_path, data=False)
    node.snapshot()

    def failing(argv):
        if argv[1:3] == ["snapshot", "restore"]:
            return 1, "", "Error: data-dir not empty"
        return node.run(argv)
    with pytest.raises(RestoreError, match="etcdutl snapshot restore failed") as raised:
        restore(node.config(), failing, ready=node.ready, sleep=lambda _s: None, clock=iter(range(1000)).__next__)
    assert raised.value.state == "manifests back"
    assert sorted(p.name for p in node.manifests.iterdir()) == ["etcd.yaml", "kube-apiserver.yaml", "kube-scheduler.yaml"]
