"""Tests of the lab doubles behind the GPU node base: nvidia-modprobe, nvidia-persistenced,
nv-fabricmanager, nvidia-ctk and nvidia-container-runtime (lab/doubles/*/README.md).

Each double runs as a subprocess, as a systemd unit or Ansible would run it, with its lab inputs
(board, runtime state, driver identity, package versions) pointed at a temporary directory.
"""

import json
import os
import pathlib
import random
import signal
import subprocess
import sys
import time

import pytest
import yaml

DOUBLES = pathlib.Path(__file__).resolve().parents[2] / "lab" / "doubles"
PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
NVIDIA_SMI = DOUBLES / "nvidia_smi" / "nvidia-smi"
H100 = "NVIDIA H100 80GB HBM3"


@pytest.fixture()
def lab(tmp_path):
    """A lab node's files in tmp_path: an 8-GPU H100 board running driver 580.65.06, module loaded."""

    class Lab:
        root = tmp_path
        env = dict(
            os.environ,
            NVSMI_DOUBLE_HARDWARE=str(tmp_path / "hardware.json"),
            NVSMI_DOUBLE_STATE=str(tmp_path / "state.json"),
            NVSMI_DOUBLE_DRIVER=str(tmp_path / "driver.json"),
            NVIDIA_MODPROBE_DOUBLE_MODULE=str(tmp_path / "module.json"),
            NVIDIA_PERSISTENCED_DOUBLE_VERSION=str(tmp_path / "persistenced.json"),
            NVIDIA_PERSISTENCED_DOUBLE_RUN_DIR=str(tmp_path / "run-persistenced"),
            NVIDIA_PERSISTENCED_DOUBLE_NVIDIA_SMI=str(NVIDIA_SMI),
            NV_FABRICMANAGER_DOUBLE_VERSION=str(tmp_path / "fabricmanager.json"),
            NV_FABRICMANAGER_DOUBLE_RUN_DIR=str(tmp_path / "run-fabricmanager"),
            NVIDIA_CTK_DOUBLE_VERSION=str(tmp_path / "toolkit.json"),
            NVIDIA_CTK_DOUBLE_NVIDIA_SMI=str(NVIDIA_SMI),
        )

        def write(self, name, document):
            (tmp_path / name).write_text(json.dumps(document))

        def state(self):
            return json.loads((tmp_path / "state.json").read_text())

        def run(self, double, *arguments, **environment):
            return subprocess.run([PYTHON, str(double), *arguments], env=dict(self.env, **environment),
                                  capture_output=True, text=True, timeout=60, check=False)

        def start(self, double, *arguments):
            return subprocess.Popen([PYTHON, str(double), *arguments], env=self.env,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    node = Lab()
    node.write("hardware.json", {"gpu_model": H100, "gpu_count": 8, "seed": "lab-test"})
    node.write("driver.json", {"driver_version": "580.65.06", "cuda_version": "13.0"})
    node.write("persistenced.json", {"version": "580.65.06"})
    node.write("fabricmanager.json", {"version": "580.65.06"})
    node.write("toolkit.json", {"version": "1.18.0"})
    fabric_config = tmp_path / "fabricmanager.cfg"
    fabric_config.write_text(f"# comment\nLOG_LEVEL=4\nLOG_FILE_NAME={tmp_path / 'fabricmanager.log'}\nDAEMONIZE=1\n")
    node.fabric_config = str(fabric_config)
    return node


def wait_for(path, timeout=20):
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} did not appear"
        time.sleep(0.05)


def stop(process):
    process.send_signal(signal.SIGTERM)
    return process.wait(timeout=20)


# ---------------------------------------------------------------- nvidia-modprobe

MODPROBE = DOUBLES / "nvidia_modprobe" / "nvidia-modprobe"


def test_modprobe_without_a_module_package_fails_silently(lab):
    lab.write("state.json", {"driver_loaded": False})
    result = lab.run(MODPROBE, "-u", "-c", "0")
    assert (result.returncode, result.stdout, result.stderr) == (1, "", "")
    assert lab.state() == {"driver_loaded": False}


def test_modprobe_loads_the_installed_module(lab):
    lab.write("module.json", {"version": "580.65.06", "flavor": "open"})
    lab.write("state.json", {"driver_loaded": False, "gpus": []})
    result = lab.run(MODPROBE, "--unified-memory", "--create-nvidia-device-file=0")
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert lab.state() == {"driver_loaded": True, "gpus": [], "kernel_module_version": "580.65.06"}
    # nvidia-smi now answers: the module is "loaded".
    assert lab.run(NVIDIA_SMI, "--query-gpu=driver_version", "--format=csv,noheader").stdout.splitlines() == ["580.65.06"] * 8


def test_modprobe_leaves_a_loaded_or_new_node_alone(lab):
    lab.write("module.json", {"version": "580.65.06", "flavor": "open"})
    assert lab.run(MODPROBE).returncode == 0
    assert not (lab.root / "state.json").exists()


def test_modprobe_proprietary_module_refuses_hopper(lab):
    lab.write("module.json", {"version": "580.65.06", "flavor": "proprietary"})
    lab.write("state.json", {"driver_loaded": False})
    assert lab.run(MODPROBE).returncode == 1
    lab.write("hardware.json", {"gpu_model": "NVIDIA A100-SXM4-80GB", "gpu_count": 8, "seed": "lab-test"})
    assert lab.run(MODPROBE).returncode == 0
    assert lab.state()["driver_loaded"] is True


def test_modprobe_unknown_option_fails_loudly(lab):
    result = lab.run(MODPROBE, "--no-such-option")
    assert result.returncode == 255
    assert result.stderr.startswith("nvidia-modprobe (lab double): option --no-such-option is not modelled")


# ---------------------------------------------------------------- driver upgrade: the running module, modprobe -r, a GPU job

QUERY_VERSION = ("--query-gpu=driver_version", "--format=csv,noheader")
GPU_JOB = DOUBLES / "nvidia_smi" / "lab-gpu-job"


def as_modprobe(lab, tmp_path, *arguments):
    """The double called as modprobe, as the stand-in kernel module packages install it (/usr/local/sbin/modprobe)."""
    link = tmp_path / "modprobe"
    if not link.exists():
        link.symlink_to(MODPROBE)
    return subprocess.run([PYTHON, str(link), *arguments], env=lab.env, capture_output=True, text=True, timeout=60, check=False)


def upgrade_packages(lab, version="580.95.05"):
    """What installing the new driver's packages changes: the library's and the module package's versions."""
    lab.write("driver.json", {"driver_version": version, "cuda_version": "13.0"})
    lab.write("module.json", {"version": version, "flavor": "open"})


def test_a_package_upgrade_under_the_loaded_module_is_a_version_mismatch(lab):
    lab.write("module.json", {"version": "580.65.06", "flavor": "open"})
    assert lab.run(NVIDIA_SMI, *QUERY_VERSION).stdout.splitlines() == ["580.65.06"] * 8
    assert lab.state()["kernel_module_version"] == "580.65.06"
    upgrade_packages(lab)
    result = lab.run(NVIDIA_SMI, *QUERY_VERSION)
    assert (result.returncode, result.stdout) == (18, "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 580.95\n")


def test_a_reboot_brings_up_the_installed_module(lab):
    lab.run(NVIDIA_SMI, *QUERY_VERSION)
    upgrade_packages(lab)
    state = lab.state()
    lab.write("state.json", dict(state, boots=state["boots"] + 1))
    assert lab.run(NVIDIA_SMI, *QUERY_VERSION).stdout.splitlines() == ["580.95.05"] * 8


def test_modprobe_r_then_nvidia_modprobe_reloads_the_new_module(lab, tmp_path):
    lab.run(NVIDIA_SMI, *QUERY_VERSION)
    upgrade_packages(lab)
    result = as_modprobe(lab, tmp_path, "-r", "nvidia_peermem", "nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nvidia")
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert lab.state()["driver_loaded"] is False
    assert lab.run(NVIDIA_SMI, *QUERY_VERSION).returncode == 9
    # Not loaded: kmod's modprobe -r has nothing to do and says nothing.
    assert as_modprobe(lab, tmp_path, "-r", "nvidia").returncode == 0
    assert lab.run(MODPROBE, "-u", "-c=0").returncode == 0
    assert lab.run(NVIDIA_SMI, *QUERY_VERSION).stdout.splitlines() == ["580.95.05"] * 8


@pytest.mark.parametrize(("holder", "busy"), [
    pytest.param({"gpus": [{"processes": [{"pid": 4242, "process_name": "python3"}]}]}, "nvidia_uvm", id="a-process"),
    pytest.param({"holders": ["nvidia-persistenced"]}, "nvidia", id="a-node-client"),
    pytest.param({"gpus": [{}, {"holders": ["nvidia-dcgm"]}]}, "nvidia", id="a-gpu-client"),
])
def test_modprobe_r_is_refused_while_a_gpu_is_held(lab, tmp_path, holder, busy):
    lab.write("state.json", holder)
    lab.run(NVIDIA_SMI, *QUERY_VERSION)
    before = lab.state()
    result = as_modprobe(lab, tmp_path, "-r", "nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nvidia")
    assert (result.returncode, result.stdout, result.stderr) == (1, "", f"modprobe: FATAL: Module {busy} is in use.\n")
    assert lab.state() == before


def test_modprobe_loads_the_driver_modules_as_nvidia_modprobe_does(lab, tmp_path):
    lab.write("state.json", {"driver_loaded": False})
    missing = as_modprobe(lab, tmp_path, "nvidia")
    assert (missing.returncode, missing.stderr) == (1, f"modprobe: FATAL: Module nvidia not found in directory /lib/modules/{os.uname().release}\n")
    lab.write("module.json", {"version": "580.65.06", "flavor": "proprietary"})
    assert as_modprobe(lab, tmp_path, "nvidia").stderr == "modprobe: ERROR: could not insert 'nvidia': No such device\n"
    lab.write("module.json", {"version": "580.65.06", "flavor": "open"})
    assert as_modprobe(lab, tmp_path, "nvidia").returncode == 0
    assert lab.state()["driver_loaded"] is True


def test_modprobe_hands_other_modules_to_kmod_and_refuses_what_it_does_not_model(lab, tmp_path):
    if not any(os.path.exists(path) for path in ("/usr/sbin/modprobe", "/sbin/modprobe")):
        result = as_modprobe(lab, tmp_path, "--dry-run", "loop")
        assert result.stderr == "modprobe (lab double): kmod's modprobe is not installed (/usr/sbin/modprobe)\n"
    else:
        result = as_modprobe(lab, tmp_path, "--dry-run", "--quiet", "loop")
        assert "lab double" not in result.stderr
    mixed = as_modprobe(lab, tmp_path, "-r", "nvidia", "loop")
    assert mixed.returncode == 255 and "is not modelled" in mixed.stderr
    partial = as_modprobe(lab, tmp_path, "-r", "nvidia_uvm")
    assert partial.returncode == 255 and "not nvidia itself is not modelled" in partial.stderr


def test_fabric_manager_needs_the_running_modules_version(lab):
    lab.write("state.json", {"kernel_module_version": "580.65.06"})
    lab.write("fabricmanager.json", {"version": "580.95.05"})
    upgrade_packages(lab)
    result = lab.run(FABRICMANAGER, "-c", lab.fabric_config)
    assert result.returncode == 1
    assert "interface version 580.95.05 don't match with driver version 580.65.06" in result.stderr


def test_a_gpu_job_holds_its_gpu_until_it_is_stopped(lab, tmp_path):
    lab.run(NVIDIA_SMI, *QUERY_VERSION)
    job = lab.start(GPU_JOB, "--gpu", "3")
    deadline = time.monotonic() + 20
    while not lab.state()["gpus"][3]["processes"]:
        assert time.monotonic() < deadline, "the job did not record itself"
        time.sleep(0.05)
    apps = lab.run(NVIDIA_SMI, "--query-compute-apps=pid,process_name", "--format=csv,noheader").stdout
    assert apps == f"{job.pid}, /usr/bin/python3\n"
    assert as_modprobe(lab, tmp_path, "-r", "nvidia_uvm", "nvidia").stderr == "modprobe: FATAL: Module nvidia_uvm is in use.\n"
    assert stop(job) == 0
    assert lab.state()["gpus"][3]["processes"] == []
    assert as_modprobe(lab, tmp_path, "-r", "nvidia_uvm", "nvidia").returncode == 0


# ---------------------------------------------------------------- nvidia-persistenced

PERSISTENCED = DOUBLES / "nvidia_persistenced" / "nvidia-persistenced"


def test_persistenced_version(lab):
    assert lab.run(PERSISTENCED, "--version").stdout == "nvidia-persistenced:  version 580.65.06\n"


def test_persistenced_needs_the_driver(lab):
    lab.write("state.json", {"driver_loaded": False})
    result = lab.run(PERSISTENCED, "--verbose")
    assert result.returncode == 1
    assert result.stderr == "nvidia-persistenced failed to initialize. Check syslog for more details.\n"


def test_persistenced_runs_until_stopped(lab):
    process = lab.start(PERSISTENCED, "--user", "nvidia-persistenced", "--verbose")
    pid_file = lab.root / "run-persistenced" / "nvidia-persistenced.pid"
    wait_for(pid_file)
    assert pid_file.read_text() == f"{process.pid}\n"
    assert stop(process) == 0
    assert not pid_file.exists()


def persistence_modes(lab):
    result = lab.run(NVIDIA_SMI, "--query-gpu=persistence_mode", "--format=csv,noheader")
    assert result.returncode == 0, result.stdout + result.stderr
    return set(result.stdout.split())


@pytest.mark.skipif(os.geteuid() != 0, reason="setting persistence mode needs root, as on the real tool")
def test_persistenced_turns_persistence_mode_on_while_it_runs(lab):
    assert persistence_modes(lab) == {"Disabled"}
    process = lab.start(PERSISTENCED, "--verbose")
    wait_for(lab.root / "run-persistenced" / "nvidia-persistenced.pid")
    assert persistence_modes(lab) == {"Enabled"}
    assert stop(process) == 0
    assert persistence_modes(lab) == {"Disabled"}


@pytest.mark.skipif(os.geteuid() != 0, reason="setting persistence mode needs root, as on the real tool")
def test_persistenced_with_no_persistence_mode_leaves_it_off(lab):
    # How Debian's and Ubuntu's packaged units start it: the nvidia_driver role's drop-in must override this.
    process = lab.start(PERSISTENCED, "--user", "nvidia-persistenced", "--no-persistence-mode", "--verbose")
    wait_for(lab.root / "run-persistenced" / "nvidia-persistenced.pid")
    assert persistence_modes(lab) == {"Disabled"}
    assert stop(process) == 0
    process = lab.start(PERSISTENCED, "--no-persistence-mode", "--persistence-mode")
    wait_for(lab.root / "run-persistenced" / "nvidia-persistenced.pid")
    assert persistence_modes(lab) == {"Enabled"}
    assert stop(process) == 0


def stop_as_systemd_does(process):
    """Stop the daemon as systemd's default KillMode=control-group does: SIGTERM to every process of the unit (here
    its process group), sent again while processes remain, so a child the daemon starts on the way out is signalled
    too (systemd's cg_kill loop). Returns the daemon's exit status."""
    while process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            break
        time.sleep(0.002)
    return process.wait(timeout=20)


@pytest.mark.skipif(os.geteuid() != 0, reason="setting persistence mode needs root, as on the real tool")
def test_persistenced_stopped_and_started_many_times_never_leaves_persistence_mode_on(lab):
    """A stop through systemd's kill loop once left persistence mode on (the double's nvidia-smi child was killed).
    Half the stops come while the daemon starts, at a random moment: before it blocks the stop signals (it dies of
    SIGTERM, nothing set yet) or while it turns persistence mode on (it must undo that)."""
    stops = 40
    leftovers = []
    chance = random.Random(29)
    for attempt in range(stops):
        process = subprocess.Popen([PYTHON, str(PERSISTENCED), "--verbose"], env=lab.env, start_new_session=True,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if attempt % 2:
            wait_for(lab.root / "run-persistenced" / "nvidia-persistenced.pid")
            assert persistence_modes(lab) == {"Enabled"}
        else:
            time.sleep(chance.uniform(0, 0.2))
        status = stop_as_systemd_does(process)
        stderr = process.stderr.read()
        process.stderr.close()
        assert status in ((0,) if attempt % 2 else (0, -signal.SIGTERM)), f"stop {attempt + 1}: exit {status}: {stderr}"
        if persistence_modes(lab) != {"Disabled"}:
            leftovers.append(attempt + 1)
        assert not (lab.root / "run-persistenced" / "nvidia-persistenced.pid").exists()
    assert not leftovers, f"persistence mode stayed on after stops {leftovers} of {stops}"


# ---------------------------------------------------------------- nv-fabricmanager

FABRICMANAGER = DOUBLES / "nv_fabricmanager" / "nv-fabricmanager"


def test_fabricmanager_version(lab):
    assert lab.run(FABRICMANAGER, "--version").stdout == "Fabric Manager version is : 580.65.06\n"


def test_fabricmanager_configures_an_nvswitch_board(lab):
    process = lab.start(FABRICMANAGER, "-c", lab.fabric_config)
    pid_file = lab.root / "run-fabricmanager" / "nv-fabricmanager.pid"
    wait_for(pid_file)
    log = (lab.root / "fabricmanager.log").read_text()
    assert "[INFO]" in log and "Fabric Manager version 580.65.06" in log
    assert "Successfully configured all the available NVSwitches to route GPU NVLink traffic." in log
    assert stop(process) == 0


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        pytest.param({"state.json": {"driver_loaded": False}}, "the NVIDIA kernel module is not loaded", id="driver-not-loaded"),
        pytest.param({"driver.json": {"driver_version": "570.172.08", "cuda_version": "12.8"}},
                     "interface version 580.65.06 don't match with driver version 570.172.08", id="version-mismatch"),
        pytest.param({"hardware.json": {"gpu_model": "NVIDIA L40S", "gpu_count": 8, "seed": "x"}}, "no NVSwitch devices", id="pcie-board"),
        pytest.param({"hardware.json": {"gpu_model": H100, "gpu_count": 4, "seed": "x"}}, "no NVSwitch devices", id="four-gpu-board"),
    ],
)
def test_fabricmanager_refuses_to_start(lab, change, reason):
    for name, document in change.items():
        lab.write(name, document)
    result = lab.run(FABRICMANAGER, "-c", lab.fabric_config)
    assert result.returncode == 1
    assert reason in result.stderr
    assert reason in (lab.root / "fabricmanager.log").read_text()
    assert not (lab.root / "run-fabricmanager").exists()


# ---------------------------------------------------------------- nvidia-ctk and nvidia-container-runtime

CTK = DOUBLES / "nvidia_ctk" / "nvidia-ctk"
RUNTIME = DOUBLES / "nvidia_ctk" / "nvidia-container-runtime"


def gpu_uuids(lab):
    return lab.run(NVIDIA_SMI, "--query-gpu=uuid", "--format=csv,noheader").stdout.splitlines()


def test_ctk_and_runtime_versions(lab):
    assert lab.run(CTK, "--version").stdout == "NVIDIA Container Toolkit CLI version 1.18.0\ncommit: lab-stand-in\n"
    assert lab.run(RUNTIME, "--version").stdout.startswith("NVIDIA Container Runtime version 1.18.0\n")
    refused = lab.run(RUNTIME, "create", "x")
    assert refused.returncode == 255 and refused.stderr.startswith("nvidia-container-runtime (lab double):")


def test_cdi_spec_names_every_gpu_by_index_and_uuid(lab):
    result = lab.run(CTK, "cdi", "generate")
    assert result.returncode == 0, result.stderr
    spec = yaml.safe_load(result.stdout)
    uuids = gpu_uuids(lab)
    assert result.stdout.startswith("---\ncdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n    - name: \"0\"\n")
    assert [device["name"] for device in spec["devices"]] == [name for index, uuid in enumerate(uuids) for name in (str(index), uuid)] + ["all"]
    assert spec["devices"][1]["containerEdits"]["deviceNodes"] == [{"path": "/dev/nvidia0"}]
    assert [node["path"] for node in spec["devices"][-1]["containerEdits"]["deviceNodes"]] == [f"/dev/nvidia{index}" for index in range(8)]
    edits = spec["containerEdits"]
    assert edits["env"] == ["NVIDIA_CTK_LIBCUDA_DIR=/usr/lib/x86_64-linux-gnu", "NVIDIA_VISIBLE_DEVICES=void"]
    assert [hook["args"][1] for hook in edits["hooks"]] == ["create-symlinks", "enable-cuda-compat", "update-ldcache", "disable-device-node-modification"]
    assert all(hook["env"] == ["NVIDIA_CTK_DEBUG=false"] and hook["path"] == "/usr/bin/nvidia-cdi-hook" for hook in edits["hooks"])
    assert "--host-driver-version=580.65.06" in edits["hooks"][1]["args"]
    assert {"hostPath": "/usr/lib/x86_64-linux-gnu/libcuda.so.580.65.06", "containerPath": "/usr/lib/x86_64-linux-gnu/libcuda.so.580.65.06",
            "options": ["ro", "nosuid", "nodev", "rbind", "rprivate"]} in edits["mounts"]
    assert 'level=info msg="Generated CDI spec with version 0.5.0"' in result.stderr
    # The same node gives the same bytes, so writing the spec is idempotent.
    assert lab.run(CTK, "cdi", "generate").stdout == result.stdout


def test_cdi_spec_of_toolkit_1_17_has_no_1_18_edits(lab):
    lab.write("toolkit.json", {"version": "1.17.8"})
    spec = yaml.safe_load(lab.run(CTK, "cdi", "generate", "--device-name-strategy=index").stdout)
    assert spec["containerEdits"]["env"] == ["NVIDIA_VISIBLE_DEVICES=void"]
    assert "disable-device-node-modification" not in [hook["args"][1] for hook in spec["containerEdits"]["hooks"]]
    assert [device["name"] for device in spec["devices"]] == [str(index) for index in range(8)] + ["all"]


def test_cdi_generate_needs_nvml(lab):
    lab.write("state.json", {"driver_loaded": False})
    not_loaded = lab.run(CTK, "cdi", "generate")
    assert not_loaded.returncode == 1 and not_loaded.stdout == ""
    assert 'level=error msg="failed to generate CDI spec: failed to initialize NVML: ERROR_DRIVER_NOT_LOADED"' in not_loaded.stderr
    missing = lab.run(CTK, "cdi", "generate", NVIDIA_CTK_DOUBLE_NVIDIA_SMI="", PATH=str(lab.root))
    assert missing.returncode == 1
    assert "ERROR_LIBRARY_NOT_FOUND" in missing.stderr


def test_cdi_generate_to_a_file_then_list(lab):
    spec_file = lab.root / "cdi" / "nvidia.yaml"
    assert lab.run(CTK, "cdi", "generate", f"--output={spec_file}").returncode == 0
    assert spec_file.stat().st_mode & 0o777 == 0o644
    listed = lab.run(CTK, "cdi", "list", "--spec-dir", str(spec_file.parent))
    assert 'msg="Found 17 CDI devices"' in listed.stderr
    uuids = gpu_uuids(lab)
    names = [str(index) for index in range(8)] + uuids + ["all"]
    assert listed.stdout.splitlines() == sorted(f"nvidia.com/gpu={name}" for name in names)


def test_ctk_commands_it_does_not_model_fail_loudly(lab):
    result = lab.run(CTK, "runtime", "configure", "--runtime=containerd")
    assert result.returncode == 255
    assert result.stderr.startswith("nvidia-ctk (lab double): 'runtime configure --runtime=containerd' is not modelled")


def test_cdi_spec_of_a_mig_gpu_names_its_mig_devices_not_the_gpu(lab):
    # GPU 0 in MIG mode with a 3g and a 1g instance, GPU 1 in MIG mode without instances, the rest whole GPUs:
    # the toolkit's nvml mode (pkg/nvcdi/lib-nvml.go) writes no whole-GPU device for a GPU in MIG mode.
    mig_on = {"current": "Enabled", "pending": "Enabled"}
    lab.write("state.json", {"gpus": [
        {"mig_mode": mig_on, "gpu_instances": [
            {"id": 1, "profile_id": 9, "placement": {"start": 0}, "compute_instances": [{"id": 0, "profile_id": 2, "placement": {"start": 0, "size": 3}}]},
            {"id": 9, "profile_id": 19, "placement": {"start": 4}, "compute_instances": [{"id": 0, "profile_id": 0, "placement": {"start": 0, "size": 1}}]},
        ]},
        {"mig_mode": mig_on},
    ]})
    listing = lab.run(NVIDIA_SMI, "-L").stdout
    mig_uuids = [line.split("UUID: ")[1].rstrip(")") for line in listing.splitlines() if line.startswith("  MIG ")]
    assert len(mig_uuids) == 2
    result = lab.run(CTK, "cdi", "generate")
    assert result.returncode == 0, result.stderr
    spec = yaml.safe_load(result.stdout)
    uuids = gpu_uuids(lab)
    whole = [name for index in range(2, 8) for name in (str(index), uuids[index])]
    assert [device["name"] for device in spec["devices"]] == whole + ["0:0", mig_uuids[0], "0:1", mig_uuids[1], "all"]
    assert spec["devices"][-2]["containerEdits"]["deviceNodes"] == [{"path": "/dev/nvidia0"}]
    assert [node["path"] for node in spec["devices"][-1]["containerEdits"]["deviceNodes"]] == [f"/dev/nvidia{index}" for index in [2, 3, 4, 5, 6, 7, 0]]
    spec_file = lab.root / "cdi" / "nvidia.yaml"
    lab.run(CTK, "cdi", "generate", f"--output={spec_file}")
    listed = lab.run(CTK, "cdi", "list", "--spec-dir", str(spec_file.parent)).stdout.splitlines()
    assert "nvidia.com/gpu=0" not in listed and "nvidia.com/gpu=1" not in listed
    assert {"nvidia.com/gpu=0:0", "nvidia.com/gpu=0:1", "nvidia.com/gpu=all"} <= set(listed)
