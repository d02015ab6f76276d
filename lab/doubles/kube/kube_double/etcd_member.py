"""The double's etcd member on the first control plane, as etcdctl and etcdutl see it: its cluster's membership (the member
kubeadm init starts, the members a restore wrote, those a control-plane join added and those removed since), what `etcdutl
snapshot status` reads from a snapshot, and the two log formats etcd's tools print (zap JSON lines from etcdctl, zap console
lines from etcdutl). Recorded real outputs of etcd 3.5.1: tests/lab/fixtures/etcd-3.5.1 (etcd 3.6 adds the snapshot's storage
version to `snapshot status`)."""

import contextlib
import fcntl
import hashlib
import json
import os
import socket
import sys
import time
import zlib

from kube_double.core import Fail, node_address, now, path, read_file, write_file
from kube_double.store import ETCD_DATA_DIR


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


def cluster_id(members, token=CLUSTER_TOKEN):
    """etcd's RaftCluster.genID: the member IDs' bytes hashed together."""
    digest = hashlib.sha1(b"".join(ident.to_bytes(8, "big") for ident in sorted(member_id(member, token) for member in members))).digest()
    return int.from_bytes(digest[:8], "big")


# The cluster's membership, in the data directory beside the store: a real member keeps it in its database and WAL; the double
# keeps it apart from the store, which the API server holds in memory and writes whole, so that a member added or removed
# while the API server runs is never overwritten by its next write.
MEMBERSHIP = "member/lab-membership.json"
MEMBERSHIP_LOCK = "member/lab-membership.lock"
# The API server's lab path to the membership (admins only), for the control planes that run no member of their own: GET lists,
# POST adds {name, peerURLs, clientURLs}, DELETE <path>/<ID in hex> removes.
ETCD_MEMBERS = "/lab-double/etcd/members"


class MembershipError(Exception):
    """What etcd answers to a membership change it refuses (`etcdserver: member not found`), and the HTTP status the lab path
    on the double's API server answers it with."""

    def __init__(self, message, code):
        super().__init__(message)
        self.code = code


def new_membership(members, local_name, token=CLUSTER_TOKEN):
    """The membership of a new cluster (kubeadm init's member, or a restore's --initial-cluster): IDs from the peer URLs and the
    cluster token, the cluster ID from them; `local` is the member this data directory belongs to (etcd's header member_id)."""
    members = [{"ID": member_id(member, token), "name": member["name"], "peerURLs": member["peerURLs"], "clientURLs": member["clientURLs"],
                "isLearner": False} for member in members]
    local = next((member["ID"] for member in members if member["name"] == local_name), members[0]["ID"])
    return {"clusterID": cluster_id(members, token), "local": local, "members": members}


def write_membership(membership, data_dir=ETCD_DATA_DIR):
    write_file(f"{data_dir}/{MEMBERSHIP}", json.dumps(membership, sort_keys=True), 0o600)


def membership(data, data_dir=ETCD_DATA_DIR):
    """The cluster's membership: the file beside the store, else (a data directory from before it was kept) the members a restore
    wrote into the store, else the one member kubeadm's local etcd starts with. Members in etcd's order (by ID)."""
    if os.path.exists(path(f"{data_dir}/{MEMBERSHIP}")):
        current = json.loads(read_file(f"{data_dir}/{MEMBERSHIP}"))
    else:
        local = default_member()
        current = new_membership(data.get("etcd", {}).get("members") or [local], local["name"], data.get("etcd", {}).get("clusterToken", CLUSTER_TOKEN))
    for member in current["members"]:
        if member["ID"] == current["local"] and not member["clientURLs"]:
            # A restored member publishes its client URLs when it starts (--advertise-client-urls); a restore knows only peer URLs.
            member["clientURLs"] = default_member()["clientURLs"]
    current["members"].sort(key=lambda member: member["ID"])
    return current


@contextlib.contextmanager
def changing_membership(data, data_dir=ETCD_DATA_DIR):
    """The membership to change, written back when the block ends without an error: one change at a time across processes (the
    API server's lab path for a joining or resetting control plane, etcdctl member remove on this node)."""
    os.makedirs(path(f"{data_dir}/member"), exist_ok=True)
    with open(path(f"{data_dir}/{MEMBERSHIP_LOCK}"), "a", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        current = membership(data, data_dir)
        yield current
        write_membership(current, data_dir)


def add_member(current, name, peer_urls, client_urls):
    """etcd's MemberAdd, as kubeadm's join calls it (as a learner, promoted once it has caught up: here at once): the new member's
    ID from its peer URLs and the time (membership.computeMemberID with the time, no cluster name)."""
    if any(url in member["peerURLs"] for member in current["members"] for url in peer_urls):
        raise MembershipError("etcdserver: Peer URLs already exists", 409)
    digest = hashlib.sha1(("".join(sorted(peer_urls)) + str(int(time.time()))).encode()).digest()
    ident = int.from_bytes(digest[:8], "big")
    added = {"ID": ident, "name": name, "peerURLs": peer_urls, "clientURLs": client_urls, "isLearner": False}
    current["members"] = sorted(current["members"] + [added], key=lambda member: member["ID"])
    return added


def remove_member(current, ident):
    """etcd's MemberRemove: an unknown ID is refused, and so is the last voting member (IsReadyToRemoveVotingMember)."""
    if not any(member["ID"] == ident for member in current["members"]):
        raise MembershipError("etcdserver: member not found", 404)
    if len(current["members"]) == 1:
        raise MembershipError("etcdserver: re-configuration failed due to not enough started members", 409)
    current["members"] = [member for member in current["members"] if member["ID"] != ident]


def member_list_json(current):
    """`etcdctl member list -w json`'s document (and the lab path's answer on the API server)."""
    return {"header": {"cluster_id": current["clusterID"], "member_id": current["local"], "raft_term": 2},
            "members": [{"ID": member["ID"], "name": member["name"], "peerURLs": member["peerURLs"], "clientURLs": member["clientURLs"]}
                        | ({"isLearner": True} if member.get("isLearner") else {}) for member in current["members"]]}


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
