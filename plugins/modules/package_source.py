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
  - Holds (C(apt-mark hold), C(dnf versionlock add)) and releases packages.
author:
  - onprem.gpu maintainers (@onprem-gpu)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Reads keys and offers, writes and holds nothing, and reports what would change.
  diff_mode:
    support: full
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
        description: URL of the key that signs the repository (ASCII-armored or binary).
        type: str
        required: true
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
    description: Packages to hold, C(name) or C(name=version) (DNF locks that version).
    type: list
    elements: str
    default: []
  unhold:
    description: Packages to release.
    type: list
    elements: str
    default: []
  parent_roles:
    description: The roles that include this one (C(ansible_parent_role_names)); one of the collection's roles must be among them.
    type: list
    elements: str
    required: true
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
  description: The keys and source files that differ from what is wanted (written unless check mode or not ready).
  returned: always
  type: list
  elements: str
held:
  description: The packages held or released by this run (or that would be, in check mode).
  returned: always
  type: list
  elements: str
problems:
  description: The sentences of RV(keys), RV(unreadable) and RV(missing) for callers without their own.
  returned: always
  type: list
  elements: str
"""

import os
import pwd

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import fetch_url

from ansible_collections.onprem.gpu.plugins.module_utils import _package_source as source
from ansible_collections.onprem.gpu.plugins.module_utils._os_release import read_os_release

C_LOCALE = {"LC_ALL": "C"}


def family_of(release):
    words = [release.get("ID", "")] + release.get("ID_LIKE", "").split()
    return "Debian" if any(word in ("debian", "ubuntu") for word in words) else "RedHat"


def fetch_key(module, repository):
    response, info = fetch_url(module, repository["key_url"], timeout=30)
    content = response.read() if response is not None else b""
    answer = {"name": repository["name"], "url": repository["key_url"], "status": info.get("status", -1), "msg": info.get("msg", ""),
              "content": content}
    answer["problem"] = source.key_problem(answer)
    return answer


def read_bytes(path):
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def as_bytes(content):
    return content.encode() if isinstance(content, str) else content


def main():
    module = AnsibleModule(
        argument_spec=dict(
            repositories=dict(type="list", elements="dict", default=[], options=dict(
                name=dict(type="str", required=True),
                url=dict(type="str", required=True),
                suites=dict(type="list", elements="str", default=[]),
                components=dict(type="list", elements="str", default=[]),
                key_url=dict(type="str", required=True, no_log=False),
            )),
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

    def run(argv):
        return module.run_command(argv, environ_update=C_LOCALE)

    # One file per repository name: the same repository given twice (two roles sharing a mirror) is one.
    repositories = list({repository["name"]: repository for repository in params["repositories"]}.values())
    answers = [fetch_key(module, repository) for repository in repositories]
    result = {"changed": False, "keys": [{k: v for k, v in answer.items() if k != "content"} for answer in answers], "unreadable": None,
              "offered": {}, "missing": [], "files": [], "held": [], "problems": []}
    result["problems"] = [source.key_sentence(answer) for answer in answers if answer["problem"]]
    keys = {answer["name"]: answer["content"] for answer in answers}
    names = sorted({source.split_request(request)[0] for request in params["packages"]})
    if not result["problems"]:
        try:
            apt_uid = pwd.getpwnam("_apt").pw_uid if family == "Debian" else None
        except KeyError:
            apt_uid = None
        offers, result["unreadable"] = source.repository_offers(run, family, repositories, keys, codename, names, apt_uid)
        if result["unreadable"]:
            result["problems"].append(result["unreadable"] + ".")
        else:
            result.update(source.judge_offers(offers, params["packages"]))
            if result["missing"]:
                result["problems"].append(f"{source.describe(repositories, codename)} offers no {', '.join(result['missing'])}.")
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
                    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
                    temporary = f"{path}.onprem-gpu-tmp"
                    with open(temporary, "wb") as handle:
                        handle.write(as_bytes(content))
                    os.chmod(temporary, 0o644)
                    module.atomic_move(temporary, path)
                if family == "Debian":
                    rc, stdout, stderr = run(["apt-get", "-q", "update"])
                    if rc != 0:
                        module.fail_json(msg=f"apt-get update failed after writing {', '.join(sorted(changes))}", rc=rc, stdout=stdout, stderr=stderr)
    if params["hold"] or params["unhold"]:
        argv = ["dnf", "--quiet", "versionlock", "list"] if family == "RedHat" else ["apt-mark", "showhold"]
        rc, stdout, stderr = run(argv)
        if rc != 0 and family == "Debian":
            module.fail_json(msg=f"apt-mark showhold exited with code {rc}", cmd=argv, rc=rc, stdout=stdout, stderr=stderr)
        holds = source.hold_changes(family, params["hold"], params["unhold"], source.parse_locks(stdout if rc == 0 else "", family))
        commands, result["held"] = holds["commands"], holds["names"]
        result["changed"] = result["changed"] or bool(commands)
        if not module.check_mode:
            for command in commands:
                rc, stdout, stderr = run(command)
                if rc != 0:
                    module.fail_json(msg=f"{' '.join(command[:3])} exited with code {rc}", cmd=command, rc=rc, stdout=stdout, stderr=stderr)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
