# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ansible_collections.onprem.gpu.plugins.module_utils._nccl import (
    algo_allows_nvls,
    all_reduce_perf_argv,
    benchmark_environment,
    exit_reasons,
    fabric_variables,
    judge,
    mpirun_argv,
    parse,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nccl"
GIB = 1 << 30

ONE_RANK = (
    "busbw is 0 because only one rank took part (busbw = algbw x 2(n-1)/n): run one rank per GPU "
    "on several GPUs, with an nccl-tests built with MPI=1 under mpirun across hosts."
)
NO_TABLE = "The output holds no results table, so the benchmark did not run to its first measurement."
MPIRUN_NONZERO = "mpirun reports that one or more ranks exited with a non-zero status."
COMPLETION_ERROR = "NET/IB: Got completion from peer 10.20.1.3<41872> with status=12 opcode=0 len=0 vendor err 129 (Recv)"


def fixture_text(name):
    return (FIXTURES / name).read_text(encoding="utf-8")


def summary(
    rows,
    avg,
    peak,
    ranks,
    hosts,
    out_of_bounds=0,
    tests_version=None,
    nccl_version=None,
    transport=None,
    link_layers=(),
    warnings=(),
    errors=(),
    usage_text=False,
    nvls=None,
):
    """The expected parse() result of a fixture, with the number of rows in place of the rows."""
    return {
        "row_count": rows,
        "avg_busbw": avg,
        "peak_busbw": peak,
        "out_of_bounds": out_of_bounds,
        "ranks": ranks,
        "hosts": list(hosts),
        "nccl_tests_version": tests_version,
        "nccl_version": nccl_version,
        "transport": transport,
        "link_layers": list(link_layers),
        "nccl_warnings": list(warnings),
        "nvls": nvls,
        "errors": list(errors),
        "usage_text": usage_text,
    }


def summarised(result):
    found = {key: value for key, value in result.items() if key != "rows"}
    return dict(found, row_count=len(result["rows"]))


FIXTURE_SUMMARIES = [
    # Real recordings, published in public places (sources in tests/unit/fixtures/nccl/README.md).
    pytest.param(
        "multinode_2x8_H100_ib_srun-l-prefix_c0_v2.13.4.txt",
        summary(11, 142.735, 167.87, 16, ["node005", "node007"]),
        id="real-2x8-h100-srun-l-c0-v2.13.4",
    ),
    pytest.param(
        "multinode_2x8_H200_roce_v2.18.3.txt",
        summary(
            25,
            178.222,
            485.66,
            16,
            ["nvidiatools-dell-h200-2-workload", "nvidiatools-dell-h200-3-workload"],
            tests_version="2.18.3",
            nccl_version="2.30.4",
        ),
        id="real-2x8-h200-roce-v2.18.3",
    ),
    pytest.param("multinode_2x8_V100_roce_pre-v2.13.txt", summary(29, 7.76739, 22.92, 0, []), id="real-2x8-v100-pre-v2.13-excerpt"),
    pytest.param("singlenode_8xA100-40GB_pre-v2.13.txt", summary(34, 68.4048, 235.26, 8, ["localhost"]), id="real-8xa100-pre-v2.13"),
    # Written after nccl-tests' printf formats per version (NVIDIA/nccl-tests src/common.cu).
    pytest.param(
        "singlenode_8xA100_pre-v2.13_out_of_bounds_failed.txt",
        summary(
            4,
            226.701,
            231.35,
            8,
            ["dgx-a100-03"],
            out_of_bounds=3,
            errors=["nccl-tests counted 3 out-of-bounds values (FAILED): its correctness checks found corrupted data."],
        ),
        id="pre-v2.13-out-of-bounds",
    ),
    pytest.param(
        "singlenode_8xH100_v2.13.0_wrong_results.txt",
        summary(
            5,
            363.838,
            376.05,
            8,
            ["dgx-h100-07"],
            out_of_bounds=2,
            errors=[
                "2 of 5 rows report wrong results (#wrong above 0), the first at 1 GiB: the all-reduce returned corrupted data.",
                "nccl-tests counted 2 out-of-bounds values (FAILED): its correctness checks found corrupted data.",
            ],
        ),
        id="v2.13.0-wrong-results",
    ),
    pytest.param(
        "multinode_2x8_H100_non-mpi_duplicated_v2.13.4.txt",
        summary(
            4,
            368.422,
            371.02,
            16,
            ["gpu-e01", "gpu-e02"],
            errors=[
                "The output holds 2 runs that each printed their own header: this nccl-tests was not built with MPI=1, "
                "so every process under mpirun ran alone."
            ],
        ),
        id="v2.13.4-non-mpi-binary-twice",
    ),
    pytest.param(
        "multinode_2x8_H100_socket_fallback_tag-output_v2.14.1.txt",
        summary(
            4,
            4.66625,
            4.85,
            16,
            ["gpu-a01", "gpu-a02"],
            nccl_version="2.21.5",
            transport="Socket",
            errors=["nccl-tests marked the average busbw of 4.66625 GB/s FAILED: it is below 0.9 x NCCL_TESTS_MIN_BW."],
        ),
        id="v2.14.1-tag-output-socket-fallback",
    ),
    pytest.param(
        "singlenode_8xH100_datatype_all_v2.15.0.txt",
        summary(12, 361.132, 362.25, 8, ["hgx-h100-03"]),
        id="v2.15.0-datatype-all",
    ),
    pytest.param(
        "multinode_2x8_H100_ib_info_interleaved_v2.16.7.txt",
        summary(
            4,
            376.276,
            391.88,
            16,
            ["gpu-b01", "gpu-b02"],
            nccl_version="2.26.2",
            transport="IB",
            link_layers=["IB"],
            warnings=['Missing "iommu=pt" from kernel command line which can lead to system instablity or hang!'],
        ),
        id="v2.16.7-ib-info-and-warn-in-table",
    ),
    pytest.param(
        "multinode_2x8_H200_roce_c0_v2.17.3.txt",
        summary(4, 469.987, 481.93, 16, ["h200-r07-n1", "h200-r07-n2"], nccl_version="2.27.7", transport="IB", link_layers=["RoCE"]),
        id="v2.17.3-roce-c0",
    ),
    pytest.param(
        "multinode_2x8_H200_roce_c0_v2.17.3.json",
        summary(4, 469.987, 481.93, 16, ["h200-r07-n1", "h200-r07-n2"], nccl_version="2.27.7"),
        id="v2.17.3-json-misspelt-keys",
    ),
    pytest.param(
        "multinode_2x8_H100_split-mod8_timestamps_v2.17.6.txt",
        summary(3, 46.8783, 47.41, 16, ["gpu-f01", "gpu-f02"], tests_version="2.17.6", nccl_version="2.27.3"),
        id="v2.17.6-split-timestamps",
    ),
    pytest.param(
        "multinode_2x8_H100_truncated_v2.17.7.txt",
        summary(
            2,
            None,
            373.3,
            16,
            ["gpu-c01", "gpu-c02"],
            out_of_bounds=None,
            tests_version="2.17.7",
            nccl_version="2.27.3",
            errors=["The run stopped after the 2 GiB row, before its footer: it was cut short or crashed."],
        ),
        id="v2.17.7-truncated",
    ),
    pytest.param(
        "multinode_2x8_H100_nccl_failure_v2.18.3.txt",
        summary(
            2,
            None,
            373.5,
            16,
            ["gpu-c03", "gpu-c04"],
            out_of_bounds=None,
            tests_version="2.18.3",
            nccl_version="2.27.7",
            warnings=[COMPLETION_ERROR],
            errors=[
                f"NCCL failed on gpu-c04: remote process exited or there was a network error - {COMPLETION_ERROR}.",
                MPIRUN_NONZERO,
                "The run stopped after the 2 GiB row, before its footer: it was cut short or crashed.",
            ],
        ),
        id="v2.18.3-nccl-failure",
    ),
    pytest.param(
        "multinode_2x8_H100_nccl_net_forced_ib_missing_v2.18.3.txt",
        summary(
            0,
            None,
            None,
            16,
            ["gpu-d01", "gpu-d02"],
            out_of_bounds=None,
            tests_version="2.18.3",
            nccl_version="2.27.7",
            transport="IB",
            link_layers=["RoCE"],
            warnings=["Failed to initialize any NET plugin"],
            errors=[
                "NCCL failed on gpu-d02: invalid usage (run with NCCL_DEBUG=WARN for details) - Failed to initialize any NET plugin.",
                "NCCL could not start the network that NCCL_NET asks for ('Failed to initialize any NET plugin'): "
                "RDMA devices are missing or unusable on at least one host.",
                MPIRUN_NONZERO,
                NO_TABLE,
            ],
        ),
        id="v2.18.3-nccl-net-forced",
    ),
    pytest.param(
        "singlenode_8xH100_per-iteration_memory-capped_v2.19.6.txt",
        summary(4, 470.359, 480.57, 8, ["hgx-h100-01"], tests_version="2.19.6", nccl_version="2.28.3"),
        id="v2.19.6-per-iteration-columns",
    ),
    pytest.param(
        "singlenode_8xH100_per-iteration_v2.19.6.json",
        summary(4, 470.295, 479.95, 8, ["hgx-h100-02"], nccl_version="2.28.3"),
        id="v2.19.6-json-v3",
    ),
    pytest.param(
        "usage_invalid_option_v2.19.6.txt",
        summary(
            0,
            None,
            None,
            0,
            [],
            out_of_bounds=None,
            usage_text=True,
            errors=["all_reduce_perf printed its usage text instead of running: this build does not understand one of the options it was given."],
        ),
        id="v2.19.6-usage-text",
    ),
    pytest.param(
        "singlenode_1xH100_one_rank_v2.20.0.txt",
        summary(3, 0.0, 0.0, 1, ["hgx-h100-05"], tests_version="2.20.0", nccl_version="2.31.2", errors=[ONE_RANK]),
        id="v2.20.0-one-rank",
    ),
    pytest.param("missing_libnccl.txt", summary(0, None, None, 0, [], out_of_bounds=None, errors=[NO_TABLE]), id="missing-libnccl"),
    pytest.param(
        "singlenode_8xH100_nvls_info_v2.19.6.txt",
        summary(4, 470.017, 480.41, 8, ["hgx-h100-07"], tests_version="2.19.6", nccl_version="2.28.3", transport="IB", link_layers=["IB"], nvls=True),
        id="v2.19.6-nvls",
    ),
    pytest.param(
        "singlenode_8xH100_no_nvls_ring_v2.19.6.txt",
        summary(4, 362, 368.61, 8, ["hgx-h100-08"], tests_version="2.19.6", nccl_version="2.28.3", transport="IB", link_layers=["IB"], nvls=False),
        id="v2.19.6-no-nvls",
    ),
]


@pytest.mark.parametrize("fixture, expected", FIXTURE_SUMMARIES)
def test_fixture_summaries(fixture, expected):
    assert summarised(parse(fixture_text(fixture))) == expected


COMPLETE_RUNS = [
    "multinode_2x8_H100_ib_srun-l-prefix_c0_v2.13.4.txt",
    "multinode_2x8_H200_roce_v2.18.3.txt",
    "multinode_2x8_V100_roce_pre-v2.13.txt",
    "singlenode_8xA100-40GB_pre-v2.13.txt",
    "singlenode_8xA100_pre-v2.13_out_of_bounds_failed.txt",
    "singlenode_8xH100_v2.13.0_wrong_results.txt",
    "multinode_2x8_H100_socket_fallback_tag-output_v2.14.1.txt",
    "singlenode_8xH100_datatype_all_v2.15.0.txt",
    "multinode_2x8_H100_ib_info_interleaved_v2.16.7.txt",
    "multinode_2x8_H200_roce_c0_v2.17.3.txt",
    "multinode_2x8_H200_roce_c0_v2.17.3.json",
    "multinode_2x8_H100_split-mod8_timestamps_v2.17.6.txt",
    "singlenode_8xH100_per-iteration_memory-capped_v2.19.6.txt",
    "singlenode_8xH100_per-iteration_v2.19.6.json",
    "singlenode_1xH100_one_rank_v2.20.0.txt",
    "singlenode_8xH100_nvls_info_v2.19.6.txt",
    "singlenode_8xH100_no_nvls_ring_v2.19.6.txt",
]


@pytest.mark.parametrize("fixture", COMPLETE_RUNS)
def test_every_busbw_cell_is_read(fixture):
    """The footer average is the mean busbw over every row and both halves: a missed or misread cell shows here."""
    result = parse(fixture_text(fixture))
    cells = [row[half]["busbw"] for row in result["rows"] for half in ("out_of_place", "in_place")]
    assert sum(cells) / len(cells) == pytest.approx(result["avg_busbw"], abs=0.005)


def half(time_us, algbw, busbw, wrong):
    return {"time_us": time_us, "algbw": algbw, "busbw": busbw, "wrong": wrong}


def row(size, count, type_, root, out_of_place, in_place):
    return {"size": size, "count": count, "type": type_, "redop": "sum", "root": root, "out_of_place": out_of_place, "in_place": in_place}


@pytest.mark.parametrize(
    "fixture, index, expected",
    [
        pytest.param(
            "multinode_2x8_H100_ib_srun-l-prefix_c0_v2.13.4.txt",
            -1,
            row(8589934592, 2147483648, "float", -1, half(103530.0, 82.97, 155.57, None), half(103538.0, 82.96, 155.56, None)),
            id="srun-prefix-and-c0-na",
        ),
        pytest.param(
            "multinode_2x8_H200_roce_v2.18.3.txt",
            0,
            row(1024, 256, "float", -1, half(45.06, 0.02, 0.04, 0), half(43.74, 0.02, 0.04, 0)),
            id="v2.18.3-first-row",
        ),
        pytest.param(
            "multinode_2x8_H200_roce_v2.18.3.txt",
            -1,
            row(17179869184, 4294967296, "float", -1, half(66326.9, 259.02, 485.66, 0), half(66345.5, 258.95, 485.52, 0)),
            id="v2.18.3-last-row",
        ),
        pytest.param(
            "multinode_2x8_V100_roce_pre-v2.13.txt",
            -1,
            row(2147483648, 536870912, "float", None, half(175667.0, 12.22, 22.92, None), half(176189.0, 12.19, 22.85, None)),
            id="pre-v2.13-error-column-is-not-a-count",
        ),
        pytest.param(
            "singlenode_8xA100-40GB_pre-v2.13.txt",
            0,
            row(0, 0, "float", None, half(35.2, 0.0, 0.0, None), half(34.05, 0.0, 0.0, None)),
            id="pre-v2.13-zero-size-after-info-line",
        ),
        pytest.param(
            "singlenode_8xH100_v2.13.0_wrong_results.txt",
            3,
            row(1073741824, 268435456, "float", -1, half(5015.9, 214.07, 374.62, 0), half(5022.9, 213.77, 374.1, 1048580)),
            id="wrong-count-in-g-notation",
        ),
        pytest.param(
            "multinode_2x8_H200_roce_c0_v2.17.3.txt",
            3,
            row(8589934592, 2147483648, "float", -1, half(33420.1, 257.03, 481.93, None), half(33436.0, 256.91, 481.7, None)),
            id="v2.17.3-c0-na",
        ),
        pytest.param(
            "multinode_2x8_H200_roce_c0_v2.17.3.json",
            3,
            row(8589934592, 2147483648, "float", -1, half(33420.1, 257.03, 481.93, None), half(33436.0, 256.91, 481.7, None)),
            id="json-null-nwrong-and-padded-root",
        ),
        pytest.param(
            "singlenode_8xH100_per-iteration_memory-capped_v2.19.6.txt",
            3,
            row(8589934592, 2147483648, "float", -1, half(31290.7, 274.52, 480.41, 0), half(31280.3, 274.61, 480.57, 0)),
            id="per-iteration-columns-skipped",
        ),
        pytest.param(
            "multinode_2x8_H100_split-mod8_timestamps_v2.17.6.txt",
            0,
            row(1073741824, 268435456, "float", -1, half(23236.1, 46.21, 46.21, 0), half(23191.0, 46.3, 46.3, 0)),
            id="timestamp-after-the-row",
        ),
    ],
)
def test_rows(fixture, index, expected):
    assert parse(fixture_text(fixture))["rows"][index] == expected


def test_datatype_all_rows_keep_their_type_and_count():
    rows = parse(fixture_text("singlenode_8xH100_datatype_all_v2.15.0.txt"))["rows"]
    assert [(row["type"], row["count"]) for row in rows] == [
        ("int8", 134217728),
        ("uint8", 134217728),
        ("int32", 33554432),
        ("uint32", 33554432),
        ("int64", 16777216),
        ("uint64", 16777216),
        ("half", 67108864),
        ("float", 33554432),
        ("double", 16777216),
        ("bfloat16", 67108864),
        ("f8e4m3", 134217728),
        ("f8e5m2", 134217728),
    ]


def test_text_and_json_of_one_run_agree():
    text = parse(fixture_text("multinode_2x8_H200_roce_c0_v2.17.3.txt"))
    from_json = parse(fixture_text("multinode_2x8_H200_roce_c0_v2.17.3.json"))
    for key in ("rows", "avg_busbw", "peak_busbw", "out_of_bounds", "ranks", "hosts", "nccl_version", "errors"):
        assert from_json[key] == text[key], key


def test_json_environment_is_never_copied():
    text = fixture_text("multinode_2x8_H200_roce_c0_v2.17.3.json")
    assert "s3cr3t-token-value" in text
    assert "s3cr3t-token-value" not in repr(parse(text))


SRUN_HEADER = (
    "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong\n"
)
SRUN_ROW = "  1073741824     268435456     float     sum      -1   5621.8  191.00  358.12       0   5624.6  190.90  357.94       0\n"


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(f" 0: {SRUN_HEADER}12: gpu-b01:1:1 [4] NCCL INFO x\n 0: {SRUN_ROW}", id="srun-l-padded"),
        pytest.param(f"[1,0]<stdout>:{SRUN_HEADER}[1,11]<stderr>:noise\n[1,0]<stdout>:{SRUN_ROW}", id="openmpi-tag-output"),
        pytest.param((SRUN_HEADER + SRUN_ROW).replace("\n", "\r\n"), id="crlf"),
    ],
)
def test_launcher_prefixes_and_line_ends(text):
    assert parse(text)["rows"] == [
        row(1073741824, 268435456, "float", -1, half(5621.8, 191.0, 358.12, 0), half(5624.6, 190.9, 357.94, 0)),
    ]


def test_columns_are_found_from_the_header():
    """-C reports cputime; a column nccl-tests may add later is skipped by name, wherever it sits."""
    header = "#  size  count  type  redop  root  newcol  cputime  algbw  busbw  #wrong  cputime  algbw  busbw  #wrong\n"
    line = "  1024  256  float  sum  -1  7  45.06  0.02  0.04  0  43.74  0.02  0.04  0\n"
    assert parse(header + line)["rows"] == [row(1024, 256, "float", -1, half(45.06, 0.02, 0.04, 0), half(43.74, 0.02, 0.04, 0))]


@pytest.mark.parametrize(
    "line",
    [
        pytest.param("  1073741824     268435456     float     sum      -1   5621.8  191.00", id="short"),
        pytest.param("  1073741824     268435456     float     sum      -1   5621.8  191.00  fast  0  5624.6  190.90  357.94  0", id="not-a-number"),
        pytest.param("gpu-b01:48200:48252 [0] NCCL INFO comm 0x55 rank 0 nranks 16 cudaDev 0 busId 18000 - Destroy COMPLETE", id="nccl-info"),
    ],
)
def test_lines_that_are_not_rows_are_skipped(line):
    assert parse(SRUN_HEADER + line + "\n")["rows"] == []


@pytest.mark.parametrize("text", ["", " \n\n"], ids=["empty", "blank"])
def test_empty_output(text):
    assert parse(text)["errors"] == ["The output is empty: nccl-tests printed nothing."]


@pytest.mark.parametrize(
    "lines, transport, link_layers",
    [
        pytest.param(["h:1:2 [0] NCCL INFO Using network IB"], "IB", [], id="using-network"),
        pytest.param(["h:1:2 [6] NCCL INFO Using network IBext_v8"], "IBext_v8", [], id="sharp-plugin"),
        pytest.param(["[0] h:1:2 [0] NCCL INFO Channel 00/0 : 16[0] -> 0[0] [receive] via NET/IBext_v8/7/GDRDMA"], "IBext_v8", [], id="channel-line"),
        pytest.param(["p:9100:9147 [0] NCCL INFO Ring 00 : 1[18100000] -> 0[435e00000] [receive] via NET/IB/0/GDRDMA"], "IB", [], id="old-ring-line"),
        pytest.param(["h:1:2 [0] NCCL INFO Channel 00 : 0[0] -> 1[0] [send] via NET/AWS Libfabric/0/GDRDMA"], "AWS Libfabric", [], id="name-with-blank"),
        pytest.param(["a:1:2 [0] NCCL INFO Using network IB", "b:1:2 [0] NCCL INFO Using network Socket"], "Socket", [], id="one-rank-fell-back"),
        pytest.param(
            ["n:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_4:1/RoCE [RO]; OOB net1:172.20.1.1<0>", "n:1:2 [0] NCCL INFO Using network IB"],
            "IB",
            ["RoCE"],
            id="roce",
        ),
        pytest.param(
            ["h:1:2 [6] NCCL INFO NET/IB : Using [0]mlx5_1:1/IB/SHARP [1]mlx5_2:1/IB/SHARP [RO]; OOB ens7:172.27.32.104<0>"],
            "IB",
            ["IB"],
            id="ib-devices-without-using-network",
        ),
        pytest.param(
            ["a:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB; OOB ib0:1.2.3.4<0>", "b:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE; OOB e:1<0>"],
            "IB",
            ["IB", "RoCE"],
            id="mixed-link-layers",
        ),
        pytest.param(
            ["a:1:2 [0] NCCL INFO NET/IB : No device found.", "a:1:2 [0] NCCL INFO NET/Socket : Using [0]lo:127.0.0.1<0>"],
            "Socket",
            [],
            id="no-ib-device",
        ),
        pytest.param(
            ["a:1:2 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]", "a:1:2 [0] NCCL INFO NET/Socket : Using [0]em1:10.1.2.3<0>"],
            "Socket",
            [],
            id="no-libibverbs",
        ),
        pytest.param(["a:1:2 [0] NCCL INFO Launch mode Parallel"], None, [], id="unseen"),
    ],
)
def test_transport(lines, transport, link_layers):
    result = parse("\n".join(lines) + "\n")
    assert (result["transport"], result["link_layers"]) == (transport, link_layers)


@pytest.mark.parametrize(
    "line, error",
    [
        pytest.param(
            "c2211f46f318: Test NCCL failure common.cu:1005 'unhandled CUDA error'", "NCCL failed on c2211f46f318: unhandled CUDA error.", id="old-nccl"
        ),
        pytest.param(
            "HCA-128: Test NCCL failure common.cu:1204 'unhandled cuda error (run with NCCL_DEBUG=INFO for details) / '",
            "NCCL failed on HCA-128: unhandled cuda error (run with NCCL_DEBUG=INFO for details).",
            id="empty-last-error",
        ),
        pytest.param("node7: Test CUDA failure common.cu:892 'out of memory'", "CUDA failed on node7: out of memory.", id="cuda"),
        pytest.param("node7: Test timeout (300s) common.cu:512", "A collective did not complete within the -T timeout of 300 s on node7.", id="test-timeout"),
        pytest.param(
            "Invalid number of GPUs: 16 requested but only 8 were found.", "Invalid number of GPUs: 16 requested but only 8 were found.", id="too-many-gpus"
        ),
        pytest.param("invalid size specified for 'minbytes'", "nccl-tests rejected the size given for minbytes.", id="bad-size"),
        pytest.param(
            "# error: NET/IB : Got completion with error 12", "nccl-tests ended with an NCCL error: NET/IB : Got completion with error 12.", id="error-footer"
        ),
        pytest.param(
            "mpirun noticed that process rank 3 with PID 4242 on node gpu-a02 exited on signal 11 (Segmentation fault).",
            "mpirun reports that rank 3 was killed by signal 11 (Segmentation fault).",
            id="mpirun-signal",
        ),
        pytest.param(
            "ORTE was unable to reliably start one or more daemons.",
            "mpirun could not start its daemons on the other hosts: check passwordless ssh and the same OpenMPI on each.",
            id="mpirun-daemons",
        ),
        pytest.param(
            "[2025-01-02 03:04:05] b:1:2 [0] net.cc:1 NCCL WARN Error: network IB not found.",
            "NCCL could not start the network that NCCL_NET asks for ('Error: network IB not found.'): "
            "RDMA devices are missing or unusable on at least one host.",
            id="nccl-net-before-2.27",
        ),
    ],
)
def test_error_lines(line, error):
    assert parse(line + "\n")["errors"] == [error, NO_TABLE]


def test_one_failure_on_several_hosts_is_one_sentence():
    lines = [f"{host}: Test NCCL failure common.cu:958 'unhandled system error / '" for host in ("a", "b", "a")]
    assert parse("\n".join(lines))["errors"][0] == "NCCL failed on a, b: unhandled system error."


@pytest.mark.parametrize(
    "footer, avg, out_of_bounds, errors",
    [
        pytest.param("# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0.5 \n", 0.5, 0, [], id="plain"),
        pytest.param("# Out of bounds values : 0 OK\n# Avg bus bandwidth    : nan \n", None, 0, [], id="nan"),
        pytest.param("# Avg bus bandwidth    : 1e+02 OK\n", 100.0, None, [], id="min-bw-ok-without-out-of-bounds-line"),
        pytest.param(
            "# Out of bounds values : 1 FAILED\n",
            None,
            1,
            ["nccl-tests counted 1 out-of-bounds values (FAILED): its correctness checks found corrupted data."],
            id="oob",
        ),
    ],
)
def test_footer(footer, avg, out_of_bounds, errors):
    result = parse(SRUN_HEADER + SRUN_ROW + footer)
    assert (result["avg_busbw"], result["out_of_bounds"], result["errors"]) == (avg, out_of_bounds, errors)


def test_header_without_rows():
    assert parse(SRUN_HEADER + "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0 \n")["errors"] == ["The results table has no rows."]


def test_run_stopped_after_its_header():
    assert parse(SRUN_HEADER)["errors"] == ["The run stopped after the table header, before its footer: it was cut short or crashed."]


def test_zero_average_without_device_lines_is_one_rank():
    zero_row = "        1024           256     float     sum      -1    10.00    0.10    0.00       0    10.00    0.10    0.00       0\n"
    assert parse(SRUN_HEADER + zero_row + "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0 \n")["errors"] == [ONE_RANK]


def json_run(**changes):
    document = json.loads(fixture_text("singlenode_8xH100_per-iteration_v2.19.6.json"))
    document.update(changes)
    return json.dumps(document)


@pytest.mark.parametrize(
    "text, errors",
    [
        pytest.param(
            '{"version": 3, "results": [',
            ["The JSON output is incomplete or malformed (Expecting value: line 1 column 28 (char 27)): the run was probably cut short."],
            id="cut-short",
        ),
        pytest.param(
            '{"results": [{"size": 8}]}',
            ["The JSON output does not have the layout nccl-tests writes (results with size, count and both halves)."],
            id="wrong-layout",
        ),
        pytest.param(json_run(errors=["unhandled cuda error"]), ["nccl-tests ended with an NCCL error: unhandled cuda error."], id="errors"),
        pytest.param(
            json_run(out_of_bounds={"count": 2, "okay": "false"}),
            ["nccl-tests counted 2 out-of-bounds values (FAILED): its correctness checks found corrupted data."],
            id="out-of-bounds",
        ),
        pytest.param(
            json_run(average_bus_bandwidth={"bandwidth": 470.295, "okay": "false"}),
            ["nccl-tests marked the average busbw of 470.295 GB/s FAILED: it is below 0.9 x NCCL_TESTS_MIN_BW."],
            id="min-bw-failed",
        ),
        pytest.param(json_run(results=[]), ["The results table has no rows."], id="no-results"),
    ],
)
def test_json_problems(text, errors):
    assert parse(text)["errors"] == errors


def test_json_nan_is_none():
    document = json.loads(fixture_text("singlenode_8xH100_per-iteration_v2.19.6.json"))
    document["results"][0]["in_place"]["bus_bw"] = "nan"
    document["average_bus_bandwidth"]["bandwidth"] = "nan"
    result = parse(json.dumps(document))
    assert (result["rows"][0]["in_place"]["busbw"], result["avg_busbw"]) == (None, None)


def test_json_nested_too_deep_is_one_sentence():
    assert parse("{\"results\": " + "[" * 100000 + "]" * 100000 + "}")["errors"] == [
        "The JSON output nests deeper than Python can read: it is not what nccl-tests writes."
    ]


@pytest.mark.parametrize("errors", ["unhandled cuda error", {"a": 1}])
def test_json_errors_that_are_not_a_list_are_the_wrong_layout(errors):
    assert parse(json_run(errors=errors))["errors"] == [
        "The JSON output does not have the layout nccl-tests writes (results with size, count and both halves)."
    ]


def with_busbw(document, index, busbw):
    """The recorded H100 JSON run with the busbw of row ``index`` (both halves) replaced."""
    document = json.loads(json.dumps(document))
    for half in ("out_of_place", "in_place"):
        document["results"][index][half]["bus_bw"] = busbw
    return json.dumps(document)


H100_JSON = json.loads(fixture_text("singlenode_8xH100_per-iteration_v2.19.6.json"))


@pytest.mark.parametrize("busbw", [1e308, 20000.0, -5.0])
def test_a_bandwidth_no_fabric_carries_is_not_a_measurement(busbw):
    result = parse(with_busbw(H100_JSON, -1, busbw))
    assert any("bandwidth values are outside 0 to 10000 GB/s" in error for error in result["errors"]), result["errors"]
    assert judge(result, min_busbw=384, min_size=GIB)["verdict"] == "fail"


def test_a_sweep_that_collapses_at_its_largest_message_fails_although_its_peak_passes():
    """Only the peak was judged: a run at 480 GB/s up to 4 GiB and 0.01 GB/s at 8 GiB passed."""
    result = parse(with_busbw(H100_JSON, -1, 0.01))
    verdict = judge(result, min_busbw=384, min_size=GIB)
    assert verdict["verdict"] == "fail"
    assert verdict["reasons"] == [
        f"The busbw falls from its peak of {verdict['judged_busbw']:g} GB/s at 4 GiB to 0.01 GB/s at 8 GiB, under 70% of the peak: "
        "the largest messages lose their bandwidth (congestion, a flapping link or memory pressure)."
    ]


@pytest.mark.parametrize("name", sorted(path.name for path in FIXTURES.iterdir() if path.suffix in (".txt", ".json")))
def test_no_recorded_real_run_is_judged_off_its_plateau(name):
    """Every real recording holds its peak to the end of its sweep (the lowest share past the peak is 0.86)."""
    result = parse(fixture_text(name))
    assert not [reason for reason in judge(result)["reasons"] if "falls from its peak" in reason]


PASSING_ROCE = parse(fixture_text("multinode_2x8_H200_roce_c0_v2.17.3.txt"))
PASSING_IB = parse(fixture_text("multinode_2x8_H100_ib_info_interleaved_v2.16.7.txt"))
SOCKET = parse(fixture_text("multinode_2x8_H100_socket_fallback_tag-output_v2.14.1.txt"))
NO_INFO = parse(fixture_text("multinode_2x8_H200_roce_v2.18.3.txt"))
SOCKET_FALLBACK = (
    "NCCL fell back to TCP sockets instead of RDMA over {0}: check that the RDMA devices are up on every host (ibv_devinfo), "
    "NCCL_IB_HCA, and libibverbs; set NCCL_NET=IB to make this an error at start."
)


@pytest.mark.parametrize(
    "result, options, verdict, reasons, judged_busbw",
    [
        pytest.param(PASSING_ROCE, dict(min_busbw=450, min_size=GIB, expect_transport="RoCE"), "pass", [], 481.93, id="roce-pass"),
        pytest.param(PASSING_ROCE, dict(min_busbw=450, min_size=GIB, expect_transport="IB"), "pass", [], 481.93, id="roce-is-ib"),
        pytest.param(PASSING_IB, dict(min_busbw=350, expect_transport="IB", expect_ranks=16, expect_hosts=2), "pass", [], 391.88, id="ib-pass"),
        pytest.param(PASSING_ROCE, {}, "pass", [], 481.93, id="nothing-to-judge"),
        pytest.param(
            PASSING_IB,
            dict(min_busbw=395, min_size=4 * GIB),
            "fail",
            ["The peak busbw at 4 GiB and above is 391.88 GB/s, below the required 395 GB/s."],
            391.88,
            id="low-bandwidth",
        ),
        pytest.param(
            NO_INFO,
            dict(min_busbw=480, min_size=8 * GIB),
            "pass",
            [],
            485.66,
            id="sweep-judged-on-large-rows-not-average",
        ),
        pytest.param(
            NO_INFO,
            dict(min_busbw=180, min_size=1 << 20),
            "pass",
            [],
            485.66,
            id="average-below-threshold-is-not-a-failure",
        ),
        pytest.param(
            PASSING_IB,
            dict(min_busbw=100, min_size=16 * GIB),
            "fail",
            ["No row reaches 16 GiB (the largest is 8 GiB), so the bandwidth cannot be judged: raise the largest message size or lower min_size."],
            None,
            id="no-row-large-enough",
        ),
        pytest.param(
            PASSING_IB,
            dict(min_busbw=400, min_size=0),
            "fail",
            ["The peak busbw is 391.88 GB/s, below the required 400 GB/s."],
            391.88,
            id="min-size-zero",
        ),
        pytest.param(
            SOCKET,
            dict(min_busbw=100, min_size=GIB, expect_transport="IB"),
            "fail",
            [
                "nccl-tests marked the average busbw of 4.66625 GB/s FAILED: it is below 0.9 x NCCL_TESTS_MIN_BW.",
                SOCKET_FALLBACK.format("IB"),
                "The peak busbw at 1 GiB and above is 4.85 GB/s, below the required 100 GB/s.",
            ],
            4.85,
            id="socket-fallback",
        ),
        pytest.param(
            SOCKET, dict(expect_transport="RoCE"), "fail", [SOCKET["errors"][0], SOCKET_FALLBACK.format("RoCE")], 4.85, id="socket-fallback-roce"
        ),
        pytest.param(
            PASSING_IB,
            dict(expect_transport="RoCE"),
            "fail",
            ["NCCL's RDMA devices show IB where RoCE was expected ('NET/IB : Using ...' lines)."],
            391.88,
            id="infiniband-where-roce-expected",
        ),
        pytest.param(
            PASSING_ROCE,
            dict(expect_transport="Socket"),
            "fail",
            ["NCCL used the IB network where Socket was expected."],
            481.93,
            id="rdma-where-socket-expected",
        ),
        pytest.param(
            dict(PASSING_IB, transport="IBext_v8"), dict(expect_transport="IB"), "pass", [], 391.88, id="ibext-plugin-is-ib"
        ),
        pytest.param(
            dict(PASSING_IB, transport="Libfabric"),
            dict(expect_transport="IB"),
            "fail",
            ["NCCL used the Libfabric network where IB was expected."],
            391.88,
            id="other-plugin",
        ),
        pytest.param(
            dict(PASSING_IB, link_layers=[]),
            dict(expect_transport="RoCE"),
            "fail",
            ["NCCL's RDMA devices show no link layer where RoCE was expected ('NET/IB : Using ...' lines)."],
            391.88,
            id="roce-unconfirmed",
        ),
        pytest.param(
            NO_INFO,
            dict(expect_transport="IB"),
            "fail",
            ["NCCL did not log which network it used, so IB cannot be confirmed: run with NCCL_DEBUG=INFO."],
            485.66,
            id="transport-unknown",
        ),
        pytest.param(
            PASSING_IB,
            dict(expect_ranks=32, expect_hosts=4),
            "fail",
            ["The output lists 16 ranks, not the 32 that were started.", "The ranks ran on 2 hosts (gpu-b01, gpu-b02), not on the 4 asked for."],
            391.88,
            id="fewer-ranks-and-hosts",
        ),
    ],
)
def test_judge(result, options, verdict, reasons, judged_busbw):
    assert judge(result, **options) == {"verdict": verdict, "reasons": reasons, "judged_busbw": judged_busbw, "judged_min_busbw": options.get("min_busbw")}


NVLS = parse(fixture_text("singlenode_8xH100_nvls_info_v2.19.6.txt"))
NO_NVLS = parse(fixture_text("singlenode_8xH100_no_nvls_ring_v2.19.6.txt"))
# 0.8 x 480 (8 x H100 with NVLink SHARP) and 0.8 x 370 (the NVLink ring).
H100_THRESHOLDS = dict(min_busbw=384, min_busbw_without_nvls=296, min_size=GIB)
BELOW_WITH_NVLS = "The peak busbw at 1 GiB and above is 368.61 GB/s, below the required 384 GB/s."


@pytest.mark.parametrize(
    "result, options, reasons, judged_min_busbw",
    [
        pytest.param(NVLS, H100_THRESHOLDS, [], 384, id="nvls-judged-on-the-nvls-threshold"),
        pytest.param(NO_NVLS, H100_THRESHOLDS, [], 296, id="no-nvls-judged-on-the-ring-threshold"),
        pytest.param(NO_NVLS, dict(H100_THRESHOLDS, min_busbw_without_nvls=None), [BELOW_WITH_NVLS], 384, id="no-ring-threshold-given"),
        pytest.param(
            NO_NVLS,
            dict(H100_THRESHOLDS, min_busbw_without_nvls=370),
            ["The peak busbw at 1 GiB and above is 368.61 GB/s, below the required 370 GB/s (the threshold without NVLink SHARP, which NCCL did not use)."],
            370,
            id="no-nvls-below-the-ring-threshold",
        ),
        # A run whose log does not say is held to the NVLS threshold.
        pytest.param(dict(NO_NVLS, nvls=None), H100_THRESHOLDS, [BELOW_WITH_NVLS], 384, id="unknown-is-held-to-nvls"),
        # NCCL_ALGO=Ring keeps all-reduce off NVLS even where NCCL set it up.
        pytest.param(dict(NO_NVLS, nvls=True), dict(H100_THRESHOLDS, nccl_algo="Ring"), [], 296, id="nccl-algo-ring"),
        pytest.param(dict(NO_NVLS, nvls=True), dict(H100_THRESHOLDS, nccl_algo="ring,nvls"), [BELOW_WITH_NVLS], 384, id="nccl-algo-with-nvls"),
    ],
)
def test_judge_threshold_follows_nvls(result, options, reasons, judged_min_busbw):
    judgement = judge(result, **options)
    assert (judgement["reasons"], judgement["judged_min_busbw"]) == (reasons, judged_min_busbw)


@pytest.mark.parametrize(
    "lines, nvls",
    [
        pytest.param(["h:1:2 [0] NCCL INFO NVLS multicast support is available on dev 0"], True, id="available"),
        pytest.param(
            ["h:1:2 [0] NCCL INFO NVLS multicast support is available on dev 0", "h:1:3 [1] NCCL INFO NVLS multicast support is not available on dev 1"],
            False,
            id="one-rank-without",
        ),
        pytest.param(
            [
                "h:1:2 [0] NCCL INFO NVLS multicast support is available on dev 0",
                "h:1:2 [0] NCCL INFO 24 coll channels, 24 collnet channels, 0 nvls channels, 32 p2p channels, 32 p2p channels per peer",
            ],
            False,
            id="supported-but-no-channel",
        ),
        pytest.param(
            ["h:1:2 [0] NCCL INFO NVLS multicast support is available on dev 0", "h:1:2 [0] NCCL INFO NCCL_ALGO set by environment to Ring"],
            False,
            id="algo-echoed",
        ),
        pytest.param(["h:1:2 [0] NCCL INFO Using network IB"], None, id="not-said"),
    ],
)
def test_nvls_from_the_log(lines, nvls):
    assert parse("\n".join(lines))["nvls"] is nvls


@pytest.mark.parametrize(
    "algo, allowed",
    [
        ("Ring", False),
        ("ring,tree", False),
        ("NVLS,Ring", True),
        ("^nvls", False),
        ("^ring", True),
        ("NVLSTree", False),
        ("ring;allreduce:nvls,ring", True),
        ("nvls;allreduce:ring", False),
        ("ring;broadcast:nvls", False),
        ("allreduce:^tree", True),
    ],
)
def test_algo_allows_nvls(algo, allowed):
    assert algo_allows_nvls(algo) is allowed


def test_judge_keeps_the_errors_of_the_output_first():
    one_rank = parse(fixture_text("singlenode_1xH100_one_rank_v2.20.0.txt"))
    assert judge(one_rank, expect_ranks=16, expect_hosts=2)["reasons"] == [
        ONE_RANK,
        "The output lists 1 rank, not the 16 that were started.",
        "The ranks ran on 1 host (hgx-h100-05), not on the 2 asked for.",
    ]


def test_judge_of_a_run_that_never_started_adds_no_bandwidth_rank_or_transport_reason():
    usage = parse(fixture_text("usage_invalid_option_v2.19.6.txt"))
    assert judge(usage, min_busbw=100, expect_transport="IB", expect_ranks=8, expect_hosts=1)["reasons"] == usage["errors"]


@pytest.mark.parametrize(
    "rc, timed_out, reasons",
    [
        pytest.param(0, False, [], id="success"),
        pytest.param(3, False, ["The benchmark exited with code 3: nccl-tests stopped on an NCCL error."], id="nccl-error"),
        pytest.param(7, False, ["The benchmark exited with code 7."], id="other-code"),
        pytest.param(127, False, ["The benchmark exited with code 127: a command or shared library was not found."], id="not-found"),
        pytest.param(
            124,
            True,
            [
                "The benchmark did not finish within 600 seconds and was stopped: a run that hangs after "
                "'# Using devices' usually has a host that cannot reach the others."
            ],
            id="timed-out",
        ),
    ],
)
def test_exit_reasons(rc, timed_out, reasons):
    assert exit_reasons(rc, timed_out, 600) == reasons


def test_fabric_variables_only_for_options_that_are_set():
    assert fabric_variables(ib_hca=["=mlx5_0:1", "mlx5_1:1"], ib_gid_index=3, ib_tc=106, socket_ifname="eno1", net="IB") == {
        "NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1",
        "NCCL_IB_GID_INDEX": 3,
        "NCCL_IB_TC": 106,
        "NCCL_SOCKET_IFNAME": "eno1",
        "NCCL_NET": "IB",
    }
    assert fabric_variables() == {}


def test_benchmark_environment_precedence():
    environment = benchmark_environment(
        secret={"PLUGIN_TOKEN": "t0k", "NCCL_IB_HCA": "from-secret", "NCCL_DEBUG": "WARN"},
        extra={"NCCL_ALGO": "Ring", "NCCL_IB_QPS_PER_CONNECTION": 2, "NCCL_IB_HCA": "from-extra", "NCCL_DEBUG_SUBSYS": "ALL"},
        fabric={"NCCL_IB_HCA": "mlx5_0"},
    )
    assert environment == {
        "NCCL_DEBUG_SUBSYS": "ALL",
        "PLUGIN_TOKEN": "t0k",
        "NCCL_IB_HCA": "mlx5_0",
        "NCCL_ALGO": "Ring",
        "NCCL_IB_QPS_PER_CONNECTION": "2",
        "NCCL_DEBUG": "INFO",
    }


def test_benchmark_environment_defaults():
    assert benchmark_environment({}, {}, {}) == {"NCCL_DEBUG_SUBSYS": "INIT,NET", "NCCL_DEBUG": "INFO"}


def test_all_reduce_perf_argv():
    assert all_reduce_perf_argv("/usr/bin/all_reduce_perf", 8, GIB, 8 * GIB, 2, 20, 5, 1) == [
        "/usr/bin/all_reduce_perf",
        *("-b", "1073741824", "-e", "8589934592", "-f", "2", "-g", "8", "-n", "20", "-w", "5", "-c", "1"),
    ]


@pytest.mark.parametrize(
    "as_root, extra_args, expected_start",
    [
        pytest.param(False, (), ["/usr/bin/mpirun"], id="user"),
        pytest.param(True, ("--mca", "btl_tcp_if_exclude", "lo,docker0"), ["/usr/bin/mpirun", "--allow-run-as-root"], id="root-with-extra-args"),
    ],
)
def test_mpirun_argv(as_root, extra_args, expected_start):
    argv = mpirun_argv("/usr/bin/mpirun", ["gpu-a01", "10.1.0.12"], 8, {"NCCL_NET": "IB", "NCCL_DEBUG": "INFO"}, extra_args, as_root=as_root)
    assert argv == expected_start + [
        *("-np", "16", "-H", "gpu-a01:8,10.1.0.12:8", "--bind-to", "none"),
        *("-x", "NCCL_DEBUG", "-x", "NCCL_NET"),
        *extra_args,
    ]


def test_mpirun_argv_pins_openmpi_tcp_to_the_management_network():
    argv = mpirun_argv("/usr/bin/mpirun", ["gpu-a01", "gpu-a02"], 8, {"NCCL_DEBUG": "INFO"}, ["--tag-output"], tcp_include=["eno1", "10.20.0.0/24"])
    assert argv == [
        *("/usr/bin/mpirun", "-np", "16", "-H", "gpu-a01:8,gpu-a02:8", "--bind-to", "none"),
        *("--mca", "oob_tcp_if_include", "eno1,10.20.0.0/24", "--mca", "btl_tcp_if_include", "eno1,10.20.0.0/24"),
        *("-x", "NCCL_DEBUG", "--tag-output"),
    ]
