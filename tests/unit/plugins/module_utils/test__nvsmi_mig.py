# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.onprem.gpu.plugins.module_utils._nvsmi_mig import (
    IN_USE,
    INSUFFICIENT_RESOURCES,
    INVALID_ARGUMENT,
    MODE_PENDING,
    NO_PERMISSION,
    NOT_SUPPORTED,
    RESET_NOT_SUPPORTED,
    RESET_REFUSED,
    ComputeInstance,
    GpuInstance,
    GpuInstanceProfileRow,
    MigCommandError,
    MigOutputError,
    NvidiaSmi,
    failure_kind,
    failure_line,
    parse_compute_apps,
    parse_gpu_instance_profiles,
    parse_gpu_instances,
    parse_table,
    reset_refusals,
    running_driver_clients,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "mig"


def fixture_text(name):
    return (FIXTURES / name).read_text(encoding="utf-8")


def full_ci(ci_id, profile_id, name):
    return (ComputeInstance(ci_id, profile_id, name),)


@pytest.mark.parametrize(
    "fixture, columns",
    [
        pytest.param("lgi_r525_h100.txt", ["GPU", "Name", "Profile ID", "Instance ID", "Placement Start:Size"], id="lgi-r525-layout-a"),
        pytest.param("lgi_r580_a100.txt", ["GPU", "Name", "Profile ID", "Instance ID", "Placement Start:Size"], id="lgi-r580-layout-b"),
        pytest.param("lci__dgx_h100.txt", ["GPU", "GPU Instance ID", "Name", "Profile ID", "Instance ID", "Placement Start:Size"], id="lci"),
        pytest.param(
            "lgip__h100_pcie__r525_layout_a.txt",
            ["GPU", "Name", "ID", "Instances Free/Total", "Memory GiB", "P2P", "SM CE", "DEC JPEG", "ENC OFA"],
            id="lgip-r525-layout-a",
        ),
        pytest.param(
            "lgip__a100_sxm4_40gb__r580_layout_b.txt",
            ["GPU", "Name", "ID", "Instances Free/Total", "Memory GiB", "P2P", "SM CE", "DEC JPEG", "ENC OFA"],
            id="lgip-r580-layout-b",
        ),
        pytest.param(
            "lgip__a100__r450_old_layout_first_row.txt",
            ["GPU", "Name", "ID", "Instances Free/Total", "Memory GiB", "P2P", "SM CE", "DEC JPEG", "ENC OFA"],
            id="lgip-r450",
        ),
    ],
)
def test_columns_are_named_from_the_stacked_header_words(fixture, columns):
    rows = parse_table(fixture_text(fixture))
    assert rows
    assert all(list(row) == columns for row in rows)


@pytest.mark.parametrize(
    "lgi, lci, expected",
    [
        pytest.param(
            "lgi_r525_h100.txt",
            "",
            {
                0: [
                    GpuInstance(7, 19, "1g.10gb", 0, 1),
                    GpuInstance(8, 19, "1g.10gb", 1, 1),
                    GpuInstance(9, 19, "1g.10gb", 2, 1),
                    GpuInstance(2, 9, "3g.40gb", 4, 4),
                ]
            },
            id="r525-h100-pcie-without-lci",
        ),
        pytest.param(
            "lgi_r525_h100.txt",
            "lci_h100.txt",
            {
                0: [
                    GpuInstance(7, 19, "1g.10gb", 0, 1, full_ci(0, 0, "1g.10gb")),
                    GpuInstance(8, 19, "1g.10gb", 1, 1),
                    GpuInstance(9, 19, "1g.10gb", 2, 1),
                    GpuInstance(2, 9, "3g.40gb", 4, 4),
                ]
            },
            id="compute-instances-join-their-gi-and-gpu",
        ),
        pytest.param(
            "lgi_r580_a100.txt",
            "lci__a100_r580_mixed__assembled.txt",
            {
                0: [
                    GpuInstance(9, 19, "1g.5gb", 6, 1, full_ci(0, 0, "1g.5gb")),
                    GpuInstance(3, 14, "2g.10gb", 4, 2, (ComputeInstance(0, 0, "1c.2g.10gb"), ComputeInstance(1, 0, "1c.2g.10gb"))),
                    GpuInstance(2, 5, "4g.20gb", 0, 4, full_ci(0, 3, "4g.20gb")),
                ]
            },
            id="r580-a100-partial-compute-instances",
        ),
        pytest.param("lgi__none.txt", "", {}, id="no-gpu-instances"),
        pytest.param("lgi__mig_disabled.txt", "lci__none.txt", {}, id="mig-disabled"),
    ],
)
def test_parse_gpu_instances(lgi, lci, expected):
    assert parse_gpu_instances(fixture_text(lgi), fixture_text(lci) if lci else "") == expected


def test_several_gpus_in_one_table():
    lgi = fixture_text("lgi_r525_h100.txt")
    second_gpu = lgi.replace("|   0  MIG", "|   1  MIG")
    rows = lgi.splitlines() + second_gpu.splitlines()[5:]
    instances = parse_gpu_instances("\n".join(rows))
    assert sorted(instances) == [0, 1]
    assert instances[0] == instances[1]


def test_parse_gpu_instance_profiles_reads_the_first_line_of_each_profile():
    assert parse_gpu_instance_profiles(fixture_text("lgip__a100_sxm4_40gb__r580_layout_b.txt")) == [
        GpuInstanceProfileRow(0, "1g.5gb", 19, 7, 7, "4.75"),
        GpuInstanceProfileRow(0, "1g.5gb+me", 20, 1, 1, "4.75"),
        GpuInstanceProfileRow(0, "1g.10gb", 15, 4, 4, "9.75"),
        GpuInstanceProfileRow(0, "2g.10gb", 14, 3, 3, "9.75"),
        GpuInstanceProfileRow(0, "3g.20gb", 9, 2, 2, "19.62"),
        GpuInstanceProfileRow(0, "4g.20gb", 5, 1, 1, "19.62"),
        GpuInstanceProfileRow(0, "7g.40gb", 0, 1, 1, "39.38"),
    ]


@pytest.mark.parametrize(
    "fixture, rows",
    [
        pytest.param("lgip_r525_h100pcie.txt", [(19, "1g.10gb", 7), (20, "1g.10gb+me", 1), (0, "7g.80gb", 1)], id="sample-r525-h100-pcie"),
        pytest.param("lgip_r580_a100.txt", [(19, "1g.5gb", 7), (20, "1g.5gb+me", 1), (0, "7g.40gb", 1)], id="sample-r580-a100"),
        pytest.param("lgip__a100__r450_old_layout_first_row.txt", [(19, "1g.5gb", 7)], id="r450-layout"),
    ],
)
def test_recorded_lgip_samples(fixture, rows):
    assert [(row.profile_id, row.name, row.total) for row in parse_gpu_instance_profiles(fixture_text(fixture))] == rows


def test_a_table_with_grouped_columns_is_refused_rather_than_misread():
    # -lcip groups SM/DEC/ENC/OFA under "Exclusive"/"Shared": more cells than top-level headers. The module never reads it.
    with pytest.raises(MigOutputError, match="with 9 cells under 7 columns"):
        parse_table(fixture_text("lcip_a100.txt"))


@pytest.mark.parametrize(
    "text, message",
    [
        pytest.param(
            fixture_text("lci__insufficient_permissions.txt"),
            "nvidia-smi printed no MIG table: Failed to display compute instances: Insufficient Permissions.",
            id="error",
        ),
        pytest.param("", "nvidia-smi printed no MIG table: no output.", id="empty"),
        pytest.param(
            fixture_text("lgi_r525_h100.txt").replace("0:1 ", "0 1 "),
            "nvidia-smi printed a MIG table row with 6 cells under 5 columns: '|   0  MIG 1g.10gb         19        7          0 1     |'.",
            id="extra-cell",
        ),
    ],
)
def test_unreadable_tables(text, message):
    with pytest.raises(MigOutputError) as error:
        parse_table(text)
    assert str(error.value) == message


def test_a_table_without_a_needed_column_is_refused():
    lgi = fixture_text("lgi_r525_h100.txt").replace("Placement", "Location ")
    with pytest.raises(MigOutputError, match="without the column 'Placement Start:Size'"):
        parse_gpu_instances(lgi)


@pytest.mark.parametrize(
    "fixture, expected",
    [
        pytest.param(
            "compute_apps__two_processes__assembled.txt",
            [
                {"pid": 4242, "process_name": "python3", "gpu_uuid": "GPU-7cd6d4d6-9fa8-13be-3c42-09a1b2280a02"},
                {"pid": 4343, "process_name": "/usr/bin/trainer", "gpu_uuid": "GPU-7cd6d4d6-9fa8-13be-3c42-09a1b2280a02"},
            ],
            id="two",
        ),
        pytest.param("compute_apps__none__assembled.txt", [], id="header-only"),
    ],
)
def test_parse_compute_apps(fixture, expected):
    assert parse_compute_apps(fixture_text(fixture)) == expected


@pytest.mark.parametrize(
    "fixture, kind",
    [
        ("mig_enable__ok.txt", None),
        ("mig_enable__persistence_warning.txt", None),
        ("mig_enable__pending_in_use.txt", MODE_PENDING),
        ("mig_enable__pending_not_supported.txt", MODE_PENDING),
        ("mig_enable__not_supported_non_mig_gpu.txt", NOT_SUPPORTED),
        ("mig_disable__in_use_gh200.txt", IN_USE),
        ("reset__ok.txt", None),
        ("reset__in_use_two_gpus.txt", RESET_REFUSED),
        ("reset__not_supported_passthrough.txt", RESET_NOT_SUPPORTED),
        ("cgi_C__h100_pcie_r525.txt", None),
        ("cci__h100_partial_profiles.txt", None),
        ("cgi__insufficient_resources_after_three.txt", INSUFFICIENT_RESOURCES),
        ("dci_dgi__h100_pcie_r525.txt", None),
        ("dgi__in_use.txt", IN_USE),
        ("lci__insufficient_permissions.txt", NO_PERMISSION),
    ],
)
def test_failure_kind(fixture, kind):
    assert failure_kind(fixture_text(fixture)) == kind


def test_failure_kind_of_an_invalid_profile():
    assert failure_kind("Unable to create a GPU instance on GPU  0 using profile 7g.40gb: Invalid Argument") == INVALID_ARGUMENT


@pytest.mark.parametrize(
    "fixture, line",
    [
        ("cgi__insufficient_resources_after_three.txt", "Unable to create a GPU instance on GPU  0 using profile 9: Insufficient Resources"),
        ("reset__in_use_two_gpus.txt", "The following GPUs could not be reset:"),
        ("mig_disable__in_use_gh200.txt", "Unable to disable MIG Mode for GPU 00000009:01:00.0: In use by another client"),
        ("reset__not_supported_passthrough.txt", "Resetting GPU 00000000:00:03.0 is not supported"),
    ],
)
def test_failure_line(fixture, line):
    assert failure_line(fixture_text(fixture)) == line


class FakeRun:
    """Answer each argv with the next scripted (rc, stdout, stderr) and keep the calls."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.calls = []

    def __call__(self, argv):
        self.calls.append(argv)
        return self.answers.pop(0)


def test_read_instances_lists_all_gpus_in_two_calls():
    run = FakeRun((0, fixture_text("lgi_r525_h100.txt"), ""), (0, fixture_text("lci_h100.txt"), ""))
    instances = NvidiaSmi("nvidia-smi", run).read_instances()
    assert run.calls == [["nvidia-smi", "mig", "-lgi"], ["nvidia-smi", "mig", "-lci"]]
    assert len(instances[0]) == 4


def test_read_instances_skips_lci_when_there_is_no_gi():
    run = FakeRun((6, fixture_text("lgi__none.txt"), ""))
    assert NvidiaSmi("nvidia-smi", run).read_instances(3) == {}
    assert run.calls == [["nvidia-smi", "mig", "-lgi", "-i", "3"]]


@pytest.mark.parametrize(
    "call, expected_argv",
    [
        pytest.param(lambda smi: smi.set_mig_mode(2, True), ["nvidia-smi", "-i", "2", "-mig", "1"], id="enable"),
        pytest.param(lambda smi: smi.set_mig_mode(2, False), ["nvidia-smi", "-i", "2", "-mig", "0"], id="disable"),
        pytest.param(lambda smi: smi.set_persistence_mode([0, 3], False), ["nvidia-smi", "-i", "0,3", "-pm", "0"], id="persistence-off"),
        pytest.param(lambda smi: smi.set_persistence_mode([0, 3], True), ["nvidia-smi", "-i", "0,3", "-pm", "1"], id="persistence-on"),
        pytest.param(lambda smi: smi.create(0, [(9, 4), (19, 0)]), ["nvidia-smi", "mig", "-cgi", "9:4,19:0", "-C", "-i", "0"], id="create"),
        pytest.param(lambda smi: smi.create_compute_instances(1, [5, 6]), ["nvidia-smi", "mig", "-cci", "-gi", "5,6", "-i", "1"], id="complete"),
        pytest.param(lambda smi: smi.compute_apps(), ["nvidia-smi", "--query-compute-apps=pid,process_name,gpu_uuid", "--format=csv"], id="compute-apps"),
    ],
)
def test_commands(call, expected_argv):
    run = FakeRun((0, fixture_text("compute_apps__none__assembled.txt"), ""))
    call(NvidiaSmi("nvidia-smi", run))
    assert run.calls == [expected_argv]


def test_destroy_takes_compute_instances_then_gpu_instances_in_one_call_each():
    run = FakeRun((0, "", ""), (0, "", ""))
    gis = [GpuInstance(1, 9, "3g.40gb", 0, 4, full_ci(0, 2, "3g.40gb")), GpuInstance(5, 14, "2g.20gb", 4, 2)]
    NvidiaSmi("nvidia-smi", run).destroy(0, gis)
    assert run.calls == [["nvidia-smi", "mig", "-dci", "-gi", "1,5", "-i", "0"], ["nvidia-smi", "mig", "-dgi", "-gi", "1,5", "-i", "0"]]


def test_destroy_skips_dci_when_no_gi_holds_a_compute_instance():
    run = FakeRun((0, "", ""))
    NvidiaSmi("nvidia-smi", run).destroy(0, [GpuInstance(5, 14, "2g.20gb", 4, 2)])
    assert run.calls == [["nvidia-smi", "mig", "-dgi", "-gi", "5", "-i", "0"]]


def test_a_partly_failed_create_is_an_error_carrying_the_call():
    output = fixture_text("cgi__insufficient_resources_after_three.txt")
    with pytest.raises(MigCommandError) as error:
        NvidiaSmi("nvidia-smi", FakeRun((23, output, ""))).create(0, [(19, 0)])
    assert (error.value.argv, error.value.rc, error.value.kind) == (["nvidia-smi", "mig", "-cgi", "19:0", "-C", "-i", "0"], 23, INSUFFICIENT_RESOURCES)
    assert str(error.value) == (
        "mig -cgi 19:0 -C -i 0 failed with exit code 23: Unable to create a GPU instance on GPU  0 using profile 9: Insufficient Resources."
    )


def test_an_unable_line_is_a_failure_even_with_exit_code_0():
    with pytest.raises(MigCommandError):
        NvidiaSmi("nvidia-smi", FakeRun((0, fixture_text("mig_enable__not_supported_non_mig_gpu.txt"), ""))).set_mig_mode(0, True)


def test_a_pending_mode_warning_is_not_a_failure():
    output = fixture_text("mig_enable__pending_in_use.txt")
    assert "pending enable" in NvidiaSmi("nvidia-smi", FakeRun((0, output, ""))).set_mig_mode(0, True)


def test_a_refused_reset_is_returned_not_raised():
    run = FakeRun((255, fixture_text("reset__in_use_two_gpus.txt"), ""))
    succeeded, output = NvidiaSmi("nvidia-smi", run).reset([3])
    assert not succeeded
    assert "could not be reset" in output
    assert run.calls == [["nvidia-smi", "-r", "-i", "3"]]


def test_several_gpus_are_reset_in_one_call():
    # mig-parted resets every GPU that needs it with one "nvidia-smi -r -i <ids>" (mig.md 0, point 5).
    run = FakeRun((0, fixture_text("reset__ok.txt"), ""))
    assert NvidiaSmi("nvidia-smi", run).reset([0, 3, 5])[0]
    assert run.calls == [["nvidia-smi", "-r", "-i", "0,3,5"]]


def test_reset_refusals_name_the_held_gpus():
    assert reset_refusals(fixture_text("reset__in_use_two_gpus.txt")) == {
        "00000000:01:00.0": "In use by another client",
        "00000000:47:00.0": "In use by another client",
    }
    assert reset_refusals(fixture_text("reset__ok.txt")) == {}


def test_read_profiles_reads_every_gpu_in_two_calls():
    # Two GPUs in one table, as the driver prints them for a node (mig.md 4.1); both A30 on R535.
    lgip = fixture_text("lgip__a30__r535.txt")
    rows = [line for line in lgip.splitlines() if line.startswith("|   0")]
    second = "\n".join(line.replace("|   0", "|   1", 1) for line in lgip.splitlines()[5:])
    lgipp = fixture_text("lgipp__a30__r535.txt")
    run = FakeRun((0, lgip + second + "\n", ""), (0, lgipp + lgipp.replace("GPU  0", "GPU  1"), ""))
    gpus = [{"index": 0, "name": "NVIDIA A30"}, {"index": 1, "name": "NVIDIA A30"}]
    models = NvidiaSmi("nvidia-smi", run).read_profiles(gpus)
    assert run.calls == [["nvidia-smi", "mig", "-lgip"], ["nvidia-smi", "mig", "-lgipp"]]
    assert rows and sorted(models) == [0, 1]
    assert models[1].profile("2g.12gb+me").profile_id == 6


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param((6, "No MIG-enabled devices found.\n", ""), id="r535-with-mig-off"),
        pytest.param((6, "", "No MIG-supported devices found.\n"), id="no-mig-gpu"),
    ],
)
def test_read_profiles_when_the_driver_lists_none(answer):
    run = FakeRun(answer)
    assert NvidiaSmi("nvidia-smi", run).read_profiles([{"index": 0, "name": "NVIDIA A30"}]) == {}
    assert run.calls == [["nvidia-smi", "mig", "-lgip"]]


def test_driver_not_loaded_is_an_error_with_the_driver_state_as_message():
    output = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n"
    with pytest.raises(MigCommandError) as error:
        NvidiaSmi("nvidia-smi", FakeRun((9, output, ""))).read_gpus()
    assert str(error.value) == "The NVIDIA driver is not loaded: nvidia-smi could not communicate with it."
    assert error.value.rc == 9


def fake_proc(tmp_path, comms, modules):
    for pid, comm in enumerate(comms, start=100):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "comm").write_text(comm + "\n", encoding="utf-8")
    (tmp_path / "self").mkdir()
    (tmp_path / "modules").write_text(modules, encoding="utf-8")
    return tmp_path


def test_running_driver_clients_are_found_by_process_and_module_name(tmp_path):
    proc = fake_proc(
        tmp_path,
        ["systemd", "nvidia-persiste", "nv-hostengine", "nv-hostengine", "nv-fabricmanage", "bash"],
        "nvidia_drm 77824 2 - Live 0x0000000000000000\nnvidia_modeset 1306624 1 nvidia_drm, Live 0x0000000000000000\n",
    )
    assert running_driver_clients(str(proc)) == [
        "nvidia-persistenced",
        "nv-hostengine (DCGM)",
        "nv-fabricmanager (Fabric Manager)",
        "the nvidia_drm kernel module",
    ]


def test_gpu_clients_of_a_live_kubernetes_node_are_named(tmp_path):
    # The clients mig-parted and the GPU Operator stop before a MIG change, as /proc/<pid>/comm shows them (15 characters).
    proc = fake_proc(tmp_path, ["kubelet", "nvidia-device-p", "gpu-feature-dis", "dcgm-exporter", "nv-hostengine"], "")
    assert running_driver_clients(str(proc)) == [
        "nvidia-device-plugin (the kubelet's GPU device plugin)",
        "gpu-feature-discovery",
        "dcgm-exporter",
        "nv-hostengine (DCGM)",
    ]


def test_other_processes_holding_a_device_file_are_named_by_pid(tmp_path):
    proc = fake_proc(tmp_path, ["bash", "python3", "nvidia-persiste"], "")
    (proc / "100" / "fd").mkdir()
    (proc / "100" / "fd" / "0").symlink_to("/dev/pts/0")
    (proc / "101" / "fd").mkdir()
    (proc / "101" / "fd" / "3").symlink_to("/dev/null")
    (proc / "101" / "fd" / "4").symlink_to("/dev/nvidia0")
    (proc / "102" / "fd").mkdir()
    (proc / "102" / "fd" / "5").symlink_to("/dev/nvidiactl")
    assert running_driver_clients(str(proc)) == ["PID 101 (python3)", "nvidia-persistenced"]


def test_no_driver_clients(tmp_path):
    assert running_driver_clients(str(fake_proc(tmp_path, ["sshd"], "nvidia 1 0 - Live 0x0\n"))) == []
    assert running_driver_clients(str(tmp_path / "absent")) == []


@pytest.mark.parametrize(
    "answer, message",
    [
        pytest.param((0, "garbage\n", ""), "nvidia-smi printed no MIG table: garbage.", id="unreadable"),
        pytest.param(
            (4, "", "Failed to display GPU instances: Insufficient Permissions\n"),
            "mig -lgi failed with exit code 4: Failed to display GPU instances: Insufficient Permissions.",
            id="refused",
        ),
    ],
)
def test_a_listing_that_cannot_be_read_is_an_error_carrying_the_call(answer, message):
    with pytest.raises(MigCommandError) as error:
        NvidiaSmi("nvidia-smi", FakeRun(answer)).read_instances()
    assert (error.value.argv, str(error.value)) == (["nvidia-smi", "mig", "-lgi"], message)
