"""The etcd_backup role's input checks, S3 copy-off included: a local play in check mode stops at the role's preflight with
one sentence, before anything is read or changed, and never shows the S3 keys."""
import pytest

from local_play import one_line, run_role_here

KEYS = {"etcd_backup_s3_access_key": "AKIAEXAMPLE", "etcd_backup_s3_secret_key": "wJalr/XUtnFEMI+K7MDENG"}
GOOD = {"datacenter": "dc1", "etcd_backup_s3_endpoint": "https://s3.example.internal:9000", **KEYS}
COPY = "Copying the snapshots off the node needs etcd_backup_s3_endpoint as http(s)://host[:port] with etcd_backup_s3_access_key"


@pytest.mark.parametrize("overrides, message", [
    pytest.param({"etcd_backup_s3_secret_key": ""}, COPY, id="no-secret-key"),
    pytest.param({"etcd_backup_s3_endpoint": "s3.example.internal:9000"}, COPY, id="endpoint-without-scheme"),
    pytest.param({"etcd_backup_s3_endpoint": "https://s3.example.internal/bucket"}, COPY, id="endpoint-with-a-path"),
    pytest.param({"etcd_backup_s3_path": "Etcd_Snapshots/dc1"}, "etcd_backup_s3_path must be <bucket>[/<prefix>]", id="bucket-name"),
    pytest.param({"etcd_backup_s3_path": "etcd-snapshots/../other"}, "etcd_backup_s3_path must be <bucket>[/<prefix>]", id="dot-dot"),
    pytest.param({"etcd_backup_s3_path": "etcd-snapshots/dc1\n"}, "etcd_backup_s3_path must be <bucket>[/<prefix>]", id="newline"),
    pytest.param({"etcd_backup_mc_url": "https://mirror.example.internal/mc"}, "etcd_backup_mc_url must be an http(s) URL and", id="no-checksum"),
    pytest.param({"etcd_backup_interval": 30}, "etcd_backup_interval must be a whole number of seconds, at least 60", id="interval"),
])
def test_bad_settings_stop_the_role_in_one_sentence(tmp_path, overrides, message):
    result = run_role_here(tmp_path, "onprem.gpu.etcd_backup", dict(GOOD, **overrides), "etcd_backup inputs")
    output = one_line(result.stdout + result.stderr)
    assert result.returncode != 0
    assert message in output
    assert "Check the etcd backup settings" in output and "Install etcdctl" not in output
    assert KEYS["etcd_backup_s3_secret_key"] not in output and "wJalr%2F" not in output


def test_good_settings_pass_and_a_host_that_is_not_the_first_control_plane_installs_nothing(tmp_path):
    result = run_role_here(tmp_path, "onprem.gpu.etcd_backup", dict(GOOD, etcd_backup_s3_path="etcd-snapshots/dc1/daily",
                                                                    etcd_backup_mc_url="https://mirror.example.internal/mc",
                                                                    etcd_backup_mc_checksum="sha256:" + "0" * 64), "etcd_backup inputs")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "failed=0" in result.stdout and "Install etcdctl" not in result.stdout
