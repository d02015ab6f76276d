# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Scheduled etcd snapshots of a kubeadm control plane (the onprem.gpu.etcd_backup role), and what a restore chooses from.

One round (``run_backup``): ``etcdctl snapshot save`` with the cluster's etcd client certificates into the snapshot directory,
``etcdutl snapshot status -w json`` on the file (a snapshot that does not verify is deleted), the status kept beside it as
``<snapshot>.json`` (only snapshots with one count as verified), all but the newest ``keep`` verified snapshots deleted, and
node-exporter textfile metrics written from the directory, so that a failed round leaves the last success's timestamp and
the age grows. With an S3 target (``s3_target``, ``ALIAS/BUCKET[/PREFIX]``; the alias's endpoint and keys, ``mc_host``, go
from the root-only configuration into mc's ``MC_HOST_<ALIAS>`` environment variable), every kept verified snapshot that has
no copy yet is copied off the node with the MinIO client (``mc cp``), its status after it, and marked ``<snapshot>.copied``;
a copy that failed is tried again at the next round. The role installs this file (standard library only) beside the timer's
program, which calls ``command``."""

from __future__ import annotations

import datetime
import json
import os
import re
import subprocess
import tempfile
import time
from urllib.parse import unquote, urlsplit

SNAPSHOT_NAME = re.compile(r"etcd-snapshot-(\d{8}T\d{6}Z)\.db\Z")
STATUS_FIELDS = ("hash", "revision", "totalKey", "totalSize")
METRICS_FILE = "onprem_etcd_backup.prom"
COPIED = ".copied"


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
        found.append({"name": name, "path": os.path.join(directory, name), "time": moment, "status": status,
                      "copied": f"{name}{COPIED}" in names})
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
    return {"name": name, "path": target, "time": moment.timestamp(), "status": status, "copied": False}


def copy_off(config, run, snapshots, clock=time.time):
    """Copy every snapshot of ``snapshots`` (verified, newest first) that has no copy yet to ``config['s3_target']`` with mc:
    the snapshot, then its status (so that a status in the bucket means its snapshot is whole), then the ``.copied`` marker
    here. Returns ``(copied names, error sentence or None)``; the first failure stops the round's copies, the next round
    tries again. Nothing is copied without a target."""
    target = (config.get("s3_target") or "").rstrip("/")
    copied = []
    if not target:
        return copied, None
    alias = target.split("/", 1)[0]
    if config.get("mc_host"):
        # The configuration (root only) holds the endpoint and keys; mc reads them from its environment, not its command line.
        os.environ[f"MC_HOST_{alias}"] = config["mc_host"]
    secrets = mc_host_secrets(alias, os.environ)
    for snapshot in snapshots:
        if snapshot.get("copied"):
            continue
        for path in (snapshot["path"], f"{snapshot['path']}.json"):
            rc, out, err = run([config.get("mc", "mc"), "cp", "--quiet", path, f"{target}/{os.path.basename(path)}"])
            if rc != 0:
                return copied, (f"mc cp of {os.path.basename(path)} to {target} failed (exit {rc}): "
                                f"{masked(_last_line(err or out), secrets)}")
        write_atomically(f"{snapshot['path']}{COPIED}", json.dumps({"target": target, "time": int(clock())}) + "\n", 0o600)
        snapshot["copied"] = True
        copied.append(snapshot["name"])
    return copied, None


def mc_host_secrets(alias, environ):
    """The forms the keys of ``MC_HOST_<alias>`` may take in what mc prints: as given, percent-encoded (either case of the
    hex digits) and the whole variable; longest first."""
    value = environ.get(f"MC_HOST_{alias}") or ""
    parts = urlsplit(value)
    userinfo = parts.netloc.rpartition("@")[0]
    found = {value} if userinfo else set()
    for raw in userinfo.split(":", 1) if userinfo else []:
        found.update({raw, raw.lower(), raw.upper(), unquote(raw)})
    return sorted((secret for secret in found if secret), key=len, reverse=True)


def masked(text, secrets):
    """``text`` with every secret replaced by ``***``."""
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


def prune(directory, keep):
    """Delete all but the newest ``keep`` verified snapshots (each with its status); returns the deleted names."""
    deleted = []
    for snapshot in verified_snapshots(directory)[keep:]:
        _remove(snapshot["path"], f"{snapshot['path']}.json", f"{snapshot['path']}{COPIED}")
        deleted.append(snapshot["name"])
    return deleted


def metrics(config, snapshots, succeeded, finished, copy_succeeded=None):
    """node-exporter textfile metrics: the newest verified snapshot's time (0 without one, so that its age alerts), its size
    and revision, how many are kept, the last round's result and time, and the interval the age is judged against; with an S3
    target, the newest copied snapshot's time (0 without one) and whether the last round's copies succeeded."""
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
    if config.get("s3_target"):
        copied = [snapshot for snapshot in snapshots if snapshot.get("copied")]
        families += [
            ("onprem_etcd_backup_last_copy_timestamp_seconds",
             "The newest verified etcd snapshot copied off the node (S3), its time in seconds since the epoch.",
             copied[0]["time"] if copied else 0),
            ("onprem_etcd_backup_last_copy_run_success", "Whether the last round copied every kept snapshot off the node (1) or not (0).",
             1 if copy_succeeded else 0),
        ]
    lines = []
    for name, text, value in families:
        lines += [f"# HELP {name} {text}", f"# TYPE {name} gauge", f'{name}{{cluster="{cluster}"}} {_number(value)}']
    return "\n".join(lines) + "\n"


def run_backup(config, run, clock=time.time):
    """One scheduled round; returns ``{"ok", "snapshot", "deleted", "error"}`` and always writes the metrics."""
    os.makedirs(config["dir"], mode=0o700, exist_ok=True)
    moment = datetime.datetime.fromtimestamp(int(clock()), tz=datetime.timezone.utc)
    result = {"ok": False, "snapshot": None, "deleted": [], "error": None, "copied": [], "copy_error": None}
    try:
        result["snapshot"] = save_and_verify(config, run, moment)["path"]
        result["deleted"] = prune(config["dir"], int(config["keep"]))
        result["ok"] = True
    except BackupError as error:
        result["error"] = str(error)
    # Also after a failed save: the kept snapshots that an earlier round could not copy.
    snapshots = verified_snapshots(config["dir"])
    result["copied"], result["copy_error"] = copy_off(config, run, snapshots, clock)
    if config.get("textfile_dir"):
        write_atomically(os.path.join(config["textfile_dir"], METRICS_FILE),
                         metrics(config, snapshots, result["ok"], clock(), copy_succeeded=result["copy_error"] is None))
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
    errors = "".join(f"{error}\n" for error in (result["error"], result["copy_error"]) if error)
    return (0 if result["ok"] and not result["copy_error"] else 1), json.dumps(result, sort_keys=True) + "\n", errors
