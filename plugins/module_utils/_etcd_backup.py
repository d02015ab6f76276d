# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Scheduled etcd snapshots of a kubeadm control plane (the onprem.gpu.etcd_backup role), and what a restore chooses from.

One round (``run_backup``): ``etcdctl snapshot save`` with the cluster's etcd client certificates into the snapshot directory,
``etcdutl snapshot status -w json`` on the file (a snapshot that does not verify is deleted), the status kept beside it as
``<snapshot>.json`` (only snapshots with one count as verified), all but the newest ``keep`` verified snapshots deleted, and
node-exporter textfile metrics written from the directory, so that a failed round leaves the last success's timestamp and
the age grows. The role installs this file (standard library only) beside the timer's program, which calls ``command``."""

from __future__ import annotations

import datetime
import json
import os
import re
import subprocess
import tempfile
import time

SNAPSHOT_NAME = re.compile(r"etcd-snapshot-(\d{8}T\d{6}Z)\.db\Z")
STATUS_FIELDS = ("hash", "revision", "totalKey", "totalSize")
METRICS_FILE = "onprem_etcd_backup.prom"


class BackupError(Exception):
    """A round that produced no verified snapshot; the message says which step and why."""


def snapshot_name(moment):
    """``etcd-snapshot-20260102T030405Z.db`` for a UTC ``moment``: names sort as their times."""
    return f"etcd-snapshot-{moment.strftime('%Y%m%dT%H%M%SZ')}.db"


def snapshot_time(name):
    """The UTC time in a snapshot's name, as seconds since the epoch; None for a file that is not a snapshot."""
    match = SNAPSHOT_NAME.fullmatch(name)
    if not match:
        return None
    return datetime.datetime.strptime(match.group(1), "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.timezone.utc).timestamp()


def parse_status(text):
    """``etcdutl snapshot status -w json``: ``{"hash", "revision", "totalKey", "totalSize"[, "version"]}`` (etcd 3.6 adds the
    storage version), numbers checked."""
    try:
        status = json.loads(text)
    except ValueError:
        raise BackupError(f"etcdutl snapshot status printed no JSON: {text.strip()[:200]!r}") from None
    if not isinstance(status, dict) or any(not isinstance(status.get(field), int) for field in STATUS_FIELDS):
        raise BackupError(f"etcdutl snapshot status lacks {', '.join(STATUS_FIELDS)}: {text.strip()[:200]!r}")
    if status["totalSize"] <= 0:
        raise BackupError("etcdutl snapshot status reports an empty snapshot")
    return status


def verified_snapshots(directory):
    """The verified snapshots of ``directory``, newest first: ``{name, path, time, status}`` for each ``etcd-snapshot-*.db``
    with its ``.json`` status beside it."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    found = []
    for name in names:
        moment = snapshot_time(name)
        if moment is None or f"{name}.json" not in names:
            continue
        try:
            with open(os.path.join(directory, f"{name}.json"), encoding="utf-8") as handle:
                status = json.load(handle)
        except (OSError, ValueError):
            continue
        found.append({"name": name, "path": os.path.join(directory, name), "time": moment, "status": status})
    return sorted(found, key=lambda snapshot: snapshot["name"], reverse=True)


def etcd_client_argv(config):
    """etcdctl's connection flags: the cluster's etcd CA and a client certificate it signed (kubeadm's healthcheck-client)."""
    return [config["etcdctl"], f"--endpoints={config['endpoints']}", f"--cacert={config['cacert']}", f"--cert={config['cert']}",
            f"--key={config['key']}", f"--dial-timeout={config.get('dial_timeout', '5s')}",
            f"--command-timeout={config.get('command_timeout', '60s')}"]


def save_and_verify(config, run, moment):
    """Save and verify one snapshot; returns its entry as ``verified_snapshots`` lists it. Nothing unverified is left."""
    directory = config["dir"]
    name = snapshot_name(moment)
    target = os.path.join(directory, name)
    rc, out, err = run(etcd_client_argv(config) + ["snapshot", "save", target])
    if rc != 0:
        _remove(target, f"{target}.part")
        raise BackupError(f"etcdctl snapshot save failed (exit {rc}): {_last_line(err or out)}")
    rc, out, err = run([config["etcdutl"], "snapshot", "status", target, "-w", "json"])
    if rc != 0:
        _remove(target)
        raise BackupError(f"etcdutl snapshot status refused {name} (exit {rc}): {_last_line(err or out)}")
    try:
        status = parse_status(out)
    except BackupError:
        _remove(target)
        raise
    write_atomically(f"{target}.json", json.dumps(status, sort_keys=True) + "\n", 0o600)
    return {"name": name, "path": target, "time": moment.timestamp(), "status": status}


def prune(directory, keep):
    """Delete all but the newest ``keep`` verified snapshots (each with its status); returns the deleted names."""
    deleted = []
    for snapshot in verified_snapshots(directory)[keep:]:
        _remove(snapshot["path"], f"{snapshot['path']}.json")
        deleted.append(snapshot["name"])
    return deleted


def metrics(config, snapshots, succeeded, finished):
    """node-exporter textfile metrics: the newest verified snapshot's time (0 without one, so that its age alerts), its size
    and revision, how many are kept, the last round's result and time, and the interval the age is judged against."""
    cluster = str(config.get("cluster", "")).replace("\\", "\\\\").replace('"', '\\"')
    newest = snapshots[0] if snapshots else None
    families = [
        ("onprem_etcd_backup_last_success_timestamp_seconds", "The newest verified etcd snapshot's time, in seconds since the epoch.",
         newest["time"] if newest else 0),
        ("onprem_etcd_backup_last_run_success", "Whether the last snapshot round saved and verified a snapshot (1) or failed (0).",
         1 if succeeded else 0),
        ("onprem_etcd_backup_last_run_timestamp_seconds", "When the last snapshot round ended, in seconds since the epoch.", finished),
        ("onprem_etcd_backup_interval_seconds", "Seconds between two scheduled snapshot rounds.", int(config["interval_seconds"])),
        ("onprem_etcd_backup_snapshots", "Verified snapshots kept on this node.", len(snapshots)),
        ("onprem_etcd_backup_snapshot_size_bytes", "The newest verified snapshot's size.", newest["status"]["totalSize"] if newest else 0),
        ("onprem_etcd_backup_snapshot_revision", "The etcd revision the newest verified snapshot holds.",
         newest["status"]["revision"] if newest else 0),
    ]
    lines = []
    for name, text, value in families:
        lines += [f"# HELP {name} {text}", f"# TYPE {name} gauge", f'{name}{{cluster="{cluster}"}} {_number(value)}']
    return "\n".join(lines) + "\n"


def run_backup(config, run, clock=time.time):
    """One scheduled round; returns ``{"ok", "snapshot", "deleted", "error"}`` and always writes the metrics."""
    os.makedirs(config["dir"], mode=0o700, exist_ok=True)
    moment = datetime.datetime.fromtimestamp(int(clock()), tz=datetime.timezone.utc)
    result = {"ok": False, "snapshot": None, "deleted": [], "error": None}
    try:
        result["snapshot"] = save_and_verify(config, run, moment)["path"]
        result["deleted"] = prune(config["dir"], int(config["keep"]))
        result["ok"] = True
    except BackupError as error:
        result["error"] = str(error)
    if config.get("textfile_dir"):
        write_atomically(os.path.join(config["textfile_dir"], METRICS_FILE),
                         metrics(config, verified_snapshots(config["dir"]), result["ok"], clock()))
    return result


def write_atomically(path, text, mode=0o644):
    """Write ``text`` through a temporary file in the same directory, as node-exporter's textfile collector asks."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".onprem-etcd-backup.", dir=directory)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        _remove(temporary)
        raise


def _remove(*paths):
    for path in paths:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def _last_line(text):
    lines = [line for line in (text or "").splitlines() if line.strip()]
    return lines[-1].strip() if lines else "no output"


def _number(value):
    return str(int(value)) if float(value).is_integer() else f"{value:.3f}"


def _run(argv):
    """(rc, stdout, stderr) of ``argv`` in the C locale; a missing program is exit 127."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, errors="replace", check=False, env=dict(os.environ, LC_ALL="C"))
    except OSError as error:
        return 127, "", str(error)
    return done.returncode, done.stdout, done.stderr


def command(argv, run=_run):
    """The timer's program (roles/etcd_backup/files/onprem-etcd-backup): ``save CONFIG.json`` runs one round, ``list DIR``
    lists the verified snapshots, newest first; returns (exit status, stdout text, stderr text)."""
    if len(argv) != 2 or argv[0] not in ("save", "list"):
        return 2, "", "usage: onprem-etcd-backup save CONFIG.json | list DIR\n"
    if argv[0] == "list":
        return 0, json.dumps(verified_snapshots(argv[1]), sort_keys=True) + "\n", ""
    with open(argv[1], encoding="utf-8") as handle:
        config = json.load(handle)
    result = run_backup(config, run)
    return (0 if result["ok"] else 1), json.dumps(result, sort_keys=True) + "\n", (result["error"] + "\n" if result["error"] else "")
