# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Adding a GPU model is one catalogue entry for the collection and one data entry for the lab (docs/gpu-models.md).

A fictitious model goes into each in one place, the collection's catalogue (monkeypatched) and a copy of the lab's
gpu_models.json, and everything that reads them knows it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.onprem.gpu.plugins.filter.gpu_models import gpu_model_busbw, gpu_model_info
from ansible_collections.onprem.gpu.plugins.module_utils import _gpu_models
from ansible_collections.onprem.gpu.plugins.module_utils._addons import model_short_name
from ansible_collections.onprem.gpu.plugins.module_utils._mig_planner import _needs_reset
from ansible_collections.onprem.gpu.plugins.module_utils._mig_profiles import mig_model

REPOSITORY = Path(__file__).resolve().parents[2]
NVIDIA_SMI = REPOSITORY / "lab" / "doubles" / "nvidia_smi" / "nvidia-smi"
LAB_MODELS = REPOSITORY / "lab" / "doubles" / "gpu_models.json"
NAME = "NVIDIA X900 96GB"
PROFILES = ("1g.12gb", "1g.12gb+me", "1g.24gb", "2g.24gb", "3g.48gb", "4g.48gb", "7g.96gb")


@pytest.fixture(name="catalogue")
def catalogue_fixture(monkeypatch):
    entry = dict(
        _gpu_models.GPU_MODELS["NVIDIA H100 80GB HBM3"],
        name=NAME, short_name="x900", pci_device_id="0x299910DE", memory_total_mib=98304, compute_capability="9.9",
        mig=_gpu_models._mig_seven_by_eight(*PROFILES), nvlink_busbw=600, nvlink_ring_busbw=450,
    )
    monkeypatch.setitem(_gpu_models.GPU_MODELS, NAME, entry)


def test_the_collection_knows_a_model_from_its_catalogue_entry(catalogue):
    info = gpu_model_info(NAME)
    assert (info["known"], info["pci_device_id"], info["memory_total_mib"], info["interconnect"]) == (True, "0x299910DE", 98304, "Hopper/NVSwitch")
    assert NAME in info["known_models"]
    assert mig_model(NAME).profile_names() == list(PROFILES) == info["mig_profiles"]
    assert mig_model(NAME).profile("3g.48gb").starts == (0, 4)
    assert _needs_reset(NAME) is False
    assert gpu_model_busbw(NAME, "nvlink_busbw") == 600.0
    assert gpu_model_busbw(NAME, "nvlink_ring_busbw", {"Hopper/NVSwitch": 300}) == 300.0
    assert model_short_name(NAME) == "x900"


def test_the_lab_doubles_know_a_model_from_its_data_entry(tmp_path):
    document = json.loads(LAB_MODELS.read_text(encoding="utf-8"))
    document["models"][NAME] = dict(
        document["models"]["NVIDIA H100 80GB HBM3"], pci_device_id="0x299910DE", memory_total_mib=98304, compute_cap="9.9",
    )
    models = tmp_path / "gpu_models.json"
    models.write_text(json.dumps(document), encoding="utf-8")
    (tmp_path / "hardware.json").write_text(json.dumps({"gpu_model": NAME, "gpu_count": 2, "seed": "x900"}), encoding="utf-8")
    (tmp_path / "driver.json").write_text(json.dumps({"driver_version": "580.65.06", "cuda_version": "13.0"}), encoding="utf-8")
    environment = dict(
        os.environ, LAB_GPU_MODELS=str(models), NVSMI_DOUBLE_HARDWARE=str(tmp_path / "hardware.json"),
        NVSMI_DOUBLE_DRIVER=str(tmp_path / "driver.json"), NVSMI_DOUBLE_STATE=str(tmp_path / "state.json"),
    )

    def nvidia_smi(*arguments):
        result = subprocess.run([sys.executable, str(NVIDIA_SMI), *arguments], env=environment, capture_output=True, text=True, timeout=60, check=False)
        assert result.returncode == 0, result
        return result.stdout.splitlines()

    listed = nvidia_smi("-L")
    assert len(listed) == 2 and all(line.startswith(f"GPU {index}: {NAME} (UUID: GPU-") for index, line in enumerate(listed))
    assert nvidia_smi("--query-gpu=name,pci.device_id,memory.total,compute_cap", "--format=csv,noheader,nounits") == [
        f"{NAME}, 0x299910DE, 98304, 9.9"
    ] * 2
    # Without the data entry the double refuses the model, naming the file's models.
    environment["LAB_GPU_MODELS"] = str(LAB_MODELS)
    refused = subprocess.run([sys.executable, str(NVIDIA_SMI), "-L"], env=environment, capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode != 0 and f"gpu_model {NAME!r}" in refused.stderr
