#!/usr/bin/python
# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nvidia_driver_plan
short_description: Read a node and plan what the nvidia_driver role must change to hold a pinned NVIDIA driver
version_added: 0.1.0
description:
  - Reads in one step what the nvidia_driver role decides on, without changing the node
    (apart from refreshing APT's lists of the host's own sources when the kernel headers are not installed).
    It fetches the driver repository's signing key, reads what the repository offers through a private APT
    configuration or a DNF C(--repofrompath), and reads the installed packages, holds, managed files, services,
    the running driver (through C(nvidia-smi)), the Secure Boot state and the reboot marker.
  - Returns RV(problems) (the sentences that must stop the role before any change), RV(plan) (what must change,
    predicted in check mode) and RV(verify_problems) (what is wrong with the node as it is).
  - It is the internal planner of the C(onprem.gpu.nvidia_driver) role; its options are the role's variables.
author:
  - onprem.gpu maintainers (@onprem-gpu)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.facts
attributes:
  check_mode:
    support: full
    details: The module only reads; in check mode the plan says what would change and verification waits for real changes.
  diff_mode:
    support: none
  facts:
    support: full
  platform:
    platforms: posix
options:
  branch:
    description: Driver branch, three digits.
    type: str
    required: true
  version:
    description: Exact driver version of O(branch).
    type: str
    required: true
  kernel_module_flavor:
    description: V(auto), V(open) or V(proprietary).
    type: str
    choices: [auto, open, proprietary]
    default: auto
  gpu_model:
    description: The GPU model as C(nvidia-smi) names it.
    type: str
    default: ""
  nvswitch:
    description: Whether the board has NVSwitches (Fabric Manager and NSCQ).
    type: bool
    default: false
  persistenced:
    description: Whether nvidia-persistenced runs, with persistence mode on.
    type: bool
    default: true
  blacklist_nouveau:
    description: Whether nouveau is blacklisted.
    type: bool
    default: true
  allow_reboot:
    description: Whether the plan may reboot the node.
    type: bool
    default: false
  connection:
    description: The connection plugin that reaches the node; V(local) refuses O(allow_reboot).
    type: str
    default: ssh
  repo_name:
    description: Name of the repository source and keyring.
    type: str
    default: nvidia-cuda
  repo_url:
    description: The driver repository; empty takes NVIDIA's for the platform.
    type: str
    default: ""
  repo_suites:
    description: APT suites; empty takes the platform's.
    type: list
    elements: str
    default: []
  repo_components:
    description: APT components; empty takes the platform's.
    type: list
    elements: str
    default: []
  repo_key_url:
    description:
      - URL of the repository's ASCII-armored signing key; empty takes NVIDIA's for the platform.
      - An C(http://) URL needs O(repo_key_fingerprint); any other scheme than C(https://) and C(http://) is refused.
    type: str
    default: ""
  repo_key_fingerprint:
    description:
      - The full OpenPGP fingerprint (40 hexadecimal digits) the signing key must have; the key is used only when it is that
        key and no other. Required with an C(http://) O(repo_key_url).
    type: str
    default: ""
  kernel_headers_packages:
    description: Kernel headers packages for the running kernel; empty takes the platform's.
    type: list
    elements: str
    default: []
  nvidia_smi:
    description: The C(nvidia-smi) the driver is read through.
    type: str
    default: nvidia-smi
  load_failure:
    description: How loading the kernel module failed in this run (for example V(nvidia-modprobe exited 1)); empty when it did not fail.
    type: str
    default: ""
  reboot_reason:
    description:
      - Why an earlier read of this run found that the pinned driver can only come up at boot (its RV(plan.reboot_reason)).
      - After the packages change, a driver that ran before may no longer answer (a version mismatch), so the reason is carried.
    type: str
    default: ""
  expected_gpu_count:
    description:
      - The GPUs the inventory declares for the node; where the driver answers and shows another number, RV(verify_problems)
        says so. V(0) checks no count.
    type: int
    default: 0
  expected_gpu_model:
    description:
      - The GPU model the inventory declares, as C(nvidia-smi) names it; where the driver answers and shows a GPU of another
        model, RV(verify_problems) says so. Empty checks no model.
    type: str
    default: ""
seealso:
  - module: onprem.gpu.gpu_facts
"""

EXAMPLES = r"""
- name: Read the node and plan the driver
  onprem.gpu.nvidia_driver_plan:
    branch: "580"
    version: 580.65.06
    gpu_model: NVIDIA H100 80GB HBM3
    nvswitch: true
    expected_gpu_count: 8
    expected_gpu_model: NVIDIA H100 80GB HBM3
  register: driver_plan

- name: Stop on any problem
  ansible.builtin.assert:
    that: driver_plan.problems | length == 0
    fail_msg: "{{ driver_plan.problems | join(' ') }}"
"""

RETURN = r"""
problems:
  description: Sentences that stop the role before any change (inputs, platform, mirror, kernel headers).
  returned: always
  type: list
  elements: str
plan:
  description: What must change; empty lists and false flags when nothing must.
  returned: when the inputs, the platform and the driver repository could be read
  type: dict
  contains:
    remove: {description: "Packages of another branch, flavour or board to remove.", type: list, elements: str, returned: success}
    install: {description: Packages to install at the pinned version (kernel headers first)., type: list, elements: str, returned: success}
    pinned: {description: Every driver package held at the pinned version., type: list, elements: str, returned: success}
    hold: {description: Packages to hold., type: list, elements: str, returned: success}
    files: {description: "Files to write (C(content)) or remove (C(content=null)), each with C(path), C(mode), C(effect).",
            type: list, elements: dict, returned: success}
    effects: {description: "What the changed files need: C(repository), C(initramfs), C(daemon_reload).", type: list, elements: str, returned: success}
    load_module: {description: Whether the NVIDIA kernel modules are to be loaded now., type: bool, returned: success}
    reboot_reason: {description: Why the pinned driver can only come up at the next boot; empty when not., type: str, returned: success}
    write_marker: {description: Whether the pending reboot is to be recorded., type: bool, returned: success}
    reboot: {description: Whether to reboot now., type: bool, returned: success}
    services: {description: "Services to change: C(name), C(enabled), C(state) (null: at boot).", type: list, elements: dict, returned: success}
    retire_fabricmanager: {description: Whether Fabric Manager is to be stopped before its package goes., type: bool, returned: success}
    actions: {description: The changes in words., type: list, elements: str, returned: success}
    notes: {description: Things the operator should know., type: list, elements: str, returned: success}
    changes: {description: Whether anything must change., type: bool, returned: success}
    verifiable: {description: "False in check mode when packages would change, so that there is nothing to verify yet.", type: bool, returned: success}
verify_problems:
  description:
    - What is wrong with the node as it is now; empty when it holds the pinned driver as configured and, where the driver answers,
      shows the GPUs of O(expected_gpu_count) and O(expected_gpu_model).
    - When RV(plan.verifiable) is false, only the GPUs are judged (they are what the node shows now, in check mode too).
  returned: when the inputs, the platform and the driver repository could be read
  type: list
  elements: str
repository:
  description: The driver repository resolved (C(name), C(url), C(suites), C(components), C(key_url), C(key_fingerprint)), as the package_source role writes it.
  returned: when the inputs, the platform and the driver repository could be read
  type: dict
offers:
  description:
    - What the driver repository offers of the driver's packages (those of every branch and board, Fabric Manager included),
      as C([name, version]) pairs; the upgrade (the role's C(upgrade) entry point) judges Fabric Manager's versions from it.
  returned: when the inputs, the platform and the driver repository could be read
  type: list
  elements: list
family:
  description: The OS family whose package tools the role uses, V(Debian) or V(RedHat).
  returned: when the inputs, the platform and the driver repository could be read
  type: str
initramfs_command:
  description: The argv that regenerates the initramfs on this platform.
  returned: when the inputs, the platform and the driver repository could be read
  type: list
  elements: str
ansible_facts:
  description: The driver facts of M(onprem.gpu.gpu_facts), and the reboot and Secure Boot state.
  returned: always
  type: dict
  contains:
    nvidia_driver_reboot_pending: {description: Whether the pinned driver waits for a reboot., type: bool, returned: always}
    nvidia_driver_secure_boot: {description: "V(enabled), V(disabled) or V(unknown).", type: str, returned: always}
    nvidia_driver_loaded: {description: As M(onprem.gpu.gpu_facts)., type: bool, returned: always}
    nvidia_driver_version: {description: As M(onprem.gpu.gpu_facts)., type: str, returned: always}
    nvidia_driver_status: {description: As M(onprem.gpu.gpu_facts)., type: str, returned: always}
    nvidia_gpus: {description: As M(onprem.gpu.gpu_facts)., type: list, elements: dict, returned: always}
"""

import os
import pwd
import re

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import fetch_url

from ansible_collections.onprem.gpu.plugins.module_utils import _nvidia_driver as driver
from ansible_collections.onprem.gpu.plugins.module_utils import _package_source as package_source
from ansible_collections.onprem.gpu.plugins.module_utils._os_release import read_os_release
from ansible_collections.onprem.gpu.plugins.module_utils._commands import find_command
from ansible_collections.onprem.gpu.plugins.module_utils._gpu_models import model_info
from ansible_collections.onprem.gpu.plugins.module_utils._nvsmi import NvidiaSmiError, missing_binary_state, query_gpu_argv, read_driver_state

KEY_HEADER = "-----BEGIN PGP PUBLIC KEY BLOCK-----"
C_LOCALE = {"LC_ALL": "C"}


def run(module, argv, ok=(0,)):
    rc, stdout, stderr = module.run_command(argv, environ_update=C_LOCALE)
    if rc not in ok:
        module.fail_json(msg=f"{argv[0]} exited with code {rc}: {(stderr or stdout).strip()}", cmd=argv, rc=rc, stdout=stdout, stderr=stderr)
    return rc, stdout, stderr


def fetch_key(module, repository):
    """The repository's key (text) and None, or None and the sentence why it cannot be used; the key's URL and fingerprint are
    judged as package_source judges them, before the key is fetched and before it is used."""
    url = repository["key_url"]
    refusal = package_source.key_url_problem(repository)
    if refusal:
        return None, refusal.replace("the role's *_repo_key_fingerprint", "nvidia_driver_repo_key_fingerprint", 1)
    response, info = fetch_url(module, url, timeout=30)
    status = info.get("status", -1)
    content = response.read().decode("utf-8", "replace") if response is not None else ""
    if status == 200 and KEY_HEADER in content:
        mismatch = package_source.key_pin_problem(repository, content)
        return (None, mismatch) if mismatch else (content, None)
    if status > 0:
        problem = f"answered HTTP {status} with no ASCII-armored signing key"
    else:
        problem = f"is unreachable ({info.get('msg', 'no answer')})"
    return None, (
        f"It cannot use the driver repository: {url} {problem}; check nvidia_driver_repo_url and nvidia_driver_repo_key_url, "
        "that the mirror is up, and the network path (DNS, proxy, firewall) from this host to it."
    )


def read_offers(module, platform, request, key, names, installed):
    """What the driver repository offers (package_source's one check), and the host's sources of missing kernel headers."""
    missing_headers = [name for name in request.kernel_headers if name not in installed]

    def run_c(argv):
        return module.run_command(argv, environ_update=C_LOCALE)

    try:
        apt_uid = pwd.getpwnam("_apt").pw_uid if platform.family == "Debian" else None
    except KeyError:
        apt_uid = None
    asked = names + ([] if platform.family == "RedHat" else request.kernel_headers)
    offers, problem = package_source.repository_offers(run_c, platform.family, [request.repository], {request.repo_name: key}, "", asked, apt_uid)
    if problem:
        problem = problem.replace("APT cannot read ", "APT cannot read the driver repository ", 1)
        return None, (f"{problem}; check nvidia_driver_repo_url, _suites, _components and that nvidia_driver_repo_key_url is the key that signs it.")
    if missing_headers:
        if platform.family == "RedHat":
            offers += package_source.parse_dnf_list(run(module, ["dnf", "--quiet", "list", "--showduplicates", "--available"] + missing_headers,
                                                        ok=(0, 1))[1])
        else:
            # Reading what the host's sources offer changes no configuration; a source that fails only means fewer offers.
            module.run_command(["apt-get", "-q", "update"], environ_update=C_LOCALE)
            offers += package_source.parse_madison(run(module, ["apt-cache", "madison"] + missing_headers)[1])
    return offers, problem


def read_installed(module, platform):
    if platform.family == "RedHat":
        return driver.parse_rpm_query(run(module, ["rpm", "-qa", "--qf", "%{NAME}\t%{VERSION}-%{RELEASE}\n"])[1])
    return driver.parse_dpkg_query(run(module, ["dpkg-query", "-W", "-f", "${Package}\t${Version}\t${db:Status-Abbrev}\n"], ok=(0, 1))[1])


def read_holds(module, platform):
    if platform.family == "RedHat":
        rc, stdout, _stderr = module.run_command(["dnf", "--quiet", "versionlock", "list"], environ_update=C_LOCALE)
        return package_source.parse_holds(stdout if rc == 0 else "", "RedHat")
    return package_source.parse_holds(run(module, ["apt-mark", "showhold"])[1], "Debian")


def read_file(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def read_driver(module, nvidia_smi):
    binary = find_command(module, nvidia_smi)
    if binary is None:
        return missing_binary_state(nvidia_smi)
    argv = query_gpu_argv(binary)
    rc, stdout, stderr = module.run_command(argv, environ_update=C_LOCALE)
    try:
        return read_driver_state(rc, stdout, stderr)
    except NvidiaSmiError as error:
        module.fail_json(msg=str(error), cmd=argv, rc=rc, stdout=stdout, stderr=stderr)


def read_secure_boot(module):
    if not os.path.exists("/usr/bin/mokutil"):
        return "unknown", "mokutil is not installed"
    _rc, stdout, stderr = module.run_command(["/usr/bin/mokutil", "--sb-state"], environ_update=C_LOCALE)
    return driver.secure_boot_state(stdout), (stdout + stderr).strip()


def main():
    module = AnsibleModule(
        argument_spec=dict(
            branch=dict(type="str", required=True),
            version=dict(type="str", required=True),
            kernel_module_flavor=dict(type="str", default="auto", choices=["auto", "open", "proprietary"]),
            gpu_model=dict(type="str", default=""),
            nvswitch=dict(type="bool", default=False),
            persistenced=dict(type="bool", default=True),
            blacklist_nouveau=dict(type="bool", default=True),
            allow_reboot=dict(type="bool", default=False),
            connection=dict(type="str", default="ssh"),
            repo_name=dict(type="str", default="nvidia-cuda"),
            repo_url=dict(type="str", default=""),
            repo_suites=dict(type="list", elements="str", default=[]),
            repo_components=dict(type="list", elements="str", default=[]),
            repo_key_url=dict(type="str", default="", no_log=False),
            repo_key_fingerprint=dict(type="str", default="", no_log=False),
            kernel_headers_packages=dict(type="list", elements="str", default=[]),
            nvidia_smi=dict(type="str", default="nvidia-smi"),
            load_failure=dict(type="str", default=""),
            reboot_reason=dict(type="str", default=""),
            expected_gpu_count=dict(type="int", default=0),
            expected_gpu_model=dict(type="str", default=""),
        ),
        supports_check_mode=True,
    )
    params = module.params
    facts = {"nvidia_driver_reboot_pending": False, "nvidia_driver_secure_boot": "unknown", "nvidia_driver_loaded": False,
             "nvidia_driver_version": None, "nvidia_driver_status": "", "nvidia_gpus": []}
    release = read_os_release()
    platform = driver.find_platform(release.get("ID"), release.get("VERSION_ID"))
    problems = driver.input_problems(params["branch"], params["version"], params["allow_reboot"], params["connection"])
    flavor, flavor_problem, flavor_warning = driver.kernel_module_flavor(params["kernel_module_flavor"], params["gpu_model"], model_info(params["gpu_model"]))
    problems += [flavor_problem] if flavor_problem else []
    if platform is None:
        problems.append(f"It runs {release.get('NAME', 'an unknown system')} {release.get('VERSION_ID', '')}, for which the nvidia_driver role "
                        f"has no package names; it supports {driver.SUPPORTED}.")
    if problems:
        module.exit_json(changed=False, problems=problems, ansible_facts=facts)
    if flavor_warning:
        module.warn(flavor_warning)
    kernel = os.uname().release
    request = driver.Request(
        branch=params["branch"], version=params["version"], flavor=flavor, nvswitch=params["nvswitch"], persistenced=params["persistenced"],
        blacklist_nouveau=params["blacklist_nouveau"], allow_reboot=params["allow_reboot"], repo_name=params["repo_name"],
        repo_url=params["repo_url"] or platform.repo_url, repo_suites=params["repo_suites"] or list(platform.repo_suites),
        repo_components=params["repo_components"] or list(platform.repo_components),
        kernel_headers=params["kernel_headers_packages"] or driver.kernel_headers(platform, kernel),
        repo_key_url=params["repo_key_url"] or platform.key_url, repo_key_fingerprint=params["repo_key_fingerprint"],
        expected_gpu_count=params["expected_gpu_count"], expected_gpu_model=params["expected_gpu_model"],
    )
    key, problem = fetch_key(module, request.repository)
    if problem:
        module.exit_json(changed=False, problems=[problem], ansible_facts=facts)
    installed = read_installed(module, platform)
    packages = driver.driver_packages(platform, request.branch, request.flavor, request.nvswitch)
    offers, problem = read_offers(module, platform, request, key, packages["boot"] + packages["tools"] + packages["fabric"], installed)
    if problem:
        module.exit_json(changed=False, problems=[problem], ansible_facts=facts)
    state = read_driver(module, params["nvidia_smi"])
    secure_boot, secure_boot_output = read_secure_boot(module)
    files = {path: read_file(path) for path in list(driver.desired_files(platform, request, key)) + [driver.PINS_PATH]}
    units = [f"{driver.PERSISTENCED_SERVICE}.service", f"{driver.FABRICMANAGER_SERVICE}.service"]
    services = driver.parse_systemctl_show(run(module, ["systemctl", "show", "--property=Id,LoadState,ActiveState,UnitFileState"] + units)[1])
    node = driver.Node(
        kernel=kernel, installed=installed, holds=read_holds(module, platform), offers=offers, files=files, services=services,
        driver_loaded=state.loaded, driver_version=state.version, gpus=state.gpus, marker=read_file(driver.REBOOT_MARKER),
        load_failure=params["load_failure"], earlier_reason=params["reboot_reason"], secure_boot=secure_boot,
        initramfs_tool=os.path.exists("/usr/bin/dracut" if platform.family == "RedHat" else "/usr/sbin/update-initramfs"),
        check_mode=module.check_mode,
    )
    problems = driver.offer_problems(platform, request, node)
    plan = driver.plan(platform, request, node, key)
    if secure_boot == "enabled":
        plan["notes"].append("Secure Boot is enabled: the DKMS-built NVIDIA module loads only if it is signed with a Machine Owner Key "
                             "enrolled in the firmware (see the nvidia_driver README, Secure Boot).")
    elif secure_boot == "unknown":
        plan["notes"].append(f"The Secure Boot state is unknown ({secure_boot_output}).")
    facts.update(
        nvidia_driver_reboot_pending=bool(plan["reboot_reason"]), nvidia_driver_secure_boot=secure_boot, nvidia_driver_loaded=state.loaded,
        nvidia_driver_version=state.version, nvidia_driver_status=state.status, nvidia_gpus=state.gpus,
    )
    # The GPUs shown are judged in check mode too, where the packages to verify would only change: they are there already.
    verify = driver.verify_problems(platform, request, node) if plan["verifiable"] else driver.inventory_gpu_problems(request, node)
    managed = re.compile(driver.managed_pattern(platform))
    module.exit_json(changed=False, problems=problems, plan=plan, verify_problems=verify, family=platform.family, repository=request.repository,
                     offers=[[name, version] for name, version in offers if managed.match(name)],
                     initramfs_command=["/usr/bin/dracut", "--force", "--regenerate-all"] if platform.family == "RedHat"
                     else ["/usr/sbin/update-initramfs", "-u", "-k", "all"],
                     ansible_facts=facts)


if __name__ == "__main__":
    main()
