"""etcdctl version, snapshot save, member list, member remove and endpoint health, against the double's etcd member (the store on
the first control plane, served while its static pod's manifest is in place: store.etcd_serving), with the lines etcdctl v3.6
prints (etcd's etcdctl/ctlv3/command and client/v3/snapshot: zap's JSON log lines on stderr, `Snapshot saved at <file>` on
stdout; recorded real outputs in tests/lab/fixtures/etcd-3.5.1). The snapshot is the store's JSON, not a bbolt database."""

import json
import os
import time

from kube_double.core import EXIT_LAB_ERROR, Fail, parse_flags, path, read_file, write_file
from kube_double.etcd_member import MembershipError, changing_membership, human_size, member_list_json, membership, remove_member, table, zap_json
from kube_double.store import STORE, etcd_serving


ETCDCTL_VERSION = "3.6.4"


ETCD_FLAGS = {"--endpoints", "--cacert", "--cert", "--key", "--command-timeout", "--dial-timeout", "-w", "--write-out"}


def etcdctl(arguments):
    flags, positional = parse_flags(arguments, ETCD_FLAGS, {"--insecure-skip-tls-verify", "--debug", "--hex"})
    if positional[:1] == ["version"]:
        print(f"etcdctl version: {ETCDCTL_VERSION}\nAPI version: 3.6")
        return 0
    command = tuple(positional[:2])
    if command not in (("snapshot", "save"), ("member", "list"), ("member", "remove"), ("endpoint", "health")):
        raise Fail(f"etcdctl (lab double): `etcdctl {' '.join(command)}` is not modelled: version, snapshot save, member list, member remove, "
                   "endpoint health", EXIT_LAB_ERROR)
    for flag in ("--cacert", "--cert", "--key"):
        if flag in flags and not os.path.exists(path(flags[flag])):
            raise Fail(f"Error: open {flags[flag]}: no such file or directory")
    endpoint = flags.get("--endpoints", "127.0.0.1:2379").split(",")[0]
    write_out = flags.get("-w", flags.get("--write-out", "simple"))
    if command == ("snapshot", "save"):
        return snapshot_save(positional, endpoint)
    if command == ("endpoint", "health"):
        return endpoint_health(endpoint, write_out)
    if command == ("member", "remove"):
        return member_remove(positional[2:], endpoint)
    return member_list(endpoint, write_out)


def unreachable(endpoint):
    """No member answers here: a worker, a control plane that joined (the lab keeps one etcd, on the first), or a member stopped
    or without its data."""
    zap_json("v3@v3.6.4/retry_interceptor.go:65", "retrying of unary invoker failed", level="warn", logger="etcd-client",
             target=f"etcd-endpoints://{endpoint}", attempt=0,
             error="rpc error: code = DeadlineExceeded desc = latest balancer error: last connection error: connection error: desc = "
                   f"\"transport: Error while dialing: dial tcp {endpoint.split('://')[-1]}: connect: connection refused\"")


def snapshot_save(positional, endpoint):
    if len(positional) != 3:
        raise Fail("Error: snapshot save expects one argument")
    target = positional[2]
    zap_json("snapshot/v3_snapshot.go:83", "created temporary db file", path=f"{target}.part")
    if not etcd_serving():
        unreachable(endpoint)
        raise Fail("Error: context deadline exceeded", 5)
    zap_json("v3@v3.6.4/maintenance.go:236", "opened snapshot stream; downloading", logger="client")
    zap_json("snapshot/v3_snapshot.go:96", "fetching snapshot", endpoint=endpoint)
    content = read_file(STORE)
    zap_json("v3@v3.6.4/maintenance.go:302", "completed snapshot read; closing", logger="client")
    zap_json("snapshot/v3_snapshot.go:111", "fetched snapshot", endpoint=endpoint, size=human_size(len(content)), took="now")
    write_file(target, content, 0o600)
    zap_json("snapshot/v3_snapshot.go:120", "saved", path=target)
    print(f"Snapshot saved at {target}")
    return 0


def endpoint_health(endpoint, write_out):
    started = time.monotonic()
    healthy = etcd_serving()
    took = f"{(time.monotonic() - started) * 1000 + 2:.6f}ms"
    if write_out == "json":
        print(json.dumps([{"endpoint": endpoint, "health": healthy, "took": took}
                          | ({} if healthy else {"error": "failed to commit proposal: context deadline exceeded"})], separators=(",", ":")))
    elif healthy:
        print(f"{endpoint} is healthy: successfully committed proposal: took = {took}")
    else:
        unreachable(endpoint)
        print(f"{endpoint} is unhealthy: failed to commit proposal: context deadline exceeded")
    if not healthy:
        raise Fail("Error: unhealthy cluster")
    return 0


def member_list(endpoint, write_out):
    if not etcd_serving():
        unreachable(endpoint)
        raise Fail("Error: context deadline exceeded")
    listed = member_list_json(membership(json.loads(read_file(STORE))))
    if write_out == "json":
        print(json.dumps(listed, separators=(",", ":")))
        return 0
    rows = [[f"{member['ID']:x}", "started" if member["name"] else "unstarted", member["name"], ",".join(member["peerURLs"]),
             ",".join(member["clientURLs"]), "true" if member.get("isLearner") else "false"] for member in listed["members"]]
    if write_out == "table":
        print(table(["ID", "STATUS", "NAME", "PEER ADDRS", "CLIENT ADDRS", "IS LEARNER"], rows))
    else:
        print("\n".join(", ".join(row) for row in rows))
    return 0


def member_remove(arguments, endpoint):
    """etcdctl member remove <ID in hex>: `Member <id> removed from cluster <cluster id>` (both as Go's %16x, padded with spaces),
    or etcd's refusal after the client's retry warning. Bad arguments exit 128 (cobrautl.ExitBadArgs), as the real one."""
    if not arguments:
        raise Fail("Error: member ID is not provided", 128)
    try:
        ident = int(arguments[0], 16)
    except ValueError:
        raise Fail(f'Error: bad member ID arg (strconv.ParseUint: parsing "{arguments[0]}": invalid syntax), expecting ID in Hex', 128) from None
    if not etcd_serving():
        unreachable(endpoint)
        raise Fail("Error: context deadline exceeded")
    try:
        with changing_membership(json.loads(read_file(STORE))) as current:
            remove_member(current, ident)
    except MembershipError as error:
        code = "NotFound" if error.code == 404 else "Unknown"
        zap_json("v3@v3.6.4/retry_interceptor.go:65", "retrying of unary invoker failed", level="warn", logger="etcd-client",
                 target=f"etcd-endpoints://{endpoint}", attempt=0, error=f"rpc error: code = {code} desc = {error}")
        raise Fail(f"Error: {error}") from None
    print(f"Member {ident:16x} removed from cluster {current['clusterID']:16x}")
    return 0
