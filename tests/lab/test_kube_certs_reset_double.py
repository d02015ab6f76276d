"""The kube double's certificates and reset (lab/doubles/kube/README.md, "Certificates and the clock", "kubeadm reset"):
`kubeadm certs check-expiration` and `renew` on the double's certificate clock, the API server refusing a client certificate
that has expired on it, kubelet restarting the API server's static pod when its manifest leaves and comes back, and
`kubeadm reset` on a worker. One cluster on this machine, as in test_kube_doubles.py."""

import re
import shutil
import ssl
import time
import urllib.request

import pytest

from test_kube_doubles import Node, free_port, init_config, join_config, openssl_hash

CERTIFICATES = ["admin.conf", "apiserver", "apiserver-etcd-client", "apiserver-kubelet-client", "controller-manager.conf",
                "etcd-healthcheck-client", "etcd-peer", "etcd-server", "front-proxy-client", "scheduler.conf", "super-admin.conf"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    base = tmp_path_factory.mktemp("certs")
    cp = Node(base, "crt-cp1")
    port = free_port()
    nodes = [cp]
    try:
        cp.run("kubeadm", "init", "--config", cp.config("kubeadm.yaml", init_config(cp, port)), "--skip-token-print")
        yield {"cp": cp, "port": port, "base": base, "nodes": nodes}
    finally:
        for node in nodes:
            node.stop()


def set_clock(node, offset):
    knob = node.root / "etc/kube-double/clock-offset"
    knob.parent.mkdir(parents=True, exist_ok=True)
    knob.write_text(offset + "\n")


def table(output):
    """check-expiration's two tables as {name: row cells}, cells split on runs of 3+ spaces (tabwriter's padding)."""
    rows = {}
    for line in output.splitlines():
        cells = re.split(r"\s{3,}", line.strip())
        if cells and cells[0] not in ("CERTIFICATE", "CERTIFICATE AUTHORITY") and len(cells) >= 4:
            rows[cells[0]] = cells
    return rows


def until(predicate, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def test_check_expiration_prints_kubeadms_tables(cluster):
    cp = cluster["cp"]
    set_clock(cp, "0s")
    output = cp.run("kubeadm", "certs", "check-expiration").stdout
    lines = output.splitlines()
    assert lines[0] == '[check-expiration] Reading configuration from the "kubeadm-config" ConfigMap in namespace "kube-system"...'
    assert lines[3] == "CERTIFICATE                EXPIRES                  RESIDUAL TIME   CERTIFICATE AUTHORITY   EXTERNALLY MANAGED"
    assert re.fullmatch(r"admin\.conf {17}[A-Z][a-z]{2} \d\d, \d{4} \d\d:\d\d UTC   364d {12}ca {22}no {6}", lines[4])
    rows = table(output)
    assert [name for name in rows if name not in ("ca", "etcd-ca", "front-proxy-ca")] == CERTIFICATES
    assert {rows[name][3] for name in ("apiserver-etcd-client", "etcd-peer", "etcd-server", "etcd-healthcheck-client")} == {"etcd-ca"}
    assert rows["ca"][2] == "9y" and rows["front-proxy-ca"][2] == "9y"


def test_the_clock_knob_ages_the_certificates_and_renew_brings_back_a_year(cluster):
    cp = cluster["cp"]
    set_clock(cp, "8160h")  # 340 days
    rows = table(cp.run("kubeadm", "certs", "check-expiration").stdout)
    assert {rows[name][2] for name in CERTIFICATES} == {"24d"}
    assert rows["ca"][2] == "9y"
    renewed = cp.run("kubeadm", "certs", "renew", "all").stdout
    assert "certificate for serving the Kubernetes API renewed" in renewed
    assert "certificate embedded in the kubeconfig file for the super-admin renewed" in renewed
    assert renewed.rstrip().endswith("You must restart the kube-apiserver, kube-controller-manager, kube-scheduler and etcd, "
                                     "so that they can use the new certificates.")
    rows = table(cp.run("kubeadm", "certs", "check-expiration").stdout)
    assert {rows[name][2] for name in CERTIFICATES} == {"364d"}
    # The renewed admin.conf keeps its key and subject and is still a cluster admin's.
    assert "crt-cp1" in cp.run("kubectl", "--kubeconfig", "/etc/kubernetes/admin.conf", "get", "nodes").stdout


def test_the_api_server_refuses_a_client_certificate_expired_on_the_double_clock(cluster):
    cp = cluster["cp"]
    set_clock(cp, "17520h")  # two years: every leaf has expired, the CA has not
    refused = cp.run("kubectl", "--kubeconfig", "/etc/kubernetes/admin.conf", "get", "nodes", check=False)
    assert refused.returncode == 1 and "Unauthorized" in refused.stderr
    rows = table(cp.run("kubeadm", "certs", "check-expiration").stdout)
    assert rows["apiserver"][2] == "<invalid>"
    cp.run("kubeadm", "certs", "renew", "admin.conf")
    assert "crt-cp1" in cp.run("kubectl", "--kubeconfig", "/etc/kubernetes/admin.conf", "get", "nodes").stdout
    set_clock(cp, "0s")


def served_certificate(port):
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/readyz", context=context, timeout=2) as response:
            return response.fp.raw._sock.getpeercert(binary_form=True)  # pylint: disable=protected-access
    except OSError:
        return None


def test_kubelet_restarts_the_api_server_when_its_manifest_leaves_and_comes_back(cluster):
    cp, port = cluster["cp"], cluster["port"]
    before = served_certificate(port)
    assert before is not None
    cp.run("kubeadm", "certs", "renew", "apiserver")
    assert served_certificate(port) == before  # the running static pod keeps the certificate it loaded
    manifest = cp.root / "etc/kubernetes/manifests/kube-apiserver.yaml"
    aside = cp.root / "kube-apiserver.yaml"
    shutil.move(manifest, aside)
    assert until(lambda: served_certificate(port) is None)
    shutil.move(aside, manifest)
    assert until(lambda: served_certificate(port) not in (None, before))


def test_reset_without_force_asks_and_stops(cluster):
    cp = cluster["cp"]
    worker = Node(cluster["base"], "crt-gpu1")
    cluster["nodes"].append(worker)
    token = cp.run("kubeadm", "token", "create", "--kubeconfig", "/etc/kubernetes/admin.conf").stdout.strip()
    ca_hash = openssl_hash(str(cp.root / "etc/kubernetes/pki/ca.crt"))
    worker.run("kubeadm", "join", "--config", worker.config("join.yaml", join_config(worker, cluster["port"], token, ca_hash)))
    refused = worker.run("kubeadm", "reset", check=False)
    assert refused.returncode == 1 and "[reset] Are you sure you want to proceed? [y/N]: " in refused.stdout
    assert (worker.root / "etc/kubernetes/kubelet.conf").is_file()
    cluster["worker"] = worker


def test_reset_undoes_the_join_and_stops_kubelet(cluster):
    worker = cluster["worker"]
    output = worker.run("kubeadm", "reset", "--force").stdout
    assert "[reset] Stopping the kubelet service" in output
    assert "[reset] Deleting contents of directories: [/etc/kubernetes/manifests /var/lib/kubelet /etc/kubernetes/pki]" in output
    assert not (worker.root / "etc/kubernetes/kubelet.conf").exists()
    assert not (worker.root / "etc/kubernetes/pki/ca.crt").exists()
    assert not any((worker.root / "var/lib/kubelet").iterdir())
    # The node can join again (the preflight that refused a second join passes), as a replaced server does.
    cp = cluster["cp"]
    token = cp.run("kubeadm", "token", "create", "--kubeconfig", "/etc/kubernetes/admin.conf").stdout.strip()
    ca_hash = openssl_hash(str(cp.root / "etc/kubernetes/pki/ca.crt"))
    worker.run("kubeadm", "join", "--config", worker.config("join.yaml", join_config(worker, cluster["port"], token, ca_hash)))
    assert (worker.root / "etc/kubernetes/kubelet.conf").is_file()
