# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The node_health parsers on every recorded output under fixtures/node_health (sources in its README)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.onprem.gpu.plugins.module_utils._dcgm_diag import DcgmDiagError, parse_dcgm_diag
from ansible_collections.onprem.gpu.plugins.module_utils._kernel_xid import parse_kernel_log, pci_key
from ansible_collections.onprem.gpu.plugins.module_utils._nvlink_status import parse_nvlink_status
from ansible_collections.onprem.gpu.plugins.module_utils._nvsmi_xml import NvsmiXmlError, parse_nvsmi_xml
from ansible_collections.onprem.gpu.plugins.module_utils._perftest import PerftestError, parse_ib_write_bw
from ansible_collections.onprem.gpu.plugins.module_utils._xid_catalog import catalog_action, severity_of

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "node_health"


def fixture(name):
    return (FIXTURES / name).read_text(encoding="utf-8")


NVSMI_CASES = [
    # fixture, attached_gpus, name, pcie (max_gen, current_gen, max_width, current_width), util, clock reasons,
    # volatile uncorrected, remapped rows, retired pages pending
    ("nvsmi_q_x__a100_sxm4_80gb_mig__telegraf.xml", 4, "NVIDIA A100-SXM4-80GB", (4, 4, 16, 16), None, set(), 0, None, None),
    ("nvsmi_q_x__a100_sxm4_40gb_mig_driver510__netdata.xml", 1, "NVIDIA A100-SXM4-40GB", (4, 4, 16, 16), None, set(), None, None, None),
    ("nvsmi_q_x__a10g_idle_gen1__telegraf.xml", 1, "NVIDIA A10G", (4, 1, 16, 8), 0, {"gpu_idle"}, 0,
     {"pending": False, "failure": False}, None),
    ("nvsmi_q_x__tesla_t4_driver515__telegraf.xml", 1, "Tesla T4", (3, 3, 16, 8), 0, set(), 0, None, False),
    ("nvsmi_q_x__tesla_p100_single_double_bit__netdata.xml", 1, "Tesla P100-PCIE-16GB", (3, 3, 16, 16), 0, {"gpu_idle"}, 0, None, False),
]


@pytest.mark.parametrize("name, attached, model, pcie, util, reasons, uncorrected, remapped, retired", NVSMI_CASES)
def test_nvsmi_xml_real_reports(name, attached, model, pcie, util, reasons, uncorrected, remapped, retired):
    report = parse_nvsmi_xml(fixture(name))
    assert report["attached_gpus"] == attached
    assert len(report["gpus"]) == 1  # attached_gpus may count more GPUs than the report holds
    gpu = report["gpus"][0]
    assert gpu["index"] == 0 and gpu["name"] == model and gpu["pci_bus_id"].startswith("00000000:")
    assert tuple(gpu["pcie"][key] for key in ("max_gen", "current_gen", "max_width", "current_width")) == pcie
    assert (gpu["gpu_util"], gpu["clock_reasons"], gpu["volatile_uncorrected"]) == (util, reasons, uncorrected)
    assert (gpu["remapped_rows"], gpu["retired_pages_pending"]) == (remapped, retired)


def test_nvsmi_xml_old_single_double_bit_counters_are_summed():
    # Synthetic variant of the real P100 report: two double-bit errors since the driver loaded.
    text = fixture("nvsmi_q_x__tesla_p100_single_double_bit__netdata.xml").replace(
        "<total>0</total>\n\t\t\t\t</double_bit>\n\t\t\t</volatile>", "<total>2</total>\n\t\t\t\t</double_bit>\n\t\t\t</volatile>", 1)
    assert parse_nvsmi_xml(text)["gpus"][0]["volatile_uncorrected"] == 2


@pytest.mark.parametrize("text, message", [
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n",
     "nvidia-smi -q -x printed no report but: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."),
    ("<nvidia_smi_log><gpu>", "The nvidia-smi -q -x report is not well-formed XML (no element found: line 1, column 21)."),
])
def test_nvsmi_xml_refuses_what_is_not_a_report(text, message):
    with pytest.raises(NvsmiXmlError) as error:
        parse_nvsmi_xml(text)
    assert str(error.value) == message


def test_nvlink_status_real_outputs():
    a100 = parse_nvlink_status(fixture("nvlink_s__a100_sxm4_80gb__nccl_tests_228.txt"))
    assert [(gpu["index"], len(gpu["active"]), gpu["inactive"]) for gpu in a100] == [(0, 12, []), (1, 12, [])]
    assert a100[0]["uuid"] == "GPU-ff8a40d4-abc6-08d1-f939-15848b5d4e05"
    v100 = parse_nvlink_status(fixture("nvlink_s__v100_two_inactive__azhpc_diagnostics_73.txt"))
    assert [(gpu["index"], gpu["active"], gpu["inactive"]) for gpu in v100] == [(3, [0, 1, 2, 4], [3, 5])]


def test_nvlink_status_all_links_down_message():
    # Synthetic: NVML prints this sentence instead of link lines when every link of a GPU is down.
    text = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\nNVML: Unable to retrieve NVLink information as all links are inActive\n"
    assert parse_nvlink_status(text) == [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-1", "active": [], "inactive": []}]


KERNEL_CASES = [
    ("kernel_log__dmesg_T__xid13_xid109__gpud_pr46.txt", [("xid", 13, "0000:cb:00")] * 3 + [("xid", 109, "0000:cb:00")]),
    ("kernel_log__dmesg__xid32_xid31__bumblebee_677.txt", [("xid", 32, "0000:01:00")] * 2 + [("xid", 31, "0000:01:00")]),
    ("kernel_log__journalctl__xid45_after_xid149_145__ogkm_1150.txt",
     [("xid", 45, pci) for pci in ("0000:dc:00", "0000:ed:00", "0000:ba:00", "0000:97:00", "0000:dc:00", "0000:ba:00", "0000:ed:00")]),
    ("kernel_log__dmesg__sxid22013_nonfatal__nvtrust_124.txt", [("sxid", 22013, "0000:04:00.0")] * 8),
    ("kernel_log__dmesg_iso__sxid12028__gpud_pr338.txt", [("sxid", 12028, "0000:84:00.0")]),
    ("kernel_log__journalctl_short_iso__xid79_xid63__synthetic.txt",
     [("xid", 63, "0000:10:1c"), ("xid", 79, "0000:44:00"), ("xid", 154, "0000:44:00")]),
]


@pytest.mark.parametrize("name, events", KERNEL_CASES)
def test_kernel_log_every_format(name, events):
    parsed = parse_kernel_log(fixture(name))
    assert [(event["kind"], event["code"], event["pci"]) for event in parsed] == events


def test_sxid_fatality_is_read_from_the_line():
    events = parse_kernel_log(fixture("kernel_log__dmesg__sxid22013_nonfatal__nvtrust_124.txt"))
    assert [event["fatal"] for event in events] == [None, False, None, None, False, None, None, False]
    assert {event["device"] for event in events} == {"nvidia-nvswitch3"}


def test_pci_key_matches_kernel_and_nvidia_smi_forms():
    assert pci_key("0000:cb:00") == pci_key("00000000:CB:00.0") == (0, 0xCB, 0)
    assert pci_key("garbage") is None


@pytest.mark.parametrize("xid, action, severity", [
    (13, "restart_app", "warn"), (31, "restart_app", "warn"), (94, "restart_app", "warn"),
    (95, "reset_gpu", "fail"), (109, "reset_gpu", "fail"), (119, "reset_gpu", "fail"), (120, "reset_gpu", "fail"),
    (79, "reboot", "fail"), (43, "none", "warn"), (63, "none", "warn"), (48, "reset_gpu", "fail"),
    (74, "reset_gpu", "fail"), (149, "reset_gpu", "fail"), (45, "none", "warn"), (54, "drain", "fail"),
    (2, "none", "warn"),
])
def test_xid_catalog_immediate_actions(xid, action, severity):
    assert catalog_action(xid)[0] == action
    assert severity_of(action) == severity


def test_xid_154_uses_the_recovery_action_it_names():
    assert catalog_action(154, "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)")[0] == "reboot"
    assert catalog_action(154, "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)")[0] == "reset_gpu"


def test_unknown_xid_has_no_catalog_action():
    assert catalog_action(999) == (None, "it is not in NVIDIA's Xid catalog")


def test_dcgm_diag_real_nvvs_document():
    diag = parse_dcgm_diag(fixture("dcgm_diag_j__nvvs_1_7_per_gpu__dcgm_testdata.json"))
    assert diag["runtime_error"] is None
    deployment = diag["results"][0]
    assert (deployment["category"], deployment["test"], deployment["status"], deployment["gpus"]) == ("Deployment", "Denylist", "pass", [0, 1, 2, 3])
    assert {result["status"] for result in diag["results"]} == {"pass", "fail", "skip"}


def test_dcgm_diag_dcgm4_document_with_a_banner_line():
    diag = parse_dcgm_diag(fixture("dcgm_diag_j__dcgm4_memory_fail__synthetic.json"))
    failed = [result for result in diag["results"] if result["status"] == "fail"]
    assert failed == [{"category": "Hardware", "test": "memory", "status": "fail", "gpus": [1], "messages": ["A DBE occurred on GPU 1."]}]


def test_dcgm_diag_without_a_document():
    with pytest.raises(DcgmDiagError):
        parse_dcgm_diag("Error: unable to establish a connection to the specified host: localhost\n")


@pytest.mark.parametrize("name, expected", [
    ("ib_write_bw__roce_8_bytes__perftest_273.txt", {"device": "ib0", "link_type": "Ethernet", "bytes": 8, "bw_average_gbps": 0.48, "bw_peak_gbps": 0.0}),
    ("ib_write_bw__ndr400_8mib__synthetic.txt", {"device": "mlx5_0", "link_type": "IB", "bytes": 8388608, "bw_average_gbps": 392.47, "bw_peak_gbps": 392.51}),
])
def test_ib_write_bw(name, expected):
    assert parse_ib_write_bw(fixture(name)) == expected


def test_ib_write_bw_in_megabytes_is_converted():
    # Synthetic: the real RoCE run without --report_gbits prints MB/sec (2^20 bytes).
    text = fixture("ib_write_bw__ndr400_8mib__synthetic.txt").replace("[Gb/sec]", "[MB/sec]").replace("392.47", "46786.00")
    assert parse_ib_write_bw(text)["bw_average_gbps"] == 392.47


def test_ib_write_bw_without_a_table():
    with pytest.raises(PerftestError) as error:
        parse_ib_write_bw(" Couldn't connect to 10.0.0.2:18515\n")
    assert str(error.value) == "ib_write_bw printed no result table but: Couldn't connect to 10.0.0.2:18515."
