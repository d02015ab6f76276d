# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The real mig_config main() against the lab's nvidia-smi double (lab/doubles/nvidia_smi).

Each test builds a simulated node in a temporary directory (hardware, driver and state files), runs the module
with ``nvidia_smi`` pointing at the double, and checks the result, the calls in the double's call log, and what
the double then holds. Changing MIG state needs root on the double, as on the real tool.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from ansible.module_utils import _internal as module_utils_internal

from ansible.module_utils.testing import patch_module_args

from ansible_collections.onprem.gpu.plugins.module_utils import _gpu_models, _nvsmi_mig
from ansible_collections.onprem.gpu.plugins.modules import mig_config

REPOSITORY = Path(__file__).resolve().parents[4]
DOUBLE = REPOSITORY / "lab" / "doubles" / "nvidia_smi" / "nvidia-smi"
FIXTURES = REPOSITORY / "tests" / "unit" / "fixtures" / "mig"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the nvidia-smi double, like the real tool, changes MIG state only for root")

H100 = "NVIDIA H100 80GB HBM3"
A100_40GB = "NVIDIA A100-SXM4-40GB"
A100_80GB = "NVIDIA A100-SXM4-80GB"
L40S = "NVIDIA L40S"
ON = {"current": "Enabled", "pending": "Enabled"}
OFF = {"current": "Disabled", "pending": "Disabled"}

BALANCED_80GB = {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
SMALL_80GB = {"1g.10gb": 4, "3g.40gb": 1}


def layout(mig_devices=None, devices="all", **extra):
    """One mig-parted entry: MIG off when ``mig_devices`` is None."""
    entry = {"devices": devices, "mig-enabled": mig_devices is not None, **extra}
    if mig_devices is not None:
        entry["mig-devices"] = mig_devices
    return [entry]


CONFIGS = {
    "all-disabled": layout(),
    "all-balanced": layout(BALANCED_80GB),
    "small": layout(SMALL_80GB),
    "whole": layout({"7g.80gb": 1}),
}


class Node:
    """A simulated GPU node: the double's input files in a directory, and the module run against it."""

    def __init__(self, directory, model, count, driver="580.65.06", **board):
        self.directory = directory
        self.call_log = directory / "calls.jsonl"
        self.state_file = directory / "state.json"
        # Driver clients the module would find in /proc: the test host's own are none of the simulated node's business.
        self.driver_clients = []
        hardware = {"gpu_model": model, "gpu_count": count, "seed": "unit", **board}
        (directory / "hardware.json").write_text(json.dumps(hardware), encoding="utf-8")
        (directory / "driver.json").write_text(json.dumps({"driver_version": driver, "cuda_version": "13.0"}), encoding="utf-8")
        self.environment = {
            "NVSMI_DOUBLE_HARDWARE": str(directory / "hardware.json"),
            "NVSMI_DOUBLE_DRIVER": str(directory / "driver.json"),
            "NVSMI_DOUBLE_STATE": str(self.state_file),
        }

    def write_state(self, **state):
        self.state_file.write_text(json.dumps(state), encoding="utf-8")

    def state(self):
        self.smi("--query-gpu=index", "--format=csv")  # let the double apply pending reloads and fill in defaults
        return json.loads(self.state_file.read_text(encoding="utf-8"))

    def edit_state(self, change):
        state = self.state()
        change(state)
        self.state_file.write_text(json.dumps(state), encoding="utf-8")

    def smi(self, *arguments):
        """Run the double directly, outside the call log."""
        return subprocess.run([str(DOUBLE), *arguments], env={**os.environ, **self.environment}, capture_output=True, text=True, check=False).stdout

    def run(self, capsys, selected, mig_configs=None, **params):
        """Run the module's main(); return its result and the calls it made."""
        self.call_log.write_text("", encoding="utf-8")
        args = {"selected": selected, "nvidia_smi": str(DOUBLE), **params}
        if "config_file" not in params:
            args["mig_configs"] = mig_configs or CONFIGS
        environment = {**self.environment, "NVSMI_DOUBLE_CALL_LOG": str(self.call_log)}
        with patch_module_args(args), pytest.MonkeyPatch.context() as patch:
            for name, value in environment.items():
                patch.setenv(name, value)
            patch.setattr(_nvsmi_mig, "running_driver_clients", lambda proc: list(self.driver_clients))
            # A module returns its warnings with its result; once another test of this process has imported controller
            # code (filters, templating), ansible-core would print them on the controller's display instead.
            patch.setattr(module_utils_internal, "is_controller", False)
            with pytest.raises(SystemExit):
                mig_config.main()
        result = json.loads(capsys.readouterr().out)
        return result, [json.loads(line) for line in self.call_log.read_text(encoding="utf-8").splitlines()]

    def gpu_instances(self, index):
        """(GI id, profile id, start, size, number of compute instances) of each GPU instance the double holds."""
        gpu = self.state()["gpus"][index]
        return sorted(
            (gi["id"], gi["profile_id"], gi["placement"]["start"], gi["placement"]["size"], len(gi["compute_instances"])) for gi in gpu["gpu_instances"]
        )


@pytest.fixture(name="make_node")
def make_node_fixture():
    # Not pytest's tmp_path, whose parents only root can enter: the double must be able to write its lock file.
    directories = []

    def make(model=H100, count=2, driver="580.65.06", board=None, **state):
        directory = Path(tempfile.mkdtemp(prefix="mig-config-"))
        directories.append(directory)
        node = Node(directory, model, count, driver, **(board or {}))
        if state:
            node.write_state(**state)
        return node

    yield make
    for directory in directories:
        shutil.rmtree(directory)


def argvs(calls, mutating=None):
    return [call["argv"] for call in calls if mutating is None or call["mutating"] == mutating]


def mig_devices(result):
    return [(gpu["index"], gpu["mig_enabled"], gpu["mig_devices"]) for gpu in result["gpus"]]


def test_apply_from_scratch_then_nothing_to_do(make_node, capsys):
    node = make_node(count=4)
    result, calls = node.run(capsys, "all-balanced")
    assert result["changed"] is True and "failed" not in result
    assert mig_devices(result) == [(index, True, BALANCED_80GB) for index in range(4)]
    assert result["reboot_required"] is False
    assert result["msg"] == "Layout 'all-balanced' is applied; GPUs 0, 1, 2, 3 were changed."
    assert argvs(calls, mutating=True) == [["-i", str(index), "-mig", "1"] for index in range(4)] + [
        ["mig", "-cgi", "9:4,14:0,19:2,19:3", "-C", "-i", str(index)] for index in range(4)
    ]
    # The double placed each instance where the plan said, each with its compute instance.
    assert [(profile, start, size, cis) for dummy, profile, start, size, cis in node.gpu_instances(3)] == [
        (9, 4, 4, 1),
        (14, 0, 2, 1),
        (19, 2, 1, 1),
        (19, 3, 1, 1),
    ]

    again, calls = node.run(capsys, "all-balanced")
    assert again["changed"] is False
    assert again["actions"] == []
    assert again["msg"] == "Layout 'all-balanced' is already applied on 4 GPUs."
    assert argvs(calls, mutating=True) == []
    assert len(calls) <= 3
    assert again["gpus"] == result["gpus"]


def test_a_no_op_reads_an_eight_gpu_node_in_three_calls(make_node, capsys):
    node = make_node(count=8)
    first, dummy = node.run(capsys, "all-balanced")
    result, calls = node.run(capsys, "all-balanced")
    assert result["changed"] is False, (first, result, calls)
    assert [call["argv"][:2] for call in calls] == [
        [
            "--query-gpu=index,uuid,name,pci.bus_id,pci.device_id,memory.total,mig.mode.current,mig.mode.pending,persistence_mode,driver_version",
            "--format=csv,nounits",
        ],
        ["mig", "-lgi"],
        ["mig", "-lci"],
    ]


# ---------------------------------------------------------------- a model without a built-in table: the driver lists its profiles

GH200 = "NVIDIA GH200 480GB"
# mig-parted's all-balanced entry for "H100-96GB, PG506-96GB, GH200, H20" (gpu-operator default-mig-parted-config).
GH200_BALANCED = {"1g.12gb": 2, "2g.24gb": 1, "3g.48gb": 1}
GH200_CONFIGS = {
    "all-balanced": layout(GH200_BALANCED, **{"device-filter": ["0x234210DE", "0x233D10DE", "0x20B610DE", "0x232910DE"]}),
    "all-enabled": layout({}),
}


def test_a_model_without_a_table_is_planned_from_the_driver_profiles(make_node, capsys):
    node = make_node(model=GH200, count=4)
    result, calls = node.run(capsys, "all-balanced", mig_configs=GH200_CONFIGS)
    assert result["changed"] is True and "failed" not in result, result
    assert mig_devices(result) == [(index, True, GH200_BALANCED) for index in range(4)]
    assert [argv for argv in argvs(calls, mutating=False) if argv[0] == "mig" and argv[1].startswith("-lgip")] == [["mig", "-lgip"], ["mig", "-lgipp"]]
    assert argvs(calls, mutating=True)[-1] == ["mig", "-cgi", "9:4,14:0,19:2,19:3", "-C", "-i", "3"]

    again, calls = node.run(capsys, "all-balanced", mig_configs=GH200_CONFIGS)
    assert again["changed"] is False
    # The no-op path reads the node in three calls, the profile listings not among them.
    assert [argv[:2] for argv in argvs(calls)][1:] == [["mig", "-lgi"], ["mig", "-lci"]] and len(calls) == 3


def test_a_model_without_a_table_on_a_driver_that_lists_profiles_only_with_mig_on(make_node, capsys):
    node = make_node(model=GH200, count=1, driver="535.161.07")
    refused, calls = node.run(capsys, "all-balanced", mig_configs=GH200_CONFIGS)
    assert refused["failed"] is True
    assert refused["msg"] == (
        "Layout 'all-balanced' cannot be applied to GPU 0, an NVIDIA GH200 480GB: this collection has no MIG profile table for that model "
        "and the driver lists no MIG profiles for it, as drivers before R550 do while MIG mode is off; apply a layout with "
        "'mig-devices: {}' first to switch MIG on, then this one."
    )
    assert argvs(calls, mutating=True) == []
    enabled, dummy = node.run(capsys, "all-enabled", mig_configs=GH200_CONFIGS)
    assert mig_devices(enabled) == [(0, True, {})]
    result, dummy = node.run(capsys, "all-balanced", mig_configs=GH200_CONFIGS)
    assert mig_devices(result) == [(0, True, GH200_BALANCED)]


def test_a_table_the_driver_contradicts_is_named_in_one_warning_and_the_plan_follows_the_driver(make_node, capsys):
    # A built-in table that knows only one 3g placement, at 0:4: the driver (the double) lists {0,4}:4.
    entry = _gpu_models.GPU_MODELS[H100]
    wrong = tuple(profile[:5] + ((0,),) if profile[1] == 9 else profile for profile in entry["mig"]["profiles"])
    node = make_node(count=2)
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(_gpu_models.GPU_MODELS, H100, dict(entry, mig=dict(entry["mig"], profiles=wrong)))
        result, calls = node.run(capsys, "all-balanced")
    # ansible-core 2.19 returns each warning as an event with its message.
    assert [warning["event"]["msg"] if isinstance(warning, dict) else warning for warning in result["warnings"]] == [
        "The driver of GPU 0, 1, an NVIDIA H100 80GB HBM3, contradicts this collection's MIG profile table: it lists profile ID 9 as "
        "3g.40gb at {0,4}:4, at most 2 where the table has 3g.40gb at {0}:4, at most 2; the plan follows the driver."
    ]
    # The 3g instance at 4:4, a placement only the driver knows.
    assert argvs(calls, mutating=True)[-1] == ["mig", "-cgi", "9:4,14:0,19:2,19:3", "-C", "-i", "1"]
    assert mig_devices(result) == [(index, True, BALANCED_80GB) for index in range(2)]


# ---------------------------------------------------------------- device filters with a subsystem id, fleet files


def test_subsystem_qualified_device_filters_read_the_subsystem_in_the_same_call(make_node, capsys):
    node = make_node(count=2, board={"pci_sub_device_id": "0x16C110DE"})
    configs = {
        "ours": layout(BALANCED_80GB, **{"device-filter": ["0x233010DE:0x16C110DE"]}),
        "theirs": layout(BALANCED_80GB, **{"device-filter": "0x233010DE:0x12345678"}),
    }
    result, calls = node.run(capsys, "ours", mig_configs=configs)
    assert mig_devices(result) == [(0, True, BALANCED_80GB), (1, True, BALANCED_80GB)]
    assert calls[0]["argv"][0].endswith(",driver_version,pci.sub_device_id")
    refused, calls = node.run(capsys, "theirs", mig_configs=configs)
    assert refused["msg"] == (
        "Layout 'theirs' applies to no GPU on this node: its device filters 0x233010DE:0x12345678 match none of its GPUs, which are 0x233010DE."
    )
    skipped, calls = node.run(capsys, "theirs", mig_configs=configs, strict=False)
    assert skipped["changed"] is False and "failed" not in skipped
    assert skipped["msg"] == "Layout 'theirs' applies to no GPU on this node, so nothing changes."
    assert argvs(calls, mutating=True) == []


def test_a_fleet_file_naming_gpus_this_node_lacks_applies_to_those_it_has_when_not_strict(make_node, capsys):
    node = make_node(count=2)
    fleet = {"eight-way": layout({"7g.80gb": 1}, devices=[0, 1, 2, 3, 4, 5, 6, 7])}
    refused, calls = node.run(capsys, "eight-way", mig_configs=fleet)
    assert refused["msg"] == "Entry 1 of layout 'eight-way' names GPU 2, but this node has GPUs 0 to 1."
    result, calls = node.run(capsys, "eight-way", mig_configs=fleet, strict=False)
    assert mig_devices(result) == [(0, True, {"7g.80gb": 1}), (1, True, {"7g.80gb": 1})]


def test_a_node_with_mig_off_everywhere_is_read_in_one_call(make_node, capsys):
    node = make_node(count=8)
    result, calls = node.run(capsys, "all-disabled")
    assert result["changed"] is False
    assert len(calls) == 1


def test_check_mode_plans_without_changing_and_shows_a_diff(make_node, capsys):
    node = make_node(count=2)
    node.run(capsys, "all-balanced")
    before = node.gpu_instances(0)
    result, calls = node.run(capsys, "small", _ansible_check_mode=True, _ansible_diff=True)
    assert result["changed"] is True
    assert argvs(calls, mutating=True) == []
    assert node.gpu_instances(0) == before
    assert mig_devices(result) == [(0, True, SMALL_80GB), (1, True, SMALL_80GB)]
    assert result["actions"] == [
        "GPU 0: destroy GPU instance 3 (2g.20gb at 0:2) with its compute instances",
        "GPU 0: create GPU instances 1g.10gb at 0:1, 1g.10gb at 1:1, each with a full compute instance",
        "GPU 1: destroy GPU instance 3 (2g.20gb at 0:2) with its compute instances",
        "GPU 1: create GPU instances 1g.10gb at 0:1, 1g.10gb at 1:1, each with a full compute instance",
    ]
    assert result["diff"] == {
        "before_header": "MIG layout before",
        "before": "version: v1\nmig-configs:\n  current:\n  - devices: all\n    mig-enabled: true\n    mig-devices:\n"
        "      1g.10gb: 2\n      2g.20gb: 1\n      3g.40gb: 1\n",
        "after_header": "MIG layout after small",
        "after": "version: v1\nmig-configs:\n  current:\n  - devices: all\n    mig-enabled: true\n    mig-devices:\n      1g.10gb: 4\n      3g.40gb: 1\n",
    }


def test_minimal_disruption_keeps_the_3g_instance_and_its_id(make_node, capsys):
    # Scrambled GI ids: the double hands out ids unrelated to placements, so nothing can rely on predicting them.
    node = make_node(count=1, gi_id_personality="scrambled")
    node.run(capsys, "all-balanced")
    before = node.gpu_instances(0)
    three_g = [gi for gi in before if gi[1] == 9]
    two_g = [gi for gi in before if gi[1] == 14]
    one_g = [gi for gi in before if gi[1] == 19]
    result, calls = node.run(capsys, "small")
    after = node.gpu_instances(0)
    assert result["changed"] is True
    assert mig_devices(result) == [(0, True, SMALL_80GB)]
    assert three_g[0] in after and all(gi in after for gi in one_g)
    assert argvs(calls, mutating=True) == [
        ["mig", "-dci", "-gi", str(two_g[0][0]), "-i", "0"],
        ["mig", "-dgi", "-gi", str(two_g[0][0]), "-i", "0"],
        ["mig", "-cgi", "19:0,19:1", "-C", "-i", "0"],
    ]
    assert sorted((profile, start) for dummy, profile, start, size, cis in after) == [(9, 4), (19, 0), (19, 1), (19, 2), (19, 3)]


def test_per_device_mixed_layout_from_the_mig_parted_example_file(make_node, capsys):
    node = make_node(model=A100_40GB, count=8)
    result, calls = node.run(capsys, "custom-config", config_file=str(FIXTURES / "config__mig_parted_example.yaml"))
    assert result["changed"] is True
    assert mig_devices(result) == [
        (0, False, {}),
        (1, False, {}),
        (2, False, {}),
        (3, False, {}),
        (4, True, {"1g.5gb": 7}),
        (5, True, {"2g.10gb": 3}),
        (6, True, {"3g.20gb": 2}),
        (7, True, {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}),
    ]
    assert [argv for argv in argvs(calls, mutating=True) if "-mig" in argv] == [["-i", str(index), "-mig", "1"] for index in (4, 5, 6, 7)]
    again, calls = node.run(capsys, "custom-config", config_file=str(FIXTURES / "config__mig_parted_example.yaml"))
    assert again["changed"] is False and argvs(calls, mutating=True) == []


def test_switching_mig_off_clears_the_gpu_first(make_node, capsys):
    node = make_node(count=2)
    node.run(capsys, "all-balanced")
    result, calls = node.run(capsys, "all-disabled")
    assert mig_devices(result) == [(0, False, {}), (1, False, {})]
    mutating = argvs(calls, mutating=True)
    assert [argv[:2] for argv in mutating[:3]] == [["mig", "-dci"], ["mig", "-dgi"], ["-i", "0"]]
    assert mutating[2] == ["-i", "0", "-mig", "0"]


# ---------------------------------------------------------------- Ampere: mode changes wait for a reset


def test_ampere_pending_mode_is_completed_by_a_reset_of_that_gpu_only(make_node, capsys):
    node = make_node(model=A100_80GB, count=2, gpus=[{"mig_mode": {"current": "Disabled", "pending": "Enabled"}}, {"mig_mode": OFF}])
    result, calls = node.run(capsys, "whole", mig_configs={"whole": layout({"7g.80gb": 1}, devices=[0])})
    assert result["changed"] is True and result["reboot_required"] is False
    assert argvs(calls, mutating=True) == [["-r", "-i", "0"], ["mig", "-cgi", "0:0", "-C", "-i", "0"]]
    assert mig_devices(result) == [(0, True, {"7g.80gb": 1}), (1, False, {})]


def test_ampere_reset_turns_legacy_persistence_mode_off_for_the_reset_and_back_on(make_node, capsys):
    # nvidia-smi -pm 1 keeps the driver attached and blocks the reset until -pm 0 (NVIDIA/NVSentinel#1690).
    node = make_node(model=A100_80GB, count=3, gpus=[{"mig_mode": OFF, "persistence_mode": "Enabled"}, {"mig_mode": OFF}, {"mig_mode": OFF}])
    result, calls = node.run(capsys, "whole", mig_configs={"whole": layout({"7g.80gb": 1}, devices=[0, 1])})
    assert result["reboot_required"] is False
    assert result["actions"][:5] == [
        "GPU 0: enable MIG mode, pending until the GPU is reset",
        "GPU 1: enable MIG mode",
        "GPU 0: persistence mode off for the reset",
        "GPU 0: reset so that the MIG mode change takes effect",
        "GPU 0: persistence mode back on",
    ]
    assert argvs(calls, mutating=True)[:5] == [
        ["-i", "0", "-mig", "1"], ["-i", "1", "-mig", "1"], ["-i", "0", "-pm", "0"], ["-r", "-i", "0"], ["-i", "0", "-pm", "1"],
    ]
    assert [gpu["persistence_mode"] for gpu in node.state()["gpus"]] == ["Enabled", "Disabled", "Disabled"]
    assert mig_devices(result) == [(0, True, {"7g.80gb": 1}), (1, True, {"7g.80gb": 1}), (2, False, {})]


def test_ampere_reset_blocked_by_a_client_keeps_persistence_mode_and_the_mode_pending_until_a_reboot(make_node, capsys):
    gpus = [{"mig_mode": OFF, "persistence_mode": "Enabled"}, {"mig_mode": OFF, "persistence_mode": "Enabled"}]
    node = make_node(model=A100_80GB, count=2, holders=["nv-hostengine"], gpus=gpus)
    result, calls = node.run(capsys, "whole")
    assert "failed" not in result
    assert result["changed"] is True
    assert result["reboot_required"] is True
    assert result["msg"] == (
        "Layout 'whole' is applied except on GPU 0 (what holds it could not be found), GPU 1 (what holds it could not be found), "
        "whose MIG mode change waits for a GPU reset that could not be done; free the GPU and run again, or reboot the node and run again."
    )
    assert result["actions"] == [
        "GPU 0: enable MIG mode, pending until the GPU is reset",
        "GPU 1: enable MIG mode, pending until the GPU is reset",
        "GPUs 0, 1: persistence mode off for the reset",
        "GPUs 0, 1: reset refused, so the MIG mode change stays pending",
        "GPUs 0, 1: persistence mode back on",
    ]
    # One reset for every GPU that needs it, as mig-parted does.
    assert argvs(calls, mutating=True) == [
        ["-i", "0", "-mig", "1"], ["-i", "1", "-mig", "1"], ["-i", "0,1", "-pm", "0"], ["-r", "-i", "0,1"], ["-i", "0,1", "-pm", "1"],
    ]
    # Pending, no instance half-created, persistence mode as it was.
    assert [(gpu["mig_mode"], gpu["persistence_mode"]) for gpu in node.state()["gpus"]] == [({"current": "Disabled", "pending": "Enabled"}, "Enabled")] * 2
    assert node.gpu_instances(0) == [] and node.gpu_instances(1) == []
    assert mig_devices(result) == [(0, False, {}), (1, False, {})]
    # The boot record holds the layout being applied: the instances planned for the GPUs whose enable waits.
    assert [(gpu["index"], [(gi["profile_id"], gi["placement"]["start"]) for gi in gpu["gpu_instances"]]) for gpu in result["gpu_instances"]] == [
        (0, [(0, 0)]), (1, [(0, 0)]),
    ]

    # After a reboot the pending mode is in effect, and a re-run creates the instances.
    node.edit_state(lambda state: state.update(boots=state["boots"] + 1))
    result, calls = node.run(capsys, "whole")
    assert result["reboot_required"] is False
    assert argvs(calls, mutating=True) == [["mig", "-cgi", "0:0", "-C", "-i", str(index)] for index in (0, 1)]
    assert mig_devices(result) == [(0, True, {"7g.80gb": 1}), (1, True, {"7g.80gb": 1})]


def test_an_ampere_gpu_whose_mig_disable_waits_for_a_reset_is_left_out_of_the_boot_record(make_node, capsys):
    node = make_node(model=A100_80GB, count=2)
    node.run(capsys, "all-balanced")
    node.edit_state(lambda state: state.update(holders=["nv-hostengine"]))
    result, calls = node.run(capsys, "all-disabled")
    assert result["reboot_required"] is True
    assert [gpu["mig_mode"] for gpu in node.state()["gpus"]] == [{"current": "Enabled", "pending": "Disabled"}] * 2
    assert result["gpu_instances"] == []


def test_without_reset_an_ampere_mode_change_waits_for_a_reboot_and_check_mode_says_so_first(make_node, capsys):
    node = make_node(model=A100_80GB, count=2, gpus=[{"mig_mode": OFF, "persistence_mode": "Enabled"}, {"mig_mode": OFF, "persistence_mode": "Enabled"}])
    planned, calls = node.run(capsys, "whole", reset=False, _ansible_check_mode=True)
    assert planned["reset_needed"] == [0, 1] and planned["changed"] is True
    assert argvs(calls, mutating=True) == []
    result, calls = node.run(capsys, "whole", reset=False)
    assert result["reboot_required"] is True and result["reset_needed"] == [0, 1]
    # The modes are requested, no GPU is reset, no instance is created.
    assert argvs(calls, mutating=True) == [["-i", "0", "-mig", "1"], ["-i", "1", "-mig", "1"]]
    assert "GPU 0 (not reset because GPU resets were not allowed (reset=false))" in result["msg"]
    # After the reboot the pending modes are in effect: nothing needs a reset any more, and the instances are created.
    node.edit_state(lambda state: state.update(boots=state["boots"] + 1))
    result, calls = node.run(capsys, "whole", reset=False)
    assert result["reboot_required"] is False and result["reset_needed"] == []
    assert mig_devices(result) == [(0, True, {"7g.80gb": 1}), (1, True, {"7g.80gb": 1})]


def test_hopper_mode_changes_need_no_reset(make_node, capsys):
    node = make_node(count=2)
    planned, dummy = node.run(capsys, "all-balanced", _ansible_check_mode=True)
    assert planned["changed"] is True and planned["reset_needed"] == []


def test_ampere_reset_blocked_on_a_live_node_names_its_gpu_clients(make_node, capsys):
    # nvidia-persistenced holds the GPUs (persistence mode on), next to the kubelet's device plugin and DCGM.
    gpus = [{"mig_mode": OFF, "persistence_mode": "Enabled"}, {"mig_mode": OFF, "persistence_mode": "Enabled"}]
    node = make_node(model=A100_80GB, count=2, holders=["nvidia-persistenced", "nv-hostengine"], gpus=gpus)
    node.driver_clients = ["nvidia-persistenced", "nvidia-device-plugin (the kubelet's GPU device plugin)", "nv-hostengine (DCGM)"]
    result, calls = node.run(capsys, "whole")
    assert result["reboot_required"] is True
    held = "held by nvidia-persistenced, nvidia-device-plugin (the kubelet's GPU device plugin), nv-hostengine (DCGM)"
    assert result["msg"].startswith(f"Layout 'whole' is applied except on GPU 0 ({held}), GPU 1 ({held}), whose MIG mode change waits")
    assert "persistence mode" not in result["msg"]
    assert [argv for argv in argvs(calls, mutating=True) if argv[0] == "-r"] == [["-r", "-i", "0,1"]]


def test_ampere_reset_blocked_by_a_forced_process_names_its_pid(make_node, capsys):
    processes = [{"pid": 4242, "process_name": "python3"}]
    node = make_node(model=A100_80GB, count=1, gpus=[{"mig_mode": OFF, "processes": processes}])
    refused, calls = node.run(capsys, "whole")
    assert refused["failed"] is True
    assert argvs(calls, mutating=True) == []
    result, calls = node.run(capsys, "whole", force=True)
    assert result["reboot_required"] is True
    assert "PID 4242 (python3)" in result["msg"]
    assert node.gpu_instances(0) == []


def test_ampere_gpu_that_cannot_be_reset_waits_for_a_reboot(make_node, capsys):
    node = make_node(model=A100_80GB, count=1, gpu_reset_supported=False, gpus=[{"mig_mode": OFF}])
    result, calls = node.run(capsys, "whole")
    assert result["reboot_required"] is True
    assert result["msg"].startswith("Layout 'whole' is applied except on GPU 0 (it cannot be reset on this host, as in a passthrough VM), whose")
    assert argvs(calls, mutating=True) == [["-i", "0", "-mig", "1"], ["-r", "-i", "0"]]


def test_ampere_reset_blocked_by_a_node_service_names_it_when_it_runs_here(make_node, capsys):
    node = make_node(model=A100_80GB, count=1, holders=["nv-hostengine"], gpus=[{"mig_mode": OFF}])
    node.driver_clients = ["nv-hostengine (DCGM)"]
    result, calls = node.run(capsys, "whole")
    assert result["reboot_required"] is True
    assert result["msg"].startswith("Layout 'whole' is applied except on GPU 0 (held by nv-hostengine (DCGM)), whose MIG mode change waits")
    assert node.gpu_instances(0) == []


def test_ampere_reset_blocked_by_something_unseen_still_reports_reboot_required(make_node, capsys):
    node = make_node(model=A100_80GB, count=1, holders=["nv-hostengine"], gpus=[{"mig_mode": OFF}])
    result, calls = node.run(capsys, "whole")
    assert result["reboot_required"] is True
    assert result["msg"].startswith("Layout 'whole' is applied except on GPU 0 (what holds it could not be found), whose MIG mode change waits")


# ---------------------------------------------------------------- Hopper: MIG mode does not survive a driver reload


def test_hopper_layout_is_re_applied_after_a_driver_reload(make_node, capsys):
    node = make_node(count=2)
    node.run(capsys, "all-balanced")
    node.edit_state(lambda state: state.update(driver_reloads=state["driver_reloads"] + 1))
    result, calls = node.run(capsys, "all-balanced")
    assert result["changed"] is True
    assert [argv for argv in argvs(calls, mutating=True) if "-mig" in argv] == [["-i", "0", "-mig", "1"], ["-i", "1", "-mig", "1"]]
    assert mig_devices(result) == [(0, True, BALANCED_80GB), (1, True, BALANCED_80GB)]
    again, calls = node.run(capsys, "all-balanced")
    assert again["changed"] is False


# ---------------------------------------------------------------- running processes


def test_running_processes_are_refused_by_name_without_force(make_node, capsys):
    node = make_node(count=2)
    node.run(capsys, "all-balanced")
    two_g = [gi for gi in node.gpu_instances(1) if gi[1] == 14][0]
    node.edit_state(lambda state: state["gpus"][1].update(processes=[{"pid": 4242, "process_name": "python3", "gpu_instance_id": two_g[0]}]))
    result, calls = node.run(capsys, "small")
    assert result["failed"] is True
    assert result["msg"] == (
        "Compute processes run on GPUs whose MIG layout must change: GPU 1 runs PID 4242 (python3). "
        "Stop them, or set force=true to change these GPUs anyway."
    )
    assert argvs(calls, mutating=True) == []


def test_force_keeps_a_process_on_an_instance_the_layout_keeps(make_node, capsys):
    node = make_node(count=1)
    node.run(capsys, "all-balanced")
    three_g = [gi for gi in node.gpu_instances(0) if gi[1] == 9][0]
    node.edit_state(lambda state: state["gpus"][0].update(processes=[{"pid": 77, "process_name": "serve", "gpu_instance_id": three_g[0]}]))
    result, calls = node.run(capsys, "small", force=True)
    assert "failed" not in result
    assert mig_devices(result) == [(0, True, SMALL_80GB)]
    assert three_g in node.gpu_instances(0)
    assert node.state()["gpus"][0]["processes"][0]["pid"] == 77


def test_force_on_an_instance_in_use_fails_and_restores_the_gpu(make_node, capsys):
    node = make_node(count=2)
    node.run(capsys, "all-balanced")
    before = node.gpu_instances(0)
    two_g = [gi for gi in before if gi[1] == 14][0]
    node.edit_state(lambda state: state["gpus"][0].update(processes=[{"pid": 88, "process_name": "train", "gpu_instance_id": two_g[0]}]))
    result, calls = node.run(capsys, "small", force=True)
    assert result["failed"] is True
    assert result["msg"].startswith(f"Applying layout 'small' stopped at GPU 0: mig -dci -gi {two_g[0]} -i 0 failed with exit code 19")
    assert result["msg"].endswith(
        "(a process or driver client still uses what was to be destroyed or switched); GPU 0 is back to its previous GPU instances, GPU 1 was left unchanged."
    )
    assert node.gpu_instances(0) == before
    assert mig_devices(result) == [(0, True, BALANCED_80GB), (1, True, BALANCED_80GB)]


# ---------------------------------------------------------------- a step failing halfway


RACING_CLIENT = """#!/bin/sh
# Before the module's first -cgi, another MIG client takes memory slice 1 of GPU 0, as a second manager could.
case " $* " in
  *" -cgi "*) if [ ! -e "{mark}" ]; then
      : > "{mark}"
      env -u NVSMI_DOUBLE_CALL_LOG "{double}" mig -cgi 19:1 -C -i 0 > /dev/null
    fi ;;
esac
exec "{double}" "$@"
"""


def test_a_create_failing_halfway_restores_the_gpu_and_stops(make_node, capsys):
    node = make_node(count=2)
    node.run(capsys, "all-balanced")
    before = node.gpu_instances(0)
    wrapper = node.directory / "nvidia-smi"
    wrapper.write_text(RACING_CLIENT.format(mark=node.directory / "raced", double=DOUBLE), encoding="utf-8")
    wrapper.chmod(0o755)
    two_g = [gi for gi in before if gi[1] == 14][0]

    result, calls = node.run(capsys, "small", nvidia_smi=str(wrapper))

    assert result["failed"] is True
    assert result["msg"] == (
        "Applying layout 'small' stopped at GPU 0: mig -cgi 19:0,19:1 -C -i 0 failed with exit code 23: "
        "Unable to create a GPU instance on GPU  0 using profile 19:1: Insufficient Resources "
        "(the driver found no room where the plan placed an instance, so something else changed the GPU meanwhile); "
        "GPU 0 is back to its previous GPU instances, GPU 1 was left unchanged."
    )
    assert (result["rc"], result["cmd"][1:]) == (23, ["mig", "-cgi", "19:0,19:1", "-C", "-i", "0"])
    mutating = argvs(calls, mutating=True)
    assert mutating[:3] == [
        ["mig", "-dci", "-gi", str(two_g[0]), "-i", "0"],
        ["mig", "-dgi", "-gi", str(two_g[0]), "-i", "0"],
        ["mig", "-cgi", "19:0,19:1", "-C", "-i", "0"],
    ]
    assert mutating[-1] == ["mig", "-cgi", "14:0", "-C", "-i", "0"]
    assert all(argv[-1] == "0" for argv in mutating)
    after = node.gpu_instances(0)
    assert sorted(gi[1:] for gi in after) == sorted(gi[1:] for gi in before)
    assert [gi for gi in after if gi[1] != 14] == [gi for gi in before if gi[1] != 14]
    assert mig_devices(result) == [(0, True, BALANCED_80GB), (1, True, BALANCED_80GB)]
    assert result["actions"][-1] == "GPU 0: create GPU instance 2g.20gb at 0:2 with a full compute instance"


# ---------------------------------------------------------------- bad input: one sentence, no change


BAD_INPUTS = [
    pytest.param(
        A100_40GB,
        {"selected": "big", "mig_configs": {"big": layout({"3g.40gb": 1})}},
        "Layout 'big' cannot be applied to GPU 0, an NVIDIA A100-SXM4-40GB: an NVIDIA A100-SXM4-40GB has no MIG profile 3g.40gb; "
        "its profiles are 1g.5gb, 1g.5gb+me, 1g.10gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb.",
        id="profile-of-another-model",
    ),
    pytest.param(
        H100,
        {"selected": "many", "mig_configs": {"many": layout({"1g.10gb": 8})}},
        "Layout 'many' cannot be applied to GPU 0, an NVIDIA H100 80GB HBM3: it asks for 8 of 1g.10gb, but an NVIDIA H100 80GB HBM3 holds at most 7.",
        id="count-over-capacity",
    ),
    pytest.param(
        H100,
        {"selected": "tight", "mig_configs": {"tight": layout({"3g.40gb": 2, "1g.10gb": 1})}},
        "Layout 'tight' cannot be applied to GPU 0, an NVIDIA H100 80GB HBM3: it fits in instance counts and compute slices, "
        "but its instances need 9 memory slices and an NVIDIA H100 80GB HBM3 has 8.",
        id="fits-in-count-not-in-placement",
    ),
    pytest.param(
        H100,
        {"selected": "far", "mig_configs": {"far": layout({"7g.80gb": 1}, devices=[0, 2])}},
        "Entry 1 of layout 'far' names GPU 2, but this node has GPUs 0 to 1.",
        id="index-out-of-range",
    ),
    pytest.param(
        H100,
        {"selected": "all-balanse"},
        "Layout 'all-balanse' is not defined; the configuration defines all-balanced, all-disabled, small, whole.",
        id="unknown-selected",
    ),
    pytest.param(
        H100,
        {"selected": "a100", "mig_configs": {"a100": layout({"1g.5gb": 7}, **{"device-filter": "0x20B010DE"})}},
        "Layout 'a100' applies to no GPU on this node: its device filters 0x20B010DE match none of its GPUs, which are 0x233010DE.",
        id="device-filter-matching-nothing",
    ),
]


@pytest.mark.parametrize("model, params, message", BAD_INPUTS)
def test_bad_input_fails_with_one_sentence_and_changes_nothing(make_node, capsys, model, params, message):
    node = make_node(model=model, count=2, gpus=[{"mig_mode": ON}, {"mig_mode": ON}])
    result, calls = node.run(capsys, **params)
    assert result["failed"] is True
    assert result["msg"] == message
    assert argvs(calls, mutating=True) == []
    assert "exception" not in result


def test_malformed_yaml_file_fails_before_any_call(make_node, capsys, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("version: v1\nmig-configs:\n  all-balanced:\n    - devices: all\n     mig-enabled: true\n", encoding="utf-8")
    node = make_node()
    result, calls = node.run(capsys, "all-balanced", config_file=str(config))
    assert result["failed"] is True
    assert result["msg"].startswith(f"The MIG configuration file {config} is not valid YAML: ")
    assert calls == []


def test_a_layout_defined_twice_in_a_file_is_refused_before_any_call(make_node, capsys, tmp_path):
    """PyYAML keeps the last of two equal keys; the YAML spec says mapping keys are unique, so mig_config refuses."""
    config = tmp_path / "config.yaml"
    config.write_text("version: v1\nmig-configs:\n  small:\n    - devices: all\n      mig-enabled: false\n"
                      "  small:\n    - devices: all\n      mig-enabled: true\n      mig-devices: {1g.10gb: 7}\n", encoding="utf-8")
    node = make_node()
    result, calls = node.run(capsys, "small", config_file=str(config))
    assert result["failed"] is True
    assert result["msg"] == (f"The MIG configuration file {config} is not valid YAML: the key 'small' appears twice in one mapping "
                             'in "' + str(config) + '", line 6, column 3.')
    assert calls == []


def test_a_merge_key_may_still_be_overridden(make_node, capsys, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("version: v1\nmig-configs:\n  whole:\n    - &base {devices: all, mig-enabled: false}\n"
                      "  split:\n    - <<: *base\n      mig-enabled: true\n      mig-devices: {7g.80gb: 1}\n", encoding="utf-8")
    node = make_node()
    result, _calls = node.run(capsys, "split", config_file=str(config))
    assert "failed" not in result, result


def test_missing_config_file_fails_before_any_call(make_node, capsys, tmp_path):
    node = make_node()
    result, calls = node.run(capsys, "all-balanced", config_file=str(tmp_path / "absent.yaml"))
    assert result["msg"] == f"The MIG configuration file {tmp_path / 'absent.yaml'} cannot be read: No such file or directory."
    assert calls == []


def test_malformed_config_fails_before_any_call(make_node, capsys):
    node = make_node()
    result, calls = node.run(capsys, "a", mig_configs={"a": [{"devices": "all", "mig-enabled": "yes"}]})
    assert result["msg"] == "Entry 1 of layout 'a' has mig-enabled 'yes'; it must be true or false."
    assert calls == []


def test_a_gpu_without_mig_named_explicitly_is_refused(make_node, capsys):
    node = make_node(model=L40S, count=1)
    result, calls = node.run(capsys, "x", mig_configs={"x": layout({}, devices=[0])})
    assert result["msg"] == "Entry 1 of layout 'x' enables MIG on GPU 0, an NVIDIA L40S, which does not support MIG."
    assert argvs(calls, mutating=True) == []


def test_driver_not_loaded(make_node, capsys):
    node = make_node(driver_loaded=False)
    result, calls = node.run(capsys, "all-balanced")
    assert result["msg"] == "The NVIDIA driver is not loaded: nvidia-smi could not communicate with it."
    assert result["rc"] == 9
    assert argvs(calls, mutating=True) == []


def test_missing_nvidia_smi(make_node, capsys, tmp_path):
    node = make_node()
    result, calls = node.run(capsys, "all-balanced", nvidia_smi=str(tmp_path / "nvidia-smi"))
    assert result["msg"] == f"{tmp_path / 'nvidia-smi'} was not found, so no MIG layout can be read or applied."
    assert calls == []
