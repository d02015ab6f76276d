# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""RDMA NIC state: parsers for ibv_devinfo, show_gids, ibdev2netdev, rdma link, mlnx_qos, dcb and mlxconfig, a sysfs
reader, and the merge of those sources into one list of ports with their RoCEv2 IPv4 GID.

Plain Python, no Ansible import: the rdma_facts module runs the commands and hands their output here.
"""

from __future__ import annotations

import ipaddress
import os
import re


class RdmaParseError(ValueError):
    """Output that does not look like the tool's output at all."""


# ibv_devinfo -------------------------------------------------------------------------------------------------------

_IBV_HCA = re.compile(r"^hca_id:\s*(\S+)\s*$")
_IBV_PORT = re.compile(r"^\s+port:\s*(\d+)\s*$")
_IBV_KEY = re.compile(r"^\s+([A-Za-z_][A-Za-z0-9_]*):\s*(.*?)\s*$")
# "GID[  0]:\t\tfe80:...", optionally followed by ", RoCE v2" (rdma-core 28+ prints the GID type)
_IBV_GID = re.compile(r"^\s*GID\[\s*(\d+)\]:\s*([0-9A-Fa-f:.]+)(?:,\s*(.+?))?\s*$")
_IBV_CODE = re.compile(r"^(.*?)\s*\((\d+)\)$")
_IBV_PORT_INTS = {"sm_lid", "port_lid", "gid_tbl_len", "pkey_tbl_len", "sm_sl"}


def _ibv_value(key, value):
    """Type the values a verifier compares; keep the others as printed."""
    if key in ("active_mtu", "max_mtu"):
        match = _IBV_CODE.match(value)
        return int(match.group(1)) if match and match.group(1).isdigit() else None
    if key in _IBV_PORT_INTS or key == "phys_port_cnt":
        return int(value, 0) if re.match(r"^(0x[0-9a-fA-F]+|\d+)$", value) else value
    return value


def _gid_entry(index, gid, gid_type):
    return {"index": int(index), "gid": normalise_gid(gid), "type": _gid_type(gid_type)}


def parse_ibv_devinfo(text):
    """Parse ``ibv_devinfo`` (plain or ``-v``; old layout with ``Device ports:`` and new) into a list of HCAs.

    Each HCA: ``{hca_id, transport, fw_ver, node_guid, board_id, vendor_part_id, phys_port_cnt, ports}``; each port:
    ``{port, state, phys_state, link_layer, active_mtu, max_mtu, sm_lid, port_lid, active_speed, gids}``, where
    ``state``/``phys_state`` drop the numeric code (``PORT_ACTIVE``), MTUs are bytes and ``gids`` (``-v`` only)
    are ``{index, gid, type}``. "No IB devices found" gives an empty list.
    """
    hcas = []
    hca = port = None
    for line in text.splitlines():
        if not line.strip():
            continue
        match = _IBV_HCA.match(line)
        if match:
            hca = {"hca_id": match.group(1), "ports": []}
            hcas.append(hca)
            port = None
            continue
        if hca is None:
            if "No IB devices found" in line:
                return []
            continue
        match = _IBV_PORT.match(line)
        if match:
            port = {"port": int(match.group(1)), "gids": []}
            hca["ports"].append(port)
            continue
        match = _IBV_GID.match(line)
        if match:
            if port is not None:
                port["gids"].append(_gid_entry(*match.groups()))
            continue
        match = _IBV_KEY.match(line)
        if match:
            key, value = match.groups()
            if port is None:
                hca[key] = _ibv_value(key, value)
            else:
                if key in ("state", "phys_state"):
                    code = _IBV_CODE.match(value)
                    value = code.group(1) if code else value
                port[key] = _ibv_value(key, value)
    if not hcas and text.strip() and "No IB devices found" not in text:
        raise RdmaParseError("ibv_devinfo printed no hca_id line.")
    return hcas


def parse_gid_lines(text):
    """Parse ``GID[n]: <gid>[, <type>]`` lines, as ``ibv_devinfo -vvv | grep GID`` leaves them."""
    return [_gid_entry(*match.groups()) for match in map(_IBV_GID.match, text.splitlines()) if match]


# GIDs ---------------------------------------------------------------------------------------------------------------

def normalise_gid(gid):
    """A GID in the full, zero-padded form sysfs and show_gids use (``0000:...:ffff:0ac8:010a``)."""
    try:
        packed = ipaddress.IPv6Address(gid.strip()).packed
    except ValueError:
        raise RdmaParseError("'%s' is not a GID." % gid)
    return ":".join(packed[i:i + 2].hex() for i in range(0, 16, 2))


def gid_ipv4(gid):
    """The IPv4 address of an IPv4-mapped GID (``::ffff:a.b.c.d``), else None."""
    mapped = ipaddress.IPv6Address(normalise_gid(gid)).ipv4_mapped
    return str(mapped) if mapped else None


def _gid_type(text):
    """'RoCE v2', 'RoCE v1' (also for sysfs' 'IB/RoCE v1' and show_gids' 'v1'), 'IB', or None when unknown."""
    if not text:
        return None
    text = text.strip()
    if text.endswith("v2"):
        return "RoCE v2"
    if text.endswith("v1"):
        return "RoCE v1"
    return "IB" if text.upper() == "IB" else text


def _is_unset_gid(gid):
    return gid in ("0000:0000:0000:0000:0000:0000:0000:0000", "fe80:0000:0000:0000:0000:0000:0000:0000")


def roce_v2_ipv4_gid(gids, address=None):
    """The lowest-index RoCE v2 GID that maps an IPv4 address (``address`` when given), or None."""
    for entry in sorted(gids, key=lambda item: item["index"]):
        ipv4 = gid_ipv4(entry["gid"])
        if entry.get("type") == "RoCE v2" and ipv4 and (address is None or ipv4 == address):
            return dict(entry, ipv4=ipv4)
    return None


# show_gids ----------------------------------------------------------------------------------------------------------

_IPV4 = re.compile(r"^\d{1,3}(\.\d{1,3}){3}$")


def parse_show_gids(text):
    """Parse mlnx-tools' ``show_gids`` into ``{dev, port, index, gid, ipv4, type, netdev}`` rows.

    The IPv4 and netdev columns may be empty, which whitespace splitting cannot place, so the columns are found
    from the header (DEV PORT INDEX GID) and the optional trailing fields by their form.
    """
    rows = []
    header = None
    for line in text.splitlines():
        fields = line.split()
        if not fields or set(line.strip()) <= set("- \t") or fields[0].startswith("n_gids_found"):
            continue
        if header is None:
            if fields[:4] != ["DEV", "PORT", "INDEX", "GID"]:
                raise RdmaParseError("show_gids printed no DEV PORT INDEX GID header.")
            header = {name: fields.index(name) for name in ("DEV", "PORT", "INDEX", "GID")}
            continue
        if len(fields) < 4:
            continue
        row = {
            "dev": fields[header["DEV"]],
            "port": int(fields[header["PORT"]]),
            "index": int(fields[header["INDEX"]]),
            "gid": normalise_gid(fields[header["GID"]]),
            "ipv4": None,
            "type": None,
            "netdev": None,
        }
        rest = fields[4:]
        if rest and _IPV4.match(rest[0]):
            row["ipv4"] = rest.pop(0)
        if rest and re.match(r"^v[12]$", rest[0]):
            row["type"] = _gid_type(rest.pop(0))
        if rest:
            row["netdev"] = rest.pop(0)
        rows.append(row)
    return rows


# ibdev2netdev, rdma link --------------------------------------------------------------------------------------------

_IBDEV2NETDEV = re.compile(
    r"^(?:(?P<pci_first>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+)?(?P<ibdev>\S+)"
    r"(?:\s+\((?P<pci>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\))?"
    r".*?\bport\s+(?P<port>\d+)(?:\s+\([A-Z_]+\))?\s+==>\s+(?P<netdev>\S+)\s+\((?P<state>[A-Za-z]+)\)"
)


def parse_ibdev2netdev(text):
    """Parse ``ibdev2netdev`` (and ``-v``) into ``{ibdev, port, netdev, up, pci_address}`` rows."""
    rows = []
    for line in text.splitlines():
        match = _IBDEV2NETDEV.match(line.strip())
        if not match:
            continue
        rows.append({
            "ibdev": match.group("ibdev"),
            "port": int(match.group("port")),
            "netdev": match.group("netdev"),
            "up": match.group("state") == "Up",
            "pci_address": (match.group("pci") or match.group("pci_first") or "").lower() or None,
        })
    return rows


_RDMA_LINK = re.compile(r"^(?:link\s+|\d+/\d+:\s+)(?P<ibdev>[^/\s]+)/(?P<port>\d+):?\s+(?P<rest>.*)$")


def parse_rdma_link(text):
    """Parse iproute2's ``rdma link`` (current and pre-5.x layouts) into ``{ibdev, port, state, physical_state, netdev}``."""
    rows = []
    for line in text.splitlines():
        match = _RDMA_LINK.match(line.strip())
        if not match:
            continue
        words = match.group("rest").split()
        attributes = dict(zip(words[0::2], words[1::2]))
        rows.append({
            "ibdev": match.group("ibdev"),
            "port": int(match.group("port")),
            "state": attributes.get("state"),
            "physical_state": attributes.get("physical_state"),
            "netdev": attributes.get("netdev"),
        })
    return rows


# mlnx_qos -----------------------------------------------------------------------------------------------------------

def parse_mlnx_qos(text):
    """Parse ``mlnx_qos -i <if>`` into ``{dcbx_mode, trust, pfc_enabled, pfc_priorities, dscp2prio, cable_len}``.

    ``pfc_enabled`` is the PFC ``enabled`` row as eight ints, placed by the ``priority`` header row (the header always
    prints ``3``, so looking for "priority 3" proves nothing); ``pfc_priorities`` the priorities with PFC on.
    Values the output does not show (a truncated print) are None.
    """
    state = {"dcbx_mode": None, "trust": None, "pfc_enabled": None, "pfc_priorities": None, "dscp2prio": {}, "cable_len": None}
    priorities = None
    in_pfc = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("DCBX mode:"):
            state["dcbx_mode"] = stripped.split(":", 1)[1].strip()
        elif stripped.startswith("Priority trust state:"):
            state["trust"] = stripped.split(":", 1)[1].strip()
        elif stripped.startswith("Cable len:"):
            value = stripped.split(":", 1)[1].strip()
            state["cable_len"] = int(value) if value.isdigit() else None
        elif stripped.startswith("PFC configuration"):
            in_pfc = True
        elif stripped.startswith("prio:") and "dscp:" in stripped:
            prio, dscps = re.match(r"prio:(\d+)\s+dscp:([\d,]*)", stripped).groups()
            state["dscp2prio"][int(prio)] = sorted(int(value) for value in dscps.split(",") if value)
        elif in_pfc and stripped.startswith("priority") and priorities is None:
            priorities = [int(value) for value in stripped.split()[1:]]
        elif in_pfc and stripped.startswith("enabled") and priorities is not None:
            flags = [int(value) for value in stripped.split()[1:]]
            by_priority = dict(zip(priorities, flags))
            state["pfc_enabled"] = [by_priority.get(prio, 0) for prio in range(8)]
            state["pfc_priorities"] = [prio for prio in range(8) if by_priority.get(prio)]
            in_pfc = False
    if state["dcbx_mode"] is None and state["trust"] is None:
        raise RdmaParseError("mlnx_qos printed neither the DCBX mode nor the trust state.")
    return state


# dcb (iproute2) -----------------------------------------------------------------------------------------------------

def _dcb_pairs(text, keyword):
    """The KEY:VALUE words after ``keyword`` on its line(s) of dcb's plain output (dcb(8): "prio-pfc 0:off 1:on ...")."""
    pairs = []
    for line in text.splitlines():
        words = line.split()
        if words and words[0] == keyword:
            pairs += [tuple(word.split(":", 1)) for word in words[1:] if ":" in word]
    return pairs


def parse_dcb_pfc(text):
    """Parse ``dcb pfc show dev <if> prio-pfc`` into ``{pfc_enabled, pfc_priorities}`` (eight 0/1, the priorities on)."""
    pairs = _dcb_pairs(text, "prio-pfc")
    if not pairs:
        raise RdmaParseError("dcb pfc printed no prio-pfc line.")
    flags = {int(prio): 1 if value == "on" else 0 for prio, value in pairs}
    return {"pfc_enabled": [flags.get(prio, 0) for prio in range(8)], "pfc_priorities": [prio for prio in range(8) if flags.get(prio)]}


def parse_dcb_app_dscp(text):
    """Parse ``dcb -N app show dev <if> dscp-prio`` into ``{prio: [dscp, ...]}``; no output is an empty table.

    The mlx5 driver trusts DSCP while its APP table holds a DSCP entry and PCP otherwise (``mlx5e_dcbnl_ieee_setapp`` and
    ``_delapp`` in drivers/net/ethernet/mellanox/mlx5/core/en_dcbnl.c), so the table is also the trust state.
    """
    table = {}
    for dscp, prio in _dcb_pairs(text, "dscp-prio"):
        if not (dscp.isdigit() and prio.isdigit()):
            raise RdmaParseError("dcb app printed the DSCP entry %s:%s; run it with -N for numbers." % (dscp, prio))
        table.setdefault(int(prio), []).append(int(dscp))
    return {prio: sorted(dscps) for prio, dscps in sorted(table.items())}


def dcb_qos(app_text, pfc_text):
    """The QoS state from dcb, shaped like :func:`parse_mlnx_qos`' (no DCBX mode or cable length through dcb)."""
    dscp2prio = parse_dcb_app_dscp(app_text)
    return dict(parse_dcb_pfc(pfc_text), dcbx_mode=None, trust="dscp" if dscp2prio else "pcp", dscp2prio=dscp2prio, cable_len=None)


# mlxconfig ----------------------------------------------------------------------------------------------------------

_MLXCONFIG_VALUE = re.compile(r"^(?:.*\()?(-?\w+)\)?$")


def _mlxconfig_value(text):
    """'True(1)' -> '1', 'DEVICE_DEFAULT(0)' -> '0', '8' -> '8': the number mlxconfig set takes."""
    match = _MLXCONFIG_VALUE.match(text)
    return match.group(1) if match else text


def parse_mlxconfig_query(text):
    """Parse ``mlxconfig -d <dev> -e query [params]`` into ``{param: {default, current, next_boot}}`` (values as numbers).

    The columns come from the ``Configurations:`` header (``Default Current Next Boot`` with ``-e``; a plain query
    prints only ``Next Boot``); a ``*`` marking a changed value is dropped.
    """
    params = {}
    columns = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("Configurations:"):
            names = stripped.split(":", 1)[1].replace("Next Boot", "Next_Boot").split()
            columns = [name.lower() for name in names]
            continue
        if columns is None or not stripped:
            continue
        fields = stripped.lstrip("*").split()
        if len(fields) != len(columns) + 1 or not re.match(r"^[A-Z][A-Z0-9_]+$", fields[0]):
            continue
        params[fields[0]] = {column: _mlxconfig_value(value) for column, value in zip(columns, fields[1:])}
    if columns is None:
        raise RdmaParseError("mlxconfig printed no 'Configurations:' header.")
    return params


# sysfs --------------------------------------------------------------------------------------------------------------

def _read(path):
    try:
        with open(path) as handle:
            return handle.read().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _code_name(text):
    """'4: ACTIVE' -> 'ACTIVE'; '5: LinkUp' -> 'LinkUp'."""
    return text.split(":", 1)[1].strip() if text and ":" in text else text


def read_sysfs(root="/sys"):
    """Read every RDMA port from ``<root>/class/infiniband``: state, link layer, rate, netdev, PCI address and GIDs.

    Returns None when the directory does not exist (no RDMA driver loaded), else a list of ports shaped like
    :func:`merge_ports`' input. Unset and all-zero GIDs are left out, as show_gids does.
    """
    base = os.path.join(root, "class", "infiniband")
    if not os.path.isdir(base):
        return None
    ports = []
    for ibdev in sorted(os.listdir(base)):
        device = os.path.join(base, ibdev)
        pci = os.path.basename(os.path.realpath(os.path.join(device, "device")))
        netdevs = sorted(os.listdir(os.path.join(device, "device", "net"))) if os.path.isdir(os.path.join(device, "device", "net")) else []
        ports_dir = os.path.join(device, "ports")
        for port in sorted(os.listdir(ports_dir) if os.path.isdir(ports_dir) else [], key=int):
            port_dir = os.path.join(ports_dir, port)
            gids = []
            gid_dir = os.path.join(port_dir, "gids")
            for index in sorted(os.listdir(gid_dir) if os.path.isdir(gid_dir) else [], key=int):
                gid = _read(os.path.join(gid_dir, index))
                if not gid or _is_unset_gid(normalise_gid(gid)):
                    continue
                gids.append({
                    "index": int(index),
                    "gid": normalise_gid(gid),
                    "type": _gid_type(_read(os.path.join(port_dir, "gid_attrs", "types", index))),
                    "netdev": _read(os.path.join(port_dir, "gid_attrs", "ndevs", index)) or None,
                })
            ndevs = sorted({gid["netdev"] for gid in gids if gid["netdev"]})
            ports.append({
                "ibdev": ibdev,
                "port": int(port),
                "state": _code_name(_read(os.path.join(port_dir, "state"))),
                "phys_state": _code_name(_read(os.path.join(port_dir, "phys_state"))),
                "link_layer": _read(os.path.join(port_dir, "link_layer")),
                "rate": _read(os.path.join(port_dir, "rate")),
                "netdev": (ndevs or netdevs or [None])[0],
                "pci_address": pci if re.match(r"^[0-9a-f]{4}:", pci) else None,
                "gids": gids,
            })
    return ports


# merge --------------------------------------------------------------------------------------------------------------

_STATE_NAMES = {"PORT_ACTIVE": "ACTIVE", "PORT_DOWN": "DOWN", "PORT_INIT": "INIT", "PORT_ARMED": "ARMED"}


def interface_drivers(name, root="/sys"):
    """The kernel drivers of a netdev's hardware: its own device's and those of every device below it (bond slaves,
    bridge ports, a VLAN's parent, through the ``lower_*`` links). Empty for a virtual device with none below it."""
    drivers, seen, queue = [], set(), [name]
    while queue:
        current = queue.pop(0)
        if current in seen:
            continue
        seen.add(current)
        base = os.path.join(root, "class", "net", current)
        driver = os.path.join(base, "device", "driver")
        if os.path.exists(driver):
            found = os.path.basename(os.path.realpath(driver))
            if found not in drivers:
                drivers.append(found)
        try:
            queue += sorted(entry[len("lower_"):] for entry in os.listdir(base) if entry.startswith("lower_"))
        except OSError:
            pass
    return drivers


def merge_ports(sysfs=None, devinfo=None, show_gids=None, ibdev2netdev=None, rdma_link=None):
    """One record per RDMA port from whichever sources were read; earlier sources win for a value they know.

    sysfs first (always current, no tool needed), then ibv_devinfo (the active MTU, which sysfs lacks), show_gids,
    ibdev2netdev (PCI address, the netdev on OFED/DOCA) and rdma link. Each port:
    ``{ibdev, port, netdev, pci_address, state, phys_state, link_layer, active_mtu, rate, gids, roce_v2_ipv4_gid}``,
    states as ``ACTIVE``/``DOWN``/..., ``roce_v2_ipv4_gid`` the ``{index, gid, type, ipv4}`` NCCL needs or None.
    """
    merged = {}

    def port_record(ibdev, port):
        return merged.setdefault((ibdev, port), {
            "ibdev": ibdev, "port": port, "netdev": None, "pci_address": None, "state": None, "phys_state": None,
            "link_layer": None, "active_mtu": None, "rate": None, "gids": None,
        })

    def fill(record, **values):
        for key, value in values.items():
            if record[key] is None and value not in (None, ""):
                record[key] = value

    for entry in sysfs or []:
        fill(port_record(entry["ibdev"], entry["port"]), **{key: entry[key] for key in
             ("netdev", "pci_address", "state", "phys_state", "link_layer", "rate", "gids")})
    for hca in devinfo or []:
        for entry in hca["ports"]:
            state = entry.get("state")
            fill(port_record(hca["hca_id"], entry["port"]), state=_STATE_NAMES.get(state, state),
                 phys_state=entry.get("phys_state"), link_layer=entry.get("link_layer"),
                 active_mtu=entry.get("active_mtu"), rate=entry.get("active_speed"), gids=entry["gids"] or None)
    if show_gids:
        by_port = {}
        for row in show_gids:
            by_port.setdefault((row["dev"], row["port"]), []).append(row)
        for key, rows in by_port.items():
            record = port_record(*key)
            fill(record, netdev=next((row["netdev"] for row in rows if row["netdev"]), None))
            if not record["gids"] or any(gid.get("type") is None for gid in record["gids"]):
                record["gids"] = [{"index": row["index"], "gid": row["gid"], "type": row["type"], "netdev": row["netdev"]} for row in rows]
    for row in ibdev2netdev or []:
        fill(port_record(row["ibdev"], row["port"]), netdev=row["netdev"], pci_address=row["pci_address"])
    for row in rdma_link or []:
        fill(port_record(row["ibdev"], row["port"]), netdev=row["netdev"], state=row["state"], phys_state=row["physical_state"])

    ports = []
    for key in sorted(merged):
        record = merged[key]
        record["gids"] = record["gids"] or []
        record["roce_v2_ipv4_gid"] = roce_v2_ipv4_gid(record["gids"]) if record["link_layer"] == "Ethernet" else None
        ports.append(record)
    return ports


def common_gid_index(ports):
    """The RoCEv2 IPv4 GID index shared by every Ethernet port that has one, or None when they differ or none has one.

    NCCL_IB_GID_INDEX is one number for all HCAs of a process, so a table that differs between rails cannot be
    expressed there (NCCL 2.21+ then finds each one by itself).
    """
    indexes = {port["roce_v2_ipv4_gid"]["index"] for port in ports if port["roce_v2_ipv4_gid"]}
    return indexes.pop() if len(indexes) == 1 else None
