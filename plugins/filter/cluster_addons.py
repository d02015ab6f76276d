# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.onprem.gpu.plugins.module_utils._addons import datacenter, datacenter_name_problem
from ansible_collections.onprem.gpu.plugins.module_utils._addons_apply import RENDERED_KINDS, kind_id, plan, rendered_objects, report
from ansible_collections.onprem.gpu.plugins.module_utils._addons_charts import (
    CHART_KINDS,
    chart_applications,
    chart_objects,
    crd_scopes,
    parse_documents,
    template_run,
)
from ansible_collections.onprem.gpu.plugins.module_utils._addons_render import tree
from ansible_collections.onprem.gpu.plugins.module_utils._kube import controller_kubeconfig
from ansible_collections.onprem.gpu.plugins.module_utils._rdma_rails import nccl_traffic_class


def _get(host_vars, name, default=None):
    try:
        value = host_vars[name]
    except KeyError:
        return default
    return _plain(value)


def _plain(value):
    """value with Ansible's tagged strings, numbers and containers turned into the plain Python types YAML dumps."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, dict):
        return {_plain(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def _host(hostvars, host):
    """A host's variables, or none for a name that is not in the inventory (as the rdma role reads them)."""
    try:
        return hostvars[host]
    except KeyError:
        return {}


def _merge(default, override):
    """override merged key by key into default (mappings recursively), so an inventory can change one threshold."""
    if isinstance(default, dict) and isinstance(override, dict):
        merged = dict(default)
        for key, value in override.items():
            merged[key] = _merge(default.get(key), value) if key in default else value
        return merged
    return override


def describe(hostvars, groups, settings):
    """The plain description of each datacenter in the inventory, as _addons.datacenter takes it, in name order."""
    by_dc = {}
    for host in sorted(groups.get("all", [])):
        name = _get(hostvars[host], "datacenter")
        if name:
            by_dc.setdefault(str(name), []).append(host)
    control_plane = set(groups.get("control_plane", []))
    gpu_nodes = set(groups.get("gpu_nodes", []))
    descriptions = []
    for name, hosts in sorted(by_dc.items()):
        # Cluster-wide settings live in the datacenter's group_vars: read them through its first control-plane host.
        anchor = next((host for host in hosts if host in control_plane), hosts[0])
        anchor_vars = hostvars[anchor]
        dc_settings = {key: _merge(value, _get(anchor_vars, key, value)) for key, value in settings.items()}
        workers = [host for host in hosts if host in gpu_nodes]
        nodes = []
        for host in workers:
            host_vars = hostvars[host]
            mount = _get(host_vars, "nvme_cache_mount", "/raid")
            nodes.append({
                "name": str(_get(host_vars, "kube_node_name", host)),
                "model": str(_get(host_vars, "node_gpu_model", "")),
                # As given: _addons_inputs refuses "eight" or a list of labels in one sentence each.
                "gpu_count": _get(host_vars, "node_gpu_count", 0),
                "labels": _get(host_vars, "kube_node_labels", {}) or {},
                "taints": list(_get(host_vars, "kube_node_taints", []) or []),
                "mig_layout": _get(host_vars, "mig_layout"),
                "mig_layouts": _get(host_vars, "mig_layouts", dc_settings.get("mig_layouts")) or {},
                "local_path_dir": str(_get(host_vars, "nvme_cache_local_path_dir", f"{mount}/local-path")),
            })
        first = hostvars[workers[0]] if workers else anchor_vars
        address_hosts = list(_get(first, "rdma_address_hosts", None) or sorted(groups.get("gpu_nodes", [])))
        places = [int(_get(_host(hostvars, host), "rdma_address_index", position)) for position, host in enumerate(address_hosts)]
        nccl = dict(dc_settings.get("cluster_addons_nccl") or {})
        if nccl.get("ib_tc") is None:
            # The traffic class the rdma role writes into /etc/nccl.conf for the same ToS (rdma_nccl_ib_tc).
            nccl["ib_tc"] = nccl_traffic_class(_get(first, "rdma_qos_tos", 106))
        dc_settings["cluster_addons_nccl"] = nccl
        descriptions.append({
            "name": name,
            "hosts": hosts,
            "kubeconfig": kubeconfig(anchor_vars, name, dc_settings.get("cluster_addons_kubeconfig")),
            "kube_version": str(_get(anchor_vars, "kube_version", "") or ""),
            "kube_pod_cidr": _get(anchor_vars, "kube_pod_cidr"),
            "kube_service_cidr": _get(anchor_vars, "kube_service_cidr"),
            "settings": dc_settings,
            "nodes": nodes,
            "rails": [dict(rail) for rail in (_get(first, "rdma_rails", []) or [])] if workers else [],
            "rdma_link_layer": str(_get(first, "rdma_link_layer", "ethernet")),
            "rdma_address_first": int(_get(first, "rdma_address_first", 10)),
            "rdma_places": places,
        })
    return descriptions


def kubeconfig(anchor_vars, name, configured):
    """The datacenter's admin kubeconfig on the controller: cluster_addons_kubeconfig, else where kube_control_plane fetched it
    (<kube_control_plane_kubeconfig_dir, default <inventory_dir>/artifacts>/<kube_cluster_name or datacenter>/admin.conf)."""
    if configured:
        return str(configured)
    return controller_kubeconfig(name, _get(anchor_vars, "kube_control_plane_kubeconfig_dir"), _get(anchor_vars, "inventory_dir"),
                                 _get(anchor_vars, "kube_cluster_name"))


def cluster_addons_plan(hostvars, groups, settings):
    """Per datacenter: ``{name, name_problem, kubeconfig, kinds, problems, files}``; files (path under clusters/<name>/ -> YAML)
    only without problems; name_problem the sentence refusing a name that cannot name a directory (also in problems); kinds
    ({api_version, kind}) are those direct apply reads from the cluster."""
    plans = []
    for description in describe(hostvars, groups, _plain(settings)):
        name_problem = datacenter_name_problem(description["name"], description["hosts"])
        try:
            dc = datacenter(description)
            problems = ([name_problem] if name_problem else []) + dc.problems
            files = {} if problems else tree(dc)
        except (KeyError, TypeError, ValueError) as error:
            raise AnsibleFilterError(f"cluster_addons_plan: datacenter {description['name']}: {error}") from None
        plans.append({"name": dc.name, "name_problem": name_problem, "kubeconfig": description["kubeconfig"],
                      "kube_version": description["kube_version"], "problems": problems, "files": files,
                      "kinds": [{"api_version": api_version, "kind": kind} for api_version, kind in RENDERED_KINDS]})
    return plans


def cluster_addons_chart_runs(plans, helm="helm", archives=""):
    """The ``helm template`` runs of every chart of every datacenter (_addons_charts.template_run), each with its datacenter's name."""
    runs = []
    for dc in plans:
        for application in chart_applications(rendered_objects(_plain(dc["files"]))):
            runs.append(dict(template_run(application, str(helm), str(archives or ""), dc.get("kube_version")), datacenter=dc["name"]))
    return runs


def cluster_addons_with_charts(plans, results):
    """The plans with ``chart_runs`` ({release, namespace, objects} per chart, from the command results of the runs),
    ``chart_problems`` (one sentence per chart that could not be rendered) and ``kinds`` widened to the charts' kinds."""
    widened = []
    for dc in plans:
        runs, problems = [], []
        mine = [result for result in results if result["__cluster_addons_chart"]["datacenter"] == dc["name"]]
        parsed = [parse_documents(str(result["stdout"])) if result.get("rc") == 0 and not result["__cluster_addons_chart"]["problem"] else []
                  for result in mine]
        # The scope of every chart's CRDs: a chart may hold objects of a kind another chart defines (NFD's NodeFeatureRule).
        scopes = crd_scopes([document for documents in parsed for document in documents])
        for result, documents in zip(mine, parsed):
            run = result["__cluster_addons_chart"]
            what = f"{dc['name']}: the {run['chart']} chart {run['version']}"
            if run["problem"]:
                problems.append(f"{dc['name']}: {run['problem']}")
            elif result.get("rc") is None or "No such file" in str(result.get("msg", "")):
                problems.append(f"{what} was not rendered: {run['argv'][0]} is not on the controller (cluster_addons_helm): install Helm 3.8 "
                                f"or later, or set cluster_addons_chart_installer=argocd.")
            elif result["rc"] != 0:
                reason = (str(result.get("stderr") or "").strip().splitlines() or [f"exit {result['rc']}"])[-1]
                problems.append(f"{what} was not rendered by helm template ({reason}): check its repository, version and values.")
            else:
                runs.append({"release": run["release"], "namespace": run["namespace"],
                             "objects": chart_objects(run, documents, dc["name"], scopes)})
        kinds = {(kind["api_version"], kind["kind"]): None for kind in dc["kinds"]}
        kinds.update(dict.fromkeys(CHART_KINDS))
        kinds.update(dict.fromkeys((document["apiVersion"], document["kind"]) for run in runs for document in run["objects"]))
        widened.append(dict(dc, chart_runs=runs, chart_problems=problems,
                            kinds=[{"api_version": api_version, "kind": kind} for api_version, kind in kinds]))
    return widened


def cluster_addons_apply_plan(plans, reads, charts=True, check_mode=False):
    """Per datacenter, what direct apply does (_addons_apply.plan), from the onprem.gpu.kube_objects_info result of each plan."""
    live = {}
    for read in reads:
        dc = read["__cluster_addons_plan"]
        for kind in read["kinds"]:
            live.setdefault(dc["name"], {})[kind_id(kind["api_version"], kind["kind"])] = \
                [_plain(document) for document in kind.get("resources") or []] if kind.get("api_found", True) else None
    apply_plans = []
    for dc in plans:
        apply_plan = plan(dc["name"], _plain(dc["files"]), live.get(dc["name"], {}), bool(charts), bool(check_mode),
                          _plain(dc["chart_runs"]) if "chart_runs" in dc else None)
        apply_plan["kubeconfig"] = str(dc["kubeconfig"])
        for batch in apply_plan["batches"]:
            batch.update(name=dc["name"], kubeconfig=apply_plan["kubeconfig"])
        apply_plans.append(apply_plan)
    return apply_plans


def cluster_addons_apply_report(apply_plans, results):
    """Per datacenter, {name, created, changed, pruned} from the plans and the k8s results of their batches."""
    reports = []
    for apply_plan in apply_plans:
        mine = [_plain(result) for result in results if result["__cluster_addons_batch"]["name"] == apply_plan["name"]]
        reports.append(dict(report(_plain(apply_plan), mine), name=apply_plan["name"]))
    return reports


class FilterModule:
    """The per-datacenter GPU platform rendered from the inventory (role cluster_addons)."""

    def filters(self):
        return {"cluster_addons_plan": cluster_addons_plan, "cluster_addons_chart_runs": cluster_addons_chart_runs,
                "cluster_addons_with_charts": cluster_addons_with_charts, "cluster_addons_apply_plan": cluster_addons_apply_plan,
                "cluster_addons_apply_report": cluster_addons_apply_report}
