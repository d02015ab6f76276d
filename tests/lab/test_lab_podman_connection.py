"""The lab's connection plugin (lab/plugins/connection/lab_podman.py): one podman call per task.

Each podman command the plugin would run is recorded instead of run.
"""

import pathlib

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
    connection.set_options(direct={"remote_addr": "onprem-gpu-lab-dc1-gpu1"})
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
