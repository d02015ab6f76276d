# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.onprem.gpu.plugins.module_utils._mig_config import WantedGpu
from ansible_collections.onprem.gpu.plugins.module_utils._mig_planner import (
    LayoutChange,
    LayoutError,
    NewInstance,
    apply_plans,
    busy_gpus,
    busy_message,
    check_layout,
    layout_counts,
    plan_layout,
    plan_node,
    plan_restore,
    planned_actions,
    profiles_needed,
    report_gpu_instances,
    report_gpus,
    summarize,
)
from ansible_collections.onprem.gpu.plugins.module_utils._mig_profiles import driver_model, mig_model, parse_placements
from ansible_collections.onprem.gpu.plugins.module_utils._nvsmi_mig import (
    ComputeInstance,
    GpuInstance,
    MigCommandError,
    parse_gpu_instance_profiles,
    parse_gpu_instances,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "mig"
H100 = mig_model("NVIDIA H100 80GB HBM3")
A100_40GB = mig_model("NVIDIA A100-SXM4-40GB")
A30 = mig_model("NVIDIA A30")


def recorded(lgi, lci):
    """The instances of GPU 0 in a recorded (or assembled) -lgi/-lci pair."""
    return parse_gpu_instances((FIXTURES / lgi).read_text(encoding="utf-8"), (FIXTURES / lci).read_text(encoding="utf-8"))[0]


H100_BALANCED = recorded("lgi__h100_balanced__assembled.txt", "lci__h100_balanced__assembled.txt")
H100_PCIE_R525 = recorded("lgi_r525_h100.txt", "lci__h100_pcie_r525__assembled.txt")
A100_R580_PARTIAL_CIS = recorded("lgi_r580_a100.txt", "lci__a100_r580_mixed__assembled.txt")


def gi(gi_id, profile, start, compute=True, model=H100):
    """A GPU instance of ``profile`` at ``start`` holding its full compute instance (or none)."""
    spec = model.profile(profile)
    cis = (ComputeInstance(0, 0, profile),) if compute else ()
    return GpuInstance(gi_id, spec.profile_id, profile, start, spec.memory_slices, cis)


def new(profile, start, model=H100):
    spec = model.profile(profile)
    return NewInstance(spec.profile_id, profile, start, spec.memory_slices)


def geometry(change):
    """(kept GI ids, destroyed GI ids, created (name, start), GI ids completed) of a LayoutChange."""
    return (
        sorted(gi.gi_id for gi in change.keep),
        sorted(gi.gi_id for gi in change.destroy),
        sorted((created.name, created.start) for created in change.create),
        sorted(gi.gi_id for gi in change.add_compute),
    )


PLAN_CASES = [
    pytest.param(
        H100_BALANCED,
        {"1g.10gb": 4, "3g.40gb": 1},
        ([2, 9, 10], [3], [("1g.10gb", 0), ("1g.10gb", 1)], []),
        id="balanced-to-4x1g-keeps-the-3g-and-both-1g",
    ),
    pytest.param(H100_BALANCED, {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}, ([2, 3, 9, 10], [], [], []), id="same-layout-keeps-all"),
    pytest.param(
        H100_BALANCED,
        {"7g.80gb": 1},
        ([], [2, 3, 9, 10], [("7g.80gb", 0)], []),
        id="whole-gpu-replaces-all",
    ),
    pytest.param(
        H100_PCIE_R525,
        {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
        ([2, 7, 8], [9], [("2g.20gb", 2)], []),
        id="r525-capture-to-balanced-drops-the-1g-blocking-the-2g",
    ),
    pytest.param(H100_PCIE_R525, {"1g.10gb": 4, "3g.40gb": 1}, ([2, 7, 8, 9], [], [("1g.10gb", 3)], []), id="only-additions"),
    pytest.param(
        H100_PCIE_R525,
        {"3g.40gb": 2},
        ([2], [7, 8, 9], [("3g.40gb", 0)], []),
        id="second-3g-needs-the-lower-half",
    ),
    pytest.param(
        [gi(2, "3g.40gb", 0), gi(7, "1g.10gb", 4), gi(8, "1g.10gb", 5)],
        {"3g.40gb": 1, "4g.40gb": 1},
        ([], [2, 7, 8], [("3g.40gb", 4), ("4g.40gb", 0)], []),
        id="3g-at-0-must-move-because-4g-only-fits-at-0",
    ),
    pytest.param(
        [gi(7, "1g.10gb", 0), gi(8, "1g.10gb", 1, compute=False)],
        {"1g.10gb": 2},
        ([7, 8], [], [], [8]),
        id="gi-without-compute-instance-is-completed",
    ),
    pytest.param(
        A100_R580_PARTIAL_CIS,
        {"1g.5gb": 1, "2g.10gb": 1, "4g.20gb": 1},
        ([2, 9], [3], [("2g.10gb", 4)], []),
        id="gi-split-into-compute-instances-is-replaced",
    ),
    pytest.param(
        [], {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}, ([], [], [("1g.10gb", 2), ("1g.10gb", 3), ("2g.20gb", 0), ("3g.40gb", 4)], []), id="from-empty"
    ),
]


@pytest.mark.parametrize("instances, wanted, expected", PLAN_CASES)
def test_plan_layout(instances, wanted, expected):
    model = A100_40GB if instances is A100_R580_PARTIAL_CIS else H100
    assert geometry(plan_layout(model, instances, wanted)) == expected


def test_minimal_disruption_keeps_the_3g_instance_and_its_id():
    change = plan_layout(H100, H100_BALANCED, {"1g.10gb": 4, "3g.40gb": 1})
    kept_3g = [instance for instance in change.keep if instance.name == "3g.40gb"]
    assert kept_3g == [GpuInstance(2, 9, "3g.40gb", 4, 4, (ComputeInstance(0, 2, "3g.40gb"),))]
    assert [instance.name for instance in change.destroy] == ["2g.20gb"]


@pytest.mark.parametrize(
    "model, wanted",
    [
        (H100, {"1g.10gb": 7}),
        (H100, {"1g.10gb+me": 1, "1g.10gb": 6}),
        (H100, {"1g.20gb": 4}),
        (H100, {"2g.20gb": 3, "1g.10gb": 1}),
        (H100, {"4g.40gb": 1, "3g.40gb": 1}),
        (H100, {"4g.40gb": 1, "2g.20gb": 1, "1g.10gb": 1}),
        (A100_40GB, {"1g.10gb": 4}),
        (A30, {"1g.6gb": 4}),
        (A30, {"2g.12gb": 1, "1g.6gb": 2}),
        (A30, {"4g.24gb": 1}),
    ],
)
def test_full_layouts_are_placed_without_overlap(model, wanted):
    check_layout(model, wanted)
    created = plan_layout(model, [], wanted).create
    slices = [slice_ for instance in created for slice_ in range(instance.start, instance.start + instance.size)]
    assert len(slices) == len(set(slices))
    assert all(instance.start in model.profile(instance.name).starts for instance in created)
    assert sorted(instance.name for instance in created) == sorted(name for name, count in wanted.items() for dummy in range(count))


LAYOUT_ERRORS = [
    pytest.param(
        A100_40GB,
        {"3g.40gb": 1},
        "an NVIDIA A100-SXM4-40GB has no MIG profile 3g.40gb; its profiles are 1g.5gb, 1g.5gb+me, 1g.10gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb",
        id="unknown-profile-for-the-model",
    ),
    pytest.param(
        H100, {"1c.3g.40gb": 2}, "1c.3g.40gb is a compute-instance profile of 3g.40gb, and only full GPU-instance profiles can be applied", id="ci-profile"
    ),
    pytest.param(H100, {"1g.10gb": 8}, "it asks for 8 of 1g.10gb, but an NVIDIA H100 80GB HBM3 holds at most 7", id="over-max-count"),
    pytest.param(A100_40GB, {"1g.10gb": 7}, "it asks for 7 of 1g.10gb, but an NVIDIA A100-SXM4-40GB holds at most 4", id="1g.10gb-x7-on-a100-40gb"),
    pytest.param(H100, {"2g.20gb": 3, "3g.40gb": 1}, "it needs 9 compute slices, but an NVIDIA H100 80GB HBM3 has 7", id="over-compute"),
    pytest.param(
        H100,
        {"3g.40gb": 2, "1g.10gb": 1},
        "it fits in instance counts and compute slices, but its instances need 9 memory slices and an NVIDIA H100 80GB HBM3 has 8",
        id="fits-in-count-not-in-placement",
    ),
    pytest.param(
        A30,
        {"2g.12gb": 2, "1g.6gb": 1},
        "it needs 5 compute slices, but an NVIDIA A30 has 4",
        id="a30-compute",
    ),
]


@pytest.mark.parametrize("model, wanted, message", LAYOUT_ERRORS)
def test_check_layout_refuses(model, wanted, message):
    with pytest.raises(LayoutError) as error:
        check_layout(model, wanted)
    assert str(error.value) == message


def test_plan_restore_returns_to_the_exact_placements():
    before = [gi(2, "3g.40gb", 4), gi(3, "2g.20gb", 0), gi(9, "1g.10gb", 2)]
    # A failed change left: the 3g kept, the 2g destroyed, one new 1g at 0 and the old 1g without its compute instance.
    now = [gi(2, "3g.40gb", 4), gi(7, "1g.10gb", 0), gi(9, "1g.10gb", 2, compute=False)]
    change = plan_restore(now, before)
    assert geometry(change) == ([2, 9], [7], [("2g.20gb", 0)], [9])


def node_gpu(index, name="NVIDIA H100 80GB HBM3", current="Enabled", pending=None):
    return {
        "index": index,
        "uuid": f"GPU-{index}",
        "name": name,
        "pci_bus_id": f"00000000:{index + 16:02X}:00.0",
        "mig_capable": current is not None,
        "mig_mode_current": current,
        "mig_mode_pending": current if pending is None else pending,
        "persistence_mode": "Disabled",
    }


def test_plan_node_per_gpu():
    gpus = [
        node_gpu(0),
        node_gpu(1),
        node_gpu(2, current="Disabled"),
        node_gpu(3, name="NVIDIA A100-SXM4-80GB", current="Disabled", pending="Enabled"),
        node_gpu(4),
        node_gpu(5, current="Enabled", pending="Disabled"),
        node_gpu(6, name="NVIDIA L40S", current=None),
    ]
    instances = {0: H100_BALANCED, 1: H100_BALANCED, 4: H100_BALANCED, 5: [gi(1, "4g.40gb", 0)]}
    balanced = {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
    wanted = {
        0: WantedGpu(True, balanced),
        1: WantedGpu(True, {"1g.10gb": 4, "3g.40gb": 1}),
        2: WantedGpu(True, balanced),
        3: WantedGpu(True, balanced),
        4: WantedGpu(False, {}),
        5: WantedGpu(True, {"4g.40gb": 1}),
    }
    plans = plan_node("mixed", gpus, instances, wanted)
    summary = [(plan.index, plan.changed, plan.disruptive, plan.request_mode, plan.mode_changes, geometry(plan.layout)) for plan in plans]
    assert summary == [
        (0, False, False, None, False, ([2, 3, 9, 10], [], [], [])),
        (1, True, True, None, False, ([2, 9, 10], [3], [("1g.10gb", 0), ("1g.10gb", 1)], [])),
        (2, True, True, True, True, ([], [], [("1g.10gb", 2), ("1g.10gb", 3), ("2g.20gb", 0), ("3g.40gb", 4)], [])),
        (3, True, True, None, True, ([], [], [("1g.10gb", 2), ("1g.10gb", 3), ("2g.20gb", 0), ("3g.40gb", 4)], [])),
        (4, True, True, False, True, ([], [2, 3, 9, 10], [], [])),
        (5, True, True, True, False, ([1], [], [], [])),
    ]
    assert planned_actions(plans) == [
        "GPU 1: destroy GPU instance 3 (2g.20gb at 0:2) with its compute instances",
        "GPU 1: create GPU instances 1g.10gb at 0:1, 1g.10gb at 1:1, each with a full compute instance",
        "GPU 2: enable MIG mode",
        "GPU 2: create GPU instances 3g.40gb at 4:4, 2g.20gb at 0:2, 1g.10gb at 2:1, 1g.10gb at 3:1, each with a full compute instance",
        "GPU 3: reset if the MIG mode change is still pending, as Ampere GPUs need",
        "GPU 3: create GPU instances 3g.40gb at 4:4, 2g.20gb at 0:2, 1g.10gb at 2:1, 1g.10gb at 3:1, each with a full compute instance",
        "GPU 4: destroy GPU instances 9 (1g.10gb at 2:1), 10 (1g.10gb at 3:1), 3 (2g.20gb at 0:2), 2 (3g.40gb at 4:4) with their compute instances",
        "GPU 4: disable MIG mode",
        "GPU 5: enable MIG mode",
    ]


@pytest.mark.parametrize(
    "gpu, wanted, message",
    [
        pytest.param(
            node_gpu(0, name="NVIDIA A100-SXM4-40GB"),
            WantedGpu(True, {"3g.40gb": 1}),
            "Layout 'big' cannot be applied to GPU 0, an NVIDIA A100-SXM4-40GB: an NVIDIA A100-SXM4-40GB has no MIG profile 3g.40gb; "
            "its profiles are 1g.5gb, 1g.5gb+me, 1g.10gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb.",
            id="unknown-profile",
        ),
        pytest.param(
            node_gpu(0, name="NVIDIA B200", current="Disabled"),
            WantedGpu(True, {"1g.23gb": 7}),
            "Layout 'big' cannot be applied to GPU 0, an NVIDIA B200: this collection has no MIG profile table for that model "
            "and the driver lists no MIG profiles for it, as drivers before R550 do while MIG mode is off; apply a layout with "
            "'mig-devices: {}' first to switch MIG on, then this one.",
            id="model-without-table-nor-driver-answer",
        ),
    ],
)
def test_plan_node_refuses(gpu, wanted, message):
    with pytest.raises(LayoutError) as error:
        plan_node("big", [gpu], {}, {0: wanted})
    assert str(error.value) == message


def test_a_model_without_table_may_be_switched_off():
    plans = plan_node("off", [node_gpu(0, name="NVIDIA B200", current="Disabled")], {}, {0: WantedGpu(False, {})})
    assert not plans[0].changed


def test_a_model_without_table_may_be_switched_to_mig_without_instances():
    plans = plan_node("on", [node_gpu(0, name="NVIDIA B200", current="Disabled")], {}, {0: WantedGpu(True, {})})
    assert plans[0].request_mode is True and not plans[0].layout


EIGHT_SLICE_PLACEMENTS = parse_placements((FIXTURES / "lgipp__8_slice__mig_guide.txt").read_text(encoding="utf-8"))
GH200 = driver_model(
    "NVIDIA GH200 480GB",
    parse_gpu_instance_profiles((FIXTURES / "lgip__gh200_96gb.txt").read_text(encoding="utf-8")),
    {profile_id: placement for (gpu, profile_id), placement in EIGHT_SLICE_PLACEMENTS.items()},
)
GH200_BALANCED = {"1g.12gb": 2, "2g.24gb": 1, "3g.48gb": 1}


def test_a_model_without_table_is_planned_from_the_driver_answer():
    gpus = [node_gpu(0, name="NVIDIA GH200 480GB", current="Disabled")]
    plans = plan_node("all-balanced", gpus, {}, {0: WantedGpu(True, GH200_BALANCED)}, {0: GH200})
    assert geometry(plans[0].layout) == ([], [], [("1g.12gb", 2), ("1g.12gb", 3), ("2g.24gb", 0), ("3g.48gb", 4)], [])
    with pytest.raises(LayoutError) as error:
        plan_node("all-balanced", gpus, {}, {0: WantedGpu(True, GH200_BALANCED)})
    assert "no MIG profile table for that model and the driver lists no MIG profiles for it" in str(error.value)


def test_an_applied_layout_of_a_model_without_table_needs_no_profiles():
    held = [gi(3, "2g.24gb", 0, model=GH200), gi(9, "1g.12gb", 2, model=GH200), gi(10, "1g.12gb", 3, model=GH200), gi(2, "3g.48gb", 4, model=GH200)]
    gpus = [node_gpu(0, name="NVIDIA GH200 480GB")]
    wanted = {0: WantedGpu(True, GH200_BALANCED)}
    assert not profiles_needed(gpus, {0: held}, wanted)
    assert not plan_node("all-balanced", gpus, {0: held}, wanted)[0].changed
    assert profiles_needed(gpus, {0: held[:3]}, wanted)


def test_profiles_are_needed_only_to_plan_instances():
    gpus = [node_gpu(0), node_gpu(1, current="Disabled")]
    balanced = {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
    assert not profiles_needed(gpus, {0: H100_BALANCED}, {0: WantedGpu(True, balanced), 1: WantedGpu(False, {})})
    assert not profiles_needed(gpus, {0: H100_BALANCED}, {0: WantedGpu(True, balanced), 1: WantedGpu(True, {})})
    assert profiles_needed(gpus, {0: H100_BALANCED}, {1: WantedGpu(True, balanced)})
    assert profiles_needed(gpus, {0: H100_BALANCED}, {0: WantedGpu(True, {"7g.80gb": 1})})


def test_a30_media_extension_profile_of_two_slices_is_planned():
    # 2g.12gb+me: listed since R525 and used by mig-parted's all-2g.12gb.me; refused before it was in the table.
    gpus = [node_gpu(0, name="NVIDIA A30", current="Enabled")]
    plans = plan_node("me", gpus, {}, {0: WantedGpu(True, {"2g.12gb+me": 1, "2g.12gb": 1})})
    assert [(new.name, new.profile_id, new.start, new.size) for new in plans[0].layout.create] == [("2g.12gb", 5, 0, 2), ("2g.12gb+me", 6, 2, 2)]
    with pytest.raises(LayoutError) as error:
        plan_node("me", gpus, {}, {0: WantedGpu(True, {"2g.12gb+me": 2})})
    assert str(error.value) == "Layout 'me' cannot be applied to GPU 0, an NVIDIA A30: it asks for 2 of 2g.12gb+me, but an NVIDIA A30 holds at most 1."


def test_a_drifted_name_in_the_layout_matches_what_the_driver_holds():
    # The driver calls profile 9 "3g.39gb" (mig-parted#31): a layout may use either name, and nothing changes.
    lgip = (FIXTURES / "lgip__h100_pcie__r525_layout_a.txt").read_text(encoding="utf-8").replace("MIG 3g.40gb ", "MIG 3g.39gb ")
    table = mig_model("NVIDIA H100 PCIe")
    driver = driver_model(table.gpu_name, parse_gpu_instance_profiles(lgip), {key[1]: value for key, value in EIGHT_SLICE_PLACEMENTS.items()}, table)
    held = [GpuInstance(2, 9, "3g.39gb", 4, 4, (ComputeInstance(0, 2, "3g.39gb"),))]
    gpus = [node_gpu(0, name="NVIDIA H100 PCIe")]
    plans = plan_node("x", gpus, {0: held}, {0: WantedGpu(True, {"3g.39gb": 1, "1g.10gb": 1})}, {0: driver})
    assert plans[0].mig_devices == {"3g.40gb": 1, "1g.10gb": 1}
    assert geometry(plans[0].layout) == ([2], [], [("1g.10gb", 0)], [])


def test_layout_counts_use_catalogue_names_and_count_compute_instances():
    drifted = [GpuInstance(2, 9, "3g.39gb", 4, 4, (ComputeInstance(0, 2, "3g.39gb"),))]
    assert layout_counts(H100, drifted) == {"3g.40gb": 1}
    assert layout_counts(A100_40GB, A100_R580_PARTIAL_CIS) == {"1g.5gb": 1, "1c.2g.10gb": 2, "4g.20gb": 1}
    assert layout_counts(None, drifted) == {"3g.39gb": 1}


class FakeSmi:
    """A node in memory that answers like NvidiaSmi: Hopper GPUs switch mode at once, Ampere ones wait for a reset."""

    def __init__(self, gpus, instances, holders=(), failing_create=None, clients=(), held=None):
        self.clients = list(clients)
        self.held = held  # the GPUs the holders hold; None: all of them
        self.gpus = {gpu["index"]: dict(gpu) for gpu in gpus}
        self.instances = {index: list(gis) for index, gis in instances.items()}
        self.holders = list(holders)
        self.failing_create = failing_create
        self.calls = []
        self.next_id = 20

    def read_gpus(self):
        self.calls.append("read_gpus")
        return [dict(gpu) for gpu in self.gpus.values()]

    def read_instances(self, index=None):
        self.calls.append(("read_instances", index))
        return {i: list(gis) for i, gis in self.instances.items() if gis and index in (None, i)}

    def set_mig_mode(self, index, enabled):
        self.calls.append(("set_mig_mode", index, enabled))
        gpu = self.gpus[index]
        gpu["mig_mode_pending"] = "Enabled" if enabled else "Disabled"
        if "A100" not in gpu["name"]:
            gpu["mig_mode_current"] = gpu["mig_mode_pending"]
        return ""

    def set_persistence_mode(self, indices, enabled):
        self.calls.append(("set_persistence_mode", tuple(indices), enabled))
        for index in indices:
            self.gpus[index]["persistence_mode"] = "Enabled" if enabled else "Disabled"

    def reset(self, indices):
        """All the GPUs or none, listing the held ones as nvidia-smi -r does (mig.md 4.6); persistence mode holds a GPU too."""
        self.calls.append(("reset", tuple(indices)))
        held = [
            index for index in indices
            if self.holders and (self.held is None or index in self.held) or self.gpus[index]["persistence_mode"] == "Enabled"
        ]
        if held:
            lines = "".join(f"  GPU {self.gpus[index]['pci_bus_id']}: In use by another client\n" for index in held)
            return False, "The following GPUs could not be reset:\n" + lines
        for index in indices:
            self.gpus[index]["mig_mode_current"] = self.gpus[index]["mig_mode_pending"]
        return True, ""

    def destroy(self, index, instances):
        self.calls.append(("destroy", index, tuple(instance.gi_id for instance in instances)))
        doomed = {instance.gi_id for instance in instances}
        self.instances[index] = [instance for instance in self.instances.get(index, []) if instance.gi_id not in doomed]

    def create(self, index, placements):
        self.calls.append(("create", index, tuple(placements)))
        for number, (profile_id, start) in enumerate(placements):
            if self.failing_create == (index, number):
                raise MigCommandError(["nvidia-smi", "mig", "-cgi"], 23, "Failed to create GPU instances: Insufficient Resources\n", "")
            profile = H100.profile_by_id(profile_id)
            self.next_id += 1
            self.instances.setdefault(index, []).append(gi(self.next_id, profile.name, start))

    def driver_clients(self):
        self.calls.append("driver_clients")
        return list(self.clients)

    def create_compute_instances(self, index, gi_ids):
        self.calls.append(("create_compute_instances", index, tuple(gi_ids)))


def mutations(smi):
    return [call for call in smi.calls if call not in ("read_gpus", "driver_clients") and call[0] != "read_instances"]


def test_apply_keeps_what_stays_and_reports_the_steps():
    gpus = [node_gpu(0), node_gpu(1, current="Disabled")]
    plans = plan_node("x", gpus, {0: H100_BALANCED}, {0: WantedGpu(True, {"1g.10gb": 4, "3g.40gb": 1}), 1: WantedGpu(True, {"7g.80gb": 1})})
    smi = FakeSmi(gpus, {0: H100_BALANCED})
    outcome = apply_plans(plans, smi)
    assert mutations(smi) == [("set_mig_mode", 1, True), ("destroy", 0, (3,)), ("create", 0, ((19, 0), (19, 1))), ("create", 1, ((0, 0),))]
    assert outcome.failure is None and not outcome.blocked
    assert [instance.gi_id for instance in smi.instances[0]][:3] == [9, 10, 2]
    gpus_after, instances_after = smi.read_gpus(), smi.read_instances()
    assert summarize("x", plans, outcome, gpus_after, instances_after) == (False, "Layout 'x' is applied; GPUs 0, 1 were changed.")
    assert report_gpus(gpus_after, instances_after) == [
        {"index": 0, "uuid": "GPU-0", "name": "NVIDIA H100 80GB HBM3", "mig_enabled": True, "mig_devices": {"1g.10gb": 4, "3g.40gb": 1}},
        {"index": 1, "uuid": "GPU-1", "name": "NVIDIA H100 80GB HBM3", "mig_enabled": True, "mig_devices": {"7g.80gb": 1}},
    ]


def test_apply_stops_at_a_failed_create_and_restores_that_gpu():
    gpus = [node_gpu(0), node_gpu(1)]
    wanted = {0: WantedGpu(True, {"1g.10gb": 4, "3g.40gb": 1}), 1: WantedGpu(True, {"1g.10gb": 4, "3g.40gb": 1})}
    plans = plan_node("x", gpus, {0: H100_BALANCED, 1: H100_BALANCED}, wanted)
    smi = FakeSmi(gpus, {0: H100_BALANCED, 1: H100_BALANCED}, failing_create=(0, 1))
    outcome = apply_plans(plans, smi)
    assert mutations(smi) == [("destroy", 0, (3,)), ("create", 0, ((19, 0), (19, 1))), ("destroy", 0, (21,)), ("create", 0, ((14, 0),))]
    assert outcome.failed_gpu == 0 and outcome.restored
    assert sorted((instance.name, instance.start) for instance in smi.instances[0]) == [("1g.10gb", 2), ("1g.10gb", 3), ("2g.20gb", 0), ("3g.40gb", 4)]
    failed, message = summarize("x", plans, outcome, smi.read_gpus(), smi.read_instances())
    assert failed
    assert message == (
        "Applying layout 'x' stopped at GPU 0: mig -cgi failed with exit code 23: Failed to create GPU instances: Insufficient Resources "
        "(the driver found no room where the plan placed an instance, so something else changed the GPU meanwhile); "
        "GPU 0 is back to its previous GPU instances, GPU 1 was left unchanged."
    )


def test_a_refused_reset_leaves_the_mode_pending_and_creates_nothing():
    gpus = [node_gpu(0, name="NVIDIA A100-SXM4-80GB", current="Disabled"), node_gpu(1, name="NVIDIA A100-SXM4-80GB", current="Disabled")]
    gpus[0]["persistence_mode"] = "Enabled"
    plans = plan_node("x", gpus, {}, {0: WantedGpu(True, {"7g.80gb": 1}), 1: WantedGpu(True, {"7g.80gb": 1})})
    processes = [{"pid": 4242, "process_name": "python3", "gpu_uuid": "GPU-1"}]
    smi = FakeSmi(gpus, {}, holders=["nv-hostengine"], clients=["nv-hostengine (DCGM)", "the nvidia_drm kernel module"])
    outcome = apply_plans(plans, smi, processes)
    assert mutations(smi) == [
        ("set_mig_mode", 0, True), ("set_mig_mode", 1, True),
        ("set_persistence_mode", (0,), False), ("reset", (0, 1)), ("set_persistence_mode", (0,), True),
    ]
    assert outcome.blocked == {
        0: "held by nv-hostengine (DCGM), the nvidia_drm kernel module",
        1: "held by nv-hostengine (DCGM), the nvidia_drm kernel module, PID 4242 (python3)",
    }
    assert outcome.actions[-2:] == ["GPUs 0, 1: reset refused, so the MIG mode change stays pending", "GPU 0: persistence mode back on"]
    failed, message = summarize("x", plans, outcome, smi.read_gpus(), smi.read_instances())
    assert not failed
    assert message == (
        "Layout 'x' is applied except on GPU 0 (held by nv-hostengine (DCGM), the nvidia_drm kernel module), "
        "GPU 1 (held by nv-hostengine (DCGM), the nvidia_drm kernel module, "
        "PID 4242 (python3)), whose MIG mode change waits for a GPU reset that could not be done; "
        "free the GPU and run again, or reboot the node and run again."
    )


def test_an_ampere_reset_that_succeeds_lets_the_layout_follow():
    gpus = [node_gpu(0, name="NVIDIA A100-SXM4-80GB", current="Disabled")]
    plans = plan_node("x", gpus, {}, {0: WantedGpu(True, {"7g.80gb": 1})})
    smi = FakeSmi(gpus, {})
    outcome = apply_plans(plans, smi)
    assert mutations(smi) == [("set_mig_mode", 0, True), ("reset", (0,)), ("create", 0, ((0, 0),))]
    assert not outcome.blocked


def test_nothing_to_do_calls_nothing():
    plans = plan_node("x", [node_gpu(0)], {0: H100_BALANCED}, {0: WantedGpu(True, {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1})})
    smi = FakeSmi([node_gpu(0)], {0: H100_BALANCED})
    outcome = apply_plans(plans, smi)
    assert smi.calls == [] and outcome.actions == []
    assert summarize("x", plans, outcome, [node_gpu(0)], {0: H100_BALANCED}) == (False, "Layout 'x' is already applied on 1 GPU.")


def test_busy_gpus_are_those_a_disruptive_change_would_touch():
    gpus = [node_gpu(0), node_gpu(1), node_gpu(2)]
    instances = {0: H100_PCIE_R525, 1: H100_PCIE_R525, 2: H100_PCIE_R525}
    wanted = {0: WantedGpu(True, {"1g.10gb": 4, "3g.40gb": 1}), 1: WantedGpu(True, {"7g.80gb": 1}), 2: WantedGpu(True, {"7g.80gb": 1})}
    plans = plan_node("x", gpus, instances, wanted)
    processes = [
        {"pid": 11, "process_name": "python3", "gpu_uuid": "GPU-0"},
        {"pid": 12, "process_name": "python3", "gpu_uuid": "GPU-1"},
        {"pid": 13, "process_name": "trainer", "gpu_uuid": "GPU-1"},
    ]
    busy = busy_gpus(plans, processes)
    assert sorted(busy) == [1]
    assert busy_message(busy) == "Compute processes run on GPUs whose MIG layout must change: GPU 1 runs PIDs 12 (python3), 13 (trainer)."


def test_check_mode_report_shows_the_plan():
    gpus = [node_gpu(0), node_gpu(1, name="NVIDIA L40S", current=None)]
    plans = plan_node("x", gpus, {0: H100_BALANCED}, {0: WantedGpu(True, {"7g.80gb": 1})})
    assert report_gpus(gpus, {0: H100_BALANCED}, plans) == [
        {"index": 0, "uuid": "GPU-0", "name": "NVIDIA H100 80GB HBM3", "mig_enabled": True, "mig_devices": {"7g.80gb": 1}},
        {"index": 1, "uuid": "GPU-1", "name": "NVIDIA L40S", "mig_enabled": False, "mig_devices": {}},
    ]
    assert summarize("x", plans, None, gpus, {0: H100_BALANCED}) == (False, "Layout 'x' would change GPU 0.")


def test_a_layout_the_driver_did_not_apply_is_a_failure():
    gpus = [node_gpu(0)]
    plans = plan_node("x", gpus, {0: H100_BALANCED}, {0: WantedGpu(True, {"7g.80gb": 1})})
    outcome = apply_plans(plans, FakeSmi(gpus, {0: H100_BALANCED}))
    assert summarize("x", plans, outcome, gpus, {0: H100_BALANCED}) == (
        True,
        "After the changes nvidia-smi does not list layout 'x' on GPU 0; gpus shows what it lists.",
    )


def test_layout_change_is_false_when_empty():
    assert not LayoutChange(keep=(gi(1, "7g.80gb", 0),))
    assert LayoutChange(create=(new("7g.80gb", 0),))


def test_one_reset_call_and_a_held_gpu_keeps_the_idle_one_pending_with_it():
    gpus = [node_gpu(index, name="NVIDIA A100-SXM4-80GB", current="Disabled") for index in range(3)]
    wanted = {index: WantedGpu(True, {"7g.80gb": 1}) for index in range(3)}
    plans = plan_node("x", gpus, {}, wanted)
    processes = [{"pid": 4242, "process_name": "python3", "gpu_uuid": "GPU-1"}]
    smi = FakeSmi(gpus, {}, holders=["python3"], held=[1])
    outcome = apply_plans(plans, smi, processes)
    assert [call for call in mutations(smi) if call[0] == "reset"] == [("reset", (0, 1, 2))]
    assert outcome.blocked == {
        0: "not reset because nvidia-smi resets all the GPUs of one call or none, and GPU 1 was held",
        1: "held by PID 4242 (python3)",
        2: "not reset because nvidia-smi resets all the GPUs of one call or none, and GPU 1 was held",
    }
    assert not any(call[0] == "create" for call in mutations(smi))


def test_persistenced_is_named_as_the_client_rather_than_persistence_mode():
    gpus = [node_gpu(0, name="NVIDIA A100-SXM4-80GB", current="Disabled")]
    gpus[0]["persistence_mode"] = "Enabled"
    plans = plan_node("x", gpus, {}, {0: WantedGpu(True, {"7g.80gb": 1})})
    smi = FakeSmi(gpus, {}, holders=["nvidia-persistenced"], clients=["nvidia-persistenced", "nv-fabricmanager (Fabric Manager)"])
    outcome = apply_plans(plans, smi)
    assert outcome.blocked == {0: "held by nvidia-persistenced, nv-fabricmanager (Fabric Manager)"}


def test_a_process_found_holding_the_device_is_named_once():
    gpus = [node_gpu(0, name="NVIDIA A100-SXM4-80GB", current="Disabled")]
    plans = plan_node("x", gpus, {}, {0: WantedGpu(True, {"7g.80gb": 1})})
    processes = [{"pid": 4242, "process_name": "/usr/bin/python3", "gpu_uuid": "GPU-0"}]
    smi = FakeSmi(gpus, {}, holders=["python3"], clients=["dcgm-exporter", "PID 4242 (python3)", "PID 77 (nsys)"])
    outcome = apply_plans(plans, smi, processes)
    assert outcome.blocked == {0: "held by dcgm-exporter, PID 77 (nsys), PID 4242 (/usr/bin/python3)"}


def test_a_change_refused_as_in_use_names_the_clients_found():
    gpus = [node_gpu(0)]
    plans = plan_node("x", gpus, {0: H100_BALANCED}, {0: WantedGpu(True, {"7g.80gb": 1})})
    smi = FakeSmi(gpus, {0: H100_BALANCED}, clients=["nvidia-device-plugin (the kubelet's GPU device plugin)", "dcgm-exporter"])

    def refuse(index, instances):
        smi.calls.append(("destroy", index, tuple(instance.gi_id for instance in instances)))
        raise MigCommandError(["nvidia-smi", "mig", "-dci"], 19, "Failed to destroy compute instances: In use by another client\n", "")

    smi.destroy = refuse
    outcome = apply_plans(plans, smi)
    failed, message = summarize("x", plans, outcome, smi.read_gpus(), smi.read_instances())
    assert failed
    assert (
        "(a process or driver client still uses what was to be destroyed or switched; running here: "
        "nvidia-device-plugin (the kubelet's GPU device plugin), dcgm-exporter)" in message
    )


def test_a_gpu_that_cannot_be_reset_says_so_rather_than_naming_holders():
    gpus = [node_gpu(0, name="NVIDIA A100-SXM4-80GB", current="Disabled")]
    plans = plan_node("x", gpus, {}, {0: WantedGpu(True, {"7g.80gb": 1})})
    smi = FakeSmi(gpus, {}, holders=["passthrough"], clients=["nvidia-persistenced"])
    smi.reset = lambda indices: (False, (FIXTURES / "reset__not_supported_passthrough.txt").read_text(encoding="utf-8"))
    outcome = apply_plans(plans, smi)
    assert outcome.blocked == {0: "it cannot be reset on this host, as in a passthrough VM"}


def test_the_gpu_instances_report_gives_placements_and_profile_ids_of_gpus_in_mig_mode():
    gpus = [node_gpu(0), node_gpu(1, current="Disabled"), node_gpu(2, name="NVIDIA L40S", current=None)]
    instances = {0: (gi(7, "3g.40gb", 4), gi(9, "1g.10gb", 0), gi(10, "1g.10gb", 1, compute=False))}
    assert report_gpu_instances(gpus, instances) == [{
        "index": 0,
        "uuid": "GPU-0",
        "gpu_instances": [
            {"profile": "1g.10gb", "profile_id": 19, "placement": {"start": 0, "size": 1},
             "compute_instances": [{"profile": "1g.10gb", "profile_id": 0}]},
            {"profile": "1g.10gb", "profile_id": 19, "placement": {"start": 1, "size": 1}, "compute_instances": []},
            {"profile": "3g.40gb", "profile_id": 9, "placement": {"start": 4, "size": 4},
             "compute_instances": [{"profile": "3g.40gb", "profile_id": 0}]},
        ],
    }]
    assert report_gpu_instances([node_gpu(0)], {}) == [{"index": 0, "uuid": "GPU-0", "gpu_instances": []}]


def test_legacy_persistence_mode_is_off_for_the_reset_and_back_on_where_it_was_on():
    # nvidia-smi -pm 1 outlives nvidia-persistenced and holds the GPU: the reset needs -pm 0 (NVIDIA/NVSentinel#1690).
    gpus = [node_gpu(0, name="NVIDIA A100-SXM4-80GB", current="Disabled"), node_gpu(1, name="NVIDIA A100-SXM4-80GB", current="Disabled")]
    gpus[0]["persistence_mode"] = "Enabled"
    plans = plan_node("x", gpus, {}, {0: WantedGpu(True, {"7g.80gb": 1}), 1: WantedGpu(True, {"7g.80gb": 1})})
    assert planned_actions(plans)[1] == (
        "GPU 0: reset if the MIG mode change is still pending, as Ampere GPUs need, with persistence mode off during the reset"
    )
    smi = FakeSmi(gpus, {})
    outcome = apply_plans(plans, smi)
    assert mutations(smi) == [
        ("set_mig_mode", 0, True), ("set_mig_mode", 1, True),
        ("set_persistence_mode", (0,), False), ("reset", (0, 1)), ("set_persistence_mode", (0,), True),
        ("create", 0, ((0, 0),)), ("create", 1, ((0, 0),)),
    ]
    assert outcome.actions[2:5] == [
        "GPU 0: persistence mode off for the reset",
        "GPUs 0, 1: reset so that the MIG mode change takes effect",
        "GPU 0: persistence mode back on",
    ]
    assert not outcome.blocked
    assert [gpu["persistence_mode"] for gpu in smi.read_gpus()] == ["Enabled", "Disabled"]


def test_persistence_mode_is_left_alone_without_a_reset():
    gpus = [node_gpu(0, name="NVIDIA A100-SXM4-80GB", current="Disabled")]
    gpus[0]["persistence_mode"] = "Enabled"
    plans = plan_node("x", gpus, {}, {0: WantedGpu(True, {"7g.80gb": 1})})
    smi = FakeSmi(gpus, {})
    outcome = apply_plans(plans, smi, reset=False)
    assert mutations(smi) == [("set_mig_mode", 0, True)]
    assert outcome.blocked == {0: "not reset because GPU resets were not allowed (reset=false)"}


def test_the_record_leaves_out_an_ampere_gpu_whose_mig_disable_waits_for_a_reset():
    # dc2's A100 going to all-disabled while DCGM blocks the reset: a reboot applies the disable (MIG User Guide, "GPU
    # Reset"), so the boot restore must not find the GPU in MIG mode in the record.
    a100 = [gi(1, "3g.40gb", 0, model=mig_model("NVIDIA A100-SXM4-80GB")), gi(2, "3g.40gb", 4, model=mig_model("NVIDIA A100-SXM4-80GB"))]
    gpus = [node_gpu(0, name="NVIDIA A100-SXM4-80GB"), node_gpu(1, name="NVIDIA A100-SXM4-80GB")]
    plans = plan_node("all-disabled", gpus, {0: a100}, {0: WantedGpu(False, {}), 1: WantedGpu(False, {})})
    smi = FakeSmi(gpus, {0: a100}, holders=["nv-hostengine"], clients=["nv-hostengine (DCGM)"])
    outcome = apply_plans(plans, smi)
    assert outcome.blocked == {0: "held by nv-hostengine (DCGM)", 1: "held by nv-hostengine (DCGM)"}
    after = smi.read_gpus()
    assert [(gpu["mig_mode_current"], gpu["mig_mode_pending"]) for gpu in after] == [("Enabled", "Disabled")] * 2
    assert report_gpu_instances(after, smi.read_instances(), plans) == []


def test_the_record_gives_an_ampere_gpu_whose_mig_enable_waits_the_instances_planned_for_it():
    gpus = [node_gpu(0, name="NVIDIA A100-SXM4-80GB", current="Disabled")]
    plans = plan_node("x", gpus, {}, {0: WantedGpu(True, {"3g.40gb": 1, "1g.10gb": 1})})
    smi = FakeSmi(gpus, {}, holders=["nv-hostengine"])
    outcome = apply_plans(plans, smi)
    assert 0 in outcome.blocked
    assert report_gpu_instances(smi.read_gpus(), smi.read_instances(), plans) == [{
        "index": 0,
        "uuid": "GPU-0",
        "gpu_instances": [
            {"profile": "3g.40gb", "profile_id": 9, "placement": {"start": 0, "size": 4}, "compute_instances": [{"profile": "3g.40gb"}]},
            {"profile": "1g.10gb", "profile_id": 19, "placement": {"start": 4, "size": 1}, "compute_instances": [{"profile": "1g.10gb"}]},
        ],
    }]
