# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Helpers of the network_benchmark role: pair rounds, localising a bad node, NCCL's view of each host, SVG charts.

Documentation: the YAML files of the same names beside this one.
"""

from __future__ import annotations

import re

from ansible.errors import AnsibleFilterError

from ansible_collections.onprem.gpu.plugins.module_utils._network_benchmark_svg import busbw_chart

# srun -l ("0: ") and OpenMPI --tag-output ("[1,0]<stdout>:") put their prefix before every line.
_LAUNCHER_PREFIX = re.compile(r"^(?:\s*\d+: ?|\[\d+,\d+\]<std(?:out|err)>: ?)")
# "host:pid:tid [dev] NCCL INFO ...".
_NCCL_LINE = re.compile(r"^([^\s:\[\]]+):\d+:\d+ \[\d+\] NCCL INFO (.*?)\s*$")
_IB_DEVICES = re.compile(r"^NET/IB ?: Using((?: \[\d+\][^\s:]+:\d+/\w+)*)")
_IB_DEVICE = re.compile(r"\[\d+\]([^\s:]+):\d+/\w+")
_USING_NETWORK = re.compile(r"^Using network (\S+)")


def network_benchmark_rounds(hosts, partners=2):
    """Rounds of disjoint pairs (the circle method) until every host has met ``partners`` different hosts.

    ``hosts`` is a list of hosts on one fabric, or a dict of such lists by fabric: the pairs of round i of
    every fabric then make round i together, as fabrics share no links. Returns a list of rounds, each a
    list of [host, host] pairs; with an odd number of hosts one sits out each round. Fewer than two hosts
    give no rounds.
    """
    try:
        partners = int(partners)
    except (TypeError, ValueError):
        raise AnsibleFilterError(f"network_benchmark_rounds: partners must be a whole number, not {partners!r}.")
    if isinstance(hosts, dict):
        merged = []
        for fabric in sorted(hosts):
            for index, pairs in enumerate(_fabric_rounds(_host_list(hosts[fabric], "network_benchmark_rounds"), partners)):
                if index == len(merged):
                    merged.append([])
                merged[index].extend(pairs)
        return merged
    return _fabric_rounds(_host_list(hosts, "network_benchmark_rounds"), partners)


def _fabric_rounds(hosts, partners):
    if len(hosts) < 2:
        return []
    wanted = max(1, min(partners, len(hosts) - 1))
    circle = hosts + ([None] if len(hosts) % 2 else [])
    met = {host: set() for host in hosts}
    rounds = []
    for _round in range(len(circle) - 1):
        pairs = []
        for index in range(len(circle) // 2):
            first, second = circle[index], circle[-1 - index]
            if first is not None and second is not None:
                pairs.append([first, second])
                met[first].add(second)
                met[second].add(first)
        rounds.append(pairs)
        if all(len(seen) >= wanted for seen in met.values()):
            break
        # Keep the first host in place and turn the others one step.
        circle = [circle[0], circle[-1]] + circle[1:-1]
    return rounds


def network_benchmark_localise(runs):
    """Which hosts the pair runs point at.

    ``runs`` are the pair runs, each a dict with ``hosts`` (two inventory names) and ``verdict``
    (``pass`` or ``fail``). A host in any passing pair is cleared. A host whose every pair failed is a
    suspect when at least one of those partners was cleared elsewhere, so the failure is its own; when
    none was (two hosts only, or several bad hosts paired together), the hosts of those pairs cannot be
    told apart and are returned as undecided.
    """
    if not isinstance(runs, list):
        raise AnsibleFilterError("network_benchmark_localise: expects a list of runs with hosts and verdict.")
    partners = {}
    passed = set()
    for run in runs:
        try:
            first, second = run["hosts"]
            verdict = run["verdict"]
        except (KeyError, TypeError, ValueError):
            raise AnsibleFilterError(f"network_benchmark_localise: a run needs two hosts and a verdict, not {run!r}.")
        for host, partner in ((first, second), (second, first)):
            partners.setdefault(host, []).append(partner)
        if verdict == "pass":
            passed.update((first, second))
    failing = [host for host in partners if host not in passed]
    suspects = sorted(host for host in failing if any(partner in passed for partner in partners[host]))
    undecided = sorted(host for host in failing if host not in suspects)
    return {"cleared": sorted(passed), "suspects": suspects, "undecided": undecided}


def network_benchmark_nccl_hosts(output):
    """What NCCL's INFO lines in ``output`` say about each host: its RDMA devices and the network it used.

    Returns ``{host: {"rdma_devices": [...], "networks": [...]}}`` keyed by the host name NCCL printed,
    the devices as listed by the last ``NET/IB : Using`` line of that host (``[]`` after ``No device
    found``), the networks named by its ``Using network`` lines.
    """
    if output is None:
        return {}
    if not isinstance(output, str):
        raise AnsibleFilterError("network_benchmark_nccl_hosts: expects the text a run printed.")
    hosts = {}
    for line in output.splitlines():
        match = _NCCL_LINE.match(_LAUNCHER_PREFIX.sub("", line, count=1))
        if not match:
            continue
        host, message = match.groups()
        entry = hosts.setdefault(host, {"rdma_devices": None, "networks": []})
        devices = _IB_DEVICES.match(message)
        if devices:
            entry["rdma_devices"] = _IB_DEVICE.findall(devices.group(1))
        elif message.startswith(("NET/IB : No device found", "NET/IB: No device found")):
            entry["rdma_devices"] = []
        network = _USING_NETWORK.match(message)
        if network and network.group(1) not in entry["networks"]:
            entry["networks"].append(network.group(1))
    return hosts


def network_benchmark_findings(runs, nodes):
    """Judge the runs of playbooks/network_benchmark.yml and name the nodes at fault.

    ``runs`` are the run records the playbook keeps (stage ``single``, ``pair`` or ``all``; ``members``;
    ``verdict``, ``reasons`` and ``rows`` from onprem.gpu.nccl_allreduce; ``output``; ``threshold``...);
    ``nodes`` maps each inventory host to what the inventory declares (``hostname`` NCCL prints, ``rails``,
    ``gpus``, ``model``, ``fabric``). A node is named when it failed alone, when NCCL's own lines show it
    with fewer RDMA NICs than declared or on TCP sockets or failing, when its pairs localise the fault to
    it, or when a run of a whole fabric fails and nothing else explains it.
    """
    if not isinstance(runs, list) or not isinstance(nodes, dict):
        raise AnsibleFilterError("network_benchmark_findings: expects the list of runs and a dict of nodes.")
    reasons = {host: [] for host in nodes}
    by_hostname = {str(node.get("hostname")): host for host, node in nodes.items() if node.get("hostname")}
    enriched = [_enrich(run, nodes) for run in runs]
    for run in enriched:
        for host, sentence in _evidence(run, nodes, by_hostname):
            _add(reasons, host, sentence)
        if run["stage"] == "single" and run["verdict"] != "pass":
            _add(reasons, run["members"][0], f"Alone: {_first(run)}")
    pairs = [run for run in enriched if run["stage"] == "pair"]
    localisation = network_benchmark_localise([{"hosts": run["members"], "verdict": run["verdict"]} for run in pairs])
    for host in localisation["suspects"]:
        failed = [run for run in pairs if host in run["members"]]
        partners = [member for run in failed for member in run["members"] if member != host]
        _add(reasons, host, f"Every pair with it failed (with {', '.join(partners)}), while those nodes passed with others: {_first(failed[0])}")
    for run in pairs:
        if run["verdict"] == "pass" or not set(run["members"]) <= set(localisation["undecided"]):
            continue
        evidenced = [member for member in run["members"] if reasons.get(member)]
        if len(evidenced) == 1:
            continue  # NCCL's lines already point at one of the two
        for member in run["members"]:
            _add(reasons, member, f"The pair {' + '.join(run['members'])} failed and neither node passed with another, so it cannot tell "
                                  f"which is at fault (pair each with a known-good node): {_first(run)}")
    for run in enriched:
        if run["stage"] == "all" and run["verdict"] != "pass" and not any(reasons.get(member) for member in run["members"]):
            for member in run["members"]:
                _add(reasons, member, f"The run of all {len(run['members'])} nodes of {run['fabric']} failed although every pair passed: {_first(run)}")
    ran = {member for run in enriched for member in run["members"]}
    hosts = {
        host: {
            "verdict": "fail" if reasons[host] else ("pass" if host in ran else "not run"),
            "reasons": reasons[host],
            "runs": [run["id"] for run in enriched if host in run["members"]],
        }
        for host in sorted(nodes)
    }
    return {
        "runs": enriched,
        "stages": _stages(enriched),
        "hosts": hosts,
        "named": sorted(host for host in hosts if hosts[host]["verdict"] == "fail"),
        "localisation": localisation,
        "counts": {stage: len([run for run in enriched if run["stage"] == stage]) for stage in _STAGE_TITLES},
    }


_STAGE_TITLES = {"single": "each node alone", "pair": "pairs of nodes", "all": "all nodes of each fabric"}
_TEST_FAILURE = re.compile(r"^([^\s:]+): Test (NCCL|CUDA) failure \S+ '(.*)'\s*$")


def _enrich(run, nodes):
    try:
        members = list(run["members"])
        stage = run["stage"]
    except (KeyError, TypeError):
        raise AnsibleFilterError(f"network_benchmark_findings: a run needs a stage and members, not {run!r}.")
    run = dict(run, members=members, reasons=list(run.get("reasons") or []), rows=list(run.get("rows") or []))
    if stage == "single":
        node = nodes.get(members[0], {})
        title = f"{members[0]} alone ({node.get('gpus', '?')} x {node.get('model', 'GPU')})"
    elif stage == "pair":
        title = " + ".join(members)
    else:
        title = f"all {len(members)} nodes of {run.get('fabric', 'the fabric')}"
    sizes = [row.get("size") for row in run["rows"]]
    run["title"] = title
    run["series"] = [
        {"label": label, "points": [[size, (row.get(half) or {}).get("busbw")] for size, row in zip(sizes, run["rows"])]}
        for label, half in (("out-of-place", "out_of_place"), ("in-place", "in_place"))
    ]
    try:
        run["duration_s"] = round(float(run.get("ended")) - float(run.get("started")), 1)
    except (TypeError, ValueError):
        run["duration_s"] = None
    return run


def _evidence(run, nodes, by_hostname):
    """(host, sentence) for what NCCL's own lines in one run say about its members."""
    seen = network_benchmark_nccl_hosts(run.get("output") or "")
    for printed, entry in seen.items():
        host = by_hostname.get(printed)
        if host is None or host not in run["members"]:
            continue
        rails = int(nodes[host].get("rails") or 0)
        devices = entry["rdma_devices"]
        if rails and devices is not None and 0 < len(devices) < rails:
            yield host, f"NCCL found {len(devices)} of its {rails} RDMA NICs ({', '.join(devices)}): a rail is down or NCCL_IB_HCA leaves it out."
        if rails and ("Socket" in entry["networks"] or devices == []):
            yield host, ("NCCL found no usable RDMA device on it and would fall back to TCP sockets: "
                         "check the RDMA driver, rdma-core and the links (ibv_devinfo).")
    for line in (run.get("output") or "").splitlines():
        match = _TEST_FAILURE.match(_LAUNCHER_PREFIX.sub("", line, count=1))
        host = by_hostname.get(match.group(1)) if match else None
        if host is not None:
            yield host, f"{match.group(2)} failed on it: {match.group(3).split(' / ')[-1] or match.group(3)}."


def _stages(runs):
    stages = []
    for stage, title in _STAGE_TITLES.items():
        members = [run for run in runs if run["stage"] == stage and run["rows"]]
        if not members:
            continue
        thresholds = {float(run["threshold"]) for run in members}
        stages.append({
            "id": f"stage-{stage}",
            "stage": stage,
            "title": f"busbw of {title}",
            # One line only when every run has the same threshold; the report's tables give each run's.
            "threshold": thresholds.pop() if len(thresholds) == 1 else None,
            "min_size": members[0].get("min_size"),
            # Each run's threshold and verdict mark its bar when a stage has more runs than curves can show.
            "series": [{"label": run["title"].split(" (")[0], "points": run["series"][0]["points"], "threshold": run["threshold"],
                        "verdict": run["verdict"]} for run in members],
        })
    return stages


def _add(reasons, host, sentence):
    if host in reasons and sentence not in reasons[host]:
        reasons[host].append(sentence)


def _first(run):
    """The reason that says most: the exit code only when nothing else explains the failure."""
    telling = [reason for reason in run["reasons"] if not reason.startswith("The benchmark exited with code")]
    return (telling or run["reasons"] or ["The run failed."])[0]


def network_benchmark_svg(series, title, threshold=None, min_size=None):
    """An SVG line chart of busbw against message size: see plugins/module_utils/_network_benchmark_svg.py."""
    try:
        return busbw_chart(series, title, threshold=threshold, min_size=min_size)
    except ValueError as error:
        raise AnsibleFilterError(f"network_benchmark_svg: {error}") from error


def network_benchmark_report_files(verdict, runs):
    """The report's files other than the templated ones, by path under the report directory: an SVG chart per run and per
    stage (``charts/<id>.svg``, from the verdict's ``runs`` and ``stages``) and each run's output (``logs/<id>.log``)."""
    files = {}
    try:
        for chart in list(verdict["runs"]) + list(verdict["stages"]):
            files[f"charts/{chart['id']}.svg"] = busbw_chart(chart["series"], chart["title"], threshold=chart["threshold"],
                                                             min_size=chart["min_size"])
        for run in runs:
            files[f"logs/{run['id']}.log"] = run["output"]
    except (KeyError, TypeError, ValueError) as error:
        raise AnsibleFilterError(f"network_benchmark_report_files: {error}") from error
    return files


def _host_list(hosts, name):
    if not isinstance(hosts, list) or not all(isinstance(host, str) for host in hosts):
        raise AnsibleFilterError(f"{name}: expects a list of host names, not {hosts!r}.")
    if len(set(hosts)) != len(hosts):
        raise AnsibleFilterError(f"{name}: the host list names a host twice: {hosts!r}.")
    return list(hosts)


class FilterModule:
    def filters(self):
        return {
            "network_benchmark_rounds": network_benchmark_rounds,
            "network_benchmark_localise": network_benchmark_localise,
            "network_benchmark_nccl_hosts": network_benchmark_nccl_hosts,
            "network_benchmark_findings": network_benchmark_findings,
            "network_benchmark_svg": network_benchmark_svg,
            "network_benchmark_report_files": network_benchmark_report_files,
        }
