"""The kube double's package (lab/doubles/kube/kube_double, README.md "Modules"): its layering, each module's own functions in
process, and the one executable the lab mirror's build packs it into. The HTTP parts of the API server (api_*, apiserver) are
driven through real clients in test_kube_api_double.py; device_plugin, mig_parted and mig_manager in test_kube_kubelet_gpu.py
and test_kube_mig_manager.py; kubeadm, kubelet and kubectl end to end in test_kube_doubles.py."""

import ast
import datetime
import io
import json
import os
import shutil
import subprocess
import sys
import zipfile

import pytest
import yaml
from test_kube_doubles import DOUBLE_PACKAGE, PYTHON, import_double, load_mirror_build, openssl_hash, write_double

# Each module's layer: a module imports only modules of its own layer or of the layers below it.
LAYERS = {"core": 0, "versions": 0, "pki": 1, "client": 1, "store": 2, "patch": 2, "fields": 2, "selectors": 3, "protobuf": 3,
          "resources": 3, "workloads": 3, "api_controllers": 3, "api_access": 3, "rbac": 3, "api_read": 3, "api_write": 3,
          "api_delete": 3, "apiserver": 3, "daemonsets": 4, "pods": 4, "device_plugin": 5, "mig_parted": 5, "mig_manager": 5,
          "kubelet": 6, "kubeadm_config": 6, "kubeadm_files": 6, "kubeadm": 6, "kubeadm_upgrade": 6, "etcdctl": 6, "etcdutl": 6, "etcd_member": 2,
          "static_pods": 6, "kubeadm_certs": 6, "kubeadm_reset": 6, "kubeadm_etcd": 6, "cli": 7, "__init__": 0, "__main__": 7}
HANDLER_PARTS = ("api_access", "api_read", "api_write", "api_delete", "api_controllers")

core = import_double("core")


def module_imports(module):
    tree = ast.parse((DOUBLE_PACKAGE / f"{module}.py").read_text())
    names = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    names += [node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    return names


# ---------------------------------------------------------------------------------------------------------------
# the package


def test_every_module_has_a_layer_and_stays_under_600_lines():
    modules = {path.stem for path in DOUBLE_PACKAGE.glob("*.py")}
    assert modules == set(LAYERS)
    for module in modules:
        assert len((DOUBLE_PACKAGE / f"{module}.py").read_text().splitlines()) <= 600, module


@pytest.mark.parametrize("module", sorted(LAYERS))
def test_a_module_imports_the_standard_library_yaml_and_lower_layers_only(module):
    for name in module_imports(module):
        top = name.split(".")[0]
        assert top in sys.stdlib_module_names or top in ("yaml", "kube_double"), f"{module} imports {name}"
        if top == "kube_double":
            imported = name.split(".")[1]
            assert LAYERS[imported] <= LAYERS[module], f"{module} (layer {LAYERS[module]}) imports {imported} (layer {LAYERS[imported]})"


def test_the_request_handler_is_its_parts_and_no_part_overrides_another():
    apiserver = import_double("apiserver")
    parts = [getattr(import_double(module), cls) for module, cls in zip(HANDLER_PARTS, ("Access", "Reads", "Writes", "Deletes", "ControllerViews"))]
    assert all(issubclass(apiserver.ApiHandler, part) for part in parts)
    seen = {}
    for part in parts + [apiserver.ApiHandler]:
        for name, value in vars(part).items():
            if callable(value) or isinstance(value, staticmethod):
                assert name not in seen, f"{name} is defined in {seen.get(name)} and {part.__name__}"
                seen[name] = part.__name__


def test_the_zip_application_is_reproducible_and_holds_the_package_only(tmp_path):
    build = load_mirror_build()
    (DOUBLE_PACKAGE / "__pycache__").mkdir(exist_ok=True)  # what importing the package in process leaves: never packed
    first, second = build.zip_application(DOUBLE_PACKAGE), build.zip_application(DOUBLE_PACKAGE)
    assert first == second and first.startswith(b"#!/usr/bin/python3\n")
    names = zipfile.ZipFile(io.BytesIO(first)).namelist()
    assert names[0] == "__main__.py"
    assert sorted(names[1:]) == sorted(f"kube_double/{path.name}" for path in DOUBLE_PACKAGE.glob("*.py"))


def run_as(tmp_path, program, *arguments):
    double = write_double(tmp_path / "kube") if not (tmp_path / "kube").exists() else tmp_path / "kube"
    link = tmp_path / program
    if not link.exists():
        link.symlink_to(double)
    (tmp_path / "version.json").write_text(json.dumps({"version": "1.36.2"}))
    return subprocess.run([PYTHON, str(link), *arguments], env=dict(os.environ, KUBE_DOUBLE_VERSION=str(tmp_path / "version.json")),
                          capture_output=True, text=True, timeout=60, check=False)


def test_the_zip_application_acts_as_the_program_it_is_called_as(tmp_path):
    assert run_as(tmp_path, "kubeadm", "version", "-o", "short").stdout == "v1.36.2\n"
    assert run_as(tmp_path, "kubelet", "--version").stdout == "Kubernetes v1.36.2\n"
    assert run_as(tmp_path, "kubectl", "version").stdout == "Client Version: v1.36.2\n"
    assert run_as(tmp_path, "etcdctl", "version").stdout == "etcdctl version: 3.6.4\nAPI version: 3.6\n"
    unknown = run_as(tmp_path, "kube-apiserver")
    assert (unknown.returncode, unknown.stderr) == (255, "kube double: called as kube-apiserver; install it as kubeadm, kubelet, kubectl, etcdctl or etcdutl\n")
    not_modelled = run_as(tmp_path, "kubectl", "--kubeconfig", "/nonexistent", "get", "pods")
    assert (not_modelled.returncode, not_modelled.stderr) == (1, "error: stat /nonexistent: no such file or directory\n")


@pytest.mark.skipif(not shutil.which("dpkg-deb"), reason="needs dpkg-deb")
def test_the_packages_install_the_zip_application_and_build_the_same_twice(tmp_path):
    build = load_mirror_build()
    (spec,) = [spec for spec in build.load_specs(build.LAB_DIR / "mirror" / "packages") if spec["name"] == "kubectl"]
    debs = [build.build_deb(spec, "1.36.2-1.1", tmp_path / pool).read_bytes() for pool in ("one", "two")]
    assert debs[0] == debs[1]
    subprocess.run(["dpkg-deb", "-x", str(next((tmp_path / "one").rglob("*.deb"))), str(tmp_path / "root")], check=True)
    installed = tmp_path / "root" / "usr" / "bin" / "kubectl"
    assert installed.read_bytes() == build.zip_application(DOUBLE_PACKAGE)
    assert oct(installed.stat().st_mode & 0o777) == "0o755"
    version = subprocess.run([PYTHON, str(installed), "version"], capture_output=True, text=True, check=False,
                             env=dict(os.environ, KUBE_DOUBLE_VERSION=str(tmp_path / "root" / "usr" / "share" / "kube-double" / "kubectl.json")))
    assert version.stdout == "Client Version: v1.36.2\n"


# ---------------------------------------------------------------------------------------------------------------
# core, pki, client


@pytest.mark.parametrize(("text", "seconds"), [("0", 0), ("15m", 900), ("1h30m", 5400), ("24h0m0s", 86400)])
def test_core_parses_go_durations(text, seconds):
    assert core.parse_duration(text) == seconds


def test_core_refuses_a_duration_go_would_refuse():
    with pytest.raises(core.Fail, match='invalid duration "1d"'):
        core.parse_duration("1d")


def test_core_parses_flags_as_cobra_does():
    flags, positional = core.parse_flags(["get", "--output=json", "-n", "kube-system", "--client", "nodes"], {"--output", "-n"}, {"--client"})
    assert (flags, positional) == ({"--output": "json", "-n": "kube-system", "--client": "true"}, ["get", "nodes"])
    with pytest.raises(core.Fail, match="unknown flag: --bogus"):
        core.parse_flags(["--bogus"], set(), set())
    with pytest.raises(core.Fail, match="flag needs an argument: -n"):
        core.parse_flags(["-n"], {"-n"}, set())


def test_core_writes_times_as_the_api_does():
    moment = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
    assert core.rfc3339(moment) == "2026-01-02T03:04:05Z"
    assert core.parse_rfc3339("2026-01-02T03:04:05Z") == moment


@pytest.fixture
def node_root(tmp_path, monkeypatch):
    """The node's files under tmp_path, as KUBE_DOUBLE_ROOT places them."""
    monkeypatch.setattr(core, "ROOT", str(tmp_path))
    return tmp_path


def test_pki_makes_a_ca_whose_hash_is_the_one_openssl_gives(node_root):
    pki = import_double("pki")
    pki.new_ca("/ca", "kubernetes")
    assert oct((node_root / "ca.key").stat().st_mode & 0o777) == "0o600"
    assert pki.ca_hash((node_root / "ca.crt").read_text()) == openssl_hash(str(node_root / "ca.crt"))


def test_pki_kubeconfigs_read_back_with_embedded_data(node_root):
    pki = import_double("pki")
    core.write_file("/admin.conf", pki.kubeconfig("dc1", "https://10.0.0.1:6443", "CA", "admin", "CERT", "KEY"))
    cluster, user = pki.load_kubeconfig("/admin.conf")
    assert cluster["server"] == "https://10.0.0.1:6443" and pki.file_or_data(cluster, "certificate-authority") == "CA"
    assert (pki.file_or_data(user, "client-certificate"), pki.file_or_data(user, "client-key")) == ("CERT", "KEY")
    with pytest.raises(core.Fail, match="stat /missing.conf: no such file or directory"):
        pki.load_kubeconfig("/missing.conf")


def test_client_reports_a_refused_connection_in_go_words():
    client = import_double("client")
    with pytest.raises(core.Fail, match=r'Get "https://127.0.0.1:1/version": dial tcp 127.0.0.1:1: connect: connection refused'):
        client.Client("https://127.0.0.1:1", ca_pem=None).call("GET", "/version")


# ---------------------------------------------------------------------------------------------------------------
# store, patch, fields


def test_store_creates_the_system_namespaces_and_drops_expired_tokens(node_root):
    store = import_double("store")
    expired = store.new_object("Secret", "bootstrap-token-abcdef", "kube-system", type="bootstrap.kubernetes.io/token",
                               data={key: core.b64(value) for key, value in (("token-id", "abcdef"), ("token-secret", "0123456789abcdef"),
                                                                             ("expiration", "2000-01-01T00:00:00Z"))})
    store.write_store({"resourceVersion": 1, "objects": {"secrets": {"kube-system/bootstrap-token-abcdef": expired}}})
    loaded = store.Store()
    assert set(loaded.data["objects"]["namespaces"]) == set(store.SYSTEM_NAMESPACES)
    assert loaded.version() == str(1 + len(store.SYSTEM_NAMESPACES))
    assert store.valid_tokens(loaded) == {} and loaded.data["objects"]["secrets"] == {}
    assert json.loads((node_root / "var/lib/etcd/member/snap/db").read_text())["resourceVersion"] == 5


def test_patch_merges_as_each_patch_type_does():
    patch = import_double("patch")
    live = {"spec": {"containers": [{"name": "a", "image": "a:1", "ports": [{"containerPort": 80, "name": "http"}]}, {"name": "b"}],
                     "finalizers": ["x"], "taints": [{"key": "t"}]}}
    assert patch.merge_patch(live, {"spec": {"taints": None}})["spec"].keys() == {"containers", "finalizers"}
    merged = patch.strategic_merge(live, {"spec": {"containers": [{"name": "a", "ports": [{"containerPort": 80, "protocol": "TCP"}]},
                                                                  {"name": "b", "$patch": "delete"}],
                                                   "$deleteFromPrimitiveList/finalizers": ["x"], "taints": [{"key": "u"}]}})
    assert merged["spec"] == {"containers": [{"name": "a", "image": "a:1", "ports": [{"containerPort": 80, "name": "http", "protocol": "TCP"}]}],
                              "finalizers": [], "taints": [{"key": "u"}]}
    assert patch.json_patch({"a": [1, 2]}, [{"op": "add", "path": "/a/-", "value": 3}, {"op": "move", "from": "/a", "path": "/b"}]) == {"b": [1, 2, 3]}
    with pytest.raises(core.ApiError, match="testing value /a failed"):
        patch.json_patch({"a": 1}, [{"op": "test", "path": "/a", "value": 2}])


def test_fields_round_trip_through_fields_v1_and_leave_identity_out():
    fields = import_double("fields")
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "uid": "u", "labels": {"a": "1"}}, "data": {"k": "v"}}
    paths = set(fields.leaf_paths(obj))
    assert paths == {("metadata", "labels", "a"), ("data", "k")}
    assert fields.paths_of(fields.fields_v1(paths)) == paths
    fields.delete_path(obj, ("metadata", "labels", "a"))
    assert "labels" not in obj["metadata"]


# ---------------------------------------------------------------------------------------------------------------
# the API's parts


@pytest.mark.parametrize(("selector", "labels", "matches"), [
    ("app=a,tier in (x, y)", {"app": "a", "tier": "y"}, True), ("app!=a", {}, True), ("!app", {"app": "a"}, False),
    ("env notin (prod)", {"env": "dev"}, True), ("app", {}, False)])
def test_selectors_match_labels_as_apimachinery_does(selector, labels, matches):
    assert import_double("selectors").label_selector(selector)(labels) is matches


def test_selectors_refuse_a_field_the_kind_cannot_be_selected_by():
    selectors, resources = import_double("selectors"), import_double("resources")
    pods = next(resource for resource in resources.all_resources(type("S", (), {"data": {"objects": {}}})()) if resource.kind == "Pod")
    assert selectors.field_selector("spec.nodeName=n1", pods)({"spec": {"nodeName": "n1"}})
    with pytest.raises(core.ApiError, match="field label not supported: spec.hostname"):
        selectors.field_selector("spec.hostname=n1", pods)


def protobuf_field(number, payload):
    return bytes([number << 3 | 2, len(payload)]) + payload


def test_protobuf_reads_a_configmap_kubectl_create_sends():
    protobuf = import_double("protobuf")
    config_map = protobuf_field(1, protobuf_field(1, b"cm") + protobuf_field(3, b"ns")) + protobuf_field(2, protobuf_field(1, b"k") + protobuf_field(2, b"v"))
    raw = b"k8s\x00" + protobuf_field(1, protobuf_field(1, b"v1") + protobuf_field(2, b"ConfigMap")) + protobuf_field(2, config_map)
    assert protobuf.decode_protobuf(raw) == {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "ns"}, "data": {"k": "v"}}
    with pytest.raises(core.ApiError, match="does not start with the k8s magic"):
        protobuf.decode_protobuf(b"{}")


def test_resources_serve_the_kinds_of_established_crds():
    resources = import_double("resources")
    crd = {"metadata": {"name": "widgets.example.com"}, "spec": {"group": "example.com", "scope": "Namespaced", "names": {
        "plural": "widgets", "kind": "Widget"}, "versions": [{"name": "v1", "served": True, "subresources": {"status": {}}}, {"name": "v0", "served": False}]}}
    store = type("S", (), {"data": {"objects": {"customresourcedefinitions.apiextensions.k8s.io": {"widgets.example.com": crd}}}})()
    (widget,) = [resource for resource in resources.all_resources(store) if resource.kind == "Widget"]
    assert (widget.api_version, widget.key, list(widget.subresources())) == ("example.com/v1", "widgets.example.com", ["status"])
    listed = resources.api_resource_list([widget], "example.com/v1")["resources"]
    assert [entry["name"] for entry in listed] == ["widgets", "widgets/status"]


def test_workloads_schedule_daemon_pods_past_tolerated_taints_only():
    workloads = import_double("workloads")
    node = {"metadata": {"name": "n1", "labels": {"gpu": "yes", "rank": "3"}}, "spec": {"taints": [{"key": "node.kubernetes.io/not-ready",
                                                                                                    "effect": "NoExecute"}]}}
    ds = {"spec": {"template": {"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "rank", "operator": "Gt", "values": ["2"]}], "matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}}}}}
    assert workloads.node_should_run_daemon_pod(node, ds) == (True, True)  # the DaemonSet tolerations cover not-ready
    node["spec"]["taints"].append({"key": "dedicated", "value": "x", "effect": "NoSchedule"})
    assert workloads.node_should_run_daemon_pod(node, ds) == (False, True)
    assert set(workloads.template_hash(ds)) <= set(core.SAFE_ALPHANUMS) and workloads.template_hash(ds) == workloads.template_hash(ds)


def test_api_controllers_report_a_complete_rollout_and_round_budgets_up():
    controllers = import_double("api_controllers")
    status = controllers.deployment_status({"metadata": {"name": "d", "generation": 3, "creationTimestamp": "2026-01-01T00:00:00Z"},
                                            "spec": {"replicas": 0}})
    assert status["observedGeneration"] == 3 and "replicas" not in status
    assert [condition["reason"] for condition in status["conditions"]] == ["MinimumReplicasAvailable", "NewReplicaSetAvailable"]
    assert (controllers.scaled("50%", 3), controllers.scaled(2, 3)) == (2, 2)


@pytest.mark.parametrize(("seconds", "text"), [(59, "59s"), (150, "2m30s"), (600, "10m"), (7260, "121m"), (4 * 3600 + 60, "4h1m"), (30 * 3600, "30h"),
                                               (72 * 3600, "3d")])
def test_api_read_shows_ages_as_kubectl_does(seconds, text):
    assert import_double("api_read").human_duration(seconds) == text


# ---------------------------------------------------------------------------------------------------------------
# controllers


def test_daemonsets_make_the_pod_for_a_node():
    daemonsets = import_double("daemonsets")
    ds = {"metadata": {"name": "plugin", "namespace": "gpu", "uid": "u1", "generation": 2},
          "spec": {"template": {"metadata": {"labels": {"app": "plugin"}}, "spec": {"hostNetwork": True, "containers": [{"name": "c"}]}}}}
    pod = daemonsets.daemon_pod(ds, "n1")
    assert pod["metadata"]["generateName"] == "plugin-" and pod["metadata"]["labels"]["pod-template-generation"] == "2"
    assert pod["metadata"]["ownerReferences"][0]["uid"] == "u1" and pod["spec"]["nodeName"] == "n1"
    assert {"key": "node.kubernetes.io/network-unavailable", "operator": "Exists", "effect": "NoSchedule"} in pod["spec"]["tolerations"]


def test_pods_run_with_an_address_of_the_pod_subnet_and_completed_init_containers():
    pods = import_double("pods")
    init_containers = [{"name": "setup"}, {"name": "sidecar", "restartPolicy": "Always"}]
    pod = {"metadata": {"uid": "u1"}, "spec": {"containers": [{"name": "main"}], "initContainers": init_containers}}
    address = pods.pod_ip(pod, "10.32.0.0/30")
    assert address == "10.32.0.2"  # one address left between the network's first two and its broadcast
    status = pods.running_status(pod, "192.0.2.1", address, "2026-01-01T00:00:00Z")
    assert status["phase"] == "Running" and [c["ready"] for c in status["containerStatuses"]] == [True]
    assert [list(c["state"]) for c in status["initContainerStatuses"]] == [["terminated"], ["running"]]


# ---------------------------------------------------------------------------------------------------------------
# kubelet, kubeadm, cli


def test_kubelet_accepts_only_the_labels_a_kubelet_may_set():
    kubelet = import_double("kubelet")
    assert kubelet.kubelet_may_set("node-role.kubernetes.io/worker") is False
    assert all(kubelet.kubelet_may_set(name) for name in ("nvidia.com/gpu.present", "node.kubernetes.io/instance-type", "kubernetes.io/hostname"))
    assert kubelet.parse_taint("gpu=h100:NoSchedule") == {"key": "gpu", "value": "h100", "effect": "NoSchedule"}
    with pytest.raises(core.Fail, match='invalid taint spec: "gpu"'):
        kubelet.parse_taint("gpu")


@pytest.mark.parametrize(("documents", "message"), [
    ([{"apiVersion": "kubeadm.k8s.io/v1beta3", "kind": "InitConfiguration"}], 'no kind "InitConfiguration" is registered for version'),
    ([{"apiVersion": "kubeadm.k8s.io/v1beta4", "kind": "JoinConfiguration", "tokens": []}], 'unknown field "tokens"'),
    ([{"apiVersion": "kubeadm.k8s.io/v1beta4", "kind": "ClusterConfiguration",
       "networking": {"podSubnet": "10.0.0.0/8", "serviceSubnet": "10.96.0.0/12"}}], "pod subnet overlaps with service subnet")])
def test_kubeadm_config_refuses_what_config_validate_refuses(node_root, documents, message):
    (node_root / "kubeadm.yaml").write_text(yaml.safe_dump_all(documents))
    with pytest.raises(core.Fail, match=message):
        import_double("kubeadm_config").load_config("/kubeadm.yaml")


def test_kubeadm_files_default_taints_and_make_tokens():
    files = import_double("kubeadm_files")
    assert files.registration_taints({}, control_plane=True) == [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]
    assert files.registration_taints({"taints": []}, control_plane=True) == []
    secret = files.token_secret("abcdef.0123456789abcdef", ttl="0")
    data = {key: core.unb64(value) for key, value in secret["data"].items()}
    assert secret["metadata"]["name"] == "bootstrap-token-abcdef" and "expiration" not in data
    assert data["usage-bootstrap-signing"] == data["usage-bootstrap-authentication"] == "true"
    with pytest.raises(core.Fail, match='the bootstrap token "short" was not of the form'):
        files.token_secret("short")


def test_kubeadm_passes_kubelet_the_flags_of_its_drop_in(node_root):
    (node_root / "var/lib/kubelet").mkdir(parents=True)
    (node_root / "var/lib/kubelet/kubeadm-flags.env").write_text('KUBELET_KUBEADM_ARGS="--node-ip=10.0.0.5 --hostname-override=n1"\n')
    assert import_double("kubeadm").kubelet_flags() == ["--config=/var/lib/kubelet/config.yaml", "--kubeconfig=/etc/kubernetes/kubelet.conf",
                                                        "--node-ip=10.0.0.5", "--hostname-override=n1"]


def test_cli_lists_nodes_as_kubectl_get_nodes(capsys):
    stamp = core.rfc3339(core.now() - datetime.timedelta(minutes=5))
    import_double("cli").print_nodes([{"metadata": {"name": "dc1-cp1", "creationTimestamp": stamp, "labels": {"node-role.kubernetes.io/control-plane": ""}},
                                       "status": {"conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": {"kubeletVersion": "v1.35.4"}}}])
    assert capsys.readouterr().out.splitlines() == ["NAME      STATUS   ROLES           AGE   VERSION", "dc1-cp1   Ready    control-plane   5m    v1.35.4"]
