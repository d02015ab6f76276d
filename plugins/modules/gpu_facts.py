#!/usr/bin/python
# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_facts
short_description: Gather facts about the NVIDIA driver and GPUs
version_added: 0.1.0
description:
  - Reads the NVIDIA driver version and every GPU's identity, memory, MIG mode and persistence mode
    with a single C(nvidia-smi --query-gpu) call, and sets them as facts.
  - A host without C(nvidia-smi), or whose driver is not loaded or unusable, is not an error. The module then
    sets RV(ansible_facts.nvidia_driver_loaded=false), an empty RV(ansible_facts.nvidia_gpus) and says why in
    RV(ansible_facts.nvidia_driver_status).
  - Any other failure of C(nvidia-smi), or output it cannot read, fails the task with the command, its exit code and its output.
author:
  - onprem.gpu maintainers (@onprem-gpu)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - onprem.gpu.read_only
  - ansible.builtin.action_common_attributes.facts
attributes:
  facts:
    support: full
  platform:
    platforms: posix
options:
  nvidia_smi:
    description:
      - The C(nvidia-smi) to run.
      - A bare command name is looked up in E(PATH) and the usual system directories; a path is used as is.
    type: str
    default: nvidia-smi
notes:
  - C(nvidia-smi) runs with C(LC_ALL=C) so that its output does not depend on the locale.
  - On Hopper and later GPUs MIG mode does not survive a driver reload, so read these facts again after one.
  - An exit code of 6 (C(No devices were found)) means the driver is loaded but sees no GPU;
    RV(ansible_facts.nvidia_driver_loaded) is then V(true) with an empty RV(ansible_facts.nvidia_gpus).
seealso:
  - name: nvidia-smi documentation
    description: The fields read by this module are described by C(nvidia-smi --help-query-gpu).
    link: https://docs.nvidia.com/deploy/nvidia-smi/index.html
"""

EXAMPLES = r"""
- name: Gather GPU facts
  onprem.gpu.gpu_facts:

- name: Gather GPU facts with an nvidia-smi outside PATH
  onprem.gpu.gpu_facts:
    nvidia_smi: /usr/local/nvidia/bin/nvidia-smi

- name: Require eight GPUs on every training node
  ansible.builtin.assert:
    that:
      - ansible_facts['nvidia_driver_loaded']
      - ansible_facts['nvidia_gpus'] | length == 8
    fail_msg: "{{ ansible_facts['nvidia_driver_status'] }}"

- name: Report the GPUs whose MIG mode change waits for a GPU reset
  ansible.builtin.debug:
    msg: "GPU {{ item['index'] }} runs with MIG {{ item['mig_mode_current'] }} until a reset makes it {{ item['mig_mode_pending'] }}."
  loop: "{{ ansible_facts['nvidia_gpus'] }}"
  loop_control:
    label: "{{ item['index'] }}"
  when: item['mig_mode_current'] != item['mig_mode_pending']
"""

RETURN = r"""
nvidia_driver_status:
  description: One sentence on the driver state, the same as RV(ansible_facts.nvidia_driver_status).
  returned: always
  type: str
  sample: The NVIDIA driver is loaded and nvidia-smi lists 8 GPUs.
ansible_facts:
  description: Facts about the NVIDIA driver and GPUs.
  returned: always
  type: dict
  contains:
    nvidia_driver_loaded:
      description:
        - Whether the NVIDIA driver is loaded and usable.
        - V(false) when C(nvidia-smi) is missing, the driver is not loaded, its library is missing,
          or the kernel driver and its library differ in version.
      returned: always
      type: bool
      sample: true
    nvidia_driver_version:
      description: The driver version as nvidia-smi prints it; V(null) when the driver is not usable or no GPU is listed.
      returned: always
      type: str
      sample: 550.54.15
    nvidia_driver_status:
      description: One sentence on the driver state, saying why it is not usable where it is not.
      returned: always
      type: str
      sample: "The NVIDIA driver is not loaded: nvidia-smi could not communicate with it."
    nvidia_gpus:
      description: The GPUs in nvidia-smi index order; empty when the driver is not usable.
      returned: always
      type: list
      elements: dict
      contains:
        index:
          description: The nvidia-smi index of the GPU.
          returned: always
          type: int
          sample: 0
        uuid:
          description: The GPU UUID.
          returned: always
          type: str
          sample: GPU-7cd6d4d6-9fa8-13be-3c42-09a1b2280a02
        name:
          description: The model name as nvidia-smi prints it.
          returned: always
          type: str
          sample: NVIDIA H100 80GB HBM3
        pci_bus_id:
          description: The PCI bus id as nvidia-smi prints it (domain:bus:device.function).
          returned: always
          type: str
          sample: "00000000:18:00.0"
        pci_device_id:
          description: The PCI device and vendor id as nvidia-smi prints it, the format of mig-parted device filters.
          returned: always
          type: str
          sample: "0x233010DE"
        memory_total_mib:
          description: The total GPU memory in MiB.
          returned: always
          type: int
          sample: 81559
        mig_capable:
          description: Whether the GPU supports MIG.
          returned: always
          type: bool
          sample: true
        mig_mode_current:
          description: The MIG mode in effect, V(Enabled) or V(Disabled); V(null) on GPUs without MIG.
          returned: always
          type: str
          sample: Disabled
        mig_mode_pending:
          description:
            - The MIG mode after the next GPU reset, V(Enabled) or V(Disabled); V(null) on GPUs without MIG.
            - It differs from RV(ansible_facts.nvidia_gpus[].mig_mode_current) while an Ampere GPU waits for a reset.
          returned: always
          type: str
          sample: Enabled
        persistence_mode:
          description: The persistence mode, V(Enabled) or V(Disabled); V(null) where nvidia-smi prints C([N/A]).
          returned: always
          type: str
          sample: Enabled
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.onprem.gpu.plugins.module_utils._commands import find_command
from ansible_collections.onprem.gpu.plugins.module_utils._nvsmi import (
    NvidiaSmiError,
    missing_binary_state,
    query_gpu_argv,
    read_driver_state,
)


def query_driver_state(module, nvidia_smi):
    """Run nvidia-smi once and return the DriverState; fail the task when its answer is not understood."""
    argv = query_gpu_argv(nvidia_smi)
    rc, stdout, stderr = module.run_command(argv, environ_update={"LC_ALL": "C"})
    try:
        state = read_driver_state(rc, stdout, stderr)
    except NvidiaSmiError as error:
        module.fail_json(msg=str(error), cmd=argv, rc=rc, stdout=stdout, stderr=stderr)
    return state


def main():
    module = AnsibleModule(
        argument_spec=dict(nvidia_smi=dict(type="str", default="nvidia-smi")),
        supports_check_mode=True,
    )
    nvidia_smi = find_command(module, module.params["nvidia_smi"])
    if nvidia_smi is None:
        state = missing_binary_state(module.params["nvidia_smi"])
    else:
        state = query_driver_state(module, nvidia_smi)
    module.exit_json(
        changed=False,
        nvidia_driver_status=state.status,
        ansible_facts=dict(
            nvidia_driver_loaded=state.loaded,
            nvidia_driver_version=state.version,
            nvidia_driver_status=state.status,
            nvidia_gpus=state.gpus,
        ),
    )


if __name__ == "__main__":
    main()
