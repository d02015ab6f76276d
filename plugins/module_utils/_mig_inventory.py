# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A node's MIG layout checked against what the inventory says of the node, before any host is contacted.

The inventory names the node's GPU model (``node_gpu_model``) and count (``node_gpu_count``), the layout it takes
(``mig_layout``) and the site's layouts (mig-parted v1). The checks are those ``mig_config`` makes on the node,
done from the inventory: the layout name, the format, GPU indices the node lacks, profiles its model does not have,
instances that do not fit one GPU.
A model outside the collection's tables is checked for the name and format only: its driver lists its profiles,
and ``mig_config`` checks them on the node before its first change.

Used by the cluster_addons render (flavors and capacities) and by the mig role's preflight, so that both refuse the
same inventories with the same sentences. Plain Python without Ansible imports.
"""

from __future__ import annotations

from ansible_collections.onprem.gpu.plugins.module_utils._gpu_models import model_info
from ansible_collections.onprem.gpu.plugins.module_utils._mig_config import MigConfigError, parse_configs, resolve_layout
from ansible_collections.onprem.gpu.plugins.module_utils._mig_planner import LayoutError, check_layout
from ansible_collections.onprem.gpu.plugins.module_utils._mig_profiles import mig_model


def inventory_layout(host, model, gpu_count, layout, layouts, strict=True, unknown_model_ok=False):
    """Return ``(wanted, problem)``: ``{gpu index: WantedGpu}`` and None, or ``{}`` and one sentence.

    ``layouts``: a mig-parted v1 document or its bare ``mig-configs`` mapping. With ``unknown_model_ok``, a model
    the catalogue lacks passes with the name and format checked only (``wanted`` is then ``{}``).
    """
    info = model_info(model)
    if info is None and unknown_model_ok:
        try:
            configs = parse_configs(layouts)
        except MigConfigError as error:
            return {}, f"Node {host}, MIG layout {layout!r}: {error}"
        if layout not in configs:
            return {}, _undefined(host, layout, configs)
        return {}, None
    if info is None or not info["mig_capable"]:
        return {}, f"Node {host} has MIG layout {layout!r}, but its GPU model {model!r} does not support MIG."
    configs = layouts.get("mig-configs", layouts) if isinstance(layouts, dict) else layouts
    if not isinstance(configs, dict) or layout not in configs:
        return {}, _undefined(host, layout, configs if isinstance(configs, dict) else {})
    gpus = [{"index": index, "name": model, "mig_capable": True, "pci_device_id": info["pci_device_id"]} for index in range(int(gpu_count))]
    try:
        wanted = resolve_layout(parse_configs(layouts), layout, gpus, strict=strict)
    except MigConfigError as error:
        return {}, f"Node {host}, MIG layout {layout!r}: {error}"
    table = mig_model(model)
    for gpu in wanted.values() if table is not None else ():
        unknown = sorted(profile for profile in gpu.mig_devices if table.profile(profile) is None)
        if unknown:
            return {}, (
                f"MIG layout {layout!r} of node {host} names profile {unknown[0]} that an {model} does not offer "
                f"(it offers {', '.join(table.profile_names())})."
            )
    # As mig_config checks it on the node: nine 1g.10gb on an H100 (at most seven fit) would count as nine instances.
    for index, gpu in sorted(wanted.items()) if table is not None else ():
        try:
            check_layout(table, gpu.mig_devices if gpu.mig_enabled else {})
        except LayoutError as error:
            return {}, f"MIG layout {layout!r} of node {host} cannot be applied to GPU {index}, an {model}: {error}."
    return wanted, None


def _undefined(host, layout, configs):
    return f"Node {host} has mig_layout {layout!r}, which mig_layouts does not define (it defines {_names(configs)})."


def _names(mapping):
    return ", ".join(sorted(str(name) for name in mapping)) if mapping else "none"
