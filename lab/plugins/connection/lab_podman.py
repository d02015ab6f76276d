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
        - When the controller runs as root next to its containers (the lab's case), a task's command does not go
          through C(podman exec) at all; it enters the namespaces of the container's init with C(nsenter) and
          runs with the container's environment and its capability bounding set (C(setpriv)), as C(podman exec)
          would run it. A C(podman exec) costs about 0.17 s per task and host; C(nsenter) a few milliseconds.
          The container's init, its environment and capabilities are read once with C(podman inspect) and kept
          in O(target_cache), checked against C(/proc) before each use (the process must still be the init of
          that container). The command first joins the container's cgroups, as C(podman exec) does, so the
          container's device rules and limits hold for it. One difference, which the lab accepts; it does not run
          under the container's seccomp filter.
        - Files move through the same path (C(cat) inside the container), so they land where the container sees
          them, tmpfs and bind mounts included.
        - Other users than root, or a controller that is not root, use C(podman exec).
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
      nsenter:
        description: Run commands through nsenter into the container's namespaces instead of podman exec.
        type: boolean
        default: true
        env:
          - name: LAB_PODMAN_NSENTER
        vars:
          - name: ansible_lab_podman_nsenter
      target_cache:
        description: Directory where the containers' init process, environment and capabilities are kept.
        default: /run/onprem-gpu-lab/targets
        env:
          - name: LAB_PODMAN_TARGET_CACHE
      pipelining:
        description: Pipe modules to the container's Python instead of copying them in first.
        type: boolean
        default: true
        env:
          - name: ANSIBLE_PIPELINING
        vars:
          - name: ansible_pipelining
"""

import json
import os
import shlex
import shutil
from subprocess import PIPE, Popen

from ansible.errors import AnsibleError
from ansible.module_utils.common.text.converters import to_bytes, to_native
from ansible_collections.containers.podman.plugins.connection.podman import Connection as PodmanConnection

# Where the containers' processes are looked up (a test points it elsewhere).
PROC = "/proc"


class Connection(PodmanConnection):
    """containers.podman.podman, with pipelining, nsenter instead of podman exec, and files through cat."""

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

    def _target(self):
        """The container's init as nsenter needs it ({pid, id, env, caps}), or None to use podman exec."""
        if not self.get_option("nsenter") or os.geteuid() != 0 or self.user not in (None, "", "root", "0"):
            return None
        if shutil.which("nsenter") is None:
            return None
        cache = self._cache_path()
        try:
            with open(cache, encoding="utf-8") as handle:
                target = json.load(handle)
        except (OSError, ValueError):
            target = None
        if target is None or not is_init_of(target):
            target = self._inspect()
            if target is None:
                return None
            try:
                os.makedirs(os.path.dirname(cache), mode=0o700, exist_ok=True)
                # Hosts of one task are inspected by parallel workers: each writes its own file, then renames it.
                partial = "%s.%d" % (cache, os.getpid())
                with open(partial, "w", encoding="utf-8") as handle:
                    json.dump(target, handle)
                os.replace(partial, cache)
            except OSError:
                pass
        return target

    def _cache_path(self):
        return os.path.join(self.get_option("target_cache"), self._container_id.replace("/", "_") + ".json")

    def _forget(self):
        try:
            os.unlink(self._cache_path())
        except OSError:
            pass

    def _inspect(self):
        rc, stdout, dummy = self._podman(["inspect", "--type", "container", "--format", "json"])
        if rc != 0:
            return None
        try:
            container = json.loads(stdout)[0]
        except (ValueError, IndexError, KeyError):
            return None
        state = container.get("State") or {}
        target = {
            "id": container.get("Id", ""),
            "pid": state.get("Pid") or 0,
            "env": (container.get("Config") or {}).get("Env") or [],
            "caps": container.get("EffectiveCaps") or [],
        }
        target["cgroups"] = cgroup_procs_files(target["pid"])
        if not state.get("Running") or not target["id"] or not is_init_of(target):
            return None
        return target

    def _nsenter(self, target, arguments, in_data):
        local_cmd = nsenter_argv(target, arguments)
        process = Popen(local_cmd, stdin=PIPE, stdout=PIPE, stderr=PIPE)
        stdout, stderr = process.communicate(input=in_data)
        return process.returncode, stdout, stderr

    def _run(self, arguments, in_data):
        """Run through nsenter when the container's init can be entered, else through podman exec."""
        target = self._target()
        if target is not None:
            rc, stdout, stderr = self._nsenter(target, arguments, in_data)
            # The init went away between the check and nsenter (the container restarts): ask podman again.
            if rc != 0 and stderr.startswith((b"nsenter: ", b"lab_podman: ")):
                self._forget()
                target = self._target()
                if target is not None:
                    return self._nsenter(target, arguments, in_data)
            else:
                return rc, stdout, stderr
        return None

    def exec_command(self, cmd, in_data=None, sudoable=False):
        # ConnectionBase.exec_command only logs; the parent's would run podman exec without --interactive,
        # which drops the piped module.
        arguments = shlex.split(to_native(cmd, errors="surrogate_or_strict"))
        result = self._run(arguments, in_data)
        if result is not None:
            return result
        podman_exec = ["exec"]
        if in_data is not None:
            podman_exec.append("--interactive")
        if self.user:
            podman_exec.extend(("--user", self.user))
        return self._podman(podman_exec, arguments, in_data)

    def put_file(self, in_path, out_path):
        with open(to_bytes(in_path, errors="surrogate_or_strict"), "rb") as handle:
            content = handle.read()
        result = self._run(["/bin/sh", "-c", 'cat > "$1"', "put_file", out_path], content)
        if result is None:
            self._mount()
            super().put_file(in_path, out_path)
        elif result[0] != 0:
            raise AnsibleError("failed to write %s in %s: %s" % (out_path, self._container_id, to_native(result[2]).strip()))

    def fetch_file(self, in_path, out_path):
        result = self._run(["cat", in_path], None)
        if result is None:
            self._mount()
            super().fetch_file(in_path, out_path)
            return
        if result[0] != 0:
            raise AnsibleError("failed to read %s in %s: %s" % (in_path, self._container_id, to_native(result[2]).strip()))
        with open(to_bytes(out_path, errors="surrogate_or_strict"), "wb") as handle:
            handle.write(result[1])


def is_init_of(target, proc=None):
    """Whether target's pid is still the init (PID 1 of its namespace) of the container target['id']."""
    proc = proc or PROC
    try:
        pid = int(target["pid"])
        with open("%s/%d/cgroup" % (proc, pid), encoding="utf-8") as handle:
            cgroups = handle.read()
        with open("%s/%d/status" % (proc, pid), encoding="utf-8") as handle:
            status = handle.read()
    except (OSError, KeyError, TypeError, ValueError):
        return False
    nspid = [line.split()[1:] for line in status.splitlines() if line.startswith("NSpid:")]
    # A dead init that nobody has reaped yet (a restarting container) keeps its /proc entry but no namespaces.
    state = [line.split()[1:2] for line in status.splitlines() if line.startswith("State:")]
    alive = bool(state) and state[0] not in (["Z"], ["X"])
    return (pid > 0 and alive and bool(target.get("id")) and target["id"] in cgroups
            and bool(nspid) and nspid[0][-1] == "1")


def cgroup_procs_files(pid, proc=None):
    """The cgroup.procs file of every hierarchy the process pid is in, as this host mounts them (v1 and v2)."""
    proc = proc or PROC
    mounts = []
    try:
        with open("%s/self/mountinfo" % proc, encoding="utf-8") as handle:
            for line in handle:
                fields, dummy, super_fields = line.partition(" - ")
                fields, super_fields = fields.split(), super_fields.split()
                if len(fields) >= 5 and len(super_fields) >= 3 and super_fields[0] in ("cgroup", "cgroup2") and fields[3] == "/":
                    mounts.append((super_fields[0], set(super_fields[2].split(",")), fields[4]))
        with open("%s/%d/cgroup" % (proc, int(pid)), encoding="utf-8") as handle:
            memberships = [line.rstrip("\n").split(":", 2) for line in handle if line.count(":") >= 2]
    except (OSError, ValueError):
        return []
    files = []
    for dummy, controllers, path in memberships:
        for fstype, options, mount_point in mounts:
            if (fstype == "cgroup2" and not controllers) or (fstype == "cgroup" and controllers and set(controllers.split(",")) <= options):
                files.append(mount_point.rstrip("/") + path.rstrip("/") + "/cgroup.procs")
                break
    return files


def nsenter_argv(target, arguments):
    """The command line that runs arguments in the container as podman exec would: its namespaces,
    its capability bounding set, its environment only."""
    caps = ",".join("+" + cap.lower().removeprefix("cap_") for cap in target["caps"])
    # The shell joins the container's cgroups (its pid stays the same through exec), then nsenter enters its namespaces.
    join = ('for procs do [ "$procs" = -- ] && break; echo $$ > "$procs" || { echo "lab_podman: cannot join $procs" >&2; exit 125; }; '
            'shift; done; shift; exec "$@"')
    enter = ["nsenter", "--target", str(target["pid"]), "--all", "--",
             "setpriv", "--bounding-set", "-all" + ("," + caps if caps else ""), "--",
             "env", "-i"]
    return ["/bin/sh", "-c", join, "lab_podman"] + list(target.get("cgroups", [])) + ["--"] + enter + list(target["env"]) + list(arguments)
