"""The nccl_tests role refuses an MPI user it must not take over, on this machine, before any change.

The role sets its MPI user's home and shell and authorizes the peers' keys: an existing account that it did not
make (here Debian's ``daemon``, home ``/usr/sbin``) would have its home moved, so preflight refuses it in one
sentence. ``root`` stays accepted: the role leaves its home and shell alone, and manages only its own block of
``authorized_keys``, never the keys that were there.
"""
import pathlib

import pytest

from local_play import run_role_here

ROLE = str(pathlib.Path(__file__).resolve().parents[2] / "roles" / "nccl_tests")


def run(tmp_path, **role_vars):
    result = run_role_here(tmp_path, ROLE, dict({"nccl_tests_mpi_peers": ["gpu-test"]}, **role_vars), "nccl_tests inputs")
    return result, " ".join((result.stdout + result.stderr).split())


def test_an_existing_account_the_role_did_not_make_is_refused(tmp_path):
    result, output = run(tmp_path, nccl_tests_mpi_user="daemon")
    assert result.returncode != 0, output
    assert ("nccl_tests_mpi_user daemon is an existing account on gpu-test whose home is /usr/sbin, not "
            "nccl_tests_mpi_user_home /var/lib/nccl-tests: the role would move its home and change its shell") in output
    assert "changed=0" in result.stdout


@pytest.mark.parametrize("user", ["nccl-tests\n", "../root", "a b", "x" * 33])
def test_a_user_name_that_is_not_a_plain_name_is_refused(tmp_path, user):
    result, output = run(tmp_path, nccl_tests_mpi_user=user)
    assert result.returncode != 0, output
    assert "nccl_tests_mpi_user must be a plain user name" in output


def test_a_source_checksum_with_a_trailing_newline_is_refused(tmp_path):
    # get_url would compare the digest with 'sha256:<hex>\n' and fail late, after the tarball's download.
    result, output = run(tmp_path, nccl_tests_install_method="source",
                         nccl_tests_source_url="https://example.invalid/nccl-tests.tar.gz",
                         nccl_tests_source_checksum="sha256:" + "0" * 64 + "\n")
    assert result.returncode != 0, output
    assert ("The source method needs nccl_tests_source_url and its nccl_tests_source_checksum as "
            "sha256:<64 hex digits>") in output
    assert "changed=0" in result.stdout
