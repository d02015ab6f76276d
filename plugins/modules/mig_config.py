#!/usr/bin/python
# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: mig_config
short_description: Apply a mig-parted MIG layout to the NVIDIA GPUs of a node, changing only what differs
version_added: 0.1.0
description:
  - Reads a layout in NVIDIA mig-parted's v1 configuration format, from a file on the managed node or inline,
    and makes the node's GPUs match the layout named by O(selected).
  - Everything is checked before the first change, and a problem fails the task with one sentence and no change
    to any GPU. The checks cover the format, O(selected), GPU indices this node lacks and device filters
    that match none of its GPUs (unless O(strict=false)), profiles the GPU model does not have, counts over what
    it holds, and layouts that cannot be placed on its memory slices.
  - The profiles of a GPU are what its driver lists, as in mig-parted. When a GPU must get instances it does not
    hold, the module reads C(nvidia-smi mig -lgip) and C(mig -lgipp) (one call each for all GPUs), so a model
    without a built-in table, and profiles such as C(+me) or C(+gfx), work without a code change. Built-in tables
    plan the first change on drivers before R550, which list profiles only while MIG mode is on, and recognise
    names that drift between driver releases. Where the driver lists a profile with another size, other placements or another
    maximum count than the built-in table, the plan follows the driver and the task warns with one sentence per GPU model.
  - GPUs already in the wanted layout are not touched. On a GPU that must change, the GPU instances that the
    layout keeps stay as they are, with the same IDs and the same work on them. Only the others are destroyed, compute instances
    first. New GPU instances are created at explicit placements chosen so that the whole layout fits. The driver
    hands out the instance IDs, and the module reads them back after creating.
  - A GPU whose change would destroy an instance or switch its MIG mode is refused while compute processes run
    on it, naming their PIDs, unless O(force=true).
  - A MIG mode change takes effect at once on Hopper and later GPUs. On Ampere GPUs (A100, A30) it waits for a
    reset of the GPU. The driver resets an idle GPU by itself; the GPUs still pending are reset together with one
    C(nvidia-smi -r -i <ids>), as mig-parted resets a node with one call, and no other GPU is reset. When a driver
    client holds a GPU the reset is refused for all of them, so the GPUs keep the new mode pending and get no
    instances, RV(reboot_required) is V(true) and the message names what holds each GPU where it can be found
    (the kubelet's device plugin, gpu-feature-discovery, dcgm-exporter, DCGM, nvidia-persistenced, Fabric Manager,
    other processes with an NVIDIA device file open by PID and name, compute processes, persistence mode).
  - Persistence mode keeps the driver attached to a GPU and blocks its reset, and legacy persistence mode
    (C(nvidia-smi -pm 1)) stays on after nvidia-persistenced stops. It is turned off (C(nvidia-smi -i <ids> -pm 0)) on
    the GPUs about to be reset and back on afterwards, on those where it was on.
  - If a step fails halfway, for example when the driver refuses to create an instance, the module stops,
    restores the GPU it was changing to its previous instances where the driver allows it, leaves the later
    GPUs untouched, and fails with the state each GPU is left in.
author:
  - onprem.gpu maintainers (@onprem-gpu)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Check mode reads the node and validates and plans the layout, but changes nothing. RV(gpus) shows the planned state.
  diff_mode:
    support: full
    details: The diff shows the node before and after, written the way C(nvidia-mig-parted export) writes it.
  platform:
    platforms: posix
options:
  selected:
    description:
      - The name of the layout to apply, a key under C(mig-configs).
    type: str
    required: true
  config_file:
    description:
      - A mig-parted v1 configuration file on the managed node, such as C(/etc/nvidia-mig-manager/config.yaml).
      - Reading it needs PyYAML on the managed node.
      - A mapping that repeats a key (a layout defined twice, for instance) is refused, as the YAML specification requires
        unique keys; keys brought in by a merge key (C(<<)) may still be overridden.
      - Exactly one of O(config_file) and O(mig_configs) is required.
    type: path
  mig_configs:
    description:
      - The layouts inline, as the mapping under C(mig-configs) of a mig-parted file, layout name to list of entries.
      - A whole document with C(version) and C(mig-configs) keys is accepted too.
      - "Each entry has C(devices) (V(all) or a list of GPU indices), C(mig-enabled) (bool), C(mig-devices)
        (profile name to count, required when C(mig-enabled) is true) and optionally C(device-filter) (a PCI id
        such as V(0x233010DE), optionally with the board's subsystem id as V(0x20B010DE:0x134F10DE), or a list of them)."
      - A filter with a subsystem id matches a GPU whose C(pci.sub_device_id) is that id too; where nvidia-smi prints
        none, the device id alone decides. The subsystem ids are read only when the selected layout names one.
      - As in mig-parted, entries apply in order and a GPU matched by two entries gets the later one. GPUs that no
        entry matches are left alone, and GPUs without MIG are skipped under C(devices=all).
    type: dict
  nvidia_smi:
    description:
      - The C(nvidia-smi) to run; every read and change goes through it.
      - A bare command name is looked up in E(PATH) and the usual system directories; a path is used as is.
    type: str
    default: nvidia-smi
  force:
    description:
      - Change GPUs even though compute processes run on them.
      - The module does not stop the processes. The driver refuses to destroy an instance that a process still
        uses, and the module then restores the GPU and fails.
    type: bool
    default: false
  strict:
    description:
      - With V(true), an entry naming a GPU index this node lacks, and a layout whose device filters match none of
        its GPUs, are refused.
      - With V(false), they are skipped as mig-parted skips them, for a fleet file shared by nodes of different
        models and sizes; a layout that matches no GPU of the node then changes nothing. All other checks stay.
    type: bool
    default: true
  reset:
    description:
      - With V(true), Ampere GPUs whose MIG mode change is still pending are reset (one C(nvidia-smi -r) call for all).
      - With V(false), no GPU is reset; a mode change the driver did not apply by itself stays pending,
        RV(reboot_required) is V(true), and a reboot applies it. RV(reset_needed) tells beforehand, in check mode too,
        which GPUs may need the reset.
    type: bool
    default: true
notes:
  - C(nvidia-smi) runs with C(LC_ALL=C) so that its output does not depend on the locale.
  - A run that has nothing to change reads the node with at most three C(nvidia-smi) calls, whatever the number of GPUs;
    the profile listings are read only when instances must be planned.
  - Hopper GPUs lose MIG mode and all instances when the driver is reloaded or the node reboots, and Ampere GPUs
    keep the mode but lose the instances. Run the module again at boot, before the kubelet starts, to restore the layout.
  - Layouts name profiles as nvidia-smi does (V(1g.10gb), V(3g.40gb), V(1g.10gb+me)). Compute-instance profiles
    such as V(1c.3g.40gb) are refused, because each GPU instance gets one full compute instance.
  - "Profile tables are built in for the NVIDIA A100-SXM4-40GB, A100-SXM4-80GB, A100 80GB PCIe, H100 80GB HBM3, H100 PCIe,
    H100 NVL, H200 and A30. Other models work from what their driver lists; on a driver before R550 with MIG mode off,
    such a model first needs a layout with C(mig-devices: {}) to switch MIG on."
seealso:
  - name: NVIDIA mig-parted
    description: The configuration format this module reads.
    link: https://github.com/NVIDIA/mig-parted
  - name: NVIDIA MIG User Guide
    description: Profiles, placements and GPU reset rules.
    link: https://docs.nvidia.com/datacenter/tesla/mig-user-guide/
"""

EXAMPLES = r"""
- name: Apply the balanced layout from the node's mig-parted file
  onprem.gpu.mig_config:
    config_file: /etc/nvidia-mig-manager/config.yaml
    selected: all-balanced

- name: Split GPUs 0-3 for inference and keep GPUs 4-7 whole for training
  onprem.gpu.mig_config:
    selected: inference-and-training
    mig_configs:
      inference-and-training:
        - devices: [0, 1, 2, 3]
          mig-enabled: true
          mig-devices:
            1g.10gb: 4
            3g.40gb: 1
        - devices: [4, 5, 6, 7]
          mig-enabled: false
  register: mig

- name: Reboot when an Ampere GPU waits for a reset that a driver client blocks
  ansible.builtin.reboot:
  when: mig['reboot_required'] and mig_allow_reboot | bool

- name: Apply the GPU Operator's shared fleet file, skipping the entries for GPUs this node lacks
  onprem.gpu.mig_config:
    config_file: /etc/nvidia-mig-manager/config.yaml
    selected: all-balanced
    strict: false

- name: Show what would change, without changing anything
  onprem.gpu.mig_config:
    config_file: /etc/nvidia-mig-manager/config.yaml
    selected: all-1g.10gb
  check_mode: true
  diff: true
"""

RETURN = r"""
msg:
  description: One sentence on the outcome.
  returned: always
  type: str
  sample: Layout 'all-balanced' is applied on 2 GPUs.
gpus:
  description:
    - Every GPU of the node in index order, as it is after the run, or as planned in check mode.
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
    mig_enabled:
      description: Whether MIG mode is in effect; V(false) on GPUs without MIG and while a change to V(true) waits for a reset.
      returned: always
      type: bool
      sample: true
    mig_devices:
      description: The MIG devices by profile name, as mig-parted counts them (one per compute instance); V({}) when MIG is disabled.
      returned: always
      type: dict
      sample: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
actions:
  description: The steps taken (in check mode, the steps planned), one line each.
  returned: always
  type: list
  elements: str
  sample:
    - "GPU 0: destroy GPU instance 3 (2g.20gb at 0:2) with its compute instances"
    - "GPU 0: create GPU instances 1g.10gb at 0:1, 1g.10gb at 1:1, each with a full compute instance"
gpu_instances:
  description:
    - Every GPU in MIG mode with its GPU instances as nvidia-smi lists them after the run; in check mode, as they are
      before it (planned instances get their IDs and are listed only once created).
    - The pending MIG mode decides, since an Ampere GPU takes it at its next reset or reboot. A GPU whose switch to MIG
      waits for a reset is listed with the instances planned for it (their compute instances without profile ID); a GPU
      whose switch out of MIG waits is not listed.
    - The profile IDs and placements are what a boot-time restore needs to create the same instances again, so that the
      instances a later change keeps are the same after a reboot. Instance IDs are left out, since the driver hands
      out new ones when it creates the instances again.
  returned: always
  type: list
  elements: dict
  sample:
    - index: 0
      uuid: GPU-7cd6d4d6-9fa8-13be-3c42-09a1b2280a02
      gpu_instances:
        - {profile: 1g.10gb, profile_id: 19, placement: {start: 0, size: 1},
           compute_instances: [{profile: 1g.10gb, profile_id: 0}]}
reboot_required:
  description:
    - Whether a GPU keeps a MIG mode change pending because it could not be reset; a reboot applies the mode,
      and running the module again afterwards creates the instances.
  returned: always
  type: bool
  sample: false
reset_needed:
  description:
    - The indices of the GPUs whose planned MIG mode change may wait for a GPU reset (Ampere; Hopper and later apply
      the mode at once), in check mode too, so that a caller can decide before any change whether a reset or a
      reboot is allowed. The driver resets an idle GPU by itself, so the reset may turn out unneeded.
  returned: always
  type: list
  elements: int
  sample: [0, 1]
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible.module_utils.common.yaml import HAS_YAML

from ansible_collections.onprem.gpu.plugins.module_utils._commands import find_command
from ansible_collections.onprem.gpu.plugins.module_utils._mig_config import MigConfigError, names_subsystems, parse_configs, render_export, resolve_layout
from ansible_collections.onprem.gpu.plugins.module_utils._mig_planner import (
    LayoutError,
    apply_plans,
    busy_gpus,
    gpus_needing_reset,
    busy_message,
    plan_node,
    planned_actions,
    profiles_needed,
    report_gpu_instances,
    report_gpus,
    summarize,
)
from ansible_collections.onprem.gpu.plugins.module_utils._mig_profiles import table_disagreements
from ansible_collections.onprem.gpu.plugins.module_utils._nvsmi import OPTIONAL_FIELDS
from ansible_collections.onprem.gpu.plugins.module_utils._nvsmi_mig import MigCommandError, NvidiaSmi

if HAS_YAML:
    from yaml import SafeLoader, YAMLError
    from yaml import load as load_yaml
    from yaml.constructor import ConstructorError

    class UniqueKeyLoader(SafeLoader):  # pylint: disable=too-many-ancestors
        """PyYAML's safe loader, refusing a mapping that repeats a key (the YAML spec requires keys to be unique;
        PyYAML keeps the last value, so a layout written twice would silently apply its second definition). Keys a
        merge (``<<``) brings in may still be overridden, as YAML's merge key allows."""

        def construct_mapping(self, node, deep=False):
            seen = set()
            for key_node, _value in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=deep)
                if isinstance(key, (str, int, float, bool)) and key in seen:
                    raise ConstructorError(None, None, f"the key {key!r} appears twice in one mapping", key_node.start_mark)
                seen.add(key if isinstance(key, (str, int, float, bool)) else id(key_node))
            return super().construct_mapping(node, deep=deep)


def read_config_file(module, path):
    """Return the parsed YAML document of ``config_file``; fail the task when it cannot be read."""
    if not HAS_YAML:
        module.fail_json(msg=missing_required_lib("PyYAML", reason="to read config_file"))
    try:
        with open(path, encoding="utf-8") as config:
            return load_yaml(config, Loader=UniqueKeyLoader)
    except OSError as error:
        module.fail_json(msg=f"The MIG configuration file {path} cannot be read: {error.strerror}.")
    except YAMLError as error:
        module.fail_json(msg=f"The MIG configuration file {path} is not valid YAML: {' '.join(str(error).split())}.")


def find_nvidia_smi(module):
    """Return the nvidia-smi to run; fail the task when it is absent, since nothing can be read without it."""
    wanted = module.params["nvidia_smi"]
    found = find_command(module, wanted)
    if found is None:
        module.fail_json(msg=f"{wanted} was not found, so no MIG layout can be read or applied.")
    return found


def refuse_busy_gpus(module, smi, plans):
    """Read the compute processes when a change may disturb them; refuse busy GPUs unless force. Return the processes."""
    if not any(plan.disruptive for plan in plans):
        return []
    processes = smi.compute_apps()
    busy = busy_gpus(plans, processes)
    if busy and not module.params["force"]:
        module.fail_json(msg=busy_message(busy) + " Stop them, or set force=true to change these GPUs anyway.")
    if busy:
        module.warn(busy_message(busy) + " They are changed anyway because force=true.")
    return processes


def export(report, gpus):
    """Render the MIG-capable GPUs of a ``gpus`` result like ``nvidia-mig-parted export``."""
    capable = {gpu["index"] for gpu in gpus if gpu["mig_capable"]}
    return render_export([(gpu["index"], gpu["mig_enabled"], gpu["mig_devices"]) for gpu in report if gpu["index"] in capable])


def main():
    module = AnsibleModule(
        argument_spec=dict(
            selected=dict(type="str", required=True),
            config_file=dict(type="path"),
            mig_configs=dict(type="dict"),
            nvidia_smi=dict(type="str", default="nvidia-smi"),
            force=dict(type="bool", default=False),
            strict=dict(type="bool", default=True),
            reset=dict(type="bool", default=True),
        ),
        mutually_exclusive=[("config_file", "mig_configs")],
        required_one_of=[("config_file", "mig_configs")],
        supports_check_mode=True,
    )
    layout = module.params["selected"]
    document = read_config_file(module, module.params["config_file"]) if module.params["config_file"] else module.params["mig_configs"]
    smi = NvidiaSmi(find_nvidia_smi(module), lambda argv: module.run_command(argv, environ_update={"LC_ALL": "C"}))
    models = {}
    try:
        configs = parse_configs(document)
        # The subsystem ids are read, in the same call, only when a device filter of the layout names one.
        extra_fields = (OPTIONAL_FIELDS["pci_sub_device_id"],) if names_subsystems(configs, layout) else ()
        gpus, instances = smi.read_node(extra_fields=extra_fields)
        wanted = resolve_layout(configs, layout, gpus, strict=module.params["strict"])
        # The driver's profile list is read only when instances must be planned, never on a run that changes nothing.
        models = smi.read_profiles(gpus) if profiles_needed(gpus, instances, wanted) else {}
        for disagreement in table_disagreements(models):
            module.warn(disagreement)
        plans = plan_node(layout, gpus, instances, wanted, models)
        processes = refuse_busy_gpus(module, smi, plans)
        outcome = None if module.check_mode else apply_plans(plans, smi, processes, reset=module.params["reset"])
        final_gpus, final_instances = gpus, instances
        if outcome and outcome.actions:
            # The modes can only differ from the first read where a mode was requested or a GPU reset.
            modes_touched = any(plan.request_mode is not None or plan.mode_changes for plan in plans)
            final_gpus, final_instances = smi.read_node(None if modes_touched else gpus)
    except (MigConfigError, LayoutError) as error:
        module.fail_json(msg=str(error))
    except MigCommandError as error:
        module.fail_json(msg=str(error), cmd=error.argv, rc=error.rc, stdout=error.stdout, stderr=error.stderr)

    failed, msg = summarize(layout, plans, outcome, final_gpus, final_instances)
    result = dict(
        changed=bool(outcome.actions) if outcome else any(plan.changed for plan in plans),
        msg=msg,
        gpus=report_gpus(final_gpus, final_instances, plans if outcome is None else (), models),
        actions=outcome.actions if outcome else planned_actions(plans),
        reboot_required=bool(outcome and outcome.blocked),
        reset_needed=gpus_needing_reset(plans),
        gpu_instances=report_gpu_instances(final_gpus, final_instances, plans),
    )
    if module._diff:
        result["diff"] = dict(
            before_header="MIG layout before",
            before=export(report_gpus(gpus, instances, models=models), gpus),
            after_header=f"MIG layout after {layout}",
            after=export(result["gpus"], gpus),
        )
    if failed and outcome.failure is not None:
        error = outcome.failure
        module.fail_json(cmd=error.argv, rc=error.rc, stdout=error.stdout, stderr=error.stderr, **result)
    if failed:
        module.fail_json(**result)
    if result["reboot_required"]:
        module.warn(msg)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
