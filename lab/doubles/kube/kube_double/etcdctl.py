"""etcdctl version and snapshot save, against the double's etcd (the store file on the first control plane), with the lines
etcdctl v3.6 prints (etcd's etcdctl/ctlv3/command/snapshot_command.go and client/v3/snapshot: zap's JSON log lines on
stderr, `Snapshot saved at <file>` on stdout). The snapshot is the store's JSON, not a bbolt database."""

import json
import os
import sys

from kube_double.core import EXIT_LAB_ERROR, Fail, now, parse_flags, path, read_file, write_file
from kube_double.store import STORE


ETCDCTL_VERSION = "3.6.4"


ETCD_FLAGS = {"--endpoints", "--cacert", "--cert", "--key", "--command-timeout", "--dial-timeout", "-w", "--write-out"}


def etcdctl(arguments):
    flags, positional = parse_flags(arguments, ETCD_FLAGS, {"--insecure-skip-tls-verify", "--debug"})
    if positional[:1] == ["version"]:
        print(f"etcdctl version: {ETCDCTL_VERSION}\nAPI version: 3.6")
        return 0
    if positional[:2] != ["snapshot", "save"]:
        raise Fail(f"etcdctl (lab double): `etcdctl {' '.join(positional[:2])}` is not modelled: version, snapshot save", EXIT_LAB_ERROR)
    if len(positional) != 3:
        raise Fail("Error: snapshot save expects one argument")
    target = positional[2]
    for flag in ("--cacert", "--cert", "--key"):
        if flag in flags and not os.path.exists(path(flags[flag])):
            raise Fail(f"Error: open {flags[flag]}: no such file or directory")
    endpoint = flags.get("--endpoints", "127.0.0.1:2379").split(",")[0]
    log("snapshot/v3_snapshot.go:83", "created temporary db file", path=f"{target}.part")
    if not os.path.exists(path(STORE)):
        # No etcd member answers here: a worker, or a control plane that joined (the lab keeps one etcd, on the first).
        log("v3@v3.6.4/retry_interceptor.go:65", "retrying of unary invoker failed", level="warn", target=f"etcd-endpoints://{endpoint}",
            error="rpc error: code = DeadlineExceeded desc = context deadline exceeded")
        raise Fail("Error: context deadline exceeded")
    log("v3@v3.6.4/maintenance.go:236", "opened snapshot stream; downloading", logger="client")
    log("snapshot/v3_snapshot.go:96", "fetching snapshot", endpoint=endpoint)
    content = read_file(STORE)
    log("v3@v3.6.4/maintenance.go:302", "completed snapshot read; closing", logger="client")
    log("snapshot/v3_snapshot.go:111", "fetched snapshot", endpoint=endpoint, size=human_size(len(content)), took="now")
    write_file(target, content, 0o600)
    log("snapshot/v3_snapshot.go:120", "saved", path=target)
    print(f"Snapshot saved at {target}")
    return 0


def log(caller, message, level="info", logger=None, **fields):
    entry = {"level": level, "ts": now().strftime("%Y-%m-%dT%H:%M:%S.000000Z")}
    if logger:
        entry["logger"] = logger
    entry.update(caller=caller, msg=message, **fields)
    print(json.dumps(entry, separators=(",", ":")), file=sys.stderr)


def human_size(size):
    """go-humanize's Bytes, as etcdctl prints the snapshot's size: '3.2 MB', '930 kB', '512 B'."""
    for unit, scale in (("GB", 10 ** 9), ("MB", 10 ** 6), ("kB", 10 ** 3)):
        if size >= scale:
            value = size / scale
            return f"{value:.1f} {unit}" if value < 10 else f"{value:.0f} {unit}"
    return f"{size} B"
