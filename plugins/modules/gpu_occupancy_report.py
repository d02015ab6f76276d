#!/usr/bin/python
# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_occupancy_report
short_description: Write the GPU occupancy and cost report of one or more datacenters
version_added: 0.1.0
description:
  - Writes, into one directory, a Markdown report (C(gpu-occupancy.md)) and the same as a standalone HTML page
    (C(gpu-occupancy.html)), SVG charts (occupancy over time per datacenter, allocated-but-idle heat map per node,
    GPU-hours per team, and per datacenter the monthly cost by occupancy, on-prem against cloud, with the break-even
    point), and for finance C(gpu-occupancy.csv) (GPU-hours per datacenter, node and namespace), C(gpu-cost.csv) and
    C(gpu-occupancy.json) (everything).
  - Its input is what M(onprem.gpu.gpu_occupancy) measured, costed by the C(onprem.gpu.gpu_occupancy_cost) filter;
    C(playbooks/gpu_occupancy_report.yml) chains them.
  - Files are written only when their content changes, each in one atomic move, never through a symbolic link in the
    directory (one there is refused).
author:
  - onprem.gpu maintainers (@onprem-gpu)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: In check mode nothing is written; RV(files) says which files would change.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  path:
    description: The directory to write to; created (mode 0755) when missing.
    type: path
    required: true
  datacenters:
    description:
      - One entry per datacenter, each the output of the C(onprem.gpu.gpu_occupancy_cost) filter, a dict with
        C(datacenter) (its name), C(occupancy) (the answer of M(onprem.gpu.gpu_occupancy)) and C(costs).
    type: list
    elements: dict
    required: true
seealso:
  - module: onprem.gpu.gpu_occupancy
"""

EXAMPLES = r"""
- name: Write the report of dc1
  onprem.gpu.gpu_occupancy_report:
    path: /srv/reports/gpu/2026-10
    datacenters:
      - "{{ dc1_occupancy | onprem.gpu.gpu_occupancy_cost(dc1_plan) }}"
"""

RETURN = r"""
files:
  description: Every file of the report, by name, with whether this run changed (or in check mode would change) it.
  returned: always
  type: dict
  sample: {"gpu-occupancy.md": {"changed": true}, "occupancy.svg": {"changed": false}}
path:
  description: The report's directory.
  returned: always
  type: str
  sample: /srv/reports/gpu/2026-10
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.onprem.gpu.plugins.module_utils._file_tree import FileTreeError, check_root, read, write
from ansible_collections.onprem.gpu.plugins.module_utils._occupancy_report import report_files

REQUIRED_KEYS = ("datacenter", "occupancy", "costs")


def main():
    module = AnsibleModule(
        argument_spec=dict(path=dict(type="path", required=True), datacenters=dict(type="list", elements="dict", required=True)),
        supports_check_mode=True,
    )
    directory, datacenters = module.params["path"], module.params["datacenters"]
    for entry in datacenters:
        missing = [key for key in REQUIRED_KEYS if key not in entry]
        if missing:
            module.fail_json(msg=f"Each datacenter needs {', '.join(REQUIRED_KEYS)} (the gpu_occupancy_cost filter's output); one lacks {', '.join(missing)}.")
    if not datacenters:
        module.fail_json(msg="The report needs at least one datacenter.")
    try:
        files = report_files(datacenters)
    except (KeyError, TypeError, ValueError) as error:
        module.fail_json(msg=f"The datacenters are not what gpu_occupancy and gpu_occupancy_cost return: {error!r}.")
    try:
        check_root(directory)
        result = {name: {"changed": read(directory, name) != content} for name, content in sorted(files.items())}
        if not module.check_mode:
            for name, content in sorted(files.items()):
                if result[name]["changed"]:
                    write(directory, name, content)
    except FileTreeError as error:
        module.fail_json(msg=str(error))
    module.exit_json(changed=any(entry["changed"] for entry in result.values()), files=result, path=directory)


if __name__ == "__main__":
    main()
