# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What the nvidia_driver role must do on one node: package names per platform, the kernel module
flavour, the problems that stop the role before any change, the plan, and what verification finds.

Plain Python without Ansible imports: the nvidia_driver_plan module gathers the node's state and calls
plan() and verify_problems(); everything here is unit-tested with recorded command outputs.

Sources of the package names: NVIDIA Driver Installation Guide r580 (Debian "compute-only", Red Hat
"version locking"); NVIDIA gpu-driver-container (rhel9 Dockerfile: nvidia-fabric-manager before 580,
nvidia-fabricmanager from 580; ubuntu install scripts); NVIDIA ansible-role-nvidia-driver (Ubuntu:
nvidia-headless-<branch>-server and nvidia-utils-<branch>-server).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# The repository's key and source file are those of the package_source role, which writes them: one text per repository
# whichever role writes it (the site's mirror is shared with container_runtime, kube_node, nccl_tests and rdma).
from ansible_collections.onprem.gpu.plugins.module_utils import _package_source as package_source

MANAGED_HEADER = "Managed by onprem.gpu (nvidia_driver role): local changes are overwritten."
REBOOT_MARKER = "/run/onprem-gpu/nvidia-driver-reboot-required"
REBOOT_COMMAND = "systemctl reboot"
BLACKLIST_PATH = "/etc/modprobe.d/blacklist-nouveau.conf"
PERSISTENCED_SERVICE = "nvidia-persistenced"
FABRICMANAGER_SERVICE = "nvidia-fabricmanager"
PERSISTENCED_DROPIN = "/etc/systemd/system/nvidia-persistenced.service.d/onprem-gpu-persistence-mode.conf"
FABRICMANAGER_PATTERN = r"^nvidia-fabric-?manager(-[0-9]+)?$"
FLAVORS = ("open", "proprietary")
# NVIDIA's open kernel modules: required from Grace Hopper and Blackwell on, recommended for Hopper,
# supported from Turing on ("NVIDIA transitions fully towards open-source GPU kernel modules", 2024).
OPEN_MODULE_LEVELS = ("required", "recommended", "supported", "unsupported")


@dataclass(frozen=True)
class Platform:
    """A distribution release the role has package names for."""

    name: str
    family: str
    repo_url: str
    repo_suites: tuple = ()
    repo_components: tuple = ()
    key_url: str = ""
    # nvidia-persistenced as the platform's unit starts it, with persistence mode on.
    persistenced_command: str = "/usr/bin/nvidia-persistenced --persistence-mode --verbose"


_CUDA = "https://developer.download.nvidia.com/compute/cuda/repos/"
_RHEL9 = Platform("RHEL 9", "RedHat", _CUDA + "rhel9/x86_64/", key_url=_CUDA + "rhel9/x86_64/D42D0685.pub")
PLATFORMS = {
    ("debian", "12"): Platform("Debian 12", "Debian", _CUDA + "debian12/x86_64/", ("/",), key_url=_CUDA + "debian12/x86_64/3bf863cc.pub"),
    # Ubuntu's unit runs the daemon as its own user with --no-persistence-mode: the drop-in keeps the user.
    ("ubuntu", "22"): Platform(
        "Ubuntu 22.04", "Debian", _CUDA + "ubuntu2204/x86_64/", ("/",), key_url=_CUDA + "ubuntu2204/x86_64/3bf863cc.pub",
        persistenced_command="/usr/bin/nvidia-persistenced --user nvidia-persistenced --persistence-mode --verbose",
    ),
    ("ubuntu", "24"): Platform(
        "Ubuntu 24.04", "Debian", _CUDA + "ubuntu2404/x86_64/", ("/",), key_url=_CUDA + "ubuntu2404/x86_64/3bf863cc.pub",
        persistenced_command="/usr/bin/nvidia-persistenced --user nvidia-persistenced --persistence-mode --verbose",
    ),
    ("rhel", "9"): _RHEL9,
    ("rocky", "9"): _RHEL9,
    ("almalinux", "9"): _RHEL9,
}
SUPPORTED = "Debian 12, Ubuntu 22.04 and 24.04, RHEL, Rocky and AlmaLinux 9"


def find_platform(os_id, version_id):
    """Return the Platform for /etc/os-release's ID and VERSION_ID, or None."""
    return PLATFORMS.get(((os_id or "").lower(), (version_id or "").split(".")[0]))


def driver_packages(platform, branch, flavor, nvswitch):
    """Return the packages installed and held at the pinned version: {"boot": [...], "tools": [...], "fabric": [...]}.

    ``boot`` is what needs the kernel module reloaded (user space and kernel module).
    """
    branch = str(branch)
    new_names = int(branch) >= 580
    if platform.family == "RedHat":
        boot = ["nvidia-driver-cuda", "nvidia-driver-cuda-libs", "kmod-nvidia-open-dkms" if flavor == "open" else "kmod-nvidia-latest-dkms"]
        tools = ["nvidia-modprobe", "nvidia-persistenced"]
        # RHEL: nvidia-fabric-manager before 580, nvidia-fabricmanager from 580 on (gpu-driver-container rhel9).
        fabric = ["nvidia-fabricmanager", "libnvidia-nscq"] if new_names else ["nvidia-fabric-manager", f"libnvidia-nscq-{branch}"]
    elif platform.name.startswith("Ubuntu"):
        # The headless server packages: no X11 or desktop libraries; nvidia-persistenced comes with
        # nvidia-compute-utils-<branch>-server, a dependency.
        boot = [f"nvidia-utils-{branch}-server", f"nvidia-headless-{branch}-server" + ("-open" if flavor == "open" else "")]
        tools = ["nvidia-modprobe"]
        fabric = _fabric_debian(branch, new_names)
    else:
        boot = ["nvidia-driver-cuda", "nvidia-kernel-open-dkms" if flavor == "open" else "nvidia-kernel-dkms"]
        tools = ["nvidia-modprobe", "nvidia-persistenced"]
        fabric = _fabric_debian(branch, new_names)
    return {"boot": boot, "tools": tools, "fabric": fabric if nvswitch else []}


def _fabric_debian(branch, new_names):
    # Fabric Manager and NSCQ drop the branch from their names from 580 on in NVIDIA's repositories.
    return ["nvidia-fabricmanager", "libnvidia-nscq"] if new_names else [f"nvidia-fabricmanager-{branch}", f"libnvidia-nscq-{branch}"]


def managed_pattern(platform):
    """Every package name this role installs on the platform for any branch, flavour or board."""
    if platform.family == "RedHat":
        names = r"nvidia-driver-cuda|nvidia-driver-cuda-libs|kmod-nvidia-(open|latest)-dkms|nvidia-modprobe|nvidia-persistenced"
    elif platform.name.startswith("Ubuntu"):
        # The desktop names of earlier releases of this role are retired too.
        names = r"nvidia-driver-[0-9]+(-open)?|nvidia-utils-[0-9]+(-server)?|nvidia-headless-[0-9]+-server(-open)?|nvidia-modprobe"
    else:
        names = r"nvidia-driver-cuda|nvidia-kernel(-open)?-dkms|nvidia-modprobe|nvidia-persistenced"
    return rf"^({names}|nvidia-fabric-?manager(-[0-9]+)?|libnvidia-nscq(-[0-9]+)?)$"


def kernel_headers(platform, kernel):
    if platform.family == "RedHat":
        return [f"kernel-devel-{kernel}", f"kernel-headers-{kernel}"]
    return [f"linux-headers-{kernel}"]


def kernel_module_flavor(requested, gpu_model, gpu):
    """Return (flavor, problem, warning) for the requested flavour on a GPU catalogue entry (None: unknown model).

    auto takes the open modules unless the GPU cannot run them; proprietary is refused where the open
    modules are required and warned about where NVIDIA recommends them.
    """
    gpu = gpu or {}
    level = gpu.get("open_kernel_modules", "supported")
    if requested == "auto":
        return ("proprietary" if level == "unsupported" else "open"), None, None
    architecture = gpu.get("architecture", "")
    if requested == "proprietary" and level == "required":
        return requested, (
            f"{gpu_model} ({architecture}) runs only on the open kernel modules, but nvidia_driver_kernel_module_flavor "
            "is proprietary; set it to open or auto."
        ), None
    if requested == "proprietary" and level == "recommended":
        return requested, None, (
            f"NVIDIA recommends the open kernel modules for {gpu_model} ({architecture}); the proprietary ones are installed "
            "because nvidia_driver_kernel_module_flavor is proprietary."
        )
    return requested, None, None


def input_problems(branch, version, allow_reboot, connection):
    """Problems of the role's inputs alone, each one sentence."""
    problems = []
    branch, version = str(branch), str(version)
    if not (re.fullmatch(r"[0-9]{3}", branch) and re.fullmatch(r"[0-9]{3}\.[0-9]+(\.[0-9]+)?", version) and version.split(".", maxsplit=1)[0] == branch):
        problems.append(
            f"nvidia_driver_version {version} is not a version of driver branch {branch}: set nvidia_driver_branch to the "
            "three-digit branch (e.g. 580) and nvidia_driver_version to a full version of that branch (e.g. 580.65.06)."
        )
    if allow_reboot and connection == "local":
        problems.append(
            "It is reached with connection: local, so nvidia_driver_allow_reboot=true would reboot the machine running Ansible "
            "in the middle of the play; run the role on it without nvidia_driver_allow_reboot, then reboot it yourself "
            f"({REBOOT_COMMAND}) when the role reports a pending reboot."
        )
    return problems


# ------------------------------------------------------------------ parsers of recorded command outputs


def parse_dpkg_query(text):
    """``dpkg-query -W -f '${Package}\\t${Version}\\t${db:Status-Abbrev}\\n'``: installed packages as {name: version}."""
    installed = {}
    for line in text.splitlines():
        cells = line.split("\t")
        if len(cells) == 3 and len(cells[2]) >= 2 and cells[2][1] == "i":
            installed[cells[0]] = cells[1]
    return installed


def parse_rpm_query(text):
    """``rpm -qa --qf '%{NAME}\\t%{VERSION}-%{RELEASE}\\n'``: installed packages as {name: version-release}."""
    return dict(line.split("\t", 1) for line in text.splitlines() if "\t" in line)


def parse_systemctl_show(text):
    """``systemctl show --property=Id,LoadState,ActiveState,UnitFileState UNIT...``: {unit: {property: value}}."""
    units, current = {}, {}
    for line in text.splitlines() + [""]:
        if "=" in line:
            key, value = line.split("=", 1)
            current[key] = value
        elif current:
            if "Id" in current:
                units[current["Id"]] = current
            current = {}
    return units


def secure_boot_state(mokutil_output):
    if "SecureBoot enabled" in mokutil_output:
        return "enabled"
    if "SecureBoot disabled" in mokutil_output:
        return "disabled"
    return "unknown"


# ------------------------------------------------------------------ the plan


@dataclass
class Request:
    """What the role asks for (its variables, resolved)."""

    branch: str
    version: str
    flavor: str
    nvswitch: bool
    persistenced: bool
    blacklist_nouveau: bool
    allow_reboot: bool
    repo_name: str
    repo_url: str
    repo_suites: list
    repo_components: list
    kernel_headers: list
    repo_key_url: str = ""
    repo_key_fingerprint: str = ""
    # The GPUs the inventory declares (node_gpu_count x node_gpu_model): the running driver must show them. 0 and "" check nothing.
    expected_gpu_count: int = 0
    expected_gpu_model: str = ""

    @property
    def repository(self):
        """The driver repository as the package_source role takes it."""
        return {"name": self.repo_name, "url": self.repo_url, "suites": list(self.repo_suites), "components": list(self.repo_components),
                "key_url": self.repo_key_url, "key_fingerprint": self.repo_key_fingerprint}


@dataclass
class Node:
    """What one read of the node found."""

    kernel: str
    installed: dict
    holds: list
    offers: list
    files: dict
    services: dict
    driver_loaded: bool
    driver_version: str
    gpus: list = field(default_factory=list)
    marker: str | None = None
    load_failure: str = ""
    # A reason an earlier read of this run found: after the packages change, the old driver may no longer answer.
    earlier_reason: str = ""
    secure_boot: str = "unknown"
    initramfs_tool: bool = True
    check_mode: bool = False


def pinned(version, wanted):
    """Whether a package version (Debian 580.65.06-1, RPM 580.65.06-1.el9) is of the wanted driver version."""
    return version == wanted or version.startswith(wanted + "-")


def desired_files(platform, request, repo_key):
    """Path -> (content or None for absent, mode, effect) for every file the role manages."""
    repository = request.repository
    files = {path: (content, "0644", "repository")
             for path, content in package_source.desired_files(platform.family, [repository], {repository["name"]: repo_key}, "").items()}
    blacklist = None
    if request.blacklist_nouveau:
        blacklist = (f"# {MANAGED_HEADER}\n# nouveau must never bind the GPUs: the NVIDIA module cannot load on a GPU that nouveau holds.\n"
                     "blacklist nouveau\noptions nouveau modeset=0\n")
    files[BLACKLIST_PATH] = (blacklist, "0644", "initramfs")
    dropin = None
    if request.persistenced:
        # Debian's and Ubuntu's units start the daemon with --no-persistence-mode, which leaves persistence mode off.
        dropin = f"# {MANAGED_HEADER}\n[Service]\nExecStart=\nExecStart={platform.persistenced_command}\n"
    files[PERSISTENCED_DROPIN] = (dropin, "0644", "daemon_reload")
    return files


def reboot_reason(request, node):
    """Why the pinned driver can only come up at the next boot; empty when it can be loaded now or runs."""
    if node.marker is not None:
        return node.marker.strip() or f"an earlier run installed driver {request.version} while the kernel ran another one"
    if node.earlier_reason:
        return node.earlier_reason
    if node.driver_loaded and node.driver_version and node.driver_version != request.version:
        return f"the kernel runs driver {node.driver_version}, which cannot be replaced under its clients"
    if node.load_failure:
        secure_boot = ", or Secure Boot refuses the unsigned module (enrol the DKMS key, see the README)" if node.secure_boot != "disabled" else ""
        return (f"the NVIDIA module did not load ({node.load_failure}): nouveau may still hold the GPUs until the blacklist "
                f"applies at boot{secure_boot}")
    return ""


# Where package_source pins the driver packages this role holds (APT), and the text it writes when all are held.
PINS_PATH = package_source.preferences_path("nvidia_driver")


def expected_pins(packages, version):
    """The APT preferences file package_source writes once ``packages`` are held at the driver's ``version``."""
    return package_source.role_pins_file([f"{name}={version}" for name in packages], "nvidia_driver")["text"]


def plan(platform, request, node, repo_key):
    """Return the plan: what must change on the node to hold the pinned driver, and the facts it decides."""
    packages = driver_packages(platform, request.branch, request.flavor, request.nvswitch)
    wanted = packages["boot"] + packages["tools"] + packages["fabric"]
    pattern = re.compile(managed_pattern(platform))
    remove = sorted(name for name in node.installed if pattern.match(name) and name not in wanted)
    install = [name for name in wanted if not pinned(node.installed.get(name, ""), request.version)]
    headers = [name for name in request.kernel_headers if name not in node.installed]
    files = []
    for path, (content, mode, effect) in desired_files(platform, request, repo_key).items():
        if node.files.get(path) != content:
            files.append({"path": path, "content": content, "mode": mode, "effect": effect})
    effects = sorted({entry["effect"] for entry in files})
    actions = [f"remove {', '.join(remove)}"] if remove else []
    notes = []
    # In check mode APT cannot know what a source it has not been given offers: packages are reported, not previewed.
    preview_packages = not (node.check_mode and "repository" in effects)
    if not preview_packages:
        actions.append("configure the driver repository, then install the packages it offers at " + request.version)
        install, headers = [], []
    elif install or headers:
        actions.append(f"install {', '.join(headers + install)} at {request.version}")
    packages_change = bool(remove or install or headers or not preview_packages)
    # Installing a held package at another version (--allow-change-held-packages) drops its hold: hold it again. On APT the
    # hold at the driver's version is also what pins it (package_source's preferences file): pins that differ hold again.
    pins_differ = platform.family == "Debian" and node.files.get(PINS_PATH) != expected_pins(wanted, request.version)
    holds = [name for name in wanted if name not in node.holds or name in install or pins_differ]
    if node.check_mode:
        # A package that check mode did not install cannot be held; installing it is the reported change.
        holds = [name for name in holds if name in node.installed]
    if holds:
        actions.append(f"hold {', '.join(holds)}")
    actions += [f"{'write' if entry['content'] is not None else 'remove'} {entry['path']}" for entry in files]
    if "initramfs" in effects and not node.initramfs_tool:
        effects.remove("initramfs")
        notes.append("There is no initramfs generator, so the nouveau blacklist in /etc/modprobe.d applies from the next boot as it is.")
    reason = reboot_reason(request, node)
    load_module = not node.driver_loaded and not reason and not node.check_mode
    if load_module:
        actions.append("load the NVIDIA kernel modules")
    write_marker = bool(reason) and not request.allow_reboot and node.marker is None
    reboot = bool(reason) and request.allow_reboot
    restart = PERSISTENCED_DROPIN in [entry["path"] for entry in files]
    services = [] if node.check_mode and packages_change else _service_changes(request, node, bool(reason), restart)
    actions += [f"{service['name']}: {'enable' if service['enabled'] else 'disable'}, {service['state'] or 'start at boot'}" for service in services]
    if write_marker:
        actions.append(f"record the pending reboot in {REBOOT_MARKER}")
    if reboot:
        actions.append("reboot into driver " + request.version)
    return {
        "remove": remove,
        "install": headers + install,
        "pinned": wanted,
        "hold": holds,
        "files": files,
        "effects": effects,
        "load_module": load_module,
        "reboot_reason": reason,
        "write_marker": write_marker,
        "reboot": reboot,
        "services": services,
        "retire_fabricmanager": not request.nvswitch and any(re.match(FABRICMANAGER_PATTERN, name) for name in remove),
        "actions": actions,
        "notes": notes,
        "changes": bool(actions),
        "verifiable": not (node.check_mode and packages_change),
    }


def _service_changes(request, node, reboot_pending, restart_persistenced):
    wanted = [(PERSISTENCED_SERVICE, request.persistenced)]
    if request.nvswitch:
        wanted.append((FABRICMANAGER_SERVICE, True))
    changes = []
    for name, enabled in wanted:
        unit = node.services.get(f"{name}.service", {})
        # While a reboot is pending the services are enabled, not started: they would talk to the driver the kernel still runs.
        state = None if reboot_pending else ("started" if enabled else "stopped")
        is_enabled = unit.get("UnitFileState") == "enabled"
        is_active = unit.get("ActiveState") == "active"
        if name == PERSISTENCED_SERVICE and restart_persistenced and enabled and is_active and state is not None:
            # A running daemon keeps the command line it started with: the new drop-in needs a restart.
            state = "restarted"
        if is_enabled != enabled or (state is not None and is_active != enabled) or state == "restarted" or unit.get("LoadState") != "loaded":
            changes.append({"name": name, "enabled": enabled, "state": state})
    return changes


def offer_problems(platform, request, node):
    """The mirror and the host's sources must offer the kernel headers and every pinned package, or nothing changes."""
    problems = []
    packages = driver_packages(platform, request.branch, request.flavor, request.nvswitch)
    wanted = packages["boot"] + packages["tools"] + packages["fabric"]
    offered = {name for name, _version in node.offers}
    missing_headers = [name for name in request.kernel_headers if name not in node.installed and name not in offered]
    if missing_headers:
        problems.append(
            f"It runs kernel {node.kernel}, whose headers ({', '.join(missing_headers)}) are neither installed nor offered by its "
            "package sources, so DKMS cannot build the NVIDIA module for it; add the headers to the mirror (or set "
            "nvidia_driver_kernel_headers_packages), or boot a kernel whose headers the mirror carries."
        )
    offered_pinned = {name for name, version in node.offers if version.startswith(request.version + "-")}
    missing = [name for name in wanted if name not in offered_pinned]
    if missing:
        branch_offers = [version for name, version in node.offers if name == packages["boot"][0]]
        problems.append(
            f"Its package sources do not offer driver {request.version} (branch {request.branch}): missing {', '.join(missing)} at "
            f"that version; {request.repo_url} offers {packages['boot'][0]} "
            f"{', '.join(branch_offers) if branch_offers else 'in no version'}. Pin a version the mirror publishes "
            "(nvidia_driver_branch, nvidia_driver_version) or publish that branch on the mirror."
        )
    return problems


def inventory_gpu_problems(request, node):
    """The GPUs the running driver shows against those the inventory declares (request.expected_gpu_count x _model).

    A driver that does not answer shows no GPU to judge; a count of 0 and an empty model check nothing. site.yml checked this
    in a task after the role; the role's verification now does (verify_problems), on the no-op path and after a change alike.
    """
    count, model = request.expected_gpu_count, request.expected_gpu_model
    names = [gpu.get("name", "") for gpu in node.gpus]
    if not node.driver_loaded or ((not count or len(names) == count) and (not model or all(name == model for name in names))):
        return []
    declared = f"{count} x {model}" if count and model else f"{count} GPU(s)" if count else model
    return [f"it shows {len(names)} GPU(s) ({', '.join(dict.fromkeys(names))}) where the inventory declares {declared}: "
            "check for a GPU fallen off the bus (nvidia-smi -L, dmesg) or fix the inventory"]


def verify_problems(platform, request, node):
    """What is wrong with the node as it is, once the plan is applied; empty when it holds the pinned driver as configured
    and shows the GPUs the inventory declares."""
    packages = driver_packages(platform, request.branch, request.flavor, request.nvswitch)
    wanted = packages["boot"] + packages["tools"] + packages["fabric"]
    pattern = re.compile(managed_pattern(platform))
    pending = bool(reboot_reason(request, node))
    problems = []
    wrong = [name for name in wanted if not pinned(node.installed.get(name, ""), request.version)]
    if wrong:
        problems.append(f"not at {request.version}: {', '.join(wrong)}")
    unheld = [name for name in wanted if name not in node.holds]
    if unheld:
        problems.append(f"not held: {', '.join(unheld)}")
    leftovers = sorted(name for name in node.installed if pattern.match(name) and name not in wanted)
    if leftovers:
        problems.append(f"still installed from another branch, flavour or board: {', '.join(leftovers)}")
    if pending:
        return problems + inventory_gpu_problems(request, node)
    services = ([PERSISTENCED_SERVICE] if request.persistenced else []) + ([FABRICMANAGER_SERVICE] if request.nvswitch else [])
    down = [name for name in services if node.services.get(f"{name}.service", {}).get("ActiveState") != "active"
            or node.services.get(f"{name}.service", {}).get("UnitFileState") != "enabled"]
    if down:
        problems.append(f"not running and enabled: {', '.join(down)}")
    if not node.driver_loaded or node.driver_version != request.version:
        answer = f"nvidia-smi answers with driver {node.driver_version}" if node.driver_loaded else "the driver does not answer"
        problems.append(f"driver {request.version} is installed, but {answer}; reboot the host to load the installed driver, "
                        "and check dmesg for NVRM messages if it still does not answer")
    elif request.persistenced and PERSISTENCED_SERVICE not in down:
        off = [str(gpu["index"]) for gpu in node.gpus if gpu.get("persistence_mode") != "Enabled"]
        if off:
            problems.append(f"persistence mode is off on GPU {', '.join(off)} although nvidia-persistenced runs: its unit must not "
                            f"pass --no-persistence-mode ({PERSISTENCED_DROPIN} overrides it)")
    return problems + inventory_gpu_problems(request, node)
