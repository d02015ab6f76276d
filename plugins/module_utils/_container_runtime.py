# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The logic of the container_runtime role: what the package sources offer, containerd's merged configuration
in configuration version 2 (containerd 1.x) and 3 (2.x), and the CDI devices a node's GPUs must have.

Plain Python without Ansible imports. The parsers of command output run on managed nodes (Python 3.8+);
the judgements run on the controller, from the filters in plugins/filter/container_runtime.py and the
container_runtime_facts action (check=verify), or in the module where they need nothing newer (preflight, offers).
"""

from __future__ import annotations

import re

ARMORED_KEY = "-----BEGIN PGP PUBLIC KEY BLOCK-----"
# containerd 1.x (configuration version 2) has one CRI plugin; 2.x (version 3) splits it into a runtime and an images plugin.
CRI_V2 = "io.containerd.grpc.v1.cri"
CRI_RUNTIME_V3 = "io.containerd.cri.v1.runtime"
CRI_IMAGES_V3 = "io.containerd.cri.v1.images"
SUPPORTED_CONTAINERD = "1.6, 1.7 or 2.x"

_APT_HEADER = re.compile(r"^(\S+):$")
_APT_FIELD = re.compile(r"^\s+(Installed|Candidate): (\S+)$")
_APT_VERSION = re.compile(r"^\s+(?:\*\*\*\s+)?(\S+) (-?\d+)$")
_APT_SOURCE = re.compile(r"^\s+-?\d+ (\S.*)$")
_DNF_ROW = re.compile(r"^(\S+)\.[^.\s]+\s+(?:\d+:)?(\S+)\s+(\S+)$")
_HOLD_VERSION = re.compile(r"-(\d+:)?\d.*$")
_UPSTREAM_VERSION = re.compile(r"^(?:\d+:)?v?(\d+)\.(\d+)\.(\d+)")
_LIST_GPU = re.compile(r"^GPU (\d+): .* \(UUID: (GPU-[^)]+)\)$")
_LIST_MIG = re.compile(r"^\s+MIG \S+\s+Device\s+(\d+): \(UUID: (MIG-[^)]+)\)$")
_HOST_DRIVER = re.compile(r"--host-driver-version=([^\s\]\[\"',]+)")
# The names of the index strategy (0, 0:1) and all; the same devices also have UUID names.
_INDEX_NAME = re.compile(r"^nvidia\.com/gpu=(\d+(:\d+)?|all)$")


# ---------------------------------------------------------------- package sources


def parse_apt_policy(text):
    """``{name: {installed, candidate, offered}}`` from ``apt-cache policy NAME...``.

    ``offered`` lists the versions some package source has (what ``apt-cache madison`` prints), newest
    first; a version only in ``/var/lib/dpkg/status`` is installed, not offered. Unknown names are left out.
    """
    packages, current, version = {}, None, None
    for line in text.splitlines():
        header = _APT_HEADER.match(line)
        if header:
            current = packages.setdefault(header.group(1).split(":")[0], {"installed": None, "candidate": None, "offered": []})
            continue
        if current is None:
            continue
        field = _APT_FIELD.match(line)
        if field:
            current[field.group(1).lower()] = None if field.group(2) == "(none)" else field.group(2)
            continue
        row = _APT_VERSION.match(line)
        if row and not row.group(1).isdigit():
            version = row.group(1)
            continue
        source = _APT_SOURCE.match(line)
        if source and version and source.group(1) != "/var/lib/dpkg/status" and version not in current["offered"]:
            current["offered"].append(version)
    return packages


def parse_dnf_list(text):
    """``{name: {installed, candidate, offered}}`` from ``dnf --quiet list --showduplicates NAME...``.

    dnf prints ``name.arch  [epoch:]version-release  repository`` under "Installed Packages" and
    "Available Packages", oldest first; the candidate is the newest available version.
    """
    packages, section = {}, None
    for line in text.splitlines():
        if line.strip() in ("Installed Packages", "Available Packages"):
            section = line.split()[0]
            continue
        row = _DNF_ROW.match(line)
        if not row or section is None:
            continue
        package = packages.setdefault(row.group(1), {"installed": None, "candidate": None, "offered": []})
        if section == "Installed":
            package["installed"] = row.group(2)
        elif row.group(2) not in package["offered"]:
            package["offered"].insert(0, row.group(2))
            package["candidate"] = package["offered"][0]
    return packages


def parse_holds(text):
    """The package names of ``apt-mark showhold`` or ``dnf versionlock list`` (``name-[epoch:]version-release.*``)."""
    return sorted({_HOLD_VERSION.sub("", line.strip()) for line in text.splitlines() if line.strip() and not line.startswith("#")})


def upstream_version(version):
    """``(major, minor, patch)`` of a package or ``containerd --version`` version, or None."""
    match = _UPSTREAM_VERSION.match(version or "")
    return tuple(int(part) for part in match.groups()) if match else None


def matches(version, pin, release_required=False):
    """Whether a package version is the pinned upstream version (``1.18.0`` matches ``1.18.0-1``, not ``1.18.01``)."""
    text = re.sub(r"^\d+:", "", version or "")
    return text.startswith(pin + "-") or (not release_required and text == pin)


# ---------------------------------------------------------------- nvidia-smi and CDI


def parse_list_gpus(text):
    """``{gpu index: [MIG device index, ...]}`` from ``nvidia-smi -L``; a GPU without MIG devices maps to []."""
    gpus, current = {}, None
    for line in text.splitlines():
        gpu = _LIST_GPU.match(line)
        if gpu:
            current = gpus.setdefault(int(gpu.group(1)), [])
            continue
        mig = _LIST_MIG.match(line)
        if mig and current is not None:
            current.append(int(mig.group(1)))
    return gpus


def spec_driver_version(text):
    """The driver version a CDI specification was generated for (its enable-cuda-compat hook), or None."""
    match = _HOST_DRIVER.search(text or "")
    return match.group(1) if match else None


def expected_cdi_devices(gpus):
    """The CDI device names (index strategy) ``nvidia-ctk cdi generate`` writes for these GPUs, ``all`` last.

    ``gpus`` are gpu_facts records with ``mig_devices`` (MIG device indices, from ``nvidia-smi -L``). As
    the toolkit's nvml mode does (pkg/nvcdi/lib-nvml.go), a GPU in MIG mode gets no whole-GPU device but
    one ``<gpu>:<mig>`` device per MIG device; every other GPU gets ``<gpu>``.
    """
    whole = [str(gpu["index"]) for gpu in gpus if gpu.get("mig_mode_current") != "Enabled"]
    mig = [f"{gpu['index']}:{device}" for gpu in gpus if gpu.get("mig_mode_current") == "Enabled" for device in gpu.get("mig_devices", [])]
    return whole + mig + ["all"]


def cdi_problems(state, host):
    """Sentences on how the CDI devices differ from the GPUs; [] when they agree or the driver does not run."""
    gpus = state.get("gpus") or {}
    if not gpus.get("driver_loaded"):
        return []
    cdi = state.get("cdi") or {}
    expected = ["nvidia.com/gpu=" + name for name in expected_cdi_devices(gpus["gpus"])]
    listed = sorted({device for device in cdi.get("devices", []) if _INDEX_NAME.match(device)})
    problems = []
    if sorted(expected) != listed:
        whole = sum(1 for gpu in gpus["gpus"] if gpu.get("mig_mode_current") != "Enabled")
        missing = [device for device in expected if device not in listed]
        extra = [device for device in listed if device not in expected]
        problems.append(
            f"{host}: the CDI specifications name {len(listed)} device(s) where the GPUs have {len(expected)}"
            f" ({whole} whole GPU(s), {len(expected) - whole - 1} MIG device(s) and all)"
            + (f"; missing {', '.join(missing)}" if missing else "")
            + (f"; unexpected {', '.join(extra)}" if extra else "")
        )
    spec_driver = cdi.get("spec_driver_version")
    if spec_driver and gpus.get("driver_version") and spec_driver != gpus["driver_version"]:
        problems.append(
            f"{host}: the CDI specification {cdi.get('spec_file')} was generated for driver {spec_driver}, the driver runs {gpus['driver_version']}"
        )
    return problems


# ---------------------------------------------------------------- containerd


def cri_settings(config):
    """The CRI settings of a parsed ``containerd config dump``, from configuration version 2 or 3.

    Returns ``{version, runtimes: {name: {runtime_type, options}}, default_runtime, sandbox_image,
    cni_bin_dir, enable_cdi, cdi_spec_dirs}``; missing settings are None (runtimes {}).
    """
    version = config.get("version", 1)
    plugins = config.get("plugins", {})
    if version >= 3:
        runtime = plugins.get(CRI_RUNTIME_V3, {})
        sandbox = plugins.get(CRI_IMAGES_V3, {}).get("pinned_images", {}).get("sandbox")
    else:
        runtime = plugins.get(CRI_V2, {})
        sandbox = runtime.get("sandbox_image")
    containerd = runtime.get("containerd", {})
    return {
        "version": version,
        "runtimes": containerd.get("runtimes", {}),
        "default_runtime": containerd.get("default_runtime_name"),
        "sandbox_image": sandbox,
        "cni_bin_dir": runtime.get("cni", {}).get("bin_dir"),
        "enable_cdi": runtime.get("enable_cdi"),
        "cdi_spec_dirs": runtime.get("cdi_spec_dirs"),
    }


def containerd_plan(packages, settings):
    """What the containerd that will run needs: ``{version, config_version, cri_cdi}`` (version None when unknown)."""
    package = packages.get(settings["containerd_package"], {})
    version = settings.get("containerd_version") or package.get("installed") or package.get("candidate")
    numbers = upstream_version(version)
    return {
        "version": ".".join(str(number) for number in numbers) if numbers else None,
        "config_version": 3 if numbers and numbers[0] >= 2 else 2,
        # The CRI plugin reads CDI specifications itself from containerd 1.7 on; before, the nvidia runtime does.
        "cri_cdi": bool(numbers) and numbers[:2] >= (1, 7),
    }


# ---------------------------------------------------------------- judgements, one sentence per problem


def preflight_problems(state, settings):
    """Problems found before any change: the platform, containerd's source and the repositories' signing keys."""
    host = settings["host"]
    problems = []
    if not settings["platform_supported"]:
        problems.append(
            f"{host} runs {settings['distribution']}, for which the container_runtime role has no package names; it supports"
            " Debian 12, Ubuntu 22.04 and 24.04, RHEL, Rocky and AlmaLinux 9"
        )
    elif settings["containerd_repo_required"] and not settings["containerd_repo_url"]:
        problems.append(
            f"{settings['distribution_major']} ships no containerd: set container_runtime_containerd_repo_url (and its key) to the site's"
            " mirror of Docker's repository, which has containerd.io"
        )
    for key in state.get("keys", []):
        if key.get("status") == 200 and ARMORED_KEY in (key.get("content") or ""):
            continue
        if (key.get("status") or -1) > 0:
            problem = f"answered HTTP {key['status']} with no ASCII-armored signing key"
        else:
            problem = f"is unreachable ({key.get('msg') or 'no answer'})"
        problems.append(
            f"{host} cannot use the {key['name']} repository: {key['url']} {problem}; check the repository URL and key URL variables"
            " of the container_runtime role, that the mirror is up, and the network path (DNS, proxy, firewall) from this host to it"
        )
    return problems


def offer_problems(packages, settings):
    """Problems with what the package sources offer, found before any package changes."""
    host, name = settings["host"], settings["containerd_package"]
    offered = packages.get(name, {}).get("offered", [])
    pin = settings.get("containerd_version") or ""
    numbers = upstream_version(containerd_plan(packages, settings)["version"])
    problems = []
    supported = numbers is not None and (numbers[:2] in ((1, 6), (1, 7)) or numbers[0] == 2)
    if not offered or not supported or (pin and not any(matches(version, pin) for version in offered)):
        problems.append(
            f"The package sources of {host} offer {name} {', '.join(offered) or 'in no version'} where containerd"
            f" {pin or SUPPORTED_CONTAINERD} is needed: the role writes configuration version 2 for containerd 1.6 and 1.7"
            " and version 3 for 2.x. Point container_runtime_containerd_repo_url at a mirror that has it, or set"
            f" container_runtime_containerd_version to an offered {SUPPORTED_CONTAINERD} version"
        )
    if settings["nvidia"]:
        toolkit = settings["toolkit_version"]
        missing = [package for package in settings["toolkit_packages"]
                   if not any(matches(version, toolkit, release_required=True) for version in packages.get(package, {}).get("offered", []))]
        if missing:
            offers = packages.get(settings["toolkit_packages"][0], {}).get("offered", [])
            problems.append(
                f"The package sources of {host} do not offer NVIDIA Container Toolkit {toolkit}: missing {', '.join(missing)} at that"
                f" version; {settings['nvidia_repo_url']} offers {settings['toolkit_packages'][0]} {', '.join(offers) or 'in no version'}."
                " Pin an offered version (container_runtime_nvidia_toolkit_version) or publish it on the mirror"
            )
    return problems


def package_changes(packages, holds, settings):
    """``{install: [package specs], hold: [what to hold]}``: the install names with their pins, and the holds.

    ``settings['manager']`` is ``apt`` (``name=version-*`` specs; every pinned package held as ``name=version``, which
    package_source holds by name and pins at that version, changing only what differs, so that a new version moves the
    pins of packages already held) or ``dnf`` (``name-version``; the pinned packages not locked yet, locked by ``name-version``).
    """
    pinned = dict.fromkeys(settings["toolkit_packages"] if settings["nvidia"] else [], settings["toolkit_version"])
    containerd = settings["containerd_package"]
    install = [containerd + _pin(settings["manager"], settings["containerd_version"]) if settings.get("containerd_version") else containerd]
    install += [name + _pin(settings["manager"], version) for name, version in pinned.items()]
    if settings.get("containerd_version"):
        pinned[containerd] = settings["containerd_version"]
    if settings["manager"] == "apt":
        hold = [f"{name}={version}" for name, version in pinned.items()]
    else:
        hold = [f"{name}-{version}" for name, version in pinned.items() if name not in holds]
    return {"install": install, "hold": hold}


def offers_plan(state, settings):
    """What the package sources offer, judged: ``problems``, the ``containerd`` that will run, what to ``install`` and ``hold``."""
    packages = state.get("packages", {})
    return dict(problems=offer_problems(packages, settings), containerd=containerd_plan(packages, settings),
                **package_changes(packages, state.get("holds", []), settings))


def judgement(check, state, settings):
    """``(problems, plan)`` of the role's ``check`` (``preflight``, ``offers`` or ``verify``) on what container_runtime_facts read.

    ``plan`` is offers_plan's for ``offers``, else None: the module judges in the same task that reads, so that a no-op run
    pays for one task where it paid for a read and an assert. ``verify`` parses TOML: on the controller only (running_problems).
    """
    if check == "preflight":
        return preflight_problems(state, settings), None
    if check == "verify":
        return running_problems(state, settings), None
    plan = offers_plan(state, settings)
    return plan["problems"], plan


def _pin(manager, version):
    return f"={version}-*" if manager == "apt" else f"-{version}"


def verify_problems(state, settings):
    """Problems with the running container runtime: containerd, the nvidia runtime, the toolkit's pins and CDI."""
    host = settings["host"]
    containerd = state.get("containerd") or {}
    cri = cri_settings(containerd.get("config") or {})
    problems = []
    see = "see `containerd config dump` and `journalctl -u containerd`"
    if containerd.get("rc") != 0:
        problems.append(f"containerd on {host} does not answer on {settings['socket']} ({(containerd.get('error') or '').strip()}); {see}")
    if not _systemd_cgroup(cri, "runc"):
        problems.append(f"containerd on {host} does not run runc with SystemdCgroup = true; {see}")
    if settings["nvidia"]:
        binary = settings["nvidia_runtime_binary"]
        if not _systemd_cgroup(cri, "nvidia") or cri["runtimes"].get("nvidia", {}).get("options", {}).get("BinaryName") != binary:
            problems.append(f"{host}: containerd does not run the nvidia runtime ({binary}) with SystemdCgroup = true; {see}")
        packages = state.get("packages") or {}
        wrong = [name for name in settings["toolkit_packages"] if not matches(packages.get(name, {}).get("installed"), settings["toolkit_version"])]
        if wrong:
            problems.append(f"{host}: not at {settings['toolkit_version']}: {', '.join(wrong)}")
        unheld = [name for name in settings["toolkit_packages"] if name not in state.get("holds", [])]
        if unheld:
            problems.append(f"{host}: not held: {', '.join(unheld)}")
        problems += [problem + "; refresh them with `systemctl restart nvidia-cdi-refresh.service`" for problem in cdi_problems(state, host)]
    return problems


def running_problems(state, settings):
    """verify_problems on what container_runtime_facts read, with the TOML of ``containerd config dump`` (version 2 or 3)
    parsed first; a dump that fails or is no TOML is a problem too.

    tomllib is Python 3.11's, which the controller has and managed nodes may lack (Ubuntu 22.04 runs 3.10, EL 9 3.9):
    this runs on the controller, in the container_runtime_verify filter and the container_runtime_facts action.
    """
    import tomllib  # pylint: disable=import-outside-toplevel  # not at the top: the module imports this file on the node

    state = dict(state)
    containerd = dict(state.get("containerd") or {})
    problems = []
    try:
        containerd["config"] = tomllib.loads(containerd.get("dump") or "")
    except tomllib.TOMLDecodeError as error:
        problems.append(f"containerd on {settings['host']} prints a configuration that is no TOML ({error})")
    if containerd.get("dump_error"):
        problems.append(f"`containerd config dump` fails on {settings['host']}: {containerd['dump_error']}")
    state["containerd"] = containerd
    return problems + verify_problems(state, settings)


def _systemd_cgroup(cri, runtime):
    entry = cri["runtimes"].get(runtime, {})
    return entry.get("runtime_type") == "io.containerd.runc.v2" and entry.get("options", {}).get("SystemdCgroup") is True
