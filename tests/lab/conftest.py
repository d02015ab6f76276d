# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The hardware doubles that these tests copy out of the checkout find the lab's GPU models through LAB_GPU_MODELS.

On a lab node the stand-in packages install lab/doubles/gpu_models.json beside each double; a test that runs a copy of a
double elsewhere points it at the checkout's file (a test may still set its own, as the fictitious-model test does).
"""

from __future__ import annotations

import os
from pathlib import Path

GPU_MODELS = Path(__file__).resolve().parents[2] / "lab" / "doubles" / "gpu_models.json"

os.environ.setdefault("LAB_GPU_MODELS", str(GPU_MODELS))
