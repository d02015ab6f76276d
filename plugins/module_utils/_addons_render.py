# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The GitOps tree of one datacenter: ``tree(dc)`` returns ``{path under clusters/<dc>/: YAML text}``.

Charts become Argo CD Applications (chart, repoURL, pinned targetRevision, helm.valuesObject); everything else is
plain objects: Kueue flavors and queues, team namespaces, RDMA attachments, the StorageClass, the alert rules.
``kustomization.yaml`` lists every file, so ``kubectl kustomize clusters/<dc>`` builds the whole cluster.
"""

from __future__ import annotations

import json

try:
    import yaml
except ImportError:  # the render runs on the controller (filter cluster_addons_plan), where Ansible brings PyYAML
    yaml = None

from ansible_collections.onprem.gpu.plugins.module_utils._addons import GPU_RESOURCE, TEAM_LABEL, metric_resource
from ansible_collections.onprem.gpu.plugins.module_utils._acceptance import UNHEALTHY_TAINT
from ansible_collections.onprem.gpu.plugins.module_utils._mig_profiles import mig_resource
from ansible_collections.onprem.gpu.plugins.module_utils._node_health_agent import CONDITION_TYPE
from ansible_collections.onprem.gpu.plugins.module_utils._node_health_taint import BREAKER_METRIC

MANAGED_BY = {"app.kubernetes.io/managed-by": "onprem.gpu"}
HEADER = "# Rendered by onprem.gpu.cluster_addons from the inventory; edit the inventory and render again.\n"
# Custom resources whose CRD arrives with an Application of the same sync: Argo CD applies them after the charts.
CR_ANNOTATIONS = {"argocd.argoproj.io/sync-wave": "1", "argocd.argoproj.io/sync-options": "SkipDryRunOnMissingResource=true"}
KUEUE_API = "kueue.x-k8s.io/v1beta2"
# The app-of-apps Application: it makes Argo CD follow the tree in Git, so direct apply leaves it out.
ROOT_APPLICATION_FILE = "argocd/root.yaml"
# mig_owner gpu_operator: the ConfigMap of the site's MIG layouts that the operator's mig-manager reads.
MIG_LAYOUTS_CONFIGMAP = "onprem-gpu-mig-layouts"
# The StorageClass's provisioner, and the name local-path-provisioner is told to run under.
LOCAL_PATH_PROVISIONER = "rancher.io/local-path"


def _dumper():
    """Block style, multi-line strings as literal blocks, no aliases: files a reviewer reads in a merge request."""

    class Dumper(yaml.SafeDumper):
        def ignore_aliases(self, data):
            return True

    def represent_str(dumper, data):
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|" if "\n" in data else None)

    Dumper.add_representer(str, represent_str)
    return Dumper


def dump(documents):
    """YAML text of one or more documents, keys in the order given."""
    dumper = _dumper()
    return HEADER + "---\n".join(yaml.dump(document, Dumper=dumper, sort_keys=False, default_flow_style=False, width=120) for document in documents)


def tree(dc):
    """``{relative path: text}`` of every file of the datacenter's tree, kustomization.yaml included."""
    files = {
        ROOT_APPLICATION_FILE: [_root_application(dc)],
        "apps/gpu-operator.yaml": [_application(dc, "gpu_operator", gpu_operator_values(dc))],
        "apps/kueue.yaml": [_application(dc, "kueue", kueue_values(dc))],
        "apps/local-path-provisioner.yaml": [_application(dc, "local_path_provisioner", local_path_values(dc))],
        "storage/storageclass.yaml": [_storage_class(dc)],
        "kueue/resource-flavors.yaml": _resource_flavors(dc),
        "kueue/cluster-queues.yaml": [_cluster_queue(dc, team) for team in dc.teams],
        "monitoring/gpu-alerts.yaml": [prometheus_rule(dc)],
    }
    if dc.settings.get("cluster_addons_priority_classes"):
        files["kueue/workload-priority-classes.yaml"] = _priority_classes(dc)
    if dc.rails:
        files["apps/network-operator.yaml"] = [_application(dc, "network_operator", network_operator_values(dc))]
        files["rdma/nic-cluster-policy.yaml"] = [_nic_cluster_policy(dc)]
    if any(rail.pod_range is not None for rail in dc.rails):
        files["apps/whereabouts.yaml"] = [_application(dc, "whereabouts", whereabouts_values(dc))]
    for team in dc.teams:
        files[f"teams/{team['name']}.yaml"] = _team_objects(dc, team)
    if any(team.get("group") for team in dc.teams):
        files["rbac/team-edit.yaml"] = [_team_edit_role()]
    texts = {path: dump(documents) for path, documents in sorted(files.items()) if documents}
    texts["kustomization.yaml"] = dump([{
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "labels": [{"pairs": dict(MANAGED_BY, **{"onprem.gpu/datacenter": dc.name}), "includeSelectors": False}],
        "resources": sorted(texts),
    }])
    return texts


def _metadata(name, namespace=None, labels=None, annotations=None):
    metadata = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    if labels:
        metadata["labels"] = labels
    if annotations:
        metadata["annotations"] = annotations
    return metadata


def _setting(dc, name):
    return dc.settings[f"cluster_addons_{name}"]


# --- Argo CD -----------------------------------------------------------------------------------------------------

def _root_application(dc):
    gitops = _setting(dc, "gitops")
    path = "/".join(part for part in (str(gitops.get("root") or "").strip("/"), "clusters", dc.name) if part)
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": _metadata(f"{dc.name}-cluster-addons", gitops["argocd_namespace"]),
        "spec": {
            "project": gitops["project"],
            "source": {"repoURL": gitops["repo_url"], "targetRevision": gitops["revision"], "path": path},
            "destination": {"server": gitops["destination_server"], "namespace": gitops["argocd_namespace"]},
            "syncPolicy": {"automated": {"prune": True, "selfHeal": True}, "syncOptions": ["ServerSideApply=true"]},
        },
    }


def _application(dc, component, values):
    gitops = _setting(dc, "gitops")
    chart = _setting(dc, "charts")[component]
    source = {"repoURL": chart["repo_url"], "targetRevision": str(chart["version"])}
    if chart.get("chart"):
        source["chart"] = chart["chart"]
    else:
        source["path"] = chart["path"]
    source["helm"] = {"releaseName": chart["release"], "valuesObject": values}
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": dict(_metadata(f"{dc.name}-{chart['release']}", gitops["argocd_namespace"], annotations={"argocd.argoproj.io/sync-wave": "0"}),
                         finalizers=["resources-finalizer.argocd.argoproj.io"]),
        "spec": {
            "project": gitops["project"],
            "source": source,
            "destination": {"server": gitops["destination_server"], "namespace": chart["namespace"]},
            "syncPolicy": {
                "automated": {"prune": True, "selfHeal": True},
                # Server-side apply: the Kueue and operator CRDs are larger than client-side apply's annotation allows.
                "syncOptions": ["CreateNamespace=true", "ServerSideApply=true"],
            },
        },
    }


# --- GPU Operator ------------------------------------------------------------------------------------------------

def _gpu_node_tolerations(dc):
    tolerations = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    for key, effect in sorted({(taint["key"], taint.get("effect", "NoSchedule")) for node in dc.nodes for taint in node.taints}):
        tolerations.append({"key": key, "operator": "Exists", "effect": effect})
    return tolerations


def device_plugin_config(dc):
    """The device plugin's named configurations: default (no sharing) and one per time-slicing entry."""
    data = {"default": yaml.safe_dump({"version": "v1", "flags": {"migStrategy": "mixed"}}, sort_keys=False)}
    for name, replicas in sorted((_setting(dc, "time_slicing") or {}).items()):
        data[name] = yaml.safe_dump({
            "version": "v1",
            "flags": {"migStrategy": "mixed"},
            "sharing": {"timeSlicing": {"resources": [{"name": GPU_RESOURCE, "replicas": int(replicas)}]}},
        }, sort_keys=False)
    return data


def gpu_operator_values(dc):
    """Values of the GPU Operator chart: host driver and toolkit, CDI, mixed MIG, DCGM with SM activity."""
    collection_owns_mig = (dc.settings.get("mig_owner") or "collection") == "collection"
    tolerations = _gpu_node_tolerations(dc)
    monitoring = _setting(dc, "monitoring")
    csv = "".join(f"{metric['field']}, {metric['type']}, {metric['help']}\n" for metric in _setting(dc, "dcgm_metrics"))
    values = {
        # The collection installs the driver (nvidia_driver) and the NVIDIA Container Toolkit (container_runtime).
        "driver": {"enabled": False},
        "toolkit": {"enabled": False},
        # container_runtime turns on CDI in containerd (enable_cdi, /etc/cdi and /var/run/cdi) and writes the GPUs' spec.
        "cdi": {"enabled": True, "nriPluginEnabled": False},
        "mig": {"strategy": "mixed"},
        "migManager": {"enabled": not collection_owns_mig},
        "daemonsets": {"tolerations": tolerations},
        "node-feature-discovery": {"worker": {"tolerations": tolerations}},
        "devicePlugin": {"config": {"create": True, "name": "device-plugin-config", "default": "default", "data": device_plugin_config(dc)}},
        "dcgmExporter": {
            "serviceMonitor": {"enabled": True, "honorLabels": True, "additionalLabels": dict(monitoring["selector_labels"])},
            "config": {"create": True, "name": "dcgm-metrics", "data": csv},
        },
        "nodeStatusExporter": {"enabled": True},
    }
    if not collection_owns_mig:
        # No default layout (the operator's all-disabled would wipe every MIG-capable node); the site's named layouts, the
        # same mig-parted v1 file the collection's mig role reads, in a ConfigMap the mig-manager reads (without one it
        # generates layouts from the hardware, and a site's own names such as a mixed inference layout do not exist).
        values["migManager"]["config"] = {"default": ""}
        layouts = dc.settings.get("mig_layouts") or {}
        if layouts:
            document = {"version": "v1", "mig-configs": layouts.get("mig-configs", layouts)}
            values["migManager"]["config"].update(create=True, name=MIG_LAYOUTS_CONFIGMAP,
                                                  data={"config.yaml": yaml.safe_dump(document, sort_keys=False)})
    return values


# --- Kueue -------------------------------------------------------------------------------------------------------

def kueue_manager_config(dc):
    """Kueue's Configuration: jobs in team namespaces are Kueue's even without a queue name; rdma/ is not queued."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443", "enableClusterQueueResources": True},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "manageJobsWithoutQueueName": True,
        "managedJobsNamespaceSelector": {"matchExpressions": [{"key": TEAM_LABEL, "operator": "Exists"}]},
        "resources": {"excludeResourcePrefixes": ["rdma/"]},
        "integrations": {"frameworks": list(_setting(dc, "kueue_frameworks"))},
    }


def kueue_values(dc):
    return {
        "enablePrometheus": True,
        "managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(kueue_manager_config(dc), sort_keys=False)},
    }


def _resource_flavors(dc):
    flavors = [{
        "apiVersion": KUEUE_API, "kind": "ResourceFlavor",
        "metadata": _metadata(_setting(dc, "cpu_flavor"), annotations=CR_ANNOTATIONS), "spec": {},
    }]
    for flavor in dc.flavors.values():
        spec = {"nodeLabels": flavor.node_labels}
        if flavor.taints:
            spec["nodeTaints"] = [_taint(taint) for taint in flavor.taints]
            # Admitted workloads get the pool's toleration: users ask for a queue, not for taints.
            spec["tolerations"] = [dict(_taint(taint), operator="Equal") for taint in flavor.taints]
        flavors.append({"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": _metadata(flavor.name, annotations=CR_ANNOTATIONS), "spec": spec})
    return flavors


def _taint(taint):
    result = {"key": taint["key"]}
    if taint.get("value") is not None:
        result["value"] = str(taint["value"])
    result["effect"] = taint.get("effect", "NoSchedule")
    return result


def _limits(team, kind, flavor):
    limits = team.get(kind) or {}
    return limits.get(flavor)


def _queue_limits(team, key, kind):
    limits = {}
    for field, variable in (("borrowingLimit", "borrowing_limits"), ("lendingLimit", "lending_limits")):
        if _limits(team, variable, key) is not None:
            limits[field] = kind(_limits(team, variable, key))
    return limits


def _cluster_queue(dc, team):
    gpus = team.get("gpus") or {}
    groups = [{
        "coveredResources": ["cpu", "memory"],
        "flavors": [{"name": _setting(dc, "cpu_flavor"), "resources": [
            dict({"name": "cpu", "nominalQuota": team.get("cpu", 0)}, **_queue_limits(team, "cpu", lambda value: value)),
            dict({"name": "memory", "nominalQuota": str(team.get("memory", 0))}, **_queue_limits(team, "memory", str)),
        ]}],
    }]
    by_resource = {}
    for flavor in dc.flavors.values():
        by_resource.setdefault(flavor.resource, []).append(flavor)
    for resource, flavors in sorted(by_resource.items(), key=lambda item: (item[0] != GPU_RESOURCE, item[0])):
        entries = []
        # Kueue tries a group's flavors in order: the team's own quota first, then those it can only borrow.
        for flavor in sorted(flavors, key=lambda item: (int(gpus.get(item.name, 0)) == 0, item.name)):
            quota = {"name": resource, "nominalQuota": int(gpus.get(flavor.name, 0))}
            quota.update(_queue_limits(team, flavor.name, int))
            entries.append({"name": flavor.name, "resources": [quota]})
        groups.append({"coveredResources": [resource], "flavors": entries})
    return {
        "apiVersion": KUEUE_API, "kind": "ClusterQueue",
        "metadata": _metadata(team["name"], labels={TEAM_LABEL: team["name"]}, annotations=CR_ANNOTATIONS),
        "spec": {
            "cohortName": _setting(dc, "cohort"),
            "namespaceSelector": {"matchLabels": {TEAM_LABEL: team["name"]}},
            "queueingStrategy": "BestEffortFIFO",
            "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
            "resourceGroups": groups,
        },
    }


def _priority_classes(dc):
    return [{
        "apiVersion": KUEUE_API, "kind": "WorkloadPriorityClass",
        "metadata": _metadata(item["name"], annotations=CR_ANNOTATIONS),
        "value": int(item["value"]), "description": item.get("description", ""),
    } for item in _setting(dc, "priority_classes")]


# --- Teams -------------------------------------------------------------------------------------------------------

# The ClusterRole of a team's group in its namespaces: Kubernetes' edit (its system:aggregate-to-edit rules, kubernetes
# plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go, 1.35) without NetworkPolicies, so a tenant can neither delete
# the namespace's default-deny nor add a policy that opens it; reads come from view, bound beside it. Without the
# extensions group, which serves none of these since Kubernetes 1.22.
TEAM_EDIT_ROLE = "onprem-gpu-team-edit"
_READ = ["get", "list", "watch"]
_WRITE = ["create", "delete", "deletecollection", "patch", "update"]
_TEAM_EDIT_RULES = [
    {"apiGroups": [""], "resources": ["pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "secrets", "services/proxy"], "verbs": _READ},
    {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["impersonate"]},
    {"apiGroups": [""], "resources": ["pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy"], "verbs": _WRITE},
    {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["configmaps", "events", "persistentvolumeclaims", "replicationcontrollers", "replicationcontrollers/scale",
                                      "secrets", "serviceaccounts", "services", "services/proxy"], "verbs": _WRITE},
    {"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]},
    {"apiGroups": ["apps"], "resources": ["daemonsets", "deployments", "deployments/rollback", "deployments/scale", "replicasets",
                                          "replicasets/scale", "statefulsets", "statefulsets/scale"], "verbs": _WRITE},
    {"apiGroups": ["autoscaling"], "resources": ["horizontalpodautoscalers"], "verbs": _WRITE},
    {"apiGroups": ["batch"], "resources": ["cronjobs", "jobs"], "verbs": _WRITE},
    {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": _WRITE},
    {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": _WRITE},
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": _WRITE + _READ},
]


def _team_edit_role():
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": _metadata(TEAM_EDIT_ROLE), "rules": _TEAM_EDIT_RULES}


def pod_security_labels(dc, team):
    """Pod Security Admission labels of a team namespace: the team's level (pod_security, else cluster_addons_pod_security),
    pinned to the cluster's minor version. warn and audit at the same level also judge the pod templates of Jobs and
    Deployments (enforce judges pods only), so a Job whose pods would be refused says so when it is created."""
    level = team.get("pod_security") or _setting(dc, "pod_security")
    return {f"pod-security.kubernetes.io/{mode}{suffix}": value
            for mode in ("enforce", "audit", "warn") for suffix, value in (("", level), ("-version", dc.pod_security_version))}


def team_quota(dc, team):
    """A team namespace's ResourceQuota: what the team can reach through Kueue (nominal quota plus what it may borrow)."""
    gpus = team.get("gpus") or {}
    hard = {}
    for flavor in dc.flavors.values():
        nominal = int(gpus.get(flavor.name, 0))
        borrowing = _limits(team, "borrowing_limits", flavor.name)
        reach = max(nominal, min(flavor.capacity, nominal + (flavor.capacity if borrowing is None else int(borrowing))))
        key = f"requests.{flavor.resource}"
        hard[key] = hard.get(key, 0) + reach
    hard.setdefault(f"requests.{GPU_RESOURCE}", 0)
    # CPU and memory capacity is not in the inventory: capped only where the team may borrow a known amount.
    for resource in ("cpu", "memory"):
        borrowing = _limits(team, "borrowing_limits", resource)
        if borrowing is not None and team.get(resource) is not None:
            hard[f"requests.{resource}"] = _quantity_sum(team[resource], borrowing)
    return {key: str(value) for key, value in sorted(hard.items())}


def _quantity_sum(nominal, borrowing):
    """nominal + borrowing for plain numbers; a quantity with a unit (4Ti) only when nothing may be borrowed."""
    if str(borrowing) in ("0", "0.0"):
        return nominal
    if isinstance(nominal, (int, float)) and isinstance(borrowing, (int, float)):
        return nominal + borrowing
    raise ValueError(f"borrowing limit {borrowing!r} cannot be added to {nominal!r}: give CPU as numbers and memory limits as 0")


def _team_objects(dc, team):
    name = team["name"]
    labels = {TEAM_LABEL: name}
    objects = []
    for namespace in team["namespaces"]:
        objects.append({"apiVersion": "v1", "kind": "Namespace", "metadata": _metadata(namespace, labels=dict(labels, **pod_security_labels(dc, team)))})
    for namespace in team["namespaces"]:
        objects.append({
            "apiVersion": "v1", "kind": "ResourceQuota", "metadata": _metadata("team-quota", namespace, labels),
            "spec": {"hard": team_quota(dc, team)},
        })
        objects.append({
            "apiVersion": "v1", "kind": "LimitRange", "metadata": _metadata("team-defaults", namespace, labels),
            "spec": {"limits": [dict({"type": "Container"}, **_setting(dc, "limit_range"))]},
        })
        # team-member, not the former team-edit: a RoleBinding's roleRef cannot change, so the old binding is pruned instead.
        for binding, role, groups in (("team-member", TEAM_EDIT_ROLE, [team.get("group")]),
                                      ("team-view", "view", [team.get("group"), team.get("viewer_group")])):
            if any(groups):
                objects.append({
                    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                    "metadata": _metadata(binding, namespace, labels),
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group} for group in groups if group],
                })
        objects.extend(_network_policies(dc, namespace, labels))
        objects.append({
            "apiVersion": KUEUE_API, "kind": "LocalQueue",
            # "default": Kueue's LocalQueue defaulting sends jobs without kueue.x-k8s.io/queue-name here.
            "metadata": _metadata("default", namespace, labels, CR_ANNOTATIONS),
            "spec": {"clusterQueue": name},
        })
        if dc.rails:
            objects.append({
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": _metadata("nccl-env", namespace, labels),
                "data": nccl_environment(dc),
            })
        objects.extend(_network_attachments(dc, namespace, labels))
    return objects


def _network_policies(dc, namespace, labels):
    monitoring = _setting(dc, "monitoring")
    egress = [
        {"to": [{"podSelector": {}}]},
        {"to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                 "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
         "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]},
    ]
    cidrs = _setting(dc, "team_egress_cidrs")
    if cidrs:
        egress.append({"to": [{"ipBlock": {"cidr": str(cidr)}} for cidr in cidrs]})
    deny = {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    training = {
        "podSelector": {},
        "policyTypes": ["Ingress", "Egress"],
        # Rendezvous, NCCL bootstrap and sockets between the pods of a job; metrics scraped by Prometheus.
        "ingress": [
            {"from": [{"podSelector": {}}]},
            {"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": monitoring["namespace"]}}}]},
        ],
        "egress": egress,
    }
    return [{"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": _metadata(name, namespace, labels), "spec": spec}
            for name, spec in (("default-deny", deny), ("allow-training", training))]


def nccl_environment(dc):
    """The NCCL variables a pod of this datacenter needs to use its rails (ConfigMap nccl-env in each team namespace)."""
    nccl = _setting(dc, "nccl")
    hcas = nccl.get("ib_hca") or "=" + ",".join(f"mlx5_{rail.index}" for rail in dc.rails)
    environment = {"NCCL_IB_HCA": hcas, "NCCL_SOCKET_IFNAME": str(nccl.get("socket_ifname", "eth0"))}
    if dc.rails and dc.rails[0].link_layer == "ethernet":
        environment["NCCL_IB_GID_INDEX"] = str(nccl["ib_gid_index"])
        environment["NCCL_IB_TC"] = str(nccl["ib_tc"])
    return dict(sorted(environment.items()))


def network_attachment_config(dc, rail):
    """The CNI configuration of a rail's attachment: macvlan on the rail's netdev, whereabouts in the pods' block."""
    block = rail.pod_range
    first = block.network_address if block.network_address != rail.subnet.network_address else block.network_address + 1
    last = block.broadcast_address if block.broadcast_address != rail.subnet.broadcast_address else block.broadcast_address - 1
    ipam = {"type": "whereabouts", "range": str(rail.subnet), "range_start": str(first), "range_end": str(last), "network_name": rail.name}
    if rail.gateway:
        ipam["exclude"] = [f"{rail.gateway}/32"]
    return {"cniVersion": "0.3.1", "name": rail.name, "type": "macvlan", "master": rail.netdev, "mode": "bridge",
            "mtu": int(_setting(dc, "rdma_mtu")), "ipam": ipam}


def _network_attachments(dc, namespace, labels):
    return [{
        "apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
        "metadata": _metadata(rail.name, namespace, labels, dict(CR_ANNOTATIONS, **{"k8s.v1.cni.cncf.io/resourceName": f"rdma/{rail.name}"})),
        "spec": {"config": json.dumps(network_attachment_config(dc, rail), sort_keys=False)},
    } for rail in dc.rails if rail.pod_range is not None and rail.netdev]


# --- RDMA ---------------------------------------------------------------------------------------------------------

def rdma_shared_device_plugin_config(dc):
    """config.json of the RDMA shared device plugin: one resource rdma/<rail> per rail, selected by netdev."""
    return {"periodicUpdateInterval": 300, "configList": [{
        "resourceName": rail.name, "resourcePrefix": "rdma", "rdmaHcaMax": int(_setting(dc, "rdma_hca_max")),
        "selectors": {"ifNames": [rail.netdev]},
    } for rail in dc.rails if rail.netdev]}


def network_operator_values(dc):
    # The GPU Operator runs Node Feature Discovery; one NFD per cluster.
    return {"nfd": {"enabled": False, "deployNodeFeatureRules": True}, "sriovNetworkOperator": {"enabled": False}}


def _nic_cluster_policy(dc):
    images = _setting(dc, "network_operator_images")
    image = {"repository": images["repository"], "version": images["version"]}
    return {
        "apiVersion": "mellanox.com/v1alpha1", "kind": "NicClusterPolicy",
        "metadata": _metadata("nic-cluster-policy", annotations=CR_ANNOTATIONS),
        "spec": {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [node.name for node in dc.nodes]},
            ]}]}},
            "tolerations": _gpu_node_tolerations(dc),
            "rdmaSharedDevicePlugin": dict(image, image="k8s-rdma-shared-dev-plugin",
                                           config=json.dumps(rdma_shared_device_plugin_config(dc), indent=2)),
            "secondaryNetwork": {"multus": dict(image, image="multus-cni"), "cniPlugins": dict(image, image="plugins")},
        },
    }


def whereabouts_values(dc):
    return {"tolerations": [{"operator": "Exists", "effect": "NoSchedule"}]}


# --- Storage ------------------------------------------------------------------------------------------------------

def local_path_values(dc):
    """local-path-provisioner: volumes only on the GPU nodes' NVMe cache, nowhere else (empty default paths)."""
    node_paths = [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": []}]
    node_paths.extend({"node": node.name, "paths": [node.local_path_dir]} for node in dc.nodes if node.local_path_dir)
    # The chart names its provisioner cluster.local/<release fullname> unless told (templates/_helpers.tpl of
    # rancher/local-path-provisioner's chart), and PVCs of a StorageClass whose provisioner nobody runs never bind.
    return {"storageClass": {"create": False, "provisionerName": LOCAL_PATH_PROVISIONER}, "nodePathMap": node_paths}


def _storage_class(dc):
    storage = _setting(dc, "storage_class")
    return {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": _metadata(storage["name"], annotations={"storageclass.kubernetes.io/is-default-class": str(bool(storage["default"])).lower()}),
        "provisioner": LOCAL_PATH_PROVISIONER,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "WaitForFirstConsumer",
        "allowedTopologies": [{"matchLabelExpressions": [{
            "key": "kubernetes.io/hostname", "values": [node.name for node in dc.nodes if node.local_path_dir],
        }]}],
    }


# --- Alerts -------------------------------------------------------------------------------------------------------

# XIDs NVIDIA's XID catalogue lays at the application's door (13 graphics engine exception, 31 memory page fault, 43 GPU
# stopped processing): the application is restarted, the GPU is not drained.
APPLICATION_XIDS = (13, 31, 43)


def _with_hostname(expression):
    # dcgm-exporter names the node label Hostname up to 4.5.3-4.8.2 and hostname from its PR #655 on: copy it to hostname.
    return f'label_replace({expression}, "hostname", "$1", "Hostname", "(.+)")'


def idle_gpu_expression(alerts):
    """Per GPU (or MIG instance) a pod holds: SM activity under the threshold.

    dcgm-exporter adds pod/namespace/container only to the series of a GPU a pod holds (its
    internal/pkg/transformation/kubernetes.go). Scraped through a ServiceMonitor, prometheus-operator gives every series the
    target's own pod and namespace too: with honorLabels (what this render sets) the exporter's pod replaces the target's,
    so a series whose pod is still the target's (as on the up series of its instance) is a free GPU; without honorLabels
    the workload's labels are exported_pod/exported_namespace. Framebuffer use says nothing: a free MIG instance uses some.
    """
    window = alerts["idle_window"]
    honoured = f'(avg_over_time(DCGM_FI_PROF_SM_ACTIVE{{pod!=""}}[{window}]) unless on (instance, pod) up)'
    renamed = (f'label_replace(label_replace(avg_over_time(DCGM_FI_PROF_SM_ACTIVE{{exported_pod!=""}}[{window}]), '
               '"pod", "$1", "exported_pod", "(.+)"), "namespace", "$1", "exported_namespace", "(.+)")')
    return (
        "max by (hostname, gpu, GPU_I_ID, GPU_I_PROFILE, namespace, pod) (\n"
        f"  {_with_hostname(honoured + chr(10) + '  or ' + renamed)}\n"
        f") < {alerts['idle_sm_active']}"
    )


def xid_expression(application):
    """A new XID in the last 10 minutes. DCGM_FI_DEV_XID_ERRORS keeps the last XID until the exporter restarts
    (dcgm-exporter issue #500), so its value alone would fire for ever: a change of value is the event."""
    xid = "DCGM_FI_DEV_XID_ERRORS"
    which = " or ".join(f"{xid} == {code}" for code in APPLICATION_XIDS) if application else \
        f"{xid} != 0 " + " ".join(f"!= {code}" for code in APPLICATION_XIDS)
    return f"max by (hostname, gpu, GPU_I_ID) ({_with_hostname(f'(({which}) and changes({xid}[10m]) > 0)')})"


def continuous_health_rules(alerts):
    """Continuous health (roles/node_health, docs/node-health.md): a node tainted unhealthy, GPU health Unknown too long, the
    taint controller's circuit breaker open. kube-state-metrics exports taints (kube_node_spec_taint) and every node condition,
    the collection's included (kube_node_status_condition, status true/false/unknown); the breaker is the controller's
    node-exporter textfile metric."""
    return [
        {
            "alert": "GPUNodeTaintedUnhealthy",
            "expr": f'max by (node, value) (kube_node_spec_taint{{key="{UNHEALTHY_TAINT}", effect="NoSchedule"}}) > 0',
            "for": alerts["health_tainted_for"],
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "{{ $labels.node }} is out of service: GPU health finding {{ $labels.value }}",
                "description": f"The node carries the taint {UNHEALTHY_TAINT}={{{{ $labels.value }}}}:NoSchedule (set by node health or "
                               "acceptance, see the node annotation onprem.gpu/unhealthy-owner); its GPUs are lost to the cluster "
                               "until the finding's action (docs/node-health.md) is done.",
            },
        },
        {
            "alert": "GPUHealthUnknown",
            "expr": f'max by (node) (kube_node_status_condition{{condition="{CONDITION_TYPE}", status="unknown"}}) == 1',
            "for": alerts["health_unknown_for"],
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "{{ $labels.node }}: the GPU health check cannot run",
                "description": f"The {CONDITION_TYPE} condition has been Unknown for {alerts['health_unknown_for']}: the driver is not "
                               "loaded, nvidia-smi hangs, or the agent stopped reporting; the node is neither tainted nor released.",
            },
        },
        {
            "alert": "GPUHealthCircuitBreakerOpen",
            "expr": f"max by (cluster) ({BREAKER_METRIC}) == 1",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": "{{ $labels.cluster }}: too many GPU nodes fail at once, automatic tainting stopped",
                "description": "More GPU nodes fail their health check than node_health_max_unhealthy_percent allows to taint; "
                               "look for a common cause (a driver or firmware roll-out) before tainting by hand.",
            },
        },
    ]


ETCD_SNAPSHOT_TIME = "onprem_etcd_backup_last_success_timestamp_seconds"
ETCD_BACKUP_INTERVAL = "onprem_etcd_backup_interval_seconds"
ETCD_COPY_TIME = "onprem_etcd_backup_last_copy_timestamp_seconds"


def etcd_backup_rules():
    """Scheduled etcd snapshots (roles/etcd_backup, docs/etcd-backup.md): the newest verified snapshot older than two of the
    timer's intervals. Both are the control plane's node-exporter textfile metrics, so the rule needs no interval of its own;
    a node that never made a snapshot exports the time 0 and fires at once. Where the snapshots are copied off the node (S3),
    the newest copy older than two intervals too: the control plane's disk is then the only copy."""
    return [{
        "alert": "EtcdSnapshotTooOld",
        "expr": f"time() - max by (cluster, instance) ({ETCD_SNAPSHOT_TIME})\n"
                f"  > 2 * max by (cluster, instance) ({ETCD_BACKUP_INTERVAL})",
        "labels": {"severity": "critical"},
        "annotations": {
            "summary": "{{ $labels.cluster }}: the newest verified etcd snapshot is {{ $value | humanizeDuration }} old",
            "description": "The snapshot timer (onprem-etcd-backup.timer on {{ $labels.instance }}) has made no verified snapshot "
                           "for two intervals: see `journalctl -u onprem-etcd-backup.service` there. Until it does, a restore "
                           "(playbooks/etcd_restore.yml) loses everything since the newest snapshot.",
        },
    }, {
        "alert": "EtcdSnapshotCopyTooOld",
        "expr": f"time() - max by (cluster, instance) ({ETCD_COPY_TIME})\n"
                f"  > 2 * max by (cluster, instance) ({ETCD_BACKUP_INTERVAL})",
        "labels": {"severity": "warning"},
        "annotations": {
            "summary": "{{ $labels.cluster }}: the newest etcd snapshot copied off the node is {{ $value | humanizeDuration }} old",
            "description": "The snapshot timer on {{ $labels.instance }} has copied no snapshot to the site's S3 endpoint for two "
                           "intervals (see `journalctl -u onprem-etcd-backup.service` there: the endpoint, the keys, the bucket): "
                           "if the control plane's disk is lost, so are the snapshots since the newest copy.",
        },
    }]


def prometheus_rule(dc):
    alerts = _setting(dc, "alerts")
    monitoring = _setting(dc, "monitoring")
    expected = []
    for node in dc.nodes:
        resources = ([(GPU_RESOURCE, node.whole_gpus * node.replicas)] if node.whole_gpus else []) + sorted(
            (mig_resource(profile), count) for profile, count in node.mig_devices.items())
        expected.extend({
            "record": "onprem_gpu:node_allocatable_expected", "expr": f"vector({count})",
            "labels": {"node": node.name, "resource": metric_resource(resource)},
        } for resource, count in resources)
    caches = [{
        "record": "onprem_gpu:node_nvme_cache_expected", "expr": "vector(1)",
        "labels": {"nodename": node.name, "mountpoint": _setting(dc, "nvme_cache_mount")},
    } for node in dc.nodes if node.local_path_dir]
    team_alerts = [{
        "alert": "TeamGPUsIdle",
        "expr": f"count(onprem_gpu:gpu_idle_allocated{{namespace=~\"{'|'.join(team['namespaces'])}\"}}) >= "
                f"{int(team.get('idle_gpus_alert', alerts['team_idle_gpus']))}",
        "for": alerts["idle_for"],
        "labels": {"severity": "warning", "team": team["name"]},
        "annotations": {
            "summary": f"Team {team['name']} holds {{{{ $value }}}} GPUs it does not use",
            "description": f"{{{{ $value }}}} GPUs (or MIG instances) allocated to pods of team {team['name']} have had SM activity "
                           f"below {alerts['idle_sm_active']} for {alerts['idle_for']}.",
        },
    } for team in dc.teams]
    groups = [
        {"name": "onprem-gpu-expected", "rules": expected + caches} if expected or caches else None,
        {"name": "onprem-gpu-idle", "rules": [
            {"record": "onprem_gpu:gpu_idle_allocated", "expr": idle_gpu_expression(alerts)},
            {
                "alert": "GPUAllocatedButIdle",
                "expr": "count by (hostname) (onprem_gpu:gpu_idle_allocated) > 0",
                "for": alerts["idle_for"],
                "labels": {"severity": "warning"},
                "annotations": {
                    "summary": "{{ $labels.hostname }}: {{ $value }} GPUs held by pods do no work",
                    "description": f"GPUs (or MIG instances) of {{{{ $labels.hostname }}}} held by pods have had SM activity below "
                                   f"{alerts['idle_sm_active']} for {alerts['idle_for']}.",
                },
            },
        ] + team_alerts},
        {"name": "onprem-gpu-health", "rules": [
            {
                "alert": "GPUXidError",
                "expr": xid_expression(application=False),
                "labels": {"severity": "critical"},
                "annotations": {
                    "summary": "{{ $labels.hostname }} GPU {{ $labels.gpu }} reported XID {{ $value }}",
                    "description": "See NVIDIA's XID catalogue; 48, 63, 64, 74, 79, 94 and 95 usually need a drain and a GPU reset or a reboot.",
                },
            },
            {
                "alert": "GPUXidApplicationError",
                "expr": xid_expression(application=True),
                "labels": {"severity": "warning"},
                "annotations": {
                    "summary": "{{ $labels.hostname }} GPU {{ $labels.gpu }} reported application XID {{ $value }}",
                    "description": "XIDs 13, 31 and 43 are faults of the application on that GPU (NVIDIA's XID catalogue): "
                                   "restart or fix the application; the GPU needs no reset.",
                },
            },
            {
                "alert": "GPUMissingFromNode",
                "expr": "(onprem_gpu:node_allocatable_expected unless on (node, resource) kube_node_status_allocatable)\n"
                        "or\n"
                        "(onprem_gpu:node_allocatable_expected > on (node, resource) kube_node_status_allocatable)",
                "for": alerts["gpu_missing_for"],
                "labels": {"severity": "critical"},
                "annotations": {
                    "summary": "{{ $labels.node }} offers fewer {{ $labels.resource }} than the inventory declares ({{ $value }})",
                    "description": "A GPU fell off the bus, the device plugin is down, or the MIG layout differs from the inventory's.",
                },
            },
            {
                "alert": "NVMeCacheMissing",
                "expr": "onprem_gpu:node_nvme_cache_expected\n"
                        "unless on (nodename, mountpoint)\n"
                        "(node_filesystem_size_bytes * on (instance) group_left (nodename) node_uname_info)",
                "for": alerts["nvme_cache_for"],
                "labels": {"severity": "critical"},
                "annotations": {
                    "summary": "{{ $labels.nodename }} has no NVMe cache at {{ $labels.mountpoint }}",
                    "description": "The cache is not mounted (or node-exporter does not report it); kubelet waits for the mount and "
                                   "local-path volumes cannot be made there.",
                },
            },
        ]},
        {"name": "onprem-gpu-continuous-health", "rules": continuous_health_rules(alerts)},
        {"name": "onprem-etcd-backup", "rules": etcd_backup_rules()},
        {"name": "onprem-gpu-queues", "rules": [{
            "alert": "KueuePendingWorkloads",
            "expr": f"sum by (cluster_queue) (kueue_pending_workloads{{status=\"active\", replica_role!=\"follower\"}}) > {alerts['pending_workloads']}",
            "for": alerts["pending_for"],
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "{{ $value }} workloads wait in ClusterQueue {{ $labels.cluster_queue }}",
                "description": f"More than {alerts['pending_workloads']} workloads have waited for quota for {alerts['pending_for']}.",
            },
        }]},
    ]
    return {
        "apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
        "metadata": _metadata("onprem-gpu", monitoring["namespace"], dict(monitoring["selector_labels"]), CR_ANNOTATIONS),
        "spec": {"groups": [group for group in groups if group]},
    }
