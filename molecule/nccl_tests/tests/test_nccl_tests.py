"""What the nccl_tests role must leave: nccl-tests and OpenMPI installed as pinned, an SSH mesh for the
MPI user, and mpirun on one container running the all_reduce_perf double across both."""
import re

import pytest
import testinfra

from lab_files import assert_file_is_exactly


MPI_USER = "nccl-tests"
HOME = "/var/lib/nccl-tests"
PEERS = ("molecule-nccl-a", "molecule-nccl-b")
PINS = "/etc/apt/preferences.d/onprem-gpu-nccl_tests.pref"
# nccl_tests_package_version carries its Debian revision, so the pin is that exact version.
PINS_TEXT = ("# Written by the onprem.gpu collection (package_source): the versions this role installed and holds.\n"
             "Package: nccl-tests\nPin: version 2.19.6-1+cuda13.2\nPin-Priority: 1001\n")


@pytest.fixture()
def node(host):
    """The same container through podman exec: each command takes a fraction of a second instead of an Ansible run."""
    return testinfra.get_host(f"podman://{host.backend.get_hostname()}")


def as_mpi_user(node, command):
    return node.run(f"runuser -u {MPI_USER} -- {command}")


def test_packages_installed_from_the_mirror_and_held(node):
    package = node.package("nccl-tests")
    assert package.is_installed and package.version == "2.19.6-1+cuda13.2"
    assert node.check_output("dpkg-query --show --showformat='${db:Status-Abbrev}' nccl-tests").strip() == "hi"
    assert "http://lab-mirror.onprem-gpu.internal:8080 bookworm/main" in node.check_output("apt-cache policy nccl-tests")
    for name in ("openmpi-bin", "openssh-server", "openssh-client"):
        assert node.package(name).is_installed, name
    assert node.check_output("mpirun --version").startswith("mpirun (Open MPI) 4.1")


def test_the_package_is_pinned_at_its_version(node):
    assert_file_is_exactly(node, PINS, PINS_TEXT)
    assert " *** 2.19.6-1+cuda13.2 1001\n" in node.check_output("apt-cache policy nccl-tests")


def test_all_reduce_perf_answers(node):
    usage = node.run("all_reduce_perf -h")
    assert usage.rc == 0 and usage.stdout.startswith("USAGE: all_reduce_perf \n\t[-t,--nthreads <num threads>] \n")


def test_mpi_user_and_its_key(node):
    user = node.user(MPI_USER)
    assert user.exists and user.home == HOME and user.shell == "/bin/bash"
    private_key = node.file(f"{HOME}/.ssh/id_ed25519")
    assert private_key.user == MPI_USER and private_key.mode == 0o600
    assert node.file(f"{HOME}/.ssh").mode == 0o700
    authorized = node.file(f"{HOME}/.ssh/authorized_keys").content_string.splitlines()
    keys = [line for line in authorized if not line.startswith("#")]
    assert sorted(line.split()[2] for line in keys) == [f"{MPI_USER}@{peer}" for peer in PEERS]
    assert authorized[0] == "# BEGIN onprem.gpu nccl_tests peers" and authorized[-1] == "# END onprem.gpu nccl_tests peers"
    assert "memlock unlimited" in node.file("/etc/security/limits.d/90-nccl-tests.conf").content_string


def test_mpi_user_manager_lingers(node):
    """Its systemd manager stays up, so ssh logins (every mpirun launch) neither start nor stop one."""
    assert node.file(f"/var/lib/systemd/linger/{MPI_USER}").exists
    uid = node.check_output(f"id -u {MPI_USER}")
    assert node.service(f"user@{uid}.service").is_running
    before = node.check_output(f"systemctl show --property=ExecMainStartTimestampMonotonic user@{uid}.service")
    assert as_mpi_user(node, f"ssh -o BatchMode=yes {node.check_output('hostname')} true").rc == 0
    assert node.check_output(f"systemctl show --property=ExecMainStartTimestampMonotonic user@{uid}.service") == before


def test_peers_host_keys_are_trusted_and_sshd_runs(node):
    known = node.file("/etc/ssh/ssh_known_hosts").content_string
    block = known.split("# BEGIN onprem.gpu nccl_tests peers\n")[1].split("# END onprem.gpu nccl_tests peers")[0]
    for peer in PEERS:
        # The peer's key read from its own file, not with ssh-keyscan: under load its 5 s timeout ran out (CI).
        # The ssh logins below, with BatchMode and strict checking, prove sshd serves the key trusted here.
        host_key = testinfra.get_host(f"podman://{peer}").file("/etc/ssh/ssh_host_ed25519_key.pub").content_string
        assert f"{peer} {' '.join(host_key.split()[:2])}" in block.splitlines(), peer
    assert node.service("ssh").is_running and node.service("ssh").is_enabled
    for peer in PEERS:
        reach = as_mpi_user(node, f"ssh -o BatchMode=yes {peer} hostname")
        assert reach.rc == 0 and reach.stdout.strip() == peer, reach.stderr


def test_mpirun_runs_the_double_across_both_containers(node):
    if node.check_output("hostname") != PEERS[0]:
        pytest.skip("mpirun is started from molecule-nccl-a")
    run = as_mpi_user(
        node,
        "mpirun -np 16 -H molecule-nccl-a:8,molecule-nccl-b:8 --bind-to none -x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=INIT,NET"
        " all_reduce_perf -b 1G -e 8G -f 2 -g 1",
    )
    assert run.rc == 0, run.stdout + run.stderr
    device_lines = [line for line in run.stdout.splitlines() if line.startswith("#  Rank")]
    assert [line.split()[8] for line in device_lines] == ["molecule-nccl-a"] * 8 + ["molecule-nccl-b"] * 8
    # Every rank is a process on its own container, printing its own NCCL lines through mpirun.
    assert len(re.findall(r"^molecule-nccl-b:\d+:\d+ \[\d\] NCCL INFO Using network IB$", run.stdout, re.M)) == 8
    assert re.search(r"NCCL INFO NET/IB : Using \[0\]mlx5_0:1/RoCE .* \[7\]mlx5_7:1/RoCE \[RO\]; OOB eth0:", run.stdout)
    rows = [line.split() for line in run.stdout.splitlines() if re.match(r"^ +\d+ +\d+ ", line)]
    assert [int(row[0]) for row in rows] == [1 << 30, 2 << 30, 4 << 30, 8 << 30]
    # Two nodes with 8 x 400G RoCE: the H100 NVLink ring (370 GB/s) limits the peak busbw.
    assert 350 <= max(float(row[7]) for row in rows) <= 372
    assert "# Out of bounds values : 0 OK" in run.stdout
