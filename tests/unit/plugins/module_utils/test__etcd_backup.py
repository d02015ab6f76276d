# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The scheduled snapshot round: save, verify with etcdutl's real JSON (tests/lab/fixtures/etcd-3.5.1), keep N, metrics."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ansible_collections.onprem.gpu.plugins.module_utils._etcd_backup import (
    BackupError, command, metrics, parse_status, prune, run_backup, snapshot_name, snapshot_time, verified_snapshots)

RECORDED = Path(__file__).parents[3] / "lab" / "fixtures" / "etcd-3.5.1"
STATUS_36 = '{"hash":2947614305,"revision":412,"totalKey":96,"totalSize":65536,"version":"3.6.0"}\n'
T0 = 1_780_000_000  # 2026-05-28T20:26:40Z


class FakeEtcd:
    """etcdctl and etcdutl as the round calls them: save writes the file, status prints what the real tool prints."""

    def __init__(self, save_rc=0, status_out=STATUS_36, status_rc=0):
        self.save_rc, self.status_out, self.status_rc, self.calls = save_rc, status_out, status_rc, []

    def __call__(self, argv):
        self.calls.append(argv)
        if "save" in argv:
            if self.save_rc:
                return self.save_rc, "", '{"level":"warn"}\nError: context deadline exceeded\n'
            Path(argv[-1]).write_bytes(b"snapshot")
            return 0, f"Snapshot saved at {argv[-1]}\n", ""
        return self.status_rc, self.status_out, "" if self.status_rc == 0 else "Error: invalid database\n"


def config(tmp_path, **extra):
    return {"dir": str(tmp_path / "snapshots"), "keep": 3, "endpoints": "https://127.0.0.1:2379", "cacert": "/pki/etcd/ca.crt",
            "cert": "/pki/etcd/healthcheck-client.crt", "key": "/pki/etcd/healthcheck-client.key", "etcdctl": "etcdctl",
            "etcdutl": "etcdutl", "textfile_dir": str(tmp_path / "textfile"), "interval_seconds": 3600, "cluster": "dc1", **extra}


def prom(tmp_path):
    return {line.split("{")[0]: float(line.split()[-1]) for line in (tmp_path / "textfile" / "onprem_etcd_backup.prom").read_text().splitlines()
            if not line.startswith("#")}


def test_recorded_etcdutl_status_parses_and_bad_output_is_refused():
    assert parse_status((RECORDED / "snapshot-status.json").read_text()) == {"hash": 1640047359, "revision": 3, "totalKey": 8, "totalSize": 20480}
    assert parse_status(STATUS_36)["version"] == "3.6.0"
    for text in ("Error: invalid database", '{"hash": 1}', '{"hash":1,"revision":1,"totalKey":0,"totalSize":0}', "[]"):
        with pytest.raises(BackupError):
            parse_status(text)


def test_names_sort_as_times_and_other_files_are_not_snapshots():
    import datetime
    moment = datetime.datetime.fromtimestamp(T0, tz=datetime.timezone.utc)
    assert snapshot_name(moment) == "etcd-snapshot-20260528T202640Z.db"
    assert snapshot_time("etcd-snapshot-20260528T202640Z.db") == T0
    for name in ("etcd-snapshot-20260528T202640Z.db.part", "etcd-snapshot-20260528T202640Z.db\n", "etcd-1.35.4-before-1.36.2.db"):
        assert snapshot_time(name) is None


def test_a_round_saves_verifies_keeps_n_and_exports_the_newest_time(tmp_path):
    etcd = FakeEtcd()
    for step in range(5):
        result = run_backup(config(tmp_path), etcd, clock=lambda step=step: T0 + step * 3600)
        assert result["ok"] and result["error"] is None
    kept = verified_snapshots(str(tmp_path / "snapshots"))
    assert [snapshot["time"] for snapshot in kept] == [T0 + 4 * 3600, T0 + 3 * 3600, T0 + 2 * 3600]
    assert sorted(os.listdir(tmp_path / "snapshots")) == sorted([s["name"] for s in kept] + [s["name"] + ".json" for s in kept])
    assert json.loads(Path(kept[0]["path"] + ".json").read_text())["revision"] == 412
    save = etcd.calls[0]
    assert save[:6] == ["etcdctl", "--endpoints=https://127.0.0.1:2379", "--cacert=/pki/etcd/ca.crt", "--cert=/pki/etcd/healthcheck-client.crt",
                        "--key=/pki/etcd/healthcheck-client.key", "--dial-timeout=5s"]
    assert etcd.calls[1] == ["etcdutl", "snapshot", "status", save[-1], "-w", "json"]
    values = prom(tmp_path)
    assert values["onprem_etcd_backup_last_success_timestamp_seconds"] == T0 + 4 * 3600
    assert values["onprem_etcd_backup_last_run_success"] == 1 and values["onprem_etcd_backup_snapshots"] == 3
    assert values["onprem_etcd_backup_interval_seconds"] == 3600 and values["onprem_etcd_backup_snapshot_revision"] == 412
    assert 'cluster="dc1"' in (tmp_path / "textfile" / "onprem_etcd_backup.prom").read_text()


def test_a_failed_round_keeps_the_last_success_time_and_leaves_nothing_unverified(tmp_path):
    run_backup(config(tmp_path), FakeEtcd(), clock=lambda: T0)
    failed = run_backup(config(tmp_path), FakeEtcd(save_rc=5), clock=lambda: T0 + 3600)
    assert not failed["ok"] and failed["error"] == "etcdctl snapshot save failed (exit 5): Error: context deadline exceeded"
    unverified = run_backup(config(tmp_path), FakeEtcd(status_rc=1), clock=lambda: T0 + 7200)
    assert unverified["error"].startswith("etcdutl snapshot status refused etcd-snapshot-20260528T222640Z.db (exit 1)")
    garbage = run_backup(config(tmp_path), FakeEtcd(status_out="not json"), clock=lambda: T0 + 9000)
    assert garbage["error"].startswith("etcdutl snapshot status printed no JSON")
    assert sorted(os.listdir(tmp_path / "snapshots")) == ["etcd-snapshot-20260528T202640Z.db", "etcd-snapshot-20260528T202640Z.db.json"]
    values = prom(tmp_path)
    assert values["onprem_etcd_backup_last_success_timestamp_seconds"] == T0 and values["onprem_etcd_backup_last_run_success"] == 0


def test_without_any_snapshot_the_time_is_zero_so_the_age_alerts():
    text = metrics({"interval_seconds": 60, "cluster": 'a"b'}, [], False, T0)
    assert 'onprem_etcd_backup_last_success_timestamp_seconds{cluster="a\\"b"} 0\n' in text


def test_prune_ignores_snapshots_without_status(tmp_path):
    for stamp in ("20260101T000000Z", "20260102T000000Z"):
        (tmp_path / f"etcd-snapshot-{stamp}.db").write_text("x")
    (tmp_path / "etcd-snapshot-20260102T000000Z.db.json").write_text(STATUS_36)
    assert prune(str(tmp_path), 0) == ["etcd-snapshot-20260102T000000Z.db"]
    assert os.listdir(tmp_path) == ["etcd-snapshot-20260101T000000Z.db"]


def test_the_programs_commands(tmp_path):
    assert command(["list", str(tmp_path / "none")]) == (0, "[]\n", "")
    assert command(["restore", "x"])[0] == 2
    (tmp_path / "config.json").write_text(json.dumps(config(tmp_path)))
    status, out, err = command(["save", str(tmp_path / "config.json")], run=FakeEtcd(save_rc=5))
    assert status == 1 and json.loads(out)["ok"] is False and err == "etcdctl snapshot save failed (exit 5): Error: context deadline exceeded\n"
    status, out, err = command(["save", str(tmp_path / "config.json")], run=FakeEtcd())
    assert status == 0 and err == "" and json.loads(out)["snapshot"].endswith(".db")
    listed = json.loads(command(["list", str(tmp_path / "snapshots")])[1])
    assert [entry["path"] for entry in listed] == [json.loads(out)["snapshot"]]


class FakeEtcdAndS3(FakeEtcd):
    """The same, and mc cp: a copy fails while ``s3_down`` (printing the MC_HOST value back, as mc does for a bad alias)."""

    def __init__(self, s3_down=False, **kwargs):
        super().__init__(**kwargs)
        self.s3_down, self.copies = s3_down, []

    def __call__(self, argv):
        if argv[:2] != ["mc", "cp"]:
            return super().__call__(argv)
        self.calls.append(argv)
        if self.s3_down:
            return 1, "", f"mc: <ERROR> Unable to upload to {os.environ.get('MC_HOST_etcdbackup')}: connection refused\n"
        self.copies.append((os.path.basename(argv[3]), argv[4]))
        return 0, f"`{argv[3]}` -> `{argv[4]}`\n", ""


S3 = {"s3_target": "etcdbackup/etcd-snapshots/dc1", "mc": "mc", "mc_host": "https://AKIA%2FKEY:se%2Fcret%2Bkey@s3.example.internal:9000"}


def test_each_verified_snapshot_is_copied_off_once_status_after_snapshot(tmp_path, monkeypatch):
    # Set (to nothing) through monkeypatch, so that what the round sets is undone after the test.
    monkeypatch.setenv("MC_HOST_etcdbackup", "")
    fake = FakeEtcdAndS3()
    first = run_backup(config(tmp_path, **S3), fake, clock=lambda: T0)
    assert first["ok"] and first["copy_error"] is None and first["copied"] == ["etcd-snapshot-20260528T202640Z.db"]
    assert fake.copies == [("etcd-snapshot-20260528T202640Z.db", "etcdbackup/etcd-snapshots/dc1/etcd-snapshot-20260528T202640Z.db"),
                           ("etcd-snapshot-20260528T202640Z.db.json", "etcdbackup/etcd-snapshots/dc1/etcd-snapshot-20260528T202640Z.db.json")]
    # mc finds the endpoint and keys in its environment, never on its command line.
    assert os.environ["MC_HOST_etcdbackup"] == S3["mc_host"] and all("AKIA" not in " ".join(call) for call in fake.calls)
    second = run_backup(config(tmp_path, **S3), fake, clock=lambda: T0 + 3600)
    assert second["copied"] == ["etcd-snapshot-20260528T212640Z.db"] and len(fake.copies) == 4
    values = prom(tmp_path)
    assert values["onprem_etcd_backup_last_copy_timestamp_seconds"] == T0 + 3600 and values["onprem_etcd_backup_last_copy_run_success"] == 1
    assert [entry["copied"] for entry in verified_snapshots(str(tmp_path / "snapshots"))] == [True, True]


def test_a_failed_copy_fails_the_round_masks_the_keys_and_is_tried_again(tmp_path, monkeypatch):
    # Set (to nothing) through monkeypatch, so that what the round sets is undone after the test.
    monkeypatch.setenv("MC_HOST_etcdbackup", "")
    run_backup(config(tmp_path, **S3), FakeEtcdAndS3(), clock=lambda: T0)
    down = FakeEtcdAndS3(s3_down=True)
    result = run_backup(config(tmp_path, **S3), down, clock=lambda: T0 + 3600)
    assert result["ok"] and result["snapshot"] and result["copied"] == []
    assert result["copy_error"].startswith("mc cp of etcd-snapshot-20260528T212640Z.db to etcdbackup/etcd-snapshots/dc1 failed (exit 1)")
    for secret in ("AKIA", "se%2Fcret", "se/cret", "%2Bkey"):
        assert secret not in result["copy_error"]
    values = prom(tmp_path)
    assert values["onprem_etcd_backup_last_copy_timestamp_seconds"] == T0 and values["onprem_etcd_backup_last_copy_run_success"] == 0
    (tmp_path / "config.json").write_text(json.dumps(config(tmp_path, **S3)))
    status, _out, err = command(["save", str(tmp_path / "config.json")], run=FakeEtcdAndS3(s3_down=True))
    assert status == 1 and err.startswith("mc cp of ") and "AKIA" not in err
    # Back up: the next round copies, newest first, its own snapshot and what the failed rounds could not (the program's
    # round above ran on the real clock, so its snapshot is the newest).
    again = run_backup(config(tmp_path, **S3), FakeEtcdAndS3(), clock=lambda: T0 + 7200)
    kept = [entry["name"] for entry in verified_snapshots(str(tmp_path / "snapshots"))]
    assert again["copy_error"] is None and again["copied"] == kept and "etcd-snapshot-20260528T212640Z.db" in kept
    # Pruning takes the marker with its snapshot.
    assert not any(name.endswith(".copied") and name[:-len(".copied")] not in os.listdir(tmp_path / "snapshots")
                   for name in os.listdir(tmp_path / "snapshots"))


def test_without_a_target_nothing_is_copied_and_no_copy_metric_is_written(tmp_path):
    fake = FakeEtcdAndS3()
    assert run_backup(config(tmp_path), fake, clock=lambda: T0)["copied"] == [] and fake.copies == []
    assert "onprem_etcd_backup_last_copy_timestamp_seconds" not in prom(tmp_path)
