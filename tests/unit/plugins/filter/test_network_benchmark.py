# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The helpers of the network_benchmark role: pair rounds, localisation, NCCL's view of each host, findings, charts (drawn by
plugins/module_utils/_network_benchmark_svg.py, tested in tests/unit/plugins/module_utils/test__network_benchmark_svg.py)."""

from __future__ import annotations

import itertools
from xml.etree import ElementTree

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.onprem.gpu.plugins.filter.network_benchmark import (
    FilterModule,
    network_benchmark_findings,
    network_benchmark_localise,
    network_benchmark_nccl_hosts,
    network_benchmark_report_files,
    network_benchmark_rounds,
    network_benchmark_svg,
)

GIB = 1 << 30


def hosts(count):
    return [f"gpu{index}" for index in range(1, count + 1)]


@pytest.mark.parametrize("count", range(2, 17))
def test_rounds_pair_each_host_with_two_partners_and_never_twice_in_a_round(count):
    rounds = network_benchmark_rounds(hosts(count))
    met = {host: set() for host in hosts(count)}
    seen_pairs = set()
    for pairs in rounds:
        in_round = [host for pair in pairs for host in pair]
        assert len(in_round) == len(set(in_round)), "a host runs twice in one round"
        assert len(pairs) == count // 2
        for first, second in pairs:
            assert frozenset((first, second)) not in seen_pairs
            seen_pairs.add(frozenset((first, second)))
            met[first].add(second)
            met[second].add(first)
    assert all(len(partners) >= min(2, count - 1) for partners in met.values())


@pytest.mark.parametrize(("count", "rounds", "runs"), [(2, 1, 1), (3, 3, 3), (4, 2, 4), (5, 3, 6), (8, 2, 8), (9, 3, 12), (16, 2, 16)])
def test_number_of_rounds_and_pair_runs(count, rounds, runs):
    planned = network_benchmark_rounds(hosts(count))
    assert (len(planned), sum(len(pairs) for pairs in planned)) == (rounds, runs)


def test_rounds_of_several_fabrics_run_side_by_side():
    planned = network_benchmark_rounds({"dc2": ["e", "f"], "dc1": ["a", "b", "c", "d"]})
    assert planned == [[["a", "d"], ["b", "c"], ["e", "f"]], [["a", "c"], ["d", "b"]]]


def test_more_partners_and_small_fabrics():
    assert network_benchmark_rounds(["a"]) == []
    assert network_benchmark_rounds([]) == []
    every_pair = network_benchmark_rounds(hosts(6), partners=5)
    assert sorted(sorted(pair) for pairs in every_pair for pair in pairs) == sorted(sorted(pair) for pair in itertools.combinations(hosts(6), 2))


@pytest.mark.parametrize("bad", ["gpu1", ["gpu1", "gpu1"], [1, 2]])
def test_rounds_refuse_bad_host_lists(bad):
    with pytest.raises(AnsibleFilterError, match="network_benchmark_rounds"):
        network_benchmark_rounds(bad)


def verdicts(pass_unless, rounds):
    return [{"hosts": pair, "verdict": "fail" if set(pair) & pass_unless else "pass"} for pairs in rounds for pair in pairs]


@pytest.mark.parametrize("count", [3, 4, 5, 6, 8])
def test_any_one_bad_host_is_localised(count):
    rounds = network_benchmark_rounds(hosts(count))
    for bad in hosts(count):
        found = network_benchmark_localise(verdicts({bad}, rounds))
        assert found["suspects"] == [bad] and found["undecided"] == [], (count, bad, found)
        assert bad not in found["cleared"]


def test_two_hosts_cannot_be_told_apart():
    assert network_benchmark_localise([{"hosts": ["a", "b"], "verdict": "fail"}]) == {"cleared": [], "suspects": [], "undecided": ["a", "b"]}


def test_localise_refuses_malformed_runs():
    with pytest.raises(AnsibleFilterError, match="two hosts and a verdict"):
        network_benchmark_localise([{"hosts": ["a"], "verdict": "pass"}])


OUTPUT = """\
dc1-gpu1:100:100 [0] NCCL INFO Bootstrap: Using eth0:10.89.50.21<0>
dc1-gpu1:100:130 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.89.50.21<0>
dc1-gpu1:100:130 [0] NCCL INFO Using network IB
[1,8]<stdout>:dc1-gpu2:200:230 [0] NCCL INFO NET/IB : No device found.
[1,8]<stdout>:dc1-gpu2:200:230 [0] NCCL INFO NET/Socket : Using [0]eth0:10.89.50.22<0>
[1,8]<stdout>:dc1-gpu2:200:230 [0] NCCL INFO Using network Socket
dc1-gpu3:300:330 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB eth0:10.89.50.23<0>
#  Rank  0 Group  0 Pid    100 on   dc1-gpu1 device  0 [0000:18:00] NVIDIA H100 80GB HBM3
"""


def test_nccl_hosts_reads_each_hosts_devices_and_network():
    assert network_benchmark_nccl_hosts(OUTPUT) == {
        "dc1-gpu1": {"rdma_devices": ["mlx5_0", "mlx5_1"], "networks": ["IB"]},
        "dc1-gpu2": {"rdma_devices": [], "networks": ["Socket"]},
        "dc1-gpu3": {"rdma_devices": ["mlx5_0"], "networks": []},
    }
    assert network_benchmark_nccl_hosts("") == {} and network_benchmark_nccl_hosts(None) == {}


NODES = {
    host: {"hostname": host, "rails": 2, "gpus": 8, "model": "NVIDIA H100 80GB HBM3", "fabric": "dc1"}
    for host in ("dc1-gpu1", "dc1-gpu2", "dc1-gpu3", "dc1-gpu4")
}


def run(stage, members, verdict="pass", reasons=(), output="", busbw=370.0):
    rows = [{"size": size, "out_of_place": {"busbw": busbw * 0.99}, "in_place": {"busbw": busbw}} for size in (GIB, 2 * GIB)]
    return {
        "id": f"{stage}-{'+'.join(members)}", "stage": stage, "members": list(members), "fabric": "dc1", "verdict": verdict,
        "reasons": list(reasons), "rows": rows if verdict == "pass" or busbw else [], "output": output, "threshold": 296.0,
        "expected": 370.0, "min_size": GIB, "started": 10.0, "ended": 14.5,
    }


def test_healthy_runs_name_nobody():
    runs = [run("single", [host]) for host in NODES] + [run("pair", pair) for pair in (["dc1-gpu1", "dc1-gpu4"], ["dc1-gpu2", "dc1-gpu3"])]
    findings = network_benchmark_findings(runs, NODES)
    assert findings["named"] == []
    assert {host: result["verdict"] for host, result in findings["hosts"].items()} == dict.fromkeys(NODES, "pass")
    assert findings["counts"] == {"single": 4, "pair": 2, "all": 0}
    assert findings["runs"][0]["title"] == "dc1-gpu1 alone (8 x NVIDIA H100 80GB HBM3)" and findings["runs"][0]["duration_s"] == 4.5
    assert [stage["id"] for stage in findings["stages"]] == ["stage-single", "stage-pair"]
    assert findings["stages"][0]["threshold"] == 296.0
    # Each series carries its run's threshold and verdict, which mark its bar when a rack's stage is drawn as bars.
    assert [(series["label"], series["threshold"], series["verdict"]) for series in findings["stages"][1]["series"]] == [
        ("dc1-gpu1 + dc1-gpu4", 296.0, "pass"), ("dc1-gpu2 + dc1-gpu3", 296.0, "pass")]


def test_a_pair_localised_node_is_named_alone():
    slow = "The peak busbw at 1 GiB and above is 92.89 GB/s, below the required 296 GB/s."
    runs = [
        run("pair", ["dc1-gpu1", "dc1-gpu4"]), run("pair", ["dc1-gpu2", "dc1-gpu3"], "fail", [slow], busbw=92.0),
        run("pair", ["dc1-gpu1", "dc1-gpu3"], "fail", [slow], busbw=92.0), run("pair", ["dc1-gpu4", "dc1-gpu2"]),
    ]
    findings = network_benchmark_findings(runs, NODES)
    assert findings["named"] == ["dc1-gpu3"]
    assert findings["hosts"]["dc1-gpu3"]["reasons"] == [
        f"Every pair with it failed (with dc1-gpu2, dc1-gpu1), while those nodes passed with others: {slow}"
    ]


def test_nccl_evidence_names_the_host_a_lone_pair_cannot():
    output = ("a:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB eth0:1<0>\n"
              "b:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [RO]; OOB eth0:2<0>\n")
    nodes = {"node-a": dict(NODES["dc1-gpu1"], hostname="a"), "node-b": dict(NODES["dc1-gpu1"], hostname="b")}
    findings = network_benchmark_findings([run("pair", ["node-a", "node-b"], "fail", ["slow"], output, busbw=180.0)], nodes)
    assert findings["named"] == ["node-b"]
    assert findings["hosts"]["node-b"]["reasons"] == ["NCCL found 1 of its 2 RDMA NICs (mlx5_0): a rail is down or NCCL_IB_HCA leaves it out."]


def test_a_failed_pair_without_evidence_names_both():
    findings = network_benchmark_findings([run("pair", ["dc1-gpu1", "dc1-gpu2"], "fail", ["slow"], busbw=100.0)], NODES)
    assert findings["named"] == ["dc1-gpu1", "dc1-gpu2"]
    assert "cannot tell which is at fault" in findings["hosts"]["dc1-gpu1"]["reasons"][0]
    assert findings["hosts"]["dc1-gpu3"]["verdict"] == "not run"


def test_failing_alone_and_nccl_failure_lines():
    output = ("dc1-gpu2:200:230 [0] NCCL INFO NET/IB : No device found.\n"
              "dc1-gpu2: Test NCCL failure common.cu:1148 'invalid usage (run with NCCL_DEBUG=WARN for details) / Failed to initialize any NET plugin'\n")
    reasons = ["The benchmark exited with code 3, which nccl-tests uses for an NCCL error.", "NCCL could not start the network that NCCL_NET asks for."]
    findings = network_benchmark_findings([run("single", ["dc1-gpu2"], "fail", reasons, output, busbw=0)], NODES)
    assert findings["named"] == ["dc1-gpu2"]
    assert findings["hosts"]["dc1-gpu2"]["reasons"] == [
        "NCCL found no usable RDMA device on it and would fall back to TCP sockets: check the RDMA driver, rdma-core and the links (ibv_devinfo).",
        "NCCL failed on it: Failed to initialize any NET plugin.",
        "Alone: NCCL could not start the network that NCCL_NET asks for.",
    ]


def test_a_failed_fabric_run_names_its_nodes_when_nothing_else_does():
    runs = [run("pair", ["dc1-gpu1", "dc1-gpu2"]), run("pair", ["dc1-gpu3", "dc1-gpu4"]), run("all", list(NODES), "fail", ["slow at scale"], busbw=200.0)]
    findings = network_benchmark_findings(runs, NODES)
    assert findings["named"] == sorted(NODES)
    assert findings["hosts"]["dc1-gpu1"]["reasons"] == ["The run of all 4 nodes of dc1 failed although every pair passed: slow at scale"]


def test_findings_refuse_malformed_input():
    with pytest.raises(AnsibleFilterError, match="stage and members"):
        network_benchmark_findings([{"verdict": "pass"}], NODES)
    with pytest.raises(AnsibleFilterError, match="list of runs"):
        network_benchmark_findings({}, NODES)


def test_svg_filter_draws_the_chart_and_turns_bad_input_into_a_filter_error():
    svg = network_benchmark_svg([{"label": "in-place", "points": [[GIB, 370.0]]}], "dc1-gpu1 + dc1-gpu2", threshold=296, min_size=GIB)
    assert ElementTree.fromstring(svg).tag == "{http://www.w3.org/2000/svg}svg"
    with pytest.raises(AnsibleFilterError, match="network_benchmark_svg: series must be a list"):
        network_benchmark_svg({"label": "x"}, "bad")


def test_report_files_hold_a_chart_per_run_and_stage_and_each_runs_output():
    runs = [run("single", [host], output=f"{host} out\n") for host in NODES] + [run("pair", ["dc1-gpu1", "dc1-gpu2"], output="pair out\n")]
    findings = network_benchmark_findings(runs, NODES)
    files = network_benchmark_report_files(findings, runs)
    charts = sorted(path for path in files if path.startswith("charts/"))
    assert charts == sorted([f"charts/{entry['id']}.svg" for entry in findings["runs"]] + ["charts/stage-single.svg", "charts/stage-pair.svg"])
    assert len(charts) == len(runs) + 2
    for chart in charts:
        assert ElementTree.fromstring(files[chart]).tag == "{http://www.w3.org/2000/svg}svg"
    assert files["logs/single-dc1-gpu1.log"] == "dc1-gpu1 out\n" and files["logs/pair-dc1-gpu1+dc1-gpu2.log"] == "pair out\n"
    with pytest.raises(AnsibleFilterError, match="network_benchmark_report_files: 'stages'"):
        network_benchmark_report_files({"runs": []}, runs)


def test_filters_are_registered():
    assert set(FilterModule().filters()) == {
        "network_benchmark_rounds", "network_benchmark_localise", "network_benchmark_nccl_hosts", "network_benchmark_findings", "network_benchmark_svg",
        "network_benchmark_report_files",
    }
