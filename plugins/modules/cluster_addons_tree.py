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
  - Nothing is written outside O(path). Below it, every directory and file read, written or removed must be a real one; a
    symbolic link there (a committed C(apps -> /etc), say) is refused, as is a file that is not UTF-8 text, and with
    O(prune=true) an O(path) that is a link or has C(.) or C(..) in it. Each file is written to a new temporary file in
    its directory and moved over the old one. Everything is read and checked before the first write; a failure is one
    sentence.
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

from ansible_collections.onprem.gpu.plugins.module_utils._file_tree import (
    FileTreeError,
    check_root,
    read,
    relative_path,
    remove,
    remove_empty_directories,
    stale,
    write,
)


def main():
    module = AnsibleModule(
        argument_spec={"path": {"type": "path", "required": True}, "files": {"type": "dict", "required": True},
                       "prune": {"type": "bool", "default": True}},
        supports_check_mode=True,
    )
    root, prune = module.params["path"], module.params["prune"]
    try:
        check_root(root, prune)
        files = {relative_path(root, relative): str(text) for relative, text in module.params["files"].items()}
        # Everything is read (and every link or undecodable file refused) before the first write.
        written, diffs = [], []
        for relative, text in sorted(files.items()):
            before = read(root, relative)
            if before != text:
                written.append(relative)
                diffs.append({"before": before or "", "after": text, "before_header": relative, "after_header": relative})
        removed = stale(root, files, ".yaml") if prune and os.path.isdir(root) else []
        diffs.extend({"before": read(root, relative), "after": "", "before_header": relative, "after_header": relative} for relative in removed)
        if not module.check_mode:
            for relative in written:
                write(root, relative, files[relative])
            for relative in removed:
                remove(root, relative)
            # With prune only: without it nothing under O(path) but O(files) is touched (nor walked).
            if prune:
                remove_empty_directories(root)
    except FileTreeError as error:
        module.fail_json(msg=str(error))
    module.exit_json(changed=bool(written or removed), written=written, removed=removed, diff=diffs)


if __name__ == "__main__":
    main()
