# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The node_health judge: the findings expected of each recorded output, and no false failure on healthy ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.onprem.gpu.plugins.module_utils._node_health import (
    DEFAULT_CHECKS,
    ExpectedError,
    judge,
    resolve_expected,
    xid_overrides,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "node_health"
A100_80 = resolve_expected({"gpu_count": 1, "gpu_model": "NVIDIA A100-SXM4-80GB"})


def fixture(name):
    return (FIXTURES / name).read_text(encoding="utf-8")


def summary(result):
    return [(item["code"], item["severity"], item["action"], item["gpu_index"], item["xid"]) for item in result["findings"]]


def card(model, gen, width=16, count=1):
    return resolve_expected({"gpu_count": count, "gpu_model": model, "pcie_gen": gen, "pcie_width": width, "nvlinks_per_gpu": 0})


HEALTHY_REAL = [
    ("nvsmi_q_x__a100_sxm4_80gb_mig__telegraf.xml", A100_80),
    ("nvsmi_q_x__a100_sxm4_40gb_mig_driver510__netdata.xml", resolve_expected({"gpu_count": 1, "gpu_model": "NVIDIA A100-SXM4-40GB", "nvlinks_per_gpu": 0})),
    ("nvsmi_q_x__tesla_p100_single_double_bit__netdata.xml", card("Tesla P100-PCIE-16GB", 3)),
    ("nvsmi_q_x__a10g_idle_gen1__telegraf.xml", card("NVIDIA A10G", 4, width=8)),
    ("nvsmi_q_x__tesla_t4_driver515__telegraf.xml", card("Tesla T4", 3, width=8)),
]


@pytest.mark.parametrize("name, expected", HEALTHY_REAL)
def test_healthy_real_reports_have_no_finding(name, expected):
    result = judge(expected, DEFAULT_CHECKS, {"nvidia_smi_q_xml": fixture(name)})
    assert (result["healthy"], result["state"], result["findings"]) == (True, "healthy", [])


def test_idle_gpu_is_judged_on_its_maximum_generation():
    # The real A10G idles at Gen1 (max Gen4): no finding at Gen4, but its x8 link fails an x16 expectation.
    result = judge(card("NVIDIA A10G", 4), ["pcie"], {"nvidia_smi_q_xml": fixture("nvsmi_q_x__a10g_idle_gen1__telegraf.xml")})
    assert summary(result) == [("pcie_degraded", "fail", "drain", 0, None)]
    assert result["findings"][0]["message"] == (
        "GPU 0 (00000000:00:1E.0) runs at x8 instead of x16; drain the node and reseat the GPU or check its riser and slot settings.")


def test_busy_gpu_is_judged_on_its_current_generation():
    # Synthetic variant of the real A10G: busy (60 %, not idle) and still at Gen1.
    text = fixture("nvsmi_q_x__a10g_idle_gen1__telegraf.xml").replace("<gpu_util>0 %", "<gpu_util>60 %").replace(
        "<clocks_throttle_reason_gpu_idle>Active", "<clocks_throttle_reason_gpu_idle>Not Active")
    result = judge(card("NVIDIA A10G", 4, width=8), ["pcie"], {"nvidia_smi_q_xml": text})
    assert "runs at PCIe Gen1 instead of Gen4" in result["findings"][0]["message"]


def test_attached_gpus_larger_than_the_report_counts_the_elements():
    expected = resolve_expected({"gpu_count": 4, "gpu_model": "NVIDIA A100-SXM4-80GB"})
    result = judge(expected, ["gpus"], {"nvidia_smi_q_xml": fixture("nvsmi_q_x__a100_sxm4_80gb_mig__telegraf.xml")})
    assert summary(result) == [("gpu_missing", "fail", "reboot", None, None)]
    assert result["findings"][0]["message"].startswith("nvidia-smi reports 1 of the 4 GPUs expected")


def test_wrong_model():
    result = judge(resolve_expected({"gpu_count": 1, "gpu_model": "NVIDIA H100 80GB HBM3"}), ["gpus"],
                   {"nvidia_smi_q_xml": fixture("nvsmi_q_x__a100_sxm4_80gb_mig__telegraf.xml")})
    assert summary(result) == [("gpu_model", "fail", "drain", 0, None)]


SYNTHETIC_FAULTS = [
    # Synthetic variants of the real A10G report (the only real one with remapped-row counters), one fault each.
    ("<remapped_row_pending>No", "<remapped_row_pending>Yes", ["remapped_rows"], [("remapped_rows_pending", "fail", "reset_gpu", 0, None)]),
    ("<remapped_row_failure>No", "<remapped_row_failure>Yes", ["remapped_rows"], [("remapped_rows_failure", "fail", "rma", 0, None)]),
    ("<dram_uncorrectable>0</dram_uncorrectable>", "<dram_uncorrectable>3</dram_uncorrectable>", ["ecc"],
     [("ecc_uncorrected", "fail", "reset_gpu", 0, None)]),
    ("<clocks_throttle_reason_hw_slowdown>Not Active", "<clocks_throttle_reason_hw_slowdown>Active", ["clocks"],
     [("clocks_hw_slowdown", "fail", "drain", 0, None)]),
    ("<clocks_throttle_reason_hw_thermal_slowdown>Not Active", "<clocks_throttle_reason_hw_thermal_slowdown>Active", ["clocks"],
     [("clocks_thermal", "fail", "drain", 0, None)]),
    ("<clocks_throttle_reason_sw_thermal_slowdown>Not Active", "<clocks_throttle_reason_sw_thermal_slowdown>Active", ["clocks"],
     [("clocks_thermal", "warn", "none", 0, None)]),
    ("<clocks_throttle_reason_sw_power_cap>Not Active", "<clocks_throttle_reason_sw_power_cap>Active", ["clocks"], []),
]


@pytest.mark.parametrize("old, new, checks, findings", SYNTHETIC_FAULTS)
def test_synthetic_faults(old, new, checks, findings):
    text = fixture("nvsmi_q_x__a10g_idle_gen1__telegraf.xml")
    assert old in text
    result = judge(card("NVIDIA A10G", 4, width=8), checks, {"nvidia_smi_q_xml": text.replace(old, new, 1)})
    assert summary(result) == findings


def test_retired_pages_pending_warns():
    # Synthetic variant of the real T4 (pre-Ampere page retirement).
    text = fixture("nvsmi_q_x__tesla_t4_driver515__telegraf.xml").replace("<pending_retirement>No", "<pending_retirement>Yes")
    result = judge(card("Tesla T4", 3, width=8), ["remapped_rows"], {"nvidia_smi_q_xml": text})
    assert summary(result) == [("retired_pages_pending", "warn", "reset_gpu", 0, None)]
    assert result["healthy"] is True


def test_nvlink_real_outputs():
    a100 = resolve_expected({"gpu_count": 2, "gpu_model": "NVIDIA A100-SXM4-80GB"})
    healthy = judge(a100, ["nvlink"], {"nvlink_status": fixture("nvlink_s__a100_sxm4_80gb__nccl_tests_228.txt")})
    assert healthy["findings"] == []
    v100 = card("Tesla V100-SXM2-32GB", 3)
    v100["nvlinks_per_gpu"] = 6
    broken = judge(v100, ["nvlink"], {"nvlink_status": fixture("nvlink_s__v100_two_inactive__azhpc_diagnostics_73.txt")})
    assert summary(broken) == [("nvlink_inactive", "fail", "reboot", 3, None)]
    assert "has 4 of 6 NVLinks active (inactive: 3, 5)" in broken["findings"][0]["message"]


XID_CASES = [
    ("kernel_log__dmesg_T__xid13_xid109__gpud_pr46.txt",
     [("xid", "warn", "restart_app", None, 13), ("xid", "fail", "reset_gpu", None, 109)], False),
    ("kernel_log__dmesg__xid32_xid31__bumblebee_677.txt",
     [("xid", "warn", "restart_app", None, 32), ("xid", "warn", "restart_app", None, 31)], True),
    ("kernel_log__journalctl__xid45_after_xid149_145__ogkm_1150.txt", [("xid", "warn", "none", None, 45)] * 4, True),
    ("kernel_log__dmesg__sxid22013_nonfatal__nvtrust_124.txt", [("sxid", "warn", "none", None, 22013)], True),
    ("kernel_log__dmesg_iso__sxid12028__gpud_pr338.txt", [("sxid", "warn", "none", None, 12028)], True),
    ("kernel_log__journalctl_short_iso__xid79_xid63__synthetic.txt",
     [("xid", "warn", "none", None, 63), ("xid", "fail", "reboot", None, 79), ("xid", "fail", "reboot", None, 154)], False),
]


@pytest.mark.parametrize("name, findings, healthy", XID_CASES)
def test_xid_findings(name, findings, healthy):
    result = judge(A100_80, ["xid"], {"kernel_log": fixture(name)})
    assert summary(result) == findings
    assert result["healthy"] is healthy


def test_xid_names_the_gpu_as_nvidia_smi_prints_it():
    # Synthetic: the real Xid 79 line, on the bus of the real A100 report.
    log = "kernel: NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus\n"
    result = judge(A100_80, ["xid"], {"kernel_log": log, "nvidia_smi_q_xml": fixture("nvsmi_q_x__a100_sxm4_80gb_mig__telegraf.xml")})
    assert (result["findings"][0]["pci_bus_id"], result["findings"][0]["gpu_index"]) == ("00000000:01:00.0", 0)
    without_report = judge(A100_80, ["xid"], {"kernel_log": log})
    assert (without_report["findings"][0]["pci_bus_id"], without_report["findings"][0]["gpu_index"]) == ("0000:01:00", None)
    assert without_report["findings"][0]["message"] == (
        "The GPU at PCI 0000:01:00 logged Xid 79 once (GPU has fallen off the bus): reboot the node, as NVIDIA's Xid "
        "catalog says to restart the machine.")


def test_xid_overrides_and_unknown_xids():
    log = fixture("kernel_log__dmesg_T__xid13_xid109__gpud_pr46.txt") + "[Fri Aug 30 12:00:00 2024] NVRM: Xid (PCI:0000:cb:00): 999, new\n"
    result = judge(A100_80, ["xid"], {"kernel_log": log}, xid_overrides({"109": "none", 13: "drain"}))
    assert summary(result) == [("xid", "fail", "drain", None, 13), ("xid", "warn", "none", None, 109), ("xid", "warn", "none", None, 999)]
    assert "not in NVIDIA's Xid catalog" in result["findings"][2]["message"]


def test_fatal_sxid_fails():
    # Synthetic variant of the real non-fatal SXid lines.
    log = fixture("kernel_log__dmesg__sxid22013_nonfatal__nvtrust_124.txt").replace("22013, Non-fatal, Link 46", "22013, Fatal, Link 46")
    assert summary(judge(A100_80, ["xid"], {"kernel_log": log})) == [("sxid", "fail", "reboot", None, 22013)]
    assert judge(A100_80, ["xid"], {"kernel_log": log})["findings"][0]["device"] == "nvidia-nvswitch3"


def test_dcgm_diag_findings():
    real = judge(A100_80, ["dcgm_diag"], {"dcgm_diag_json": fixture("dcgm_diag_j__nvvs_1_7_per_gpu__dcgm_testdata.json")})
    assert {item["severity"] for item in real["findings"]} == {"fail"}
    synthetic = judge(A100_80, ["dcgm_diag"], {"dcgm_diag_json": fixture("dcgm_diag_j__dcgm4_memory_fail__synthetic.json")})
    assert summary(synthetic) == [("dcgm_diag", "fail", "drain", 1, None), ("dcgm_diag", "warn", "none", 0, None)]


def test_rdma_bandwidth_against_the_rails():
    expected = resolve_expected({"gpu_count": 1, "gpu_model": "NVIDIA A100-SXM4-80GB",
                                 "rails": [{"device": "mlx5_0", "rate_gbps": 400}, {"device": "mlx5_1", "rate_gbps": 400},
                                           {"device": "mlx5_2", "rate_gbps": 400}]})
    runs = {"mlx5_0": fixture("ib_write_bw__ndr400_8mib__synthetic.txt"), "mlx5_1": fixture("ib_write_bw__roce_8_bytes__perftest_273.txt"),
            "mlx5_2": "Couldn't connect to 10.0.0.2:18515\n", "mlx5_9": fixture("ib_write_bw__roce_8_bytes__perftest_273.txt")}
    result = judge(expected, ["rdma_bandwidth"], {"ib_write_bw": runs})
    assert [(item["code"], item["severity"], item["device"]) for item in result["findings"]] == [
        ("rdma_bandwidth", "fail", "mlx5_1"), ("rdma_bandwidth", "fail", "mlx5_2")]
    assert result["findings"][0]["message"].startswith("Rail mlx5_1 moved 0.48 Gb/s with 8-byte writes, below 360 Gb/s")


def test_missing_outputs_are_skipped_and_unreadable_report_is_unknown():
    result = judge(A100_80, ["gpus", "xid", "dcgm_diag"], {})
    assert result["healthy"] is True and result["findings"] == []
    assert [item["check"] for item in result["skipped_checks"]] == ["gpus", "xid", "dcgm_diag"]
    unknown = judge(A100_80, ["gpus"], {"nvidia_smi_q_xml": "No devices were found\n"})
    assert (unknown["healthy"], unknown["state"], unknown["reason"]) == (None, "unknown", "nvidia-smi -q -x printed no report but: No devices were found.")


def test_expected_outside_the_catalogue():
    with pytest.raises(ExpectedError) as error:
        resolve_expected({"gpu_count": 1, "gpu_model": "NVIDIA A10G", "pcie_gen": 4})
    assert str(error.value) == ("GPU model 'NVIDIA A10G' is not in the collection's GPU catalogue, so expected must give "
                                "pcie_width, nvlinks_per_gpu.")
    h100 = resolve_expected({"gpu_count": 8, "gpu_model": "NVIDIA H100 80GB HBM3"})
    assert (h100["pcie_gen"], h100["pcie_width"], h100["nvlinks_per_gpu"]) == (5, 16, 18)


@pytest.mark.parametrize("overrides, message", [
    ({"abc": "none"}, "xid_actions keys must be Xid numbers, not 'abc'."),
    ({"79": "panic"}, "xid_actions[79] must be one of none, restart_app, reset_gpu, reboot, drain, rma, not 'panic'."),
])
def test_bad_xid_overrides(overrides, message):
    with pytest.raises(ValueError) as error:
        xid_overrides(overrides)
    assert str(error.value) == message
