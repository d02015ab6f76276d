#!/usr/bin/python
# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: cluster_addons_tree
short_description: Write a rendered directory of files, changing only those that differ and removing stale ones
version_added: 0.1.0
description:
  - Writes O(files) (relative path to text) under O(path) in one call, so that a tree of many manifests costs one
    task, not one per file. Files whose content is already right are left alone.
  - With O(prune=true), YAML files under O(path) that O(files) does not list are removed, so that an object dropped
    from the inventory also leaves the rendered tree (and Argo CD prunes it).
  - Used by the C(onprem.gpu.cluster_addons) role to write C(clusters/<datacenter>/) on the controller, and by the
    C(onprem.gpu.network_benchmark) role to write its report (with O(prune=false)).
author:
  - onprem.gpu maintainers (@onprem-gpu)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: In check mode nothing is written or removed; RV(written) and RV(removed) say what would be.
  diff_mode:
    support: full
    details: One diff per file written or removed.
  platform:
    platforms: posix
options:
  path:
    description: The directory the files are written under; created when missing.
    type: path
    required: true
  files:
    description: Relative paths (no C(..), not absolute) mapped to the text of each file.
    type: dict
    required: true
  prune:
    description:
      - Remove C(*.yaml) files under O(path) that O(files) does not list, and directories left empty.
      - With V(false) nothing under O(path) is removed.
    type: bool
    default: true
"""

EXAMPLES = r"""
- name: Write the datacenter's tree
  onprem.gpu.cluster_addons_tree:
    path: /srv/gitops/clusters/dc1
    files:
      kustomization.yaml: "resources: [apps/kueue.yaml]\n"
      apps/kueue.yaml: "..."
"""

RETURN = r"""
written:
  description: Relative paths written (or that would be, in check mode), sorted.
  returned: always
  type: list
  elements: str
removed:
  description: Relative paths removed (or that would be), sorted.
  returned: always
  type: list
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule


def _read(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def _stale(root, wanted):
    stale = []
    for directory, _subdirectories, names in os.walk(root):
        for name in names:
            relative = os.path.relpath(os.path.join(directory, name), root)
            if name.endswith(".yaml") and relative not in wanted:
                stale.append(relative)
    return sorted(stale)


def main():
    module = AnsibleModule(
        argument_spec={"path": {"type": "path", "required": True}, "files": {"type": "dict", "required": True},
                       "prune": {"type": "bool", "default": True}},
        supports_check_mode=True,
    )
    root = module.params["path"]
    files = {}
    for relative, text in module.params["files"].items():
        normal = os.path.normpath(relative)
        if os.path.isabs(normal) or normal.startswith(".."):
            module.fail_json(msg=f"File {relative!r} is not a relative path inside {root}.")
        files[normal] = str(text)
    written, diffs = [], []
    for relative, text in sorted(files.items()):
        before = _read(os.path.join(root, relative))
        if before != text:
            written.append(relative)
            diffs.append({"before": before or "", "after": text, "before_header": relative, "after_header": relative})
    removed = _stale(root, files) if module.params["prune"] and os.path.isdir(root) else []
    diffs.extend({"before": _read(os.path.join(root, relative)), "after": "", "before_header": relative, "after_header": relative}
                 for relative in removed)
    if not module.check_mode:
        for relative in written:
            target = os.path.join(root, relative)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target + ".tmp", "w", encoding="utf-8") as handle:
                handle.write(files[relative])
            os.replace(target + ".tmp", target)
        for relative in removed:
            os.remove(os.path.join(root, relative))
        # Directories left empty go too, with prune only: without it nothing under O(path) but O(files) is touched (nor
        # walked). Bottom-up, and what each directory holds now: a parent emptied by removing its last subdirectory goes too.
        if module.params["prune"]:
            for directory, _subdirectories, _names in os.walk(root, topdown=False):
                if directory != root and not os.listdir(directory):
                    os.rmdir(directory)
    module.exit_json(changed=bool(written or removed), written=written, removed=removed, diff=diffs)


if __name__ == "__main__":
    main()
