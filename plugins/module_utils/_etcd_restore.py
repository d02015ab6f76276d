# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Restoring a kubeadm control plane's etcd member from a snapshot (the onprem.gpu.etcd_restore module), as etcd's
"Disaster recovery" and Kubernetes' "Operating etcd clusters for Kubernetes" (restoring an etcd cluster) describe it:

1. refuse when etcd answers and the API serves, unless forced: a restore rolls every object back to the snapshot;
2. verify the snapshot (``etcdutl snapshot status``);
3. stop the static pods by moving every manifest out of kubelet's manifest directory, and wait until the API is down;
4. ``etcdutl snapshot restore`` into a new data directory beside the old one, with this member's name and peer URL and the
   cluster's initial members (one, or every control plane's when they are all restored from the same snapshot);
5. swap it in for the data directory (the old one is kept, renamed), move the manifests back, and wait for etcd and the API.

A failure after step 3 moves the manifests back before it is reported, so that kubelet runs the control plane again."""

from __future__ import annotations

import http.client
import os
import re
import ssl
import time
import urllib.parse

from ansible_collections.onprem.gpu.plugins.module_utils._etcd_backup import BackupError, etcd_client_argv, parse_status, verified_snapshots

FLAG = re.compile(r"^\s*-\s+--([a-z0-9-]+)=(\S+?)\s*$", re.MULTILINE)


class RestoreError(Exception):
    """A refusal or a failed step, in one sentence; ``state`` says where the node was left."""

    def __init__(self, message, state="unchanged"):
        super().__init__(message)
        self.state = state


def manifest_flags(text):
    """``{flag: value}`` of a static pod manifest's command (kubeadm writes one ``- --flag=value`` line each)."""
    return dict(FLAG.findall(text))


def member_settings(flags, member_name, peer_url=None, initial_cluster=None):
    """This member's data directory, name, peer URL and initial cluster, from its etcd manifest's flags where they are set
    (kubeadm sets --name, --data-dir and --initial-advertise-peer-urls) and the module's options otherwise."""
    name = flags.get("name") or member_name
    if not peer_url:
        peer_url = flags.get("initial-advertise-peer-urls")
    if not peer_url:
        client = flags.get("advertise-client-urls", "")
        match = re.fullmatch(r"https?://([^/,]+):\d+", client.split(",")[0])
        if not match:
            raise RestoreError("The etcd manifest names neither --initial-advertise-peer-urls nor an --advertise-client-urls host: "
                               "give peer_url.")
        peer_url = f"https://{match.group(1)}:2380"
    return {"data_dir": flags.get("data-dir", "/var/lib/etcd"), "name": name, "peer_url": peer_url,
            "initial_cluster": initial_cluster or f"{name}={peer_url}"}


def api_readyz_url(manifest_dir):
    """This node's API server readiness URL, from its manifest's --advertise-address and --secure-port."""
    try:
        with open(os.path.join(manifest_dir, "kube-apiserver.yaml"), encoding="utf-8") as handle:
            flags = manifest_flags(handle.read())
    except FileNotFoundError:
        flags = {}
    if "advertise-address" not in flags:
        raise RestoreError(f"{manifest_dir}/kube-apiserver.yaml names no --advertise-address: give api_url.")
    host = flags["advertise-address"]
    return f"https://{'[' + host + ']' if ':' in host else host}:{flags.get('secure-port', '6443')}/readyz"


def choose_snapshot(snapshot, backup_dir):
    """The snapshot asked for, else the newest verified one of ``backup_dir``."""
    if snapshot:
        if not os.path.isfile(snapshot):
            raise RestoreError(f"The snapshot {snapshot} does not exist on this node.")
        return snapshot
    found = verified_snapshots(backup_dir)
    if not found:
        raise RestoreError(f"There is no verified snapshot in {backup_dir} (etcd-snapshot-*.db with its .json status): give snapshot.")
    return found[0]["path"]


def api_ready(url, cafile, timeout=5):
    """Whether kube-apiserver answers ``ok`` on ``url`` (its /readyz), verified with the cluster CA."""
    parts = urllib.parse.urlsplit(url)
    connection = None
    try:
        context = ssl.create_default_context(cafile=cafile) if cafile and os.path.exists(cafile) else ssl.create_default_context()
        connection = http.client.HTTPSConnection(parts.hostname, parts.port or 443, context=context, timeout=timeout)
        connection.request("GET", parts.path or "/")
        response = connection.getresponse()
        return response.status == 200 and response.read().strip() == b"ok"
    except (OSError, ssl.SSLError, http.client.HTTPException, ValueError):
        return False
    finally:
        if connection is not None:
            connection.close()


def etcd_healthy(config, run):
    rc, _out, _err = run(etcd_client_argv(dict(config, dial_timeout="2s", command_timeout="5s")) + ["endpoint", "health"])
    return rc == 0


def wait_until(condition, timeout, sleep, clock):
    deadline = clock() + timeout
    while True:
        if condition():
            return True
        if clock() >= deadline:
            return False
        sleep(2)


def restore(config, run, check_mode=False, ready=api_ready, sleep=time.sleep, clock=time.monotonic):
    """Restore this member as the module doc says; returns ``{changed, snapshot, status, data_dir, previous_data_dir, actions}``.
    ``config``: snapshot, backup_dir, manifest_dir, held_dir, member_name, peer_url, initial_cluster, force, api_url, api_ca,
    timeout, and etcd_client_argv's keys plus etcdutl."""
    actions = []
    manifest_dir, held_dir = config["manifest_dir"], config["held_dir"]
    if os.path.isdir(held_dir) and os.listdir(held_dir):
        raise RestoreError(f"{held_dir} holds manifests of an earlier restore that did not finish: move them back to {manifest_dir} "
                           "(or away) first.")
    etcd_manifest = os.path.join(manifest_dir, "etcd.yaml")
    try:
        with open(etcd_manifest, encoding="utf-8") as handle:
            flags = manifest_flags(handle.read())
    except FileNotFoundError:
        raise RestoreError(f"{etcd_manifest} is missing: this is not a control plane with kubeadm's local etcd.") from None
    member = member_settings(flags, config["member_name"], config.get("peer_url"), config.get("initial_cluster"))
    config = dict(config, api_url=config.get("api_url") or api_readyz_url(manifest_dir))
    snapshot = choose_snapshot(config.get("snapshot"), config["backup_dir"])
    rc, out, err = run([config["etcdutl"], "snapshot", "status", snapshot, "-w", "json"])
    if rc != 0:
        raise RestoreError(f"etcdutl does not accept {snapshot} as a snapshot (exit {rc}): {(err or out).strip()[-300:]}")
    try:
        status = parse_status(out)
    except BackupError as error:
        raise RestoreError(str(error)) from None
    healthy = etcd_healthy(config, run) and ready(config["api_url"], config.get("api_ca"))
    if healthy and not config.get("force"):
        raise RestoreError(f"etcd answers and the API serves on this control plane: refusing to roll the cluster back to {snapshot} "
                           f"(revision {status['revision']}); set the force option (etcd_restore_force) to restore over a healthy cluster.")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    data_dir = member["data_dir"].rstrip("/")
    restored, previous = f"{data_dir}.restore-{stamp}", f"{data_dir}.before-restore-{stamp}"
    result = {"changed": True, "snapshot": snapshot, "status": status, "member": member, "data_dir": data_dir,
              "previous_data_dir": previous if os.path.exists(data_dir) else None, "actions": actions, "cluster_was_healthy": healthy}
    manifests = sorted(name for name in os.listdir(manifest_dir) if name.endswith((".yaml", ".yml", ".json")))
    actions += [f"move {', '.join(manifests)} from {manifest_dir} to {held_dir} (kubelet stops the static pods)",
                f"etcdutl snapshot restore {snapshot} into {restored} as member {member['name']} ({member['initial_cluster']})",
                f"swap {restored} in as {data_dir}" + (f", keeping the old one as {previous}" if result["previous_data_dir"] else ""),
                f"move the manifests back to {manifest_dir} and wait for etcd and the API"]
    if check_mode:
        return result
    os.makedirs(held_dir, mode=0o700, exist_ok=True)
    for name in manifests:
        os.rename(os.path.join(manifest_dir, name), os.path.join(held_dir, name))
    try:
        if not wait_until(lambda: not ready(config["api_url"], config.get("api_ca")), config["timeout"], sleep, clock):
            raise RestoreError(f"The API still answers {config['timeout']} s after its manifest left {manifest_dir}.", "manifests back")
        rc, out, err = run([config["etcdutl"], "snapshot", "restore", snapshot, f"--data-dir={restored}", f"--name={member['name']}",
                            f"--initial-cluster={member['initial_cluster']}", f"--initial-advertise-peer-urls={member['peer_url']}"])
        if rc != 0:
            raise RestoreError(f"etcdutl snapshot restore failed (exit {rc}): {(err or out).strip()[-300:]}", "manifests back")
        if result["previous_data_dir"]:
            os.rename(data_dir, previous)
        os.rename(restored, data_dir)
    finally:
        for name in manifests:
            os.rename(os.path.join(held_dir, name), os.path.join(manifest_dir, name))
        os.rmdir(held_dir)
    if not wait_until(lambda: etcd_healthy(config, run) and ready(config["api_url"], config.get("api_ca")), config["timeout"], sleep, clock):
        raise RestoreError(f"etcd was restored from {snapshot} into {data_dir}, but etcd and the API did not answer within "
                           f"{config['timeout']} s.", "restored")
    return result
