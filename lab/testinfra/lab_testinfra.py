"""pytest plugin for molecule's testinfra verifier: a command on a lab container goes through the lab's
connection plugin (nsenter, or one `podman exec`) instead of one Ansible run each.

Molecule hands testinfra its Ansible inventory, where the hosts use the lab's connection plugin `lab_podman`.
testinfra knows no such connection and falls back to running every command as an Ansible `shell` task, a
second or more each (10 commands: 70 s on a loaded 2-core machine; 11 s through `podman exec`). For those hosts
only, this plugin runs the command through `lab_podman` itself (lab/plugins/connection/lab_podman.py);
`host.ansible(...)` and every other host keep testinfra's behaviour.
Loaded with `-p lab_testinfra` (`.config/molecule/config.yml`).
"""

import pathlib
import shlex

from ansible.playbook.play_context import PlayContext
from ansible.plugins.loader import connection_loader
from testinfra.backend import ansible as ansible_backend

CONNECTION_PLUGINS = pathlib.Path(__file__).resolve().parents[1] / "plugins" / "connection"
ansible_run = ansible_backend.AnsibleBackend.run
connections = {}


def lab_connection(container):
    if container not in connections:
        connection_loader.add_directory(str(CONNECTION_PLUGINS))
        context = PlayContext()
        context.remote_addr = container
        connection = connection_loader.get("lab_podman", context, None)
        connection.set_options(direct={"remote_addr": container})
        connections[container] = connection
    return connections[container]


def run_through_lab_connection(self, command, *args, **kwargs):
    variables = self.ansible_runner.get_variables(self.host)
    if variables.get("ansible_connection") != "lab_podman":
        return ansible_run(self, command, *args, **kwargs)
    cmd = self.get_command(command, *args)
    connection = lab_connection(variables.get("ansible_host") or self.host)
    rc, stdout, stderr = connection.exec_command(shlex.join(["/bin/sh", "-c", cmd]))
    return self.result(rc, self.encode(cmd), stdout, stderr)


ansible_backend.AnsibleBackend.run = run_through_lab_connection
