# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ansible_collections.onprem.gpu.plugins.module_utils._gpu_models import model_info
from ansible_collections.onprem.gpu.plugins.module_utils._mig_planner import LayoutError, check_layout
from ansible_collections.onprem.gpu.plugins.module_utils._mig_profiles import (
    driver_model,
    is_full_compute_instance,
    is_profile_name,
    mig_device_name,
    mig_model,
    mig_model_names,
    mig_resource,
    parse_placements,
    table_disagreements,
)
from ansible_collections.onprem.gpu.plugins.module_utils._nvsmi_mig import parse_gpu_instance_profiles

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "mig"
EIGHT_SLICE_MODELS = [name for name in mig_model_names() if mig_model(name).memory_slices == 8]

# (nvidia-smi ID, name, max count) per model, as public `nvidia-smi mig -lgip` captures print them: A100-SXM4-40GB on
# driver 580.126.09 (a Korean blog post), A100 80GB from NVIDIA/mig-parted issue 97 and a public A100-SXM4-80GB capture,
# H100 80GB HBM3 from a DGX H100 usage note, H100 PCIe from Scaleway's MIG how-to (driver 525.125.06), H100 NVL from
# Azure's "Configure and use MIG on Azure VM" (driver 560.35.03), H200 from NVIDIA/mig-parted issue 120, A30 from a
# public capture on driver 535.183.01; names and counts agree with NVIDIA's MIG User Guide, "Supported MIG Profiles".
PROFILE_TABLES = {
    "NVIDIA A100-SXM4-40GB": [
        (19, "1g.5gb", 7),
        (20, "1g.5gb+me", 1),
        (15, "1g.10gb", 4),
        (14, "2g.10gb", 3),
        (9, "3g.20gb", 2),
        (5, "4g.20gb", 1),
        (0, "7g.40gb", 1),
    ],
    "NVIDIA A100-SXM4-80GB": [
        (19, "1g.10gb", 7),
        (20, "1g.10gb+me", 1),
        (15, "1g.20gb", 4),
        (14, "2g.20gb", 3),
        (9, "3g.40gb", 2),
        (5, "4g.40gb", 1),
        (0, "7g.80gb", 1),
    ],
    "NVIDIA A100 80GB PCIe": [
        (19, "1g.10gb", 7),
        (20, "1g.10gb+me", 1),
        (15, "1g.20gb", 4),
        (14, "2g.20gb", 3),
        (9, "3g.40gb", 2),
        (5, "4g.40gb", 1),
        (0, "7g.80gb", 1),
    ],
    "NVIDIA H100 80GB HBM3": [
        (19, "1g.10gb", 7),
        (20, "1g.10gb+me", 1),
        (15, "1g.20gb", 4),
        (14, "2g.20gb", 3),
        (9, "3g.40gb", 2),
        (5, "4g.40gb", 1),
        (0, "7g.80gb", 1),
    ],
    "NVIDIA H100 PCIe": [
        (19, "1g.10gb", 7),
        (20, "1g.10gb+me", 1),
        (15, "1g.20gb", 4),
        (14, "2g.20gb", 3),
        (9, "3g.40gb", 2),
        (5, "4g.40gb", 1),
        (0, "7g.80gb", 1),
    ],
    "NVIDIA H100 NVL": [
        (19, "1g.12gb", 7),
        (20, "1g.12gb+me", 1),
        (15, "1g.24gb", 4),
        (14, "2g.24gb", 3),
        (9, "3g.47gb", 2),
        (5, "4g.47gb", 1),
        (0, "7g.94gb", 1),
    ],
    "NVIDIA H200": [
        (19, "1g.18gb", 7),
        (20, "1g.18gb+me", 1),
        (15, "1g.35gb", 4),
        (14, "2g.35gb", 3),
        (9, "3g.71gb", 2),
        (5, "4g.71gb", 1),
        (0, "7g.141gb", 1),
    ],
    "NVIDIA A30": [(14, "1g.6gb", 4), (21, "1g.6gb+me", 1), (5, "2g.12gb", 2), (6, "2g.12gb+me", 1), (0, "4g.24gb", 1)],
}


def fixture_text(name):
    return (FIXTURES / name).read_text(encoding="utf-8")


def recorded_placements(name):
    """Return ``{profile id: (starts, size)}`` from a recorded ``nvidia-smi mig -lgipp`` output."""
    line = re.compile(r"^GPU +\d+ Profile ID +(\d+) Placements? *: \{([\d,]+)\}:(\d+)$")
    placements = {}
    for match in map(line.match, fixture_text(name).splitlines()):
        placements[int(match.group(1))] = (tuple(int(start) for start in match.group(2).split(",")), int(match.group(3)))
    return placements


def test_the_catalogue_covers_the_models_of_the_collection():
    assert mig_model_names() == sorted(PROFILE_TABLES)


@pytest.mark.parametrize("gpu_name", sorted(PROFILE_TABLES))
def test_profiles_match_the_recorded_tables(gpu_name):
    profiles = mig_model(gpu_name).profiles
    assert [(profile.profile_id, profile.name, profile.max_count) for profile in profiles] == PROFILE_TABLES[gpu_name]


@pytest.mark.parametrize("gpu_name", sorted(PROFILE_TABLES))
def test_every_catalogued_model_is_a_known_mig_capable_gpu(gpu_name):
    assert model_info(gpu_name)["mig_capable"] is True


@pytest.mark.parametrize(
    "fixture, gpu_name",
    [
        pytest.param("lgip__h100_pcie__r525_layout_a.txt", "NVIDIA H100 PCIe", id="h100-pcie-r525"),
        pytest.param("lgip__a100_sxm4_40gb__r580_layout_b.txt", "NVIDIA A100-SXM4-40GB", id="a100-40gb-r580"),
        pytest.param("lgip__a30__r535.txt", "NVIDIA A30", id="a30-r535-with-2g-me"),
    ],
)
def test_profiles_match_what_the_driver_printed(fixture, gpu_name):
    printed = [(row.profile_id, row.name, row.total) for row in parse_gpu_instance_profiles(fixture_text(fixture))]
    assert printed == [(profile.profile_id, profile.name, profile.max_count) for profile in mig_model(gpu_name).profiles]


@pytest.mark.parametrize("gpu_name", EIGHT_SLICE_MODELS)
def test_eight_slice_placements_match_the_recorded_lgipp(gpu_name):
    recorded = recorded_placements("lgipp__8_slice__mig_guide.txt")
    assert {profile.profile_id: (profile.starts, profile.memory_slices) for profile in mig_model(gpu_name).profiles} == recorded


def test_a30_placements_match_the_recorded_lgipp():
    # R535 lists 2g.12gb+me (ID 6), which the older recording predates; every profile the older one lists is the same.
    recorded = recorded_placements("lgipp__a30__r535.txt")
    table = {profile.profile_id: (profile.starts, profile.memory_slices) for profile in mig_model("NVIDIA A30").profiles}
    assert table == recorded
    assert recorded_placements("lgipp__a30.txt").items() <= table.items()


def driver_rows(lgip):
    return parse_gpu_instance_profiles(fixture_text(lgip))


def driver_placements(lgipp, gpu=0):
    return {profile_id: placement for (index, profile_id), placement in parse_placements(fixture_text(lgipp)).items() if index == gpu}


@pytest.mark.parametrize("lgipp", ["lgipp__8_slice__mig_guide.txt", "lgipp__a30.txt", "lgipp__a30__r535.txt"])
def test_parse_placements_reads_what_the_lgipp_recordings_print(lgipp):
    assert {(0, profile_id): placement for profile_id, placement in recorded_placements(lgipp).items()} == parse_placements(fixture_text(lgipp))


def test_parse_placements_of_several_gpus_skips_other_lines():
    text = "$ nvidia-smi mig -lgipp\nGPU  0 Profile ID  0 Placement : {0}:8\nGPU  1 Profile ID  9 Placements: {0,4}:4\nAll done.\n"
    assert parse_placements(text) == {(0, 0): ((0,), 8), (1, 9): ((0, 4), 4)}


@pytest.mark.parametrize(
    "lgip, lgipp, gpu_name",
    [
        pytest.param("lgip__h100_pcie__r525_layout_a.txt", "lgipp__8_slice__mig_guide.txt", "NVIDIA H100 PCIe", id="h100-pcie-r525"),
        pytest.param("lgip__a100_sxm4_40gb__r580_layout_b.txt", "lgipp__8_slice__mig_guide.txt", "NVIDIA A100-SXM4-40GB", id="a100-40gb-r580"),
        pytest.param("lgip__a30__r535.txt", "lgipp__a30__r535.txt", "NVIDIA A30", id="a30-r535"),
    ],
)
def test_the_driver_answer_agrees_with_the_tables(lgip, lgipp, gpu_name):
    table = mig_model(gpu_name)
    for known in (table, None):
        model = driver_model(gpu_name, driver_rows(lgip), driver_placements(lgipp), known)
        assert model == table


def test_a_model_without_a_table_is_described_by_its_driver():
    # H100 96GB on a GH200, recorded -lgip; its -lgipp is the 8-slice one (the same on every 8-slice GPU in the MIG User Guide
    # and public captures).
    model = driver_model("NVIDIA GH200 480GB", driver_rows("lgip__gh200_96gb.txt"), driver_placements("lgipp__8_slice__mig_guide.txt"))
    assert mig_model("NVIDIA GH200 480GB") is None
    assert (model.memory_slices, model.compute_slices) == (8, 7)
    assert [(profile.profile_id, profile.name, profile.max_count, profile.memory_slices) for profile in model.profiles] == [
        (19, "1g.12gb", 7, 1),
        (20, "1g.12gb+me", 1, 1),
        (15, "1g.24gb", 4, 2),
        (14, "2g.24gb", 3, 2),
        (9, "3g.48gb", 2, 4),
        (5, "4g.48gb", 1, 4),
        (0, "7g.96gb", 1, 8),
    ]
    # mig-parted's all-balanced for "H100-96GB, PG506-96GB, GH200, H20" (gpu-operator default-mig-parted-config).
    check_layout(model, {"1g.12gb": 2, "2g.24gb": 1, "3g.48gb": 1})
    with pytest.raises(LayoutError) as error:
        check_layout(model, {"1g.12gb+me": 2})
    assert str(error.value) == "it asks for 2 of 1g.12gb+me, but an NVIDIA GH200 480GB holds at most 1"


def test_a_drifted_driver_name_is_an_alias_of_the_table_name():
    text = fixture_text("lgip__h100_pcie__r525_layout_a.txt").replace("MIG 3g.40gb ", "MIG 3g.39gb ")
    table = mig_model("NVIDIA H100 PCIe")
    model = driver_model("NVIDIA H100 PCIe", parse_gpu_instance_profiles(text), driver_placements("lgipp__8_slice__mig_guide.txt"), table)
    assert model.profile("3g.39gb") is model.profile("3g.40gb") is model.profile_by_id(9)
    assert model.profile_by_id(9).name == "3g.40gb"


def test_the_driver_wins_where_it_contradicts_the_table():
    # A profile the driver places differently from the table keeps the driver's geometry and name.
    placements = {**driver_placements("lgipp__8_slice__mig_guide.txt"), 9: ((0,), 8)}
    model = driver_model("NVIDIA H100 PCIe", driver_rows("lgip__h100_pcie__r525_layout_a.txt"), placements, mig_model("NVIDIA H100 PCIe"))
    assert (model.profile_by_id(9).starts, model.profile_by_id(9).memory_slices) == ((0,), 8)


def test_a_contradiction_of_the_table_is_one_sentence_per_model_naming_its_gpus():
    placements = {**driver_placements("lgipp__8_slice__mig_guide.txt"), 9: ((0,), 8)}
    # The driver says two 1g.10gb+me fit, and places 3g.40gb only at 0:8.
    lgip = fixture_text("lgip__h100_pcie__r525_layout_a.txt").replace("MIG 1g.10gb+me    20     1/1", "MIG 1g.10gb+me    20     2/2")
    rows = parse_gpu_instance_profiles(lgip)
    contradicted = driver_model("NVIDIA H100 PCIe", rows, placements, mig_model("NVIDIA H100 PCIe"))
    agreeing = driver_model("NVIDIA H100 PCIe", driver_rows("lgip__h100_pcie__r525_layout_a.txt"), driver_placements("lgipp__8_slice__mig_guide.txt"))
    assert table_disagreements({0: contradicted, 1: agreeing, 2: contradicted}) == [
        "The driver of GPU 0, 2, an NVIDIA H100 PCIe, contradicts this collection's MIG profile table: "
        "it lists profile ID 20 as 1g.10gb+me at {0,1,2,3,4,5,6}:1, at most 2 where the table has 1g.10gb+me at {0,1,2,3,4,5,6}:1, at most 1; "
        "it lists profile ID 9 as 3g.40gb at {0}:8, at most 2 where the table has 3g.40gb at {0,4}:4, at most 2; the plan follows the driver."
    ]


@pytest.mark.parametrize(
    "lgip, lgipp, gpu_name",
    [
        pytest.param("lgip__a30__r535.txt", "lgipp__a30__r535.txt", "NVIDIA A30", id="a30-r535"),
        pytest.param("lgip__gh200_96gb.txt", "lgipp__8_slice__mig_guide.txt", "NVIDIA GH200 480GB", id="no-table"),
    ],
)
def test_no_sentence_where_the_driver_agrees_or_no_table_exists(lgip, lgipp, gpu_name):
    drifted = fixture_text(lgip).replace("MIG 2g.12gb ", "MIG 2g.11gb ")
    model = driver_model(gpu_name, parse_gpu_instance_profiles(drifted), driver_placements(lgipp), mig_model(gpu_name))
    assert table_disagreements({0: model}) == []


def test_profiles_without_placements_are_left_out():
    assert driver_model("NVIDIA A30", driver_rows("lgip__a30__r535.txt"), {}) is None
    model = driver_model("NVIDIA A30", driver_rows("lgip__a30__r535.txt"), driver_placements("lgipp__a30.txt"))
    assert model.profile("2g.12gb+me") is None and model.profile("2g.12gb") is not None


@pytest.mark.parametrize("gpu_name", sorted(PROFILE_TABLES))
def test_geometry_is_consistent(gpu_name):
    model = mig_model(gpu_name)
    for profile in model.profiles:
        assert all(start + profile.memory_slices <= model.memory_slices for start in profile.starts)
        assert profile.compute_slices <= model.compute_slices
        assert profile.max_count <= len(profile.starts)


@pytest.mark.parametrize("gpu_name", ["NVIDIA L40S", "NVIDIA B200", "H100 80GB HBM3", ""])
def test_models_without_a_table(gpu_name):
    assert mig_model(gpu_name) is None


def test_lookup_by_name_and_id():
    model = mig_model("NVIDIA H100 80GB HBM3")
    assert model.profile("3g.40gb") is model.profile_by_id(9)
    assert model.profile("3g.39gb") is None
    assert model.profile_by_id(21) is None


@pytest.mark.parametrize(
    "profile, names",
    [
        ("1g.10gb", ()),
        ("2g.20gb", ("1c.2g.20gb",)),
        ("3g.40gb", ("1c.3g.40gb", "2c.3g.40gb")),
        ("7g.80gb", ("1c.7g.80gb", "2c.7g.80gb", "3c.7g.80gb", "4c.7g.80gb")),
    ],
)
def test_compute_instance_profiles(profile, names):
    assert mig_model("NVIDIA H100 80GB HBM3").profile(profile).compute_instance_names() == names


@pytest.mark.parametrize(
    "name, valid",
    [
        ("1g.10gb", True),
        ("1c.3g.40gb", True),
        ("1g.10gb+me", True),
        ("1g.24gb+me.all", True),
        ("1g.24gb-me", True),
        ("7g.141gb", True),
        ("1g.10GB", False),
        ("1g10gb", False),
        ("g.10gb", False),
        ("1g.10gb+", False),
        ("1g.10gb+1me", False),
        ("MIG 1g.10gb", False),
        ("", False),
        (7, False),
    ],
)
def test_is_profile_name(name, valid):
    assert is_profile_name(name) is valid


@pytest.mark.parametrize("name, full", [("3g.40gb", True), ("3c.3g.40gb", True), ("1c.3g.40gb", False), ("2c.7g.80gb", False), ("MIG 3g.40gb", False)])
def test_is_full_compute_instance(name, full):
    assert is_full_compute_instance(name) is full


# The name part of a Kubernetes extended resource (a qualified name: apimachinery validation IsQualifiedName).
_QUALIFIED_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


@pytest.mark.parametrize(
    "profile, resource",
    [
        ("1g.10gb", "nvidia.com/mig-1g.10gb"),
        ("7g.141gb", "nvidia.com/mig-7g.141gb"),
        ("1g.10gb+me", "nvidia.com/mig-1g.10gb.me"),
        ("1g.5gb+me", "nvidia.com/mig-1g.5gb.me"),
        ("1g.24gb+me.all", "nvidia.com/mig-1g.24gb.me.all"),
        ("1g.24gb+gfx", "nvidia.com/mig-1g.24gb.gfx"),
        ("1g.24gb-me", "nvidia.com/mig-1g.24gb-me"),
    ],
)
def test_mig_resource_is_the_device_plugins_name(profile, resource):
    """The device plugin's rule, k8s-device-plugin v0.20.0 internal/rm/rm.go AddDefaultResourcesToConfig:
    ``strings.ReplaceAll("mig-"+p.String(), "+", ".")`` under the nvidia.com/ domain, one resource per GPU-instance
    profile; api/config/v1/resources.go matches a device's profile against the whole pattern since v0.20.0, so a +me
    instance counts under its own resource. GPU feature discovery names its labels after the same resource with the
    device written as internal/resource/nvml-mig-device.go GetName writes it ('+' as '.')."""
    assert mig_resource(profile) == resource
    assert resource.startswith("nvidia.com/") and _QUALIFIED_NAME.match(resource.split("/", 1)[1])
    assert mig_resource(profile) == "nvidia.com/mig-" + mig_device_name(profile)
    assert "+" not in mig_device_name(profile)
