"""Tests of the lab's node-health doubles: nvidia-smi -q -x / nvlink -s and their fault knobs (lab-gpu-fault), the
lab kernel log's Xid/SXid lines, dcgmi diag, and ib_write_bw.

Expected shapes come from real recorded outputs (sources in each double's README), copied here as the recorded
lines; the doubles run as subprocesses with their inputs in a temporary directory.
"""

import json
import os
import pathlib
import re
import socket
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

LAB = pathlib.Path(__file__).resolve().parents[2] / "lab" / "doubles"
NVSMI = LAB / "nvidia_smi" / "nvidia-smi"
FAULT = LAB / "nvidia_smi" / "lab-gpu-fault"
DCGMI = LAB / "dcgm" / "dcgmi"
IB_WRITE_BW = LAB / "perftest" / "ib_write_bw"
H100 = "NVIDIA H100 80GB HBM3"

# Child elements of <gpu>, in order, of a real R575 `nvidia-smi -q -x` (575.51.02, DOCTYPE nvsmi_device_v12.dtd),
# up to <fabric>; the double prints these and in this order.
RECORDED_R575_GPU_CHILDREN = [
    "product_name", "product_brand", "product_architecture", "display_mode", "display_attached", "display_active",
    "persistence_mode", "addressing_mode", "mig_mode", "mig_devices", "accounting_mode", "accounting_mode_buffer_size",
    "driver_model", "serial", "uuid", "minor_number", "vbios_version", "multigpu_board", "board_id", "board_part_number",
    "gpu_part_number", "gpu_fru_part_number", "platformInfo", "inforom_version", "inforom_bbx_flush", "gpu_operation_mode",
    "c2c_mode", "gpu_virtualization_mode", "gpu_reset_status", "gpu_recovery_action", "gsp_firmware_version", "ibmnpu", "pci",
    "fan_speed", "performance_state", "clocks_event_reasons", "clocks_event_reasons_counters", "sparse_operation_mode",
    "fb_memory_usage", "bar1_memory_usage", "cc_protected_memory_usage", "compute_mode", "utilization", "encoder_stats",
    "fbc_stats", "dram_encryption_mode", "ecc_mode", "ecc_errors", "retired_pages", "remapped_rows", "temperature",
    "supported_gpu_target_temp", "gpu_power_readings", "gpu_memory_power_readings", "module_power_readings", "power_smoothing",
    "power_profiles", "clocks", "applications_clocks", "default_applications_clocks", "deferred_clocks", "max_clocks",
    "max_customer_boost_clocks", "clock_policy", "voltage", "fabric", "supported_clocks", "processes",
]
RECORDED_PCIE_GEN = ["max_link_gen", "current_link_gen", "device_current_link_gen", "max_device_link_gen", "max_host_link_gen"]
RECORDED_CLOCKS_EVENT_REASONS = [
    "clocks_event_reason_gpu_idle", "clocks_event_reason_applications_clocks_setting", "clocks_event_reason_sw_power_cap",
    "clocks_event_reason_hw_slowdown", "clocks_event_reason_hw_thermal_slowdown", "clocks_event_reason_hw_power_brake_slowdown",
    "clocks_event_reason_sync_boost", "clocks_event_reason_sw_thermal_slowdown", "clocks_event_reason_display_clocks_setting",
]
RECORDED_REMAPPED_ROWS = ["remapped_row_corr", "remapped_row_unc", "remapped_row_pending", "remapped_row_failure", "row_remapper_histogram"]
RECORDED_ECC_AGGREGATE = ["sram_correctable", "sram_uncorrectable_parity", "sram_uncorrectable_secded", "dram_correctable",
                          "dram_uncorrectable", "sram_threshold_exceeded"]
RECORDED_FABRIC = ["state", "status", "cliqueId", "clusterUuid", "health"]
RECORDED_PROLOGUE = '<?xml version="1.0" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">\n<nvidia_smi_log>\n\t<timestamp>'
# A real A100 in MIG mode (netdata's a100-sxm4-mig.xml recording, R510): no row-remapping report.
RECORDED_MIG_REMAPPED_ROWS = "<remapped_rows>N/A</remapped_rows>"
# nvidia-smi nvlink -s: an H100 (bottlerocket-os/bottlerocket#4418) and an A100-SXM4-80GB (leptonai/gpud testdata).
RECORDED_NVLINK_H100 = "Link 0: 26.562 GB/s"
RECORDED_NVLINK_A100 = "Link 11: 25 GB/s"
# Kernel lines as published (leptonai/gpud sources, NVIDIA/gpu-operator and open-gpu-kernel-modules reports).
RECORDED_XID_79 = "NVRM: Xid (PCI:0000:05:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
RECORDED_XID_119 = ("NVRM: Xid (PCI:0002:00:00): 119, pid=1582259, name=nvc:[driver], Timeout after 6s of waiting for RPC response "
                    "from GPU1 GSP! Expected function 76 (GSP_RM_CONTROL) (0x20802a02 0x8).")
RECORDED_SXID = "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error (First)"
DMESG_PREFIX = re.compile(r"^\[ *\d+\.\d{6}\] ")
# dcgmi diag, DCGM 4.2.3 (NVIDIA/DCGM#253).
RECORDED_DCGM4 = """Successfully ran diagnostic for group.
+---------------------------+------------------------------------------------+
| Diagnostic                | Result                                         |
+===========================+================================================+
|-----  Metadata  ----------+------------------------------------------------|
| DCGM Version              | 4.2.3                                          |
| Driver Version Detected   | 570.148.08                                     |
| GPU Device IDs Detected   | 26b9, 26b9, 26b9, 26b9                         |
|-----  Deployment  --------+------------------------------------------------|
| software                  | Pass                                           |
|                           | GPU0: Pass                                     |
|                           | GPU1: Pass                                     |
|                           | GPU2: Pass                                     |
|                           | GPU3: Pass                                     |
+-----  Hardware  ----------+------------------------------------------------+
"""
# ib_write_bw --report_gbits, client side (linux-rdma/perftest#273, #234): header lines and the row layout.
RECORDED_PERFTEST_HEADER = [
    "                    RDMA_Write BW Test",
    " Dual-port       : OFF\t\tDevice         : mlx5_0",
    " Number of qps   : 1\t\tTransport type : IB",
    " Connection type : RC\t\tUsing SRQ      : OFF",
    " PCIe relax order: ON",
    " ibv_wr* API     : ON",
]
RECORDED_PERFTEST_TITLE = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"
RECORDED_PERFTEST_ROW = " 8          224958464        0.00               0.48   \t\t   7.498617"
RECORDED_WAITING = "\n************************************\n* Waiting for client to connect... *\n************************************\n"


@pytest.fixture
def lab(tmp_path, monkeypatch):
    hardware = {"gpu_model": H100, "gpu_count": 8, "seed": "dc1-gpu1",
                "fabric": {"name": "dc1", "link_layer": "RoCE", "rdma": True, "rails": 8, "rail_gbps": 400,
                           "down_rails": [7], "degraded_rails": [5], "degraded_rail_gbps": 100}}
    (tmp_path / "hardware.json").write_text(json.dumps(hardware))
    (tmp_path / "driver.json").write_text(json.dumps({"driver_version": "580.65.06", "cuda_version": "13.0"}))
    env = {
        "NVSMI_DOUBLE_HARDWARE": str(tmp_path / "hardware.json"), "NVSMI_DOUBLE_DRIVER": str(tmp_path / "driver.json"),
        "NVSMI_DOUBLE_STATE": str(tmp_path / "state.json"), "DCGM_DOUBLE_HARDWARE": str(tmp_path / "hardware.json"),
        "DCGM_DOUBLE_NVSMI_STATE": str(tmp_path / "state.json"), "DCGM_DOUBLE_STATE": str(tmp_path / "dcgm.json"),
        "DCGM_DOUBLE_DRIVER": str(tmp_path / "driver.json"), "DCGM_DOUBLE_BUILD": str(tmp_path / "build.json"),
        "LAB_KERNEL_LOG": str(tmp_path / "kernel.log"), "PERFTEST_DOUBLE_HARDWARE": str(tmp_path / "hardware.json"),
        "NVSMI_DOUBLE_TIMESTAMP": "Mon Oct 13 00:25:36 2025",
    }
    (tmp_path / "build.json").write_text(json.dumps({"dcgm_version": "4.4.1"}))
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return tmp_path


def run(program, *arguments, check=True, env=None):
    result = subprocess.run([sys.executable, str(program), *arguments], capture_output=True, text=True, env=env, timeout=60, check=False)
    if check:
        assert result.returncode == 0, result.stderr + result.stdout
    return result


def report(*arguments):
    text = run(NVSMI, "-q", "-x", *arguments).stdout
    return text, ET.fromstring(text.split("\n", 2)[2])


def fault(*arguments):
    return run(FAULT, *arguments)


def child_tags(element):
    return [child.tag for child in element]


def test_xml_follows_recorded_document(lab):
    text, root = report()
    assert text.startswith(RECORDED_PROLOGUE)
    assert [root[i].tag for i in range(4)] == ["timestamp", "driver_version", "cuda_version", "attached_gpus"]
    assert root.findtext("driver_version") == "580.65.06" and root.findtext("attached_gpus") == "8"
    gpus = root.findall("gpu")
    assert len(gpus) == 8 and gpus[0].get("id") == "00000000:18:00.0"
    tags = child_tags(gpus[0])
    assert [tag for tag in tags if tag in RECORDED_R575_GPU_CHILDREN] == RECORDED_R575_GPU_CHILDREN
    assert child_tags(gpus[0].find("pci/pci_gpu_link_info/pcie_gen")) == RECORDED_PCIE_GEN
    assert child_tags(gpus[0].find("clocks_event_reasons")) == RECORDED_CLOCKS_EVENT_REASONS
    assert child_tags(gpus[0].find("remapped_rows")) == RECORDED_REMAPPED_ROWS
    assert child_tags(gpus[0].find("ecc_errors/aggregate")) == RECORDED_ECC_AGGREGATE
    assert child_tags(gpus[0].find("fabric")) == RECORDED_FABRIC
    assert "\t\t<product_name>NVIDIA H100 80GB HBM3</product_name>\n" in text


def test_xml_values_of_a_healthy_h100(lab):
    dummy, root = report("-i", "0")
    gpu = root.find("gpu")
    assert gpu.findtext("pci/pci_device_id") == "233010DE"
    assert gpu.findtext("pci/pci_gpu_link_info/link_widths/current_link_width") == "16x"
    assert gpu.findtext("pci/pci_gpu_link_info/pcie_gen/max_link_gen") == "5"
    assert gpu.findtext("clocks_event_reasons/clocks_event_reason_gpu_idle") == "Active"
    assert gpu.findtext("clocks_event_reasons/clocks_event_reason_hw_slowdown") == "Not Active"
    assert gpu.findtext("remapped_rows/remapped_row_pending") == "No"
    assert gpu.findtext("retired_pages/pending_retirement") == "N/A"
    assert gpu.findtext("ecc_errors/volatile/dram_uncorrectable") == "0"
    assert gpu.findtext("fb_memory_usage/total") == "81559 MiB"
    # No Fabric Manager holds the GPUs yet: registration has not completed.
    assert gpu.findtext("fabric/state") == "In Progress"
    uuid = gpu.findtext("uuid")
    assert run(NVSMI, "-L").stdout.splitlines()[0] == f"GPU 0: {H100} (UUID: {uuid})"


def test_fabric_completes_with_fabric_manager(lab):
    (lab / "state.json").write_text(json.dumps({"holders": ["nvidia-fabricmanager"]}))
    dummy, root = report("-i", "0")
    assert root.findtext("gpu/fabric/state") == "Completed" and root.findtext("gpu/fabric/status") == "Success"


def test_mig_mode_has_no_row_remapping_report(lab):
    (lab / "state.json").write_text(json.dumps({"gpus": [{"mig_mode": {"current": "Enabled", "pending": "Enabled"}}]}))
    text, root = report("-i", "0")
    assert RECORDED_MIG_REMAPPED_ROWS in text


def test_missing_gpu_knob(lab):
    fault("gpu-missing", "3")
    text, root = report()
    gpus = root.findall("gpu")
    assert len(gpus) == 7 and root.findtext("attached_gpus") == "7"
    assert "00000000:5D:00.0" not in [gpu.get("id") for gpu in gpus]
    listing = run(NVSMI, "-L").stdout.splitlines()
    assert len(listing) == 7 and listing[3].startswith("GPU 3: ")
    csv = run(NVSMI, "--query-gpu=index,pci.bus_id", "--format=csv,noheader").stdout.splitlines()
    assert csv[3] == "3, 00000000:9A:00.0"
    # The GPUs keep their identity: GPU 3 now is the board in slot 4.
    fault("gpu-missing", "3", "--clear")
    assert run(NVSMI, "-L").stdout.splitlines()[4].split("UUID: ")[1] == listing[3].split("UUID: ")[1]


def test_pcie_downtrained_knob(lab):
    fault("pcie", "2", "--width", "8", "--gen", "3")
    dummy, root = report("-i", "2")
    link = root.find("gpu/pci/pci_gpu_link_info")
    assert link.findtext("link_widths/current_link_width") == "8x" and link.findtext("link_widths/max_link_width") == "16x"
    assert link.findtext("pcie_gen/current_link_gen") == "3" and link.findtext("pcie_gen/max_link_gen") == "5"
    csv = run(NVSMI, "-i", "2", "--query-gpu=pcie.link.width.current,pcie.link.width.max,pcie.link.gen.current,pcie.link.gen.max",
              "--format=csv,noheader").stdout
    assert csv == "8, 16, 3, 5\n"


def test_remapped_rows_and_ecc_knobs(lab):
    fault("remapped-rows", "1", "--pending", "--uncorrectable", "2")
    fault("ecc", "1", "--uncorrectable", "3")
    dummy, root = report("-i", "1")
    rows = root.find("gpu/remapped_rows")
    assert rows.findtext("remapped_row_pending") == "Yes" and rows.findtext("remapped_row_unc") == "2"
    assert rows.findtext("remapped_row_failure") == "No"
    assert root.findtext("gpu/ecc_errors/volatile/dram_uncorrectable") == "3"
    assert run(NVSMI, "-i", "1", "--query-gpu=ecc.errors.uncorrected.volatile.total", "--format=csv,noheader").stdout == "3\n"
    fault("remapped-rows", "1", "--failure")
    dummy, root = report("-i", "1")
    assert root.findtext("gpu/remapped_rows/remapped_row_failure") == "Yes"


def test_hw_slowdown_knob(lab):
    fault("slowdown", "0")
    dummy, root = report("-i", "0")
    assert root.findtext("gpu/clocks_event_reasons/clocks_event_reason_hw_slowdown") == "Active"
    # Idle (0x1) and HW slowdown (0x8), as NVML's nvmlClocksEventReason bits.
    assert run(NVSMI, "-i", "0", "--query-gpu=clocks_event_reasons.active", "--format=csv,noheader").stdout == "0x0000000000000009\n"
    fault("slowdown", "0", "--reason", "hw_thermal_slowdown")
    assert run(NVSMI, "-i", "0", "--query-gpu=clocks_throttle_reasons.active", "--format=csv,noheader").stdout == "0x0000000000000049\n"


def test_nvlink_status_and_inactive_knob(lab):
    lines = run(NVSMI, "nvlink", "-s", "-i", "0").stdout.splitlines()
    assert lines[0].startswith(f"GPU 0: {H100} (UUID: GPU-") and len(lines) == 19
    assert lines[1] == "\t " + RECORDED_NVLINK_H100
    fault("nvlink", "0", "--inactive", "2,5")
    lines = run(NVSMI, "nvlink", "-s", "-i", "0").stdout.splitlines()
    assert lines[3] == "\t Link 2: <inactive>" and lines[6] == "\t Link 5: <inactive>" and lines[4] == "\t Link 3: 26.562 GB/s"


def test_nvlink_status_a100(lab):
    (lab / "hardware.json").write_text(json.dumps({"gpu_model": "NVIDIA A100-SXM4-80GB", "gpu_count": 2, "seed": "x"}))
    lines = run(NVSMI, "nvlink", "-s").stdout.splitlines()
    assert len(lines) == 26 and lines[12] == "\t " + RECORDED_NVLINK_A100


def test_bad_knob_is_a_lab_error(lab):
    (lab / "state.json").write_text(json.dumps({"gpus": [{"pcie": {"width": "x8"}}]}))
    result = run(NVSMI, "-L", check=False)
    assert result.returncode == 255 and result.stderr.startswith("nvidia-smi (lab double):")


def test_xid_and_sxid_lines(lab):
    fault("xid", "3", "79")
    fault("xid", "0", "119", "--pid", "1582259", "--name", "nvc:[driver]")
    fault("sxid", "0", "12028", "--link", "32")
    lines = (lab / "kernel.log").read_text().splitlines()
    assert all(DMESG_PREFIX.match(line) for line in lines)
    bodies = [DMESG_PREFIX.sub("", line) for line in lines]
    assert bodies[0] == RECORDED_XID_79.replace("0000:05:00", "0000:5d:00")
    assert bodies[1] == RECORDED_XID_119.replace("0002:00:00", "0000:18:00").replace("GPU1 GSP", "GPU0 GSP")
    assert bodies[2] == RECORDED_SXID.replace("nvswitch3", "nvswitch0")


def test_xid_clear_drops_that_gpus_lines_of_that_xid(lab):
    fault("xid", "3", "79")
    fault("xid", "2", "79")
    fault("xid", "3", "48")
    fault("xid", "3", "79", "--clear")
    bodies = [DMESG_PREFIX.sub("", line) for line in (lab / "kernel.log").read_text().splitlines()]
    assert [body.split("): ")[1].split(",")[0] for body in bodies] == ["79", "48"]
    assert "PCI:0000:5d:00" not in bodies[0] and "PCI:0000:5d:00" in bodies[1]


def test_xid_without_message_is_refused(lab):
    assert run(FAULT, "xid", "0", "31", check=False).returncode == 2


def test_dcgmi_diag_text_follows_recording(lab):
    result = run(DCGMI, "diag", "-r", "1")
    recorded = RECORDED_DCGM4.splitlines()
    lines = result.stdout.splitlines()
    assert lines[:5] == recorded[:5]
    assert lines[5] == recorded[5].replace("4.2.3", "4.4.1")
    # The recorded value column is 46 wide: re-pad the lab's driver version into it.
    assert lines[6] == recorded[6].replace("570.148.08 ", "580.65.06  ")
    assert lines[7].startswith("| GPU Device IDs Detected   | 2330, 2330,") and len(lines[7]) == len(recorded[7])
    assert lines[8:10] == recorded[8:10] and lines[10] == recorded[10]
    assert lines[-1] == recorded[1] and len(lines) == 8 + 2 + 8 + 1


def test_dcgmi_levels_and_failing_test_knob(lab):
    result = run(DCGMI, "diag", "-r", "2")
    assert "+-----  Hardware  ----------+------------------------------------------------+" in result.stdout
    assert "| pcie                      | Pass                                           |" in result.stdout
    fault("dcgm-fail", "1", "memory")
    result = run(DCGMI, "diag", "-r", "2", check=False)
    assert result.returncode == 1
    assert "| memory                    | Fail                                           |" in result.stdout
    assert "|                           | GPU1: Fail                                     |" in result.stdout
    document = json.loads(run(DCGMI, "diag", "-r", "3", "-j", check=False).stdout)
    categories = document["DCGM Diagnostic"]["test_categories"]
    tests = {test["name"]: test for category in categories for test in category["tests"]}
    assert set(tests) == {"software", "pcie", "memory", "diagnostic", "targeted_stress", "targeted_power", "memory_bandwidth"}
    assert tests["memory"]["test_summary"]["status"] == "Fail" and tests["pcie"]["test_summary"]["status"] == "Pass"
    assert [result["status"] for result in tests["memory"]["results"]][:2] == ["Pass", "Fail"]


def test_dcgmi_follows_nvidia_smi_faults(lab):
    fault("pcie", "4", "--width", "4")
    fault("remapped-rows", "2", "--pending")
    fault("gpu-missing", "7")
    document = json.loads(run(DCGMI, "diag", "-r", "2", "-j", check=False).stdout)
    tests = {test["name"]: test for category in document["DCGM Diagnostic"]["test_categories"] for test in category["tests"]}
    assert len(tests["pcie"]["results"]) == 7
    assert [r["entity_id"] for r in tests["pcie"]["results"] if r["status"] == "Fail"] == [4]
    assert [r["entity_id"] for r in tests["software"]["results"] if r["status"] == "Fail"] == [2]


def test_dcgmi_version(lab):
    assert "dcgmi  version: 4.4.1" in run(DCGMI, "--version").stdout


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def pair(server_device, client_device, server_hardware=None):
    port = str(free_port())
    env = dict(os.environ)
    server_env = dict(env, PERFTEST_DOUBLE_HOSTNAME="node-a", PERFTEST_DOUBLE_TIMEOUT="20")
    if server_hardware:
        server_env["PERFTEST_DOUBLE_HARDWARE"] = server_hardware
    server = subprocess.Popen([sys.executable, str(IB_WRITE_BW), "-d", server_device, "-p", port, "-s", "8388608", "-F", "--report_gbits"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=server_env)
    assert server.stdout.read(len(RECORDED_WAITING)) == RECORDED_WAITING
    client = run(IB_WRITE_BW, "-d", client_device, "-p", port, "-s", "8388608", "-F", "--report_gbits", "127.0.0.1", check=False,
                 env=dict(env, PERFTEST_DOUBLE_HOSTNAME="node-b"))
    rest, dummy = server.communicate(timeout=30)
    return client, RECORDED_WAITING + rest, server.returncode


def result_row(text):
    lines = text.splitlines()
    return lines[lines.index(RECORDED_PERFTEST_TITLE) + 1]


def test_ib_write_bw_full_rail(lab):
    client, server_output, server_rc = pair("mlx5_0", "mlx5_0")
    assert client.returncode == 0 and server_rc == 0
    lines = client.stdout.splitlines()
    assert lines[1:7] == RECORDED_PERFTEST_HEADER and " TX depth        : 128" in lines
    assert " TX depth        : 128" not in server_output.splitlines()
    row = result_row(client.stdout)
    # perftest's printf layout, checked against the recorded row first, then applied to the double's numbers.
    layout = " {:<7d}    {:<7d}        {:<7.2f}            {:<7.2f}\t\t   {:<7.6f}"
    assert layout.format(8, 224958464, 0.00, 0.48, 7.498617) == RECORDED_PERFTEST_ROW
    size, iterations, peak, average, rate = row.split()
    assert row == layout.format(int(size), int(iterations), float(peak), float(average), float(rate))
    assert size == "8388608" and iterations == "5000"
    average = float(row.split()[3])
    assert 380 <= average < 400  # NDR 400 per rail, the field's floor is 380 Gb/s
    assert result_row(server_output) == row


def test_ib_write_bw_degraded_and_down_rails(lab):
    client, dummy, dummy2 = pair("mlx5_0", "mlx5_5")
    assert 90 <= float(result_row(client.stdout).split()[3]) < 100
    down = run(IB_WRITE_BW, "-d", "mlx5_7", "127.0.0.1", check=False)
    assert down.returncode == 1 and "Port number 1 state is Down" in down.stderr


def test_ib_write_bw_other_fabric_never_connects(lab, tmp_path):
    other = json.loads((lab / "hardware.json").read_text())
    other["fabric"]["name"] = "dc2"
    (tmp_path / "other.json").write_text(json.dumps(other))
    client, dummy, server_rc = pair("mlx5_0", "mlx5_0", server_hardware=str(tmp_path / "other.json"))
    assert client.returncode == 1 and "Failed status 12" in client.stderr and server_rc == 1


def test_doubles_import_nothing_from_the_collection():
    for path in (NVSMI, FAULT, DCGMI, IB_WRITE_BW, LAB / "nvidia_smi" / "nvsmi_report.py"):
        assert "module_utils" not in path.read_text() and "ansible" not in path.read_text()
