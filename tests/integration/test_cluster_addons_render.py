"""playbooks/cluster_addons.yml renders every example inventory into trees that real tools accept, offline.

The play runs here (no host is contacted) for onprem-dc1, onprem-dc2 and the lab; then each tree is built with the real
`kubectl kustomize`, every object is validated against the Kubernetes 1.35 schemas (kubernetes-validate) or against the
openAPIV3Schema of the upstream CRD of the pinned release (unknown fields refused), each Application's chart is rendered
with the real `helm template` and its values, whose keys must be the chart's, and the alert rules go through
`promtool check rules` and `promtool test rules` with input series. dc1 and dc2 are compared with golden files.

Tools: helm and kubectl from `make k8s-clients` (.build/bin), promtool from `make prometheus-tools` (Debian's package unpacked into .build/bin); a test
that needs a missing tool is skipped, saying how to get it. Regenerate the golden files after an intended change with
`CLUSTER_ADDONS_UPDATE_GOLDEN=1 python -m pytest tests/integration/test_cluster_addons_render.py -k golden`.
"""
import concurrent.futures
import copy
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile

import json

import jsonschema
import kubernetes_validate
import pytest
import yaml

from local_play import one_line

REPO = pathlib.Path(__file__).resolve().parents[2]
DATA = pathlib.Path(__file__).resolve().parent / "data" / "cluster_addons"
GOLDEN = pathlib.Path(__file__).resolve().parent / "golden" / "cluster_addons"
BIN = REPO / ".build" / "bin"
ANSIBLE_PLAYBOOK = pathlib.Path(sys.executable).with_name("ansible-playbook")
KUBERNETES_VERSION = "1.35.0"
# libyaml's loader: the charts' CRDs (Kueue's Workload CRD is 1.4 MB) take seconds with the pure-Python one.
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
INVENTORIES = {"onprem-dc1": ["dc1"], "onprem-dc2": ["dc2"], "lab": ["dc1", "dc2"]}
TREES = [(inventory, dc) for inventory, dcs in INVENTORIES.items() for dc in dcs]
# The chart archive each Application's chart (by release name) is rendered with; whereabouts' is only on ghcr.io.
CHART_ARCHIVES = {
    "gpu-operator": "gpu-operator-v26.7.0.tgz",
    "kueue": "kueue-0.19.2.tgz",
    "network-operator": "network-operator-26.4.1.tgz",
    "local-path-provisioner": "local-path-provisioner-0.0.37.tgz",
}


def tool(name):
    path = BIN / name if (BIN / name).exists() else shutil.which(name)
    if not path or not pathlib.Path(path).exists():
        how = "make prometheus-tools (Debian's package, unpacked)" if name == "promtool" else "make k8s-clients"
        pytest.skip(f"{name} is not installed: {how}")
    return str(path)


def run(argv, **kwargs):
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False, **kwargs)


def play(inventory, render_dir, *extra, cwd=REPO):
    environment = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    return subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", str(REPO / "inventories" / inventory), str(REPO / "playbooks" / "cluster_addons.yml"),
         "-e", f"cluster_addons_render_dir={render_dir}", *extra],
        cwd=cwd, env=environment, capture_output=True, text=True, timeout=300, check=False,
    )


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """{inventory: render dir}, the three inventories rendered side by side."""
    root = tmp_path_factory.mktemp("cluster_addons")
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(INVENTORIES)) as pool:
        results = {inventory: pool.submit(play, inventory, root / inventory) for inventory in INVENTORIES}
    for inventory, future in results.items():
        result = future.result()
        assert result.returncode == 0, f"{inventory}:\n{result.stdout[-3000:]}{result.stderr[-2000:]}"
    return {inventory: root / inventory for inventory in INVENTORIES}


@pytest.fixture(scope="module")
def built(rendered):
    """{(inventory, dc): [objects]} as `kubectl kustomize` builds each tree."""
    kubectl = tool("kubectl")
    trees = {}
    for inventory, dc in TREES:
        result = run([kubectl, "kustomize", str(rendered[inventory] / "clusters" / dc)])
        assert result.returncode == 0, result.stderr
        trees[(inventory, dc)] = [document for document in yaml.load_all(result.stdout, Loader=LOADER) if document]
    return trees


def _strict(schema):
    """A CRD schema that refuses unknown fields where the API server would prune them (a typo must fail)."""
    if isinstance(schema, dict):
        schema = {key: _strict(value) for key, value in schema.items()}
        if schema.get("type") == "object" and "properties" in schema and "additionalProperties" not in schema \
                and not schema.get("x-kubernetes-preserve-unknown-fields"):
            schema["additionalProperties"] = False
        return schema
    if isinstance(schema, list):
        return [_strict(item) for item in schema]
    return schema


def helm_template(archive, release="t", namespace="default", values=None, *flags):
    helm = tool("helm")
    argv = [helm, "template", release, str(DATA / "charts" / archive), "--namespace", namespace, *flags]
    environment = dict(os.environ, HELM_CACHE_HOME="/nonexistent/cache", HELM_CONFIG_HOME="/nonexistent/config", HELM_DATA_HOME="/nonexistent/data")
    if values is not None:
        argv += ["--values", "-"]
    result = subprocess.run(argv, input=yaml.safe_dump(values) if values is not None else None, capture_output=True, text=True,
                            timeout=120, check=False, env=environment)
    assert result.returncode == 0, f"helm template {archive}: {result.stderr}"
    return [document for document in yaml.load_all(result.stdout, Loader=LOADER) if document]


@pytest.fixture(scope="module")
def crd_schemas():
    """{(apiVersion, kind): validator} from the CRDs of the pinned charts and the PrometheusRule/ServiceMonitor CRDs."""
    documents = [document for path in sorted((DATA / "crds").glob("*.yaml")) for document in yaml.load_all(path.read_text(), Loader=LOADER)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        for objects in pool.map(lambda args: helm_template(*args), [
            ("kueue-0.19.2.tgz",), ("gpu-operator-v26.7.0.tgz", "t", "default", None, "--include-crds"),
            ("network-operator-26.4.1.tgz", "t", "default", None, "--include-crds"), ("argo-cd-10.1.1.tgz",),
        ]):
            documents.extend(objects)
    schemas = {}
    for crd in documents:
        if crd and crd.get("kind") == "CustomResourceDefinition":
            for version in crd["spec"]["versions"]:
                schema = _strict(version["schema"]["openAPIV3Schema"])
                schemas[(f"{crd['spec']['group']}/{version['name']}", crd["spec"]["names"]["kind"])] = jsonschema.Draft7Validator(schema)
    return schemas


_VALIDATED = {}


def validate(document, crd_schemas):
    """Problems of one object against its schema; an object of a kind no schema knows is a problem too."""
    text = json.dumps(document, sort_keys=True)
    if text not in _VALIDATED:
        _VALIDATED[text] = _problems(document, crd_schemas)
    return _VALIDATED[text]


def _problems(document, crd_schemas):
    key = (document["apiVersion"], document["kind"])
    if key in crd_schemas:
        return [f"{document['kind']}/{document['metadata']['name']}: {error.json_path}: {error.message}"
                for error in crd_schemas[key].iter_errors(document)]
    try:
        kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as error:
        return [f"{document['kind']}/{document['metadata']['name']}: {error.message}"]
    except kubernetes_validate.SchemaNotFoundError:
        return [f"{document['kind']}/{document['metadata']['name']}: no schema for {key}"]
    return []


def test_every_object_validates_against_its_schema(built, crd_schemas):
    counts = {}
    for (inventory, dc), objects in built.items():
        problems = [problem for document in objects for problem in validate(document, crd_schemas)]
        assert problems == [], f"{inventory} {dc}"
        counts[f"{inventory}/{dc}"] = len(objects)
    print(f"objects validated: {counts}, {sum(counts.values())} in all")


def test_each_tree_holds_the_platform(built):
    for (inventory, dc), objects in built.items():
        kinds = {document["kind"] for document in objects}
        assert {"Application", "ResourceFlavor", "ClusterQueue", "LocalQueue", "Namespace", "ResourceQuota", "LimitRange", "RoleBinding",
                "NetworkPolicy", "PrometheusRule", "StorageClass", "WorkloadPriorityClass", "NicClusterPolicy", "ConfigMap"} <= kinds, inventory
        applications = {document["metadata"]["name"]: document for document in objects if document["kind"] == "Application"}
        assert f"{dc}-cluster-addons" in applications
        for application in applications.values():
            source = application["spec"]["source"]
            assert source["targetRevision"] and "helm" in source or application["metadata"]["name"].endswith("-cluster-addons")
        namespaces = {document["metadata"]["name"] for document in objects if document["kind"] == "Namespace"}
        local_queues = {document["metadata"]["namespace"] for document in objects if document["kind"] == "LocalQueue"}
        assert namespaces == local_queues and len({document["metadata"]["name"] for document in objects if document["kind"] == "ClusterQueue"}) >= 2


def test_team_namespaces_enforce_pod_security_and_teams_cannot_write_network_policies(built):
    """Pod Security Admission on every team namespace, pinned to the cluster's minor (kube_version), and the team's group bound
    to the collection's edit without NetworkPolicies (plus view), never to Kubernetes' edit."""
    for (inventory, dc), objects in built.items():
        minor = {"dc1": "v1.35", "dc2": "v1.36"}[dc]
        for namespace in (document for document in objects if document["kind"] == "Namespace" and "onprem.gpu/team" in document["metadata"]["labels"]):
            labels = namespace["metadata"]["labels"]
            assert (labels["pod-security.kubernetes.io/enforce"], labels["pod-security.kubernetes.io/enforce-version"]) == ("baseline", minor), inventory
            assert labels["pod-security.kubernetes.io/warn"] == labels["pod-security.kubernetes.io/audit"] == "baseline"
        roles = {document["roleRef"]["name"] for document in objects if document["kind"] == "RoleBinding"}
        assert "onprem-gpu-team-edit" in roles and "edit" not in roles, inventory
        (team_edit,) = [document for document in objects if document["kind"] == "ClusterRole"]
        assert not any("networkpolicies" in rule["resources"] for rule in team_edit["rules"])


def test_rails_with_subnets_get_attachments_outside_the_hosts_addresses(built):
    dc1 = built[("onprem-dc1", "dc1")]
    attachments = [document for document in dc1 if document["kind"] == "NetworkAttachmentDefinition"]
    assert len(attachments) == 8 * 3  # eight rails in each of llm, llm-eval and vision
    config = yaml.safe_load(attachments[0]["spec"]["config"])
    assert (config["master"], config["ipam"]["range_start"], config["ipam"]["range_end"]) == ("ens1np0", "10.99.0.128", "10.99.0.254")
    nccl = next(document for document in dc1 if document["kind"] == "ConfigMap" and document["metadata"]["name"] == "nccl-env")
    assert set(nccl["data"]) >= {"NCCL_IB_HCA", "NCCL_IB_GID_INDEX", "NCCL_IB_TC"}
    assert not [document for document in built[("onprem-dc2", "dc2")] if document["kind"] == "NetworkAttachmentDefinition"]  # InfiniBand


def _key_problems(values, defaults, templates, path=()):
    """Value keys the chart neither declares in values.yaml nor reads in a template (.Values.<path>)."""
    problems = []
    for key, value in values.items():
        here = path + (key,)
        dotted = ".Values." + ".".join(here)
        if isinstance(defaults, dict) and key in defaults:
            if isinstance(value, dict) and isinstance(defaults[key], dict) and defaults[key]:
                problems.extend(_key_problems(value, defaults[key], templates, here))
        elif dotted in templates or f'index .Values "{key}"' in templates:
            continue
        elif not (isinstance(defaults, dict) and not defaults and path):
            problems.append(".".join(here))
    return problems


def _chart_files(archive):
    with tarfile.open(DATA / "charts" / archive) as chart:
        names = chart.getnames()
        values = yaml.safe_load(chart.extractfile(next(name for name in names if name.count("/") == 1 and name.endswith("/values.yaml"))).read())
        templates = "".join(chart.extractfile(name).read().decode() for name in names if "/templates/" in name and chart.getmember(name).isfile())
    return values, templates


def applications(built):
    return [(inventory, dc, document) for (inventory, dc), objects in built.items() for document in objects
            if document["kind"] == "Application" and "helm" in document["spec"]["source"]]


def test_chart_values_are_keys_of_the_pinned_charts(built):
    charts = {release: _chart_files(archive) for release, archive in CHART_ARCHIVES.items()}
    charts["whereabouts"] = (yaml.safe_load((DATA / "whereabouts-chart-values.yaml").read_text()), "")
    for inventory, dc, application in applications(built):
        helm = application["spec"]["source"]["helm"]
        defaults, templates = charts[helm["releaseName"]]
        assert _key_problems(helm["valuesObject"], defaults, templates) == [], f"{inventory} {dc} {helm['releaseName']}"


@pytest.fixture(scope="module")
def templated(built):
    """{(inventory, dc, release): [objects]}: each Application's pinned chart through `helm template` with its values."""
    jobs = []
    for inventory, dc, application in applications(built):
        source = application["spec"]["source"]
        release = source["helm"]["releaseName"]
        if release not in CHART_ARCHIVES:
            continue
        assert CHART_ARCHIVES[release].endswith(f"-{source['targetRevision'].lstrip('v')}.tgz") or source["targetRevision"] in CHART_ARCHIVES[release]
        jobs.append((inventory, dc, release, application["spec"]["destination"]["namespace"], source["helm"]["valuesObject"]))
    # Datacenters with the same values for a chart share one render.
    unique = {json.dumps(job[2:], sort_keys=True): job[2:] for job in jobs}
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        outputs = dict(zip(unique, pool.map(lambda job: helm_template(CHART_ARCHIVES[job[0]], *job), unique.values())))
    print(f"helm template runs: {len(outputs)}, objects: {sum(len(objects) for objects in outputs.values())}")
    return {(inventory, dc, release): outputs[json.dumps([release, namespace, values], sort_keys=True)]
            for inventory, dc, release, namespace, values in jobs}


def test_helm_template_of_each_pinned_chart_with_the_rendered_values(templated, crd_schemas):
    for (inventory, dc, release), objects in templated.items():
        # The charts' own CRDs are upstream's, the same whatever the values: the objects the values shape are checked.
        problems = [problem for document in objects if document["kind"] != "CustomResourceDefinition" for problem in validate(document, crd_schemas)]
        assert problems == [], f"{inventory} {dc} {release}"
        if release == "gpu-operator":
            policy = next(document["spec"] for document in objects if document["kind"] == "ClusterPolicy")
            assert (policy["driver"]["enabled"], policy["toolkit"]["enabled"], policy["mig"]["strategy"], policy["migManager"]["enabled"]) == \
                (False, False, "mixed", False)
            assert policy["cdi"]["enabled"] is True and policy["dcgmExporter"]["serviceMonitor"]["enabled"] is True
            assert policy["nodeStatusExporter"]["enabled"] is True and policy["dcgmExporter"]["config"]["name"] == "dcgm-metrics"
            metrics = next(document for document in objects if document["kind"] == "ConfigMap" and document["metadata"]["name"] == "dcgm-metrics")
            assert "DCGM_FI_PROF_SM_ACTIVE" in metrics["data"]["dcgm-metrics.csv"]
        if release == "kueue":
            config = next(document for document in objects if document["kind"] == "ConfigMap" and "controller_manager_config.yaml" in document.get("data", {}))
            manager = yaml.safe_load(config["data"]["controller_manager_config.yaml"])
            assert manager["manageJobsWithoutQueueName"] is True and manager["resources"]["excludeResourcePrefixes"] == ["rdma/"]
        if release == "local-path-provisioner":
            config = next(document for document in objects if document["kind"] == "ConfigMap")
            node_paths = yaml.safe_load(config["data"]["config.json"])["nodePathMap"]
            assert node_paths[0] == {"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": []}
            assert all(entry["paths"] == ["/raid/local-path"] for entry in node_paths[1:]) and len(node_paths) > 1


WORKLOAD_KINDS = ("Deployment", "DaemonSet", "StatefulSet")


def _argument(argv, flag):
    """The values given to ``flag`` in an argv (``--flag value`` or ``--flag=value``)."""
    return [value for position, value in enumerate(argv[1:], 1) if argv[position - 1] == flag] + \
        [argument.split("=", 1)[1] for argument in argv if argument.startswith(flag + "=")]


def needed_names(objects, namespace=None):
    """(kind of name, name) the objects rely on something else to serve: a StorageClass's provisioner, a RuntimeClass's
    handler, an extended resource a queue or an attachment hands out, a ConfigMap a ClusterPolicy reads (in the operator's
    namespace, ``namespace``)."""
    needed = set()
    for document in objects:
        kind, spec = document["kind"], document.get("spec") or {}
        if kind == "StorageClass":
            needed.add(("provisioner", document["provisioner"]))
        elif kind == "RuntimeClass":
            needed.add(("runtime handler", document["handler"]))
        elif kind == "ClusterQueue":
            needed |= {("resource", resource) for group in spec["resourceGroups"] for resource in group["coveredResources"]
                       if resource not in ("cpu", "memory")}
        elif kind == "NetworkAttachmentDefinition":
            needed.add(("resource", document["metadata"]["annotations"]["k8s.v1.cni.cncf.io/resourceName"]))
        elif kind == "ClusterPolicy":
            for component in ("devicePlugin", "dcgmExporter", "migManager"):
                config = (spec.get(component) or {}).get("config") or {}
                if config.get("name"):
                    needed.add(("ConfigMap", f"{namespace}/{config['name']}"))
                    if config.get("default"):
                        needed.add(("ConfigMap key", f"{namespace}/{config['name']}/{config['default']}"))
    return needed


def served_names(objects, namespace):
    """(kind of name, name) what the objects run serves: provisioners (--provisioner-name), runtime handlers, ConfigMaps, the
    GPU Operator's device plugin resources (nvidia.com/gpu; nvidia.com/mig-<profile> under the mixed strategy, kept as a
    prefix) and the RDMA shared device plugin's (its NicClusterPolicy's configList)."""
    served = set()
    for document in objects:
        kind, spec = document["kind"], document.get("spec") or {}
        if kind in WORKLOAD_KINDS:
            for container in spec["template"]["spec"].get("containers", []):
                argv = list(container.get("command") or []) + list(container.get("args") or [])
                served |= {("provisioner", name) for name in _argument(argv, "--provisioner-name")}
        elif kind == "RuntimeClass":
            served.add(("runtime handler", document["handler"]))
        elif kind == "ConfigMap":
            where = f"{document['metadata'].get('namespace') or namespace}/{document['metadata']['name']}"
            served.add(("ConfigMap", where))
            served |= {("ConfigMap key", f"{where}/{key}") for key in document.get("data") or {}}
        elif kind == "ClusterPolicy" and (spec.get("devicePlugin") or {}).get("enabled", True):
            served.add(("resource", "nvidia.com/gpu"))
            if spec["mig"]["strategy"] == "mixed":
                served.add(("resource prefix", "nvidia.com/mig-"))
        elif kind == "NicClusterPolicy" and spec.get("rdmaSharedDevicePlugin"):
            served |= {("resource", f"{entry['resourcePrefix']}/{entry['resourceName']}")
                       for entry in json.loads(spec["rdmaSharedDevicePlugin"]["config"])["configList"]}
    return served


def test_every_name_the_tree_relies_on_is_served_by_its_charts(built, templated):
    """A name nobody serves fails silently at run time (a PVC that never binds, a queue whose GPUs never appear): each
    name the tree and the charts' own objects rely on is served by the charts as `helm template` renders them."""
    checked = 0
    for (inventory, dc), objects in built.items():
        charts = {release: chart for (tree_inventory, tree_dc, release), chart in templated.items() if (tree_inventory, tree_dc) == (inventory, dc)}
        namespaces = {application["spec"]["source"]["helm"]["releaseName"]: application["spec"]["destination"]["namespace"]
                      for tree_inventory, tree_dc, application in applications(built) if (tree_inventory, tree_dc) == (inventory, dc)}
        assert set(charts) >= {"gpu-operator", "local-path-provisioner"}, f"{inventory} {dc}"
        served = served_names(objects, None).union(*(served_names(chart, namespaces[release]) for release, chart in charts.items()))
        needed = needed_names(objects).union(*(needed_names(chart, namespaces[release]) for release, chart in charts.items()))
        assert ("provisioner", "rancher.io/local-path") in needed and any(what == "ConfigMap" for what, _name in needed)
        prefixes = [name for what, name in served if what == "resource prefix"]
        missing = sorted((what, name) for what, name in needed - served if not (what == "resource" and name.startswith(tuple(prefixes))))
        assert missing == [], f"{inventory} {dc}: nothing the charts run serves these"
        checked += len(needed)
    print(f"names checked: {checked}")


def rules_files(built, tmp_path, strip_annotations=False):
    files = {}
    for (inventory, dc), objects in built.items():
        rule = copy.deepcopy(next(document for document in objects if document["kind"] == "PrometheusRule"))
        if strip_annotations:
            for group in rule["spec"]["groups"]:
                for item in group["rules"]:
                    item.pop("annotations", None)
        path = tmp_path / f"{inventory}-{dc}.rules.yaml"
        path.write_text(yaml.safe_dump(rule["spec"]))
        files[(inventory, dc)] = path
    return files


def test_promtool_checks_the_rules(built, tmp_path):
    promtool = tool("promtool")
    for key, path in rules_files(built, tmp_path).items():
        result = run([promtool, "check", "rules", str(path)])
        assert result.returncode == 0, f"{key}: {result.stdout}{result.stderr}"


def series(labels, values):
    return {"series": "{" + ", ".join(f'{key}="{value}"' for key, value in labels.items()) + "}", "values": values}


def named(name, labels, values):
    entry = series(labels, values)
    entry["series"] = name + entry["series"]
    return entry


# The GPU series as dcgm-exporter writes them and a ServiceMonitor scrapes them. prometheus-operator gives every series of a
# target its namespace, service, pod, container, endpoint, job and instance (prometheus-operator's ServiceMonitor
# relabelling); dcgm-exporter adds pod, namespace and container only to a device a pod holds
# (NVIDIA/dcgm-exporter internal/pkg/transformation/kubernetes.go). With honorLabels: true (the render's) the exporter's win;
# with false they become exported_pod, exported_namespace, exported_container. The node label is Hostname up to
# dcgm-exporter 4.5.3-4.8.2 and hostname after NVIDIA/dcgm-exporter PR #655 (internal/pkg/rendermetrics/render_metrics.go).
def target(node, honour):
    return {"instance": f"{node}:9400", "job": "nvidia-dcgm-exporter", "namespace": "gpu-operator", "pod": f"nvidia-dcgm-exporter-{node}",
            "container": "nvidia-dcgm-exporter", "service": "nvidia-dcgm-exporter", "endpoint": "gpu-metrics", "honour": honour}


def gpu_series(name, node, node_label, honour, device, workload, values):
    labels = {key: value for key, value in target(node, honour).items() if key != "honour"}
    labels.update({node_label: node, "UUID": f"GPU-{node}-{device['gpu']}", "modelName": "NVIDIA H100 80GB HBM3"}, **device)
    if workload:
        pod_labels = {"namespace": workload[0], "pod": workload[1], "container": "main"}
        labels.update(pod_labels if honour else {"exported_" + key: value for key, value in pod_labels.items()})
    return named(name, labels, values)


# dc1-h100-01 (Hostname, honorLabels): GPU 0 held idle by llm/train-0, GPU 1 free; dc1-h100-02 (hostname, honorLabels false):
# GPU 0 busy, GPU 2 held idle by llm/train-2, GPU 5 free; dc1-h100-03 (MIG, honorLabels): instance 7 held idle by
# vision/serve-0 without a framebuffer metric (dcgm-exporter issue #512), instance 8 free with the ~11 MiB a fresh MIG
# instance reports. XIDs: an old 79 on dc1-h100-01 (the gauge keeps it, dcgm-exporter issue #500), a new 79 on dc1-h100-02,
# a new application XID 13 on dc1-h100-03, and a 79 cleared by an exporter restart on dc1-h100-02.
ALERT_SERIES = [
    named("up", {key: value for key, value in target(node, True).items() if key != "honour"}, "1x60")
    for node in ("dc1-h100-01", "dc1-h100-02", "dc1-h100-03")
] + [
    gpu_series("DCGM_FI_DEV_FB_USED", "dc1-h100-01", "Hostname", True, {"gpu": "0"}, ("llm", "train-0"), "40000x60"),
    gpu_series("DCGM_FI_PROF_SM_ACTIVE", "dc1-h100-01", "Hostname", True, {"gpu": "0"}, ("llm", "train-0"), "0.02x60"),
    gpu_series("DCGM_FI_DEV_FB_USED", "dc1-h100-01", "Hostname", True, {"gpu": "1"}, None, "0x60"),
    gpu_series("DCGM_FI_PROF_SM_ACTIVE", "dc1-h100-01", "Hostname", True, {"gpu": "1"}, None, "0x60"),
    gpu_series("DCGM_FI_DEV_FB_USED", "dc1-h100-02", "hostname", False, {"gpu": "0"}, ("llm", "train-1"), "40000x60"),
    gpu_series("DCGM_FI_PROF_SM_ACTIVE", "dc1-h100-02", "hostname", False, {"gpu": "0"}, ("llm", "train-1"), "0.9x60"),
    gpu_series("DCGM_FI_PROF_SM_ACTIVE", "dc1-h100-02", "hostname", False, {"gpu": "2"}, ("llm", "train-2"), "0.01x60"),
    gpu_series("DCGM_FI_PROF_SM_ACTIVE", "dc1-h100-02", "hostname", False, {"gpu": "5"}, None, "0x60"),
    gpu_series("DCGM_FI_PROF_SM_ACTIVE", "dc1-h100-03", "Hostname", True, {"gpu": "6", "GPU_I_ID": "7", "GPU_I_PROFILE": "1g.10gb"},
               ("vision", "serve-0"), "0.01x60"),
    gpu_series("DCGM_FI_DEV_FB_USED", "dc1-h100-03", "Hostname", True, {"gpu": "6", "GPU_I_ID": "8", "GPU_I_PROFILE": "1g.10gb"},
               None, "11x60"),
    gpu_series("DCGM_FI_PROF_SM_ACTIVE", "dc1-h100-03", "Hostname", True, {"gpu": "6", "GPU_I_ID": "8", "GPU_I_PROFILE": "1g.10gb"},
               None, "0x60"),
    gpu_series("DCGM_FI_DEV_XID_ERRORS", "dc1-h100-01", "Hostname", True, {"gpu": "0"}, None, "0x10 79x50"),
    gpu_series("DCGM_FI_DEV_XID_ERRORS", "dc1-h100-02", "hostname", False, {"gpu": "3"}, None, "0x40 79x20"),
    gpu_series("DCGM_FI_DEV_XID_ERRORS", "dc1-h100-02", "hostname", False, {"gpu": "4"}, None, "79x40 0x20"),
    gpu_series("DCGM_FI_DEV_XID_ERRORS", "dc1-h100-03", "Hostname", True, {"gpu": "6"}, None, "0x42 13x18"),
    named("kueue_pending_workloads", {"cluster_queue": "llm", "status": "active", "replica_role": "standalone"}, "15x60"),
    named("kueue_pending_workloads", {"cluster_queue": "llm", "status": "inadmissible", "replica_role": "standalone"}, "40x60"),
    named("kueue_pending_workloads", {"cluster_queue": "vision", "status": "active", "replica_role": "standalone"}, "3x60"),
    named("kube_node_status_allocatable", {"node": "dc1-h100-01", "resource": "nvidia_com_gpu", "unit": "integer"}, "7x60"),
    named("kube_node_status_allocatable", {"node": "dc1-h100-02", "resource": "nvidia_com_gpu", "unit": "integer"}, "8x60"),
    named("kube_node_status_allocatable", {"node": "dc1-h100-03", "resource": "nvidia_com_gpu", "unit": "integer"}, "4x60"),
    named("kube_node_status_allocatable", {"node": "dc1-h100-03", "resource": "nvidia_com_mig_3g_40gb", "unit": "integer"}, "4x60"),
    named("node_uname_info", {"instance": "10.10.1.11:9100", "nodename": "dc1-h100-01"}, "1x60"),
    named("node_uname_info", {"instance": "10.10.1.12:9100", "nodename": "dc1-h100-02"}, "1x60"),
    named("node_uname_info", {"instance": "10.10.1.13:9100", "nodename": "dc1-h100-03"}, "1x60"),
    named("node_filesystem_size_bytes", {"instance": "10.10.1.11:9100", "mountpoint": "/raid", "fstype": "xfs"}, "1e13x60"),
    named("node_filesystem_size_bytes", {"instance": "10.10.1.12:9100", "mountpoint": "/", "fstype": "ext4"}, "1e11x60"),
    named("node_filesystem_size_bytes", {"instance": "10.10.1.13:9100", "mountpoint": "/raid", "fstype": "xfs"}, "1e13x60"),
]
EXPECTED_ALERTS = {
    # Free GPUs and free MIG instances never: they have a pod label (the exporter's own), and memory used.
    "GPUAllocatedButIdle": [{"severity": "warning", "hostname": "dc1-h100-01"}, {"severity": "warning", "hostname": "dc1-h100-02"},
                            {"severity": "warning", "hostname": "dc1-h100-03"}],
    # vision alerts from one idle GPU (its idle_gpus_alert), llm from two (the default).
    "TeamGPUsIdle": [{"severity": "warning", "team": "llm"}, {"severity": "warning", "team": "vision"}],
    "KueuePendingWorkloads": [{"severity": "warning", "cluster_queue": "llm"}],
    # Only the XID of the last 10 minutes; an application XID is a warning.
    "GPUXidError": [{"severity": "critical", "hostname": "dc1-h100-02", "gpu": "3"}],
    "GPUXidApplicationError": [{"severity": "warning", "hostname": "dc1-h100-03", "gpu": "6"}],
    "GPUMissingFromNode": [{"severity": "critical", "node": "dc1-h100-01", "resource": "nvidia_com_gpu"},
                           {"severity": "critical", "node": "dc1-h100-03", "resource": "nvidia_com_mig_1g_10gb"}],
    "NVMeCacheMissing": [{"severity": "critical", "nodename": "dc1-h100-02", "mountpoint": "/raid"}],
}


def test_promtool_fires_the_alerts_on_input_series(built, tmp_path):
    promtool = tool("promtool")
    rules = rules_files({key: value for key, value in built.items() if key == ("onprem-dc1", "dc1")}, tmp_path, strip_annotations=True)
    tests = tmp_path / "alerts-test.yaml"
    tests.write_text(yaml.safe_dump({
        "rule_files": [str(rules[("onprem-dc1", "dc1")])],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": ALERT_SERIES,
            "alert_rule_test": [{"eval_time": "45m", "alertname": name, "exp_alerts": [{"exp_labels": labels} for labels in expected]}
                                for name, expected in EXPECTED_ALERTS.items()],
            "promql_expr_test": [{
                "expr": "onprem_gpu:gpu_idle_allocated", "eval_time": "45m",
                "exp_samples": [
                    {"labels": 'onprem_gpu:gpu_idle_allocated{hostname="dc1-h100-01", gpu="0", namespace="llm", pod="train-0"}', "value": 0.02},
                    {"labels": 'onprem_gpu:gpu_idle_allocated{hostname="dc1-h100-02", gpu="2", namespace="llm", pod="train-2"}', "value": 0.01},
                    {"labels": 'onprem_gpu:gpu_idle_allocated{GPU_I_ID="7", GPU_I_PROFILE="1g.10gb", hostname="dc1-h100-03", gpu="6", '
                               'namespace="vision", pod="serve-0"}', "value": 0.01},
                ],
            }],
        }],
    }))
    result = run([promtool, "test", "rules", str(tests)])
    assert result.returncode == 0, result.stdout + result.stderr


def tree_text(tree):
    """A rendered tree as one text: each file under a line naming it (one golden file per datacenter, reviewable as a diff)."""
    return "".join(f"=== {path.relative_to(tree)} ===\n{path.read_text()}" for path in sorted(tree.rglob("*")) if path.is_file())


@pytest.mark.parametrize("inventory, dc", [("onprem-dc1", "dc1"), ("onprem-dc2", "dc2")])
def test_golden(rendered, inventory, dc):
    produced = tree_text(rendered[inventory] / "clusters" / dc)
    golden = GOLDEN / f"{inventory}.{dc}.txt"
    if os.environ.get("CLUSTER_ADDONS_UPDATE_GOLDEN"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(produced)
    assert produced == golden.read_text(), f"the rendered tree differs from {golden.name} (regenerate: see this module's docstring)"


BAD_RUNS = [
    pytest.param(
        # Direct apply without the cluster's kubeconfig (test_cluster_addons_apply.py applies to the lab's API double).
        ["-e", "cluster_addons_apply=true"],
        f"No kubeconfig at {REPO}/inventories/onprem-dc2/artifacts/dc2/admin.conf: run site.yml (kube_control_plane fetches each "
        "cluster's admin kubeconfig there) or point cluster_addons_kubeconfig at it.",
        id="direct-apply-without-kubeconfig",
    ),
    pytest.param(
        ["-e", yaml.safe_dump({"cluster_addons_teams": [
            {"name": "a", "namespaces": ["a"], "gpus": {"a100-training": 6}}, {"name": "b", "namespaces": ["b"], "gpus": {"a100-training": 6}}]},
            default_flow_style=True).strip()],
        "dc2: The teams' nominal quotas in a100-training add up to 12 nvidia.com/gpu but dc2 has 8 (dc2-a100-01: 8 GPUs): "
        "lower them or set cluster_addons_overcommit.",
        id="quota-above-capacity",
    ),
    # A raw "invalid literal for int()" and "dictionary update sequence element" before (#30).
    pytest.param(["-e", json.dumps({"node_gpu_count": "eight"})],
                 "dc2: node_gpu_count of dc2-a100-01 must be a whole number of 0 or more, not 'eight'.", id="gpu-count-eight"),
    pytest.param(["-e", json.dumps({"kube_node_labels": ["onprem.gpu/pool=training"]})],
                 "dc2: kube_node_labels of dc2-a100-01 must be a mapping of label names to values, e.g. {onprem.gpu/pool: training}, "
                 "not list ['onprem.gpu/pool=training'].", id="labels-a-list"),
] + [
    # A name such as . or .. put clusters/<datacenter> over the other datacenters' trees, and pruned them; "dc1\n" passed a
    # $-anchored match.
    pytest.param(
        ["-e", json.dumps({"datacenter": name})],
        f"The inventory variable datacenter is {name!r} on dc2-a100-01 and 2 other hosts, which is not a DNS label (lower-case letters, "
        "digits and '-', at most 63, starting and ending with a letter or digit), so it cannot name the directory clusters/<datacenter>/.",
        id=f"datacenter-{name!r}",
    ) for name in (".", "..", "dc1\n", "DC1")
]


@pytest.mark.parametrize("extra, sentence", BAD_RUNS)
def test_the_play_refuses_before_writing(tmp_path, extra, sentence):
    result = play("onprem-dc2", tmp_path / "out", *extra)
    assert result.returncode != 0
    assert sentence in one_line(result.stdout), result.stdout[-3000:]
    assert not (tmp_path / "out").exists()


def test_a_relative_render_dir_is_relative_to_where_the_play_runs(tmp_path):
    """The docs' own example, -e cluster_addons_render_dir=../gpu-clusters: not relative to playbooks/ (a module's working
    directory), where the tree would land inside the checkout or the installed collection."""
    (tmp_path / "checkout").mkdir()
    result = play("onprem-dc2", "../gpu-clusters", cwd=tmp_path / "checkout")
    assert result.returncode == 0, result.stdout[-3000:]
    assert (tmp_path / "gpu-clusters" / "clusters" / "dc2" / "kustomization.yaml").is_file()
    assert not (REPO / "gpu-clusters").exists()


def test_an_unwritable_render_dir_is_one_sentence(tmp_path):
    (tmp_path / "out").write_text("a file, not a directory\n")
    result = play("onprem-dc2", tmp_path / "out")
    assert result.returncode != 0
    assert f"{tmp_path}/out is not a directory, so nothing can be written under it." in one_line(result.stdout), result.stdout[-3000:]
    assert "Traceback" not in result.stdout and "apiVersion" not in result.stdout  # no plan (its files) printed


# Continuous health (roles/node_health): the series as kube-state-metrics exports a Node's taints and conditions
# (kube_node_spec_taint: node, key, value, effect; kube_node_status_condition: node, condition, status true/false/unknown) and
# as the taint controller writes its node-exporter textfile (onprem_gpu_health_circuit_breaker_open{cluster}).
KSM = {"job": "kube-state-metrics", "instance": "10.10.1.5:8080"}
HEALTH_SERIES = [
    named("kube_node_spec_taint", dict(KSM, node="dc1-h100-01", key="onprem.gpu/unhealthy", value="xid", effect="NoSchedule"), "1x30"),
    # An operator's own taint of another key, and a taint that went after 3 minutes: neither fires.
    named("kube_node_spec_taint", dict(KSM, node="dc1-h100-02", key="maintenance", value="disk", effect="NoSchedule"), "1x30"),
    named("kube_node_spec_taint", dict(KSM, node="dc1-h100-03", key="onprem.gpu/unhealthy", value="xid", effect="NoSchedule"),
          "1x3 _x27"),
    # Unknown for 20 minutes on dc1-h100-02; Unknown for 10 minutes (under health_unknown_for) on dc1-h100-03.
    named("kube_node_status_condition", dict(KSM, node="dc1-h100-02", condition="GPUHealthy", status="unknown"), "1x30"),
    named("kube_node_status_condition", dict(KSM, node="dc1-h100-02", condition="GPUHealthy", status="true"), "0x30"),
    named("kube_node_status_condition", dict(KSM, node="dc1-h100-03", condition="GPUHealthy", status="unknown"), "0x15 1x15"),
    named("kube_node_status_condition", dict(KSM, node="dc1-h100-01", condition="Ready", status="unknown"), "1x30"),
    # All GPU nodes of dc1 failing at once: the controller held taints back (breaker open); dc2's is closed.
    named("onprem_gpu_health_circuit_breaker_open", {"cluster": "dc1", "instance": "10.10.1.5:9100", "job": "node-exporter"}, "0x5 1x25"),
    named("onprem_gpu_health_circuit_breaker_open", {"cluster": "dc2", "instance": "10.20.1.5:9100", "job": "node-exporter"}, "0x30"),
]


def test_promtool_fires_the_continuous_health_alerts(built, tmp_path):
    promtool = tool("promtool")
    rules = rules_files({key: value for key, value in built.items() if key == ("onprem-dc1", "dc1")}, tmp_path, strip_annotations=True)
    expected = {
        "GPUNodeTaintedUnhealthy": [{"severity": "warning", "node": "dc1-h100-01", "value": "xid"}],
        "GPUHealthUnknown": [{"severity": "warning", "node": "dc1-h100-02"}],
        "GPUHealthCircuitBreakerOpen": [{"severity": "critical", "cluster": "dc1"}],
    }
    tests = tmp_path / "health-alerts-test.yaml"
    tests.write_text(yaml.safe_dump({
        "rule_files": [str(rules[("onprem-dc1", "dc1")])],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": HEALTH_SERIES,
            "alert_rule_test": [{"eval_time": "25m", "alertname": name, "exp_alerts": [{"exp_labels": labels} for labels in alerts]}
                                for name, alerts in expected.items()]
            # Before the breaker opened, and before anything lasted its "for": nothing fires.
            + [{"eval_time": "4m", "alertname": name, "exp_alerts": []} for name in expected],
        }],
    }))
    result = run([promtool, "test", "rules", str(tests)])
    assert result.returncode == 0, result.stdout + result.stderr


# Scheduled etcd snapshots (roles/etcd_backup): the control plane's textfile metrics, interval one hour. dc1's timer stopped
# making verified snapshots (its newest stays at time 0, as on a node that never made one); dc2's makes one every hour.
ETCD_SERIES = [
    series({"__name__": "onprem_etcd_backup_last_success_timestamp_seconds", "cluster": "dc1", "instance": "10.10.1.5:9100"}, "0x200"),
    series({"__name__": "onprem_etcd_backup_interval_seconds", "cluster": "dc1", "instance": "10.10.1.5:9100"}, "3600x200"),
    series({"__name__": "onprem_etcd_backup_last_success_timestamp_seconds", "cluster": "dc2", "instance": "10.20.1.5:9100"},
           "0x59 3600x60 7200x60 10800x20"),
    series({"__name__": "onprem_etcd_backup_interval_seconds", "cluster": "dc2", "instance": "10.20.1.5:9100"}, "3600x200"),
    # dc2 copies its snapshots off the node, until its copies stop at 3600 (an S3 outage); dc1 copies nothing (no copy metric).
    series({"__name__": "onprem_etcd_backup_last_copy_timestamp_seconds", "cluster": "dc2", "instance": "10.20.1.5:9100"},
           "0x59 3600x140"),
]


def test_promtool_fires_the_etcd_snapshot_age_alert(built, tmp_path):
    promtool = tool("promtool")
    rules = rules_files({key: value for key, value in built.items() if key == ("onprem-dc1", "dc1")}, tmp_path, strip_annotations=True)
    tests = tmp_path / "etcd-alerts-test.yaml"
    tests.write_text(yaml.safe_dump({
        "rule_files": [str(rules[("onprem-dc1", "dc1")])],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": ETCD_SERIES,
            "alert_rule_test": [
                # Under two intervals old: nothing fires.
                {"eval_time": "119m", "alertname": "EtcdSnapshotTooOld", "exp_alerts": []},
                # dc1's newest snapshot is from time 0: past two hours it fires; dc2's is at most an hour old.
                {"eval_time": "121m", "alertname": "EtcdSnapshotTooOld",
                 "exp_alerts": [{"exp_labels": {"severity": "critical", "cluster": "dc1", "instance": "10.10.1.5:9100"}}]},
                {"eval_time": "190m", "alertname": "EtcdSnapshotTooOld",
                 "exp_alerts": [{"exp_labels": {"severity": "critical", "cluster": "dc1", "instance": "10.10.1.5:9100"}}]},
                # dc2's newest copy is from 3600 s (minute 60): under two intervals old until minute 180; dc1 has no copy metric.
                {"eval_time": "179m", "alertname": "EtcdSnapshotCopyTooOld", "exp_alerts": []},
                {"eval_time": "190m", "alertname": "EtcdSnapshotCopyTooOld",
                 "exp_alerts": [{"exp_labels": {"severity": "warning", "cluster": "dc2", "instance": "10.20.1.5:9100"}}]},
            ],
        }],
    }))
    result = run([promtool, "test", "rules", str(tests)])
    assert result.returncode == 0, result.stdout + result.stderr
