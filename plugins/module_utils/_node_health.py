# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Judge one GPU node against what the inventory says it is, from the outputs of its tools.

``judge()`` takes the raw outputs (``nvidia-smi -q -x``, ``nvidia-smi nvlink -s``, the kernel log, ``dcgmi diag -j``,
``ib_write_bw`` per RDMA device), parses each with its own module and returns ``healthy``, ``state`` and
``findings``. A check whose output is missing is skipped, not failed. When the GPUs cannot be read at all (no report
from nvidia-smi), the state is ``unknown`` with the reason and ``healthy`` is None: the caller must not mistake a
check that could not run for a healthy node, nor for a broken one.

Plain Python without Ansible imports, unit-tested on recorded outputs.
"""

from __future__ import annotations

from ansible_collections.onprem.gpu.plugins.module_utils._dcgm_diag import DcgmDiagError, parse_dcgm_diag
from ansible_collections.onprem.gpu.plugins.module_utils._gpu_models import model_info
from ansible_collections.onprem.gpu.plugins.module_utils._kernel_xid import parse_kernel_log, pci_key
from ansible_collections.onprem.gpu.plugins.module_utils._nvlink_status import parse_nvlink_status
from ansible_collections.onprem.gpu.plugins.module_utils._nvsmi_xml import NvsmiXmlError, parse_nvsmi_xml
from ansible_collections.onprem.gpu.plugins.module_utils._perftest import PerftestError, parse_ib_write_bw
from ansible_collections.onprem.gpu.plugins.module_utils._xid_catalog import ACTIONS, catalog_action, severity_of

DEFAULT_CHECKS = ("gpus", "pcie", "ecc", "remapped_rows", "nvlink", "xid", "clocks")
CHECKS = DEFAULT_CHECKS + ("dcgm_diag", "rdma_bandwidth")
# The output each check reads, as named in the module's ``outputs`` option.
CHECK_OUTPUTS = {"gpus": "nvidia_smi_q_xml", "pcie": "nvidia_smi_q_xml", "ecc": "nvidia_smi_q_xml",
                 "remapped_rows": "nvidia_smi_q_xml", "clocks": "nvidia_smi_q_xml", "nvlink": "nvlink_status",
                 "xid": "kernel_log", "dcgm_diag": "dcgm_diag_json", "rdma_bandwidth": "ib_write_bw"}
# A rail passes at this share of its line rate unless it sets min_gbps (NDR 400: 360 Gb/s; healthy links reach 380+).
DEFAULT_RAIL_SHARE = 0.9

_HW_SLOWDOWN = ("hw_slowdown", "hw_power_brake_slowdown")


class ExpectedError(ValueError):
    """``expected`` cannot be judged against; the message is one sentence."""


def resolve_expected(expected):
    """Return ``expected`` with ``pcie_gen``, ``pcie_width`` and ``nvlinks_per_gpu`` filled in from the GPU catalogue.

    Raises ExpectedError for a model outside the catalogue when any of the three is missing.
    """
    resolved = dict(expected)
    info = model_info(expected.get("gpu_model"))
    defaults = {"pcie_gen": "pcie_generation", "pcie_width": "pcie_width", "nvlinks_per_gpu": "nvlinks"}
    missing = [name for name in defaults if resolved.get(name) is None and info is None]
    if missing:
        raise ExpectedError(
            f"GPU model {expected.get('gpu_model')!r} is not in the collection's GPU catalogue, so expected must give "
            f"{', '.join(missing)}.")
    for name, field in defaults.items():
        if resolved.get(name) is None:
            resolved[name] = info[field]
    resolved["rails"] = list(resolved.get("rails") or [])
    return resolved


def xid_overrides(xid_actions):
    """Return ``xid_actions`` as ``{int: action}``; raise ValueError naming the first bad entry."""
    overrides = {}
    for key, action in (xid_actions or {}).items():
        if not str(key).strip().isdigit():
            raise ValueError(f"xid_actions keys must be Xid numbers, not {key!r}.")
        if action not in ACTIONS:
            raise ValueError(f"xid_actions[{key}] must be one of {', '.join(ACTIONS)}, not {action!r}.")
        overrides[int(key)] = action
    return overrides


def unknown(reason, skipped=()):
    """The result when the node's GPUs cannot be read: state unknown, healthy None, the reason."""
    return {"healthy": None, "state": "unknown", "reason": reason, "findings": [], "skipped_checks": list(skipped)}


def judge(expected, checks, outputs, xid_actions=None):
    """Return ``{"healthy", "state", "reason", "findings", "skipped_checks"}`` for the outputs of one node.

    ``expected`` as returned by resolve_expected(); ``checks`` a subset of CHECKS; ``outputs`` maps CHECK_OUTPUTS
    names to raw text (``ib_write_bw``: RDMA device -> text; a missing or None output skips its checks, an empty one is
    judged); ``xid_actions`` as returned by xid_overrides().
    """
    # A node without NVLinks has nothing to read for the nvlink check: it is judged (and passes) without output.
    # An output that was read but is empty (a kernel log without messages) is judged: it has nothing wrong in it.
    judged = [check for check in checks
              if outputs.get(CHECK_OUTPUTS[check]) is not None or (check == "nvlink" and not expected["nvlinks_per_gpu"])]
    skipped = [{"check": check, "reason": f"outputs has no {CHECK_OUTPUTS[check]}."}
               for check in checks if check not in judged]
    gpus = []
    if outputs.get("nvidia_smi_q_xml"):
        try:
            gpus = parse_nvsmi_xml(outputs["nvidia_smi_q_xml"])["gpus"]
        except NvsmiXmlError as error:
            return unknown(str(error), skipped)
    findings = []
    for check in judged:
        findings.extend(_JUDGES[check](expected, gpus, outputs, xid_actions or {}))
    healthy = not any(finding["severity"] == "fail" for finding in findings)
    return {"healthy": healthy, "state": "healthy" if healthy else "unhealthy", "reason": None, "findings": findings,
            "skipped_checks": skipped}


def finding(code, severity, action, message, gpu=None, device=None, xid=None, pci_bus_id=None):
    """One finding in the module's return format."""
    return {"code": code, "pci_bus_id": gpu["pci_bus_id"] if gpu else pci_bus_id,
            "gpu_index": gpu["index"] if gpu else None, "device": device, "xid": xid, "severity": severity,
            "action": action, "message": message}


def _judge_gpus(expected, gpus, outputs, overrides):
    findings = []
    wanted = expected.get("gpu_count")
    if wanted is not None and len(gpus) < wanted:
        findings.append(finding(
            "gpu_missing", "fail", "reboot",
            f"nvidia-smi reports {len(gpus)} of the {wanted} GPUs expected; reboot the node, and if a GPU stays "
            f"missing, have it reseated or replaced."))
    for gpu in gpus:
        if expected.get("gpu_model") and gpu["name"] != expected["gpu_model"]:
            findings.append(finding(
                "gpu_model", "fail", "drain",
                f"GPU {gpu['index']} ({gpu['pci_bus_id']}) is a {gpu['name']}, not the {expected['gpu_model']} the "
                f"inventory expects; drain the node and correct the inventory or the hardware.", gpu))
    return findings


def _judge_pcie(expected, gpus, outputs, overrides):
    findings = []
    for gpu in gpus:
        link = gpu["pcie"]
        busy = bool(gpu["gpu_util"]) and "gpu_idle" not in gpu["clock_reasons"]
        # An idle GPU lowers its link generation to save power: its current generation means nothing then.
        generation = link["current_gen"] if busy else link["max_gen"]
        problems = []
        if link["current_width"] is not None and link["current_width"] < expected["pcie_width"]:
            problems.append(f"runs at x{link['current_width']} instead of x{expected['pcie_width']}")
        if generation is not None and generation < expected["pcie_gen"]:
            measured = "runs" if busy else "can train at most"
            problems.append(f"{measured} at PCIe Gen{generation} instead of Gen{expected['pcie_gen']}")
        if problems:
            findings.append(finding(
                "pcie_degraded", "fail", "drain",
                f"GPU {gpu['index']} ({gpu['pci_bus_id']}) {' and '.join(problems)}; drain the node and reseat the GPU "
                f"or check its riser and slot settings.", gpu))
    return findings


def _judge_ecc(expected, gpus, outputs, overrides):
    return [finding(
        "ecc_uncorrected", "fail", "reset_gpu",
        f"GPU {gpu['index']} ({gpu['pci_bus_id']}) had {gpu['volatile_uncorrected']} uncorrectable ECC error(s) since "
        f"the driver loaded; reset the GPU, and have it replaced if they return.", gpu)
        for gpu in gpus if gpu["volatile_uncorrected"]]


def _judge_remapped_rows(expected, gpus, outputs, overrides):
    findings = []
    for gpu in gpus:
        rows = gpu["remapped_rows"] or {}
        where = f"GPU {gpu['index']} ({gpu['pci_bus_id']})"
        if rows.get("failure"):
            findings.append(finding("remapped_rows_failure", "fail", "rma",
                                    f"{where} failed to remap a memory row; have the GPU replaced (RMA).", gpu))
        elif rows.get("pending"):
            findings.append(finding("remapped_rows_pending", "fail", "reset_gpu",
                                    f"{where} has a memory row remap pending; reset the GPU to apply it.", gpu))
        if gpu["retired_pages_pending"]:
            findings.append(finding("retired_pages_pending", "warn", "reset_gpu",
                                    f"{where} has memory pages waiting to be retired; reset the GPU or reboot the "
                                    f"node when convenient to retire them.", gpu))
    return findings


def _judge_nvlink(expected, gpus, outputs, overrides):
    wanted = expected["nvlinks_per_gpu"]
    if not wanted:
        return []
    status = parse_nvlink_status(outputs["nvlink_status"])
    by_uuid = {gpu["uuid"]: gpu for gpu in gpus}
    by_index = {gpu["index"]: gpu for gpu in gpus}
    listed = set()
    findings = []
    for entry in status:
        gpu = by_uuid.get(entry["uuid"]) or by_index.get(entry["index"]) or {"index": entry["index"], "pci_bus_id": None}
        listed.add(gpu["index"])
        active = len(entry["active"])
        if active < wanted:
            down = ", ".join(str(link) for link in entry["inactive"]) or "not listed"
            findings.append(finding(
                "nvlink_inactive", "fail", "reboot",
                f"GPU {gpu['index']} ({gpu['pci_bus_id'] or entry['name']}) has {active} of {wanted} NVLinks active "
                f"(inactive: {down}); reboot the node so the GPUs and NVSwitches retrain, and have the board checked "
                f"if links stay down.", gpu))
    for gpu in gpus:
        if gpu["index"] not in listed:
            findings.append(finding(
                "nvlink_inactive", "fail", "reboot",
                f"GPU {gpu['index']} ({gpu['pci_bus_id']}) reports no active NVLink of the {wanted} expected; reboot the "
                f"node, and have the board checked if links stay down.", gpu))
    return findings


def _judge_xid(expected, gpus, outputs, overrides):
    by_pci = {pci_key(gpu["pci_bus_id"]): gpu for gpu in gpus}
    grouped = {}
    for event in parse_kernel_log(outputs["kernel_log"]):
        key = (event["kind"], event["device"], pci_key(event["pci"]) or event["pci"], event["code"])
        grouped.setdefault(key, []).append(event)
    findings = []
    for (kind, device, key, code), events in grouped.items():
        if kind == "xid":
            findings.append(_xid_finding(code, events, by_pci.get(key), overrides))
        else:
            findings.append(_sxid_finding(code, events, device))
    return findings


def _xid_finding(code, events, gpu, overrides):
    last = events[-1]
    action, why = catalog_action(code, last["detail"])
    if code in overrides:
        action, why = overrides[code], "xid_actions says so"
    where = f"GPU {gpu['index']} ({gpu['pci_bus_id']})" if gpu else f"The GPU at PCI {last['pci']}"
    times = "once" if len(events) == 1 else f"{len(events)} times"
    if action is None:
        return finding("xid", "warn", "none",
                       f"{where} logged Xid {code} {times}, which {why}; look it up in NVIDIA's Xid documentation "
                       f"(last: {last['detail']}).", gpu, xid=code, pci_bus_id=last["pci"])
    todo = {"none": "no action is needed", "restart_app": "restart the application that used it",
            "reset_gpu": "reset the GPU", "reboot": "reboot the node", "drain": "drain the node for repair",
            "rma": "have the GPU replaced"}[action]
    return finding("xid", severity_of(action), action,
                   f"{where} logged Xid {code} {times} ({last['detail']}): {todo}, as {why}.",
                   gpu, xid=code, pci_bus_id=last["pci"])


def _sxid_finding(code, events, device):
    fatal = [event for event in events if event["fatal"]]
    pci = events[-1]["pci"]
    if fatal:
        return finding("sxid", "fail", "reboot",
                       f"NVSwitch {device} ({pci}) logged fatal SXid {code} ({fatal[-1]['detail']}); reboot the node to "
                       f"reset its GPUs and NVSwitches.", device=device, xid=code)
    detail = next((event["detail"] for event in events if event["fatal"] is False), events[-1]["detail"])
    return finding("sxid", "warn", "none",
                   f"NVSwitch {device} ({pci}) logged non-fatal SXid {code} {len(events)} time(s) ({detail}); watch it, "
                   f"no action is needed while it is non-fatal.", device=device, xid=code)


def _judge_clocks(expected, gpus, outputs, overrides):
    findings = []
    for gpu in gpus:
        where = f"GPU {gpu['index']} ({gpu['pci_bus_id']})"
        reasons = gpu["clock_reasons"]
        slowdown = [reason for reason in _HW_SLOWDOWN if reason in reasons]
        if slowdown:
            findings.append(finding(
                "clocks_hw_slowdown", "fail", "drain",
                f"{where} is slowed down by hardware ({', '.join(slowdown)}); drain the node and check its power "
                f"supplies and cooling.", gpu))
        if "hw_thermal_slowdown" in reasons:
            findings.append(finding("clocks_thermal", "fail", "drain",
                                    f"{where} is slowed down by its hardware thermal limit; drain the node and check "
                                    f"its cooling.", gpu))
        elif "sw_thermal_slowdown" in reasons:
            findings.append(finding("clocks_thermal", "warn", "none",
                                    f"{where} runs hot enough for the driver to lower its clocks; check the airflow.",
                                    gpu))
    return findings


def _judge_dcgm_diag(expected, gpus, outputs, overrides):
    try:
        diag = parse_dcgm_diag(outputs["dcgm_diag_json"])
    except DcgmDiagError as error:
        return [finding("dcgm_diag", "fail", "drain", f"{error} Run dcgmi diag again by hand to see why.")]
    findings = []
    if diag["runtime_error"]:
        findings.append(finding("dcgm_diag", "fail", "drain",
                                f"dcgmi diag could not finish: {diag['runtime_error']}"))
    by_index = {gpu["index"]: gpu for gpu in gpus}
    for result in diag["results"]:
        if result["status"] not in ("fail", "warn"):
            continue
        targets = result["gpus"] or [None]
        for index in targets:
            gpu = by_index.get(index) or ({"index": index, "pci_bus_id": None} if index is not None else None)
            detail = "; ".join(message for message in result["messages"] if message) or "no detail printed"
            where = f"on GPU {index}" if index is not None else "on the node"
            failed = result["status"] == "fail"
            findings.append(finding(
                "dcgm_diag", "fail" if failed else "warn", "drain" if failed else "none",
                f"The DCGM diagnostic {result['test']} ({result['category']}) {'failed' if failed else 'warned'} "
                f"{where}: {detail}{'; drain the node and investigate.' if failed else '.'}", gpu))
    return findings


def _judge_rdma_bandwidth(expected, gpus, outputs, overrides):
    findings = []
    runs = outputs["ib_write_bw"]
    for rail in expected["rails"]:
        text = runs.get(rail["device"])
        if not text:
            continue
        threshold = rail.get("min_gbps") or rail["rate_gbps"] * DEFAULT_RAIL_SHARE
        try:
            run = parse_ib_write_bw(text)
        except PerftestError as error:
            findings.append(finding("rdma_bandwidth", "fail", "drain", f"Rail {rail['device']}: {error}",
                                    device=rail["device"]))
            continue
        if run["bw_average_gbps"] < threshold:
            findings.append(finding(
                "rdma_bandwidth", "fail", "drain",
                f"Rail {rail['device']} moved {run['bw_average_gbps']:g} Gb/s with {run['bytes']}-byte writes, below "
                f"{threshold:g} Gb/s of its {rail['rate_gbps']} Gb/s line rate; check its cable, port speed and "
                f"PCIe link, and rerun with 8 MiB messages (-s 8388608).", device=rail["device"]))
    return findings


_JUDGES = {"gpus": _judge_gpus, "pcie": _judge_pcie, "ecc": _judge_ecc, "remapped_rows": _judge_remapped_rows,
           "nvlink": _judge_nvlink, "xid": _judge_xid, "clocks": _judge_clocks, "dcgm_diag": _judge_dcgm_diag,
           "rdma_bandwidth": _judge_rdma_bandwidth}
