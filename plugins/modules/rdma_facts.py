#!/usr/bin/python
# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: rdma_facts
short_description: Gather facts about RDMA ports, their GIDs, RoCE QoS and NIC firmware settings
version_added: 0.1.0
description:
  - Lists every RDMA port with its netdev, PCI address, state, link layer, active MTU and GID table, and finds the
    RoCEv2 GID that maps an IPv4 address (the one NCCL and perftest must use).
  - Reads C(/sys/class/infiniband) first, which needs no tool; adds what sysfs lacks from C(ibv_devinfo -v) (the
    active MTU) and C(ibdev2netdev) or C(rdma link) (netdev and PCI address), and reads the GIDs with C(show_gids)
    or C(ibv_devinfo -v) only where sysfs is not there. A missing tool is skipped.
  - Optionally reads the QoS state of RoCE netdevs with C(mlnx_qos) (DOCA) or iproute2's C(dcb) (inbox drivers), the
    firmware settings of NICs with C(mlxconfig), and which kernel drivers carry given interfaces.
  - A host without any RDMA device is not an error; RV(ansible_facts.rdma_ports) is then empty.
  - With O(check=rails) it also judges the ports it read as the rdma role does before its first change, and fails with one
    sentence per problem.
author:
  - onprem.gpu maintainers (@onprem-gpu)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - onprem.gpu.read_only
  - ansible.builtin.action_common_attributes.facts
attributes:
  facts:
    support: full
  platform:
    platforms: posix
options:
  sysfs_root:
    description: Where sysfs is mounted; C(class/infiniband) below it is read first.
    type: path
    default: /sys
  ibv_devinfo:
    description: The C(ibv_devinfo) to run (rdma-core's C(ibverbs-utils)); a bare name is looked up in E(PATH).
    type: str
    default: ibv_devinfo
  show_gids:
    description: The C(show_gids) to run (mlnx-tools, shipped with DOCA-OFED); used only when sysfs has no RDMA devices.
    type: str
    default: show_gids
  ibdev2netdev:
    description: The C(ibdev2netdev) to run (mlnx-tools); gives netdevs and, with C(-v), PCI addresses.
    type: str
    default: ibdev2netdev
  rdma:
    description: The iproute2 C(rdma) to run for C(rdma link) when C(ibdev2netdev) is missing.
    type: str
    default: rdma
  mlnx_qos:
    description: The C(mlnx_qos) to run for O(qos_interfaces) with O(qos_tool=mlnx_qos).
    type: str
    default: mlnx_qos
  dcb:
    description: The iproute2 C(dcb) (iproute2 5.11 or later) to run for O(qos_interfaces) with O(qos_tool=dcb).
    type: str
    default: dcb
  qos_tool:
    description:
      - How the QoS of O(qos_interfaces) is read. V(mlnx_qos) (mlnx-tools, shipped with DOCA-OFED) or V(dcb), which reads
        the PFC table and the DSCP APP table (the mlx5 driver trusts DSCP while that table has entries) over DCB netlink.
    type: str
    choices: [mlnx_qos, dcb]
    default: mlnx_qos
  qos_interfaces:
    description:
      - Netdevs, or PCI addresses of RDMA ports (resolved to their netdev through the ports read), whose trust state, PFC and
        DSCP mapping are read with O(qos_tool); a failure fails the task. A PCI address no port has is skipped.
    type: list
    elements: str
    default: []
  mlxconfig:
    description: The C(mlxconfig) (MFT) or C(mstconfig) (mstflint) to run for O(firmware_devices).
    type: str
    default: mlxconfig
  firmware_devices:
    description:
      - PCI addresses of the NICs whose firmware settings are read with C(mlxconfig -d <pci> -e query), or netdevs of RDMA
        ports (resolved to their PCI address through the ports read; one the ports do not list is skipped).
    type: list
    elements: str
    default: []
  firmware_params:
    description: The firmware parameters to read (all of them when empty).
    type: list
    elements: str
    default: []
  driver_interfaces:
    description: Netdevs whose kernel drivers (their own device's and those below a bond, bridge or VLAN) are returned.
    type: list
    elements: str
    default: []
  check:
    description:
      - Judge what was read as the rdma role does, in this same task, and fail with one sentence per problem (joined by a
        blank). V(rails) resolves the rails of O(settings) through the ports read and judges them as the
        C(onprem.gpu.rdma_rail_problems) filter does, for C(onprem.gpu.rdma_rails) of the same ports; a rail the RDMA driver
        does not list, and a rail that carries the Ansible connection without C(allow_management_change), are problems.
        Needs O(settings).
      - Empty judges nothing.
    type: str
    choices: ["", rails]
    default: ""
  settings:
    description:
      - The role's settings that O(check) judges against, as the rdma role's C(__rdma_settings); V(rails) uses C(rails),
        C(address_first), C(address_index), C(mtu), C(route_table_base), C(route_rule_priority_base) (how the rails are
        resolved), C(host) (for the sentences), C(management) (the interfaces that carry the Ansible connection) and
        C(allow_management_change).
    type: dict
notes:
  - Every command runs with C(LC_ALL=C).
  - NCCL_IB_GID_INDEX is one number for all HCAs, so RV(ansible_facts.rdma_gid_index) is set only when every RoCE
    port that has a RoCEv2 IPv4 GID has it at the same index.
seealso:
  - module: onprem.gpu.nccl_allreduce
"""

EXAMPLES = r"""
- name: Read the RDMA ports and the QoS of two RoCE rails
  onprem.gpu.rdma_facts:
    qos_interfaces: [ens1np0, ens2np0]

- name: Require a RoCEv2 IPv4 GID on every active Ethernet port
  ansible.builtin.assert:
    that: >-
      ansible_facts['rdma_ports'] | selectattr('link_layer', 'eq', 'Ethernet') | selectattr('state', 'eq', 'ACTIVE')
      | selectattr('roce_v2_ipv4_gid', 'none') | list | length == 0

- name: Read the ports and check that every rail is found and none carries the Ansible connection
  onprem.gpu.rdma_facts:
    check: rails
    settings:
      host: "{{ inventory_hostname }}"
      rails:
        - {name: rail0, pci: "0000:1a:00.0", subnet: 10.99.0.0/24}
        - {name: rail1, interface: ens2np0, subnet: 10.99.1.0/24}
      address_first: 10
      address_index: 0
      mtu: 9000
      route_table_base: 100
      route_rule_priority_base: 1000
      management: [eth0]
      allow_management_change: false

- name: Read the next-boot firmware settings of a NIC
  onprem.gpu.rdma_facts:
    firmware_devices: ["0000:1a:00.0"]
    firmware_params: [LINK_TYPE_P1, SRIOV_EN, NUM_OF_VFS, ATS_ENABLED]
"""

RETURN = r"""
ansible_facts:
  description: Facts about the RDMA ports.
  returned: always
  type: dict
  contains:
    rdma_ports:
      description: Every RDMA port, sorted by device and port.
      returned: always
      type: list
      elements: dict
      contains:
        ibdev:
          description: RDMA device name, such as C(mlx5_0) (OFED/DOCA) or C(rocep1s0f0) (inbox udev naming).
          returned: always
          type: str
          sample: mlx5_0
        port:
          description: Port number.
          returned: always
          type: int
          sample: 1
        netdev:
          description: The netdev of the port; V(null) when no source names one.
          returned: always
          type: str
          sample: ens1np0
        pci_address:
          description: PCI address of the NIC when a source gives it (sysfs, C(ibdev2netdev -v)).
          returned: always
          type: str
          sample: "0000:1a:00.0"
        state:
          description: Port state, V(ACTIVE), V(DOWN), V(INIT) or V(ARMED).
          returned: always
          type: str
          sample: ACTIVE
        phys_state:
          description: Physical state as the source prints it.
          returned: always
          type: str
          sample: LinkUp
        link_layer:
          description: V(Ethernet) (RoCE) or V(InfiniBand).
          returned: always
          type: str
          sample: Ethernet
        active_mtu:
          description: RDMA MTU in bytes, from C(ibv_devinfo); V(null) without it.
          returned: always
          type: int
          sample: 4096
        rate:
          description: Link rate as the source prints it.
          returned: always
          type: str
          sample: 400 Gb/sec (4X NDR)
        gids:
          description: The set GIDs, each with C(index), C(gid) (full form) and C(type) (V(RoCE v1), V(RoCE v2), V(IB) or V(null)).
          returned: always
          type: list
          elements: dict
        roce_v2_ipv4_gid:
          description:
            - The lowest-index RoCEv2 GID that maps an IPv4 address, with keys C(index), C(gid), C(type) and C(ipv4).
            - V(null) when there is none or the port is not Ethernet.
          returned: always
          type: dict
    rdma_gid_index:
      description: The RoCEv2 IPv4 GID index common to all RoCE ports, for C(NCCL_IB_GID_INDEX); V(null) if none or they differ.
      returned: always
      type: int
      sample: 3
    rdma_sources:
      description: The sources read, in order.
      returned: always
      type: list
      elements: str
      sample: [sysfs, ibv_devinfo, ibdev2netdev]
    rdma_qos:
      description:
        - Per netdev of O(qos_interfaces), its C(dcbx_mode), C(trust), C(pfc_enabled) (eight 0/1 by priority),
          C(pfc_priorities), C(dscp2prio) and C(cable_len); V(null) for what the tool did not print (dcb prints no DCBX
          mode or cable length).
      returned: always
      type: dict
    rdma_interface_drivers:
      description: Per netdev of O(driver_interfaces), the kernel drivers of its hardware; empty for a virtual device.
      returned: always
      type: dict
      sample: {eno1: [igb], bond0: [mlx5_core]}
    rdma_firmware:
      description:
        - Per PCI address of O(firmware_devices), each parameter with its C(default), C(current) and C(next_boot) value.
        - Values are the numbers mlxconfig takes, so V(True(1\)) is V(1).
      returned: always
      type: dict
problems:
  description: The problems O(check) found; the module failed on them.
  returned: failed, when O(check) found problems
  type: list
  elements: str
  sample: ["gpu-node-01 has no RDMA port for rail rail0 (rdma_rails): the RDMA driver lists none at all."]
"""

import re

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.onprem.gpu.plugins.module_utils._commands import find_command
from ansible_collections.onprem.gpu.plugins.module_utils._rdma import (
    RdmaParseError,
    common_gid_index,
    dcb_qos,
    interface_drivers,
    merge_ports,
    parse_ibdev2netdev,
    parse_ibv_devinfo,
    parse_mlnx_qos,
    parse_mlxconfig_query,
    parse_rdma_link,
    parse_show_gids,
    read_sysfs,
)
from ansible_collections.onprem.gpu.plugins.module_utils._rdma_rails import found_rail_problems


PCI = re.compile(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")


def run_parsed(module, argv, parser, accept_rc=(0,)):
    """Run argv and parse its stdout; fail the task with the command and its output when either fails."""
    rc, stdout, stderr = module.run_command(argv, environ_update={"LC_ALL": "C"})
    if rc not in accept_rc:
        module.fail_json(msg="%s failed with exit code %d: %s" % (" ".join(argv), rc, (stderr or stdout).strip()),
                         cmd=argv, rc=rc, stdout=stdout, stderr=stderr)
    try:
        return parser(stdout)
    except RdmaParseError as error:
        module.fail_json(msg="Cannot read the output of %s: %s" % (" ".join(argv), error), cmd=argv, rc=rc, stdout=stdout, stderr=stderr)


def read_ports(module):
    params = module.params
    sources = {}
    sysfs = read_sysfs(params["sysfs_root"])
    if sysfs is not None:
        sources["sysfs"] = sysfs
    ibv_devinfo = find_command(module, params["ibv_devinfo"])
    if ibv_devinfo:
        # Without devices ibv_devinfo prints "No IB devices found" and exits 255 on some rdma-core versions.
        sources["ibv_devinfo"] = run_parsed(module, [ibv_devinfo, "-v"], parse_ibv_devinfo, accept_rc=(0, 255))
    show_gids = find_command(module, params["show_gids"]) if sysfs is None else None
    if show_gids:
        sources["show_gids"] = run_parsed(module, [show_gids], parse_show_gids)
    ibdev2netdev = find_command(module, params["ibdev2netdev"])
    if ibdev2netdev:
        sources["ibdev2netdev"] = run_parsed(module, [ibdev2netdev, "-v"], parse_ibdev2netdev)
    else:
        rdma = find_command(module, params["rdma"])
        if rdma:
            sources["rdma_link"] = run_parsed(module, [rdma, "link", "show"], parse_rdma_link)
    ports = merge_ports(sysfs=sources.get("sysfs"), devinfo=sources.get("ibv_devinfo"), show_gids=sources.get("show_gids"),
                        ibdev2netdev=sources.get("ibdev2netdev"), rdma_link=sources.get("rdma_link"))
    return ports, list(sources)


def required_command(module, option, purpose):
    path = find_command(module, module.params[option])
    if path is None:
        module.fail_json(msg="%s is needed to read %s but is not installed (option %s)." % (module.params[option], purpose, option))
    return path


def netdevs_of(names, ports):
    """Netdevs as they are and PCI addresses as the netdev of the port there (dropped when no port is)."""
    found = [next((port["netdev"] for port in ports if port.get("pci_address") == name.lower()), None) if PCI.fullmatch(name) else name
             for name in names]
    return [name for position, name in enumerate(found) if name and name not in found[:position]]


def pci_addresses_of(names, ports):
    """PCI addresses as they are and netdevs as the PCI address of their port (dropped when no port has it)."""
    found = [name if PCI.fullmatch(name) else next((port["pci_address"] for port in ports if port.get("netdev") == name), None)
             for name in names]
    return [name for position, name in enumerate(found) if name and name not in found[:position]]


def read_qos(module, netdevs):
    params = module.params
    qos = {}
    if params["qos_tool"] == "dcb":
        dcb = required_command(module, "dcb", "the RoCE QoS state")
        for netdev in netdevs:
            app = run_parsed(module, [dcb, "-N", "app", "show", "dev", netdev, "dscp-prio"], lambda text: text)
            pfc = run_parsed(module, [dcb, "pfc", "show", "dev", netdev, "prio-pfc"], lambda text: text)
            try:
                qos[netdev] = dcb_qos(app, pfc)
            except RdmaParseError as error:
                module.fail_json(msg="Cannot read the QoS of %s from dcb: %s" % (netdev, error), app=app, pfc=pfc)
        return qos
    mlnx_qos = required_command(module, "mlnx_qos", "the RoCE QoS state")
    for netdev in netdevs:
        qos[netdev] = run_parsed(module, [mlnx_qos, "-i", netdev], parse_mlnx_qos)
    return qos


def main():
    module = AnsibleModule(
        argument_spec=dict(
            sysfs_root=dict(type="path", default="/sys"),
            ibv_devinfo=dict(type="str", default="ibv_devinfo"),
            show_gids=dict(type="str", default="show_gids"),
            ibdev2netdev=dict(type="str", default="ibdev2netdev"),
            rdma=dict(type="str", default="rdma"),
            mlnx_qos=dict(type="str", default="mlnx_qos"),
            dcb=dict(type="str", default="dcb"),
            qos_tool=dict(type="str", default="mlnx_qos", choices=["mlnx_qos", "dcb"]),
            qos_interfaces=dict(type="list", elements="str", default=[]),
            mlxconfig=dict(type="str", default="mlxconfig"),
            firmware_devices=dict(type="list", elements="str", default=[]),
            firmware_params=dict(type="list", elements="str", default=[]),
            driver_interfaces=dict(type="list", elements="str", default=[]),
            check=dict(type="str", choices=["", "rails"], default=""),
            settings=dict(type="dict"),
        ),
        required_if=[("check", "rails", ["settings"])],
        supports_check_mode=True,
    )
    ports, sources = read_ports(module)
    qos = read_qos(module, netdevs_of(module.params["qos_interfaces"], ports)) if module.params["qos_interfaces"] else {}
    firmware = {}
    devices = pci_addresses_of(module.params["firmware_devices"], ports)
    if devices:
        mlxconfig = required_command(module, "mlxconfig", "the NIC firmware settings")
        for pci in devices:
            firmware[pci] = run_parsed(module, [mlxconfig, "-d", pci, "-e", "query"] + module.params["firmware_params"],
                                       parse_mlxconfig_query)
    # Judged here, not by an assert after the task: a no-op run pays for one task.
    problems = found_rail_problems(module.params["settings"], ports) if module.params["check"] == "rails" else []
    if problems:
        module.fail_json(msg=" ".join(problems), problems=problems)
    module.exit_json(
        changed=False,
        ansible_facts=dict(
            rdma_ports=ports,
            rdma_gid_index=common_gid_index(ports),
            rdma_sources=sources,
            rdma_qos=qos,
            rdma_firmware=firmware,
            rdma_interface_drivers={name: interface_drivers(name, module.params["sysfs_root"]) for name in module.params["driver_interfaces"]},
        ),
    )


if __name__ == "__main__":
    main()
