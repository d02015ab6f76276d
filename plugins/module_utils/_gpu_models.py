# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The catalogue of the NVIDIA GPU models this collection knows, keyed by the name nvidia-smi prints: one entry per model.

Every fact the collection holds about a model lives in its entry, and modules, filters, roles and the cluster add-ons
render read it from here (``_mig_profiles`` builds its MIG tables from the ``mig`` field). Adding a model is adding one
entry to ``_MODELS``. Fields of each entry:

- name: exactly as ``nvidia-smi --query-gpu=name`` prints it;
- short_name: the platform's name for the model in flavor and object names (``h100``);
- pci_device_id: as ``--query-gpu=pci.device_id`` prints it (``0xDDDDVVVV``, the mig-parted device-filter format);
- memory_total_mib: as ``--query-gpu=memory.total`` prints it with ``nounits``;
- architecture, compute_capability: the GPU generation;
- mig: the Multi-Instance GPU geometry (``memory_slices``, ``compute_slices`` and the GPU-instance ``profiles`` as
  ``(name, nvidia-smi profile ID, compute slices, memory slices, maximum count, placement starts)`` in ``-lgip``
  order), or None for a model without MIG. Names, IDs, counts and placements: NVIDIA MIG User Guide, "Supported MIG
  Profiles", and recorded ``mig -lgip``/``-lgipp`` outputs (the unit tests check them against those recordings);
- mig_mode_change_needs_reset: whether a MIG mode change stays pending until the GPU is reset (Ampere keeps it
  pending; Hopper and later apply it at once: MIG User Guide, "Enable MIG Mode");
- form_factor: ``sxm`` (baseboard module) or ``pcie`` (card);
- nvswitch: True for SXM models, whose 8-GPU HGX baseboards carry NVSwitches and so need Fabric Manager;
- nvlinks: NVLink links per GPU on its usual board: 18 on H100/H200 SXM (NVLink 4), 12 on A100 SXM4 (NVLink 3), 0 on a
  PCIe card without a bridge (NVIDIA H100 and A100 Tensor Core GPU datasheets);
- pcie_generation, pcie_width: the PCIe link the GPU's slot should train to (datasheets: Gen5 x16 for Hopper, Gen4 x16
  for Ampere and Ada Lovelace); an idle GPU lowers its link generation, so judge the generation under load or by max;
- open_kernel_modules: ``required`` (Grace Hopper and Blackwell run only on the open kernel modules),
  ``recommended`` (Hopper runs on either flavour; NVIDIA recommends the open one) or ``supported``
  (Turing, Ampere and Ada run on either flavour). Source: NVIDIA, "NVIDIA transitions fully towards
  open-source GPU kernel modules" (2024);
- nvlink_busbw: the peak all-reduce busbw (GB/s) of one healthy 8-GPU node alone; nvlink_ring_busbw: what its NVLink
  lets a ring carry, the cap per node across nodes and the expectation of a node alone without NVLink SHARP (NVLS).
  H100 with NVLS ~480 and its ring ~370: NVIDIA/nccl-tests#212; A100 228-235: Azure/azurehpc-health-checks
  ``conf/nd96asr_v4.conf``; the PCIe values are estimates (no NVSwitch, so PCIe limits).

Plain data without Ansible imports, so that modules, filters and tests share it.
"""

from __future__ import annotations

# The kinds of busbw threshold each entry carries, as the network_benchmark role names its overrides.
BUSBW_KINDS = ("nvlink_busbw", "nvlink_ring_busbw")

_AMPERE = {"architecture": "Ampere", "compute_capability": "8.0", "open_kernel_modules": "supported",
           "mig_mode_change_needs_reset": True, "pcie_generation": 4}
_ADA_LOVELACE = {"architecture": "Ada Lovelace", "compute_capability": "8.9", "open_kernel_modules": "supported",
                 "mig_mode_change_needs_reset": False, "pcie_generation": 4}
_HOPPER = {"architecture": "Hopper", "compute_capability": "9.0", "open_kernel_modules": "recommended",
           "mig_mode_change_needs_reset": False, "pcie_generation": 5}

_SXM_BASEBOARD = {"form_factor": "sxm", "nvswitch": True, "pcie_width": 16}
_PCIE_CARD = {"form_factor": "pcie", "nvswitch": False, "pcie_width": 16, "nvlinks": 0}


def _mig_seven_by_eight(one, one_media, one_double, two, three, four, seven):
    """MIG on 7 compute and 8 memory slices (A100, H100, H200): the profile names differ between models, the geometry does not."""
    return {
        "memory_slices": 8,
        "compute_slices": 7,
        "profiles": (
            (one, 19, 1, 1, 7, (0, 1, 2, 3, 4, 5, 6)),
            (one_media, 20, 1, 1, 1, (0, 1, 2, 3, 4, 5, 6)),
            (one_double, 15, 1, 2, 4, (0, 2, 4, 6)),
            (two, 14, 2, 2, 3, (0, 2, 4)),
            (three, 9, 3, 4, 2, (0, 4)),
            (four, 5, 4, 4, 1, (0,)),
            (seven, 0, 7, 8, 1, (0,)),
        ),
    }


_A100_80GB_MIG = _mig_seven_by_eight("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")

_MODELS = (
    dict(_HOPPER, **_SXM_BASEBOARD, name="NVIDIA H100 80GB HBM3", short_name="h100", pci_device_id="0x233010DE",
         memory_total_mib=81559, nvlinks=18, mig=_A100_80GB_MIG, nvlink_busbw=480, nvlink_ring_busbw=370),
    dict(_HOPPER, **_PCIE_CARD, name="NVIDIA H100 PCIe", short_name="h100-pcie", pci_device_id="0x233110DE",
         memory_total_mib=81559, mig=_A100_80GB_MIG, nvlink_busbw=40, nvlink_ring_busbw=40),
    dict(_HOPPER, **_PCIE_CARD, name="NVIDIA H100 NVL", short_name="h100-nvl", pci_device_id="0x232110DE",
         memory_total_mib=95830, mig=_mig_seven_by_eight("1g.12gb", "1g.12gb+me", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"),
         nvlink_busbw=40, nvlink_ring_busbw=40),
    dict(_HOPPER, **_SXM_BASEBOARD, name="NVIDIA H200", short_name="h200", pci_device_id="0x233510DE",
         memory_total_mib=143771, nvlinks=18,
         mig=_mig_seven_by_eight("1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"),
         nvlink_busbw=480, nvlink_ring_busbw=370),
    dict(_AMPERE, **_SXM_BASEBOARD, name="NVIDIA A100-SXM4-80GB", short_name="a100", pci_device_id="0x20B210DE",
         memory_total_mib=81920, nvlinks=12, mig=_A100_80GB_MIG, nvlink_busbw=235, nvlink_ring_busbw=235),
    dict(_AMPERE, **_SXM_BASEBOARD, name="NVIDIA A100-SXM4-40GB", short_name="a100-40gb", pci_device_id="0x20B010DE",
         memory_total_mib=40960, nvlinks=12,
         mig=_mig_seven_by_eight("1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
         nvlink_busbw=235, nvlink_ring_busbw=235),
    dict(_AMPERE, **_PCIE_CARD, name="NVIDIA A100 80GB PCIe", short_name="a100-pcie", pci_device_id="0x20B510DE",
         memory_total_mib=81920, mig=_A100_80GB_MIG, nvlink_busbw=20, nvlink_ring_busbw=20),
    # A30 has 4 compute and 4 memory slices, and its own profile IDs; 2g.12gb+me since R525 (MIG User Guide, "A30 MIG
    # Profiles"), with the ID and placements an R535 driver lists.
    dict(_AMPERE, **_PCIE_CARD, name="NVIDIA A30", short_name="a30", pci_device_id="0x20B710DE", memory_total_mib=24576,
         mig={"memory_slices": 4, "compute_slices": 4, "profiles": (
             ("1g.6gb", 14, 1, 1, 4, (0, 1, 2, 3)),
             ("1g.6gb+me", 21, 1, 1, 1, (0, 1, 2, 3)),
             ("2g.12gb", 5, 2, 2, 2, (0, 2)),
             ("2g.12gb+me", 6, 2, 2, 1, (0, 2)),
             ("4g.24gb", 0, 4, 4, 1, (0,)),
         )},
         nvlink_busbw=20, nvlink_ring_busbw=20),
    dict(_ADA_LOVELACE, **_PCIE_CARD, name="NVIDIA L40S", short_name="l40s", pci_device_id="0x26B910DE",
         memory_total_mib=46068, mig=None, nvlink_busbw=20, nvlink_ring_busbw=20),
)

GPU_MODELS = {model["name"]: model for model in _MODELS}


def model_info(name):
    """Return what the catalogue says about the model nvidia-smi calls ``name``, or None if unknown.

    A new dict: the entry's facts without its MIG geometry, plus ``mig_capable``, ``mig_profiles`` (the GPU-instance
    profile names, empty without MIG) and ``interconnect`` (``Hopper/NVSwitch``, ``Ampere/PCIe`` ...: the key a
    busbw threshold may be overridden under besides the model's name).
    """
    model = GPU_MODELS.get(name)
    if model is None:
        return None
    info = {key: value for key, value in model.items() if key != "mig"}
    info["mig_capable"] = model["mig"] is not None
    info["mig_profiles"] = [profile[0] for profile in model["mig"]["profiles"]] if model["mig"] else []
    info["interconnect"] = f"{model['architecture']}/{'NVSwitch' if model['nvswitch'] else 'PCIe'}"
    return info


def mig_geometry(name):
    """Return the ``mig`` field of the model nvidia-smi calls ``name``, or None when the model is unknown or has no MIG."""
    model = GPU_MODELS.get(name)
    return model["mig"] if model is not None else None


def known_model_names():
    """Return the names of all catalogued models, sorted."""
    return sorted(GPU_MODELS)


def expected_busbw(name, kind, overrides=None):
    """Return the busbw threshold ``kind`` (one of BUSBW_KINDS) of an 8-GPU node of the model nvidia-smi calls ``name``.

    ``overrides`` (the inventory's ``network_benchmark_<kind>``) are merged over the catalogue: a value under the model's
    name wins, then one under its interconnect (``Hopper/NVSwitch``), then the catalogue's. Returns a float, or None for
    an unknown model that no override names. Raises ValueError, naming the variable and key, when an override is not a
    number above 0.
    """
    if kind not in BUSBW_KINDS:
        raise ValueError(f"The busbw threshold kind must be one of {', '.join(BUSBW_KINDS)}, not {kind!r}.")
    info = model_info(name)
    for key in (name, info["interconnect"] if info else None):
        if key is not None and key in (overrides or {}):
            value = overrides[key]
            try:
                number = float(value) if not isinstance(value, bool) else 0.0
            except (TypeError, ValueError):
                number = 0.0
            if not number > 0:
                raise ValueError(f"network_benchmark_{kind}[{key!r}] must be a number of GB/s above 0, not {value!r}.")
            return number
    return float(GPU_MODELS[name][kind]) if info else None
