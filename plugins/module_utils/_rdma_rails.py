# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The rdma role's decisions as plain Python: which settings are refused, each rail's netdev, RDMA device and address,
what is wrong with the rails once read, which firmware parameters differ, what NCCL must be told, and whether a new
DOCA driver may be loaded by restarting openibd.

Every problem is one sentence; the role asserts that the list is empty and prints it joined, or rdma_facts fails with
it (check=rails). No Ansible import: the rdma filters and rdma_facts hand their inputs here.
"""

from __future__ import annotations

import ipaddress
import re

_PCI = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
# Kernel drivers of the NICs and of the upper protocols that a DOCA-OFED driver reload (openibd restart) unloads.
_RDMA_STACK_DRIVERS = re.compile(r"^(mlx4_|mlx5_|mlxfw$|ib_ipoib$|ib_core$|rdma_)")


def rail_name(rail):
    return rail.get("name") or rail.get("interface") or rail.get("pci")


def _network(text):
    """An IPv4 network in CIDR form with its host bits clear, else None."""
    if not isinstance(text, str) or "/" not in text:
        return None
    try:
        network = ipaddress.IPv4Network(text, strict=True)
    except ValueError:
        return None
    return network if network.prefixlen < 32 else None


def management_interfaces(facts, ansible_host=""):
    """The interfaces the Ansible connection may use: the default route's and any holding ansible_host's address."""
    found = []
    default = (facts.get("default_ipv4") or {}).get("interface")
    if default:
        found.append(default)
    for name in facts.get("interfaces") or []:
        details = facts.get(name.replace("-", "_")) or {}
        addresses = [(details.get("ipv4") or {}).get("address")]
        addresses += [entry.get("address") for entry in details.get("ipv4_secondaries") or []]
        if ansible_host and ansible_host in addresses and name not in found:
            found.append(name)
    return found


def _management_problem(names, host):
    return ("%s carries the Ansible connection to %s; reconfiguring it can cut this run off the host. Keep management off the "
            "RDMA rails, or set rdma_allow_management_change: true." % (", ".join(names), host))


# Before any change --------------------------------------------------------------------------------------------------

def _settings_problems(settings):
    ok = (settings["stack"] in ("inbox", "doca") and settings["gpudirect"] in ("dmabuf", "peermem", "none")
          and settings["link_layer"] in ("ethernet", "infiniband") and settings["renderer"] in ("netplan", "networkmanager", "networkd")
          and (settings["stack"] != "doca" or (settings["doca_repo_url"] and settings["doca_repo_key_url"]))
          and (settings["stack"] != "doca" or settings["package_manager"] == "apt"))
    if ok:
        return []
    return ["rdma_driver_stack must be inbox or doca (got %s), rdma_gpudirect dmabuf, peermem or none (got %s), rdma_link_layer "
            "ethernet or infiniband (got %s), rdma_network_renderer netplan, networkmanager, networkd or auto (got %s), and the doca "
            "stack needs rdma_doca_repo_url and rdma_doca_repo_key_url (the site's mirror) on an APT-based host."
            % (settings["stack"], settings["gpudirect"], settings["link_layer"], settings["renderer_setting"])]


def _doca_repository_problems(settings):
    """APT's rule (sources.list(5)): a suite that is a path ("./", a flat repository such as NVIDIA's DOCA one) takes no
    components; any other suite needs at least one."""
    suites, components = settings["doca_repo_suites"] or [], settings["doca_repo_components"] or []
    if settings["stack"] != "doca":
        return []
    if any(suite.endswith("/") for suite in suites) and components:
        return ["rdma_doca_repo_suites %s name a flat repository (as NVIDIA's DOCA repository is), which takes no "
                "rdma_doca_repo_components (got %s)." % (suites, components)]
    if not any(suite.endswith("/") for suite in suites) and not components:
        return ["rdma_doca_repo_suites %s name a repository laid out by suite, which needs rdma_doca_repo_components (for example "
                "[main]); NVIDIA's DOCA repository is flat: rdma_doca_repo_suites ['./'] and no components." % (suites or "[] (the codename)")]
    return []


def _kernel_at_least(release, wanted):
    numbers = [int(part) for part in re.findall(r"\d+", release or "")[:2]]
    return numbers >= list(wanted)


def _rails_shape_problems(settings, rails, addressed):
    shaped = (isinstance(rails, list) and len(rails) > 0 and all(isinstance(rail, dict) for rail in rails)
              and all(("interface" in rail) != ("pci" in rail) for rail in rails)
              and all(_PCI.fullmatch(str(rail["pci"])) for rail in rails if "pci" in rail)
              and (not addressed or all(_network(rail.get("subnet")) for rail in rails)))
    if shaped:
        return []
    return ["rdma_rails must list the rails, each with either interface (a netdev name) or pci (a PCI address such as 0000:1a:00.0, "
            "lower case) and, %s, subnet as an IPv4 network in CIDR form (10.99.0.0/24)." % ("for RoCE" if settings["ethernet"] else "with IPoIB")]


def _overlap_problems(rails):
    found = []
    for position, first in enumerate(rails):
        for second in rails[position + 1:]:
            if _network(first["subnet"]).overlaps(_network(second["subnet"])):
                found.append("%s (%s) and %s (%s)" % (rail_name(first), first["subnet"], rail_name(second), second["subnet"]))
    if not found:
        return []
    return ["Rails %s are in the same subnet: each rail needs its own subnet, or the kernel answers ARP and routes on the wrong NIC "
            "and RDMA CM connections fail." % "; ".join(found)]


def _address_problems(settings, rails):
    """This host's place in the rails' subnets: in the list, its own, and inside every subnet (the first that fails)."""
    host, hosts, index = settings["host"], settings["address_hosts"], settings["address_index"]
    if host not in hosts:
        return ["%s is not in rdma_address_hosts, which orders the hosts that get rail addresses; add it (or give every rail an "
                "explicit address in host_vars)." % host]
    if index < 0:
        return ["rdma_address_index of %s must be 0 or more (got %d)." % (host, index)]
    others = settings.get("address_indexes") or {}
    same = [other for position, other in enumerate(hosts)
            if other != host and int(others.get(other) if others.get(other) is not None else position) == index]
    if same:
        return ["%s and %s would get the same rail addresses (place %d in the rails' subnets): give each host of rdma_address_hosts its "
                "own rdma_address_index." % (host, " and ".join(same), index)]
    first = settings["address_first"]
    for rail in rails:
        if "address" in rail:
            continue
        usable = _network(rail["subnet"]).num_addresses - 1 - first
        if usable < max(len(hosts), index + 1):
            reason = ("the rack has %d hosts (rdma_address_hosts): use a larger subnet or a lower rdma_address_first." % len(hosts)
                      if index < len(hosts) else
                      "%s has rdma_address_index %d: use a larger subnet, a lower rdma_address_first or a lower index." % (host, index))
            return ["Subnet %s of rail %s has %d usable addresses from rdma_address_first (%d) on but %s"
                    % (rail["subnet"], rail_name(rail), max(usable, 0), first, reason)]
    return []


def _qos_problems(settings):
    qos = settings["qos"]
    pfc, ecn = qos["pfc_priorities"], qos["ecn_priorities"]

    def priorities(values):
        return isinstance(values, list) and all(isinstance(value, int) and 0 <= value <= 7 for value in values)

    try:
        tos = int(qos["tos"])
    except (TypeError, ValueError):
        tos = -1
    if not (qos["trust"] in ("dscp", "pcp") and priorities(pfc) and priorities(ecn) and qos["roce_mode"] in (1, 2) and 0 <= tos <= 255):
        return ["rdma_qos_trust must be dscp or pcp, the PFC and ECN priorities 0-7, rdma_qos_roce_mode 1 or 2 and rdma_qos_tos 0-255 "
                "(got %s, %s, %s, %s, %s)." % (qos["trust"], pfc, ecn, qos["roce_mode"], qos["tos"])]
    dscp = tos >> 2
    # With trust dscp the NIC's default DSCP-to-priority table puts DSCP d on priority d // 8 (mlnx_qos' dscp2prio).
    if qos["trust"] == "dscp" and dscp // 8 not in pfc:
        return ["rdma_qos_tos %d marks DSCP %d, which trust dscp puts on priority %d (DSCP / 8), but PFC is on priorities %s: RoCE and "
                "NCCL traffic (NCCL_IB_TC %d) would not be lossless; choose a ToS whose DSCP maps to a PFC priority."
                % (tos, dscp, dscp // 8, pfc, dscp << 2)]
    return []


def preflight_problems(settings):
    """Every refusal before any change, one sentence each; empty when the role may go on.

    ``settings``: host, platform_known, distribution, kernel, stack, gpudirect, link_layer, renderer (resolved),
    renderer_setting, doca_repo_url, doca_repo_key_url, package_manager, ethernet, addressed, rails, address_hosts,
    address_index (this host's), address_indexes (host -> its rdma_address_index or None), address_first, interfaces,
    management, allow_management_change, qos_manage and qos (trust, pfc_priorities, ecn_priorities, roce_mode, tos).
    """
    host = settings["host"]
    if not settings["platform_known"]:
        return ["%s runs %s; the rdma role supports the Debian and Red Hat families (Debian 12, Ubuntu 22.04/24.04, RHEL/Rocky/AlmaLinux 9)."
                % (host, settings["distribution"])]
    problems = _settings_problems(settings) + _doca_repository_problems(settings)
    if settings["gpudirect"] == "dmabuf" and not _kernel_at_least(settings["kernel"], (5, 12)):
        problems.append("rdma_gpudirect dmabuf needs Linux 5.12 or later and %s runs %s: use peermem (with DOCA-OFED) or upgrade the kernel."
                        % (host, settings["kernel"]))
    rails, addressed = settings["rails"], settings["addressed"]
    shape = _rails_shape_problems(settings, rails, addressed)
    if shape:
        return problems + shape
    if addressed:
        problems += _overlap_problems(rails)
        if any("address" not in rail for rail in rails):
            problems += _address_problems(settings, rails)
    missing = [rail["interface"] for rail in rails if "interface" in rail and rail["interface"] not in settings["interfaces"]]
    if missing:
        problems.append("%s has no interface %s (rdma_rails); its interfaces are %s."
                        % (host, ", ".join(missing), ", ".join(sorted(settings["interfaces"]))))
    management = [rail["interface"] for rail in rails if rail.get("interface") in settings["management"]]
    if management and not settings["allow_management_change"]:
        problems.append(_management_problem(management, host))
    if settings["ethernet"] and settings["qos_manage"]:
        problems += _qos_problems(settings)
    return problems


# The rails on this host ----------------------------------------------------------------------------------------------

def resolve_rails(settings, ports):
    """Each rail with its netdev and RDMA device (through the port the driver lists), PCI address, address (given, or
    rdma_address_first + this host's place in the subnet), routing table and rule priority. netdev is None for a rail
    the driver does not list."""
    resolved = []
    for position, rail in enumerate(settings["rails"]):
        if "pci" in rail:
            port = next((entry for entry in ports if entry.get("pci_address") == rail["pci"]), None)
        else:
            port = next((entry for entry in ports if entry.get("netdev") == rail["interface"]), None)
        if "address" in rail:
            interface = ipaddress.IPv4Interface(rail["address"])
        elif rail.get("subnet"):
            network = ipaddress.IPv4Network(rail["subnet"])
            interface = ipaddress.IPv4Interface("%s/%d" % (network.network_address + settings["address_first"] + settings["address_index"],
                                                           network.prefixlen))
        else:
            interface = None
        resolved.append({
            "name": rail_name(rail),
            "netdev": (port.get("netdev") or rail.get("interface")) if port else None,
            "ibdev": port.get("ibdev") if port else None,
            "pci": (port.get("pci_address") if port else None) or rail.get("pci"),
            "address": str(interface) if interface else None,
            "ip": str(interface.ip) if interface else None,
            "subnet": str(interface.network) if interface else None,
            "gateway": rail.get("gateway"),
            "mtu": rail.get("mtu", settings["mtu"]),
            "numvfs": rail.get("numvfs"),
            "table": settings["route_table_base"] + position,
            "priority": settings["route_rule_priority_base"] + position,
        })
    return resolved


def rail_problems(rails, ports, host, management, allow_management_change):
    """What stops the role once the ports are read: a rail the driver does not list, a rail found by PCI address that
    carries the Ansible connection."""
    problems = []
    unresolved = [rail["name"] for rail in rails if rail["netdev"] is None]
    if unresolved:
        listed = ("the RDMA driver lists none at all" if not ports else
                  "it lists " + ", ".join("%s %s %s" % (port.get("ibdev"), port.get("netdev"), port.get("pci_address")) for port in ports))
        problems.append("%s has no RDMA port for rail %s (rdma_rails): %s." % (host, ", ".join(unresolved), listed))
    carrying = [rail["netdev"] for rail in rails if rail["netdev"] in management]
    if carrying and not allow_management_change:
        problems.append(_management_problem(carrying, host))
    return problems


def found_rail_problems(settings, ports):
    """rail_problems of the rails as ``settings`` (the role's) resolve them through ``ports``: what rdma_facts judges
    in the task that reads the ports (check=rails)."""
    return rail_problems(resolve_rails(settings, ports), ports, settings["host"], settings["management"], settings["allow_management_change"])


def verify_problems(rails, ports, qos, settings, unit=None):
    """What is not right on a configured host: a rail not ready, a boot unit not enabled and run, rails whose RoCEv2
    IPv4 GIDs are at different indexes.

    ``qos``: netdev -> {trust, pfc_priorities} as rdma_facts reads them; ``settings``: host, ethernet, addressed,
    link_layer_name, expected_active_mtu, qos_manage, trust, pfc_priorities, unit (its name); ``unit``: the boot unit's
    UnitFileState and ActiveState, or None when not known (check mode).
    """
    host, ethernet, addressed = settings["host"], settings["ethernet"], settings["addressed"]
    managed = ethernet and settings["qos_manage"]
    wanted_pfc = sorted(int(prio) for prio in settings["pfc_priorities"])
    problems = []
    for rail in rails:
        port = next((entry for entry in ports if entry.get("netdev") == rail["netdev"]), {})
        gid = port.get("roce_v2_ipv4_gid") or {}
        state = qos.get(rail["netdev"]) or {}
        want_ip = rail["ip"] if ethernet and addressed else None
        ready = (port.get("state") == "ACTIVE" and port.get("link_layer") == settings["link_layer_name"]
                 and (port.get("active_mtu") or 0) >= settings["expected_active_mtu"] and (want_ip is None or gid.get("ipv4") == want_ip)
                 and (not managed or (state.get("trust") == settings["trust"] and state.get("pfc_priorities") == wanted_pfc)))
        if not ready:
            problems.append(
                "Rail %s (%s, %s) of %s is not ready: port %s, link layer %s (want %s), RDMA MTU %s (want %s), RoCEv2 IPv4 GID %s "
                "(want %s), trust %s and PFC on %s (want %s)."
                % (rail["name"], rail["netdev"], rail["ibdev"], host, port.get("state") or "missing", port.get("link_layer") or "unknown",
                   settings["link_layer_name"], port.get("active_mtu") or "unknown", settings["expected_active_mtu"], gid.get("ipv4") or "none",
                   want_ip or "none", state.get("trust") or "unread", state.get("pfc_priorities", "unread"),
                   "%s and %s" % (settings["trust"], settings["pfc_priorities"]) if managed else "unmanaged"))
    if unit is not None and (unit.get("UnitFileState") != "enabled" or unit.get("ActiveState") != "active"):
        problems.append("%s on %s is %s and %s: the QoS would be lost at the next reboot (journalctl -u %s)."
                        % (settings["unit"], host, unit.get("UnitFileState"), unit.get("ActiveState"), settings["unit"]))
    if ethernet and addressed:
        rail_ports = [port for port in ports if port.get("netdev") in [rail["netdev"] for rail in rails]]
        indexes = sorted({port["roce_v2_ipv4_gid"]["index"] for port in rail_ports if port.get("roce_v2_ipv4_gid")})
        if len(indexes) > 1:
            problems.append("The RoCEv2 IPv4 GIDs of %s's rails are at different indexes (%s); NCCL_IB_GID_INDEX cannot name them all: "
                            "remove extra addresses from the rails or leave the index to NCCL 2.21+." % (host, ", ".join(map(str, indexes))))
    return problems


# NCCL, firmware, the driver --------------------------------------------------------------------------------------------

def nccl_traffic_class(tos):
    """NCCL_IB_TC for a RoCE ToS: its DSCP in the upper six bits, the ECN bits left to the NIC (DSCP << 2)."""
    return (int(tos) >> 2) << 2


def nccl_settings(rails, ports, ethernet, tos):
    """What NCCL must be told about this host's rails: the RoCEv2 GID index they share (None on InfiniBand or when they
    differ), the traffic class (DSCP << 2 of the configured ToS, None on InfiniBand, where the SM sets the service
    level) and the rails' RDMA devices."""
    netdevs = [rail["netdev"] for rail in rails]
    indexes = {port["roce_v2_ipv4_gid"]["index"] for port in ports if port.get("netdev") in netdevs and port.get("roce_v2_ipv4_gid")}
    return {
        "ib_gid_index": indexes.pop() if ethernet and len(indexes) == 1 else None,
        "ib_tc": nccl_traffic_class(tos) if ethernet else None,
        "ib_hca": [rail["ibdev"] for rail in rails],
    }


def firmware_changes(firmware, wanted):
    """PCI address -> ['PARAM=value', ...] for the parameters whose next-boot value differs from the wanted one."""
    changes = {}
    for pci, params in sorted(firmware.items()):
        differing = ["%s=%s" % (name, value) for name, value in wanted.items()
                     if str((params.get(name) or {}).get("next_boot", "")) != str(value)]
        if differing:
            changes[pci] = differing
    return changes


def openibd_action(drivers, allow_reboot):
    """How to load a newly installed DOCA-OFED driver: ``restart`` openibd when no interface that carries the Ansible
    connection is driven by the RDMA stack (openibd restart takes every mlx5 netdev down), else ``reboot`` when allowed,
    else ``pending``. ``drivers``: management interface -> the kernel drivers under it (its own device's and those of
    the devices below a bond, bridge or VLAN); an empty list is a virtual device without hardware.

    Returns ``{action, reason}``.
    """
    if not drivers:
        return {"action": "reboot" if allow_reboot else "pending",
                "reason": "the interface that carries the Ansible connection is not known, so openibd restart could cut the connection"}
    on_stack = sorted("%s (%s)" % (name, ", ".join(found)) for name, found in drivers.items()
                      if any(_RDMA_STACK_DRIVERS.match(driver) for driver in found))
    if not on_stack:
        return {"action": "restart", "reason": "the interfaces that carry the Ansible connection (%s) are not on the RDMA stack"
                % ", ".join(sorted(drivers))}
    return {"action": "reboot" if allow_reboot else "pending",
            "reason": "%s carries the Ansible connection on the RDMA stack, which openibd restart takes down" % ", ".join(on_stack)}


def role_files(rails, settings):
    """The files the role writes once the rails are found, each ``{kind, src, dest, mode}`` (``rail`` for a rail's own
    file): the rails' network configuration for the renderer when they get addresses (netplan and NetworkManager
    ignore or warn about files others can read), the nvidia-peermem module list, and the boot unit with its script and
    configuration. The handlers apply the kinds that changed.

    ``settings``: addressed, renderer, config_dir, apply_script, script_src, unit.
    """
    files = []
    if settings["addressed"]:
        if settings["renderer"] == "netplan":
            files.append({"kind": "network", "src": "netplan.yaml.j2", "dest": "/etc/netplan/60-onprem-rdma.yaml", "mode": "0600"})
        for rail in rails if settings["renderer"] == "networkd" else []:
            files.append({"kind": "network", "src": "rail.network.j2", "rail": rail, "mode": "0644",
                          "dest": "/etc/systemd/network/60-onprem-rdma-%s.network" % rail["netdev"]})
        for rail in rails if settings["renderer"] == "networkmanager" else []:
            files.append({"kind": "network", "src": "rail.nmconnection.j2", "rail": rail, "mode": "0600",
                          "dest": "/etc/NetworkManager/system-connections/onprem-rdma-%s.nmconnection" % rail["netdev"]})
    return files + [
        {"kind": "peermem", "src": "nvidia-peermem.conf.j2", "dest": "/etc/modules-load.d/nvidia-peermem.conf", "mode": "0644"},
        {"kind": "boot", "src": "rails.json.j2", "dest": settings["config_dir"] + "/rails.json", "mode": "0644"},
        {"kind": "boot", "src": settings["script_src"], "dest": settings["apply_script"], "mode": "0755"},
        {"kind": "unit", "src": "onprem-rdma.service.j2", "dest": "/etc/systemd/system/" + settings["unit"], "mode": "0644"},
    ]
