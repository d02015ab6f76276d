# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The MIG geometry of each GPU model, from the catalogue or as the driver describes it with ``mig -lgip`` and ``-lgipp``.

A GPU instance (GI) occupies ``memory_slices`` consecutive memory slices starting at one of the profile's
placement starts; two instances conflict exactly when their memory intervals overlap. ``profile_id`` is the ID
``nvidia-smi mig -lgip`` prints and ``-cgi`` takes (19, 15, 14 ...), not the NVML enum.

The driver is the authority, as in mig-parted, which reads the profiles of each GPU from NVML: ``driver_model``
builds a MigModel from what ``-lgip`` and ``-lgipp`` print, so that a model the catalogue does not know works
without a code change. The built-in tables (the ``mig`` field of each model in the ``_gpu_models`` catalogue) serve to
plan before MIG mode is on, on drivers that list profiles only with MIG on (R535 and older), and to check the driver's
answer: a profile the table knows with the same geometry keeps the table's name, and the driver's name (``3g.39gb`` for
``3g.40gb`` on some releases) is an alias.

Logic without Ansible imports, so that modules and tests share it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ansible_collections.onprem.gpu.plugins.module_utils._gpu_models import known_model_names, mig_geometry

# Compute-instance sizes a GPU instance of each compute size can be split into, besides the full one
# (``-lcip`` on A100/H100: a 3g GI offers 1c and 2c, a 4g GI 1c and 2c, a 7g GI 1c to 4c).
_PARTIAL_COMPUTE_SIZES = {1: (), 2: (1,), 3: (1, 2), 4: (1, 2), 7: (1, 2, 3, 4)}

# One line of ``nvidia-smi mig -lgipp``: "GPU  0 Profile ID 19 Placements: {0,1,2,3,4,5,6}:1", with "Placement :"
# when there is one placement (mig.md 3.1). Not a table: the words name the fields.
_PLACEMENT_LINE = re.compile(r"^GPU\s+(?P<gpu>\d+)\s+Profile ID\s+(?P<profile>\d+)\s+Placements?\s*:\s*\{(?P<starts>[\d,\s]*)\}:(?P<size>\d+)\s*$")

_PROFILE_NAME = re.compile(r"^(?:(?P<compute>[0-9]+)c\.)?(?P<slices>[0-9]+)g\.(?P<memory>[0-9]+)gb(?P<attributes>[+-][A-Za-z][A-Za-z0-9.,]*)?$")


@dataclass(frozen=True)
class GpuInstanceProfile:
    """One GPU-instance profile of one GPU model."""

    name: str
    profile_id: int
    compute_slices: int
    memory_slices: int
    max_count: int
    starts: tuple
    # Other names the driver prints for the same profile (its memory figure drifts between releases).
    aliases: tuple = ()

    def compute_instance_names(self):
        """Return the names of the partial compute-instance profiles a GI of this profile offers (``1c.3g.40gb`` ...)."""
        return tuple(f"{size}c.{self.name}" for size in _PARTIAL_COMPUTE_SIZES.get(self.compute_slices, ()))


@dataclass(frozen=True)
class MigModel:
    """The MIG geometry of one GPU model: its slices and its GPU-instance profiles, in ``-lgip`` order."""

    gpu_name: str
    memory_slices: int
    compute_slices: int
    profiles: tuple

    def profile(self, name):
        """Return the GpuInstanceProfile called ``name`` (or one of its aliases) on this model, or None."""
        return next((profile for profile in self.profiles if name == profile.name or name in profile.aliases), None)

    def profile_by_id(self, profile_id):
        """Return the GpuInstanceProfile with nvidia-smi ID ``profile_id`` on this model, or None."""
        return next((profile for profile in self.profiles if profile.profile_id == profile_id), None)

    def profile_names(self):
        return [profile.name for profile in self.profiles]


def mig_model(gpu_name):
    """Return the MigModel of the GPU model nvidia-smi calls ``gpu_name``, from its catalogue entry (``_gpu_models``), or
    None when the catalogue does not know the model or the model has no MIG."""
    geometry = mig_geometry(gpu_name)
    if geometry is None:
        return None
    profiles = tuple(GpuInstanceProfile(*profile) for profile in geometry["profiles"])
    return MigModel(gpu_name, memory_slices=geometry["memory_slices"], compute_slices=geometry["compute_slices"], profiles=profiles)


def mig_model_names():
    """Return the names of the catalogued models that have MIG, sorted."""
    return [name for name in known_model_names() if mig_geometry(name) is not None]


def parse_placements(text):
    """Return ``{(gpu index, profile id): (starts, size)}`` from ``nvidia-smi mig -lgipp`` output; other lines are skipped."""
    placements = {}
    for line in text.splitlines():
        match = _PLACEMENT_LINE.match(line.strip())
        if match:
            starts = tuple(int(start) for start in match.group("starts").replace(" ", "").split(",") if start)
            placements[(int(match.group("gpu")), int(match.group("profile")))] = (starts, int(match.group("size")))
    return placements


def driver_model(gpu_name, rows, placements, table=None):
    """Return the MigModel the driver describes for one GPU, or None when it lists no profile that can be placed.

    ``rows``: the ``_nvsmi_mig.GpuInstanceProfileRow`` of that GPU in ``-lgip`` order (``name``, ``profile_id``,
    ``total``); ``placements``: ``{profile id: (starts, size)}`` from ``-lgipp``; ``table``: the built-in MigModel
    of the model, if any. A profile without placements, or whose name is not a MIG profile name, cannot be created
    at an explicit placement and is left out.
    """
    profiles = []
    for row in rows:
        placement = placements.get(row.profile_id)
        match = _PROFILE_NAME.match(row.name)
        if placement is None or not placement[0] or match is None or match.group("compute"):
            continue
        starts, size = placement
        compute = int(match.group("slices"))
        known = table.profile_by_id(row.profile_id) if table else None
        if known is not None and (known.compute_slices, known.memory_slices, known.starts) == (compute, size, starts):
            aliases = () if row.name == known.name else (row.name,)
            profiles.append(GpuInstanceProfile(known.name, row.profile_id, compute, size, row.total, starts, aliases))
        else:
            profiles.append(GpuInstanceProfile(row.name, row.profile_id, compute, size, row.total, starts))
    if not profiles:
        return None
    return MigModel(
        gpu_name,
        memory_slices=max(start + profile.memory_slices for profile in profiles for start in profile.starts),
        compute_slices=max(profile.compute_slices for profile in profiles),
        profiles=tuple(profiles),
    )


def table_disagreements(models):
    """Return one sentence per GPU model whose driver contradicts the built-in table, naming its GPUs and the profiles.

    ``models``: ``{gpu index: MigModel}`` as ``driver_model`` built them. A profile contradicts the table when the
    table has its ID with other compute slices, placements or maximum count; a drifted memory figure in the name
    with the same geometry is not a contradiction (it is an alias). The plan follows the driver either way.
    """
    indices_of = {}
    for index, model in sorted(models.items()):
        table = mig_model(model.gpu_name)
        differences = tuple(_difference(profile, table.profile_by_id(profile.profile_id)) for profile in model.profiles) if table else ()
        differences = tuple(text for text in differences if text)
        if differences:
            indices_of.setdefault((model.gpu_name, differences), []).append(index)
    return [
        f"The driver of GPU {', '.join(str(index) for index in indices)}, an {gpu_name}, contradicts this collection's MIG profile table: "
        f"{'; '.join(differences)}; the plan follows the driver."
        for (gpu_name, differences), indices in indices_of.items()
    ]


def _difference(profile, known):
    """Describe how the driver's ``profile`` differs from the table's profile of the same ID, or return None."""
    if known is None or (known.compute_slices, known.memory_slices, known.starts, known.max_count) == (
        profile.compute_slices,
        profile.memory_slices,
        profile.starts,
        profile.max_count,
    ):
        return None
    return f"it lists profile ID {profile.profile_id} as {_geometry_text(profile)} where the table has {_geometry_text(known)}"


def _geometry_text(profile):
    starts = ",".join(str(start) for start in profile.starts)
    return f"{profile.name} at {{{starts}}}:{profile.memory_slices}, at most {profile.max_count}"


def is_profile_name(name):
    """Tell whether ``name`` is written like a MIG profile (``[<C>c.]<G>g.<GB>gb[+attr|-attr]``, as mig-parted parses it)."""
    return isinstance(name, str) and _PROFILE_NAME.match(name) is not None


def is_full_compute_instance(name):
    """Tell whether a compute-instance name such as ``3g.40gb`` (not ``1c.3g.40gb``) uses its whole GPU instance."""
    match = _PROFILE_NAME.match(name)
    return match is not None and match.group("compute") in (None, match.group("slices"))


def mig_device_name(profile):
    """Return a MIG profile as the NVIDIA device plugin and GPU feature discovery write it in names: ``1g.10gb.me``.

    A ``+`` cannot stand in a resource name, a label or a DNS name, so both write it ``.`` (k8s-device-plugin
    ``internal/rm/rm.go`` ``AddDefaultResourcesToConfig`` and ``internal/resource/nvml-mig-device.go`` ``GetName``).
    """
    return profile.replace("+", ".")


def mig_resource(profile):
    """Return the extended resource of a MIG profile under the mixed strategy: ``nvidia.com/mig-1g.10gb.me`` for ``1g.10gb+me``.

    The device plugin registers ``mig-<profile>`` for each GPU-instance profile and, since v0.20.0 (the release GPU
    Operator v26.7.0 pins), files a MIG device only under the pattern its profile matches whole, so a ``+me`` instance
    counts under its own resource, not under the plain profile's.
    """
    return "nvidia.com/mig-" + mig_device_name(profile)
