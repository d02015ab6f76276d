#!/usr/bin/python
# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: container_runtime_facts
short_description: Read what the container_runtime role checks, in one task
version_added: 0.1.0
description:
  - Reads, each only when asked, the signing keys of package repositories, what the package sources offer
    and which packages are installed and held, containerd's merged configuration and whether the daemon answers,
    the GPUs with their MIG devices, and the CDI devices of the node.
  - It changes nothing on the host but the package lists when O(update_cache) is set.
  - The results are raw enough to be judged on the controller by the C(onprem.gpu.container_runtime_*) filters;
    the TOML of C(containerd config dump) is parsed there.
  - With O(check), it judges what it read in the same task, as the role does; V(verify) is judged by the module's
    action plugin on the controller, whose Python parses TOML (the node's may be older than 3.11).
author:
  - onprem.gpu maintainers (@onprem-gpu)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
attributes:
  action:
    support: full
    details: The action plugin judges O(check=verify) on the controller; the module reads on the node.
  async:
    support: none
  bypass_host_loop:
    support: none
  check_mode:
    support: full
    details: The module only reads (and refreshes the package lists); it runs the same way in check mode.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  repositories:
    description: Repositories whose signing key to fetch, each with its C(name) and C(key_url); other keys are ignored.
    type: list
    elements: dict
    default: []
  package_manager:
    description: How to read the packages of O(packages).
    type: str
    choices: [apt, dnf]
    default: apt
  packages:
    description:
      - Packages whose installed, candidate and offered versions to read, with the held packages of the host.
      - Each is a name, or C(name=version) (an upstream version such as C(1.18.0) matches C(1.18.0-1)), which only
        O(refresh_only_when_missing) reads; the results are keyed by name.
    type: list
    elements: str
    default: []
  update_cache:
    description: Refresh the package lists (C(apt-get update), C(dnf makecache)) before reading O(packages).
    type: bool
    default: false
  refresh_only_when_missing:
    description:
      - With O(update_cache), refresh the lists only when they do not show every package of O(packages) installed and
        offered at its version; the lists are read first, and read again after the refresh.
      - A node that has every package at its version then reads the offers from the lists it has, without a
        C(apt-get update) (about 2 s of CPU on each run of a role).
    type: bool
    default: false
  containerd:
    description: Read C(containerd config dump) and ask the daemon for its version on O(socket).
    type: bool
    default: false
  socket:
    description: containerd's socket.
    type: path
    default: /run/containerd/containerd.sock
  nvidia_smi:
    description:
      - Read the driver and the GPUs through this C(nvidia-smi), with the MIG devices of MIG-enabled GPUs (C(nvidia-smi -L)).
      - Empty reads no GPU.
    type: str
    default: ""
  cdi_spec_file:
    description: Read the CDI devices (C(nvidia-ctk cdi list)) and the driver version this specification was generated for. Empty reads no CDI.
    type: path
    default: ""
  check:
    description:
      - Judge what was read as the container_runtime role does, in this same task, and fail with one sentence per problem
        (joined by C(; )) before any change. V(preflight) judges the platform, containerd's source and the signing keys of
        O(repositories); V(offers) judges what the package sources offer for O(packages) and returns RV(plan). Needs O(settings).
      - V(verify) judges the running container runtime as the C(onprem.gpu.container_runtime_verify) filter does (containerd's
        merged configuration, read with O(containerd), runs runc and the nvidia runtime with systemd cgroups, the daemon
        answers on O(socket), O(packages) are held at the toolkit's version, the CDI devices match the GPUs). It is judged
        on the controller, by the module's action plugin, once the module has read.
      - Empty judges nothing; the C(onprem.gpu.container_runtime_*) filters judge the same way on the controller.
    type: str
    choices: ["", preflight, offers, verify]
    default: ""
  settings:
    description:
      - The role's settings that O(check) judges against (C(host), C(platform_supported), C(distribution), C(containerd_package),
        C(containerd_version), C(manager), C(nvidia), C(toolkit_version), C(toolkit_packages), the repositories' URLs, and for
        V(verify) C(nvidia_runtime_binary) and C(socket)), as the role's C(__container_runtime_settings).
    type: dict
notes:
  - Commands run with C(LC_ALL=C).
seealso:
  - module: onprem.gpu.gpu_facts
"""

EXAMPLES = r"""
- name: Read the containerd configuration, the GPUs and CDI
  onprem.gpu.container_runtime_facts:
    containerd: true
    nvidia_smi: nvidia-smi
    cdi_spec_file: /var/run/cdi/nvidia.yaml
  register: runtime

- name: Check them
  ansible.builtin.assert:
    that: problems | length == 0
    fail_msg: "{{ problems | join('; ') }}."
  vars:
    problems: "{{ runtime['container_runtime'] | onprem.gpu.container_runtime_verify(settings) }}"

- name: Read and check them in one task, as the container_runtime role verifies
  onprem.gpu.container_runtime_facts:
    containerd: true
    packages: [nvidia-container-toolkit, nvidia-container-toolkit-base, libnvidia-container-tools, libnvidia-container1]
    nvidia_smi: nvidia-smi
    cdi_spec_file: /var/run/cdi/nvidia.yaml
    check: verify
    settings: "{{ settings }}"
"""

RETURN = r"""
container_runtime:
  description: What was read; only the parts asked for.
  returned: always
  type: dict
  contains:
    keys:
      description: Per O(repositories) entry, C(name), C(url) (its C(key_url)), C(status) (HTTP status, -1 without an answer), C(content), C(msg).
      returned: when O(repositories) is set
      type: list
      elements: dict
    packages:
      description: Per known package, C(installed) and C(candidate) (V(null) when none) and C(offered) (versions the sources have, newest first).
      returned: when O(packages) is set
      type: dict
    holds:
      description: The held (APT) or version-locked (DNF) packages of the host.
      returned: when O(packages) is set
      type: list
      elements: str
    containerd:
      description: C(dump) (the output of C(containerd config dump)), C(dump_error), C(rc) and C(error) of C(ctr version) on O(socket).
      returned: when O(containerd=true)
      type: dict
    gpus:
      description:
        - C(driver_loaded), C(driver_version), C(status) and C(gpus), as M(onprem.gpu.gpu_facts) reads them;
          each GPU has C(mig_devices), the indices of its MIG devices (empty when MIG is off).
      returned: when O(nvidia_smi) is set
      type: dict
    cdi:
      description: C(devices) (the names C(nvidia-ctk cdi list) prints, empty without nvidia-ctk), C(spec_file), C(spec_driver_version).
      returned: when O(cdi_spec_file) is set
      type: dict
plan:
  description:
    - With O(check=offers), what the package sources offer, judged as the C(onprem.gpu.container_runtime_offers) filter does;
      C(problems), C(containerd) (the containerd that will run), C(install) (the package specs) and C(hold).
  returned: when O(check=offers)
  type: dict
problems:
  description: The problems O(check) found; the task failed on them.
  returned: failed, when O(check) found problems
  type: list
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.onprem.gpu.plugins.module_utils._commands import find_command
from ansible_collections.onprem.gpu.plugins.module_utils._container_runtime import (
    judgement,
    parse_apt_policy,
    parse_dnf_list,
    parse_holds,
    parse_list_gpus,
    spec_driver_version,
)
from ansible_collections.onprem.gpu.plugins.module_utils._nvsmi import (
    NvidiaSmiError,
    missing_binary_state,
    query_gpu_argv,
    read_driver_state,
)
from ansible_collections.onprem.gpu.plugins.module_utils._package_probe import fetch_key
from ansible_collections.onprem.gpu.plugins.module_utils._package_source import split_request, unsatisfied_requests

PACKAGE_COMMANDS = {
    "apt": {"update": ["apt-get", "update", "-q"], "list": ["apt-cache", "policy"], "holds": ["apt-mark", "showhold"]},
    "dnf": {"update": ["dnf", "--quiet", "makecache"], "list": ["dnf", "--quiet", "list", "--showduplicates"],
            "holds": ["dnf", "--quiet", "versionlock", "list"]},
}


def run(module, argv, allowed=(0,)):
    rc, stdout, stderr = module.run_command(argv, environ_update={"LC_ALL": "C"})
    if rc not in allowed:
        module.fail_json(msg=f"{' '.join(argv)} failed with exit code {rc}: {(stderr or stdout).strip()}", cmd=argv, rc=rc, stdout=stdout, stderr=stderr)
    return rc, stdout, stderr


def read_keys(module):
    """Each repository's key as the collection's one key fetch answers it (module_utils/_package_probe), content as text."""
    keys = []
    for repository in module.params["repositories"]:
        answer = fetch_key(module, repository)
        keys.append(dict(name=answer["name"], url=answer["url"], status=answer["status"], content=answer["content"].decode("utf-8", "replace"),
                         msg=answer["msg"]))
    return keys


def read_packages(module):
    commands = PACKAGE_COMMANDS[module.params["package_manager"]]
    requests = [split_request(request) for request in module.params["packages"]]
    names = list(dict.fromkeys(name for name, _version in requests))
    parse = parse_apt_policy if module.params["package_manager"] == "apt" else parse_dnf_list

    def read():
        # dnf list exits 1 when it knows none of the names.
        return parse(run(module, commands["list"] + names, allowed=(0, 1))[1])

    update = module.params["update_cache"]
    packages = None if update and not module.params["refresh_only_when_missing"] else read()
    if update and (packages is None or unsatisfied_requests(packages, requests)):
        run(module, commands["update"])
        packages = read()
    return packages, parse_holds(run(module, commands["holds"])[1])


def read_containerd(module):
    rc, dump, stderr = module.run_command(["containerd", "config", "dump"], environ_update={"LC_ALL": "C"})
    ctr = module.run_command(["ctr", "--address", module.params["socket"], "version"], environ_update={"LC_ALL": "C"})
    return dict(dump=dump if rc == 0 else "", dump_error="" if rc == 0 else (stderr or dump).strip(), rc=ctr[0], error=ctr[2].strip())


def read_gpus(module):
    nvidia_smi = find_command(module, module.params["nvidia_smi"])
    if nvidia_smi is None:
        state = missing_binary_state(module.params["nvidia_smi"])
    else:
        argv = query_gpu_argv(nvidia_smi)
        rc, stdout, stderr = module.run_command(argv, environ_update={"LC_ALL": "C"})
        try:
            state = read_driver_state(rc, stdout, stderr)
        except NvidiaSmiError as error:
            module.fail_json(msg=str(error), cmd=argv, rc=rc, stdout=stdout, stderr=stderr)
    mig_devices = {}
    if any(gpu["mig_mode_current"] == "Enabled" for gpu in state.gpus):
        mig_devices = parse_list_gpus(run(module, [nvidia_smi, "-L"])[1])
    gpus = [dict(gpu, mig_devices=mig_devices.get(gpu["index"], [])) for gpu in state.gpus]
    return dict(driver_loaded=state.loaded, driver_version=state.version, status=state.status, gpus=gpus)


def read_cdi(module):
    spec_file = module.params["cdi_spec_file"]
    nvidia_ctk = find_command(module, "nvidia-ctk")
    devices = run(module, [nvidia_ctk, "cdi", "list"])[1].split() if nvidia_ctk else []
    text = ""
    if os.path.isfile(spec_file):
        with open(spec_file, encoding="utf-8") as handle:
            text = handle.read()
    return dict(devices=devices, spec_file=spec_file, spec_driver_version=spec_driver_version(text))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            repositories=dict(type="list", elements="dict", default=[]),
            package_manager=dict(type="str", choices=["apt", "dnf"], default="apt"),
            packages=dict(type="list", elements="str", default=[]),
            update_cache=dict(type="bool", default=False),
            refresh_only_when_missing=dict(type="bool", default=False),
            containerd=dict(type="bool", default=False),
            socket=dict(type="path", default="/run/containerd/containerd.sock"),
            nvidia_smi=dict(type="str", default=""),
            cdi_spec_file=dict(type="path", default=""),
            check=dict(type="str", choices=["", "preflight", "offers", "verify"], default=""),
            settings=dict(type="dict"),
        ),
        required_if=[("check", "preflight", ["settings"]), ("check", "offers", ["settings"]), ("check", "verify", ["settings"])],
        supports_check_mode=True,
    )
    result = {}
    if module.params["repositories"]:
        result["keys"] = read_keys(module)
    if module.params["packages"]:
        result["packages"], result["holds"] = read_packages(module)
    if module.params["containerd"]:
        result["containerd"] = read_containerd(module)
    if module.params["nvidia_smi"]:
        result["gpus"] = read_gpus(module)
    if module.params["cdi_spec_file"]:
        result["cdi"] = read_cdi(module)
    # verify parses TOML, which the node's Python may not (tomllib is 3.11's): the action plugin judges it on the controller.
    if module.params["check"] in ("preflight", "offers"):
        problems, plan = judgement(module.params["check"], result, module.params["settings"])
        extra = {} if plan is None else {"plan": plan}
        if problems:
            module.fail_json(msg="; ".join(problems) + ".", problems=problems, container_runtime=result, **extra)
        module.exit_json(changed=False, container_runtime=result, **extra)
    module.exit_json(changed=False, container_runtime=result)


if __name__ == "__main__":
    main()
