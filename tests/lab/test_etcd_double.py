"""etcdctl member list, endpoint health and snapshot save, etcdutl snapshot status and restore in the kube double (the etcd of the
lab's first control plane, lab/doubles/kube/README.md "etcd"), checked against real etcd outputs (fixtures/etcd-3.5.1), and the
disaster the restore recovers from: a control plane whose etcd data directory was lost serves no API until it is restored."""

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from test_kube_doubles import PYTHON, Node, free_port, import_double, init_config

RECORDED = Path(__file__).parent / "fixtures" / "etcd-3.5.1"
CERTS = ["--cacert=/etc/kubernetes/pki/etcd/ca.crt", "--cert=/etc/kubernetes/pki/etcd/healthcheck-client.crt",
         "--key=/etc/kubernetes/pki/etcd/healthcheck-client.key", "--endpoints=https://127.0.0.1:2379"]


def run(node, program, *arguments):
    if not (node.bin / program).exists():  # the same zip application, linked under its name as etcd-client installs it
        (node.bin / program).symlink_to(os.readlink(node.bin / "kubeadm"))
    return subprocess.run([PYTHON, str(node.bin / program), *arguments], env=node.env, capture_output=True, text=True, timeout=60, check=False)


KUBECTL = shutil.which("kubectl", path=str(Path(__file__).parents[2] / ".build" / "bin")) or shutil.which("kubectl")


def kubectl(node, *arguments):
    """The real kubectl (make tools puts it in .build/bin) with the node's admin kubeconfig."""
    return subprocess.run([KUBECTL, "--kubeconfig", str(node.root / "etc/kubernetes/admin.conf"), "--request-timeout=5s", *arguments],
                          capture_output=True, text=True, timeout=60, check=False)


def api_answers(node):
    done = kubectl(node, "get", "configmaps", "-n", "default", "-o", "name")
    return done.returncode == 0, done.stdout


@pytest.fixture(scope="module")
def cp(tmp_path_factory):
    base = tmp_path_factory.mktemp("etcd")
    node = Node(base, "etc-cp1")
    try:
        node.run("kubeadm", "init", "--config", node.config("kubeadm.yaml", init_config(node, free_port())), "--skip-token-print")
        yield node
    finally:
        node.stop()


def test_table_layout_is_tablewriters():
    etcd_member = import_double("etcd_member")
    recorded = (RECORDED / "member-list.table").read_text().rstrip("\n")
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in recorded.splitlines() if line.startswith("|")]
    assert etcd_member.table(rows[0], rows[1:]) == recorded
    recorded_status = (RECORDED / "snapshot-status.table").read_text().rstrip("\n")
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in recorded_status.splitlines() if line.startswith("|")]
    assert etcd_member.table(rows[0], rows[1:]) == recorded_status


def test_member_list_and_health_have_the_real_shapes(cp):
    listed = run(cp, "etcdctl", *CERTS, "member", "list", "-w", "json")
    assert listed.returncode == 0, listed.stderr
    recorded = json.loads((RECORDED / "member-list.json").read_text())
    got = json.loads(listed.stdout)
    assert set(got) == set(recorded) and set(got["header"]) == set(recorded["header"])
    assert [set(member) for member in got["members"]] == [set(member) for member in recorded["members"]]
    assert got["members"][0]["name"] == os.uname().nodename  # kubeadm's --name is the node name; the double's, the machine's
    table = run(cp, "etcdctl", *CERTS, "member", "list", "-w", "table").stdout.splitlines()
    header = [cell.strip() for cell in (RECORDED / "member-list.table").read_text().splitlines()[1].strip("|").split("|")]
    assert [cell.strip() for cell in table[1].strip("|").split("|")] == header
    assert re.fullmatch(r"[0-9a-f]{1,16}, started, [^,]+, https://[^,]+:2380, https://[^,]+:2379, false\n",
                        run(cp, "etcdctl", *CERTS, "member", "list").stdout)
    health = run(cp, "etcdctl", *CERTS, "endpoint", "health")
    assert health.returncode == 0
    assert re.fullmatch(r"https://127\.0\.0\.1:2379 is healthy: successfully committed proposal: took = [0-9.]+ms\n", health.stdout)
    assert re.fullmatch(r"127\.0\.0\.1:23791 is healthy: successfully committed proposal: took = [0-9.]+ms\n",
                        (RECORDED / "endpoint-health.stdout").read_text())


def test_snapshot_status_prints_what_etcdutl_prints(cp, tmp_path):
    assert run(cp, "etcdctl", *CERTS, "snapshot", "save", "/s.db").returncode == 0
    status = run(cp, "etcdutl", "snapshot", "status", "/s.db", "-w", "json")
    assert status.returncode == 0, status.stderr
    got = json.loads(status.stdout)
    recorded = json.loads((RECORDED / "snapshot-status.json").read_text())
    assert set(got) == set(recorded) | {"version"} and got["version"] == "3.6.0"  # etcd 3.6 adds the storage version
    assert got["totalSize"] == (cp.root / "s.db").stat().st_size and got["totalKey"] > 0
    assert got["revision"] == int(json.loads((cp.root / "s.db").read_text())["resourceVersion"])
    table = run(cp, "etcdutl", "snapshot", "status", "/s.db", "-w", "table").stdout.splitlines()
    assert [cell.strip() for cell in table[1].strip("|").split("|")] == ["HASH", "REVISION", "TOTAL KEYS", "TOTAL SIZE", "VERSION"]
    assert table[3].split("|")[1].strip() == f"{got['hash']:x}"
    (cp.root / "bad.db").write_text("garbage")
    bad = run(cp, "etcdutl", "snapshot", "status", "/bad.db", "-w", "json")
    assert (bad.returncode, bad.stderr) == (1, "Error: invalid database\n")
    missing = run(cp, "etcdutl", "snapshot", "status", "/missing.db")
    assert (missing.returncode, missing.stderr) == (1, "Error: stat /missing.db: no such file or directory\n")


def test_restore_refuses_a_data_dir_that_is_not_empty(cp):
    assert run(cp, "etcdctl", *CERTS, "snapshot", "save", "/r.db").returncode == 0
    refused = run(cp, "etcdutl", "snapshot", "restore", "/r.db", "--data-dir", "/var/lib/etcd")
    assert (refused.returncode, refused.stderr) == (1, 'Error: data-dir "/var/lib/etcd" not empty or could not be read\n')


def test_a_lost_data_dir_is_restored_from_a_snapshot(cp):
    """The etcd and kubeadm disaster-recovery procedure on the double: what was created after the snapshot is gone, what was
    there before is back, and the restored member is the only one, with a new ID."""
    if not KUBECTL:
        pytest.skip("the real kubectl is not in .build/bin: run bash tests/tools/fetch_k8s_clients.sh")
    assert kubectl(cp, "create", "configmap", "before", "-n", "default").returncode == 0
    assert run(cp, "etcdctl", *CERTS, "snapshot", "save", "/backup.db").returncode == 0
    assert kubectl(cp, "create", "configmap", "after", "-n", "default").returncode == 0
    old_id = json.loads(run(cp, "etcdctl", *CERTS, "member", "list", "-w", "json").stdout)["members"][0]["ID"]
    manifests, held = cp.root / "etc/kubernetes/manifests", cp.root / "etc/kubernetes/manifests.held"
    shutil.move(manifests, held)  # the static pods stop
    shutil.rmtree(cp.root / "var/lib/etcd/member")  # the fault: the member's data is lost
    assert wait_for(lambda: not api_answers(cp)[0])
    down = run(cp, "etcdctl", *CERTS, "endpoint", "health")
    assert down.returncode == 1 and down.stdout.endswith("is unhealthy: failed to commit proposal: context deadline exceeded\n")
    assert down.stderr.endswith("Error: unhealthy cluster\n")
    restored = run(cp, "etcdutl", "snapshot", "restore", "/backup.db", "--data-dir", "/var/lib/etcd-restored", "--name", "etc-cp1",
                   "--initial-cluster", "etc-cp1=https://127.0.0.1:2380", "--initial-advertise-peer-urls", "https://127.0.0.1:2380")
    assert restored.returncode == 0, restored.stderr
    assert restored.stdout == ""
    assert [line.split("\t")[3] for line in restored.stderr.splitlines()] == [
        line.split("\t")[3] for line in (RECORDED / "snapshot-restore.stderr").read_text().splitlines()]
    assert sorted(str(p.relative_to(cp.root / "var/lib/etcd-restored")) for p in (cp.root / "var/lib/etcd-restored").rglob("*") if p.is_file()) == \
        ["member/snap/0000000000000001-0000000000000001.snap", "member/snap/db", "member/wal/0000000000000000-0000000000000000.wal"]
    shutil.rmtree(cp.root / "var/lib/etcd")
    shutil.move(cp.root / "var/lib/etcd-restored", cp.root / "var/lib/etcd")
    shutil.move(held, manifests)  # kubelet starts etcd and the API server again
    assert wait_for(lambda: api_answers(cp)[0])
    names = api_answers(cp)[1]
    assert "configmap/before" in names.split() and "configmap/after" not in names.split()
    members = json.loads(run(cp, "etcdctl", *CERTS, "member", "list", "-w", "json").stdout)["members"]
    assert [member["name"] for member in members] == ["etc-cp1"] and members[0]["ID"] != old_id
    assert members[0]["peerURLs"] == ["https://127.0.0.1:2380"]


def wait_for(condition, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.5)
    return False
