"""Direct apply (cluster_addons_apply=true) of inventories/onprem-dc1 against the lab's Kubernetes API double.

The double (the kube_double package in lab/doubles/kube) runs here as in tests/lab/test_kube_api_double.py: `kubeadm init` of one control
plane whose kubelet is a child process serving the API over HTTPS. The inventory is copied and the admin kubeconfig put
where kube_control_plane fetches it (<inventory>/artifacts/dc1/admin.conf), so the play finds it by default. The
operators' CRDs (Argo CD, Kueue, Network Operator, Prometheus Operator) are stand-ins that accept any fields: the
objects' schemas are checked offline by test_cluster_addons_render.py.
"""

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from local_play import copy_inventory, one_line

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "lab"))
from test_kube_doubles import Node, free_port, init_config  # noqa: E402 - the double's helpers live with its tests

REPO = pathlib.Path(__file__).resolve().parents[2]
KUBECTL = REPO / ".build" / "bin" / "kubectl"
ANSIBLE_PLAYBOOK = pathlib.Path(sys.executable).with_name("ansible-playbook")
MANAGED = "app.kubernetes.io/managed-by=onprem.gpu,onprem.gpu/datacenter=dc1"
# (group, version, kind, plural, scope) of every custom kind the dc1 render holds.
CUSTOM_KINDS = [
    ("argoproj.io", "v1alpha1", "Application", "applications", "Namespaced"),
    ("kueue.x-k8s.io", "v1beta2", "ResourceFlavor", "resourceflavors", "Cluster"),
    ("kueue.x-k8s.io", "v1beta2", "ClusterQueue", "clusterqueues", "Cluster"),
    ("kueue.x-k8s.io", "v1beta2", "LocalQueue", "localqueues", "Namespaced"),
    ("kueue.x-k8s.io", "v1beta2", "WorkloadPriorityClass", "workloadpriorityclasses", "Cluster"),
    ("k8s.cni.cncf.io", "v1", "NetworkAttachmentDefinition", "network-attachment-definitions", "Namespaced"),
    ("mellanox.com", "v1alpha1", "NicClusterPolicy", "nicclusterpolicies", "Cluster"),
    ("monitoring.coreos.com", "v1", "PrometheusRule", "prometheusrules", "Namespaced"),
]
LLM_ONLY = {"cluster_addons_teams": [{"name": "llm", "group": "dc1-llm-researchers", "viewer_group": "dc1-platform",
                                      "namespaces": ["llm", "llm-eval"], "cpu": 512, "memory": "4Ti", "gpus": {"h100-training": 16},
                                      "lending_limits": {"h100-training": 8}}]}

kubernetes = pytest.importorskip("kubernetes")


def crd(group, version, kind, plural, scope):
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": scope, "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
                     "versions": [{"name": version, "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}


def start(base, name, inventory):
    """A control plane of the double named ``name`` (dc1-cp1), its admin kubeconfig where kube_control_plane fetches it."""
    node = Node(base, name)
    node.run("kubeadm", "init", "--config", node.config("kubeadm.yaml", init_config(node, free_port())), "--skip-token-print")
    try:
        kubeconfig = inventory / "artifacts" / name.split("-")[0] / "admin.conf"
        kubeconfig.parent.mkdir(parents=True)
        shutil.copy(node.root / "etc" / "kubernetes" / "admin.conf", kubeconfig)
        home = base / f"home-{name}"
        home.mkdir()
    except BaseException:
        # Its kubelet (the API server) runs already: the caller never sees this node, so it is stopped here.
        node.stop()
        raise
    return node, {"base": base, "inventory": inventory, "kubeconfig": kubeconfig, "env": dict(os.environ, KUBECONFIG=str(kubeconfig), HOME=str(home))}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if not KUBECTL.exists():
        pytest.skip(f"the real kubectl is not at {KUBECTL}: run bash tests/tools/fetch_k8s_clients.sh")
    base = tmp_path_factory.mktemp("addons_apply")
    inventory = base / "onprem-dc1"
    copy_inventory("onprem-dc1", inventory)
    node = None
    try:
        node, made = start(base, "dc1-cp1", inventory)
        yield made
    finally:
        if node:
            node.stop()


def install_operators(cluster):
    """The operators' CRDs and the namespaces of Argo CD and Prometheus, as a cluster running them has them."""
    documents = [crd(*kind) for kind in CUSTOM_KINDS]
    documents += [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}} for name in ("argocd", "monitoring")]
    kubectl(cluster, "apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(documents))
    kubectl(cluster, "wait", "--for=condition=Established", "crd", "--all", "--timeout=30s")


def kubectl(cluster, *arguments, stdin=None, check=True):
    result = subprocess.run([str(KUBECTL), *arguments], env=cluster["env"], capture_output=True, text=True, timeout=120, check=False,
                            input=stdin)
    if check:
        assert result.returncode == 0, result.stderr
    return result


def get(cluster, *arguments):
    """The objects kubectl lists (items), or one object."""
    answer = json.loads(kubectl(cluster, "get", *arguments, "-o", "json").stdout)
    return answer.get("items", answer)


def exists(cluster, *arguments):
    return kubectl(cluster, "get", *arguments, check=False).returncode == 0


def play(cluster, *extra, check=False, render_dir=None):
    """ansible-playbook onprem.gpu.cluster_addons -e cluster_addons_apply=true on the copied inventory, the charts as Argo CD
    Applications (the stand-in CRDs above; the e2e installs them with helm on the lab's clusters)."""
    environment = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    argv = [str(ANSIBLE_PLAYBOOK), "-i", str(cluster["inventory"]), str(REPO / "playbooks" / "cluster_addons.yml"),
            "-e", "cluster_addons_apply=true", "-e", "cluster_addons_chart_installer=argocd", *extra]
    if render_dir:
        argv += ["-e", f"cluster_addons_render_dir={render_dir}"]
    if check:
        argv.append("--check")
    return subprocess.run(argv, cwd=REPO, env=environment, capture_output=True, text=True, timeout=600, check=False)


def recap(result):
    """The localhost line of PLAY RECAP as {ok: n, changed: n, ...}."""
    line = next(line for line in result.stdout.splitlines()[::-1] if line.startswith("localhost"))
    return {key: int(value) for key, value in re.findall(r"(\w+)=(\d+)", line)}


def reported(result):
    """The report task's message: [{name, created, changed, pruned}]."""
    text = result.stdout[result.stdout.index("TASK [onprem.gpu.cluster_addons : Report what was created"):]
    body = text[text.index("{"):text.index("\nPLAY RECAP")]
    return json.loads(body)["msg"]


RENDERED_RESOURCES = ("namespaces", "resourcequotas", "limitranges", "configmaps", "clusterroles", "rolebindings", "networkpolicies",
                      "storageclasses", "resourceflavors", "clusterqueues", "localqueues", "workloadpriorityclasses", "network-attachment-definitions",
                      "nicclusterpolicies", "prometheusrules", "applications")


def labelled(cluster, selector=MANAGED):
    """'Kind namespace/name' of every object of a rendered kind labelled as the collection's for dc1 (one kubectl get of them all)."""
    found = set()
    for item in get(cluster, ",".join(RENDERED_RESOURCES), "-A", "-l", selector):
        namespace = item["metadata"].get("namespace")
        found.add(f"{item['kind']} {namespace + '/' if namespace else ''}{item['metadata']['name']}")
    return found


def test_a_missing_kubeconfig_or_a_silent_api_is_refused_in_one_sentence(cluster, tmp_path):
    result = play(cluster, "-e", f"cluster_addons_kubeconfig={tmp_path}/nowhere.conf")
    assert result.returncode == 2
    assert f"No kubeconfig at {tmp_path}/nowhere.conf: run site.yml (kube_control_plane fetches each cluster's admin kubeconfig there)" \
        in one_line(result.stdout), result.stdout[-3000:]
    silent = tmp_path / "silent.conf"
    config = yaml.safe_load(cluster["kubeconfig"].read_text())
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{free_port()}"
    silent.write_text(yaml.safe_dump(config))
    result = play(cluster, "-e", f"cluster_addons_kubeconfig={silent}")
    assert result.returncode == 2
    assert f"dc1: the Kubernetes API of {silent} does not answer (" in one_line(result.stdout), result.stdout[-3000:]
    assert "so nothing was applied." in one_line(result.stdout)


def test_kinds_the_cluster_does_not_serve_are_refused_before_any_change(cluster, tmp_path):
    result = play(cluster, render_dir=tmp_path / "out")
    assert result.returncode == 2
    assert ("dc1: the cluster does not serve argoproj.io/v1alpha1 Application, k8s.cni.cncf.io/v1 NetworkAttachmentDefinition, "
            "kueue.x-k8s.io/v1beta2 ClusterQueue, kueue.x-k8s.io/v1beta2 LocalQueue, kueue.x-k8s.io/v1beta2 ResourceFlavor, "
            "kueue.x-k8s.io/v1beta2 WorkloadPriorityClass, mellanox.com/v1alpha1 NicClusterPolicy, monitoring.coreos.com/v1 PrometheusRule, "
            "which the render holds: install Argo CD (or set cluster_addons_chart_installer=helm to install the charts from the controller), "
            "the Kueue chart, the NVIDIA Network Operator chart and the Prometheus Operator (kube-prometheus-stack) first, "
            "then apply again.") in one_line(result.stdout), result.stdout[-3000:]
    assert not exists(cluster, "namespace", "llm")
    assert not (tmp_path / "out").exists()


def test_check_mode_reports_what_it_would_create_and_changes_nothing(cluster):
    install_operators(cluster)
    # Objects of kinds the collection renders that are not the collection's.
    kubectl(cluster, "create", "namespace", "scratch")
    others = [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "ops"}, "spec": {"cohortName": "gpu"}},
        {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "team-quota", "namespace": "scratch"},
         "spec": {"hard": {"requests.nvidia.com/gpu": "1"}}},
    ]
    kubectl(cluster, "create", "-f", "-", stdin=yaml.safe_dump_all(others))
    result = play(cluster, check=True)
    assert result.returncode == 0, result.stdout[-4000:]
    (report,) = reported(result)
    assert report["name"] == "dc1" and report["changed"] == [] and report["pruned"] == []
    assert {"Namespace llm", "ResourceQuota llm/team-quota", "ClusterQueue llm", "LocalQueue vision/default"} <= set(report["created"])
    assert labelled(cluster) == set()
    assert not exists(cluster, "namespace", "llm")


def test_apply_creates_the_rendered_objects(cluster, tmp_path):
    result = play(cluster, render_dir=tmp_path / "out")
    assert result.returncode == 0, result.stdout[-4000:]
    (report,) = reported(result)
    # The same objects as `kubectl kustomize` builds from the tree written in the same run, but the app-of-apps.
    built = [document for document in yaml.safe_load_all(kubectl(cluster, "kustomize", str(tmp_path / "out" / "clusters" / "dc1")).stdout)
             if document]
    expected = {f"{document['kind']} {document['metadata']['namespace'] + '/' if document['metadata'].get('namespace') else ''}"
                f"{document['metadata']['name']}" for document in built if document["metadata"]["name"] != "dc1-cluster-addons"}
    assert len(expected) == len(built) - 1 == len(report["created"]) > 40
    assert labelled(cluster) == expected == set(report["created"])
    by_name = {(document["kind"], document["metadata"].get("namespace"), document["metadata"]["name"]): document for document in built}
    quota = get(cluster, "resourcequota", "team-quota", "-n", "llm")
    assert quota["spec"] == by_name[("ResourceQuota", "llm", "team-quota")]["spec"] \
        and int(quota["spec"]["hard"]["requests.nvidia.com/gpu"]) >= 16  # its nominal 16 and what it may borrow
    namespace = get(cluster, "namespace", "llm")
    assert namespace["metadata"]["labels"]["onprem.gpu/team"] == "llm"
    assert namespace["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "onprem.gpu"
    queue = get(cluster, "clusterqueue", "llm", "--show-managed-fields")
    assert queue["spec"] == by_name[("ClusterQueue", None, "llm")]["spec"] and queue["spec"]["cohortName"] == "gpu"
    assert [manager["manager"] for manager in queue["metadata"]["managedFields"]] == ["onprem.gpu"]
    application = get(cluster, "application", "dc1-kueue", "-n", "argocd")
    assert application["spec"]["source"]["targetRevision"] == "0.19.2"
    assert not exists(cluster, "application", "dc1-cluster-addons", "-n", "argocd")


def test_a_second_run_changes_nothing(cluster):
    result = play(cluster)
    assert result.returncode == 0, result.stdout[-4000:]
    assert recap(result)["changed"] == 0, result.stdout[-4000:]
    (report,) = reported(result)
    assert report == {"name": "dc1", "created": [], "changed": [], "pruned": []}


def test_a_removed_team_is_pruned_and_objects_not_labelled_are_left(cluster):
    vision = {"Namespace vision", "ResourceQuota vision/team-quota", "LimitRange vision/team-defaults", "RoleBinding vision/team-member",
              "RoleBinding vision/team-view", "NetworkPolicy vision/default-deny", "NetworkPolicy vision/allow-training", "LocalQueue vision/default",
              "ConfigMap vision/nccl-env", "ClusterQueue vision"}
    before = labelled(cluster)
    assert vision <= before
    checked = play(cluster, "-e", json.dumps(LLM_ONLY), check=True)
    assert checked.returncode == 0, checked.stdout[-4000:]
    (report,) = reported(checked)
    assert vision <= set(report["pruned"]) and report["created"] == [] and report["changed"] == ["PrometheusRule monitoring/onprem-gpu"]
    assert labelled(cluster) == before
    result = play(cluster, "-e", json.dumps(LLM_ONLY))
    assert result.returncode == 0, result.stdout[-4000:]
    (report,) = reported(result)
    after = labelled(cluster)
    assert vision <= set(report["pruned"]) and not vision & after
    assert after == before - set(report["pruned"])
    assert {"Namespace llm", "ClusterQueue llm", "ResourceQuota llm-eval/team-quota"} <= after
    # Same kinds, same names, not labelled: untouched.
    assert get(cluster, "clusterqueue", "ops")["spec"] == {"cohortName": "gpu"}
    assert get(cluster, "resourcequota", "team-quota", "-n", "scratch")["spec"]["hard"] == {"requests.nvidia.com/gpu": "1"}
    again = play(cluster, "-e", json.dumps(LLM_ONLY))
    assert recap(again)["changed"] == 0, again.stdout[-4000:]


def test_an_object_not_labelled_is_never_taken_over(cluster):
    kubectl(cluster, "create", "namespace", "vision")
    result = play(cluster)
    assert result.returncode == 2
    assert ("dc1: Namespace vision exists without the labels app.kubernetes.io/managed-by=onprem.gpu,onprem.gpu/datacenter=dc1, "
            "and direct apply never takes over objects it did not make: delete them or add those labels, then apply again.") \
        in one_line(result.stdout), result.stdout[-3000:]
    assert get(cluster, "namespace", "vision")["metadata"]["labels"] == {"kubernetes.io/metadata.name": "vision"}
    assert not exists(cluster, "clusterqueue", "vision")


@pytest.fixture(scope="module")
def lab_clusters(tmp_path_factory):
    """The lab inventory's two datacenters, each with its own control plane of the double."""
    if not KUBECTL.exists():
        pytest.skip(f"the real kubectl is not at {KUBECTL}: run bash tests/tools/fetch_k8s_clients.sh")
    base = tmp_path_factory.mktemp("addons_apply_lab")
    inventory = base / "lab"
    copy_inventory("lab", inventory)
    nodes, made = [], {}
    try:
        for dc in ("dc1", "dc2"):
            node, made[dc] = start(base, f"{dc}-cp1", inventory)
            nodes.append(node)
            install_operators(made[dc])
        yield made
    finally:
        for node in nodes:
            node.stop()


def test_each_lab_datacenter_gets_its_own_objects_in_its_own_cluster(lab_clusters):
    result = play(lab_clusters["dc1"])
    assert result.returncode == 0, result.stdout[-4000:]
    reports = {report["name"]: report for report in reported(result)}
    assert sorted(reports) == ["dc1", "dc2"]
    for dc, other in (("dc1", "dc2"), ("dc2", "dc1")):
        mine = labelled(lab_clusters[dc], f"app.kubernetes.io/managed-by=onprem.gpu,onprem.gpu/datacenter={dc}")
        assert mine == set(reports[dc]["created"]) and len(mine) > 20
        assert labelled(lab_clusters[dc], f"onprem.gpu/datacenter={other}") == set()
    again = play(lab_clusters["dc1"])
    assert again.returncode == 0 and recap(again)["changed"] == 0, again.stdout[-4000:]
