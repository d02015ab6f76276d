"""The double's etcd member on the first control plane, as etcdctl and etcdutl see it: its membership (the one member kubeadm's
local etcd starts with, or the members a restore wrote), what `etcdutl snapshot status` reads from a snapshot, and the two log
formats etcd's tools print (zap JSON lines from etcdctl, zap console lines from etcdutl). Recorded real outputs of etcd 3.5.1:
tests/lab/fixtures/etcd-3.5.1 (etcd 3.6 adds the snapshot's storage version to `snapshot status`)."""

import hashlib
import json
import socket
import sys
import zlib

from kube_double.core import Fail, node_address, now


# The storage version etcd 3.6 writes into its database (`etcdutl snapshot status`'s VERSION).
STORAGE_VERSION = "3.6.0"
CLUSTER_TOKEN = "etcd-cluster"  # etcd's --initial-cluster-token default, which kubeadm keeps


def default_member():
    """kubeadm's local etcd: --name=<node name>, peer URL https://<advertise address>:2380, client URL https://<address>:2379."""
    address = node_address()
    return {"name": socket.gethostname(), "peerURLs": [f"https://{address}:2380"], "clientURLs": [f"https://{address}:2379"]}


def member_id(member, token=CLUSTER_TOKEN):
    """etcd's membership.computeMemberID: the first 8 bytes of SHA-1 over the sorted peer URLs, the cluster token (and no time for
    members of a new cluster), as an unsigned 64-bit number."""
    digest = hashlib.sha1(("".join(sorted(member["peerURLs"])) + token).encode()).digest()
    return int.from_bytes(digest[:8], "big")


def cluster_id(members):
    """etcd's RaftCluster.genID: the member IDs' bytes hashed together."""
    digest = hashlib.sha1(b"".join(member_id(member).to_bytes(8, "big") for member in sorted(members, key=member_id))).digest()
    return int.from_bytes(digest[:8], "big")


def members_of(data):
    """The members the store holds (written by a restore), else the one member kubeadm init started."""
    local = default_member()
    members = data.get("etcd", {}).get("members") or [local]
    # A restored member publishes its client URLs when it starts (--advertise-client-urls); a restore knows only peer URLs.
    return [dict(member, clientURLs=member["clientURLs"] or (local["clientURLs"] if member["name"] == local["name"] else []))
            for member in members]


def parse_snapshot(content):
    """The store a snapshot holds; what is not one answers as etcdutl does for a file that is no bbolt database."""
    try:
        data = json.loads(content)
    except ValueError:
        raise Fail("Error: invalid database") from None
    if not isinstance(data, dict) or not isinstance(data.get("objects"), dict):
        raise Fail("Error: invalid database")
    return data


def snapshot_status(content):
    """etcdutl snapshot status: the hash (CRC-32 here, of the file), revision (the store's resourceVersion), total keys (objects)
    and total size in bytes, and etcd 3.6's storage version."""
    data = parse_snapshot(content)
    keys = sum(len(objects) for objects in data["objects"].values())
    return {"hash": zlib.crc32(content.encode()), "revision": int(data.get("resourceVersion", 1)), "totalKey": keys,
            "totalSize": len(content.encode()), "version": STORAGE_VERSION}


def zap_json(caller, message, level="info", logger=None, **fields):
    """A zap production (JSON) line as etcdctl 3.6 prints them on stderr."""
    entry = {"level": level, "ts": now().strftime("%Y-%m-%dT%H:%M:%S.000000Z")}
    if logger:
        entry["logger"] = logger
    entry.update(caller=caller, msg=message, **fields)
    print(json.dumps(entry, separators=(",", ":")), file=sys.stderr)


def zap_console(caller, message, **fields):
    """A zap console line as etcdutl prints them on stderr: time, level, caller, message, the fields as JSON, tab-separated."""
    line = f"{now().strftime('%Y-%m-%dT%H:%M:%SZ')}\tinfo\t{caller}\t{message}"
    if fields:
        line += "\t" + json.dumps(fields, separators=(", ", ": "))
    print(line, file=sys.stderr)


def human_size(size):
    """go-humanize's Bytes, as etcd's tools print sizes: '3.2 MB', '20 kB', '512 B'."""
    for unit, scale in (("GB", 10 ** 9), ("MB", 10 ** 6), ("kB", 10 ** 3)):
        if size >= scale:
            value = size / scale
            return f"{value:.1f} {unit}" if value < 10 else f"{value:.0f} {unit}"
    return f"{size} B"


def table(headers, rows):
    """etcdctl's and etcdutl's -w table (olekukonko/tablewriter): centred headers, values right-aligned, ASCII borders."""
    widths = [max([len(header)] + [len(row[column]) for row in rows]) for column, header in enumerate(headers)]
    rule = "+" + "+".join("-" * (width + 2) for width in widths) + "+"
    centred = [" " * ((width - len(header)) // 2) + header.ljust(width - (width - len(header)) // 2) for header, width in zip(headers, widths)]
    lines = [rule, "|" + "|".join(f" {header} " for header in centred) + "|", rule]
    lines += ["|" + "|".join(f" {value.rjust(width)} " for value, width in zip(row, widths)) + "|" for row in rows]
    return "\n".join(lines + [rule])
