"""What a node the lab_node role prepared must look like: systemd up, its GPUs described from the inventory and
answering, the mirror a trusted source, the golden-image packages installed from it."""
import json

MIRROR_SOURCES = "/etc/apt/sources.list.d/onprem-gpu-lab.sources"


def test_systemd_is_pid_1_and_up(host):
    state = host.run("systemctl is-system-running").stdout.strip()
    assert state in ("running", "degraded"), host.run("systemctl --failed --no-legend").stdout
    assert host.file("/proc/1/comm").content_string.strip() == "systemd"


def test_hardware_description_comes_from_the_inventory(host):
    variables = host.ansible.get_variables()
    hardware = json.loads(host.file("/etc/onprem-gpu-lab/hardware.json").content_string)
    assert hardware == {"gpu_model": variables["node_gpu_model"], "gpu_count": int(variables["node_gpu_count"]),
                        "seed": variables["inventory_hostname"]}


def test_mirror_is_a_signed_source(host):
    sources = host.file(MIRROR_SOURCES)
    assert sources.mode == 0o644
    assert "Signed-By: /etc/apt/keyrings/onprem-gpu-lab.gpg" in sources.content_string
    # APT refuses or warns about an unsigned or wrongly signed repository; this update must be clean.
    update = host.run(f"apt-get -o Dir::Etc::SourceList={MIRROR_SOURCES} -o Dir::Etc::SourceParts=- update")
    assert update.rc == 0, update.stderr
    assert "W:" not in update.stdout + update.stderr and "E:" not in update.stdout + update.stderr


def test_driver_utilities_installed_from_the_mirror(host):
    package = host.package("nvidia-driver-cuda")
    assert package.is_installed
    assert package.version == "580.65.06-1"
    policy = host.run("apt-cache policy nvidia-driver-cuda").stdout
    assert "http://lab-mirror.onprem-gpu.internal:8080 bookworm/main" in policy


def test_nvidia_smi_reports_the_seeded_gpus(host):
    variables = host.ansible.get_variables()
    model, count = variables["node_gpu_model"], int(variables["node_gpu_count"])
    listing = [line for line in host.check_output("nvidia-smi -L").splitlines() if line.startswith("GPU ")]
    assert len(listing) == count
    assert all(line.startswith(f"GPU {index}: {model} (UUID: GPU-") for index, line in enumerate(listing))
    versions = host.check_output("nvidia-smi --query-gpu=driver_version --format=csv,noheader")
    assert versions.splitlines() == ["580.65.06"] * count
