"""Tests of the lab's stateful nvidia-smi double (lab/doubles/nvidia_smi/nvidia-smi).

The double runs as a subprocess, as Ansible would run it, with its three inputs (hardware,
driver identity, runtime state) pointed at a temporary directory.  Where a real output was
published (NVIDIA's MIG User Guide and nvidia-smi man page, public captures), the double's output must equal
that recording once the recorded GPU's own identity (UUID, name, bus id) is replaced by the
simulated GPU's; everything else, spacing and punctuation included, is compared byte for byte.
"""

import ast
import concurrent.futures
import contextlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

DOUBLE = pathlib.Path(__file__).resolve().parents[2] / "lab" / "doubles" / "nvidia_smi" / "nvidia-smi"
GPU_MODELS = DOUBLE.parents[1] / "gpu_models.json"
# The lab's package rewrites the shebang to /usr/bin/python3, as dh_python3 does; use that interpreter
# when it exists (a user without access to this test's interpreter can run it), else this one.
INTERPRETER = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
NOBODY = 65534
IS_ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not IS_ROOT, reason="changing persistence mode needs root, as on the real tool")

DRIVER = {"driver_version": "580.65.06", "cuda_version": "13.0"}

# The models the lab knows, as the real tool names and describes them (names and memory totals cross-checked
# with public nvidia-smi captures, device ids with mig-parted's config-default.yaml device filters and pci.ids).
MODELS = {
    "NVIDIA H100 80GB HBM3": {"device_id": "0x233010DE", "memory_mib": 81559, "mig": True, "compute_cap": "9.0", "buses": ("18", "DB")},
    "NVIDIA H100 PCIe": {"device_id": "0x233110DE", "memory_mib": 81559, "mig": True, "compute_cap": "9.0", "buses": ("01", "E1")},
    "NVIDIA H200": {"device_id": "0x233510DE", "memory_mib": 143771, "mig": True, "compute_cap": "9.0", "buses": ("18", "DB")},
    "NVIDIA A100-SXM4-80GB": {"device_id": "0x20B210DE", "memory_mib": 81920, "mig": True, "compute_cap": "8.0", "buses": ("07", "BD")},
    "NVIDIA A100-SXM4-40GB": {"device_id": "0x20B010DE", "memory_mib": 40960, "mig": True, "compute_cap": "8.0", "buses": ("07", "BD")},
    "NVIDIA L40S": {"device_id": "0x26B910DE", "memory_mib": 46068, "mig": False, "compute_cap": "8.9", "buses": ("01", "E1")},
}
H100 = "NVIDIA H100 80GB HBM3"

# Recorded real outputs, copied from their public sources.
# NVIDIA's MIG User Guide (docs.nvidia.com/datacenter/tesla/mig-user-guide/): nvidia-smi -i 0 --query-gpu=pci.bus_id,mig.mode.current --format=csv
RECORDED_QUERY_BUS_ID_MIG = "pci.bus_id, mig.mode.current\n00000000:36:00.0, Enabled\n"
# A line assembled from real values (UUID and name from Scaleway's H100 PCIe MIG how-to, scaleway/docs-content, driver 525.125.06;
# device id from mig-parted): --query-gpu=index,uuid,name,pci.device_id,mig.mode.current,mig.mode.pending --format=csv,noheader
RECORDED_QUERY_MIG_LINE = "0, GPU-7cd6d4d6-9fa8-13be-3c42-09a1b2280a02, NVIDIA H100 PCIe, 0x233110DE, Enabled, Enabled\n"
RECORDED_QUERY_MIG_HEADER = "index, uuid, name, pci.device_id, mig.mode.current, mig.mode.pending\n"
# A public capture: a GPU without MIG, queried for index,name,mig.mode.current,mig.mode.pending
RECORDED_QUERY_NON_MIG = "0, NVIDIA GeForce RTX 4070 Laptop GPU, [N/A], [N/A]\n"
# The GPU lines of nvidia-smi -L: an A100-SXM4-40GB on driver 580.126.09 (a public blog post) and Scaleway's H100 PCIe
RECORDED_LIST_A100 = "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-9e4aeb94-01c0-5173-4811-4ca60f77b3a9)\n"
RECORDED_LIST_H100 = "GPU 0: NVIDIA H100 PCIe (UUID: GPU-7cd6d4d6-9fa8-13be-3c42-09a1b2280a02)\n"
# Persistence mode, from a public GH200 log
RECORDED_PM_ALREADY_ENABLED = "Persistence mode is already Enabled for GPU 00000009:01:00.0.\nAll done.\n"
RECORDED_PM_DISABLED = "Disabled persistence mode for GPU 00000009:01:00.0.\nAll done.\n"
# The nvidia-smi man page, RETURN VALUE
EXIT_INVALID_ARGUMENT, EXIT_NO_PERMISSION, EXIT_NOT_FOUND, EXIT_DRIVER_NOT_LOADED, EXIT_OTHER = 2, 4, 6, 9, 255

# Texts whose public sources the double's README gives.
DRIVER_NOT_LOADED = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running.\n"
)
NO_DEVICES = "No devices were found\n"
INVALID_COMBINATION = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n"


def option_refusal(option, problem):
    return f"ERROR: Option {option} {problem}. Please run 'nvidia-smi -h' for help.\n\n"


UUID_PATTERN = re.compile(r"^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def recorded_with(recording: str, replacements: dict) -> str:
    """The recording with the recorded GPU's identity swapped for ours; each value must be present."""
    for recorded_value, simulated_value in replacements.items():
        assert recorded_value in recording, f"{recorded_value!r} is not in the recording"
        recording = recording.replace(recorded_value, simulated_value)
    return recording


class Lab:
    """One simulated node: its input files in a private directory, and a way to call the double there."""

    def __init__(self, directory: pathlib.Path):
        self.directory = directory
        # The double runs from the lab's own world-readable copy: the checkout may sit where other users
        # cannot read (root's home is 0700), and some tests run the double as nobody.
        self.double_path = directory / "nvidia-smi"
        shutil.copyfile(DOUBLE, self.double_path)
        os.chmod(self.double_path, 0o755)
        self.models_path = directory / "gpu_models.json"
        shutil.copyfile(GPU_MODELS, self.models_path)
        self.hardware_path = directory / "hardware.json"
        self.driver_path = directory / "driver.json"
        self.state_path = directory / "state" / "nvidia-smi-state.json"
        self.call_log_path = None
        self.set_hardware(H100, 8)
        self.driver_path.write_text(json.dumps(DRIVER), encoding="utf-8")

    def set_hardware(self, model, count, seed="dc1-gpu1", **board):
        self.hardware_path.write_text(json.dumps({"gpu_model": model, "gpu_count": count, "seed": seed, **board}), encoding="utf-8")

    def set_driver(self, driver_version):
        """A node that runs ``driver_version``: installed, and its kernel module the one running (an upgrade without the
        module reload is test_a_package_upgrade_is_a_version_mismatch_until_the_module_reloads)."""
        self.driver_path.write_text(json.dumps({**DRIVER, "driver_version": driver_version}), encoding="utf-8")
        if self.state_path.exists():
            self.write_state(dict(self.state(), kernel_module_version=driver_version))

    def log_calls(self):
        """Have the double log every call from now on; the log's path."""
        self.call_log_path = self.directory / "calls.log"
        return self.call_log_path

    def run(self, *arguments, user=None):
        environment = {
            **os.environ,
            "NVSMI_DOUBLE_HARDWARE": str(self.hardware_path),
            "NVSMI_DOUBLE_STATE": str(self.state_path),
            "NVSMI_DOUBLE_DRIVER": str(self.driver_path),
            "LAB_GPU_MODELS": str(self.models_path),
        }
        environment.pop("NVSMI_DOUBLE_CALL_LOG", None)
        if self.call_log_path:
            environment["NVSMI_DOUBLE_CALL_LOG"] = str(self.call_log_path)
        return subprocess.run([INTERPRETER, str(self.double_path), *arguments], env=environment, capture_output=True, text=True,
                              check=False, user=user, timeout=30)

    def ok(self, *arguments):
        result = self.run(*arguments)
        assert (result.returncode, result.stderr) == (0, ""), result
        return result.stdout

    def query(self, fields, *arguments):
        return self.ok(f"--query-gpu={fields}", "--format=csv,noheader", *arguments)

    def state(self):
        return json.loads(self.state_path.read_text(encoding="utf-8"))

    def write_state(self, state):
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        self.state_path.write_text(json.dumps(state), encoding="utf-8")

    def edit_state(self, change):
        """Change the state file the way the lab does between calls: read it, change it, write it back."""
        state = self.state()
        change(state)
        self.write_state(state)

    def uuids(self):
        return self.query("uuid").split()


@contextlib.contextmanager
def temporary_lab():
    # Not pytest's tmp_path: its parents are private to root, and some tests call the double as nobody.
    with tempfile.TemporaryDirectory(prefix="nvsmi-double-") as directory:
        os.chmod(directory, 0o755)
        yield Lab(pathlib.Path(directory))


@pytest.fixture(name="lab")
def lab_fixture():
    with temporary_lab() as lab:
        yield lab


def assert_fails(result, code, stdout):
    assert (result.returncode, result.stdout, result.stderr) == (code, stdout, "")


# ---------------------------------------------------------------- recorded outputs


def test_list_line_equals_the_recorded_a100_line(lab):
    lab.set_hardware("NVIDIA A100-SXM4-40GB", 1)
    uuid = lab.uuids()[0]
    assert lab.ok("-L") == recorded_with(RECORDED_LIST_A100, {"GPU-9e4aeb94-01c0-5173-4811-4ca60f77b3a9": uuid})


def test_list_shows_every_gpu_in_index_order_in_the_recorded_shape(lab):
    uuids = lab.uuids()
    expected = "".join(
        recorded_with(RECORDED_LIST_H100, {"GPU 0": f"GPU {index}", "NVIDIA H100 PCIe": H100, "GPU-7cd6d4d6-9fa8-13be-3c42-09a1b2280a02": uuid})
        for index, uuid in enumerate(uuids)
    )
    assert lab.ok("-L") == expected
    assert lab.ok("--list-gpus") == expected


def test_query_equals_the_documented_bus_id_and_mig_mode_sample(lab):
    # The lab may write what the driver holds; here MIG mode is on, as in the documented example.
    lab.write_state({"driver_loaded": True, "gpus": [{"mig_mode": {"current": "Enabled", "pending": "Enabled"}}]})
    output = lab.ok("-i", "0", "--query-gpu=pci.bus_id,mig.mode.current", "--format=csv")
    assert output == recorded_with(RECORDED_QUERY_BUS_ID_MIG, {"00000000:36:00.0": "00000000:18:00.0"})


def test_query_equals_the_assembled_mig_line_with_and_without_header(lab):
    lab.set_hardware(H100, 1)
    lab.write_state({"gpus": [{"mig_mode": {"current": "Enabled", "pending": "Enabled"}}]})
    expected_line = recorded_with(
        RECORDED_QUERY_MIG_LINE,
        {"GPU-7cd6d4d6-9fa8-13be-3c42-09a1b2280a02": lab.uuids()[0], "NVIDIA H100 PCIe": H100, "0x233110DE": "0x233010DE"},
    )
    fields = "index,uuid,name,pci.device_id,mig.mode.current,mig.mode.pending"
    assert lab.ok(f"--query-gpu={fields}", "--format=csv,noheader") == expected_line
    assert lab.ok(f"--query-gpu={fields}", "--format=csv") == RECORDED_QUERY_MIG_HEADER + expected_line


def test_gpu_without_mig_reports_not_available_as_recorded(lab):
    lab.set_hardware("NVIDIA L40S", 1)
    output = lab.query("index,name,mig.mode.current,mig.mode.pending")
    assert output == recorded_with(RECORDED_QUERY_NON_MIG, {"NVIDIA GeForce RTX 4070 Laptop GPU": "NVIDIA L40S"})


@needs_root
def test_persistence_messages_equal_the_recorded_ones(lab):
    bus_id = "00000000:18:00.0"
    assert lab.ok("-i", "0", "-pm", "1") == f"Enabled Legacy persistence mode for GPU {bus_id}.\nAll done.\n"
    assert lab.ok("-i", "0", "-pm", "1") == recorded_with(RECORDED_PM_ALREADY_ENABLED, {"00000009:01:00.0": bus_id})
    assert lab.ok("-i", "0", "-pm", "0") == recorded_with(RECORDED_PM_DISABLED, {"00000009:01:00.0": bus_id})
    assert lab.ok("-i", "0", "-pm", "0") == f"Persistence mode is already Disabled for GPU {bus_id}.\nAll done.\n"


# ---------------------------------------------------------------- the models


@pytest.mark.parametrize("model", sorted(MODELS))
def test_each_model_reads_as_the_real_board(lab, model):
    facts = MODELS[model]
    lab.set_hardware(model, 8)
    mig_mode = "Disabled" if facts["mig"] else "[N/A]"
    rows = lab.query("index,name,pci.bus_id,pci.device_id,memory.total,compute_cap,mig.mode.current,mig.mode.pending,persistence_mode").splitlines()
    first_bus, last_bus = facts["buses"]
    common = f"{facts['device_id']}, {facts['memory_mib']} MiB, {facts['compute_cap']}, {mig_mode}, {mig_mode}, Disabled"
    assert rows[0] == f"0, {model}, 00000000:{first_bus}:00.0, {common}"
    assert rows[7] == f"7, {model}, 00000000:{last_bus}:00.0, {common}"
    assert len(rows) == 8
    assert len({row.split(", ")[2] for row in rows}) == 8, "every GPU needs its own PCI bus id"


def test_a_gh200_node_has_one_gpu_per_superchip_each_in_its_own_pci_domain(lab):
    # A model outside the collection's MIG tables. Bus id of GPU 0 as recorded on a public GH200 log; name as
    # nvidia-smi prints it on GH200 hosts; memory total not recorded.
    lab.set_hardware("NVIDIA GH200 480GB", 4)
    rows = lab.query("index,name,pci.bus_id,pci.device_id,compute_cap,mig.mode.current").splitlines()
    assert rows[0] == "0, NVIDIA GH200 480GB, 00000009:01:00.0, 0x234210DE, 9.0, Disabled"
    assert [row.split(", ")[2] for row in rows] == ["00000009:01:00.0", "00000019:01:00.0", "00000029:01:00.0", "00000039:01:00.0"]
    assert lab.ok("-i", "00000019:01:00.0", "--query-gpu=index", "--format=csv,noheader") == "1\n"


def test_the_subsystem_id_is_the_boards_as_the_hardware_file_says(lab):
    lab.set_hardware(H100, 2, pci_sub_device_id="0x16C110DE")
    assert lab.query("pci.device_id,pci.sub_device_id") == "0x233010DE, 0x16C110DE\n0x233010DE, 0x16C110DE\n"
    lab.set_hardware(H100, 1)
    assert lab.ok("--query-gpu=pci.sub_device_id", "--format=csv") == "pci.sub_device_id\n[N/A]\n"
    lab.set_hardware(H100, 1, pci_sub_device_id="16c1")
    result = lab.run("-L")
    assert (result.returncode, result.stdout) == (EXIT_OTHER, "")
    assert "pci_sub_device_id" in result.stderr


def test_memory_total_carries_its_unit_unless_nounits(lab):
    assert lab.ok("-i", "0", "--query-gpu=memory.total", "--format=csv") == "memory.total [MiB]\n81559 MiB\n"
    # nounits drops the unit from the values only; the header keeps it.
    assert lab.ok("-i", "0", "--query-gpu=memory.total", "--format=csv,nounits") == "memory.total [MiB]\n81559\n"
    assert lab.ok("-i", "0", "--query-gpu=memory.total", "--format=csv,noheader,nounits") == "81559\n"


def test_aliases_answer_like_their_fields_under_the_first_name(lab):
    output = lab.ok("-i", "2", "--query-gpu=gpu_name,gpu_bus_id,gpu_uuid,gpu_serial", "--format=csv")
    header, row = output.splitlines()
    assert header == "name, pci.bus_id, uuid, serial"
    assert row == lab.query("name,pci.bus_id,uuid,serial", "-i", "2").rstrip("\n")


def test_count_and_driver_version_describe_the_node(lab):
    assert lab.query("count,driver_version", "--id=3") == "8, 580.65.06\n"


def test_identity_is_deterministic_per_host_and_distinct_between_hosts(lab):
    first = lab.query("uuid,serial")
    assert lab.query("uuid,serial") == first
    uuids = [line.split(", ")[0] for line in first.splitlines()]
    serials = [line.split(", ")[1] for line in first.splitlines()]
    assert all(UUID_PATTERN.match(uuid) for uuid in uuids), uuids
    assert all(re.fullmatch(r"\d{13}", serial) for serial in serials), serials
    assert len(set(uuids)) == len(set(serials)) == 8
    lab.set_hardware(H100, 8, seed="dc1-gpu2")
    other_host = lab.query("uuid,serial")
    assert not set(first.split()) & set(other_host.split())


# ---------------------------------------------------------------- GPU selection


def test_gpus_are_selected_by_index_list_uuid_or_bus_id(lab):
    uuids = lab.uuids()
    assert lab.query("index", "-i", "5,1") == "5\n1\n"
    assert lab.query("index", f"--id={uuids[6]}") == "6\n"
    assert lab.query("index", "--id", "00000000:5D:00.0") == "3\n"
    assert lab.query("index", "-i", "0000:9a:00.0") == "4\n"
    assert lab.ok("-L", "-i", "7") == f"GPU 7: {H100} (UUID: {uuids[7]})\n"


@pytest.mark.parametrize("arguments", [["-L"], ["--query-gpu=index", "--format=csv"], ["-pm", "1"]])
def test_an_index_beyond_the_board_finds_no_device(lab, arguments):
    assert_fails(lab.run("-i", "8", *arguments), EXIT_NOT_FOUND, NO_DEVICES)


def test_an_unknown_uuid_finds_no_device(lab):
    assert_fails(lab.run("-i", "GPU-00000000-0000-0000-0000-000000000000", "-L"), EXIT_NOT_FOUND, NO_DEVICES)


# ---------------------------------------------------------------- refusals


def test_unknown_field_is_refused_with_the_real_sentence(lab):
    assert_fails(lab.run("--query-gpu=index,clocks.bogus", "--format=csv"), EXIT_INVALID_ARGUMENT, 'Field "clocks.bogus" is not a valid field to query.\n\n')


@pytest.mark.parametrize(
    "arguments",
    [
        ["--query-gpu=index"],
        ["--format=csv"],
        ["-L", "--query-gpu=index", "--format=csv"],
        ["-pm", "1", "--version"],
        ["-pm", "2"],
    ],
    ids=["query-without-format", "format-without-query", "list-and-query", "two-actions", "bad-persistence-value"],
)
def test_bad_combinations_are_refused(lab, arguments):
    assert_fails(lab.run(*arguments), EXIT_INVALID_ARGUMENT, INVALID_COMBINATION)


def test_unknown_option_is_refused(lab):
    assert_fails(lab.run("--frobnicate"), EXIT_INVALID_ARGUMENT, option_refusal("--frobnicate", "is not recognized"))


def test_unknown_format_option_is_refused(lab):
    assert_fails(lab.run("--query-gpu=index", "--format=csv,json"), EXIT_INVALID_ARGUMENT, option_refusal("json", "is not recognized"))


def test_option_without_its_value_is_refused(lab):
    assert_fails(lab.run("-L", "-i"), EXIT_INVALID_ARGUMENT, option_refusal("-i", "is missing its value"))


def test_real_options_the_double_does_not_model_say_so(lab):
    result = lab.run("-q")
    assert (result.returncode, result.stdout) == (EXIT_OTHER, "")
    assert "'-q' is a real nvidia-smi option that this double does not model" in result.stderr


# ---------------------------------------------------------------- node conditions


@pytest.mark.parametrize(
    "arguments",
    [[], ["-L"], ["--query-gpu=index", "--format=csv"], ["-pm", "1"], ["--version"], ["--frobnicate"]],
    ids=["no-arguments", "list", "query", "persistence", "version", "unknown-option"],
)
def test_without_the_driver_every_call_fails_the_real_way(lab, arguments):
    lab.write_state({"driver_loaded": False})
    assert_fails(lab.run(*arguments), EXIT_DRIVER_NOT_LOADED, DRIVER_NOT_LOADED)


def test_driver_answers_again_once_loaded(lab):
    lab.write_state({"driver_loaded": False})
    assert lab.run("-L").returncode == EXIT_DRIVER_NOT_LOADED
    lab.write_state({"driver_loaded": True})
    assert lab.ok("-L").count("\n") == 8


@pytest.mark.parametrize("arguments", [["-L"], ["--query-gpu=index", "--format=csv"], ["-pm", "1"]])
def test_a_node_without_gpus_finds_no_device(lab, arguments):
    lab.hardware_path.write_text(json.dumps({"gpu_model": None, "gpu_count": 0, "seed": "dc1-cp1"}), encoding="utf-8")
    assert_fails(lab.run(*arguments), EXIT_NOT_FOUND, NO_DEVICES)


def test_version_reports_the_installed_driver(lab):
    expected = "NVIDIA-SMI version  : 580.65.06\nNVML version        : 580.65\nDRIVER version      : 580.65.06\nCUDA Version        : 13.0\n"
    assert lab.ok("--version") == expected
    lab.set_hardware(None, 0)
    assert lab.ok("--version") == expected


def test_unknown_model_fails_loudly_naming_the_file_and_the_known_models(lab):
    lab.set_hardware("NVIDIA H100 NVL", 8)
    result = lab.run("-L")
    assert (result.returncode, result.stdout) == (EXIT_OTHER, "")
    assert str(lab.hardware_path) in result.stderr
    assert "'NVIDIA H100 NVL'" in result.stderr
    for model in MODELS:
        assert model in result.stderr


@pytest.mark.parametrize("missing", ["hardware_path", "driver_path"])
def test_a_missing_input_file_fails_loudly_naming_it(lab, missing):
    path = getattr(lab, missing)
    path.unlink()
    result = lab.run("-L")
    assert (result.returncode, result.stdout) == (EXIT_OTHER, "")
    assert f"{path} does not exist" in result.stderr


# ---------------------------------------------------------------- state


def test_first_use_creates_the_state_with_power_on_defaults(lab):
    lab.set_hardware("NVIDIA L40S", 2)
    assert not lab.state_path.exists()
    lab.ok("-L")
    no_mig = {"persistence_mode": "Disabled", "mig_mode": None, "holders": [], "processes": []}
    assert lab.state() == {
        "driver_loaded": True,
        "driver_reloads": 0,
        "driver_reloads_seen": 0,
        "boots": 0,
        "boots_seen": 0,
        "holders": [],
        "gi_id_personality": "swizzle",
        "error_stream": "stdout",
        "gpu_reset_supported": True,
        "missing_gpus": [],
        # The module of the installed driver runs (no module package here: the driver's own version).
        "kernel_module_version": "580.65.06",
        "gpus": [no_mig, no_mig],
    }
    assert oct(lab.state_path.stat().st_mode & 0o777) == "0o644"


def test_a_package_upgrade_is_a_version_mismatch_until_the_module_reloads(lab):
    lab.ok("-L")
    lab.driver_path.write_text(json.dumps({**DRIVER, "driver_version": "580.95.05"}), encoding="utf-8")
    result = lab.run("--query-gpu=driver_version", "--format=csv,noheader")
    assert (result.returncode, result.stdout) == (18, "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 580.95\n")
    state = lab.state()
    lab.write_state(dict(state, driver_reloads=state["driver_reloads"] + 1))
    assert lab.query("driver_version", "-i", "0") == "580.95.05\n"


def test_a_hand_written_partial_state_is_honoured(lab):
    lab.write_state({"gpus": [{}, {"persistence_mode": "Enabled"}]})
    assert lab.query("index,persistence_mode,mig.mode.current", "-i", "0,1,2") == "0, Disabled, Disabled\n1, Enabled, Disabled\n2, Disabled, Disabled\n"


@needs_root
def test_persistence_mode_persists_across_calls(lab):
    assert lab.ok("-pm", "ENABLED", "-i", "2,5") == (
        "Enabled Legacy persistence mode for GPU 00000000:3A:00.0.\nEnabled Legacy persistence mode for GPU 00000000:AB:00.0.\nAll done.\n"
    )
    assert lab.query("persistence_mode") == "".join("Enabled\n" if index in (2, 5) else "Disabled\n" for index in range(8))
    assert [gpu["persistence_mode"] for gpu in lab.state()["gpus"]] == ["Disabled"] * 2 + ["Enabled"] + ["Disabled"] * 2 + ["Enabled"] + ["Disabled"] * 2


@needs_root
def test_persistence_mode_for_all_gpus_reports_each(lab):
    lab.ok("-pm", "1", "-i", "0")
    output = lab.ok("--persistence-mode=1").splitlines()
    assert output[0] == "Persistence mode is already Enabled for GPU 00000000:18:00.0."
    assert output[1:] == [f"Enabled Legacy persistence mode for GPU 00000000:{bus}:00.0." for bus in ("2A", "3A", "5D", "9A", "AB", "BA", "DB")] + ["All done."]
    assert lab.ok("-pm", "disabled").splitlines()[-2:] == ["Disabled persistence mode for GPU 00000000:DB:00.0.", "All done."]
    assert lab.query("persistence_mode") == "Disabled\n" * 8


@needs_root
def test_concurrent_calls_lose_no_update(lab):
    lab.ok("-L")
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda index: lab.run("-pm", "1", "-i", str(index)), range(8)))
    assert [result.returncode for result in results] == [0] * 8
    assert lab.query("persistence_mode") == "Enabled\n" * 8


def test_without_root_a_change_is_refused_and_nothing_changes(lab):
    lab.ok("-L")  # root, or the caller, creates the state first, as on a lab node
    user = NOBODY if IS_ROOT else None
    result = lab.run("-pm", "1", "-i", "1", user=user)
    expected = "Unable to set persistence mode for GPU 00000000:2A:00.0: Insufficient Permissions\nTerminating early due to previous errors.\n"
    assert_fails(result, EXIT_NO_PERMISSION, expected)
    assert lab.query("persistence_mode", "-i", "1") == "Disabled\n"
    # Asking for the mode a GPU already has needs no permission (seen on a real R5xx host).
    already = lab.run("-pm", "0", "-i", "1", user=user)
    assert (already.returncode, already.stdout) == (0, "Persistence mode is already Disabled for GPU 00000000:2A:00.0.\nAll done.\n")


# ---------------------------------------------------------------- the script itself


def test_double_is_an_executable_self_contained_script():
    source = DOUBLE.read_text(encoding="utf-8")
    assert source.startswith("#!/usr/bin/env python\n")
    assert os.access(DOUBLE, os.X_OK)
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    # Standard library only: the double must not share code with the collection it tests.
    assert imported <= sys.stdlib_module_names, imported - sys.stdlib_module_names
