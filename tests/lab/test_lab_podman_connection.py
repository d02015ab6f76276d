"""The lab's connection plugin (lab/plugins/connection/lab_podman.py): one podman call per task, or none (nsenter).

Each podman or nsenter command the plugin would run is recorded instead of run.
"""

import json
import os
import pathlib
import sys

import pytest
from ansible.playbook.play_context import PlayContext
from ansible.plugins.loader import connection_loader

PLUGINS = pathlib.Path(__file__).resolve().parents[2] / "lab" / "plugins" / "connection"


@pytest.fixture(name="connection")
def connection_fixture(monkeypatch, tmp_path):
    context = PlayContext()
    context.remote_addr = "onprem-gpu-lab-dc1-gpu1"
    # Through Ansible's plugin loader, as ansible.cfg's connection_plugins reaches it: its options come from its documentation.
    connection_loader.add_directory(str(PLUGINS))
    connection = connection_loader.get("lab_podman", context, None)
    # podman exec: the nsenter path has its own tests below.
    connection.set_options(direct={"remote_addr": "onprem-gpu-lab-dc1-gpu1", "nsenter": False})
    calls = []

    def podman(cmd, cmd_args=None, in_data=None, use_container_id=True):
        calls.append((cmd, cmd_args, in_data, use_container_id))
        if cmd == "mount":
            return 0, str(tmp_path).encode(), b""
        return 0, b"", b""

    monkeypatch.setattr(connection, "_podman", podman)
    connection.calls = calls
    return connection


def test_pipelining_is_on_and_a_piped_module_reaches_the_container_standard_input(connection):
    assert connection.has_pipelining and connection.get_option("pipelining") is True
    connection._connect()
    connection.exec_command("/usr/bin/python3", in_data=b"module")
    assert connection.calls == [(["exec", "--interactive"], ["/usr/bin/python3"], b"module", True)]


def test_a_command_without_input_is_one_podman_exec_and_connecting_mounts_nothing(connection):
    connection._connect()
    connection.exec_command("/bin/sh -c 'echo ~'")
    assert connection.calls == [(["exec"], ["/bin/sh", "-c", "echo ~"], None, True)]


def test_the_container_is_mounted_once_when_files_move(connection, tmp_path):
    source = tmp_path / "source"
    source.write_text("content\n", encoding="utf-8")
    (tmp_path / "etc").mkdir()
    connection.put_file(str(source), "/etc/first")
    connection.put_file(str(source), "/etc/second")
    assert [call[0] for call in connection.calls] == ["mount"]
    assert (tmp_path / "etc" / "second").read_text(encoding="utf-8") == "content\n"


CONTAINER_ID = "c5d3b96ffcf0365d3a563ec17da7d7a26638b29ba27e2d2bb3f40b55e26f2af0"
ENV = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "container=podman", "HOME=/root"]


def fake_process(proc, pid, container_id, nspid):
    directory = proc / str(pid)
    directory.mkdir(parents=True)
    (directory / "cgroup").write_text(f"9:name=systemd:/libpod_parent/libpod-{container_id}\n", encoding="utf-8")
    (directory / "status").write_text(f"Name:\tsystemd\nState:\tS (sleeping)\nNSpid:\t{nspid}\n", encoding="utf-8")


@pytest.fixture(name="entered")
def entered_fixture(monkeypatch, tmp_path):
    """A root controller next to a running container (pid 4242), with podman and nsenter recorded."""
    plugin = sys.modules[type(connection_loader.get("lab_podman", PlayContext(), None)).__module__]
    proc = tmp_path / "proc"
    fake_process(proc, 4242, CONTAINER_ID, "4242\t1")
    (proc / "self").mkdir()
    (proc / "self" / "mountinfo").write_text(
        "25 24 0:22 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755\n"
        "26 25 0:23 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
        "27 25 0:24 / /sys/fs/cgroup/systemd rw,nosuid - cgroup cgroup rw,xattr,name=systemd\n"
        "30 25 0:27 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid - cgroup cgroup rw,cpu,cpuacct\n", encoding="utf-8")
    monkeypatch.setattr(plugin, "PROC", str(proc))
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(plugin.shutil, "which", lambda name: "/usr/bin/" + name)
    context = PlayContext()
    context.remote_addr = "onprem-gpu-lab-dc1-gpu1"
    connection = connection_loader.get("lab_podman", context, None)
    connection.set_options(direct={"remote_addr": "onprem-gpu-lab-dc1-gpu1", "target_cache": str(tmp_path / "targets")})
    connection.podman_calls = []
    connection.state = {"Running": True, "Pid": 4242}

    def podman(cmd, cmd_args=None, in_data=None, use_container_id=True):
        connection.podman_calls.append(cmd)
        if cmd[0] == "inspect":
            container = {"Id": CONTAINER_ID, "State": connection.state, "Config": {"Env": ENV},
                         "EffectiveCaps": ["CAP_CHOWN", "CAP_NET_RAW"]}
            return 0, json.dumps([container]).encode(), b""
        return 0, b"", b""

    connection.nsenter_calls = []
    connection.nsenter_fails = 0

    class Popen:
        def __init__(self, argv, **kwargs):
            self.argv = argv
            self.returncode = 0

        def communicate(self, input=None):  # pylint: disable=redefined-builtin
            connection.nsenter_calls.append((self.argv, input))
            if connection.nsenter_fails:
                connection.nsenter_fails -= 1
                self.returncode = 1
                return b"", b"nsenter: cannot open /proc/4242/ns/cgroup: No such file or directory\n"
            return b"out", b""

    monkeypatch.setattr(connection, "_podman", podman)
    monkeypatch.setattr(plugin, "Popen", Popen)
    connection.proc = proc
    return connection


def test_a_task_enters_the_container_init_with_its_environment_and_capabilities_and_no_podman_call(entered):
    assert entered.exec_command("/usr/bin/python3", in_data=b"module") == (0, b"out", b"")
    argv, in_data = entered.nsenter_calls[0]
    join_cgroups = "/sys/fs/cgroup/systemd/libpod_parent/libpod-" + CONTAINER_ID + "/cgroup.procs"
    assert argv[:3] == ["/bin/sh", "-c", argv[2]] and argv[3:6] == ["lab_podman", join_cgroups, "--"]
    enter = ["nsenter", "--target", "4242", "--all", "--", "setpriv", "--bounding-set", "-all,+chown,+net_raw", "--", "env", "-i"]
    assert argv[6:] == enter + ENV + ["/usr/bin/python3"]
    assert in_data == b"module"
    # The container was inspected once; the next tasks read the cache, checked against /proc.
    entered.exec_command("/bin/sh -c 'echo ~'")
    assert entered.podman_calls == [["inspect", "--type", "container", "--format", "json"]]
    assert entered.nsenter_calls[1][0][-3:] == ["/bin/sh", "-c", "echo ~"]


def test_a_recreated_container_is_inspected_again(entered):
    entered.exec_command("true")
    # The container was removed and created again under the same name: a new init, a new pid.
    entered.state["Pid"] = 5151
    fake_process(entered.proc, 5151, CONTAINER_ID, "5151\t1")
    (entered.proc / "4242" / "cgroup").write_text("0::/user.slice\n", encoding="utf-8")
    entered.exec_command("true")
    assert len(entered.podman_calls) == 2
    argv = entered.nsenter_calls[1][0]
    assert argv[argv.index("--target") + 1] == "5151"


def test_a_process_that_is_not_the_init_of_the_container_is_never_entered(entered):
    # A service of the container with its own namespaces (PrivateTmp...) is in its cgroup but is not PID 1 there.
    fake_process(entered.proc, 4343, CONTAINER_ID, "4343\t57")
    entered.state["Pid"] = 4343
    entered.exec_command("true")
    assert entered.nsenter_calls == []
    assert entered.podman_calls[-1] == ["exec"]


def test_a_stopped_container_or_another_user_goes_through_podman_exec(entered):
    entered.state["Running"] = False
    entered.exec_command("true")
    assert entered.nsenter_calls == [] and entered.podman_calls[-1] == ["exec"]
    entered.state["Running"] = True
    entered.user = "mpi"
    entered.exec_command("true")
    assert entered.nsenter_calls == [] and entered.podman_calls[-1] == ["exec", "--user", "mpi"]


def test_files_move_through_cat_inside_the_container(entered, tmp_path):
    source = tmp_path / "source"
    source.write_bytes(b"content\n")
    entered.put_file(str(source), "/etc/first")
    argv, in_data = entered.nsenter_calls[0]
    assert argv[-5:] == ["/bin/sh", "-c", 'cat > "$1"', "put_file", "/etc/first"] and in_data == b"content\n"
    entered.fetch_file("/etc/os-release", str(tmp_path / "fetched"))
    assert entered.nsenter_calls[1][0][-2:] == ["cat", "/etc/os-release"]
    assert (tmp_path / "fetched").read_bytes() == b"out"
    assert "mount" not in entered.podman_calls


def test_the_command_joins_every_cgroup_hierarchy_of_the_container_before_entering_it(entered):
    plugin = sys.modules[type(entered).__module__]
    (entered.proc / "4242" / "cgroup").write_text(
        f"9:name=systemd:/libpod_parent/libpod-{CONTAINER_ID}\n4:cpu,cpuacct:/libpod_parent/libpod-{CONTAINER_ID}\n"
        f"0::/libpod_parent/libpod-{CONTAINER_ID}\n", encoding="utf-8")
    assert plugin.cgroup_procs_files(4242) == [
        f"/sys/fs/cgroup/{hierarchy}/libpod_parent/libpod-{CONTAINER_ID}/cgroup.procs" for hierarchy in ("systemd", "cpu,cpuacct", "unified")]
    # The shell script itself: it writes its pid into each file, then runs the rest; a refused write stops it.
    script = plugin.nsenter_argv({"pid": 1, "env": [], "caps": [], "cgroups": []}, ["true"])[2]
    import subprocess  # pylint: disable=import-outside-toplevel
    ok = subprocess.run(["/bin/sh", "-c", script, "lab_podman", str(entered.proc / "procs"), "--", "echo", "ran"],
                        capture_output=True, text=True, check=False)
    assert ok.returncode == 0 and ok.stdout == "ran\n" and (entered.proc / "procs").read_text().strip().isdigit()
    refused = subprocess.run(["/bin/sh", "-c", script, "lab_podman", str(entered.proc / "missing" / "procs"), "--", "echo", "ran"],
                             capture_output=True, text=True, check=False)
    assert refused.returncode == 125 and "ran" not in refused.stdout and "cannot join" in refused.stderr


def test_an_init_that_died_while_the_container_restarts_is_not_entered_twice(entered):
    entered.exec_command("true")
    # The container restarts: its old init is dead but not reaped yet, then a new init takes over.
    status = entered.proc / "4242" / "status"
    status.write_text(status.read_text(encoding="utf-8").replace("S (sleeping)", "Z (zombie)"), encoding="utf-8")
    entered.state["Pid"] = 5151
    fake_process(entered.proc, 5151, CONTAINER_ID, "5151\t1")
    entered.exec_command("true")
    argv = entered.nsenter_calls[-1][0]
    assert argv[argv.index("--target") + 1] == "5151"


def test_nsenter_failing_on_a_vanished_init_asks_podman_again_and_retries_once(entered):
    entered.exec_command("true")
    entered.nsenter_fails = 1
    entered.state["Pid"] = 5151
    fake_process(entered.proc, 5151, CONTAINER_ID, "5151\t1")
    # /proc still shows 4242 as the init when the plugin looks, but it is gone when nsenter opens its namespaces.
    assert entered.exec_command("true") == (0, b"out", b"")
    argv = entered.nsenter_calls[-1][0]
    assert argv[argv.index("--target") + 1] == "5151" and len(entered.podman_calls) == 2
