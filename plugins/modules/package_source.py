#!/usr/bin/python
# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: package_source
short_description: Configure the package repositories of the onprem.gpu roles, ask them what they offer, hold packages
version_added: 0.1.0
description:
  - The one task of the internal C(onprem.gpu.package_source) role, which the collection's roles include; not meant for playbooks.
  - Fetches each repository's signing key and asks the repositories, through a private APT configuration (or DNF
    C(--repofrompath)), which versions of O(packages) they offer, before anything is written; so check mode and a first
    run get the same answer.
  - Writes the key (C(/etc/apt/keyrings/NAME.asc) or C(.gpg); C(/etc/pki/rpm-gpg/NAME.asc)) and one deb822
    C(/etc/apt/sources.list.d/NAME.sources) (or C(/etc/yum.repos.d/NAME.repo)) per repository, the same text whichever role
    writes it, only when every key was fetched and every requested version is offered, and refreshes APT's package
    lists only when a file changed.
  - Holds (C(apt-mark hold), C(dnf versionlock add)) and releases packages. On APT a hold at a version also pins that
    version, so that APT and DNF lock the same thing. DNF's versionlock already locks the version; there nothing else is written.
  - The pins of the including role (the innermost of the collection's roles in O(parent_roles), such as C(kube_node)) are one
    apt_preferences(5) file, C(/etc/apt/preferences.d/onprem-gpu-ROLE.pref), with one stanza per package in name order
    (fields C(Package), C(Pin) and C(Pin-Priority) 1001, a priority APT follows even to a downgrade), as NVIDIA's Driver
    Installation Guide pins the driver under "Version locking". The file is written atomically, mode 0644, owned by root,
    and removed when no pin is left.
  - On APT, hold and release requests are checked before anything is fetched or written; a package name that is not a Debian package
    name, or a version that is not a Debian version (one with a space or a newline, for instance), fails in one sentence naming it.
author:
  - onprem.gpu maintainers (@onprem-gpu)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Reads keys, offers and holds, writes and holds nothing, and reports what would change.
  diff_mode:
    support: full
    details: The text of each key, source and pin file before and after.
  platform:
    platforms: posix
options:
  repositories:
    description: The repositories, each one file.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: Name of the source file and keyring.
        type: str
        required: true
      url:
        description: URL of the repository.
        type: str
        required: true
      suites:
        description: Suites (APT); empty takes the distribution's codename. A flat repository has V(/) or V(./).
        type: list
        elements: str
        default: []
      components:
        description: Components (APT); empty for a flat repository.
        type: list
        elements: str
        default: []
      key_url:
        description:
          - URL of the key that signs the repository (ASCII-armored or binary).
          - C(https://), or C(http://) with O(repositories[].key_fingerprint); any other is refused before anything is fetched.
        type: str
        required: true
      key_fingerprint:
        description:
          - The full OpenPGP fingerprint (40 hexadecimal digits, spaces allowed) of the signing key. The key fetched is used only
            when it holds that key and no other; otherwise the module fails in one sentence and writes nothing.
          - Required when O(repositories[].key_url) is C(http://).
        type: str
        default: ""
  packages:
    description:
      - Packages to ask the repositories for, C(name) or C(name=version) (a version matches C(version) and C(version-*)).
      - When one is not offered nothing is written; RV(missing) names it.
    type: list
    elements: str
    default: []
  write:
    description: Write the keys and files (when RV(ready)); false only reads.
    type: bool
    default: true
  require:
    description:
      - Fail, with RV(problems) as the message, when not RV(ready) (a key not fetched, a repository not read, a package not offered).
      - False returns them for the including role to judge with its own sentences.
    type: bool
    default: true
  hold:
    description:
      - Packages to hold, C(name) or C(name=version).
      - DNF locks C(name-version) (C(dnf versionlock add)), and locks again a package locked at another version.
      - APT holds the name (C(apt-mark hold)) and pins the version in the including role's preferences file, with a C(Pin) of
        C(version VERSION-*) for an upstream version such as C(1.35.4) (any Debian revision of it), and of exactly
        C(version VERSION) for one that has its Debian revision, such as C(2.19.6-1+cuda13.2). APT compares whole versions,
        so a package whose version has an epoch needs it in the version asked (C(2:1.18.0)).
      - A hold by name alone pins nothing and keeps the name's pin as it is; a pin lasts while its package is held, so a
        package released here or removed since (which drops its hold) loses its stanza at this call.
    type: list
    elements: str
    default: []
  unhold:
    description: Packages to release, by name; on APT their stanzas leave the including role's preferences file.
    type: list
    elements: str
    default: []
  parent_roles:
    description:
      - The roles that include this one (C(ansible_parent_role_names)); one of the collection's roles must be among them.
      - The innermost of them names the APT preferences file of the pins.
    type: list
    elements: str
    required: true
seealso:
  - name: apt_preferences(5)
    description: APT preferences, version pins and the meaning of a priority over 1000.
    link: https://manpages.debian.org/bookworm/apt/apt_preferences.5.en.html
  - name: NVIDIA Driver Installation Guide, Version locking
    description: Locking the driver with APT preferences and DNF versionlock.
    link: https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/version-locking.html
"""

EXAMPLES = r"""
- name: Configure the site's mirror and ask it for the toolkit
  onprem.gpu.package_source:
    repositories:
      - name: onprem-gpu-mirror
        url: https://mirror.example.internal/nvidia/
        suites: [bookworm]
        components: [main]
        key_url: https://mirror.example.internal/nvidia/mirror.asc
    packages: [nvidia-container-toolkit=1.18.0]
    parent_roles: "{{ ansible_parent_role_names | default([]) }}"

# Inside onprem.gpu.kube_node on Debian: apt-mark holds the three packages and
# /etc/apt/preferences.d/onprem-gpu-kube_node.pref pins each at "Pin: version 1.35.4-*", priority 1001.
- name: Hold kubelet, kubeadm and kubectl at the cluster's version
  onprem.gpu.package_source:
    hold: [kubelet=1.35.4, kubeadm=1.35.4, kubectl=1.35.4]
    parent_roles: "{{ ansible_parent_role_names | default([]) }}"

- name: Release nccl-tests (its stanza leaves the role's preferences file, which goes when empty)
  onprem.gpu.package_source:
    unhold: [nccl-tests]
    parent_roles: "{{ ansible_parent_role_names | default([]) }}"
"""

RETURN = r"""
ready:
  description: Every key was fetched, the repositories answered and offer every requested package.
  returned: always
  type: bool
keys:
  description: Each repository's key as fetched, C({name, url, status, msg, problem}) (C(problem) null when usable).
  returned: always
  type: list
  elements: dict
unreadable:
  description: Why the package manager could not read the repositories, or null.
  returned: always
  type: str
offered:
  description: The versions the repositories offer of each requested package name.
  returned: always
  type: dict
missing:
  description: The requested packages (as given) that the repositories do not offer.
  returned: always
  type: list
  elements: str
files:
  description:
    - The keys and source files that differ from what is wanted (written unless check mode or not ready).
    - With O(hold) or O(unhold) on APT, also the including role's preferences file when its pins change (written, or removed
      when none is left, unless check mode).
  returned: always
  type: list
  elements: str
held:
  description: The packages held or released by this run (or that would be, in check mode).
  returned: always
  type: list
  elements: str
pins:
  description:
    - The including role's APT pins after this run (as planned in check mode), each package name with the version pattern of its C(Pin).
    - Empty on DNF and without O(hold) or O(unhold).
  returned: always
  type: dict
  sample: {kubeadm: "1.35.4-*", kubectl: "1.35.4-*", kubelet: "1.35.4-*"}
problems:
  description: The sentences of RV(keys), RV(unreadable) and RV(missing) for callers without their own.
  returned: always
  type: list
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.onprem.gpu.plugins.module_utils import _package_source as source
from ansible_collections.onprem.gpu.plugins.module_utils._os_release import read_os_release
from ansible_collections.onprem.gpu.plugins.module_utils._package_probe import C_LOCALE, REPOSITORY_OPTIONS, probe


def family_of(release):
    words = [release.get("ID", "")] + release.get("ID_LIKE", "").split()
    return "Debian" if any(word in ("debian", "ubuntu") for word in words) else "RedHat"


def read_bytes(path):
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def as_bytes(content):
    return content.encode() if isinstance(content, str) else content


def write_file(module, path, content):
    """Replace ``path`` atomically with ``content``, mode 0644, owned by the user the module runs as (root)."""
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    temporary = f"{path}.onprem-gpu-tmp"
    with open(temporary, "wb") as handle:
        handle.write(as_bytes(content))
    # The file is the collection's: its mode and owner are set here, not copied from the file it replaces.
    module.atomic_move(temporary, path, keep_dest_attrs=False)
    os.chmod(path, 0o644)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            repositories=dict(type="list", elements="dict", default=[], options=REPOSITORY_OPTIONS),
            packages=dict(type="list", elements="str", default=[]),
            write=dict(type="bool", default=True),
            require=dict(type="bool", default=True),
            hold=dict(type="list", elements="str", default=[]),
            unhold=dict(type="list", elements="str", default=[]),
            parent_roles=dict(type="list", elements="str", required=True),
        ),
        supports_check_mode=True,
    )
    params = module.params
    problem = source.caller_problem(params["parent_roles"])
    if problem:
        module.fail_json(msg=problem)
    problems = source.input_problems(params["repositories"])
    if problems:
        module.fail_json(msg=" ".join(problems))
    release = read_os_release()
    family, codename = family_of(release), release.get("VERSION_CODENAME", "")
    problems = source.hold_problems(params["hold"], params["unhold"]) if family == "Debian" else []
    if problems:
        module.fail_json(msg=" ".join(problems))

    def run(argv):
        return module.run_command(argv, environ_update=C_LOCALE)

    # One file per repository name: the same repository given twice (two roles sharing a mirror) is one.
    repositories = list({repository["name"]: repository for repository in params["repositories"]}.values())
    # The collection's one offers check (module_utils/_package_probe): keys fetched, repositories read before any write.
    answer = probe(module, family, codename, repositories, params["packages"])
    answers = answer.pop("keys")
    result = {"changed": False, "keys": [{k: v for k, v in key.items() if k != "content"} for key in answers], "files": [], "held": [],
              "pins": {}, **answer}
    keys = {key["name"]: key["content"] for key in answers}
    result["ready"] = not result["problems"]
    if params["require"] and result["problems"]:
        module.fail_json(msg=" ".join(result["problems"]), **{k: v for k, v in result.items() if k != "changed"})
    if result["ready"]:
        wanted = source.desired_files(family, repositories, keys, codename)
        changes = {path: content for path, content in wanted.items() if read_bytes(path) != as_bytes(content)}
        result["files"] = sorted(changes)
        if changes:
            result["diff"] = [{"before_header": path, "after_header": path, "before": (read_bytes(path) or b"").decode("utf-8", "replace"),
                               "after": as_bytes(content).decode("utf-8", "replace")} for path, content in changes.items()]
        if changes and params["write"]:
            result["changed"] = True
            if not module.check_mode:
                for path, content in changes.items():
                    write_file(module, path, content)
                if family == "Debian":
                    rc, stdout, stderr = run(["apt-get", "-q", "update"])
                    if rc != 0:
                        module.fail_json(msg=f"apt-get update failed after writing {', '.join(sorted(changes))}", rc=rc, stdout=stdout, stderr=stderr)
    if params["hold"] or params["unhold"]:
        hold_and_pin(module, run, family, result)
    module.exit_json(**result)


def hold_and_pin(module, run, family, result):
    """Hold and release packages; on APT also write the including role's version pins (or remove its file when none is left)."""
    params = module.params
    argv = ["dnf", "--quiet", "versionlock", "list"] if family == "RedHat" else ["apt-mark", "showhold"]
    rc, stdout, stderr = run(argv)
    if rc != 0 and family == "Debian":
        module.fail_json(msg=f"apt-mark showhold exited with code {rc}", cmd=argv, rc=rc, stdout=stdout, stderr=stderr)
    locks = source.parse_locks(stdout if rc == 0 else "", family)
    holds = source.hold_changes(family, params["hold"], params["unhold"], locks)
    commands, result["held"] = holds["commands"], holds["names"]
    result["changed"] = result["changed"] or bool(commands)
    pin_change = plan_pins(params, locks, result) if family == "Debian" else None
    if module.check_mode:
        return
    for command in commands:
        rc, stdout, stderr = run(command)
        if rc != 0:
            module.fail_json(msg=f"{' '.join(command[:3])} exited with code {rc}", cmd=command, rc=rc, stdout=stdout, stderr=stderr)
    if pin_change and pin_change[1] is None:
        os.remove(pin_change[0])
    elif pin_change:
        write_file(module, *pin_change)


def plan_pins(params, locks, result):
    """The including role's APT pins after the holds, reported in ``result`` (pins, files, diff).

    Returns (path, text) when the file must change, text None to remove it; None when it stays as it is.
    """
    path = source.preferences_path(source.including_role(params["parent_roles"]))
    before = read_bytes(path)
    before = before.decode("utf-8", "replace") if before is not None else None
    result["pins"] = source.pins_after(source.parse_pins(before), params["hold"], params["unhold"], locks)
    after = source.pins_text(result["pins"])
    if after == before:
        return None
    result["changed"] = True
    result["files"].append(path)
    result.setdefault("diff", []).append({"before_header": path, "after_header": path, "before": before or "", "after": after or ""})
    return path, after


if __name__ == "__main__":
    main()
