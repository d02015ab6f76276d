# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Catalogue of the NVIDIA GPU models this collection knows, keyed by the name nvidia-smi prints.

Fields of each model:
- name: exactly as ``nvidia-smi --query-gpu=name`` prints it;
- pci_device_id: as ``--query-gpu=pci.device_id`` prints it (``0xDDDDVVVV``, the mig-parted device-filter format);
- memory_total_mib: as ``--query-gpu=memory.total`` prints it with ``nounits``;
- architecture, compute_capability: the GPU generation;
- mig_capable: whether the model supports Multi-Instance GPU;
- form_factor: ``sxm`` (baseboard module) or ``pcie`` (card);
- nvswitch: True for SXM models, whose 8-GPU HGX baseboards carry NVSwitches and so need Fabric Manager;
- open_kernel_modules: ``required`` (Grace Hopper and Blackwell run only on the open kernel modules),
  ``recommended`` (Hopper runs on either flavour; NVIDIA recommends the open one) or ``supported``
  (Turing, Ampere and Ada run on either flavour). Source: NVIDIA, "NVIDIA transitions fully towards
  open-source GPU kernel modules" (2024).

Plain data without Ansible imports, so that modules, filters and tests share it.
"""

from __future__ import annotations

_AMPERE = {"architecture": "Ampere", "compute_capability": "8.0", "open_kernel_modules": "supported"}
_ADA_LOVELACE = {"architecture": "Ada Lovelace", "compute_capability": "8.9", "open_kernel_modules": "supported"}
_HOPPER = {"architecture": "Hopper", "compute_capability": "9.0", "open_kernel_modules": "recommended"}

_SXM_BASEBOARD = {"form_factor": "sxm", "nvswitch": True}
_PCIE_CARD = {"form_factor": "pcie", "nvswitch": False}

_MODELS = (
    dict(_HOPPER, **_SXM_BASEBOARD, name="NVIDIA H100 80GB HBM3", pci_device_id="0x233010DE", memory_total_mib=81559, mig_capable=True),
    dict(_HOPPER, **_PCIE_CARD, name="NVIDIA H100 PCIe", pci_device_id="0x233110DE", memory_total_mib=81559, mig_capable=True),
    dict(_HOPPER, **_PCIE_CARD, name="NVIDIA H100 NVL", pci_device_id="0x232110DE", memory_total_mib=95830, mig_capable=True),
    dict(_HOPPER, **_SXM_BASEBOARD, name="NVIDIA H200", pci_device_id="0x233510DE", memory_total_mib=143771, mig_capable=True),
    dict(_AMPERE, **_SXM_BASEBOARD, name="NVIDIA A100-SXM4-80GB", pci_device_id="0x20B210DE", memory_total_mib=81920, mig_capable=True),
    dict(_AMPERE, **_SXM_BASEBOARD, name="NVIDIA A100-SXM4-40GB", pci_device_id="0x20B010DE", memory_total_mib=40960, mig_capable=True),
    dict(_AMPERE, **_PCIE_CARD, name="NVIDIA A100 80GB PCIe", pci_device_id="0x20B510DE", memory_total_mib=81920, mig_capable=True),
    dict(_AMPERE, **_PCIE_CARD, name="NVIDIA A30", pci_device_id="0x20B710DE", memory_total_mib=24576, mig_capable=True),
    dict(_ADA_LOVELACE, **_PCIE_CARD, name="NVIDIA L40S", pci_device_id="0x26B910DE", memory_total_mib=46068, mig_capable=False),
)

GPU_MODELS = {model["name"]: model for model in _MODELS}


def model_info(name):
    """Return a copy of the catalogue entry for the model nvidia-smi calls ``name``, or None if unknown."""
    model = GPU_MODELS.get(name)
    return dict(model) if model is not None else None


def known_model_names():
    """Return the names of all catalogued models, sorted."""
    return sorted(GPU_MODELS)
