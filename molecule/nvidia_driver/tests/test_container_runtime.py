"""A GPU server after the nvidia_driver and container_runtime roles: containerd runs with systemd cgroups and the nvidia
runtime (read back from containerd's own merged configuration), the toolkit is held at the pinned
version, and the toolkit's refresh service owns the CDI specification, which names every GPU."""
import tomllib

import pytest
import yaml

from lab_files import assert_file_is_exactly

testinfra_hosts = ["container_runtime"]

TOOLKIT = "1.18.0"
TOOLKIT_PACKAGES = ["nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools", "libnvidia-container1"]
CRI = "io.containerd.grpc.v1.cri"
PINS = "/etc/apt/preferences.d/onprem-gpu-container_runtime.pref"
# The four toolkit packages at the toolkit's version, in name order; containerd (no container_runtime_containerd_version
# here) is neither held nor pinned.
PINS_TEXT = "# Written by the onprem.gpu collection (package_source): the versions this role installed and holds.\n" + "\n".join(
    f"Package: {name}\nPin: version {TOOLKIT}-*\nPin-Priority: 1001\n" for name in sorted(TOOLKIT_PACKAGES))


@pytest.fixture(scope="module")
def merged_config(host):
    # `containerd config dump` is the configuration containerd runs with: config.toml with its drop-ins merged.
    return tomllib.loads(host.check_output("containerd config dump"))


def test_containerd_runs_with_systemd_cgroups(host, merged_config):
    assert host.service("containerd").is_running and host.service("containerd").is_enabled
    assert "Server:" in host.check_output("ctr --address /run/containerd/containerd.sock version")
    runc = merged_config["plugins"][CRI]["containerd"]["runtimes"]["runc"]
    assert runc["runtime_type"] == "io.containerd.runc.v2"
    assert runc["options"]["SystemdCgroup"] is True


def test_nvidia_runtime_is_configured_without_losing_the_cri_settings(merged_config):
    cri = merged_config["plugins"][CRI]
    nvidia = cri["containerd"]["runtimes"]["nvidia"]
    assert nvidia["runtime_type"] == "io.containerd.runc.v2"
    assert nvidia["options"] == {"BinaryName": "/usr/bin/nvidia-container-runtime", "SystemdCgroup": True}
    # The drop-in is merged after config.toml and, on containerd 1.6, replaces the whole CRI section:
    # the settings of config.toml must survive it.
    assert cri["sandbox_image"] == "registry.k8s.io/pause:3.10.1"
    assert cri["cni"]["bin_dir"] == "/opt/cni/bin"
    assert cri["containerd"]["default_runtime_name"] == "runc"
    # Both files and no other. `config dump` lists them in no fixed order (containerd collects the loaded paths in a
    # Go map; the two orders were both seen on the same image): the merge order shows in the CRI settings above.
    assert sorted(merged_config["imports"]) == ["/etc/containerd/conf.d/50-nvidia.toml", "/etc/containerd/config.toml"]


def test_gpu_operator_drop_in_slot_is_free(host):
    assert host.file("/etc/containerd/config.toml").content_string.count('imports = ["/etc/containerd/conf.d/*.toml"]') == 1
    assert not host.file("/etc/containerd/conf.d/99-nvidia.toml").exists


def test_toolkit_is_held_at_the_pinned_version(host):
    listing = host.check_output("dpkg-query -W -f='${Package} ${Version}\\n' " + " ".join(TOOLKIT_PACKAGES))
    assert dict(line.split() for line in listing.splitlines()) == {name: f"{TOOLKIT}-1" for name in TOOLKIT_PACKAGES}
    held = host.check_output("apt-mark showhold").split()
    assert set(TOOLKIT_PACKAGES) <= set(held)


def test_toolkit_is_pinned_at_the_pinned_version(host):
    assert_file_is_exactly(host, PINS, PINS_TEXT)
    # APT reads the file: the installed version has the pin's priority, over 1.17.8 that the mirror also offers.
    assert f" *** {TOOLKIT}-1 1001\n" in host.check_output("apt-cache policy nvidia-container-toolkit")


def test_cdi_refresh_service_owns_the_specification(host):
    assert host.service("nvidia-cdi-refresh.path").is_enabled and host.service("nvidia-cdi-refresh.path").is_running
    assert host.service("nvidia-cdi-refresh.service").is_enabled
    unit = host.file("/etc/systemd/system/nvidia-cdi-refresh.service").content_string
    assert "ExecStart=/usr/bin/nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml" in unit
    # One owner: no static specification that the refreshed one would shadow.
    assert not host.file("/etc/cdi/nvidia.yaml").exists


def test_cdi_specification_names_every_gpu(host):
    spec_file = host.file("/var/run/cdi/nvidia.yaml")
    assert spec_file.mode == 0o644
    spec = yaml.safe_load(spec_file.content_string)
    uuids = host.check_output("nvidia-smi --query-gpu=uuid --format=csv,noheader").splitlines()
    assert spec["kind"] == "nvidia.com/gpu"
    assert [device["name"] for device in spec["devices"]] == [name for index, uuid in enumerate(uuids) for name in (str(index), uuid)] + ["all"]
    listed = host.check_output("nvidia-ctk cdi list").splitlines()
    assert "nvidia.com/gpu=all" in listed and "nvidia.com/gpu=3" in listed
