# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Plan the smallest change from a node's MIG state to a wanted layout, and carry it out step by step.

Unlike mig-parted, which destroys every instance of a GPU whose layout differs and lets the driver place the
new ones, the plan keeps every GPU instance the wanted layout can keep (same profile at the same placement,
holding one full compute instance), destroys only the rest, and gives each new instance an explicit placement
found by an exhaustive search over the memory-slice axis. The search also proves a layout infeasible before
anything runs. GPU-instance IDs are never predicted: the driver hands them out and they are read back.

Plain Python without Ansible imports: ``apply_plans`` drives an ``NvidiaSmi`` from ``_nvsmi_mig``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from itertools import combinations

from ansible_collections.onprem.gpu.plugins.module_utils._gpu_models import model_info
from ansible_collections.onprem.gpu.plugins.module_utils._mig_profiles import is_full_compute_instance, mig_model
from ansible_collections.onprem.gpu.plugins.module_utils._nvsmi_mig import (
    IN_USE,
    INSUFFICIENT_RESOURCES,
    INVALID_ARGUMENT,
    MODE_PENDING,
    NO_PERMISSION,
    PERSISTENCED,
    RESET_NOT_SUPPORTED,
    MigCommandError,
    failure_kind,
    reset_refusals,
)

ENABLED = "Enabled"

# What a failure of each kind most likely means, for the operator reading the message.
_FAILURE_HINTS = {
    INSUFFICIENT_RESOURCES: "the driver found no room where the plan placed an instance, so something else changed the GPU meanwhile",
    IN_USE: "a process or driver client still uses what was to be destroyed or switched",
    NO_PERMISSION: "changing MIG needs root, so run the task with become",
    INVALID_ARGUMENT: "this driver refuses the profile or the explicit placement, which older drivers do not take",
}


class LayoutError(ValueError):
    """A wanted layout cannot exist on a GPU; the message is one sentence."""


@dataclass(frozen=True)
class NewInstance:
    """A GPU instance to create at an explicit placement on the memory-slice axis."""

    profile_id: int
    name: str
    start: int
    size: int


@dataclass(frozen=True)
class LayoutChange:
    """What to do to one GPU's instances: keep some, destroy others, create new ones, complete kept ones."""

    keep: tuple = ()
    destroy: tuple = ()
    create: tuple = ()
    add_compute: tuple = ()

    def __bool__(self):
        return bool(self.destroy or self.create or self.add_compute)


@dataclass(frozen=True)
class GpuPlan:
    """The change one GPU needs: ``request_mode`` is the mode to ask for (None: already pending), then the layout."""

    gpu: dict
    model: object
    instances: tuple
    mig_enabled: bool
    mig_devices: dict
    request_mode: object
    layout: LayoutChange

    @property
    def index(self):
        return self.gpu["index"]

    @property
    def mode_changes(self):
        return (self.gpu["mig_mode_current"] == ENABLED) != self.mig_enabled

    @property
    def changed(self):
        return self.request_mode is not None or self.mode_changes or bool(self.layout)

    @property
    def disruptive(self):
        """Whether the change can disturb running work: a mode change or a destroyed instance."""
        return self.request_mode is not None or self.mode_changes or bool(self.layout.destroy)


@dataclass
class Outcome:
    """What apply_plans did: the steps, why each GPU whose mode change waits for a reset could not be reset, and the
    failure (an ``_nvsmi_mig.MigCommandError``) if one stopped it."""

    actions: list = field(default_factory=list)
    touched: set = field(default_factory=set)
    blocked: dict = field(default_factory=dict)
    failure: object = None
    failed_gpu: object = None
    restored: bool = False
    holders: list = field(default_factory=list)

    def record(self, indices, text):
        self.actions.append(text)
        self.touched.update(indices)


def plan_node(layout, gpus, instances, wanted, models=None):
    """Return a GpuPlan per GPU the layout applies to, or raise LayoutError before anything runs.

    ``gpus``: records of ``_nvsmi.gpu_from_row``; ``instances``: ``{index: [GpuInstance]}``;
    ``wanted``: ``{index: WantedGpu}`` from ``_mig_config.resolve_layout``; ``models``: ``{index: MigModel}`` as the
    driver describes the GPUs (``NvidiaSmi.read_profiles``), which wins over the built-in tables.
    """
    plans = []
    for gpu in gpus:
        if gpu["index"] in wanted:
            model = (models or {}).get(gpu["index"]) or mig_model(gpu["name"])
            plans.append(_plan_gpu(layout, gpu, tuple(instances.get(gpu["index"], ())), wanted[gpu["index"]], model))
    return plans


def profiles_needed(gpus, instances, wanted):
    """Tell whether a GPU must be planned for instances, so that the driver's profiles are worth reading.

    False when every GPU the layout applies to already holds what it wants, or only switches MIG off or to MIG
    without instances: the run where nothing changes then reads the node in its three calls.
    """
    for gpu in gpus:
        target = wanted.get(gpu["index"])
        if target is None or not target.mig_enabled or not target.mig_devices:
            continue
        held = instances.get(gpu["index"], ())
        if gpu["mig_mode_current"] != ENABLED or not is_applied(mig_model(gpu["name"]), held, target.mig_devices):
            return True
    return False


def plan_layout(model, instances, mig_devices):
    """Return the LayoutChange that turns ``instances`` into ``mig_devices`` keeping as many instances as possible.

    Among the sets of instances that can be kept while the rest of the layout still fits, the largest wins,
    then the one keeping the most memory slices. ``mig_devices`` must have passed check_layout.
    """
    wanted = Counter({model.profile(name): count for name, count in mig_devices.items()})
    keepable = [instance for instance in instances if model.profile_by_id(instance.profile_id) in wanted and _is_clean(instance)]
    for size in range(len(keepable), -1, -1):
        options = [kept for kept in combinations(keepable, size) if not Counter(model.profile_by_id(gi.profile_id) for gi in kept) - wanted]
        options.sort(key=lambda kept: (-sum(gi.size for gi in kept), [gi.start for gi in kept]))
        for kept in options:
            missing = wanted - Counter(model.profile_by_id(gi.profile_id) for gi in kept)
            created = _place(_largest_first(missing), _slices(kept))
            if created is not None:
                return LayoutChange(
                    keep=kept,
                    destroy=tuple(gi for gi in instances if gi not in kept),
                    create=tuple(created),
                    add_compute=tuple(gi for gi in kept if not gi.compute_instances),
                )
    raise AssertionError("check_layout accepted a layout that does not fit an empty GPU")


def plan_restore(instances, original):
    """Return the LayoutChange that brings a GPU from ``instances`` back to the exact placements of ``original``."""
    remaining = list(original)
    kept = []
    for instance in instances:
        twin = next((gi for gi in remaining if (gi.profile_id, gi.start) == (instance.profile_id, instance.start)), None)
        if twin is not None and _is_clean(instance):
            remaining.remove(twin)
            kept.append(instance)
    return LayoutChange(
        keep=tuple(kept),
        destroy=tuple(gi for gi in instances if gi not in kept),
        create=tuple(NewInstance(gi.profile_id, gi.name, gi.start, gi.size) for gi in remaining),
        add_compute=tuple(gi for gi in kept if not gi.compute_instances),
    )


def check_layout(model, mig_devices):
    """Raise LayoutError unless ``mig_devices`` exists on ``model`` and fits on an empty GPU of it."""
    for name, count in mig_devices.items():
        profile = model.profile(name)
        if profile is None:
            raise LayoutError(_unknown_profile(model, name))
        if count > profile.max_count:
            raise LayoutError(f"it asks for {count} of {name}, but an {model.gpu_name} holds at most {profile.max_count}")
    compute = sum(model.profile(name).compute_slices * count for name, count in mig_devices.items())
    if compute > model.compute_slices:
        raise LayoutError(f"it needs {compute} compute slices, but an {model.gpu_name} has {model.compute_slices}")
    profiles = Counter({model.profile(name): count for name, count in mig_devices.items()})
    if _place(_largest_first(profiles), frozenset()) is None:
        memory = sum(profile.memory_slices * count for profile, count in profiles.items())
        if memory > model.memory_slices:
            raise LayoutError(
                f"it fits in instance counts and compute slices, but its instances need {memory} memory slices "
                f"and an {model.gpu_name} has {model.memory_slices}"
            )
        raise LayoutError(f"no placement of its instances on the {model.memory_slices} memory slices of an {model.gpu_name} avoids an overlap")


def layout_counts(model, instances):
    """Return ``{profile name: count}`` of the MIG devices (compute instances) in ``instances``, as mig-parted counts them.

    Names come from the catalogue where it knows the profile, so that a driver's drifting memory figure
    (``3g.39gb`` for ``3g.40gb``) does not read as a different layout.
    """
    counts = Counter()
    for instance in instances:
        profile = model.profile_by_id(instance.profile_id) if model else None
        for compute in instance.compute_instances:
            if profile is None:
                counts[compute.name] += 1
            elif is_full_compute_instance(compute.name):
                counts[profile.name] += 1
            else:
                counts[compute.name.split(".", 1)[0] + "." + profile.name] += 1
    return dict(counts)


def is_applied(model, instances, mig_devices):
    """Tell whether ``instances`` are exactly ``mig_devices``, each a GI holding one full compute instance."""
    return all(instance.compute_instances and _is_clean(instance) for instance in instances) and layout_counts(model, instances) == mig_devices


def planned_actions(plans):
    """Return the steps apply_plans would take, for check mode (a reset is listed where the generation needs one)."""
    actions = []
    for plan in plans:
        if not plan.mig_enabled and plan.layout.destroy:
            actions.append(destroy_text(plan.index, plan.layout.destroy))
        if plan.request_mode is not None:
            actions.append(mode_text(plan.index, plan.request_mode))
        if plan.mode_changes and _needs_reset(plan.gpu["name"]):
            persistent = ", with persistence mode off during the reset" if plan.gpu["persistence_mode"] == ENABLED else ""
            actions.append(f"GPU {plan.index}: reset if the MIG mode change is still pending, as Ampere GPUs need{persistent}")
        if plan.mig_enabled:
            actions.extend(text for dummy, text in _layout_steps(None, plan.index, plan.layout))
    return actions


def gpus_needing_reset(plans):
    """Return the indices of the GPUs whose planned MIG mode change may wait for a GPU reset (Ampere; Hopper and later
    apply the mode at once). The driver resets an idle GPU by itself, so the reset may turn out unneeded."""
    return [plan.index for plan in plans if plan.mode_changes and _needs_reset(plan.gpu["name"])]


def apply_plans(plans, smi, processes=(), reset=True):
    """Carry out the plans through ``smi`` (an ``_nvsmi_mig.NvidiaSmi``) and return an Outcome.

    Order: clear and switch off MIG where it goes off, request the new modes, reset the GPUs whose mode is still
    pending (only with ``reset``, with persistence mode off around it; otherwise they stay pending, for a reboot to
    apply), then change layouts GPU by GPU.
    The first failure stops the run; the GPU it hit is brought back to its previous layout where possible and the
    GPUs after it are left untouched.
    """
    outcome = Outcome()
    changing = [plan for plan in plans if plan.changed]
    for plan in changing:
        if (plan.request_mode is not None or not plan.mig_enabled) and not _switch_mode(plan, smi, outcome):
            return outcome
    _reset_pending(changing, smi, processes, outcome, reset)
    for plan in changing:
        if plan.mig_enabled and plan.index not in outcome.blocked and not _change_layout(plan, plan.layout, smi, outcome):
            return outcome
    return outcome


def busy_gpus(plans, processes):
    """Return ``{index: [process]}`` for the GPUs whose planned change may disturb work and that run compute processes."""
    busy = {}
    for plan in plans:
        running = [process for process in processes if process["gpu_uuid"] == plan.gpu["uuid"]]
        if plan.disruptive and running:
            busy[plan.index] = running
    return busy


def busy_message(busy):
    listed = "; ".join(f"GPU {index} runs {_processes_text(processes)}" for index, processes in sorted(busy.items()))
    return f"Compute processes run on GPUs whose MIG layout must change: {listed}."


def report_gpus(gpus, instances, plans=(), models=None):
    """Return the ``gpus`` result: every GPU as nvidia-smi lists it, or as planned for the GPUs in ``plans`` that change."""
    planned = {plan.index: plan for plan in plans if plan.changed}
    models = models or {}
    report = []
    for gpu in gpus:
        plan = planned.get(gpu["index"])
        if plan is not None:
            mig_enabled, mig_devices = plan.mig_enabled, dict(plan.mig_devices)
        else:
            mig_enabled = gpu["mig_mode_current"] == ENABLED
            model = models.get(gpu["index"]) or mig_model(gpu["name"])
            mig_devices = layout_counts(model, instances.get(gpu["index"], ())) if mig_enabled else {}
        report.append({"index": gpu["index"], "uuid": gpu["uuid"], "name": gpu["name"], "mig_enabled": mig_enabled, "mig_devices": mig_devices})
    return report


def report_gpu_instances(gpus, instances, plans=()):
    """Return the ``gpu_instances`` result: each GPU whose MIG mode is, or is pending to be, Enabled, with its GPU instances.

    Placements and profile IDs are what a boot-time restore needs to create the same instances again. Instance IDs are
    left out: the driver hands out new ones when it creates the instances again, and the report stays the same.
    The pending mode decides, since an Ampere GPU applies it at its next reset or reboot (NVIDIA MIG User Guide, "GPU
    Reset"): a GPU whose disable waits is left out, and one whose enable waits gets the instances its plan places.
    """
    planned = {plan.index: plan.layout.create for plan in plans if plan.mig_enabled}
    report = []
    for gpu in gpus:
        if gpu["mig_mode_pending"] != ENABLED:
            continue
        if gpu["mig_mode_current"] == ENABLED:
            listed = [(gi.name, gi.profile_id, gi.start, gi.size, [{"profile": ci.name, "profile_id": ci.profile_id} for ci in gi.compute_instances])
                      for gi in instances.get(gpu["index"], ())]
        else:
            # Each created with its full compute instance, whose profile ID the driver tells only once it exists.
            listed = [(new.name, new.profile_id, new.start, new.size, [{"profile": new.name}]) for new in planned.get(gpu["index"], ())]
        report.append({
            "index": gpu["index"],
            "uuid": gpu["uuid"],
            "gpu_instances": [{
                "profile": name,
                "profile_id": profile_id,
                "placement": {"start": start, "size": size},
                "compute_instances": compute,
            } for name, profile_id, start, size, compute in sorted(listed, key=lambda item: (item[2], item[1]))],
        })
    return report


def summarize(layout, plans, outcome, gpus, instances):
    """Return (failed, one-sentence message) for a run; ``outcome`` is None when nothing was carried out (check mode)."""
    changing = [plan for plan in plans if plan.changed]
    if not plans:
        return False, f"Layout {layout!r} applies to no GPU on this node, so nothing changes."
    if not changing:
        return False, f"Layout {layout!r} is already applied on {_count_gpus(plans)}."
    if outcome is None:
        return False, f"Layout {layout!r} would change {_gpus_label([plan.index for plan in changing])}."
    if outcome.failure is not None:
        return True, _failure_message(layout, changing, outcome)
    listed = {gpu["index"]: gpu for gpu in gpus}
    wrong = [plan.index for plan in changing if plan.index not in outcome.blocked and not _holds(plan, listed[plan.index], instances.get(plan.index, ()))]
    if wrong:
        return True, f"After the changes nvidia-smi does not list layout {layout!r} on {_gpus_label(wrong)}; gpus shows what it lists."
    if outcome.blocked:
        held = ", ".join(f"GPU {index} ({reason})" for index, reason in sorted(outcome.blocked.items()))
        return False, (
            f"Layout {layout!r} is applied except on {held}, whose MIG mode change waits for a GPU reset that could not be done; "
            "free the GPU and run again, or reboot the node and run again."
        )
    return False, f"Layout {layout!r} is applied; {_gpus_label(sorted(outcome.touched))} {_was(outcome.touched)} changed."


def mode_text(index, enabled, pending=False):
    text = f"GPU {index}: {'enable' if enabled else 'disable'} MIG mode"
    return text + ", pending until the GPU is reset" if pending else text


def reset_text(indices, succeeded):
    label = _gpus_label(indices)
    if succeeded:
        return f"{label}: reset so that the MIG mode change takes effect"
    return f"{label}: reset refused, so the MIG mode change stays pending"


def destroy_text(index, instances):
    listed = ", ".join(f"{gi.gi_id} ({gi.name} at {gi.start}:{gi.size})" for gi in instances)
    if len(instances) == 1:
        return f"GPU {index}: destroy GPU instance {listed} with its compute instances"
    return f"GPU {index}: destroy GPU instances {listed} with their compute instances"


def create_text(index, created):
    listed = ", ".join(f"{new.name} at {new.start}:{new.size}" for new in created)
    if len(created) == 1:
        return f"GPU {index}: create GPU instance {listed} with a full compute instance"
    return f"GPU {index}: create GPU instances {listed}, each with a full compute instance"


def add_compute_text(index, instances):
    listed = ", ".join(str(gi.gi_id) for gi in instances)
    return f"GPU {index}: create the missing compute instance in GPU instance{'s' if len(instances) > 1 else ''} {listed}"


def _plan_gpu(layout, gpu, instances, wanted, model):
    where = f"Layout {layout!r} cannot be applied to GPU {gpu['index']}, an {gpu['name']}"
    mig_on = gpu["mig_mode_current"] == ENABLED
    mig_devices = dict(wanted.mig_devices) if wanted.mig_enabled else {}
    if not wanted.mig_enabled:
        layout_change = LayoutChange(destroy=instances)
    elif mig_on and is_applied(model, instances, mig_devices):
        # What the driver holds is the layout: no table is needed to know that it can exist.
        layout_change = LayoutChange(keep=instances)
    elif not mig_devices:
        layout_change = LayoutChange(destroy=instances if mig_on else ())
    elif model is None:
        raise LayoutError(
            f"{where}: this collection has no MIG profile table for that model and the driver lists no MIG profiles for it, "
            "as drivers before R550 do while MIG mode is off; apply a layout with 'mig-devices: {}' first to switch MIG on, then this one."
        )
    else:
        try:
            check_layout(model, mig_devices)
        except LayoutError as error:
            raise LayoutError(f"{where}: {error}.") from None
        # The names the driver prints for the profiles, not a drifted alias the layout may use.
        mig_devices = {model.profile(name).name: count for name, count in mig_devices.items()}
        if mig_on and is_applied(model, instances, mig_devices):
            layout_change = LayoutChange(keep=instances)
        else:
            layout_change = plan_layout(model, instances if mig_on else (), mig_devices)
    pending_on = gpu["mig_mode_pending"] == ENABLED
    return GpuPlan(
        gpu=gpu,
        model=model,
        instances=instances,
        mig_enabled=wanted.mig_enabled,
        mig_devices=mig_devices,
        request_mode=None if pending_on == wanted.mig_enabled else wanted.mig_enabled,
        layout=layout_change,
    )


def _switch_mode(plan, smi, outcome):
    """Request the GPU's new MIG mode, clearing it first when MIG goes off (the driver refuses otherwise); False on failure."""
    try:
        if not plan.mig_enabled and plan.layout.destroy:
            smi.destroy(plan.index, plan.layout.destroy)
            outcome.record([plan.index], destroy_text(plan.index, plan.layout.destroy))
        if plan.request_mode is not None:
            output = smi.set_mig_mode(plan.index, plan.request_mode)
            outcome.record([plan.index], mode_text(plan.index, plan.request_mode, pending=failure_kind(output) == MODE_PENDING))
    except MigCommandError as error:
        _fail(plan, error, smi, outcome)
        return False
    return True


def _reset_pending(plans, smi, processes, outcome, reset=True):
    """Reset the GPUs whose new mode is still pending, all in one ``nvidia-smi -r`` call as mig-parted does; record
    those it could not free, and what holds them. Without ``reset`` they are recorded as not reset, for a reboot.

    nvidia-smi resets all the GPUs it is given or none, so one held GPU keeps the others pending too: the message
    says which GPU was held and which merely waited with it.
    """
    if not any(plan.request_mode is not None or plan.mode_changes for plan in plans):
        return
    wanted = {plan.index: plan.mig_enabled for plan in plans}
    gpus = {gpu["index"]: gpu for gpu in smi.read_gpus()}
    pending = [index for index in wanted if (gpus[index]["mig_mode_current"] == ENABLED) != wanted[index]]
    if not pending:
        return
    if not reset:
        for index in pending:
            outcome.blocked[index] = "not reset because GPU resets were not allowed (reset=false)"
        return
    # Persistence mode keeps the driver attached to a GPU, and legacy persistence mode (nvidia-smi -pm 1) outlives
    # nvidia-persistenced, so a reset is refused until -pm 0 (NVIDIA/gpu-operator#118, NVIDIA/NVSentinel#1690): off
    # for the reset, and back on afterwards where it was on, whatever became of the reset.
    persistent = [index for index in pending if gpus[index]["persistence_mode"] == ENABLED]
    if persistent:
        smi.set_persistence_mode(persistent, False)
        outcome.record(persistent, f"{_gpus_label(persistent)}: persistence mode off for the reset")
    succeeded, output = smi.reset(pending)
    outcome.record(pending, reset_text(pending, succeeded))
    gpus = {gpu["index"]: gpu for gpu in smi.read_gpus()}
    if persistent:
        smi.set_persistence_mode(persistent, True)
        outcome.record(persistent, f"{_gpus_label(persistent)}: persistence mode back on")
    still_pending = [index for index in pending if (gpus[index]["mig_mode_current"] == ENABLED) != wanted[index]]
    if not still_pending:
        return
    clients = smi.driver_clients()
    refused = reset_refusals(output)
    held = [index for index in still_pending if gpus[index]["pci_bus_id"].upper() in refused]  # the others waited with them
    for index in still_pending:
        outcome.blocked[index] = _why_not_reset(gpus[index], output, held, clients, processes)


def _why_not_reset(gpu, reset_output, held, clients, processes):
    """Say why a GPU could not be reset: it cannot be here, another GPU of the same reset was held, or what may hold it."""
    if failure_kind(reset_output) == RESET_NOT_SUPPORTED:
        return "it cannot be reset on this host, as in a passthrough VM"
    if held and gpu["index"] not in held:
        return f"not reset because nvidia-smi resets all the GPUs of one call or none, and {_gpus_label(held)} {_was(held)} held"
    running = [process for process in processes if process["gpu_uuid"] == gpu["uuid"]]
    own_pids = {f"PID {process['pid']} " for process in running}
    holders = [client for client in clients if not any(client.startswith(pid) for pid in own_pids)]
    if gpu["persistence_mode"] == ENABLED and PERSISTENCED not in holders:
        holders.append("persistence mode (nvidia-persistenced or nvidia-smi -pm 1)")
    if running:
        holders.append(_processes_text(running))
    return "held by " + ", ".join(holders) if holders else "what holds it could not be found"


def _change_layout(plan, change, smi, outcome):
    """Carry out one GPU's LayoutChange; on failure restore the GPU and return False."""
    try:
        _run_layout_change(plan.index, change, smi, outcome)
    except MigCommandError as error:
        _fail(plan, error, smi, outcome)
        return False
    return True


def _layout_steps(smi, index, change):
    """Return the calls that carry out a LayoutChange, each with its action text: destroy, then create, then complete."""
    steps = []
    if change.destroy:
        steps.append((lambda: smi.destroy(index, change.destroy), destroy_text(index, change.destroy)))
    if change.create:
        steps.append((lambda: smi.create(index, [(new.profile_id, new.start) for new in change.create]), create_text(index, change.create)))
    if change.add_compute:
        steps.append((lambda: smi.create_compute_instances(index, [gi.gi_id for gi in change.add_compute]), add_compute_text(index, change.add_compute)))
    return steps


def _run_layout_change(index, change, smi, outcome):
    for call, text in _layout_steps(smi, index, change):
        call()
        outcome.record([index], text)


def _fail(plan, error, smi, outcome):
    """Record the failure and put the GPU's instances back where they were, as far as the driver lets us."""
    outcome.failure, outcome.failed_gpu = error, plan.index
    if error.kind == IN_USE:
        outcome.holders = smi.driver_clients()
    try:
        now = smi.read_instances(plan.index).get(plan.index, [])
        _run_layout_change(plan.index, plan_restore(now, plan.instances), smi, outcome)
        after = smi.read_instances(plan.index).get(plan.index, [])
    except MigCommandError:
        return
    outcome.restored = sorted(_geometry(after)) == sorted(_geometry(plan.instances)) and all(_is_clean(gi) and gi.compute_instances for gi in after)


def _place(profiles, occupied, lowest_start=0):
    """Return NewInstances placing ``profiles`` (largest first) on free memory slices, or None when they cannot fit.

    Depth-first search over each profile's placement starts; equal profiles take increasing starts, so that no
    arrangement is tried twice. At most seven instances on eight slices: the search is instant.
    """
    if not profiles:
        return []
    profile, rest = profiles[0], profiles[1:]
    for start in profile.starts:
        span = frozenset(range(start, start + profile.memory_slices))
        if start < lowest_start or span & occupied:
            continue
        following = _place(rest, occupied | span, start + 1 if rest and rest[0] == profile else 0)
        if following is not None:
            return [NewInstance(profile.profile_id, profile.name, start, profile.memory_slices)] + following
    return None


def _largest_first(profiles):
    return sorted(profiles.elements(), key=lambda profile: (-profile.memory_slices, -profile.compute_slices, profile.profile_id))


def _slices(instances):
    return frozenset(slice_ for gi in instances for slice_ in range(gi.start, gi.start + gi.size))


def _is_clean(instance):
    """A GI the plan may keep: it holds one full compute instance, or none yet (then one is added)."""
    cis = instance.compute_instances
    return not cis or (len(cis) == 1 and is_full_compute_instance(cis[0].name))


def _geometry(instances):
    return [(gi.profile_id, gi.start, gi.size) for gi in instances]


def _needs_reset(gpu_name):
    # Ampere keeps a MIG mode change pending until the GPU is reset; Hopper and later apply it at once.
    model = model_info(gpu_name)
    return model is not None and model["mig_mode_change_needs_reset"]


def _unknown_profile(model, name):
    partial = [profile.name for profile in model.profiles if name in profile.compute_instance_names()]
    if partial:
        return f"{name} is a compute-instance profile of {partial[0]}, and only full GPU-instance profiles can be applied"
    return f"an {model.gpu_name} has no MIG profile {name}; its profiles are {', '.join(model.profile_names())}"


def _holds(plan, gpu, instances):
    if (gpu["mig_mode_current"] == ENABLED) != plan.mig_enabled:
        return False
    return not plan.mig_enabled or is_applied(plan.model, instances, plan.mig_devices)


def _failure_message(layout, changing, outcome):
    failed = outcome.failed_gpu
    if outcome.restored:
        parts = [f"GPU {failed} is back to its previous GPU instances"]
    else:
        parts = [f"GPU {failed} could not be brought back to its previous GPU instances and holds what gpus shows"]
    changed = sorted(outcome.touched - {failed})
    untouched = [plan.index for plan in changing if plan.index not in outcome.touched and plan.index != failed]
    if changed:
        parts.append(f"{_gpus_label(changed)} {_was(changed)} changed")
    if untouched:
        parts.append(f"{_gpus_label(untouched)} {_was(untouched)} left unchanged")
    hint = _FAILURE_HINTS.get(outcome.failure.kind)
    if hint and outcome.holders:
        hint += f"; running here: {', '.join(outcome.holders)}"
    cause = str(outcome.failure).rstrip(".") + (f" ({hint})" if hint else "")
    return f"Applying layout {layout!r} stopped at GPU {failed}: {cause}; " + ", ".join(parts) + "."


def _processes_text(processes):
    listed = ", ".join(f"{process['pid']} ({process['process_name']})" for process in processes)
    return f"PID{'s' if len(processes) > 1 else ''} {listed}"


def _count_gpus(items):
    return f"{len(items)} GPU" if len(items) == 1 else f"{len(items)} GPUs"


def _was(indices):
    return "was" if len(indices) == 1 else "were"


def _gpus_label(indices):
    return f"GPU {indices[0]}" if len(indices) == 1 else "GPUs " + ", ".join(str(index) for index in indices)
