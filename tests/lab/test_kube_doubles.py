"""Tests of the kubeadm, kubelet and kubectl doubles (lab/doubles/kube/README.md): two clusters on this machine.

The double runs as the lab nodes run it: the package lab/doubles/kube/kube_double packed by the lab mirror's build
(lab/mirror/build.py) into one executable zip application, called as kubeadm, kubelet or kubectl.
Each node is a directory (KUBE_DOUBLE_ROOT) holding its /etc/kubernetes and /var/lib/kubelet; kubeadm starts the
kubelet double as a child process instead of through systemd; each control plane serves its API on 127.0.0.1 at
its own port. The worker joins with a token and the CA hash, as the roles make it join.
"""

import importlib
import importlib.util
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys

import pytest
import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]
DOUBLE_PACKAGE = REPO / "lab" / "doubles" / "kube" / "kube_double"
PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
VERSION = "1.35.4"


def load_mirror_build():
    spec = importlib.util.spec_from_file_location("lab_mirror_build", REPO / "lab" / "mirror" / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_double(target):
    """The double as a package installs it: the zip application the lab mirror's build makes of the package."""
    target.write_bytes(load_mirror_build().zip_application(DOUBLE_PACKAGE))
    target.chmod(0o755)
    return target


def import_double(module):
    """A module of the double's package, imported in this process from the source tree (the zip application holds these files)."""
    if str(DOUBLE_PACKAGE.parent) not in sys.path:
        sys.path.insert(0, str(DOUBLE_PACKAGE.parent))
    return importlib.import_module(f"kube_double.{module}")


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Node:
    def __init__(self, base, name):
        self.name = name
        self.root = base / name
        self.root.mkdir()
        bin_dir = base / "bin"
        if not bin_dir.exists():
            bin_dir.mkdir()
            double = write_double(base / "kube")
            for program in ("kubeadm", "kubelet", "kubectl"):
                (bin_dir / program).symlink_to(double)
        self.bin = bin_dir
        # Written once: the running kubelets read it at every heartbeat, and a rewrite in place could be read half-written.
        version_file = base / "version.json"
        if not version_file.exists():
            (base / "version.json.new").write_text(json.dumps({"version": VERSION}))
            os.replace(base / "version.json.new", version_file)
        (self.root / "containerd.sock").touch()
        self.env = dict(os.environ, KUBE_DOUBLE_ROOT=str(self.root), KUBE_DOUBLE_VERSION=str(base / "version.json"),
                        KUBE_DOUBLE_KUBELET="spawn", KUBE_DOUBLE_CRI_SOCKET=str(self.root / "containerd.sock"),
                        KUBE_DOUBLE_HEARTBEAT="1", TMPDIR=str(base))

    def run(self, program, *arguments, check=True):
        result = subprocess.run([PYTHON, str(self.bin / program), *arguments], env=self.env, capture_output=True, text=True,
                                timeout=120, check=False)
        if check:
            assert result.returncode == 0, result.stderr
        return result

    def config(self, name, documents):
        target = self.root / name
        target.write_text(yaml.safe_dump_all(documents))
        return f"/{name}"  # as the node sees it: the double resolves paths under KUBE_DOUBLE_ROOT

    def stop(self):
        pid_file = self.root / "var" / "run" / "kubelet.pid"
        if pid_file.exists():
            try:
                os.killpg(int(pid_file.read_text()), signal.SIGTERM)
            except ProcessLookupError:
                pass


def init_config(node, port, pod_cidr="10.32.0.0/12", service_cidr="10.96.0.0/12", version=VERSION):
    return [
        {"apiVersion": "kubeadm.k8s.io/v1beta4", "kind": "InitConfiguration",
         "bootstrapTokens": [{"ttl": "15m", "usages": ["signing", "authentication"], "groups": ["system:bootstrappers:kubeadm:default-node-token"]}],
         "localAPIEndpoint": {"advertiseAddress": "127.0.0.1", "bindPort": port},
         "nodeRegistration": {"name": node.name, "criSocket": "unix:///run/containerd/containerd.sock"}},
        {"apiVersion": "kubeadm.k8s.io/v1beta4", "kind": "ClusterConfiguration", "clusterName": node.name.split("-")[0],
         "kubernetesVersion": f"v{version}", "controlPlaneEndpoint": f"127.0.0.1:{port}",
         "networking": {"podSubnet": pod_cidr, "serviceSubnet": service_cidr, "dnsDomain": "cluster.local"}},
    ]


def join_config(node, port, token, ca_hash, labels=None, taints=None):
    return [{"apiVersion": "kubeadm.k8s.io/v1beta4", "kind": "JoinConfiguration",
             "discovery": {"bootstrapToken": {"apiServerEndpoint": f"127.0.0.1:{port}", "token": token, "caCertHashes": [ca_hash]}},
             "nodeRegistration": {"name": node.name, "criSocket": "unix:///run/containerd/containerd.sock", "taints": taints or [],
                                  "kubeletExtraArgs": [{"name": "node-labels", "value": ",".join(f"{k}={v}" for k, v in (labels or {}).items())}]}}]


def openssl_hash(ca_file):
    public_key = subprocess.run(["openssl", "x509", "-pubkey", "-noout", "-in", ca_file], capture_output=True, check=True).stdout
    der = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "der"], input=public_key, capture_output=True, check=True).stdout
    import hashlib
    return "sha256:" + hashlib.sha256(der).hexdigest()


@pytest.fixture(scope="module")
def clusters(tmp_path_factory):
    base = tmp_path_factory.mktemp("kube")
    made = {}
    nodes = []
    try:
        for dc in ("dc1", "dc2"):
            cp = Node(base, f"{dc}-cp1")
            nodes.append(cp)
            port = free_port()
            documents = init_config(cp, port)
            if dc == "dc2":
                # An empty list, unlike an absent field, gives a control-plane node no taint at all (kubeadm v1beta4).
                documents[0]["nodeRegistration"]["taints"] = []
            cp.run("kubeadm", "init", "--config", cp.config("kubeadm.yaml", documents), "--skip-token-print")
            made[dc] = {"cp": cp, "port": port, "admin": "/etc/kubernetes/admin.conf",
                        "hash": openssl_hash(str(cp.root / "etc/kubernetes/pki/ca.crt"))}
        made["nodes"] = nodes
        yield made
    finally:
        for node in nodes:
            node.stop()


def kubectl_json(cluster, *arguments):
    return json.loads(cluster["cp"].run("kubectl", "--kubeconfig", cluster["admin"], *arguments, "-o", "json").stdout)


def test_init_writes_what_kubeadm_writes(clusters):
    root = clusters["dc1"]["cp"].root
    for name in ("admin.conf", "super-admin.conf", "kubelet.conf", "controller-manager.conf", "scheduler.conf",
                 "pki/ca.crt", "pki/ca.key", "pki/apiserver.crt", "pki/sa.key", "pki/sa.pub", "pki/front-proxy-ca.crt",
                 "pki/etcd/ca.crt", "manifests/kube-apiserver.yaml", "manifests/etcd.yaml"):
        assert (root / "etc/kubernetes" / name).is_file(), name
    assert oct((root / "etc/kubernetes/admin.conf").stat().st_mode & 0o777) == "0o600"
    ca_text = subprocess.run(["openssl", "x509", "-noout", "-subject", "-ext", "basicConstraints", "-in", str(root / "etc/kubernetes/pki/ca.crt")],
                             capture_output=True, text=True, check=True).stdout
    assert "CN = kubernetes" in ca_text and "CA:TRUE" in ca_text
    kubelet_config = yaml.safe_load((root / "var/lib/kubelet/config.yaml").read_text())
    assert kubelet_config["kind"] == "KubeletConfiguration" and kubelet_config["cgroupDriver"] == "systemd"
    assert kubelet_config["clusterDNS"] == ["10.96.0.10"]
    apiserver = yaml.safe_load((root / "etc/kubernetes/manifests/kube-apiserver.yaml").read_text())
    assert "--service-cluster-ip-range=10.96.0.0/12" in apiserver["spec"]["containers"][0]["command"]


def test_the_control_plane_is_registered_and_marked(clusters):
    nodes = kubectl_json(clusters["dc1"], "get", "nodes")
    assert nodes["kind"] == "List"
    (node,) = nodes["items"]
    assert node["metadata"]["name"] == "dc1-cp1"
    assert node["metadata"]["labels"]["node-role.kubernetes.io/control-plane"] == ""
    assert node["spec"]["taints"] == [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]
    assert node["status"]["nodeInfo"]["kubeletVersion"] == f"v{VERSION}"
    ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False" and "cni plugin not initialized" in ready["message"]


def test_an_empty_taint_list_leaves_the_control_plane_untainted(clusters):
    (node,) = kubectl_json(clusters["dc2"], "get", "nodes")["items"]
    assert node["metadata"]["labels"]["node-role.kubernetes.io/control-plane"] == ""
    assert not node["spec"].get("taints")


@pytest.mark.parametrize("label", ["node-role.kubernetes.io/gpu", "node-restriction.kubernetes.io/pool", "example.k8s.io/team"])
def test_kubelet_exits_on_labels_it_may_not_set(tmp_path, label):
    node = Node(tmp_path, "dc9-gpu1")
    result = node.run("kubelet", "--node-labels", f"onprem.gpu/pool=training,{label}=x,node.kubernetes.io/instance-type=h100", check=False)
    assert result.returncode == 1
    assert f"unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: [{label}]" in result.stderr


def test_the_two_clusters_have_separate_cas(clusters):
    assert clusters["dc1"]["hash"] != clusters["dc2"]["hash"]


def create_token(cluster):
    return cluster["cp"].run("kubeadm", "token", "create", "--kubeconfig", cluster["admin"], "--ttl", "15m").stdout.strip()


def test_a_worker_joins_with_its_labels_and_taints(clusters):
    dc1 = clusters["dc1"]
    worker = Node(dc1["cp"].root.parent, "dc1-gpu1")
    clusters["nodes"].append(worker)
    token = create_token(dc1)
    taint = {"key": "onprem.gpu/pool", "value": "training", "effect": "NoSchedule"}
    clusters["dc1-gpu1"] = worker
    config = worker.config("join.yaml", join_config(worker, dc1["port"], token, dc1["hash"], {"onprem.gpu/pool": "training"}, [taint]))
    worker.run("kubeadm", "join", "--config", config)
    assert (worker.root / "etc/kubernetes/kubelet.conf").is_file()
    assert not (worker.root / "etc/kubernetes/bootstrap-kubelet.conf").exists()
    node = kubectl_json(dc1, "get", "node", "dc1-gpu1")
    assert node["metadata"]["labels"]["onprem.gpu/pool"] == "training"
    assert node["spec"]["taints"] == [taint]
    # The worker's kubelet speaks with its own certificate from the CSR, signed by the cluster CA.
    listed = worker.run("kubectl", "--kubeconfig", "/etc/kubernetes/kubelet.conf", "get", "nodes").stdout
    assert "dc1-gpu1" in listed and "dc1-cp1" in listed
    # A second join on a joined node stops in preflight, as the real kubeadm does.
    again = worker.run("kubeadm", "join", "--config", "/join.yaml", check=False)
    assert again.returncode == 1 and "[ERROR FileAvailable--etc-kubernetes-kubelet.conf]" in again.stderr


def test_a_dc1_worker_is_refused_by_dc2(clusters):
    dc1, dc2 = clusters["dc1"], clusters["dc2"]
    worker = Node(dc1["cp"].root.parent, "dc1-gpu9")
    token = create_token(dc2)
    refused = worker.run("kubeadm", "join", "--config", worker.config("join.yaml", join_config(worker, dc2["port"], token, dc1["hash"])), check=False)
    assert refused.returncode == 1
    assert f'none of the public keys "{dc2["hash"]}" are pinned' in refused.stderr
    assert not (worker.root / "etc/kubernetes/kubelet.conf").exists()


def test_an_unknown_token_is_refused(clusters):
    dc1 = clusters["dc1"]
    worker = Node(dc1["cp"].root.parent, "dc1-gpu8")
    config = worker.config("join.yaml", join_config(worker, dc1["port"], "abcdef.0123456789abcdef", dc1["hash"]))
    refused = worker.run("kubeadm", "join", "--config", config, check=False)
    assert refused.returncode == 1 and 'could not find a JWS signature in the cluster-info ConfigMap for token ID "abcdef"' in refused.stderr


def test_patch_sets_and_removes_labels(clusters):
    dc1 = clusters["dc1"]
    patch = json.dumps({"metadata": {"labels": {"example.com/rack": "r1"}}})
    dc1["cp"].run("kubectl", "--kubeconfig", dc1["admin"], "patch", "node", "dc1-cp1", "--type", "merge", "-p", patch)
    assert kubectl_json(dc1, "get", "node", "dc1-cp1")["metadata"]["labels"]["example.com/rack"] == "r1"
    removal = json.dumps({"metadata": {"labels": {"example.com/rack": None}}})
    dc1["cp"].run("kubectl", "--kubeconfig", dc1["admin"], "patch", "node", "dc1-cp1", "--type", "merge", "-p", removal)
    assert "example.com/rack" not in kubectl_json(dc1, "get", "node", "dc1-cp1")["metadata"]["labels"]


def test_tokens_are_listed_and_secrets_need_an_admin(clusters):
    dc1 = clusters["dc1"]
    listing = dc1["cp"].run("kubeadm", "token", "list", "--kubeconfig", dc1["admin"]).stdout
    assert listing.startswith("TOKEN") and "authentication,signing" in listing
    denied = clusters["dc1-gpu1"].run("kubectl", "--kubeconfig", "/etc/kubernetes/kubelet.conf", "get", "secrets", "-n", "kube-system", check=False)
    assert denied.returncode == 1 and 'User "system:node:dc1-gpu1" cannot list resource "secrets"' in denied.stderr


def control_plane_join_config(node, port, token, ca_hash, certificate_key, taints=None, address="127.0.0.1"):
    """A JoinConfiguration for `kubeadm join` of a second control plane; taints None leaves the field out (nil). The address is its
    etcd member's (https://<address>:2380): each control plane of a cluster has its own, as on real servers (a joined control
    plane serves nothing there)."""
    (document,) = join_config(node, port, token, ca_hash)
    del document["nodeRegistration"]["kubeletExtraArgs"]
    if taints is None:
        del document["nodeRegistration"]["taints"]
    else:
        document["nodeRegistration"]["taints"] = taints
    document["controlPlane"] = {"localAPIEndpoint": {"advertiseAddress": address, "bindPort": free_port()}, "certificateKey": certificate_key}
    return [document]


def etcd_members(cluster):
    """{name: peer URL} of `etcdctl member list -w json` on the cluster's first control plane, where the lab's etcd is."""
    cp = cluster["cp"]
    if not (cp.bin / "etcdctl").exists():  # the same zip application, linked under its name as etcd-client installs it
        (cp.bin / "etcdctl").symlink_to(os.readlink(cp.bin / "kubeadm"))
    listed = json.loads(cp.run("etcdctl", "--endpoints=https://127.0.0.1:2379", "member", "list", "-w", "json").stdout)
    return {member["name"]: member["peerURLs"][0] for member in listed["members"]}


def test_a_second_control_plane_joins_with_the_shared_certificates_and_its_taint(clusters):
    dc1 = clusters["dc1"]
    uploaded = dc1["cp"].run("kubeadm", "init", "phase", "upload-certs", "--upload-certs", "--kubeconfig", dc1["admin"]).stdout
    key = uploaded.strip().splitlines()[-1]
    token = create_token(dc1)
    # A wrong certificate key stops the join before anything is written.
    wrong = Node(dc1["cp"].root.parent, "dc1-cp9")
    refused = wrong.run("kubeadm", "join", "--config", wrong.config("join.yaml", control_plane_join_config(wrong, dc1["port"], token, dc1["hash"], "0" * 64)),
                        check=False)
    assert refused.returncode == 1
    assert ("error execution phase control-plane-prepare/download-certs: error downloading certs: error decoding secret data with provided key: "
            "cipher: message authentication failed") in refused.stderr
    assert not (wrong.root / "etc/kubernetes/pki/ca.key").exists() and not (wrong.root / "etc/kubernetes/kubelet.conf").exists()

    # No taints field: kubeadm gives the control plane its taint, as init does.
    second = Node(dc1["cp"].root.parent, "dc1-cp2")
    clusters["nodes"].append(second)
    joined = second.run("kubeadm", "join", "--config", second.config("join.yaml", control_plane_join_config(
        second, dc1["port"], token, dc1["hash"], key, address="127.0.0.2")))
    assert "a new control plane instance was created" in joined.stdout
    # kubeadm's control-plane-join etcd phase: the node's etcd member added to the cluster, named after the node.
    assert ('[etcd] Announced new etcd member joining to the existing etcd cluster\n[etcd] Creating static Pod manifest for "etcd"\n'
            "[etcd] Waiting for the new etcd member to join the cluster. This can take up to 40s\n[mark-control-plane]") in joined.stdout
    assert etcd_members(dc1) == {"dc1-cp1": "https://127.0.0.1:2380", "dc1-cp2": "https://127.0.0.2:2380"}
    for shared in ("ca.crt", "ca.key", "sa.key", "front-proxy-ca.key", "etcd/ca.key"):
        assert (second.root / "etc/kubernetes/pki" / shared).read_bytes() == (dc1["cp"].root / "etc/kubernetes/pki" / shared).read_bytes()
    assert (second.root / "etc/kubernetes/manifests/kube-apiserver.yaml").is_file() and (second.root / "etc/kubernetes/pki/apiserver.crt").is_file()
    node = kubectl_json(dc1, "get", "node", "dc1-cp2")
    assert node["metadata"]["labels"]["node-role.kubernetes.io/control-plane"] == ""
    assert node["spec"]["taints"] == [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]
    # Its admin.conf reaches the cluster through the control-plane endpoint with the shared CA.
    listed = second.run("kubectl", "--kubeconfig", "/etc/kubernetes/admin.conf", "get", "nodes").stdout
    assert "dc1-cp1" in listed and "dc1-cp2" in listed

    # An empty list is no taint at all (kubeadm v1beta4), which is why the collection leaves the field out.
    third = Node(dc1["cp"].root.parent, "dc1-cp3")
    clusters["nodes"].append(third)
    third.run("kubeadm", "join", "--config", third.config("join.yaml", control_plane_join_config(
        third, dc1["port"], token, dc1["hash"], key, taints=[], address="127.0.0.3")))
    node = kubectl_json(dc1, "get", "node", "dc1-cp3")
    assert node["metadata"]["labels"]["node-role.kubernetes.io/control-plane"] == "" and not node["spec"].get("taints")
    assert set(etcd_members(dc1)) == {"dc1-cp1", "dc1-cp2", "dc1-cp3"}

    # kubeadm reset's remove-etcd-member phase takes the node's member out (silently, as kubeadm prints it at -v=1 only).
    reset = third.run("kubeadm", "reset", "--force")
    assert "[reset] Deleted contents of the etcd data directory: /var/lib/etcd" in reset.stdout and "Failed to remove etcd member" not in reset.stderr
    assert etcd_members(dc1) == {"dc1-cp1": "https://127.0.0.1:2380", "dc1-cp2": "https://127.0.0.2:2380"}


@pytest.mark.parametrize(
    "pod_cidr, service_cidr, version, message",
    [
        pytest.param("10.96.0.0/16", "10.96.0.0/12", VERSION, "pod subnet overlaps with service subnet", id="overlap"),
        pytest.param("10.32.0.0/12", "10.96.0.0/12", "1.34.2", "this version of kubeadm only supports", id="other-minor"),
    ],
)
def test_config_validate_refuses_what_kubeadm_refuses(tmp_path, pod_cidr, service_cidr, version, message):
    node = Node(tmp_path, "dc9-cp1")
    result = node.run("kubeadm", "config", "validate", "--config", node.config("k.yaml", init_config(node, 6443, pod_cidr, service_cidr, version)), check=False)
    assert result.returncode == 1 and message in result.stderr


def test_config_validate_is_strict(tmp_path):
    node = Node(tmp_path, "dc9-cp1")
    documents = init_config(node, 6443)
    documents[1]["podSubnet"] = "10.32.0.0/12"
    result = node.run("kubeadm", "config", "validate", "--config", node.config("k.yaml", documents), check=False)
    assert result.returncode == 1 and 'unknown field "podSubnet"' in result.stderr
    assert node.run("kubeadm", "config", "validate", "--config", node.config("ok.yaml", init_config(node, 6443))).stdout.strip() == "ok"
