"""etcdctl member list, member remove, endpoint health and snapshot save, etcdutl snapshot status and restore in the kube double (the
etcd of the lab's first control plane, lab/doubles/kube/README.md "etcd"), checked against real etcd outputs (fixtures/etcd-3.5.1);
the membership that a control plane's join and reset change; and the disaster the restore recovers from: a control plane whose etcd
data directory was lost serves no API until it is restored."""

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from test_kube_doubles import PYTHON, Node, control_plane_join_config, free_port, import_double, init_config, openssl_hash

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
    # kubeadm's local etcd: --name is the node name, the peer URL on the advertise address.
    assert [(member["name"], member["peerURLs"]) for member in got["members"]] == [("etc-cp1", ["https://127.0.0.1:2380"])]
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


def members(node):
    return json.loads(run(node, "etcdctl", *CERTS, "member", "list", "-w", "json").stdout)


def join_control_plane(cp, node, address):
    """kubeadm join --control-plane of the node at the address, as kube_control_plane makes it join."""
    admin = ["--kubeconfig", "/etc/kubernetes/admin.conf"]
    key = cp.run("kubeadm", "init", "phase", "upload-certs", "--upload-certs", *admin).stdout.strip().splitlines()[-1]
    token = cp.run("kubeadm", "token", "create", *admin, "--ttl", "15m").stdout.strip()
    port = int(yaml.safe_load((cp.root / "etc/kubernetes/admin.conf").read_text())["clusters"][0]["cluster"]["server"].rsplit(":", 1)[1])
    documents = control_plane_join_config(node, port, token, openssl_hash(str(cp.root / "etc/kubernetes/pki/ca.crt")), key, address=address)
    return node.run("kubeadm", "join", "--config", node.config("join.yaml", documents))


def test_a_joined_control_plane_is_a_member_until_its_reset_or_etcdctl_removes_it(cp):
    """kubeadm's join adds the member; its reset removes it, or warns when it cannot, and then `etcdctl member remove` on a control
    plane that stays takes it out, as the etcd documentation replaces a failed member. The cluster ID never changes."""
    before = members(cp)
    second = Node(cp.root.parent, "etc-cp2")
    try:
        joined = join_control_plane(cp, second, "127.0.0.2")
        assert "[etcd] Announced new etcd member joining to the existing etcd cluster" in joined.stdout
        after = members(cp)
        assert after["header"]["cluster_id"] == before["header"]["cluster_id"] and after["header"]["member_id"] == before["header"]["member_id"]
        added = {member["name"]: member for member in after["members"]}["etc-cp2"]
        assert (added["peerURLs"], added["clientURLs"]) == (["https://127.0.0.2:2380"], ["https://127.0.0.2:2379"])
        assert [member["ID"] for member in after["members"]] == sorted(member["ID"] for member in after["members"])  # etcd lists by ID
        assert f"{added['ID']:x}, started, etc-cp2, https://127.0.0.2:2380, https://127.0.0.2:2379, false" in \
            run(cp, "etcdctl", *CERTS, "member", "list").stdout.splitlines()
        # Only the first control plane runs the lab's etcd: the joined one answers as a member that is not up.
        assert run(second, "etcdctl", *CERTS, "member", "list").stderr.endswith("Error: context deadline exceeded\n")

        # Its reset while the API cannot be reached (a dead server's disk, the network gone): kubeadm cannot read its configuration,
        # removes no member, and goes on.
        admin_conf = second.root / "etc/kubernetes/admin.conf"
        config = yaml.safe_load(admin_conf.read_text())
        config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{free_port()}"
        admin_conf.write_text(yaml.safe_dump(config))
        reset = second.run("kubeadm", "reset", "--force")
        assert re.search(r"\] \[reset\] Unable to fetch the kubeadm-config ConfigMap from cluster: .*connection refused\n", reset.stderr)
        assert "] [reset] No kubeadm config, using etcd pod spec to get data directory\n" in reset.stderr
        assert "etc-cp2" in {member["name"] for member in members(cp)["members"]}

        removed = run(cp, "etcdctl", *CERTS, "member", "remove", f"{added['ID']:x}")
        assert removed.returncode == 0, removed.stderr
        assert removed.stdout == f"Member {added['ID']:16x} removed from cluster {before['header']['cluster_id']:16x}\n"
        assert re.fullmatch(r"Member [ 0-9a-f]{16} removed from cluster [ 0-9a-f]{16}\n", (RECORDED / "member-remove.stdout").read_text())
        assert [member["name"] for member in members(cp)["members"]] == ["etc-cp1"]
        assert members(cp)["header"]["cluster_id"] == before["header"]["cluster_id"]

        again = run(cp, "etcdctl", *CERTS, "member", "remove", f"{added['ID']:x}")
        recorded = (RECORDED / "member-remove-unknown.stderr").read_text().splitlines()
        assert (again.returncode, again.stdout, again.stderr.splitlines()[-1]) == (1, "", recorded[-1])
        assert json.loads(again.stderr.splitlines()[0])["error"] == json.loads(recorded[0])["error"]
        last = run(cp, "etcdctl", *CERTS, "member", "remove", f"{before['header']['member_id']:x}")
        assert (last.returncode, last.stderr.splitlines()[-1]) == (1, "Error: etcdserver: re-configuration failed due to not enough started members")
        bad = run(cp, "etcdctl", *CERTS, "member", "remove", "zz")
        assert (bad.returncode, bad.stderr) == (128, 'Error: bad member ID arg (strconv.ParseUint: parsing "zz": invalid syntax), expecting ID in Hex\n')
        assert (run(cp, "etcdctl", *CERTS, "member", "remove").stderr, run(cp, "etcdctl", *CERTS, "member", "remove").returncode) == (
            "Error: member ID is not provided\n", 128)

        # Joined again (the Node deleted, as remove_node.yml does): a new member under the same name, with a new ID; its reset,
        # with the API up, takes it out by itself.
        cp.run("kubectl", "--kubeconfig", "/etc/kubernetes/admin.conf", "delete", "node", "etc-cp2")
        join_control_plane(cp, second, "127.0.0.2")
        rejoined = {member["name"]: member for member in members(cp)["members"]}
        assert set(rejoined) == {"etc-cp1", "etc-cp2"} and rejoined["etc-cp2"]["ID"] != added["ID"]
        reset = second.run("kubeadm", "reset", "--force")
        assert "Failed to remove etcd member" not in reset.stderr
        assert [member["name"] for member in members(cp)["members"]] == ["etc-cp1"]
    finally:
        second.stop()


def test_a_member_removal_that_fails_is_only_kubeadm_s_warning(capsys):
    kubeadm_etcd, core = import_double("kubeadm_etcd"), import_double("core")

    class Unreachable:
        def call(self, *_arguments):
            raise core.Fail('Get "https://10.0.0.1:6443/lab-double/etcd/members": dial tcp 10.0.0.1:6443: connect: connection refused')

    kubeadm_etcd.remove_member(Unreachable())
    assert re.fullmatch(r"W\d{4} [\d:.]+ +\d+ removeetcdmember\.go:65\] \[reset\] Failed to remove etcd member: Get \"https://10\.0\.0\.1:6443/"
                        r"lab-double/etcd/members\": dial tcp 10\.0\.0\.1:6443: connect: connection refused, please manually remove this etcd "
                        r"member using etcdctl\n", capsys.readouterr().err)


def test_restore_refuses_a_data_dir_that_is_not_empty(cp):
    assert run(cp, "etcdctl", *CERTS, "snapshot", "save", "/r.db").returncode == 0
    refused = run(cp, "etcdutl", "snapshot", "restore", "/r.db", "--data-dir", "/var/lib/etcd")
    assert (refused.returncode, refused.stderr) == (1, 'Error: data-dir "/var/lib/etcd" not empty or could not be read\n')


def test_a_lost_data_dir_is_restored_from_a_snapshot(cp):
    """The etcd and kubeadm disaster-recovery procedure on the double: what was created after the snapshot is gone, what was
    there before is back, and the restored member is the only one, its ID computed from its peer URL and the cluster token (the
    same as before: kubeadm's member had the same peer URL and the default token)."""
    if not KUBECTL:
        pytest.skip("the real kubectl is not in .build/bin: run bash tests/tools/fetch_k8s_clients.sh")
    assert kubectl(cp, "create", "configmap", "before", "-n", "default").returncode == 0
    assert run(cp, "etcdctl", *CERTS, "snapshot", "save", "/backup.db").returncode == 0
    assert kubectl(cp, "create", "configmap", "after", "-n", "default").returncode == 0
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
        ["member/lab-membership.json", "member/snap/0000000000000001-0000000000000001.snap", "member/snap/db",
         "member/wal/0000000000000000-0000000000000000.wal"]
    shutil.rmtree(cp.root / "var/lib/etcd")
    shutil.move(cp.root / "var/lib/etcd-restored", cp.root / "var/lib/etcd")
    shutil.move(held, manifests)  # kubelet starts etcd and the API server again
    assert wait_for(lambda: api_answers(cp)[0])
    names = api_answers(cp)[1]
    assert "configmap/before" in names.split() and "configmap/after" not in names.split()
    members = json.loads(run(cp, "etcdctl", *CERTS, "member", "list", "-w", "json").stdout)["members"]
    etcd_member = import_double("etcd_member")
    assert [member["name"] for member in members] == ["etc-cp1"]
    assert members[0]["ID"] == etcd_member.member_id({"peerURLs": ["https://127.0.0.1:2380"]}, "etcd-cluster")
    assert members[0]["peerURLs"] == ["https://127.0.0.1:2380"]


def wait_for(condition, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.5)
    return False
