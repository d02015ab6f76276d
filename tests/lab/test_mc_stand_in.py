"""The lab's MinIO client stand-in (lab/doubles/mc/mc): mc mirror and mc cp against a directory posing as S3, the alias's
endpoint and keys from MC_HOST_<alias> as the real client reads them, and mc's refusals."""
import hashlib
import json
import os
import pathlib
import subprocess
import sys

import pytest

MC = pathlib.Path(__file__).resolve().parents[2] / "lab" / "doubles" / "mc" / "mc"
KEY, SECRET = "LABACCESSKEY", "lab/secret+key-4f9c2e"
GOOD_HOST = "http://LABACCESSKEY:lab%2Fsecret%2Bkey-4f9c2e@s3.lab.invalid:9000"


@pytest.fixture
def s3(tmp_path):
    root = tmp_path / "s3"
    (root / "datasets" / "tiny" / "v1").mkdir(parents=True)
    (root / "datasets" / "tiny" / "v1" / "a.bin").write_text("a")
    (root / "etcd-snapshots").mkdir()
    config = tmp_path / "s3-stand-in.json"
    config.write_text(json.dumps({"netloc": "s3.lab.invalid:9000", "root": str(root),
                                  "credentials_sha256": hashlib.sha256(f"{KEY}:{SECRET}".encode()).hexdigest()}))
    return tmp_path


def mc(s3, *argv, host=GOOD_HOST, alias="lab"):
    environment = dict(os.environ, MC_STAND_IN_CONFIG=str(s3 / "s3-stand-in.json"), MC_STAND_IN_LOG=str(s3 / "mc.log"))
    if host:
        environment[f"MC_HOST_{alias}"] = host
    return subprocess.run([sys.executable, str(MC), *argv], env=environment, capture_output=True, text=True, check=False)


def test_mirror_and_cp_with_the_keys_from_mc_host(s3):
    assert mc(s3, "mirror", "--quiet", "--overwrite", "lab/datasets/tiny/v1", str(s3 / "out")).returncode == 0
    assert (s3 / "out" / "a.bin").read_text() == "a"
    snapshot = s3 / "etcd-snapshot-20261205T000000Z.db"
    snapshot.write_text("snapshot")
    done = mc(s3, "cp", "--quiet", str(snapshot), "lab/etcd-snapshots/dc2/etcd-snapshot-20261205T000000Z.db")
    assert done.returncode == 0 and done.stdout == f"`{snapshot}` -> `lab/etcd-snapshots/dc2/etcd-snapshot-20261205T000000Z.db`\n"
    assert (s3 / "s3" / "etcd-snapshots" / "dc2" / snapshot.name).read_text() == "snapshot"
    # Every call's arguments are logged, never its environment.
    assert SECRET not in (s3 / "mc.log").read_text() and len((s3 / "mc.log").read_text().splitlines()) == 2


@pytest.mark.parametrize("argv, host, error", [
    (["cp", "FILE", "lab/etcd-snapshots/x"], "http://LABACCESSKEY:wrong@s3.lab.invalid:9000", "mc: <ERROR> Access Denied."),
    (["cp", "FILE", "lab/etcd-snapshots/x"], "http://LABACCESSKEY:x@elsewhere:9000", "mc: <ERROR> Unable to connect to elsewhere:9000."),
    (["cp", "FILE", "lab/etcd-snapshots/x"], None, "mc: <ERROR> Unable to find alias `lab`."),
    (["cp", "FILE", "lab/no-bucket/x"], GOOD_HOST, "mc: <ERROR> Bucket `no-bucket` does not exist."),
    (["cp", "FILE", "lab/etcd-snapshots/../x"], GOOD_HOST, "this stand-in copies one file to ALIAS/BUCKET/PREFIX/NAME"),
    (["cp", "/nonexistent", "lab/etcd-snapshots/x"], GOOD_HOST, "mc: <ERROR> Unable to read from `/nonexistent`."),
    (["rm", "lab/etcd-snapshots/x"], GOOD_HOST, "this stand-in models only"),
])
def test_refusals_as_mc_prints_them(s3, argv, host, error):
    (s3 / "FILE").write_text("x")
    argv = [str(s3 / "FILE") if word == "FILE" else word for word in argv]
    done = mc(s3, *argv, host=host)
    assert done.returncode == 1 and error in done.stderr
