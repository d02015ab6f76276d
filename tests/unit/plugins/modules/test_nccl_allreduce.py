# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import json
from pathlib import Path
from unittest import mock

import pytest

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args

from ansible_collections.onprem.gpu.plugins.modules import nccl_allreduce

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nccl"
TIMEOUT = "/usr/bin/timeout"
ALL_REDUCE_PERF = "/usr/bin/all_reduce_perf"
MPIRUN = "/usr/bin/mpirun"
BIN_PATHS = {"timeout": TIMEOUT, "all_reduce_perf": ALL_REDUCE_PERF, "mpirun": MPIRUN}
SWEEP = ["-b", "1073741824", "-e", "8589934592", "-f", "2"]
ITERATIONS = ["-n", "20", "-w", "5", "-c", "1"]
DEFAULT_ENV = {"NCCL_DEBUG_SUBSYS": "INIT,NET", "NCCL_DEBUG": "INFO"}

ONE_RANK = (
    "busbw is 0 because only one rank took part (busbw = algbw x 2(n-1)/n): run one rank per GPU "
    "on several GPUs, with an nccl-tests built with MPI=1 under mpirun across hosts."
)


def fixture_text(name):
    return (FIXTURES / name).read_text(encoding="utf-8")


def run_module(args, capsys, command_result=None, bin_paths=None, euid=1000, clock=(0.0, 42.0)):
    """Run main() with patched binaries, command, user and clock; return its JSON output, as text and parsed, and the mocks."""
    paths = BIN_PATHS if bin_paths is None else bin_paths
    with patch_module_args(args), mock.patch.object(
        AnsibleModule, "get_bin_path", side_effect=lambda name, required=False: paths.get(name)
    ) as get_bin_path, mock.patch.object(AnsibleModule, "run_command", return_value=command_result) as run_command, mock.patch.object(
        nccl_allreduce.os, "geteuid", return_value=euid
    ), mock.patch.object(
        nccl_allreduce.time, "monotonic", side_effect=clock
    ), pytest.raises(
        SystemExit
    ):
        nccl_allreduce.main()
    output = capsys.readouterr().out
    return output, json.loads(output), get_bin_path, run_command


@pytest.mark.parametrize("check_mode", [False, True], ids=["run", "check-mode"])
def test_single_node_run(check_mode, capsys):
    stdout = fixture_text("singlenode_8xH100_per-iteration_memory-capped_v2.19.6.txt")
    dummy, result, dummy, run_command = run_module({"min_busbw": 450, "_ansible_check_mode": check_mode}, capsys, (0, stdout, ""))
    cmd = [TIMEOUT, "-k", "30", "600", ALL_REDUCE_PERF] + SWEEP + ["-g", "8"] + ITERATIONS
    run_command.assert_called_once_with(cmd, environ_update=dict(DEFAULT_ENV, LC_ALL="C"))
    assert "failed" not in result
    assert {key: result[key] for key in ("changed", "verdict", "reasons", "judged_busbw", "cmd", "rc", "stdout", "env", "ranks", "hosts")} == {
        "changed": False,
        "verdict": "pass",
        "reasons": [],
        "judged_busbw": 480.57,
        "cmd": cmd,
        "rc": 0,
        "stdout": stdout,
        "env": DEFAULT_ENV,
        "ranks": 8,
        "hosts": ["hgx-h100-01"],
    }


def test_run_across_hosts_as_root(capsys):
    args = {
        "hosts": ["gpu-b01", "gpu-b02"],
        "nccl_ib_hca": ["mlx5_0", "mlx5_1"],
        "nccl_ib_gid_index": 3,
        "nccl_ib_tc": 106,
        "nccl_socket_ifname": "ib0",
        "nccl_net": "IB",
        "nccl_env": {"NCCL_ALGO": "Ring", "NCCL_IB_QPS_PER_CONNECTION": 2},
        "mpirun_args": ["--mca", "btl_tcp_if_exclude", "lo,docker0"],
        "expect_transport": "IB",
        "min_busbw": 350,
        "timeout": 900,
    }
    stdout = fixture_text("multinode_2x8_H100_ib_info_interleaved_v2.16.7.txt")
    dummy, result, dummy, run_command = run_module(args, capsys, (0, stdout, ""), euid=0)
    environment = {
        "NCCL_DEBUG_SUBSYS": "INIT,NET",
        "NCCL_ALGO": "Ring",
        "NCCL_IB_QPS_PER_CONNECTION": "2",
        "NCCL_IB_HCA": "mlx5_0,mlx5_1",
        "NCCL_IB_GID_INDEX": "3",
        "NCCL_IB_TC": "106",
        "NCCL_SOCKET_IFNAME": "ib0",
        "NCCL_NET": "IB",
        "NCCL_DEBUG": "INFO",
    }
    forwarded = [text for name in sorted(environment) for text in ("-x", name)]
    cmd = (
        [TIMEOUT, "-k", "30", "900", MPIRUN, "--allow-run-as-root", "-np", "16", "-H", "gpu-b01:8,gpu-b02:8", "--bind-to", "none"]
        + forwarded
        + ["--mca", "btl_tcp_if_exclude", "lo,docker0", ALL_REDUCE_PERF]
        + SWEEP
        + ["-g", "1"]
        + ITERATIONS
    )
    run_command.assert_called_once_with(cmd, environ_update=dict(environment, LC_ALL="C"))
    assert (result["verdict"], result["reasons"], result["judged_busbw"], result["transport"], result["env"]) == ("pass", [], 391.88, "IB", environment)


def test_openmpi_tcp_is_pinned_to_the_management_network(capsys):
    args = {"hosts": ["gpu-b01", "gpu-b02"], "mpirun_tcp_include": ["eno1"], "min_busbw": 350}
    stdout = fixture_text("multinode_2x8_H100_ib_info_interleaved_v2.16.7.txt")
    dummy, result, dummy, run_command = run_module(args, capsys, (0, stdout, ""))
    launcher = [MPIRUN, "-np", "16", "-H", "gpu-b01:8,gpu-b02:8", "--bind-to", "none"]
    launcher += ["--mca", "oob_tcp_if_include", "eno1", "--mca", "btl_tcp_if_include", "eno1", "-x", "NCCL_DEBUG", "-x", "NCCL_DEBUG_SUBSYS"]
    assert run_command.call_args.args[0] == [TIMEOUT, "-k", "30", "600"] + launcher + [ALL_REDUCE_PERF] + SWEEP + ["-g", "1"] + ITERATIONS
    assert result["verdict"] == "pass"


@pytest.mark.parametrize(
    "fixture, options, verdict, judged_min_busbw",
    [
        pytest.param("singlenode_8xH100_nvls_info_v2.19.6.txt", {}, "pass", 384, id="nvls"),
        pytest.param("singlenode_8xH100_no_nvls_ring_v2.19.6.txt", {}, "pass", 296, id="no-nvls"),
        pytest.param("singlenode_8xH100_no_nvls_ring_v2.19.6.txt", {"min_busbw_without_nvls": None}, "fail", 384, id="no-nvls-threshold-unset"),
        # Run with NCCL_ALGO=Ring: the module knows all-reduce kept off NVLS whatever the log says.
        pytest.param(
            "singlenode_8xH100_per-iteration_memory-capped_v2.19.6.txt",
            {"nccl_env": {"NCCL_ALGO": "Ring"}, "min_busbw_without_nvls": 490},
            "fail",
            490,
            id="nccl-algo-ring",
        ),
        pytest.param("singlenode_8xH100_per-iteration_memory-capped_v2.19.6.txt", {"min_busbw_without_nvls": 490}, "pass", 384, id="not-said"),
    ],
)
def test_single_node_threshold_follows_nvls(fixture, options, verdict, judged_min_busbw, capsys):
    args = dict({"min_busbw": 384, "min_busbw_without_nvls": 296}, **options)
    dummy, result, dummy, dummy = run_module(args, capsys, (0, fixture_text(fixture), ""))
    assert (result["verdict"], result["judged_min_busbw"]) == (verdict, judged_min_busbw)


@pytest.mark.parametrize("min_busbw", [350, 1000], ids=["passing", "failing"])
def test_secret_values_never_reach_the_result(min_busbw, capsys):
    secret = "tok-9f8e7d6c"
    stdout = fixture_text("multinode_2x8_H100_ib_info_interleaved_v2.16.7.txt") + f"gpu-b01:1:1 [0] NCCL INFO PLUGIN_TOKEN set by environment to {secret}\n"
    args = {"hosts": ["gpu-b01", "gpu-b02"], "environment": {"PLUGIN_TOKEN": secret}, "min_busbw": min_busbw}
    output, result, dummy, run_command = run_module(args, capsys, (0, stdout, f"plugin: using {secret}\n"))
    assert secret not in output
    assert result["env"]["PLUGIN_TOKEN"] == "********"
    assert ["-x", "PLUGIN_TOKEN"] == result["cmd"][15:17]
    assert run_command.call_args.kwargs["environ_update"]["PLUGIN_TOKEN"] == secret


def output_file_args(tmp_path, fixture, **options):
    path = tmp_path / fixture
    path.write_text(fixture_text(fixture), encoding="utf-8")
    return dict(options, output_file=str(path))


def test_output_file_that_passes(tmp_path, capsys):
    args = output_file_args(tmp_path, "multinode_2x8_H200_roce_c0_v2.17.3.json", min_busbw=450)
    dummy, result, get_bin_path, run_command = run_module(args, capsys)
    get_bin_path.assert_not_called()
    run_command.assert_not_called()
    assert (result["verdict"], result["judged_busbw"], result["ranks"], result["changed"]) == ("pass", 481.93, 16, False)
    assert not {"cmd", "rc", "stdout", "env"} & set(result)


SOCKET_FALLBACK = (
    "NCCL fell back to TCP sockets instead of RDMA over IB: check that the RDMA devices are up on every host (ibv_devinfo), "
    "NCCL_IB_HCA, and libibverbs; set NCCL_NET=IB to make this an error at start."
)


@pytest.mark.parametrize(
    "fixture, options, msg, reasons",
    [
        pytest.param(
            "multinode_2x8_H100_socket_fallback_tag-output_v2.14.1.txt",
            dict(expect_transport="IB", min_busbw=100),
            "The all-reduce benchmark failed its check: nccl-tests marked the average busbw of 4.66625 GB/s FAILED: "
            "it is below 0.9 x NCCL_TESTS_MIN_BW; 2 more in reasons.",
            [
                "nccl-tests marked the average busbw of 4.66625 GB/s FAILED: it is below 0.9 x NCCL_TESTS_MIN_BW.",
                SOCKET_FALLBACK,
                "The peak busbw at 1 GiB and above is 4.85 GB/s, below the required 100 GB/s.",
            ],
            id="socket-fallback-and-low-bandwidth",
        ),
        pytest.param(
            "singlenode_8xH100_v2.13.0_wrong_results.txt",
            dict(min_size="128M"),
            "The all-reduce benchmark failed its check: 2 of 5 rows report wrong results (#wrong above 0), the first at 1 GiB: "
            "the all-reduce returned corrupted data; 1 more in reasons.",
            [
                "2 of 5 rows report wrong results (#wrong above 0), the first at 1 GiB: the all-reduce returned corrupted data.",
                "nccl-tests counted 2 out-of-bounds values (FAILED): its correctness checks found corrupted data.",
            ],
            id="wrong-results",
        ),
        pytest.param(
            "usage_invalid_option_v2.19.6.txt",
            dict(min_busbw=100),
            "The all-reduce benchmark failed its check: all_reduce_perf printed its usage text instead of running: "
            "this build does not understand one of the options it was given.",
            ["all_reduce_perf printed its usage text instead of running: this build does not understand one of the options it was given."],
            id="usage-text",
        ),
        pytest.param(
            "missing_libnccl.txt",
            {},
            "The all-reduce benchmark failed its check: The output holds no results table, so the benchmark did not run to its first measurement.",
            ["The output holds no results table, so the benchmark did not run to its first measurement."],
            id="no-table",
        ),
        pytest.param(
            "multinode_2x8_H200_roce_v2.18.3.txt",
            dict(min_busbw=490, min_size="16G", expect_transport="RoCE"),
            "The all-reduce benchmark failed its check: NCCL did not log which network it used, so RoCE cannot be confirmed: "
            "run with NCCL_DEBUG=INFO; 1 more in reasons.",
            [
                "NCCL did not log which network it used, so RoCE cannot be confirmed: run with NCCL_DEBUG=INFO.",
                "The peak busbw at 16 GiB and above is 485.66 GB/s, below the required 490 GB/s.",
            ],
            id="recorded-run-without-info-lines",
        ),
    ],
)
def test_output_file_that_fails(tmp_path, capsys, fixture, options, msg, reasons):
    dummy, result, dummy, dummy = run_module(output_file_args(tmp_path, fixture, **options), capsys)
    assert (result["failed"], result["msg"], result["verdict"], result["reasons"]) == (True, msg, "fail", reasons)
    assert "cmd" not in result


def test_empty_output_file(tmp_path, capsys):
    path = tmp_path / "all_reduce.out"
    path.write_text("", encoding="utf-8")
    dummy, result, dummy, dummy = run_module({"output_file": str(path)}, capsys)
    assert (result["msg"], result["reasons"]) == (
        "The all-reduce benchmark failed its check: The output is empty: nccl-tests printed nothing.",
        ["The output is empty: nccl-tests printed nothing."],
    )


def test_missing_output_file(tmp_path, capsys):
    missing = str(tmp_path / "absent.out")
    dummy, result, dummy, dummy = run_module({"output_file": missing}, capsys)
    assert (result["failed"], result["msg"]) == (True, f"Cannot read output_file {missing}: No such file or directory.")


def test_output_file_and_hosts_exclude_each_other(capsys):
    dummy, result, dummy, run_command = run_module({"output_file": "/tmp/x", "hosts": ["a"]}, capsys)
    run_command.assert_not_called()
    assert result["msg"] == "parameters are mutually exclusive: output_file|hosts"


def test_one_rank_when_hosts_were_given(capsys):
    stdout = fixture_text("singlenode_1xH100_one_rank_v2.20.0.txt")
    dummy, result, dummy, dummy = run_module({"hosts": ["gpu-a01", "gpu-a02"]}, capsys, (0, stdout, ""))
    assert result["reasons"] == [
        ONE_RANK,
        "The output lists 1 rank, not the 16 that were started.",
        "The ranks ran on 1 host (hgx-h100-05), not on the 2 asked for.",
    ]


@pytest.mark.parametrize(
    "rc, clock, first_reason",
    [
        pytest.param(
            124,
            (0.0, 600.2),
            "The benchmark did not finish within 600 seconds and was stopped: a run that hangs after '# Using devices' "
            "usually has a host that cannot reach the others.",
            id="stopped-by-timeout",
        ),
        pytest.param(
            137,
            (0.0, 631.0),
            "The benchmark did not finish within 600 seconds and was stopped: a run that hangs after '# Using devices' "
            "usually has a host that cannot reach the others.",
            id="killed-after-timeout",
        ),
        pytest.param(137, (0.0, 12.0), "The benchmark exited with code 137.", id="killed-before-timeout"),
    ],
)
def test_run_that_stopped(rc, clock, first_reason, capsys):
    stdout = fixture_text("multinode_2x8_H100_truncated_v2.17.7.txt")
    dummy, result, dummy, dummy = run_module({"hosts": ["gpu-c01", "gpu-c02"]}, capsys, (rc, stdout, ""), clock=clock)
    assert result["reasons"] == [first_reason, "The run stopped after the 2 GiB row, before its footer: it was cut short or crashed."]
    assert result["rc"] == rc


def test_nccl_error_reads_stdout_and_stderr(capsys):
    text = fixture_text("multinode_2x8_H100_nccl_failure_v2.18.3.txt")
    mpirun_banner = text.index("-----")
    dummy, result, dummy, dummy = run_module({"hosts": ["gpu-c03", "gpu-c04"]}, capsys, (3, text[:mpirun_banner], text[mpirun_banner:]))
    assert result["reasons"] == [
        "The benchmark exited with code 3: nccl-tests stopped on an NCCL error.",
        "NCCL failed on gpu-c04: remote process exited or there was a network error - "
        "NET/IB: Got completion from peer 10.20.1.3<41872> with status=12 opcode=0 len=0 vendor err 129 (Recv).",
        "mpirun reports that one or more ranks exited with a non-zero status.",
        "The run stopped after the 2 GiB row, before its footer: it was cut short or crashed.",
    ]
    assert result["nccl_warnings"] == ["NET/IB: Got completion from peer 10.20.1.3<41872> with status=12 opcode=0 len=0 vendor err 129 (Recv)"]


@pytest.mark.parametrize(
    "args, bin_paths, msg",
    [
        pytest.param(
            {},
            {"timeout": TIMEOUT},
            "all_reduce_perf was not found on this host: install nccl-tests (all_reduce_perf), or give its path.",
            id="all-reduce-perf",
        ),
        pytest.param(
            {"hosts": ["a", "b"]},
            {"timeout": TIMEOUT, "all_reduce_perf": ALL_REDUCE_PERF},
            "mpirun was not found on this host: install OpenMPI (mpirun), or give its path.",
            id="mpirun",
        ),
        pytest.param(
            {"all_reduce_perf": "/opt/nccl-tests/build/all_reduce_perf"},
            BIN_PATHS,
            "/opt/nccl-tests/build/all_reduce_perf was not found on this host: install nccl-tests (all_reduce_perf), or give its path.",
            id="explicit-path",
        ),
    ],
)
def test_missing_binaries(args, bin_paths, msg, capsys):
    dummy, result, dummy, run_command = run_module(args, capsys, bin_paths=bin_paths)
    run_command.assert_not_called()
    assert (result["failed"], result["msg"]) == (True, msg)


def test_explicit_binary_path(capsys, tmp_path):
    # A path is taken as it is (no PATH lookup) when it is an executable file.
    binary = tmp_path / "all_reduce_perf"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    stdout = fixture_text("singlenode_8xH100_per-iteration_memory-capped_v2.19.6.txt")
    dummy, result, get_bin_path, dummy = run_module({"all_reduce_perf": str(binary)}, capsys, (0, stdout, ""))
    assert get_bin_path.call_args_list == [mock.call("timeout", required=True)]
    assert result["cmd"][4] == str(binary)


def test_invalid_options_fail_before_running(capsys):
    args = {"gpus_per_host": 0, "min_bytes": "8G", "max_bytes": "1G", "warmup_iters": -1}
    dummy, result, dummy, run_command = run_module(args, capsys)
    run_command.assert_not_called()
    assert result["msg"] == (
        "gpus_per_host must be at least 1, not 0. warmup_iters must not be negative, not -1. "
        "min_bytes (8589934592) is larger than max_bytes (1073741824)."
    )
