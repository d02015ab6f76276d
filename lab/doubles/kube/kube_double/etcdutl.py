"""etcdutl snapshot status and snapshot restore (etcd's etcdutl/etcdutl/snapshot_command.go and etcdutl/snapshot/v3_snapshot.go),
on the double's snapshots (the store's JSON, as `etcdctl snapshot save` writes them) with the output of the real tool: recorded
samples in tests/lab/fixtures/etcd-3.5.1. A restore writes a new data directory whose store holds the snapshot's objects and
whose membership is --initial-cluster's, as a real restore trims the old membership and adds the new one."""

import json
import os

from kube_double.core import EXIT_LAB_ERROR, Fail, parse_flags, path, read_file, write_file
from kube_double.etcd_member import (
    cluster_id, human_size, member_id, new_membership, parse_snapshot, snapshot_status, table, write_membership, zap_console)


RESTORE_FLAGS = {"--data-dir", "--wal-dir", "--name", "--initial-cluster", "--initial-cluster-token", "--initial-advertise-peer-urls"}


def etcdutl(arguments):
    flags, positional = parse_flags(arguments, RESTORE_FLAGS | {"-w", "--write-out"}, {"--skip-hash-check", "--mark-compacted", "--bump-revision"})
    if positional[:1] == ["version"]:
        print("etcdutl version: 3.6.4\nAPI version: 3.6")
        return 0
    if positional[:1] != ["snapshot"] or positional[1:2] not in (["status"], ["restore"]):
        raise Fail(f"etcdutl (lab double): `etcdutl {' '.join(positional[:2])}` is not modelled: version, snapshot status, snapshot restore",
                   EXIT_LAB_ERROR)
    if len(positional) != 3:
        raise Fail(f"Error: snapshot {positional[1]} requires exactly one argument")
    snapshot = positional[2]
    if not os.path.isfile(path(snapshot)):
        raise Fail(f"Error: stat {snapshot}: no such file or directory")
    if positional[1] == "status":
        return status(snapshot, flags.get("-w", flags.get("--write-out", "simple")))
    return restore(snapshot, flags)


def status(snapshot, write_out):
    result = snapshot_status(read_file(snapshot))
    if write_out == "json":
        print(json.dumps(result, separators=(",", ":")))
    elif write_out == "table":
        print(table(["HASH", "REVISION", "TOTAL KEYS", "TOTAL SIZE", "VERSION"],
                    [[f"{result['hash']:x}", str(result["revision"]), str(result["totalKey"]), human_size(result["totalSize"]), result["version"]]]))
    elif write_out == "simple":
        print(f"{result['hash']:x}, {result['revision']}, {result['totalKey']}, {human_size(result['totalSize'])}, {result['version']}")
    else:
        raise Fail(f"Error: unknown output format {write_out!r}")
    return 0


def restore(snapshot, flags):
    """A new data directory from the snapshot: refused when it exists and is not empty; the members are --initial-cluster's
    (default: this --name at --initial-advertise-peer-urls, etcd's defaults `default` and http://localhost:2380)."""
    name = flags.get("--name", "default")
    data_dir = flags.get("--data-dir", f"{name}.etcd")
    target = os.path.abspath(data_dir)  # relative to the working directory, as etcdutl takes it
    if os.path.isdir(path(target)) and os.listdir(path(target)):
        raise Fail(f'Error: data-dir "{data_dir}" not empty or could not be read')
    peer_urls = flags.get("--initial-advertise-peer-urls", "http://localhost:2380").split(",")
    initial = flags.get("--initial-cluster", f"{name}={','.join(peer_urls)}")
    members = {}
    for item in initial.split(","):
        member_name, equals, url = item.partition("=")
        if not equals or not url:
            raise Fail(f'Error: --initial-cluster has {item!r}, want NAME=PEER_URL')
        members.setdefault(member_name, {"name": member_name, "peerURLs": [], "clientURLs": []})["peerURLs"].append(url)
    if name not in members:
        raise Fail(f'Error: couldn\'t find local name "{name}" in the initial cluster configuration')
    wal_dir = flags.get("--wal-dir", f"{data_dir}/member/wal")
    places = {"path": snapshot, "wal-dir": wal_dir, "data-dir": data_dir, "snap-dir": f"{data_dir}/member/snap"}
    zap_console("snapshot/v3_snapshot.go:251", "restoring snapshot", **places)
    data = parse_snapshot(read_file(snapshot))
    token = flags.get("--initial-cluster-token", "etcd-cluster")
    data["etcd"] = {"members": list(members.values()), "clusterToken": token}
    zap_console("membership/store.go:141", "Trimming membership information from the backend...")
    cluster = f"{cluster_id(list(members.values()), token):x}"
    for member in members.values():
        added = {"cluster-id": cluster, "local-member-id": "0", "added-peer-id": f"{member_id(member, token):x}", "added-peer-peer-urls": member["peerURLs"]}
        zap_console("membership/cluster.go:421", "added member", **added)
    write_file(f"{target}/member/snap/db", json.dumps(data, sort_keys=True), 0o600)
    write_membership(new_membership(list(members.values()), name, token), target)
    write_file(f"{target}/member/snap/0000000000000001-0000000000000001.snap", "", 0o600)
    write_file(f"{os.path.abspath(wal_dir)}/0000000000000000-0000000000000000.wal", "", 0o600)
    os.chmod(path(target), 0o700)
    zap_console("snapshot/v3_snapshot.go:272", "restored snapshot", **places)
    return 0
