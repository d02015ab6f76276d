# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.onprem.gpu.plugins.module_utils._nvsmi import (
    QUERY_FIELDS,
    DriverState,
    MalformedOutputError,
    UnexpectedExitError,
    gpu_from_row,
    missing_binary_state,
    parse_csv_table,
    query_gpu_argv,
    read_driver_state,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nvidia-smi"

HEADER = "index, uuid, name, pci.bus_id, pci.device_id, memory.total [MiB], mig.mode.current, mig.mode.pending, persistence_mode, driver_version"
H100_ROW = "0, GPU-7cd6d4d6-9fa8-13be-3c42-09a1b2280a02, NVIDIA H100 PCIe, 00000000:01:00.0, 0x233110DE, 81559, Enabled, Enabled, Disabled, 525.125.06"
H100_GPU = {
    "index": 0,
    "uuid": "GPU-7cd6d4d6-9fa8-13be-3c42-09a1b2280a02",
    "name": "NVIDIA H100 PCIe",
    "pci_bus_id": "00000000:01:00.0",
    "pci_device_id": "0x233110DE",
    "memory_total_mib": 81559,
    "mig_capable": True,
    "mig_mode_current": "Enabled",
    "mig_mode_pending": "Enabled",
    "persistence_mode": "Disabled",
}

DRIVER_NOT_LOADED = "The NVIDIA driver is not loaded: nvidia-smi could not communicate with it."
VERSION_MISMATCH = "The NVIDIA kernel driver and its user-space library differ in version, so the driver is unusable until it is reloaded or the host rebooted."
LIBRARY_MISSING = "The NVIDIA management library libnvidia-ml.so cannot be found, so the driver is unusable."
NO_DEVICES = "The NVIDIA driver is loaded but nvidia-smi found no GPUs."


def fixture_text(name):
    return (FIXTURES / name).read_text(encoding="utf-8")


def test_query_gpu_argv_reads_every_field_in_one_call():
    assert query_gpu_argv("/usr/bin/nvidia-smi") == [
        "/usr/bin/nvidia-smi",
        "--query-gpu=index,uuid,name,pci.bus_id,pci.device_id,memory.total,mig.mode.current,mig.mode.pending,persistence_mode,driver_version",
        "--format=csv,nounits",
    ]


@pytest.mark.parametrize(
    "text, expected_rows",
    [
        pytest.param(
            fixture_text("query_gpu__pci_bus_id_mig_mode__nvidia_doc.txt"),
            [{"pci.bus_id": "00000000:36:00.0", "mig.mode.current": "Enabled"}],
            id="nvidia-doc-sample",
        ),
        pytest.param("memory.total [MiB], memory.used [MiB]\n81559, 0\n", [{"memory.total": "81559", "memory.used": "0"}], id="unit-suffix-stripped"),
        pytest.param(
            "index, mig.mode.current, persistence_mode\n0, [N/A], [Not Supported]\n",
            [{"index": "0", "mig.mode.current": None, "persistence_mode": None}],
            id="bracketed-values-are-none",
        ),
        pytest.param(
            "Warning: persistence mode is disabled on device 0\n\nindex, name\n\n0, NVIDIA A30\nWarning: late warning\n1, NVIDIA A30\n\n",
            [{"index": "0", "name": "NVIDIA A30"}, {"index": "1", "name": "NVIDIA A30"}],
            id="warning-and-blank-lines-skipped",
        ),
        pytest.param("index, name\r\n0, NVIDIA L40S\r\n", [{"index": "0", "name": "NVIDIA L40S"}], id="crlf-line-ends"),
        pytest.param("index, name\n", [], id="header-only"),
    ],
)
def test_parse_csv_table(text, expected_rows):
    assert parse_csv_table(text) == expected_rows


def test_columns_are_found_by_header_not_position():
    reordered_header = "driver_version, persistence_mode, mig.mode.pending, mig.mode.current, memory.total [MiB], pci.device_id, pci.bus_id, name, uuid, index"
    reordered_row = ", ".join(reversed(H100_ROW.split(", ")))
    rows = parse_csv_table(f"{reordered_header}\n{reordered_row}\n", required_columns=QUERY_FIELDS)
    assert [gpu_from_row(row) for row in rows] == [H100_GPU]


@pytest.mark.parametrize(
    "text, message",
    [
        pytest.param("", "nvidia-smi printed no CSV header.", id="empty"),
        pytest.param("Warning: persistence mode is disabled on device 0\n\n", "nvidia-smi printed no CSV header.", id="only-a-warning"),
        pytest.param(
            fixture_text("query_gpu__default_table_instead_of_csv.txt"),
            "nvidia-smi output lacks the column(s) " + ", ".join(QUERY_FIELDS) + ".",
            id="default-table-instead-of-csv",
        ),
        pytest.param(
            "index, uuid, name, pci.bus_id, pci.device_id, memory.total [MiB], mig.mode.current, persistence_mode, driver_version\n",
            "nvidia-smi output lacks the column(s) mig.mode.pending.",
            id="one-column-missing",
        ),
        pytest.param(
            f"{HEADER}\n0, GPU-7cd6d4d6-9fa8-13be-3c42-09a1b2280a02, NVIDIA H100 PCIe\n",
            "nvidia-smi printed 3 values under a header of 10 columns: '0, GPU-7cd6d4d6-9fa8-13be-3c42-09a1b2280a02, NVIDIA H100 PCIe'.",
            id="short-row",
        ),
    ],
)
def test_malformed_tables_are_refused_in_one_sentence(text, message):
    with pytest.raises(MalformedOutputError) as raised:
        parse_csv_table(text, required_columns=QUERY_FIELDS)
    assert str(raised.value) == message


@pytest.mark.parametrize(
    "row, message",
    [
        pytest.param(
            H100_ROW.replace(", 81559,", ", 81559 MiB,"), "nvidia-smi printed '81559 MiB' for memory.total, which is not a whole number.", id="memory-with-unit"
        ),
        pytest.param(
            H100_ROW.replace("0, GPU-", "GPU0, GPU-", 1), "nvidia-smi printed 'GPU0' for index, which is not a whole number.", id="index-not-a-number"
        ),
    ],
)
def test_non_numeric_integers_are_refused(row, message):
    with pytest.raises(MalformedOutputError) as raised:
        read_driver_state(0, f"{HEADER}\n{row}\n", "")
    assert str(raised.value) == message


@pytest.mark.parametrize(
    "fixture, version, gpu_count, status",
    [
        pytest.param("query_gpu__8x_h100_sxm.txt", "550.54.15", 8, "The NVIDIA driver is loaded and nvidia-smi lists 8 GPUs.", id="8x-h100"),
        pytest.param("query_gpu__4x_a100_sxm4_80gb_mig_pending.txt", "535.216.03", 4, "The NVIDIA driver is loaded and nvidia-smi lists 4 GPUs.", id="4x-a100"),
        pytest.param("query_gpu__2x_l40s_no_mig.txt", "550.127.05", 2, "The NVIDIA driver is loaded and nvidia-smi lists 2 GPUs.", id="2x-l40s"),
        pytest.param("query_gpu__h100_pcie_warning_line.txt", "525.125.06", 1, "The NVIDIA driver is loaded and nvidia-smi lists 1 GPU.", id="warning-line"),
    ],
)
def test_driver_state_of_a_working_node(fixture, version, gpu_count, status):
    state = read_driver_state(0, fixture_text(fixture), "")
    assert (state.loaded, state.version, len(state.gpus), state.status) == (True, version, gpu_count, status)
    assert [gpu["index"] for gpu in state.gpus] == list(range(gpu_count))


def test_gpu_record_is_typed():
    assert read_driver_state(0, fixture_text("query_gpu__h100_pcie_warning_line.txt"), "").gpus == [H100_GPU]


@pytest.mark.parametrize(
    "fixture, mig_modes",
    [
        pytest.param(
            "query_gpu__4x_a100_sxm4_80gb_mig_pending.txt",
            [
                (True, "Disabled", "Enabled"),
                (True, "Enabled", "Enabled"),
                (True, "Enabled", "Disabled"),
                (True, "Disabled", "Disabled"),
            ],
            id="a100-pending",
        ),
        pytest.param("query_gpu__2x_l40s_no_mig.txt", [(False, None, None), (False, None, None)], id="l40s-no-mig"),
    ],
)
def test_mig_modes(fixture, mig_modes):
    gpus = read_driver_state(0, fixture_text(fixture), "").gpus
    assert [(gpu["mig_capable"], gpu["mig_mode_current"], gpu["mig_mode_pending"]) for gpu in gpus] == mig_modes


def test_header_without_rows_is_a_loaded_driver_without_gpus():
    assert read_driver_state(0, HEADER + "\n", "") == DriverState(
        loaded=True, version=None, gpus=[], status="The NVIDIA driver is loaded and nvidia-smi lists 0 GPUs."
    )


@pytest.mark.parametrize(
    "rc, stdout, stderr, loaded, status",
    [
        pytest.param(9, fixture_text("query_gpu__driver_not_loaded.txt"), "", False, DRIVER_NOT_LOADED, id="driver-not-loaded"),
        pytest.param(9, "", fixture_text("query_gpu__driver_not_loaded.txt"), False, DRIVER_NOT_LOADED, id="driver-not-loaded-on-stderr"),
        pytest.param(9, "", "", False, DRIVER_NOT_LOADED, id="exit-9-without-message"),
        pytest.param(255, fixture_text("query_gpu__driver_not_loaded.txt"), "", False, DRIVER_NOT_LOADED, id="driver-message-other-exit-code"),
        pytest.param(18, fixture_text("query_gpu__version_mismatch.txt"), "", False, VERSION_MISMATCH, id="version-mismatch"),
        pytest.param(9, "Failed to initialize NVML: Driver/Library version mismatch\n", "", False, VERSION_MISMATCH, id="message-wins-over-exit-code"),
        pytest.param(12, fixture_text("query_gpu__nvml_library_missing.txt"), "", False, LIBRARY_MISSING, id="nvml-library-missing"),
        pytest.param(6, fixture_text("query_gpu__no_devices.txt"), "", True, NO_DEVICES, id="no-devices"),
        pytest.param(6, "", "", True, NO_DEVICES, id="exit-6-without-message"),
    ],
)
def test_known_driver_conditions(rc, stdout, stderr, loaded, status):
    assert read_driver_state(rc, stdout, stderr) == DriverState(loaded=loaded, version=None, gpus=[], status=status)


@pytest.mark.parametrize(
    "rc, stdout, stderr, message",
    [
        pytest.param(
            2,
            fixture_text("query_gpu__old_driver_without_mig_fields.txt"),
            "",
            'nvidia-smi exited with code 2: Field "mig.mode.current" is not a valid field to query.',
            id="old-driver-without-mig-fields",
        ),
        pytest.param(
            15,
            "Unable to determine the device handle for GPU0000:18:00.0: Unknown Error\n",
            "GPU is lost\n",
            "nvidia-smi exited with code 15: GPU is lost.",
            id="stderr-first",
        ),
        pytest.param(255, "", "", "nvidia-smi exited with code 255: no output.", id="no-output"),
    ],
)
def test_unexpected_exit_codes_are_refused_in_one_sentence(rc, stdout, stderr, message):
    with pytest.raises(UnexpectedExitError) as raised:
        read_driver_state(rc, stdout, stderr)
    assert str(raised.value) == message


def test_missing_binary_state():
    assert missing_binary_state("nvidia-smi") == DriverState(
        loaded=False, version=None, gpus=[], status="nvidia-smi was not found, so the NVIDIA driver is treated as not loaded."
    )
