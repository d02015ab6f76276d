"""kubeadm upgrade plan, apply and node, etcdctl snapshot save, and the versions a node reports mid-upgrade, in the kube double
(lab/doubles/kube/README.md, "Upgrades"): one cluster of a control plane and a worker on this machine, at 1.35.4, upgraded to
1.36.2 with kubeadm at 1.36.2 while kubelet stays at 1.35.4, as on a node whose kubeadm package was upgraded first."""

import json
import os
import subprocess

import pytest
import yaml
from test_kube_doubles import PYTHON, Node, free_port, import_double, init_config, join_config, openssl_hash


def run_at(node, version, program, *arguments, stdin=None):
    """The program as its package at ``version`` runs it (each package has its own version file)."""
    if not (node.bin / program).exists():  # etcdctl: the same zip application, linked under its name as its package installs it
        (node.bin / program).symlink_to(os.readlink(node.bin / "kubeadm"))
    version_file = node.root / f"{program}-{version}.json"
    version_file.write_text(json.dumps({"version": version}))
    return subprocess.run([PYTHON, str(node.bin / program), *arguments], env=dict(node.env, KUBE_DOUBLE_VERSION=str(version_file)),
                          capture_output=True, text=True, timeout=120, check=False, input=stdin if stdin is not None else "")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    base = tmp_path_factory.mktemp("upgrade")
    cp, worker = Node(base, "up-cp1"), Node(base, "up-w1")
    try:
        port = free_port()
        cp.run("kubeadm", "init", "--config", cp.config("kubeadm.yaml", init_config(cp, port)), "--skip-token-print")
        token = cp.run("kubeadm", "token", "create").stdout.strip()
        ca_hash = openssl_hash(str(cp.root / "etc/kubernetes/pki/ca.crt"))
        worker.run("kubeadm", "join", "--config", worker.config("join.yaml", join_config(worker, port, token, ca_hash)))
        yield {"cp": cp, "worker": worker}
    finally:
        cp.stop()
        worker.stop()


def cluster_version(cp):
    configmap = json.loads(cp.run("kubectl", "--kubeconfig", "/etc/kubernetes/admin.conf", "get", "configmap", "kubeadm-config", "-n", "kube-system",
                                  "-o", "json").stdout)
    return yaml.safe_load(configmap["data"]["ClusterConfiguration"])["kubernetesVersion"]


def manifest_image(cp, component):
    return yaml.safe_load((cp.root / f"etc/kubernetes/manifests/{component}.yaml").read_text())["spec"]["containers"][0]["image"]


def test_plan_names_the_target_and_the_kubelets_to_upgrade(cluster):
    result = run_at(cluster["cp"], "1.36.2", "kubeadm", "upgrade", "plan", "v1.36.2")
    assert result.returncode == 0, result.stderr
    assert "[upgrade/versions] Cluster version: v1.35.4\n[upgrade/versions] kubeadm version: v1.36.2\n" in result.stdout
    assert "[upgrade/versions] Target version: v1.36.2\n" in result.stdout
    lines = result.stdout.splitlines()
    assert ["kubelet", "up-w1", "v1.35.4", "v1.36.2"] in [line.split() for line in lines]
    assert ["kube-apiserver", lines[[line.split()[:1] for line in lines].index(["kube-apiserver"])].split()[1], "v1.35.4", "v1.36.2"] \
        in [line.split() for line in lines]
    assert "\tkubeadm upgrade apply v1.36.2\n" in result.stdout


@pytest.mark.parametrize("kubeadm_version, target, error", [
    ("1.37.0", "v1.37.0", '- Specified version to upgrade to "v1.37.0" is too high; kubeadm can upgrade only 1 minor version at a time'),
    ("1.35.4", "v1.36.2", '- Specified version to upgrade to "v1.36.2" is at least one minor release higher than the kubeadm minor release '
                          "(36 > 35). Such an upgrade is not supported"),
])
def test_apply_refuses_a_skipped_minor_and_an_older_kubeadm_before_any_change(cluster, kubeadm_version, target, error):
    result = run_at(cluster["cp"], kubeadm_version, "kubeadm", "upgrade", "apply", target, "-y")
    assert result.returncode == 1
    assert result.stderr.startswith("[upgrade/version] FATAL: the --version argument is invalid due to these fatal errors:\n\n\t" + error + "\n")
    assert "Please fix the misalignments highlighted above and try upgrading again" in result.stderr
    assert cluster_version(cluster["cp"]) == "v1.35.4"
    assert manifest_image(cluster["cp"], "kube-apiserver") == "registry.k8s.io/kube-apiserver:v1.35.4"


def test_apply_asks_before_it_changes_anything(cluster):
    result = run_at(cluster["cp"], "1.36.2", "kubeadm", "upgrade", "apply", "v1.36.2", stdin="n\n")
    assert result.returncode == 1
    assert "[upgrade] Are you sure you want to proceed? [y/N]: " in result.stdout
    assert result.stderr == "won't proceed; the user didn't answer (Y|y) in order to continue\n"
    assert cluster_version(cluster["cp"]) == "v1.35.4"


def test_the_version_policy_refuses_kubelets_three_minors_behind_unless_forced():
    upgrade = import_double("kubeadm_upgrade")
    mandatory, skippable = upgrade.policy_errors((1, 35, 4), (1, 36, 2), (1, 36, 2), {"a": "v1.36.2", "b": "v1.32.9", "c": "v1.33.0"})
    assert mandatory == []
    assert skippable == ["There are kubelets in this cluster that are too old that have these versions [v1.32.9]"]
    mandatory, skippable = upgrade.policy_errors((1, 35, 4), (1, 34, 0), (1, 35, 4), {})
    assert skippable[0] == 'Specified version to upgrade to "v1.34.0" is lower than the cluster version "v1.35.4". Downgrades are not supported yet'


def test_apply_upgrades_the_control_plane_and_a_rerun_changes_nothing(cluster):
    cp = cluster["cp"]
    result = run_at(cp, "1.36.2", "kubeadm", "upgrade", "apply", "v1.36.2", "-y")
    assert result.returncode == 0, result.stderr
    assert '[upgrade] SUCCESS! A control plane node of your cluster was upgraded to "v1.36.2".' in result.stdout
    assert cluster_version(cp) == "v1.36.2"
    for component in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        assert manifest_image(cp, component) == f"registry.k8s.io/{component}:v1.36.2"
    assert manifest_image(cp, "etcd") == "registry.k8s.io/etcd:3.6.4-0"
    backups = list((cp.root / "etc/kubernetes/tmp").glob("kubeadm-backup-manifests-*/kube-apiserver.yaml"))
    assert [yaml.safe_load(backup.read_text())["spec"]["containers"][0]["image"] for backup in backups] == ["registry.k8s.io/kube-apiserver:v1.35.4"]
    # The API server reports its manifest's version; kubelet, not restarted, still its own.
    served = json.loads(cp.run("kubectl", "--kubeconfig", "/etc/kubernetes/admin.conf", "get", "--raw", "/version").stdout)
    assert served["gitVersion"] == "v1.36.2"
    again = run_at(cp, "1.36.2", "kubeadm", "upgrade", "apply", "v1.36.2", "-y")
    assert again.returncode == 0, again.stderr
    assert "[upgrade/staticpods] Current and new manifests of kube-apiserver are equal, skipping upgrade" in again.stdout


def test_upgrade_node_fails_midway_while_the_fault_knob_is_set_then_succeeds(cluster):
    worker = cluster["worker"]
    fault = worker.root / "etc/kube-double/faults/kubeadm-upgrade-node"
    fault.parent.mkdir(parents=True, exist_ok=True)
    fault.write_text("")
    failed = run_at(worker, "1.36.2", "kubeadm", "upgrade", "node")
    assert failed.returncode == 1
    assert "[upgrade/control-plane] Skipping phase. Not a control plane node." in failed.stdout
    assert failed.stderr.startswith('error execution phase kubelet-config: could not write the kubelet configuration to "/var/lib/kubelet/config.yaml"')
    fault.unlink()
    (worker.root / "var/lib/kubelet/config.yaml").write_text("stale: true\n")
    done = run_at(worker, "1.36.2", "kubeadm", "upgrade", "node")
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith("[upgrade] The configuration for this node was successfully upgraded!\n"
                                "[upgrade] Now you should go ahead and upgrade the kubelet package using your package manager.\n")
    assert yaml.safe_load((worker.root / "var/lib/kubelet/config.yaml").read_text())["kind"] == "KubeletConfiguration"


def test_etcdctl_saves_a_snapshot_on_the_first_control_plane_only(cluster):
    cp, worker = cluster["cp"], cluster["worker"]
    saved = run_at(cp, "1.36.2", "etcdctl", "--endpoints=https://127.0.0.1:2379", "--cacert=/etc/kubernetes/pki/etcd/ca.crt", "snapshot", "save",
                   "/snap.db")
    assert saved.returncode == 0, saved.stderr
    assert saved.stdout == "Snapshot saved at /snap.db\n"
    messages = [json.loads(line)["msg"] for line in saved.stderr.splitlines()]
    assert messages == ["created temporary db file", "opened snapshot stream; downloading", "fetching snapshot", "completed snapshot read; closing",
                        "fetched snapshot", "saved"]
    assert json.loads((cp.root / "snap.db").read_text())["objects"]["configmaps"]["kube-system/kubeadm-config"]
    assert oct(os.stat(cp.root / "snap.db").st_mode & 0o777) == "0o600"
    missing = run_at(cp, "1.36.2", "etcdctl", "--cacert=/nowhere.crt", "snapshot", "save", "/other.db")
    assert (missing.returncode, missing.stderr) == (1, "Error: open /nowhere.crt: no such file or directory\n")
    elsewhere = run_at(worker, "1.36.2", "etcdctl", "snapshot", "save", "/snap.db")
    assert elsewhere.returncode == 5 and elsewhere.stderr.endswith("Error: context deadline exceeded\n")  # etcdctl's ExitInterrupted


def test_kubelet_keeps_the_version_it_started_with(tmp_path, monkeypatch):
    versions = import_double("versions")
    version_file = tmp_path / "kubelet.json"
    version_file.write_text(json.dumps({"version": "1.35.4"}))
    monkeypatch.setenv("KUBE_DOUBLE_VERSION", str(version_file))
    monkeypatch.setattr(versions, "_RUNNING", {})
    assert versions.running_version() == "1.35.4"
    version_file.write_text(json.dumps({"version": "1.36.2"}))  # the package upgraded under the running kubelet
    assert versions.running_version() == "1.35.4"
    assert versions.parse("v1.36.2") == (1, 36, 2) and versions.parse("1.36") is None
