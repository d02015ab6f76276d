"""The ``nvidia-smi -q -x`` report and ``nvidia-smi nvlink -s`` of the lab's nvidia-smi double.

Loaded by the double (nvidia-smi, beside this file in the checkout, /usr/share/nvidia-smi-double/ once installed);
it renders plain dictionaries the double builds, so it holds the output formats and the per-model figures, nothing
of the double's state handling.  The element names and their order are those of a real R575 ``nvidia-smi -q -x``
document (DOCTYPE nvsmi_device_v12.dtd, one tab per level); the README names the recordings and says which values
are the lab's own.  Standard library only, and nothing from the collection.
"""

import time
from typing import Optional
from xml.sax.saxutils import escape

NA = "N/A"
ACTIVE, NOT_ACTIVE = "Active", "Not Active"

# Per-model figures that no query of the lab reads but a real report prints.  Power and clock limits are the
# products' published specifications; vbios/inforom versions are of the form real reports show, not recorded.
BOARD_FACTS = {
    "NVIDIA H100 80GB HBM3": {"pcie_gen": 5, "power_limit": 700.0, "min_power": 200.0, "max_graphics": 1980, "max_mem": 2619,
                              "max_video": 1545, "vbios": "96.00.99.00.01", "nvlinks": 18, "nvlink_gbps": "26.562", "bank_max": 2560},
    "NVIDIA H100 PCIe": {"pcie_gen": 5, "power_limit": 350.0, "min_power": 200.0, "max_graphics": 1755, "max_mem": 1593,
                         "max_video": 1455, "vbios": "96.00.5E.00.01", "nvlinks": 0, "nvlink_gbps": None, "bank_max": 2560},
    "NVIDIA H200": {"pcie_gen": 5, "power_limit": 700.0, "min_power": 200.0, "max_graphics": 1980, "max_mem": 3201,
                    "max_video": 1545, "vbios": "96.00.A5.00.01", "nvlinks": 18, "nvlink_gbps": "26.562", "bank_max": 2560},
    "NVIDIA GH200 480GB": {"pcie_gen": 5, "power_limit": 900.0, "min_power": 200.0, "max_graphics": 1980, "max_mem": 2619,
                           "max_video": 1545, "vbios": "96.00.74.00.11", "nvlinks": 0, "nvlink_gbps": None, "bank_max": 2560},
    "NVIDIA A100-SXM4-80GB": {"pcie_gen": 4, "power_limit": 400.0, "min_power": 100.0, "max_graphics": 1410, "max_mem": 1593,
                              "max_video": 1290, "vbios": "92.00.36.00.02", "nvlinks": 12, "nvlink_gbps": "25", "bank_max": 640},
    "NVIDIA A100-SXM4-40GB": {"pcie_gen": 4, "power_limit": 400.0, "min_power": 100.0, "max_graphics": 1410, "max_mem": 1215,
                              "max_video": 1290, "vbios": "92.00.45.00.03", "nvlinks": 12, "nvlink_gbps": "25", "bank_max": 640},
    "NVIDIA L40S": {"pcie_gen": 4, "power_limit": 350.0, "min_power": 100.0, "max_graphics": 2520, "max_mem": 9001,
                    "max_video": 1965, "vbios": "95.02.66.00.02", "nvlinks": 0, "nvlink_gbps": None, "bank_max": 192},
}
DEFAULT_FACTS = {"pcie_gen": 4, "power_limit": 300.0, "min_power": 100.0, "max_graphics": 1500, "max_mem": 1500,
                 "max_video": 1300, "vbios": "00.00.00.00.00", "nvlinks": 0, "nvlink_gbps": None, "bank_max": 192}

# clocks_event_reasons children in the recorded order, with the bit NVML gives each (nvml.h nvmlClocksEventReason*),
# which --query-gpu=clocks_event_reasons.active prints as a mask.
CLOCKS_EVENT_REASONS = (
    ("gpu_idle", 0x1),
    ("applications_clocks_setting", 0x2),
    ("sw_power_cap", 0x4),
    ("hw_slowdown", 0x8),
    ("hw_thermal_slowdown", 0x40),
    ("hw_power_brake_slowdown", 0x80),
    ("sync_boost", 0x10),
    ("sw_thermal_slowdown", 0x20),
    ("display_clocks_setting", 0x100),
)
# HW thermal and power-brake slowdowns are kinds of HW slowdown: NVML sets 0x8 with either.
HW_SLOWDOWN_KINDS = {"hw_thermal_slowdown", "hw_power_brake_slowdown"}


def facts(model_name: str) -> dict:
    return BOARD_FACTS.get(model_name, DEFAULT_FACTS)


def active_reasons(gpu: dict) -> list:
    """The clocks event reasons active on a GPU: idle unless a process runs, plus what the fault knob sets."""
    reasons = set(gpu["clocks_event_reasons"])
    if not gpu["processes"]:
        reasons.add("gpu_idle")
    if reasons & HW_SLOWDOWN_KINDS:
        reasons.add("hw_slowdown")
    return [name for name, bit in CLOCKS_EVENT_REASONS if name in reasons]


def reasons_mask(gpu: dict) -> str:
    mask = 0
    for name, bit in CLOCKS_EVENT_REASONS:
        if name in active_reasons(gpu):
            mask |= bit
    return f"0x{mask:016X}"


class Writer:
    """Tab-indented elements, as the real report prints them."""

    def __init__(self):
        self.lines = []
        self.depth = 0

    def leaf(self, name: str, value) -> None:
        self.lines.append("\t" * self.depth + f"<{name}>{escape(str(value))}</{name}>")

    def open(self, name: str, attributes: str = "") -> None:
        self.lines.append("\t" * self.depth + f"<{name}{attributes}>")
        self.depth += 1

    def close(self, name: str) -> None:
        self.depth -= 1
        self.lines.append("\t" * self.depth + f"</{name}>")

    def group(self, name: str, pairs) -> None:
        self.open(name)
        for key, value in pairs:
            self.leaf(key, value)
        self.close(name)


def render_xml(report: dict) -> str:
    """The whole document for ``report``: driver, cuda, timestamp (optional) and the GPU dictionaries."""
    writer = Writer()
    writer.lines += ['<?xml version="1.0" ?>', '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">']
    writer.open("nvidia_smi_log")
    writer.leaf("timestamp", report.get("timestamp") or time.strftime("%a %b %e %H:%M:%S %Y"))
    writer.leaf("driver_version", report["driver_version"])
    writer.leaf("cuda_version", report["cuda_version"])
    writer.leaf("attached_gpus", report["attached_gpus"])
    for gpu in report["gpus"]:
        render_gpu(writer, gpu, report)
    writer.close("nvidia_smi_log")
    return "\n".join(writer.lines) + "\n"


def render_gpu(w: Writer, gpu: dict, report: dict) -> None:
    model = gpu["name"]
    fx = facts(model)
    mig = gpu["mig_mode"]
    mig_on = bool(mig) and mig["current"] == "Enabled"
    w.open("gpu", f' id="{gpu["pci_bus_id"]}"')
    w.leaf("product_name", model)
    w.leaf("product_brand", "NVIDIA")
    w.leaf("product_architecture", gpu["architecture"])
    w.leaf("display_mode", "Disabled")
    w.leaf("display_attached", "No")
    w.leaf("display_active", "Disabled")
    w.leaf("persistence_mode", gpu["persistence_mode"])
    w.leaf("addressing_mode", "None")
    w.group("mig_mode", (("current_mig", mig["current"] if mig else NA), ("pending_mig", mig["pending"] if mig else NA)))
    render_mig_devices(w, gpu)
    w.leaf("accounting_mode", "Disabled")
    w.leaf("accounting_mode_buffer_size", "4000")
    w.group("driver_model", (("current_dm", NA), ("pending_dm", NA)))
    w.leaf("serial", gpu["serial"])
    w.leaf("uuid", gpu["uuid"])
    w.leaf("minor_number", gpu["minor_number"])
    w.leaf("vbios_version", fx["vbios"])
    w.leaf("multigpu_board", "No")
    w.leaf("board_id", f"0x{int(gpu['pci_bus_id'].split(':')[1], 16) << 8:x}")
    w.leaf("board_part_number", NA)
    w.leaf("gpu_part_number", NA)
    w.leaf("gpu_fru_part_number", NA)
    w.group("platformInfo", (("chassis_serial_number", NA), ("slot_number", NA), ("tray_index", NA), ("host_id", NA),
                             ("peer_type", NA), ("module_id", gpu["index"] + 1), ("gpu_fabric_guid", NA)))
    w.group("inforom_version", (("img_version", NA), ("oem_object", "2.1"), ("ecc_object", "7.16"), ("pwr_object", NA)))
    w.group("inforom_bbx_flush", (("latest_timestamp", NA), ("latest_duration", NA)))
    w.group("gpu_operation_mode", (("current_gom", NA), ("pending_gom", NA)))
    w.leaf("c2c_mode", "Enabled" if "GH200" in model else NA)
    w.group("gpu_virtualization_mode", (("virtualization_mode", "None"), ("host_vgpu_mode", NA), ("vgpu_heterogeneous_mode", NA)))
    w.group("gpu_reset_status", (("reset_required", "No"), ("drain_and_reset_recommended", "No")))
    w.leaf("gpu_recovery_action", "None")
    w.leaf("gsp_firmware_version", report["driver_version"])
    w.group("ibmnpu", (("relaxed_ordering_mode", NA),))
    render_pci(w, gpu, fx)
    w.leaf("fan_speed", NA)
    w.leaf("performance_state", "P0")
    active = active_reasons(gpu)
    w.group("clocks_event_reasons", ((f"clocks_event_reason_{name}", ACTIVE if name in active else NOT_ACTIVE) for name, bit in CLOCKS_EVENT_REASONS))
    w.group("clocks_event_reasons_counters", (
        ("clocks_event_reasons_counters_sw_power_cap", "0 us"),
        ("clocks_event_reasons_counters_sync_boost", "0 us"),
        ("clocks_event_reasons_counters_sw_therm_slowdown", "0 us"),
        ("clocks_event_reasons_counters_hw_therm_slowdown", "0 us"),
        ("clocks_event_reasons_counters_hw_power_brake", "0 us"),
    ))
    w.leaf("sparse_operation_mode", NA)
    total = gpu["memory_total_mib"]
    used = sum(int(process.get("used_memory_mib", 0)) for process in gpu["processes"])
    reserved = 511 if total > 50000 else 434
    w.group("fb_memory_usage", (("total", f"{total} MiB"), ("reserved", f"{reserved} MiB"), ("used", f"{used} MiB"),
                                ("free", f"{total - reserved - used} MiB")))
    w.group("bar1_memory_usage", (("total", "131072 MiB"), ("used", "1 MiB"), ("free", "131071 MiB")))
    w.group("cc_protected_memory_usage", (("total", "0 MiB"), ("used", "0 MiB"), ("free", "0 MiB")))
    w.leaf("compute_mode", "Default")
    utilisation = NA if mig_on else ("100 %" if gpu["processes"] else "0 %")
    w.group("utilization", (("gpu_util", utilisation), ("memory_util", NA if mig_on else "0 %"), ("encoder_util", NA if mig_on else "0 %"),
                            ("decoder_util", NA if mig_on else "0 %"), ("jpeg_util", NA if mig_on else "0 %"), ("ofa_util", NA if mig_on else "0 %")))
    w.group("encoder_stats", (("session_count", 0), ("average_fps", 0), ("average_latency", 0)))
    w.group("fbc_stats", (("session_count", 0), ("average_fps", 0), ("average_latency", 0)))
    w.group("dram_encryption_mode", (("current_dram_encryption", NA), ("pending_dram_encryption", NA)))
    w.group("ecc_mode", (("current_ecc", "Enabled"), ("pending_ecc", "Enabled")))
    render_ecc(w, gpu)
    # Ampere and later retire no pages: they remap rows (the recorded A100 and Ada reports print N/A here).
    w.open("retired_pages")
    w.group("multiple_single_bit_retirement", (("retired_count", NA), ("retired_pagelist", NA)))
    w.group("double_bit_retirement", (("retired_count", NA), ("retired_pagelist", NA)))
    w.leaf("pending_blacklist", NA)
    w.leaf("pending_retirement", NA)
    w.close("retired_pages")
    render_remapped_rows(w, gpu, fx, mig_on)
    w.group("temperature", (
        ("gpu_temp", f"{gpu['temperature_c']} C"),
        ("gpu_temp_tlimit", f"{max(0, 87 - gpu['temperature_c'])} C"),
        ("gpu_temp_max_tlimit_threshold", "-5 C"),
        ("gpu_temp_slow_tlimit_threshold", "-2 C"),
        ("gpu_temp_max_gpu_tlimit_threshold", "0 C"),
        ("gpu_target_temperature", NA),
        ("memory_temp", f"{gpu['temperature_c'] + 8} C"),
        ("gpu_temp_max_mem_tlimit_threshold", "-5 C"),
    ))
    w.group("supported_gpu_target_temp", (("gpu_target_temp_min", NA), ("gpu_target_temp_max", NA)))
    draw = fx["power_limit"] * (0.9 if gpu["processes"] else 0.1)
    w.group("gpu_power_readings", (
        ("power_state", "P0"),
        ("average_power_draw", f"{draw:.2f} W"),
        ("instant_power_draw", f"{draw:.2f} W"),
        ("current_power_limit", f"{fx['power_limit']:.2f} W"),
        ("requested_power_limit", f"{fx['power_limit']:.2f} W"),
        ("default_power_limit", f"{fx['power_limit']:.2f} W"),
        ("min_power_limit", f"{fx['min_power']:.2f} W"),
        ("max_power_limit", f"{fx['power_limit']:.2f} W"),
    ))
    w.group("gpu_memory_power_readings", (("average_power_draw", NA), ("instant_power_draw", NA)))
    w.group("module_power_readings", (("power_state", "P0"), ("average_power_draw", NA), ("instant_power_draw", NA),
                                      ("current_power_limit", NA), ("requested_power_limit", NA), ("default_power_limit", NA),
                                      ("min_power_limit", NA), ("max_power_limit", NA)))
    w.leaf("power_smoothing", NA)
    w.group("power_profiles", (("power_profile_requested_profiles", NA), ("power_profile_enforced_profiles", NA)))
    slowed = bool({"hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown"} & set(active))
    graphics = fx["max_graphics"] // (2 if slowed else 1)
    w.group("clocks", (("graphics_clock", f"{graphics} MHz"), ("sm_clock", f"{graphics} MHz"),
                       ("mem_clock", f"{fx['max_mem']} MHz"), ("video_clock", f"{fx['max_video']} MHz")))
    w.group("applications_clocks", (("graphics_clock", f"{fx['max_graphics']} MHz"), ("mem_clock", f"{fx['max_mem']} MHz")))
    w.group("default_applications_clocks", (("graphics_clock", f"{fx['max_graphics']} MHz"), ("mem_clock", f"{fx['max_mem']} MHz")))
    w.group("deferred_clocks", (("mem_clock", NA),))
    w.group("max_clocks", (("graphics_clock", f"{fx['max_graphics']} MHz"), ("sm_clock", f"{fx['max_graphics']} MHz"),
                           ("mem_clock", f"{fx['max_mem']} MHz"), ("video_clock", f"{fx['max_video']} MHz")))
    w.group("max_customer_boost_clocks", (("graphics_clock", f"{fx['max_graphics']} MHz"),))
    w.group("clock_policy", (("auto_boost", NA), ("auto_boost_default", NA)))
    w.group("voltage", (("graphics_volt", "670.000 mV"),))
    render_fabric(w, gpu)
    w.open("supported_clocks")
    w.open("supported_mem_clock")
    w.leaf("value", f"{fx['max_mem']} MHz")
    for clock in range(fx["max_graphics"], 344, -15 * 10):
        w.leaf("supported_graphics_clock", f"{clock} MHz")
    w.close("supported_mem_clock")
    w.close("supported_clocks")
    render_processes(w, gpu)
    w.lines.append("\t" * w.depth + "<accounted_processes>")
    w.lines.append("\t" * w.depth + "</accounted_processes>")
    w.group("capabilities", (("egm", "enabled" if "GH200" in model else "disabled"),))
    w.close("gpu")


def render_mig_devices(w: Writer, gpu: dict) -> None:
    devices = gpu["mig_devices"]
    if not devices:
        # The recorded reports print the word on its own indented line.
        w.lines.append("\t" * w.depth + "<mig_devices>")
        w.lines.append("\t" * (w.depth + 1) + "None")
        w.lines.append("\t" * w.depth + "</mig_devices>")
        return
    w.open("mig_devices")
    for device in devices:
        w.open("mig_device")
        w.leaf("index", device["index"])
        w.leaf("gpu_instance_id", device["gpu_instance_id"])
        w.leaf("compute_instance_id", device["compute_instance_id"])
        w.open("device_attributes")
        w.group("shared", (("multiprocessor_count", device["sm"]), ("copy_engine_count", device["ce"]), ("encoder_count", device["enc"]),
                           ("decoder_count", device["dec"]), ("ofa_count", device["ofa"]), ("jpg_count", device["jpeg"])))
        w.close("device_attributes")
        w.open("ecc_error_count")
        w.group("volatile_count", (("sram_uncorrectable", 0),))
        w.close("ecc_error_count")
        w.group("fb_memory_usage", (("total", f"{device['memory_mib']} MiB"), ("reserved", "0 MiB"), ("used", "0 MiB"),
                                    ("free", f"{device['memory_mib']} MiB")))
        w.group("bar1_memory_usage", (("total", "32767 MiB"), ("used", "0 MiB"), ("free", "32767 MiB")))
        w.close("mig_device")
    w.close("mig_devices")


def render_pci(w: Writer, gpu: dict, fx: dict) -> None:
    domain, bus, device_function = gpu["pci_bus_id"].split(":")
    pcie = gpu["pcie"]
    w.open("pci")
    w.leaf("pci_bus", bus)
    w.leaf("pci_device", device_function.split(".")[0])
    w.leaf("pci_domain", domain[-4:])
    w.leaf("pci_base_class", "3")
    w.leaf("pci_sub_class", "2")
    w.leaf("pci_device_id", gpu["pci_device_id"][2:])
    w.leaf("pci_bus_id", gpu["pci_bus_id"])
    w.leaf("pci_sub_system_id", gpu["pci_sub_device_id"][2:] if gpu["pci_sub_device_id"] else NA)
    w.open("pci_gpu_link_info")
    w.group("pcie_gen", (("max_link_gen", pcie["max_gen"]), ("current_link_gen", pcie["gen"]), ("device_current_link_gen", pcie["gen"]),
                         ("max_device_link_gen", fx["pcie_gen"]), ("max_host_link_gen", pcie["max_gen"])))
    w.group("link_widths", (("max_link_width", f"{pcie['max_width']}x"), ("current_link_width", f"{pcie['width']}x")))
    w.close("pci_gpu_link_info")
    w.group("pci_bridge_chip", (("bridge_chip_type", NA), ("bridge_chip_fw", NA)))
    w.leaf("replay_counter", 0)
    w.leaf("replay_rollover_counter", 0)
    w.leaf("tx_util", "0 KB/s")
    w.leaf("rx_util", "0 KB/s")
    w.leaf("atomic_caps_outbound", NA)
    w.leaf("atomic_caps_inbound", NA)
    w.close("pci")


def render_ecc(w: Writer, gpu: dict) -> None:
    ecc = gpu["ecc"]
    w.open("ecc_errors")
    for scope in ("volatile", "aggregate"):
        values = ecc[scope]
        pairs = [
            ("sram_correctable", values["sram_correctable"]),
            ("sram_uncorrectable_parity", values["sram_uncorrectable_parity"]),
            ("sram_uncorrectable_secded", values["sram_uncorrectable_secded"]),
            ("dram_correctable", values["dram_correctable"]),
            ("dram_uncorrectable", values["dram_uncorrectable"]),
        ]
        if scope == "aggregate":
            pairs.append(("sram_threshold_exceeded", "No"))
        w.group(scope, pairs)
    sram_unc = ecc["aggregate"]["sram_uncorrectable_parity"] + ecc["aggregate"]["sram_uncorrectable_secded"]
    w.group("aggregate_uncorrectable_sram_sources", (("sram_l2", sram_unc), ("sram_sm", 0), ("sram_microcontroller", 0), ("sram_pcie", 0), ("sram_other", 0)))
    w.close("ecc_errors")


def render_remapped_rows(w: Writer, gpu: dict, fx: dict, mig_on: bool) -> None:
    if mig_on:
        # In MIG mode the driver does not report row remapping (the recorded A100 MIG report).
        w.leaf("remapped_rows", NA)
        return
    rows = gpu["remapped_rows"]
    w.open("remapped_rows")
    w.leaf("remapped_row_corr", rows["correctable"])
    w.leaf("remapped_row_unc", rows["uncorrectable"])
    w.leaf("remapped_row_pending", "Yes" if rows["pending"] else "No")
    w.leaf("remapped_row_failure", "Yes" if rows["failure"] else "No")
    used = min(fx["bank_max"], rows["correctable"] + rows["uncorrectable"])
    w.group("row_remapper_histogram", (
        ("row_remapper_histogram_max", f"{fx['bank_max'] - used} bank(s)"),
        ("row_remapper_histogram_high", f"{used} bank(s)"),
        ("row_remapper_histogram_partial", "0 bank(s)"),
        ("row_remapper_histogram_low", "0 bank(s)"),
        ("row_remapper_histogram_none", "0 bank(s)"),
    ))
    w.close("remapped_rows")


def render_fabric(w: Writer, gpu: dict) -> None:
    fabric = gpu["fabric"]
    w.open("fabric")
    w.leaf("state", fabric["state"])
    w.leaf("status", fabric["status"])
    w.leaf("cliqueId", fabric["clique_id"])
    w.leaf("clusterUuid", fabric["cluster_uuid"])
    w.group("health", (("bandwidth", NA), ("route_recovery_in_progress", NA), ("route_unhealthy", NA), ("access_timeout_recovery", NA)))
    w.close("fabric")


def render_processes(w: Writer, gpu: dict) -> None:
    if not gpu["processes"]:
        w.lines.append("\t" * w.depth + "<processes>")
        w.lines.append("\t" * w.depth + "</processes>")
        return
    w.open("processes")
    for process in gpu["processes"]:
        w.group("process_info", (
            ("gpu_instance_id", process.get("gpu_instance_id", NA)),
            ("compute_instance_id", process.get("compute_instance_id", NA)),
            ("pid", process["pid"]),
            ("type", "C"),
            ("process_name", process.get("process_name", "")),
            ("used_memory", f"{process.get('used_memory_mib', 0)} MiB"),
        ))
    w.close("processes")


def render_nvlink_status(gpus: list) -> str:
    """``nvidia-smi nvlink -s``: the -L line of each GPU, then one line per link (recorded H100 and A100 outputs)."""
    lines = []
    for gpu in gpus:
        fx = facts(gpu["name"])
        lines.append(f"GPU {gpu['index']}: {gpu['name']} (UUID: {gpu['uuid']})")
        for link in range(fx["nvlinks"]):
            speed = "<inactive>" if link in gpu["nvlink_inactive"] else f"{fx['nvlink_gbps']} GB/s"
            lines.append(f"\t Link {link}: {speed}")
    return "".join(f"{line}\n" for line in lines)


def nvlink_count(model_name: str) -> int:
    return facts(model_name)["nvlinks"]


def max_pcie_gen(model_name: str) -> int:
    return facts(model_name)["pcie_gen"]


def optional_int(value) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
