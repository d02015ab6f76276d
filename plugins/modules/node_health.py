#!/usr/bin/python
# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_health
short_description: Judge one GPU node's health against what the inventory says it is
version_added: 0.2.0
description:
  - Reads the node with C(nvidia-smi -q -x), C(nvidia-smi nvlink -s), the kernel log's Xid and SXid lines and, when
    asked, C(dcgmi diag -r N -j), and judges it against O(expected) - the GPU count and model, the PCIe link, the
    NVLinks per GPU and the RDMA rails - returning RV(healthy) and one RV(findings) entry per problem.
  - With O(outputs) it runs nothing and judges those recorded outputs instead; a check whose output is absent from
    O(outputs) is skipped (listed in RV(skipped_checks)), not failed.
  - The task itself does not fail on an unhealthy node; act on RV(healthy) and RV(findings). When the GPUs cannot be
    read at all (C(nvidia-smi) missing, hanging or without a loaded driver), RV(state) is V(unknown), RV(healthy) is
    V(null) and RV(reason) says why, so that a check that could not run is told apart from a broken node.
  - Xids follow the immediate action of NVIDIA's Xid catalog; see the operator guide C(docs/node-health.md) for each
    finding and what to do.
  - Bad input (an unknown check, a level out of range, an unknown action in O(xid_actions), a GPU model outside the
    collection's catalogue without its PCIe and NVLink figures, a O(kernel_log_since) that a O(kernel_log_file) cannot be
    filtered by) fails the task before anything runs.
author:
  - onprem.gpu maintainers (@onprem-gpu)
requirements:
  - On the node, for a live run, C(nvidia-smi); C(timeout) from GNU coreutils; C(journalctl) or C(dmesg) unless
    O(kernel_log_file) is given;
    C(dcgmi) with a running DCGM host engine for O(checks=dcgm_diag). It must run as root to read the kernel log.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - onprem.gpu.read_only
attributes:
  platform:
    platforms: posix
options:
  expected:
    description: What the node should be, from the inventory.
    type: dict
    required: true
    suboptions:
      gpu_count:
        description: The number of GPUs nvidia-smi must report.
        type: int
        required: true
      gpu_model:
        description:
          - The GPU model as nvidia-smi names it (the inventory's C(node_gpu_model)), for example V(NVIDIA H100 80GB HBM3).
          - A model outside the collection's GPU catalogue is accepted when O(expected.pcie_gen),
            O(expected.pcie_width) and O(expected.nvlinks_per_gpu) are given.
        type: str
        required: true
      pcie_gen:
        description: The PCIe generation each GPU's link must reach; default from the GPU catalogue (5 for Hopper, 4 for Ampere).
        type: int
      pcie_width:
        description: The PCIe link width each GPU must run at; default from the GPU catalogue (16).
        type: int
      nvlinks_per_gpu:
        description: The NVLinks each GPU must have active; default from the GPU catalogue (18 on H100/H200 SXM, 12 on A100 SXM, 0 on PCIe cards).
        type: int
      rails:
        description: The RDMA rails that O(checks=rdma_bandwidth) judges, each a device and its line rate.
        type: list
        elements: dict
        default: []
        suboptions:
          device:
            description: The RDMA device, as O(outputs.ib_write_bw) keys it, for example V(mlx5_0).
            type: str
            required: true
          rate_gbps:
            description: The rail's line rate in Gb/s, for example V(400) for NDR or 400GbE.
            type: int
            required: true
          min_gbps:
            description: The lowest acceptable C(ib_write_bw) average in Gb/s; default 90% of O(expected.rails[].rate_gbps).
            type: float
  checks:
    description:
      - What to judge. V(gpus) (count and model), V(pcie), V(ecc) (uncorrectable errors since the driver loaded),
        V(remapped_rows) (row remapping, and page retirement on pre-Ampere GPUs), V(nvlink), V(xid) (Xid and SXid lines
        of the kernel log), V(clocks) (hardware slowdown and thermal clock reasons).
      - V(dcgm_diag) and V(rdma_bandwidth) are slow and opt-in. V(rdma_bandwidth) is judged only from
        O(outputs.ib_write_bw); the module never starts C(ib_write_bw) itself, because a run needs a server on a peer
        node that the playbook must start (see the example).
    type: list
    elements: str
    choices: [gpus, pcie, ecc, remapped_rows, nvlink, xid, clocks, dcgm_diag, rdma_bandwidth]
    default: [gpus, pcie, ecc, remapped_rows, nvlink, xid, clocks]
  dcgm_diag_level:
    description: The C(dcgmi diag -r) level; 1 takes seconds, 2 about two minutes, 3 about fifteen, 4 up to hours.
    type: int
    choices: [1, 2, 3, 4]
    default: 1
  dcgm_diag_timeout:
    description: Seconds C(dcgmi diag) may run; default 300 for level 1, 900 for 2, 2400 for 3, 10800 for 4.
    type: int
  kernel_log_since:
    description:
      - Where the Xid scan of a live run starts, as C(journalctl --since) takes it (V(-2h), V(2025-10-24 03:00)).
      - Default the last boot. With C(dmesg) (no journal) the whole ring buffer is read. Never applied to O(outputs.kernel_log).
      - With O(kernel_log_file) the module applies it itself to the lines that carry a time stamp, and takes a relative
        span (V(-2h), V(-1h 30min), V(90min ago)), a local date and time (V(2025-10-24 03:00), V(03:00)), V(today),
        V(yesterday), V(now), V(@EPOCH) or V(boot); anything else fails the task before anything runs.
    type: str
  kernel_log_file:
    description:
      - Read the kernel messages from this file on the node instead of C(journalctl -k) or C(dmesg), for example
        V(/var/log/kern.log) where rsyslog writes them, or a node whose journal has no kernel transport (a container).
      - Lines are kept from O(kernel_log_since) on (default the current boot, from C(btime) of C(/proc/stat)) when they
        start with a time stamp - RFC 3339 (rsyslog's default file format since Debian 12), a traditional syslog stamp,
        C(dmesg -T)'s or C(dmesg)'s seconds since boot; a line without a stamp is always read. Only the last 32 MiB
        of the file are read.
      - A file that cannot be read skips the V(xid) check, with the reason in RV(skipped_checks).
      - Default none, the journal (C(journalctl -k)), else C(dmesg).
    type: path
  xid_actions:
    description:
      - Overrides of the built-in Xid table, Xid number to action (V(none), V(restart_app), V(reset_gpu), V(reboot),
        V(drain), V(rma)); V(none) and V(restart_app) warn, the others fail the node.
    type: dict
    default: {}
  outputs:
    description:
      - Recorded outputs to judge instead of running anything. A check whose output is missing is skipped.
      - O(kernel_log_since) does not filter them.
    type: dict
    suboptions:
      nvidia_smi_q_xml:
        description: The stdout of C(nvidia-smi -q -x).
        type: str
      nvlink_status:
        description: The stdout of C(nvidia-smi nvlink -s).
        type: str
      kernel_log:
        description: Kernel messages as C(dmesg), C(dmesg -T), C(dmesg --time-format iso) or C(journalctl -k) print them.
        type: str
      dcgm_diag_json:
        description: The stdout of C(dcgmi diag -r N -j).
        type: str
      ib_write_bw:
        description: RDMA device to the stdout of one C(ib_write_bw --report_gbits) client run on that device.
        type: dict
  nvidia_smi:
    description: The C(nvidia-smi) to run, a command name looked up in E(PATH) or a path.
    type: str
    default: nvidia-smi
  command_timeout:
    description: Seconds each command of a live run except C(dcgmi diag) may take before it is stopped.
    type: int
    default: 60
notes:
  - An idle GPU lowers its PCIe link generation to save power, so the generation is judged from C(max_link_gen) and,
    only while the GPU is busy, from C(current_link_gen); the width is always judged from C(current_link_width).
  - The GPU count is the number of C(<gpu>) elements in the report, not C(attached_gpus), which also counts GPUs
    nvidia-smi could not read.
  - Remapped rows read C(N/A) in MIG mode on Ampere; they are then not judged.
seealso:
  - name: NVIDIA Xid catalog
    description: The immediate action per Xid that the built-in table follows.
    link: https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html
  - name: DCGM diagnostics
    description: What each C(dcgmi diag) level runs.
    link: https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/dcgm-diagnostics.html
  - name: perftest
    description: The C(ib_write_bw) benchmark.
    link: https://github.com/linux-rdma/perftest
"""

EXAMPLES = r"""
- name: Judge an H100 node
  onprem.gpu.node_health:
    expected:
      gpu_count: 8
      gpu_model: "{{ node_gpu_model }}"
  register: health

- name: Fail the play on an unhealthy node, leaving an unknown one to a human
  ansible.builtin.assert:
    that: health['healthy'] is not false
    fail_msg: "{{ health['findings'] | selectattr('severity', 'eq', 'fail') | map(attribute='message') | list }}"

- name: Acceptance with DCGM level 2 and Xids of the last two hours only
  onprem.gpu.node_health:
    expected:
      gpu_count: 8
      gpu_model: NVIDIA H100 80GB HBM3
    checks: [gpus, pcie, ecc, remapped_rows, nvlink, xid, clocks, dcgm_diag]
    dcgm_diag_level: 2
    kernel_log_since: -2h
    xid_actions:
      "13": none

- name: Read the kernel messages from rsyslog's file (a node whose journal does not keep them)
  onprem.gpu.node_health:
    expected:
      gpu_count: 8
      gpu_model: "{{ node_gpu_model }}"
    kernel_log_file: /var/log/kern.log
    kernel_log_since: -2h

- name: Judge RDMA rails from ib_write_bw runs the play made against a peer running the servers
  onprem.gpu.node_health:
    expected:
      gpu_count: 8
      gpu_model: NVIDIA H100 80GB HBM3
      rails:
        - {device: mlx5_0, rate_gbps: 400}
        - {device: mlx5_1, rate_gbps: 400}
    checks: [rdma_bandwidth]
    outputs:
      # ib_runs: the registered client runs, one per device, looped over [mlx5_0, mlx5_1]
      ib_write_bw: "{{ ib_runs['results'] | items2dict(key_name='item', value_name='stdout') }}"

- name: Judge outputs recorded elsewhere (a PCIe card model outside the catalogue)
  onprem.gpu.node_health:
    expected:
      gpu_count: 1
      gpu_model: NVIDIA A10G
      pcie_gen: 4
      pcie_width: 16
      nvlinks_per_gpu: 0
    outputs:
      nvidia_smi_q_xml: "{{ lookup('ansible.builtin.file', 'records/node7/nvidia-smi-q-x.xml') }}"
      kernel_log: "{{ lookup('ansible.builtin.file', 'records/node7/dmesg.txt') }}"
"""

RETURN = r"""
healthy:
  description: V(true) when no finding has severity V(fail); V(null) when the state is V(unknown).
  returned: always
  type: bool
  sample: false
state:
  description: V(healthy), V(unhealthy), or V(unknown) when the GPUs could not be read (the caller's condition Unknown).
  returned: always
  type: str
  sample: unhealthy
reason:
  description: Why the state is V(unknown), one sentence; V(null) otherwise.
  returned: always
  type: str
  sample: "nvidia-smi did not answer within 60 seconds."
findings:
  description: One entry per problem found, in check order.
  returned: always
  type: list
  elements: dict
  contains:
    code:
      description:
        - What was found; one of V(gpu_missing), V(gpu_model), V(pcie_degraded), V(ecc_uncorrected),
          V(remapped_rows_pending), V(remapped_rows_failure), V(retired_pages_pending), V(nvlink_inactive), V(xid),
          V(sxid), V(clocks_hw_slowdown), V(clocks_thermal), V(dcgm_diag), V(rdma_bandwidth).
      type: str
      returned: always
      sample: xid
    pci_bus_id:
      description:
        - The GPU's PCI bus id as nvidia-smi prints it, or as the kernel line prints it when nvidia-smi's report is absent.
        - V(null) when not about one GPU.
      type: str
      returned: always
      sample: "00000000:18:00.0"
    gpu_index:
      description: The GPU's nvidia-smi index; V(null) when not about one GPU or not known.
      type: int
      returned: always
      sample: 0
    device:
      description: The RDMA device or NVSwitch the finding is about; V(null) otherwise.
      type: str
      returned: always
      sample: mlx5_0
    xid:
      description: The Xid or SXid number for V(xid) and V(sxid) findings; V(null) otherwise.
      type: int
      returned: always
      sample: 79
    severity:
      description: V(fail) (the node is unhealthy) or V(warn).
      type: str
      returned: always
      sample: fail
    action:
      description: What to do - V(none), V(restart_app), V(reset_gpu), V(reboot), V(drain) or V(rma).
      type: str
      returned: always
      sample: reboot
    message:
      description: One sentence an operator acts on.
      type: str
      returned: always
      sample: "GPU 3 (00000000:5D:00.0) logged Xid 79 once (GPU has fallen off the bus): reboot the node, as NVIDIA's Xid catalog says to restart the machine."
skipped_checks:
  description: The checks that were asked for but not judged, each with the reason.
  returned: always
  type: list
  elements: dict
  sample: [{check: dcgm_diag, reason: outputs has no dcgm_diag_json.}]
commands:
  description: The commands a live run ran, each an argv list; empty with O(outputs).
  returned: always
  type: list
  elements: list
  sample: [["/usr/bin/timeout", "-k", "5", "60", "/usr/bin/nvidia-smi", "-q", "-x"]]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.onprem.gpu.plugins.module_utils._kernel_log import SinceError, boot_time, parse_since
from ansible_collections.onprem.gpu.plugins.module_utils._node_health import (
    CHECKS,
    DEFAULT_CHECKS,
    judge,
    resolve_expected,
    xid_overrides,
)
from ansible_collections.onprem.gpu.plugins.module_utils._node_health_live import LIVE_OPTIONS, check_node


def main():
    module = AnsibleModule(
        argument_spec=dict(
            expected=dict(type="dict", required=True, options=dict(
                gpu_count=dict(type="int", required=True),
                gpu_model=dict(type="str", required=True),
                pcie_gen=dict(type="int"),
                pcie_width=dict(type="int"),
                nvlinks_per_gpu=dict(type="int"),
                rails=dict(type="list", elements="dict", default=[], options=dict(
                    device=dict(type="str", required=True),
                    rate_gbps=dict(type="int", required=True),
                    min_gbps=dict(type="float"),
                )),
            )),
            checks=dict(type="list", elements="str", choices=list(CHECKS), default=list(DEFAULT_CHECKS)),
            dcgm_diag_level=dict(type="int", choices=[1, 2, 3, 4], default=1),
            dcgm_diag_timeout=dict(type="int"),
            kernel_log_since=dict(type="str"),
            kernel_log_file=dict(type="path"),
            xid_actions=dict(type="dict", default={}),
            outputs=dict(type="dict", options=dict(
                nvidia_smi_q_xml=dict(type="str"),
                nvlink_status=dict(type="str"),
                kernel_log=dict(type="str"),
                dcgm_diag_json=dict(type="str"),
                ib_write_bw=dict(type="dict"),
            )),
            nvidia_smi=dict(type="str", default="nvidia-smi"),
            command_timeout=dict(type="int", default=60),
        ),
        supports_check_mode=True,
    )
    params = module.params
    try:
        expected = resolve_expected(params["expected"])
        overrides = xid_overrides(params["xid_actions"])
    except ValueError as error:
        module.fail_json(msg=str(error))
    if params["command_timeout"] < 1:
        module.fail_json(msg=f"command_timeout must be at least 1 second, not {params['command_timeout']}.")
    if params["kernel_log_file"] and params["kernel_log_since"]:
        try:
            parse_since(params["kernel_log_since"], 0.0, 0.0)
        except SinceError as error:
            module.fail_json(msg=str(error))
    checks = list(dict.fromkeys(params["checks"]))
    if params["outputs"] is not None:
        outputs = {key: value for key, value in params["outputs"].items() if value}
        module.exit_json(changed=False, commands=[], **judge(expected, checks, outputs, overrides))

    def run(argv):
        return module.run_command(argv, environ_update={"LC_ALL": "C"})

    options = dict({name: params[name] for name in LIVE_OPTIONS}, boot_time=boot_time())
    module.exit_json(changed=False, **check_node(run, module.get_bin_path, expected, checks, options, overrides))


if __name__ == "__main__":
    main()
