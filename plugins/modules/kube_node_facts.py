#!/usr/bin/python
# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: kube_node_facts
short_description: Read in one task what a Kubernetes node has and what its package mirror offers
version_added: 0.1.0
description:
  - Reads C(/etc/os-release), the versions and holds of the Kubernetes packages (one C(dpkg-query) call), C(kubelet --version),
    sysctls and swap areas from C(/proc), which kernel modules are present (loaded or built in), the given files and the unit
    file state and mount dependencies of the given systemd units (one C(systemctl show) call).
  - Optionally asks the Kubernetes repository, from the node, which versions of O(packages) it offers, with the collection's one
    offers check (the same as the internal package_source role's), which fetches the signing key and reads the repository
    through a private APT configuration, checking its signature, before any source file is written; the node's own package
    lists do not change.
  - Changes nothing. With O(check) it judges what it read as the kube_node role does, in the same task (the same functions as
    the C(onprem.gpu.kube_node_*) filters, which compare the result with the inventory on the controller).
author:
  - onprem.gpu maintainers (@onprem-gpu)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - onprem.gpu.read_only
attributes:
  platform:
    platforms: debian
options:
  packages:
    description: Debian packages whose installed version and hold are read.
    type: list
    elements: str
    default: []
  sysctls:
    description: Sysctls read from C(/proc/sys).
    type: list
    elements: str
    default: []
  kernel_modules:
    description: Kernel modules looked for, loaded or built in.
    type: list
    elements: str
    default: []
  files:
    description: Files whose text is returned (V(null) for a missing file).
    type: list
    elements: path
    default: []
  units:
    description: systemd units whose C(UnitFileState) and C(RequiresMountsFor) are read.
    type: list
    elements: str
    default: []
  repository:
    description:
      - The repository asked for O(packages) at O(version), as the package_source role writes it; none is asked without it.
    type: dict
    suboptions:
      name:
        description: Name of the repository's source file and keyring.
        type: str
        required: true
      url:
        description: URL of the repository.
        type: str
        required: true
      suites:
        description: Suites; V(/) for a flat repository (as pkgs.k8s.io), empty for the distribution's codename.
        type: list
        elements: str
        default: []
      components:
        description: Components; empty for a flat repository.
        type: list
        elements: str
        default: []
      key_url:
        description:
          - URL of the repository's signing key.
          - A plain C(http://) URL is refused unless O(repository.key_fingerprint) pins the key.
        type: str
        required: true
      key_fingerprint:
        description:
          - The full OpenPGP fingerprint (40 hexadecimal digits) the key at O(repository.key_url) must have; the key is
            used only when the file fetched holds that key and no other. Empty trusts the key fetched over C(https://).
        type: str
        default: ""
  version:
    description: The upstream version of O(packages) asked of O(repository) (C(1.35.4) matches C(1.35.4-*)); empty asks for any.
    type: str
    default: ""
  kubelet:
    description: The kubelet binary asked for its version; a bare name is looked up in E(PATH).
    type: str
    default: kubelet
  check:
    description:
      - Judge what was read as the kube_node role does, in this same task, and fail with one sentence per problem (joined by
        a space) before any change. Needs O(settings), O(host), O(wanted) and O(repository).
      - V(preflight) judges the inventory, the platform, a version change that is not the role's and what the mirror offers
        (the filter C(onprem.gpu.kube_node_preflight_problems)), and returns RV(work).
      - V(preflight_and_verify) judges the same and, where RV(work) is empty (the node lacks nothing), verifies the node base
        as read (the filter C(onprem.gpu.kube_node_problems)), that is the packages at O(version) and held, kubelet's version,
        swap, the sysctls and kubelet's mounts. A node with work is verified by the role after its changes, on a new reading.
      - Empty judges nothing; the C(onprem.gpu.kube_node_*) filters judge the same way on the controller.
    type: str
    choices: ["", preflight, preflight_and_verify]
    default: ""
  settings:
    description: The node's inventory settings that O(check) judges, as the role's C(__kube_node_settings) (C(version), C(api_endpoint),
      C(pools), C(labels), C(taints), C(datacenter), C(control_plane_datacenters), C(control_plane_group)).
    type: dict
  host:
    description: The inventory name the problems of O(check) name.
    type: str
  wanted:
    description:
      - What the node base must be, as the role's C(__kube_node_wanted) (C(version), C(repo_url), C(key_url), C(packages),
        C(configure_files), C(pin_file), C(sysctls), C(kernel_modules), C(swap_off), C(required_mounts), C(upgrade)).
      - Its C(install_files), the key and source file of O(repository), are taken from the key this task reads, whatever
        is given.
    type: dict
notes:
  - Every command runs with C(LC_ALL=C).
"""

EXAMPLES = r"""
- name: Read the node and the mirror
  onprem.gpu.kube_node_facts:
    packages: [kubelet, kubeadm, kubectl]
    sysctls: [net.ipv4.ip_forward]
    kernel_modules: [overlay, br_netfilter]
    files: [/etc/fstab]
    units: [kubelet.service, swap.target]
    repository:
      name: kubernetes
      url: https://pkgs.k8s.io/core:/stable:/v1.35/deb/
      suites: [/]
      key_url: https://pkgs.k8s.io/core:/stable:/v1.35/deb/Release.key
    version: 1.35.4
  register: node

- name: Read the node and the mirror, and check them as the kube_node role does (the node verified if it lacks nothing)
  onprem.gpu.kube_node_facts:
    packages: [kubelet, kubeadm, kubectl]
    sysctls: [net.ipv4.ip_forward]
    kernel_modules: [overlay, br_netfilter]
    files: [/etc/fstab]
    units: [kubelet.service, swap.target]
    repository: "{{ repository }}"
    version: 1.35.4
    check: preflight_and_verify
    settings: "{{ __kube_node_settings }}"
    host: "{{ inventory_hostname }}"
    wanted: "{{ __kube_node_wanted }}"
  register: node
"""

RETURN = r"""
os_release:
  description: The fields of C(/etc/os-release).
  returned: always
  type: dict
  sample: {ID: debian, VERSION_ID: "12"}
architecture:
  description: The machine's architecture as the kernel names it.
  returned: always
  type: str
  sample: x86_64
packages:
  description: Each package of O(packages) dpkg knows, with its installed version (V(null) when not installed) and whether it is held.
  returned: always
  type: dict
  sample: {kubelet: {version: 1.35.4-1.1, held: true}}
kubelet_version:
  description: What C(kubelet --version) prints; V(null) without kubelet.
  returned: always
  type: str
  sample: Kubernetes v1.35.4
sysctls:
  description: The value of each sysctl of O(sysctls) that exists.
  returned: always
  type: dict
  sample: {net.ipv4.ip_forward: "1"}
swap_areas:
  description: How many swap areas C(/proc/swaps) lists.
  returned: always
  type: int
  sample: 0
kernel_modules:
  description: The modules of O(kernel_modules) that are present, loaded or built in.
  returned: always
  type: list
  elements: str
  sample: [overlay, br_netfilter]
files:
  description: The text of each file of O(files); V(null) when missing.
  returned: always
  type: dict
units:
  description: C(UnitFileState) and C(RequiresMountsFor) of each unit of O(units).
  returned: always
  type: dict
  sample: {kubelet.service: {UnitFileState: enabled, RequiresMountsFor: /raid}}
offers:
  description:
    - What O(repository) offers of O(packages) at O(version) (C(offered), every version of each package; C(missing), the
      packages not offered at O(version)), or why it could not be read (C(unreadable)); C(problems), one sentence each.
  returned: when O(repository) is set, on Debian and Ubuntu
  type: dict
key:
  description: The answer of the repository's key URL (C(status), C(msg)) and its C(content) as text.
  returned: when O(repository) is set, on Debian and Ubuntu
  type: dict
work:
  description:
    - With O(check), what the node base lacks that the role changes, as the filter C(onprem.gpu.kube_node_work) says it
      (C(install) and C(configure), one short phrase each, both empty on a node that needs nothing).
  returned: when O(check) is set and found no problem
  type: dict
  sample: {install: [], configure: [enable kubelet]}
problems:
  description: The problems O(check) found, one sentence each; the module failed on them.
  returned: failed, when O(check) found problems
  type: list
  elements: str
"""

import os
import platform

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_text

from ansible_collections.onprem.gpu.plugins.module_utils._kube_node import (
    CHECKS,
    judgement,
    parse_dpkg_query,
    parse_systemctl_show,
    repository_files,
)
from ansible_collections.onprem.gpu.plugins.module_utils._os_release import is_debian_family, read_os_release
from ansible_collections.onprem.gpu.plugins.module_utils._package_probe import REPOSITORY_OPTIONS, probe


def read_text(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def module_present(name):
    # overlay shows as a filesystem and br_netfilter as its sysctls, whether loaded as modules or built in.
    if name == "overlay":
        return "overlay" in (read_text("/proc/filesystems") or "").split()
    if name == "br_netfilter":
        return os.path.exists("/proc/sys/net/bridge/bridge-nf-call-iptables")
    return os.path.isdir(f"/sys/module/{name}")


def main():
    module = AnsibleModule(
        argument_spec={
            "packages": {"type": "list", "elements": "str", "default": []},
            "sysctls": {"type": "list", "elements": "str", "default": []},
            "kernel_modules": {"type": "list", "elements": "str", "default": []},
            "files": {"type": "list", "elements": "path", "default": []},
            "units": {"type": "list", "elements": "str", "default": []},
            "repository": {"type": "dict", "options": REPOSITORY_OPTIONS},
            "version": {"type": "str", "default": ""},
            "kubelet": {"type": "str", "default": "kubelet"},
            "check": {"type": "str", "choices": ["", *CHECKS], "default": ""},
            "settings": {"type": "dict"},
            "host": {"type": "str"},
            "wanted": {"type": "dict"},
        },
        required_if=[("check", check, ["settings", "host", "wanted", "repository"]) for check in CHECKS],
        supports_check_mode=True,
    )
    module.run_command_environ_update = {"LC_ALL": "C", "LANG": "C"}
    params = module.params
    result = {"changed": False, "os_release": read_os_release(), "architecture": platform.machine(), "packages": {}, "units": {}}

    if params["packages"]:
        dpkg_query = module.get_bin_path("dpkg-query", required=True)
        rc, out, err = module.run_command([dpkg_query, "--show", "--showformat", "${Package}\t${Version}\t${db:Status-Want} ${db:Status-Status}\n"]
                                          + params["packages"])
        # rc 1: some package is unknown to dpkg; the known ones are still listed.
        if rc not in (0, 1):
            module.fail_json(msg=f"dpkg-query failed: {err.strip()}", rc=rc, stdout=out, stderr=err)
        result["packages"] = parse_dpkg_query(out)

    kubelet = module.get_bin_path(params["kubelet"]) if "/" not in params["kubelet"] else params["kubelet"]
    result["kubelet_version"] = None
    if kubelet and os.access(kubelet, os.X_OK):
        rc, out, err = module.run_command([kubelet, "--version"])
        result["kubelet_version"] = out.strip() if rc == 0 else None

    result["sysctls"] = {}
    for name in params["sysctls"]:
        value = read_text("/proc/sys/" + name.replace(".", "/"))
        if value is not None:
            result["sysctls"][name] = " ".join(value.split())
    result["swap_areas"] = max(len((read_text("/proc/swaps") or "").strip().splitlines()) - 1, 0)
    result["kernel_modules"] = [name for name in params["kernel_modules"] if module_present(name)]
    result["files"] = {name: read_text(name) for name in params["files"]}

    if params["units"]:
        systemctl = module.get_bin_path("systemctl", required=True)
        rc, out, err = module.run_command([systemctl, "show", "--property", "Id,UnitFileState,RequiresMountsFor"] + params["units"])
        if rc != 0:
            module.fail_json(msg=f"systemctl show failed: {err.strip()}", rc=rc, stdout=out, stderr=err)
        blocks = parse_systemctl_show(out)
        result["units"] = {unit: {"UnitFileState": block.get("UnitFileState", ""), "RequiresMountsFor": block.get("RequiresMountsFor", "")}
                           for unit, block in zip(params["units"], blocks)}

    # APT is asked on Debian and Ubuntu only: elsewhere the role refuses the platform (platform_problems, the same test).
    if params["repository"] and is_debian_family(result["os_release"]):
        requests = [f"{name}={params['version']}" if params["version"] else name for name in params["packages"]]
        answer = probe(module, "Debian", result["os_release"].get("VERSION_CODENAME", ""), [params["repository"]], requests)
        key = answer.pop("keys")[0]
        result["key"] = {"status": key["status"], "msg": key["msg"], "content": to_text(key["content"], errors="replace")}
        result["offers"] = answer
    if params["check"]:
        # The key and source the node must have are those of the key just read (the role's vars cannot template them
        # before this task has run).
        wanted = dict(params["wanted"], install_files=repository_files(params["repository"], result.get("key", {}).get("content", "")))
        problems, work = judgement(params["check"], params["host"], params["settings"], result, wanted)
        if problems:
            module.fail_json(msg=" ".join(problems), problems=problems, **result)
        result["work"] = work
    module.exit_json(**result)


if __name__ == "__main__":
    main()
