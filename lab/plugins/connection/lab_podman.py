# Connection plugin of the lab: containers.podman.podman with pipelining, as on SSH.
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = """
    name: lab_podman
    short_description: Run tasks in the lab's podman containers with pipelining
    description:
        - The lab's nodes are podman containers. C(containers.podman.podman) runs every task in three podman
          calls (mount the container, make a temporary directory, run the module file) because it cannot
          pipe a module to the container's Python. This plugin runs C(podman exec --interactive) and
          pipes the module through its standard input, as the SSH connection does with pipelining on
          real servers, so a task is one podman call.
        - Files (C(copy), C(template)) still go through the container's mounted filesystem, mounted on
          first use.
        - Only for the lab and molecule; real servers are reached over SSH.
    author: onprem.gpu maintainers (@onprem-gpu)
    options:
      remote_addr:
        description: The name or ID of the container.
        default: inventory_hostname
        vars:
          - name: ansible_host
          - name: inventory_hostname
          - name: ansible_podman_host
      remote_user:
        description: User (name or UID) the commands run as inside the container.
        ini:
          - section: defaults
            key: remote_user
        env:
          - name: ANSIBLE_REMOTE_USER
        vars:
          - name: ansible_user
      podman_extra_args:
        description: Extra arguments to pass to the podman command line.
        default: ''
        ini:
          - section: defaults
            key: podman_extra_args
        vars:
          - name: ansible_podman_extra_args
        env:
          - name: ANSIBLE_PODMAN_EXTRA_ARGS
      podman_executable:
        description: Executable for the podman command.
        default: podman
        vars:
          - name: ansible_podman_executable
        env:
          - name: ANSIBLE_PODMAN_EXECUTABLE
      pipelining:
        description: Pipe modules to the container's Python instead of copying them in first.
        type: boolean
        default: true
        env:
          - name: ANSIBLE_PIPELINING
        vars:
          - name: ansible_pipelining
"""

import shlex

from ansible.module_utils.common.text.converters import to_native
from ansible_collections.containers.podman.plugins.connection.podman import Connection as PodmanConnection


class Connection(PodmanConnection):
    """containers.podman.podman, with pipelining and the container mounted only when a file moves."""

    transport = "lab_podman"
    has_pipelining = True

    def _connect(self):
        # No `podman mount` for every task: most tasks move no file.
        self._connected = True
        return self

    def _mount(self):
        # The parent mounts on connect and falls back to `podman cp` when it cannot; try once.
        if not getattr(self, "_mount_tried", False):
            self._mount_tried = True
            PodmanConnection._connect(self)

    def exec_command(self, cmd, in_data=None, sudoable=False):
        # ConnectionBase.exec_command only logs; the parent's would run podman exec without --interactive,
        # which drops the piped module.
        arguments = shlex.split(to_native(cmd, errors="surrogate_or_strict"))
        podman_exec = ["exec"]
        if in_data is not None:
            podman_exec.append("--interactive")
        if self.user:
            podman_exec.extend(("--user", self.user))
        return self._podman(podman_exec, arguments, in_data)

    def put_file(self, in_path, out_path):
        self._mount()
        super().put_file(in_path, out_path)

    def fetch_file(self, in_path, out_path):
        self._mount()
        super().fetch_file(in_path, out_path)
