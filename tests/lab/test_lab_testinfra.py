"""lab/testinfra/lab_testinfra.py: testinfra reaches lab_podman hosts through the lab connection, others as before."""

import importlib
import pathlib
import sys

import pytest
from testinfra.backend import ansible as ansible_backend

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "lab" / "testinfra"))
lab_testinfra = importlib.import_module("lab_testinfra")


class Runner:
    def __init__(self, variables):
        self.variables = variables

    def get_variables(self, host):
        return dict(self.variables, inventory_hostname=host)


class Connection:
    def __init__(self):
        self.commands = []

    def exec_command(self, cmd):
        self.commands.append(cmd)
        return 3, b"out\n", b"err\n"


@pytest.fixture(name="backend")
def backend_fixture(monkeypatch):
    # The runner is a property reading the inventory: the test gives it its variables directly.
    backend_class = type("Backend", (ansible_backend.AnsibleBackend,), {"ansible_runner": None})
    backend = backend_class.__new__(backend_class)
    backend.host = "molecule-kube-cp1"
    backend.force_ansible = False
    backend._encoding = "utf-8"  # pylint: disable=protected-access
    backend.sudo, backend.sudo_user = False, None
    backend.connection = Connection()
    monkeypatch.setattr(lab_testinfra, "lab_connection", lambda container: backend.connection if container == "molecule-kube-cp1" else None)
    return backend


def test_a_lab_podman_host_runs_the_command_through_the_lab_connection(backend):
    backend.ansible_runner = Runner({"ansible_connection": "lab_podman"})
    result = ansible_backend.AnsibleBackend.run(backend, "systemctl is-active %s", "kubelet")
    assert backend.connection.commands == ["/bin/sh -c 'systemctl is-active kubelet'"]
    assert (result.rc, result.stdout, result.stderr) == (3, "out\n", "err\n")


def test_other_hosts_keep_testinfra_behaviour(backend, monkeypatch):
    backend.ansible_runner = Runner({"ansible_connection": "ssh"})
    calls = []
    monkeypatch.setattr(lab_testinfra, "ansible_run", lambda self, command, *args, **kwargs: calls.append(command) or "ansible")
    assert ansible_backend.AnsibleBackend.run(backend, "true") == "ansible"
    assert calls == ["true"] and backend.connection.commands == []
