"""Tests of the MIG half of the lab's nvidia-smi double: mode changes, GPU reset, instances, tables.

Each test puts a simulated node in the state a recording was made in, by the double's own
commands where the recording says which commands were run, or by writing the state file
where only the resulting table was recorded, and then compares the double's output with the
recording byte for byte (tests/lab/fixtures/nvidia_smi_mig, copied from the shared reference
notes, mig.md).  Only the recorded GPU's identity (bus id, UUID) is swapped for the simulated
GPU's, through ``recorded_with``, which fails when the recorded value is not there.
"""

import json
import pathlib
import re

import pytest

from test_nvidia_smi_double import IS_ROOT, NOBODY, assert_fails, recorded_with, temporary_lab

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures" / "nvidia_smi_mig"
# Almost every test here creates, destroys or switches something, which needs root as on the real tool;
# the permission tests then call the double as nobody.
pytestmark = pytest.mark.skipif(not IS_ROOT, reason="MIG changes need root, as on the real tool")

A100_40GB = "NVIDIA A100-SXM4-40GB"
A100_80GB = "NVIDIA A100-SXM4-80GB"
H100_SXM = "NVIDIA H100 80GB HBM3"
H100_PCIE = "NVIDIA H100 PCIe"
H200 = "NVIDIA H200"
GH200 = "NVIDIA GH200 480GB"
L40S = "NVIDIA L40S"
MIG_MODELS = (A100_40GB, A100_80GB, H100_SXM, H100_PCIE, H200)
# Bus id of GPU 0 of an HGX H100 board, as the double numbers the slots.
H100_SXM_GPU0 = "00000000:18:00.0"
# The drivers of the recordings (mig.md 4.1): layout A up to R570, layout B from R575.
R525 = "525.125.06"
R580 = "580.126.09"

EXIT_INVALID_ARGUMENT, EXIT_NOT_SUPPORTED, EXIT_NO_PERMISSION, EXIT_NOT_FOUND = 2, 3, 4, 6
EXIT_DRIVER_NOT_LOADED, EXIT_IN_USE, EXIT_INSUFFICIENT_RESOURCES, EXIT_OTHER = 9, 19, 23, 255

ON = {"current": "Enabled", "pending": "Enabled"}
OFF = {"current": "Disabled", "pending": "Disabled"}
NO_MIG_ENABLED = "No MIG-enabled devices found.\n"
NO_MIG_SUPPORTED = "No MIG-supported devices found.\n"


def recorded(name):
    return (FIXTURES / name).read_text(encoding="utf-8")


@pytest.fixture(name="lab")
def lab_fixture():
    with temporary_lab() as lab:
        yield lab


def make_node(lab, model, count=1, driver=R580, gpus=None, **node_state):
    """A node of ``count`` GPUs of ``model`` on ``driver``; ``gpus`` and keyword arguments seed the state file."""
    lab.set_hardware(model, count)
    lab.set_driver(driver)
    lab.write_state({**node_state, "gpus": gpus or []})


def mig_on(count=1, persistence="Enabled", **extra):
    """State entries of GPUs with MIG on; persistence on, as on hosts where nvidia-persistenced runs, unless told."""
    return [{"mig_mode": dict(ON), "persistence_mode": persistence, **extra} for index in range(count)]


def gpu_instance(gi_id, profile_id, start, *compute_instances):
    return {"id": gi_id, "profile_id": profile_id, "placement": {"start": start}, "compute_instances": list(compute_instances)}


def compute_instance(ci_id, profile_id, start, size, uuid=None):
    ci = {"id": ci_id, "profile_id": profile_id, "placement": {"start": start, "size": size}}
    if uuid:
        ci["uuid"] = uuid
    return ci


def mig_mode(lab, index=0):
    return lab.query("mig.mode.current,mig.mode.pending", "-i", str(index)).strip()


def gpu_instances(lab, *arguments):
    """(GI id, profile id, placement) per -lgi row, in the order printed."""
    table = lab.ok("mig", "-lgi", *arguments).splitlines()
    # A row reads: GPU, "MIG", name, profile id, instance id, start:size.
    rows = [line.strip("|").split() for line in table if re.match(r"^\|\s+\d+\s+MIG ", line)]
    return [(int(row[4]), int(row[3]), row[5]) for row in rows]


def created_ids(output):
    return [int(found) for found in re.findall(r"^Successfully created GPU instance ID +(\d+) ", output, re.M)]


def table_parts(table):
    """A mig table split into its header (down to the ==== rule) and its blocks (each closed by a +---- rule)."""
    lines = table.splitlines(keepends=True)
    cut = next(index for index, line in enumerate(lines) if line.startswith("|="))
    header, blocks, block = lines[: cut + 1], [], []
    for line in lines[cut + 1:]:
        block.append(line)
        if line.startswith("+"):
            blocks.append("".join(block))
            block = []
    return "".join(header), blocks


def excerpt(table, recording):
    """The table with only the blocks the recording kept: several recorded samples are excerpts of a full table."""
    header, blocks = table_parts(table)
    kept = set(table_parts(recording)[1])
    return header + "".join(block for block in blocks if block in kept)


def as_nobody(lab, *arguments):
    return lab.run(*arguments, user=NOBODY if IS_ROOT else None)


# ---------------------------------------------------------------- recorded tables


def test_lgip_layout_a_equals_the_r525_h100_pcie_recording(lab):
    make_node(lab, H100_PCIE, driver=R525, gpus=mig_on())
    output = lab.ok("mig", "-lgip")
    assert output == recorded("mig_md_4_1_lgip_layout_a_h100pcie_r525.txt")
    assert excerpt(output, recorded("lgip_r525_h100pcie.txt")) == recorded("lgip_r525_h100pcie.txt")


def test_lgip_layout_b_equals_the_r580_a100_recording(lab):
    make_node(lab, A100_40GB, driver=R580, gpus=mig_on())
    output = lab.ok("mig", "--list-gpu-instance-profiles")
    assert output == recorded("mig_md_4_1_lgip_layout_b_a100_r580.txt")
    assert excerpt(output, recorded("lgip_r580_a100.txt")) == recorded("lgip_r580_a100.txt")


@pytest.mark.parametrize("driver, width", [("470.57.02", 79), ("570.86.15", 79), ("575.51.03", 81), ("580.65.06", 81)])
def test_the_driver_branch_picks_the_table_layout(lab, driver, width):
    make_node(lab, H100_SXM, driver=driver, gpus=mig_on())
    assert {len(line) for line in lab.ok("mig", "-lgip").splitlines()} == {width}
    lab.ok("mig", "-cgi", "19")
    assert {len(line) for line in lab.ok("mig", "-lgi").splitlines()} == {width - 22}


def test_free_counts_follow_the_recorded_r580_worked_example(lab):
    # mig.md 3.1: A100-SXM4-40GB on R580.126.09, after -cgi 4g.20gb, then 2g.10gb, then 1g.5gb.
    make_node(lab, A100_40GB, gpus=mig_on())
    expected = [
        ("4g.20gb", "0:4", "3/7 1/1 2/4 1/3 1/2 0/1 0/1"),
        ("2g.10gb", "4:2", "1/7 1/1 1/4 0/3 0/2 0/1 0/1"),
        ("1g.5gb", "6:1", "0/7 0/1 0/4 0/3 0/2 0/1 0/1"),
    ]
    for name, placement, free in expected:
        lab.ok("mig", "-cgi", name)
        assert placement in [row[2] for row in gpu_instances(lab)]
        assert " ".join(re.findall(r"\b\d/\d\b", lab.ok("mig", "-lgip"))) == free


@pytest.mark.parametrize("model", MIG_MODELS)
def test_lgipp_equals_the_recorded_placements(lab, model):
    make_node(lab, model, gpus=mig_on())
    assert lab.ok("mig", "-lgipp") == recorded("mig_md_3_1_lgipp.txt")


def test_gh200_lgip_equals_the_field_recording_and_lgipp_the_eight_slice_one(lab):
    # H100 96GB on a GH200, a model the collection has no MIG table for; layout A, so a driver before R575.
    make_node(lab, GH200, count=2, driver="560.35.03", gpus=mig_on(2))
    assert lab.ok("mig", "-lgip", "-i", "0") == recorded("lgip_gh200_96gb_field.txt")
    assert lab.ok("mig", "-lgipp", "-i", "0") == recorded("mig_md_3_1_lgipp.txt")
    lab.ok("mig", "-cgi", "15,15,15", "-C", "-i", "0")
    # The GH200 log: 1g.24gb instances get the REV1 compute profile (ID 7).
    assert {row[1] for row in gpu_instances(lab, "-i", "0")} == {15}
    assert "using profile MIG 1g.24gb (ID  7)" in lab.ok("mig", "-cgi", "15", "-C", "-i", "1")


def test_profile_tables_list_every_mig_gpu_in_one_table(lab):
    make_node(lab, H200, count=2, gpus=mig_on(2))
    header, blocks = table_parts(lab.ok("mig", "-lgip"))
    assert [block[:5] for block in blocks] == ["|   0"] * 7 + ["|   1"] * 7
    assert "|   1  MIG 7g.141gb         0     1/1        139.75     No     132    7     0   |\n" in blocks[-1]
    assert lab.ok("mig", "-lgipp", "-i", "1") == recorded_with(recorded("mig_md_3_1_lgipp.txt"), {"GPU  0": "GPU  1"})
    assert header.count("\n") == 5


def test_lgi_layout_b_equals_the_r580_a100_recording(lab):
    # The recorded A100 R580 host numbered its instances its own way (mig.md 3.2b): the state is written as recorded.
    make_node(lab, A100_40GB, gpus=mig_on(gpu_instances=[gpu_instance(2, 5, 0), gpu_instance(3, 14, 4), gpu_instance(9, 19, 6)]))
    assert lab.ok("mig", "-lgi") == recorded("lgi_r580_a100.txt") == recorded("mig_md_4_3_lgi_layout_b_a100_r580.txt")


def test_lcip_equals_the_r580_a100_recording(lab):
    make_node(lab, A100_40GB, gpus=mig_on(gpu_instances=[gpu_instance(2, 5, 0), gpu_instance(9, 19, 6)]))
    output = lab.ok("mig", "-lcip", "-gi", "2")
    assert output == recorded("mig_md_4_5_lcip_a100_r580.txt")
    assert excerpt(output, recorded("lcip_a100.txt")) == recorded("lcip_a100.txt")
    # Free drops as compute instances are created (mig.md 4.5: "4g.20gb 3* 0/1" after creating it).
    lab.ok("mig", "-cci", "-gi", "2")
    assert re.findall(r"(\d+\*?) +(\d/\d)", lab.ok("mig", "-lcip", "-gi", "2")) == [("0", "0/4"), ("1", "0/2"), ("3*", "0/1")]


def test_lci_rows_equal_the_r580_a100_recording_once_built_with_cci(lab):
    make_node(lab, A100_40GB, gpus=mig_on(gpu_instances=[gpu_instance(2, 5, 0), gpu_instance(3, 14, 4), gpu_instance(9, 19, 6)]))
    assert lab.ok("mig", "-cci", "0,0", "-gi", "3") == (
        "Successfully created compute instance ID  0 on GPU  0 GPU instance ID  3 using profile MIG 1c.2g.10gb (ID  0)\n"
        "Successfully created compute instance ID  1 on GPU  0 GPU instance ID  3 using profile MIG 1c.2g.10gb (ID  0)\n"
    )
    # Without a profile, every GPU instance that has no compute instance yet gets its default one.
    assert lab.ok("mig", "-cci") == (
        "Successfully created compute instance ID  0 on GPU  0 GPU instance ID  9 using profile MIG 1g.5gb (ID  0)\n"
        "Successfully created compute instance ID  0 on GPU  0 GPU instance ID  2 using profile MIG 4g.20gb (ID  3)\n"
    )
    rows = table_parts(lab.ok("mig", "-lci"))[1]
    assert "".join(rows) == recorded("mig_md_4_4_lci_a100_r580_rows.txt")


def test_lci_equals_the_dgx_h100_recording(lab):
    make_node(lab, H100_SXM, gpus=mig_on())
    # Explicit placements at slices 0 and 1 give the recorded GPU instance ids 7 and 8.
    assert created_ids(lab.ok("mig", "-cgi", "19:0,19:1", "-C")) == [7, 8]
    assert lab.ok("mig", "-lci") == recorded("mig_md_4_4_lci_dgx_h100.txt")


def test_lci_equals_the_mixed_sample(lab):
    # 1g.10gb beside 1c.2g.10gb exists only on an A100 40GB, where 1g.10gb is the double-memory 1g (profile 15).
    instances = [
        gpu_instance(3, 14, 2, compute_instance(1, 0, 1, 1)),
        gpu_instance(7, 15, 0, compute_instance(0, 0, 0, 1)),
        gpu_instance(10, 15, 6, compute_instance(0, 0, 0, 1)),
    ]
    make_node(lab, A100_40GB, gpus=mig_on(gpu_instances=instances))
    assert lab.ok("mig", "-lci") == recorded("lci_h100.txt")


def test_list_shows_mig_devices_as_recorded_on_an_h100_pcie(lab):
    uuids = re.findall(r"MIG-[0-9a-f-]{36}", recorded("mig_md_4_10_list_h100pcie.txt"))
    instances = [
        gpu_instance(2, 9, 4, compute_instance(0, 2, 0, 3, uuids[0])),
        gpu_instance(7, 19, 0, compute_instance(0, 0, 0, 1, uuids[1])),
        gpu_instance(8, 19, 1, compute_instance(0, 0, 0, 1, uuids[2])),
        gpu_instance(9, 19, 2, compute_instance(0, 0, 0, 1, uuids[3])),
    ]
    make_node(lab, H100_PCIE, driver=R525, gpus=mig_on(gpu_instances=instances))
    expected = recorded_with(recorded("mig_md_4_10_list_h100pcie.txt"), {"GPU-7cd6d4d6-9fa8-13be-3c42-09a1b2280a02": lab.uuids()[0]})
    assert lab.ok("-L") == expected


def test_list_shows_mig_devices_as_recorded_on_an_a100(lab):
    uuids = re.findall(r"MIG-[0-9a-f-]{36}", recorded("mig_md_4_10_list_a100_r580.txt"))
    instances = [
        gpu_instance(9, 19, 6, compute_instance(0, 0, 0, 1, uuids[3])),
        gpu_instance(3, 14, 4, compute_instance(1, 0, 1, 1, uuids[2]), compute_instance(0, 0, 0, 1, uuids[1])),
        gpu_instance(2, 5, 0, compute_instance(0, 3, 0, 4, uuids[0])),
    ]
    make_node(lab, A100_40GB, count=2, gpus=mig_on(gpu_instances=instances) + [{"mig_mode": dict(OFF)}])
    gpu0, gpu1 = lab.uuids()
    expected = recorded_with(recorded("mig_md_4_10_list_a100_r580.txt"), {"GPU-9e4aeb94-01c0-5173-4811-4ca60f77b3a9": gpu0})
    # Sorted by GPU instance id then compute instance id, whatever order the state holds them in; GPU 1 has no MIG.
    assert lab.ok("-L") == expected + f"GPU 1: {A100_40GB} (UUID: {gpu1})\n"


# ---------------------------------------------------------------- recorded transcripts


def test_cgi_with_default_compute_instances_then_destroy_as_recorded(lab):
    # Scaleway, H100 PCIe, R525: create, list, then -dci and -dgi in the order -lgi prints.
    make_node(lab, H100_PCIE, driver=R525, gpus=mig_on())
    assert lab.ok("mig", "-cgi", "9,19,19,19", "-C") == recorded("mig_md_4_7_cgi_C_h100pcie_r525.txt")
    assert lab.ok("mig", "-lgi") == recorded("lgi_r525_h100.txt") == recorded("mig_md_4_3_lgi_layout_a_h100pcie_r525.txt")
    listing = lab.ok("-L").splitlines()
    assert [line[:28] for line in listing[1:]] == [
        "  MIG 3g.40gb     Device  0:",
        "  MIG 1g.10gb     Device  1:",
        "  MIG 1g.10gb     Device  2:",
        "  MIG 1g.10gb     Device  3:",
    ]
    destroyed = lab.ok("mig", "-dci") + lab.ok("mig", "-dgi")
    assert destroyed == recorded("mig_md_4_8_dci_dgi_h100pcie_r525.txt")
    assert_fails(lab.run("mig", "-lgi"), EXIT_NOT_FOUND, "No GPU instances found: Not Found\n")
    assert lab.ok("-L") == f"GPU 0: {H100_PCIE} (UUID: {lab.uuids()[0]})\n"


def test_cci_of_named_profiles_as_recorded(lab):
    make_node(lab, H100_SXM, count=8, gpus=mig_on(8))
    assert created_ids(lab.ok("mig", "-i", "7", "-cgi", "3g.40gb:0")) == [1]
    assert lab.ok("mig", "-i", "7", "-cci", "0,1", "-gi", "1") == recorded("mig_md_4_7_cci_h100_gpu7.txt")
    placements = re.findall(r"MIG (\S+) +(\d) +(\d) +(\d:\d)", lab.ok("mig", "-lci", "-i", "7"))
    assert placements == [("1c.3g.40gb", "0", "0", "0:1"), ("2c.3g.40gb", "1", "1", "1:2")]
    # The GPU instance is now full: a third compute instance does not fit.
    assert_fails(
        lab.run("mig", "-i", "7", "-cci", "1c.3g.40gb", "-gi", "1"),
        EXIT_INSUFFICIENT_RESOURCES,
        "Unable to create a compute instance on GPU  7 GPU instance ID  1 using profile 1c.3g.40gb: Insufficient Resources\n"
        "Failed to create compute instances: Insufficient Resources\n",
    )


def test_hopper_double_memory_1g_gets_the_rev1_compute_profile(lab):
    # GH200 recording (mig.md 3.1, 4.7): 1g.24gb (ID 15) is created with compute profile ID 7; the H200 is its sibling.
    make_node(lab, H200, gpus=mig_on())
    recording = (
        "Successfully created GPU instance ID  5 on GPU  0 using profile MIG 1g.24gb (ID 15)\n"
        "Successfully created compute instance ID  0 on GPU  0 GPU instance ID  5 using profile MIG 1g.24gb (ID  7)\n"
    )
    assert lab.ok("mig", "-cgi", "15", "-C") == recorded_with(recording, {"1g.24gb": "1g.35gb"})


# mig.md 3.2b: the published create sequences, the GPU instance ids the driver handed out, and where it placed them.
TRANSCRIPTS = {
    "guide-4-2-1": (A100_40GB, "19,14,5", [13, 5, 1], ["6:1", "4:2", "0:4"]),
    "guide-3-2-1-1": (A100_40GB, "9,19,14,19", [2, 7, 4, 8], ["4:4", "0:1", "2:2", "1:1"]),
    "guide-2-1-1-1-1-1": (A100_40GB, "14,19,19,19,19,19", [5, 13, 7, 8, 9, 10], ["4:2", "6:1", "0:1", "1:1", "2:1", "3:1"]),
    "dgx-h100-7x1g": (H100_SXM, "19,19,19,19,19,19,19", [13, 11, 12, 7, 8, 9, 10], ["6:1", "4:1", "5:1", "0:1", "1:1", "2:1", "3:1"]),
    "scaleway-h100-pcie": (H100_PCIE, "9,19,19,19", [2, 7, 8, 9], ["4:4", "0:1", "1:1", "2:1"]),
    "gh200-3x1g-rev2-on-h200": (H200, "15,15,15", [5, 3, 4], ["4:2", "0:2", "2:2"]),
}


@pytest.mark.parametrize("model, profiles, ids, placements", TRANSCRIPTS.values(), ids=TRANSCRIPTS.keys())
def test_default_placement_and_ids_reproduce_the_published_transcripts(lab, model, profiles, ids, placements):
    make_node(lab, model, gpus=mig_on())
    assert created_ids(lab.ok("mig", "-cgi", profiles)) == ids
    assert sorted(row[::2] for row in gpu_instances(lab)) == sorted(zip(ids, placements))


def test_order_matters_and_a_failed_item_keeps_what_was_created_before(lab):
    make_node(lab, A100_40GB, gpus=mig_on())
    result = lab.run("mig", "-cgi", "19,19,14,9")
    recording = recorded("mig_md_4_7_cgi_failure_a100_40gb.txt")
    assert (result.returncode, result.stdout, result.stderr) == (EXIT_INSUFFICIENT_RESOURCES, recording, "")
    assert sorted(gpu_instances(lab)) == [(3, 14, "0:2"), (11, 19, "4:1"), (13, 19, "6:1")]


def test_scrambled_ids_are_not_the_placement_ids_but_are_what_every_command_reports(lab):
    # For module tests that must prove they read ids instead of deriving them from placements.
    make_node(lab, H100_SXM, gpus=mig_on(), gi_id_personality="scrambled")
    created = created_ids(lab.ok("mig", "-cgi", "9,14,19,19", "-C"))
    rows = gpu_instances(lab)
    assert sorted(created) == sorted(row[0] for row in rows)
    assert len(set(created)) == 4 and all(0 <= gi_id <= 14 for gi_id in created)
    swizzle = {"4:4": 2, "0:2": 3, "2:1": 9, "3:1": 10}
    assert [row[2] for row in sorted(rows, key=lambda row: created.index(row[0]))] == ["4:4", "0:2", "2:1", "3:1"]
    assert [swizzle[row[2]] for row in rows] != [row[0] for row in rows]
    listed = {int(gi) for gi in re.findall(r"^\|\s+0\s+(\d+)\s+MIG", lab.ok("mig", "-lci"), re.M)}
    assert listed == set(created)
    destroyed = lab.ok("mig", "-dci", "-gi", str(created[0]))
    assert destroyed == f"Successfully destroyed compute instance ID  0 from GPU  0 GPU instance ID {created[0]:2d}\n"


# ---------------------------------------------------------------- creating: placements, names, refusals


def test_explicit_placements_and_profile_names(lab):
    make_node(lab, H100_SXM, gpus=mig_on())
    assert lab.ok("mig", "-cgi", "3g.40gb:0,MIG 1g.10gb:4,20:5") == (
        "Successfully created GPU instance ID  1 on GPU  0 using profile MIG 3g.40gb (ID  9)\n"
        "Successfully created GPU instance ID 11 on GPU  0 using profile MIG 1g.10gb (ID 19)\n"
        "Successfully created GPU instance ID 12 on GPU  0 using profile MIG 1g.10gb+me (ID 20)\n"
    )
    assert sorted(gpu_instances(lab)) == [(1, 9, "0:4"), (11, 19, "4:1"), (12, 20, "5:1")]


@pytest.mark.parametrize(
    "item, reason, code",
    [
        ("7g.40gb", "Invalid Argument", EXIT_INVALID_ARGUMENT),  # recorded (mig.md 4.7): a name this GPU lacks
        ("14:6", "Invalid Argument", EXIT_INVALID_ARGUMENT),  # 2g starts only at 0, 2 or 4 (-lgipp)
        ("5:0", "Insufficient Resources", EXIT_INSUFFICIENT_RESOURCES),  # overlaps the 3g at 0:4
        ("20", "Insufficient Resources", EXIT_INSUFFICIENT_RESOURCES),  # one +me per GPU
        ("0", "Insufficient Resources", EXIT_INSUFFICIENT_RESOURCES),
    ],
)
def test_a_create_that_cannot_be_done_is_refused_as_recorded(lab, item, reason, code):
    make_node(lab, H100_SXM, gpus=mig_on(gpu_instances=[gpu_instance(1, 9, 0), gpu_instance(13, 20, 6)]))
    before = gpu_instances(lab)
    expected = f"Unable to create a GPU instance on GPU  0 using profile {item}: {reason}\nFailed to create GPU instances: {reason}\n"
    assert_fails(lab.run("mig", "-cgi", item), code, expected)
    assert gpu_instances(lab) == before


def test_create_goes_gpu_by_gpu_and_stops_at_the_first_failure(lab):
    make_node(lab, A100_80GB, count=3, gpus=mig_on(3))
    lab.ok("mig", "-i", "1", "-cgi", "0")
    result = lab.run("mig", "-cgi", "9")
    assert result.returncode == EXIT_INSUFFICIENT_RESOURCES
    assert result.stdout == (
        "Successfully created GPU instance ID  2 on GPU  0 using profile MIG 3g.40gb (ID  9)\n"
        "Unable to create a GPU instance on GPU  1 using profile 9: Insufficient Resources\n"
        "Failed to create GPU instances: Insufficient Resources\n"
    )
    assert_fails(lab.run("mig", "-lgi", "-i", "2"), EXIT_NOT_FOUND, "No GPU instances found: Not Found\n")


def test_the_fault_knob_fails_the_next_creations_on_its_gpu_then_wears_off(lab):
    # GPU 1 is told to fail its next GPU instance creation, as a driver fault in the middle of a change would.
    make_node(lab, H100_SXM, count=2, gpus=mig_on(1) + mig_on(1, failing_gpu_instance_creations=1))
    result = lab.run("mig", "-cgi", "19:0,19:1", "-C")
    assert result.returncode == EXIT_OTHER
    assert result.stdout.splitlines()[-2:] == [
        "Unable to create a GPU instance on GPU  1 using profile 19:0: Unknown Error",
        "Failed to create GPU instances: Unknown Error",
    ]
    # GPU 0 got both of its instances first; GPU 1 none, and its next try works.
    assert [row[1:] for row in gpu_instances(lab, "-i", "0")] == [(19, "0:1"), (19, "1:1")]
    assert_fails(lab.run("mig", "-lgi", "-i", "1"), EXIT_NOT_FOUND, "No GPU instances found: Not Found\n")
    lab.ok("mig", "-i", "1", "-cgi", "19:0", "-C")
    assert [row[1:] for row in gpu_instances(lab, "-i", "1")] == [(19, "0:1")]


def test_cci_refusals(lab):
    make_node(lab, A100_40GB, gpus=mig_on(gpu_instances=[gpu_instance(1, 9, 0)]))
    assert_fails(
        lab.run("mig", "-cci", "3", "-gi", "1"),
        EXIT_INVALID_ARGUMENT,
        "Unable to create a compute instance on GPU  0 GPU instance ID  1 using profile 3: Invalid Argument\n"
        "Failed to create compute instances: Invalid Argument\n",
    )
    assert_fails(lab.run("mig", "-cci", "-gi", "5"), EXIT_NOT_FOUND, "No GPU instances found: Not Found\n")
    assert lab.ok("mig", "-cci", "2c.3g.20gb,1c.3g.20gb", "-gi", "1").count("Successfully") == 2
    assert lab.run("mig", "-cci", "-gi", "1").returncode == EXIT_INSUFFICIENT_RESOURCES
    # Without a list or -gi, only instances without a compute instance get one: here there are none left.
    assert lab.ok("mig", "-cci") == ""


# ---------------------------------------------------------------- destroying


def test_a_gpu_instance_with_compute_instances_cannot_be_destroyed(lab):
    make_node(lab, H100_SXM, gpus=mig_on())
    lab.ok("mig", "-cgi", "9:0", "-C")
    lab.ok("mig", "-cgi", "19")
    # -lgi order: the 1g (GI 13) goes first, then the 3g (GI 1) is refused as recorded (mig.md 4.8).
    result = lab.run("mig", "-dgi")
    assert (result.returncode, result.stderr) == (EXIT_IN_USE, "")
    assert result.stdout == (
        "Successfully destroyed GPU instance ID 13 from GPU  0\n"
        "Unable to destroy GPU instance ID  1 from GPU  0: In use by another client\n"
        "Failed to destroy GPU instances: In use by another client\n"
    )
    assert gpu_instances(lab) == [(1, 9, "0:4")]
    assert lab.ok("mig", "-dci", "-gi", "1") == "Successfully destroyed compute instance ID  0 from GPU  0 GPU instance ID  1\n"
    assert lab.ok("mig", "-dgi", "-gi", "1") == "Successfully destroyed GPU instance ID  1 from GPU  0\n"


def test_a_compute_instance_with_a_process_cannot_be_destroyed(lab):
    process = {"pid": 4242, "process_name": "python3", "used_memory_mib": 2048, "gpu_instance_id": 3, "compute_instance_id": 0}
    make_node(lab, A100_40GB, gpus=mig_on(processes=[process]))
    lab.ok("mig", "-cgi", "14:0,19:6", "-C")
    result = lab.run("mig", "-dci")
    assert result.returncode == EXIT_IN_USE
    assert result.stdout == (
        "Successfully destroyed compute instance ID  0 from GPU  0 GPU instance ID 13\n"
        "Unable to destroy compute instance ID  0 from GPU  0 GPU instance ID  3: In use by another client\n"
        "Failed to destroy compute instances: In use by another client\n"
    )
    # Once the process is gone, the instance can go.
    lab.edit_state(lambda state: state["gpus"][0].update(processes=[]))
    assert lab.ok("mig", "-dci", "-gi", "3", "-ci", "0") == "Successfully destroyed compute instance ID  0 from GPU  0 GPU instance ID  3\n"


def test_destroy_filters_and_nothing_to_destroy(lab):
    make_node(lab, H100_SXM, count=2, gpus=mig_on(2))
    lab.ok("mig", "-cgi", "19,19,19", "-C")
    assert lab.ok("mig", "-dci", "-i", "1", "-gi", "12", "-ci", "0") == "Successfully destroyed compute instance ID  0 from GPU  1 GPU instance ID 12\n"
    assert lab.ok("mig", "--destroy-gpu-instance", "--id=1", "--gpu-instance-id=12") == "Successfully destroyed GPU instance ID 12 from GPU  1\n"
    assert_fails(lab.run("mig", "-dci", "-gi", "12", "-i", "1"), EXIT_NOT_FOUND, "No compute instances found: Not Found\n")
    assert_fails(lab.run("mig", "-dgi", "-gi", "12", "-i", "1"), EXIT_NOT_FOUND, "No GPU instances found: Not Found\n")
    assert [row[0] for row in gpu_instances(lab, "-i", "0")] == [11, 12, 13]


def test_listings_filter_by_instance(lab):
    make_node(lab, H100_SXM, gpus=mig_on())
    lab.ok("mig", "-cgi", "9:0,19,19", "-C")
    assert [row[0] for row in gpu_instances(lab, "-gi", "1,11")] == [11, 1]
    assert re.findall(r"^\|\s+0\s+(\d+)", lab.ok("mig", "-lci", "-gi", "13"), re.M) == ["13"]
    assert_fails(lab.run("mig", "-lci", "-ci", "5"), EXIT_NOT_FOUND, "No compute instances found: Not Found\n")


# ---------------------------------------------------------------- MIG mode (mig.md 2.6, 4.6)


def test_hopper_enables_at_once_as_recorded(lab):
    make_node(lab, H100_SXM, gpus=[{"persistence_mode": "Enabled"}])
    assert lab.ok("-i", "0", "-mig", "1") == recorded_with(recorded("mig_md_4_6_enable.txt"), {"00000000:36:00.0": H100_SXM_GPU0})
    assert mig_mode(lab) == "Enabled, Enabled"
    assert lab.ok("--multi-instance-gpu=0", "--id=0") == f"Disabled MIG Mode for GPU {H100_SXM_GPU0}\nAll done.\n"
    assert mig_mode(lab) == "Disabled, Disabled"


def test_with_persistence_off_the_change_carries_the_recorded_warning(lab):
    make_node(lab, H100_PCIE)
    assert lab.ok("-mig", "1") == recorded("mig_md_4_6_enable_persistence_off.txt")  # GPU 0 of the PCIe board is 01:00.0, as recorded


def test_without_i_every_gpu_is_switched_one_line_each(lab):
    make_node(lab, H100_SXM, count=2, gpus=[{"persistence_mode": "Enabled"}] * 2)
    assert lab.ok("-mig", "1") == "Enabled MIG Mode for GPU 00000000:18:00.0\nEnabled MIG Mode for GPU 00000000:2A:00.0\nAll done.\n"


def test_ampere_with_a_client_stays_pending_until_a_reset(lab):
    make_node(lab, A100_40GB, count=2, holders=["nvidia-persistenced"], gpus=[{"persistence_mode": "Enabled"}] * 2)
    assert lab.ok("-i", "0", "-mig", "1") == recorded("mig_md_4_6_pending_in_use.txt")  # GPU 0 of a DGX A100 is 07:00.0, as recorded
    assert mig_mode(lab) == "Disabled, Enabled"
    assert_fails(lab.run("mig", "-lgi", "-i", "0"), EXIT_NOT_FOUND, NO_MIG_ENABLED)
    blocked = lab.run("-r", "-i", "0")
    assert blocked.returncode == EXIT_OTHER
    assert blocked.stdout.startswith("The following GPUs could not be reset:\n  GPU 00000000:07:00.0: In use by another client\n\n1 device is currently")
    assert mig_mode(lab) == "Disabled, Enabled"
    # The operator stops nvidia-persistenced and turns persistence off; now the reset goes through.
    lab.edit_state(lambda state: state.update(holders=[]))
    lab.ok("-i", "0", "-pm", "0")
    reset = recorded_with(recorded("mig_md_4_6_reset.txt"), {"00000000:61:00.0": "00000000:07:00.0"})
    assert lab.ok("--gpu-reset", "-i", "00000000:07:00.0") == reset
    assert mig_mode(lab) == "Enabled, Enabled"
    assert mig_mode(lab, 1) == "Disabled, Disabled"


def test_ampere_pending_disable_uses_the_recorded_words(lab):
    make_node(lab, A100_80GB, gpus=[{"mig_mode": dict(ON), "holders": ["nvidia-dcgm"]}])
    expected = recorded_with(recorded("mig_md_4_6_pending_in_use.txt"), {"pending enable": "pending disable"})
    assert lab.ok("-mig", "0") == expected
    assert mig_mode(lab) == "Enabled, Disabled"
    # Asking for the current mode again cancels the pending change at once.
    assert lab.ok("-mig", "1").startswith("Enabled MIG Mode for GPU 00000000:07:00.0\n")
    assert mig_mode(lab) == "Enabled, Enabled"


def test_an_idle_ampere_gpu_is_reset_by_the_driver_at_once(lab):
    make_node(lab, A100_40GB)
    assert lab.ok("-mig", "1").startswith("Enabled MIG Mode for GPU 00000000:07:00.0\n\nWarning: persistence mode is disabled")
    assert mig_mode(lab) == "Enabled, Enabled"


@pytest.mark.parametrize(
    "gpu_state",
    [{"persistence_mode": "Enabled"}, {"holders": ["nvidia-fabricmanager"]}, {"processes": [{"pid": 77, "process_name": "/usr/bin/dcgm-exporter"}]}],
    ids=["persistence-mode", "gpu-holder", "process"],
)
def test_what_holds_an_ampere_gpu_keeps_its_mode_pending(lab, gpu_state):
    make_node(lab, A100_40GB, gpus=[gpu_state])
    assert lab.ok("-mig", "1").startswith("Warning: MIG mode is in pending enable state for GPU 00000000:07:00.0:In use by another client\n")
    assert mig_mode(lab) == "Disabled, Enabled"


def test_a_reset_is_all_or_nothing_and_lists_each_blocked_gpu(lab):
    make_node(lab, A100_40GB, count=3, gpus=[{"mig_mode": {"current": "Disabled", "pending": "Enabled"}, "holders": ["nvidia_drm"]}] * 3)
    lab.edit_state(lambda state: state["gpus"][1].update(holders=[]))
    expected = recorded_with(
        recorded("mig_md_4_6_reset_in_use.txt"),
        {"00000000:01:00.0": "00000000:07:00.0", "00000000:47:00.0": "00000000:47:00.0", "4 devices": "2 devices"},
    )
    assert_fails(lab.run("-r"), EXIT_OTHER, expected)
    assert [mig_mode(lab, index) for index in range(3)] == ["Disabled, Enabled"] * 3
    assert lab.ok("-r", "-i", "1") == "GPU 00000000:0F:00.0 was successfully reset.\nAll done.\n"
    assert mig_mode(lab, 1) == "Enabled, Enabled"


def test_a_reset_of_several_ids_in_one_call_is_all_or_nothing(lab):
    # mig-parted resets a node with one "nvidia-smi -r -i <ids>": a held GPU among them keeps every one pending.
    pending = {"mig_mode": {"current": "Disabled", "pending": "Enabled"}}
    make_node(lab, A100_40GB, count=3, gpus=[dict(pending), dict(pending, holders=["nvidia-persistenced"]), dict(pending)])
    result = lab.run("-r", "-i", "0,1,2")
    assert result.returncode == EXIT_OTHER
    assert result.stdout.startswith("The following GPUs could not be reset:\n  GPU 00000000:0F:00.0: In use by another client\n\n1 device is")
    assert "00000000:07:00.0" not in result.stdout and "00000000:47:00.0" not in result.stdout
    # The recorded refusal's first lines, with the held GPU's bus id.
    assert recorded_with(recorded("mig_md_4_6_reset_in_use.txt"), {"00000000:01:00.0": "00000000:0F:00.0"}).splitlines()[:2] == result.stdout.splitlines()[:2]
    assert [mig_mode(lab, index) for index in range(3)] == ["Disabled, Enabled"] * 3
    assert lab.ok("-r", "-i", "0,2") == "GPU 00000000:07:00.0 was successfully reset.\nGPU 00000000:47:00.0 was successfully reset.\nAll done.\n"
    assert [mig_mode(lab, index) for index in range(3)] == ["Enabled, Enabled", "Disabled, Enabled", "Enabled, Enabled"]


def test_a_reset_clears_the_instances(lab):
    make_node(lab, H100_SXM, gpus=mig_on(persistence="Disabled"))
    lab.ok("mig", "-cgi", "0", "-C")
    lab.ok("-r", "-i", "0")
    assert mig_mode(lab) == "Enabled, Enabled"  # Hopper: the driver stays loaded, so the mode stays
    assert_fails(lab.run("mig", "-lgi"), EXIT_NOT_FOUND, "No GPU instances found: Not Found\n")


def test_without_a_reset_only_a_reboot_applies_the_mode(lab):
    # A passthrough VM (mig.md 4.6): the GPU cannot be reset.
    make_node(lab, A100_40GB, gpu_reset_supported=False)
    pending = recorded_with(recorded("mig_md_4_6_pending_not_supported.txt"), {"00000000:00:03.0": "00000000:07:00.0"})
    assert lab.ok("-i", "0", "-mig", "1") == pending
    not_supported = recorded_with(recorded("mig_md_4_6_gpu_reset_not_supported.txt"), {"00000000:00:03.0": "00000000:07:00.0"})
    assert_fails(lab.run("--gpu-reset"), EXIT_NOT_SUPPORTED, not_supported)
    lab.edit_state(lambda state: state.update(boots=state["boots"] + 1))
    assert mig_mode(lab) == "Enabled, Enabled"


def test_a_gpu_without_mig_is_a_warning_as_recorded(lab):
    make_node(lab, L40S, count=2)
    one = recorded_with(recorded("mig_md_4_6_enable_not_supported.txt"), {"00000000:21:00.0": "00000000:01:00.0"})
    assert lab.ok("-i", "0", "-mig", "1") == one
    both = lab.ok("-mig", "0").splitlines()
    assert both == [
        "Unable to disable MIG Mode for GPU 00000000:01:00.0: Not Supported",
        "Treating as warning and moving on.",
        "Unable to disable MIG Mode for GPU 00000000:25:00.0: Not Supported",
        "Treating as warning and moving on.",
        "All done.",
    ]
    assert mig_mode(lab) == "[N/A], [N/A]"
    for operation in ("-lgip", "-lgipp", "-lgi", "-lci", "-lcip"):
        assert_fails(lab.run("mig", operation), EXIT_NOT_FOUND, NO_MIG_SUPPORTED)


def test_disabling_with_instances_fails_as_recorded(lab):
    make_node(lab, H200, count=2, gpus=mig_on(2))
    lab.ok("mig", "-i", "1", "-cgi", "19")
    expected = recorded_with(recorded("mig_md_4_6_disable_in_use.txt"), {"00000009:01:00.0": "00000000:2A:00.0"})
    result = lab.run("-mig", "0")
    # GPU 0 had no instances and was switched before GPU 1 stopped the run.
    assert (result.returncode, result.stderr) == (EXIT_IN_USE, "")
    assert result.stdout == "Disabled MIG Mode for GPU 00000000:18:00.0\n" + expected
    assert [mig_mode(lab, 0), mig_mode(lab, 1)] == ["Disabled, Disabled", "Enabled, Enabled"]


def test_hopper_refuses_a_mode_change_under_a_running_process(lab):
    make_node(lab, H100_SXM, gpus=[{"processes": [{"pid": 9, "process_name": "python3", "used_memory_mib": 1}]}])
    expected = f"Unable to enable MIG Mode for GPU {H100_SXM_GPU0}: In use by another client\nTerminating early due to previous errors.\n"
    assert_fails(lab.run("-mig", "1"), EXIT_IN_USE, expected)


def test_profile_listings_with_mig_off_depend_on_the_driver(lab):
    # mig.md 4.1: R535-era drivers list profiles only with MIG on; later ones list them regardless.
    make_node(lab, H100_SXM, driver="535.183.01")
    assert_fails(lab.run("mig", "-lgip"), EXIT_NOT_FOUND, NO_MIG_ENABLED)
    lab.set_driver("580.65.06")
    assert lab.ok("mig", "-lgip").count("MIG ") == 7
    for operation in ("-lgi", "-lci", "-lcip"):
        assert_fails(lab.run("mig", operation), EXIT_NOT_FOUND, NO_MIG_ENABLED)
    assert_fails(lab.run("mig", "-cgi", "9"), EXIT_NOT_FOUND, NO_MIG_ENABLED)


# ---------------------------------------------------------------- driver reload and reboot


def bump(key):
    return lambda state: state.update({key: state[key] + 1})


def test_a_driver_reload_clears_instances_everywhere_and_mig_mode_on_hopper(lab):
    process = {"pid": 5, "process_name": "python3", "used_memory_mib": 100, "gpu_instance_id": 1}
    make_node(lab, H100_SXM, count=2, gpus=mig_on(2, processes=[process]))
    lab.ok("mig", "-cgi", "9:0", "-C")
    lab.edit_state(bump("driver_reloads"))
    assert lab.query("mig.mode.current,mig.mode.pending,persistence_mode") == "Disabled, Disabled, Disabled\n" * 2
    assert lab.ok("--query-compute-apps=pid", "--format=csv,noheader") == ""
    assert lab.state()["gpus"][0]["gpu_instances"] == []
    # Applied once: the next calls see the same node.
    lab.ok("-mig", "1")
    assert mig_mode(lab) == "Enabled, Enabled"


def test_ampere_keeps_its_mig_mode_across_a_driver_reload_but_not_its_instances(lab):
    make_node(lab, A100_40GB, gpus=mig_on(gpu_instances=[gpu_instance(1, 9, 0, compute_instance(0, 2, 0, 3))]))
    assert gpu_instances(lab) == [(1, 9, "0:4")]
    lab.edit_state(bump("driver_reloads"))
    assert mig_mode(lab) == "Enabled, Enabled"
    assert_fails(lab.run("mig", "-lgi"), EXIT_NOT_FOUND, "No GPU instances found: Not Found\n")


def test_unloading_the_driver_is_a_reload_too(lab):
    make_node(lab, H200, gpus=mig_on())
    lab.ok("mig", "-cgi", "0")
    lab.edit_state(lambda state: state.update(driver_loaded=False))
    assert lab.run("mig", "-lgi").returncode == EXIT_DRIVER_NOT_LOADED
    lab.edit_state(lambda state: state.update(driver_loaded=True))
    assert mig_mode(lab) == "Disabled, Disabled"


def test_a_reboot_applies_a_pending_ampere_mode(lab):
    make_node(lab, A100_80GB, holders=["nvidia-persistenced"])
    lab.ok("-mig", "1")
    lab.edit_state(bump("driver_reloads"))
    assert mig_mode(lab) == "Disabled, Enabled"  # a module reload does not reset the GPU
    lab.edit_state(bump("boots"))
    assert mig_mode(lab) == "Enabled, Enabled"


def test_a_hand_written_state_is_the_present_not_a_pending_reload(lab):
    make_node(lab, H100_SXM, gpus=mig_on(gpu_instances=[gpu_instance(0, 0, 0)]), driver_reloads=3, boots=2)
    assert gpu_instances(lab) == [(0, 0, "0:8")]


# ---------------------------------------------------------------- processes


def test_query_compute_apps_lists_the_processes_of_the_selected_gpus(lab):
    processes = [
        [{"pid": 1201, "process_name": "/usr/bin/python3", "used_memory_mib": 4096, "gpu_instance_id": 1, "compute_instance_id": 0}],
        [],
        [
            {"pid": 1305, "process_name": "./all_reduce_perf", "used_memory_mib": 512},
            {"pid": 1306, "process_name": "nvidia-cuda-mps-server", "used_memory_mib": 25},
        ],
    ]
    make_node(lab, H100_SXM, count=3, gpus=[{"processes": entries} for entries in processes])
    uuids = lab.uuids()
    fields = "--query-compute-apps=pid,process_name,gpu_uuid,used_memory"
    assert lab.ok(fields, "--format=csv") == (
        "pid, process_name, gpu_uuid, used_gpu_memory [MiB]\n"
        f"1201, /usr/bin/python3, {uuids[0]}, 4096 MiB\n"
        f"1305, ./all_reduce_perf, {uuids[2]}, 512 MiB\n"
        f"1306, nvidia-cuda-mps-server, {uuids[2]}, 25 MiB\n"
    )
    assert lab.ok(fields, "--format=csv,noheader,nounits", "-i", "2,0") == (
        f"1305, ./all_reduce_perf, {uuids[2]}, 512\n1306, nvidia-cuda-mps-server, {uuids[2]}, 25\n1201, /usr/bin/python3, {uuids[0]}, 4096\n"
    )
    assert lab.ok(fields, "--format=csv", "-i", "1") == "pid, process_name, gpu_uuid, used_gpu_memory [MiB]\n"
    assert lab.ok("--query-compute-apps", "pid,gpu_bus_id", "--format=csv,noheader", "-i", "0") == "1201, 00000000:18:00.0\n"
    assert_fails(lab.run("--query-compute-apps=pid,bogus", "--format=csv"), EXIT_INVALID_ARGUMENT, 'Field "bogus" is not a valid field to query.\n\n')
    assert_fails(lab.run("--query-compute-apps=pid"), EXIT_INVALID_ARGUMENT, "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n")


# ---------------------------------------------------------------- MIG device UUIDs


def test_mig_device_uuids_are_stable_and_new_for_new_instances(lab):
    make_node(lab, A100_40GB, gpus=mig_on())
    lab.ok("mig", "-cgi", "9,9", "-C")
    first = lab.ok("-L")
    uuids = re.findall(r"\(UUID: (MIG-[^)]*)\)", first)
    assert len(uuids) == 2 and len(set(uuids)) == 2
    assert all(re.fullmatch(r"MIG-[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", uuid) for uuid in uuids)
    assert lab.ok("-L") == first
    lab.ok("mig", "-dci", "-gi", "1")
    lab.ok("mig", "-cci", "-gi", "1")
    again = re.findall(r"\(UUID: (MIG-[^)]*)\)", lab.ok("-L"))
    assert again[1] == uuids[1] and again[0] not in uuids


# ---------------------------------------------------------------- permissions


@pytest.mark.parametrize(
    "arguments, expected, code",
    [
        (["-mig", "1"], "Unable to enable MIG Mode for GPU 00000000:18:00.0: Insufficient Permissions\nTerminating early due to previous errors.\n",
         EXIT_NO_PERMISSION),
        (["mig", "-cgi", "19"], "Unable to create a GPU instance on GPU  0 using profile 19: Insufficient Permissions\n"
         "Failed to create GPU instances: Insufficient Permissions\n", EXIT_NO_PERMISSION),
        (["mig", "-cci", "-gi", "1"], "Unable to create a compute instance on GPU  0 GPU instance ID  1 using profile 2: Insufficient Permissions\n"
         "Failed to create compute instances: Insufficient Permissions\n", EXIT_NO_PERMISSION),
        (["mig", "-dgi"], "Unable to destroy GPU instance ID  1 from GPU  0: Insufficient Permissions\n"
         "Failed to destroy GPU instances: Insufficient Permissions\n",
         EXIT_NO_PERMISSION),
        (["-r", "-i", "0"], "The following GPUs could not be reset:\n  GPU 00000000:18:00.0: Insufficient Permissions\n", EXIT_NO_PERMISSION),
    ],
    ids=["mig-mode", "cgi", "cci", "dgi", "reset"],
)
def test_without_root_changes_are_refused_and_nothing_changes(lab, arguments, expected, code):
    make_node(lab, H100_SXM, gpus=mig_on(gpu_instances=[gpu_instance(1, 9, 0)]))
    lab.ok("-L")
    before = lab.state()
    assert_fails(as_nobody(lab, *arguments), code, expected)
    assert lab.state() == before
    # Reading needs no privilege.
    listed = as_nobody(lab, "mig", "-lgi")
    assert (listed.returncode, listed.stdout) == (0, lab.ok("mig", "-lgi"))


# ---------------------------------------------------------------- command line


@pytest.mark.parametrize(
    "arguments",
    [["mig"], ["mig", "-lgi", "-lci"], ["mig", "-lgi", "-C"], ["-mig", "2"], ["-mig", "1", "-L"], ["mig", "-lgi", "-gi", "x"]],
    ids=["no-operation", "two-operations", "C-without-cgi", "bad-mode", "two-actions", "bad-gi"],
)
def test_bad_mig_command_lines_are_refused(lab, arguments):
    make_node(lab, H100_SXM, gpus=mig_on())
    assert_fails(lab.run(*arguments), EXIT_INVALID_ARGUMENT, "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n")


def test_unknown_mig_option_and_missing_value_are_refused(lab):
    make_node(lab, H100_SXM, gpus=mig_on())
    assert_fails(lab.run("mig", "-lgix"), EXIT_INVALID_ARGUMENT, "ERROR: Option -lgix is not recognized. Please run 'nvidia-smi -h' for help.\n\n")
    assert_fails(lab.run("mig", "-cgi"), EXIT_INVALID_ARGUMENT, "ERROR: Option -cgi is missing its value. Please run 'nvidia-smi -h' for help.\n\n")


# ---------------------------------------------------------------- call log and error stream


def test_every_call_is_logged_with_its_argv_and_whether_it_mutates(lab):
    make_node(lab, H100_SXM, gpus=mig_on())
    log = lab.log_calls()
    lab.ok("--query-gpu=index,mig.mode.current", "--format=csv,noheader")
    lab.ok("mig", "-cgi", "MIG 3g.40gb:0", "-C")
    lab.ok("mig", "-lgi")
    lab.run("mig", "-cgi", "9:0")
    lab.ok("-pm", "1")
    lab.run("-q")
    lab.edit_state(lambda state: state.update(driver_loaded=False))
    lab.run("-L")
    entries = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert entries == [
        {"argv": ["--query-gpu=index,mig.mode.current", "--format=csv,noheader"], "mutating": False, "rc": 0},
        {"argv": ["mig", "-cgi", "MIG 3g.40gb:0", "-C"], "mutating": True, "rc": 0},
        {"argv": ["mig", "-lgi"], "mutating": False, "rc": 0},
        {"argv": ["mig", "-cgi", "9:0"], "mutating": True, "rc": EXIT_INSUFFICIENT_RESOURCES},
        {"argv": ["-pm", "1"], "mutating": True, "rc": 0},
        {"argv": ["-q"], "mutating": False, "rc": EXIT_OTHER},
        {"argv": ["-L"], "mutating": False, "rc": EXIT_DRIVER_NOT_LOADED},
    ]


@pytest.mark.parametrize(
    "arguments",
    [
        ["-mig", "0"], ["--multi-instance-gpu=1"], ["-r"], ["--gpu-reset"],
        ["mig", "-cci"], ["mig", "-dci"], ["mig", "--destroy-gpu-instance"], ["--persistence-mode=0"],
    ],
)
def test_mutating_calls_are_marked_whatever_their_spelling(lab, arguments):
    make_node(lab, H100_SXM, gpus=mig_on())
    log = lab.log_calls()
    lab.run(*arguments)
    assert json.loads(log.read_text(encoding="utf-8"))["mutating"] is True


def test_without_the_variable_nothing_is_logged(lab):
    make_node(lab, H100_SXM)
    lab.ok("-L")
    assert not list(lab.directory.glob("*.log"))


def test_error_lines_can_go_to_stderr_while_partial_success_stays_on_stdout(lab):
    make_node(lab, A100_40GB, gpus=mig_on(), error_stream="stderr")
    result = lab.run("mig", "-cgi", "19,19,14,9")
    recording = recorded("mig_md_4_7_cgi_failure_a100_40gb.txt").splitlines(keepends=True)
    assert result.returncode == EXIT_INSUFFICIENT_RESOURCES
    assert result.stdout == "".join(recording[:4])
    assert result.stderr == recording[4]


# ---------------------------------------------------------------- state file


def test_first_use_writes_the_mig_defaults(lab):
    lab.set_hardware(H100_SXM, 1)
    lab.ok("-L")
    assert lab.state()["gpus"] == [
        {
            "persistence_mode": "Disabled",
            "mig_mode": {"current": "Disabled", "pending": "Disabled"},
            "holders": [],
            "processes": [],
            "gpu_instances": [],
            "instance_serial": 0,
        }
    ]


@pytest.mark.parametrize(
    "gpu, complaint",
    [
        ({"gpu_instances": [{"id": 1, "profile_id": 33, "placement": {"start": 0}}]}, "profile_id 33 is not a GPU instance profile of NVIDIA H100 80GB HBM3"),
        ({"gpu_instances": [{"profile_id": 9, "placement": {"start": 0}}]}, "every GPU instance needs an integer id and placement.start"),
        ({"gpu_instances": [{"id": 1, "profile_id": 9, "placement": "0:4"}]}, "every GPU instance needs an integer id and placement.start"),
        ({"gpu_instances": [gpu_instance(1, 9, 0, compute_instance(0, 5, 0, 1))]}, "GPU instance 1 has no compute instance profile 5"),
        ({"processes": [{"process_name": "x"}]}, "every process needs an integer pid"),
    ],
)
def test_a_malformed_hand_written_state_fails_loudly(lab, gpu, complaint):
    make_node(lab, H100_SXM, gpus=[gpu])
    result = lab.run("-L")
    assert (result.returncode, result.stdout) == (EXIT_OTHER, "")
    assert complaint in result.stderr and str(lab.state_path) in result.stderr


@pytest.mark.parametrize("key, value", [("gi_id_personality", "random"), ("error_stream", "stdin"), ("holders", "nvidia-dcgm"), ("boots", "1")])
def test_a_bad_node_setting_fails_loudly(lab, key, value):
    make_node(lab, H100_SXM, **{key: value})
    result = lab.run("-L")
    assert (result.returncode, result.stdout) == (EXIT_OTHER, "")
    assert result.stderr.startswith(f"nvidia-smi (lab double): {key} in the state file")


def test_a_call_log_that_cannot_be_opened_fails_loudly_before_anything_runs(lab):
    make_node(lab, H100_SXM)
    lab.call_log_path = lab.directory / "missing" / "calls.log"
    result = lab.run("-mig", "1")
    assert (result.returncode, result.stdout) == (EXIT_OTHER, "")
    assert result.stderr.startswith(f"nvidia-smi (lab double): cannot open the call log {lab.call_log_path}")
    lab.call_log_path = None
    assert mig_mode(lab) == "Disabled, Disabled"
