"""A GPU server after the nvidia_driver role (a fresh install, or the upgrade after its reboot): the pinned driver held
and answering, Fabric Manager where the board has NVSwitches and nowhere else, nouveau blacklisted, nothing waiting
for a reboot."""

import pytest

from lab_files import assert_file_is_exactly

testinfra_hosts = ["driver_installed"]

PINNED = "580.65.06"
DRIVER_PACKAGES = ["nvidia-driver-cuda", "nvidia-kernel-open-dkms", "nvidia-modprobe", "nvidia-persistenced"]
FABRIC_PACKAGES = ["nvidia-fabricmanager", "libnvidia-nscq"]
OTHER_PACKAGES = ["nvidia-kernel-dkms", "nvidia-fabricmanager-570", "libnvidia-nscq-570"]
SOURCES = "/etc/apt/sources.list.d/onprem-gpu-lab.sources"
PINS = "/etc/apt/preferences.d/onprem-gpu-nvidia_driver.pref"


@pytest.fixture(scope="module")
def node(host):
    variables = host.ansible.get_variables()
    model, count = variables["node_gpu_model"], int(variables["node_gpu_count"])
    # HGX/DGX baseboards with 8 SXM GPUs carry NVSwitches; PCIe cards do not.
    nvswitch = model in ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB") and count == 8
    kernel = host.check_output("uname -r")
    names = DRIVER_PACKAGES + FABRIC_PACKAGES + OTHER_PACKAGES + [f"linux-headers-{kernel}"]
    # One query for every package: "name version status", installed ones only ("ii" or "hi" when held).
    listing = host.run("dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\\n' " + " ".join(names)).stdout
    installed = {fields[0]: fields[1] for fields in map(str.split, listing.splitlines()) if len(fields) == 3 and fields[2][1] == "i"}
    return {
        "model": model, "count": count, "nvswitch": nvswitch, "kernel": kernel, "installed": installed,
        "held": host.check_output("apt-mark showhold").split(),
        "wanted": DRIVER_PACKAGES + (FABRIC_PACKAGES if nvswitch else []),
    }


def test_driver_packages_are_installed_and_held_at_the_pinned_version(node):
    for name in node["wanted"]:
        assert node["installed"].get(name, "").startswith(f"{PINNED}-"), (name, node["installed"].get(name))
        assert name in node["held"], name


def test_driver_packages_are_pinned_at_the_pinned_version(host, node):
    # One stanza per wanted package, in name order. On the upgraded A100 the 570 branch's Fabric Manager and NSCQ, removed
    # with their holds, have left the file, and the four packages both branches share moved from 570.172.08 to 580.
    text = "# Written by the onprem.gpu collection (package_source): the versions this role installed and holds.\n" + "\n".join(
        f"Package: {name}\nPin: version {PINNED}-*\nPin-Priority: 1001\n" for name in sorted(node["wanted"]))
    assert_file_is_exactly(host, PINS, text)
    # APT reads the file: the installed driver has the pin's priority, the 570.172.08 the mirror also offers does not.
    assert f" *** {PINNED}-1 1001\n" in host.check_output("apt-cache policy nvidia-driver-cuda")


def test_holds_stop_apt_from_moving_the_driver(host):
    # The mirror also offers 570.172.08: APT refuses to change a held driver package without explicit consent.
    attempt = host.run("apt-get -s -y --allow-downgrades install nvidia-driver-cuda=570.172.08-1")
    assert attempt.rc != 0
    assert "Held packages were changed" in attempt.stdout + attempt.stderr


def test_open_kernel_modules_and_headers_for_the_running_kernel(node):
    assert "nvidia-kernel-open-dkms" in node["installed"]
    assert "nvidia-kernel-dkms" not in node["installed"]
    assert f"linux-headers-{node['kernel']}" in node["installed"]


def test_nouveau_is_blacklisted(host):
    blacklist = host.file("/etc/modprobe.d/blacklist-nouveau.conf")
    assert blacklist.mode == 0o644
    assert "blacklist nouveau" in blacklist.content_string.splitlines()


def test_driver_answers_with_the_pinned_version(host, node):
    rows = host.check_output("nvidia-smi --query-gpu=driver_version,name --format=csv,noheader").splitlines()
    assert rows == [f"{PINNED}, {node['model']}"] * node["count"]
    assert not host.file("/run/onprem-gpu/nvidia-driver-reboot-required").exists


def test_services_run_and_fabric_manager_only_on_nvswitch_boards(host, node):
    states = host.run("systemctl is-active nvidia-persistenced nvidia-fabricmanager; systemctl is-enabled nvidia-persistenced").stdout.split()
    assert states[0] == "active" and states[2] == "enabled"
    if node["nvswitch"]:
        assert states[1] == "active"
        assert host.run("systemctl is-enabled nvidia-fabricmanager").stdout.strip() == "enabled"
        log = host.file("/var/log/fabricmanager.log").content_string
        assert f"Fabric Manager version {PINNED}" in log
        assert "Successfully configured all the available NVSwitches" in log
    else:
        assert states[1] != "active"
        assert not set(FABRIC_PACKAGES + OTHER_PACKAGES) & set(node["installed"])


def test_driver_repository_is_a_signed_source(host):
    sources = host.file(SOURCES)
    assert sources.mode == 0o644
    assert "Signed-By: /etc/apt/keyrings/onprem-gpu-lab.asc" in sources.content_string
    update = host.run(f"apt-get -o Dir::Etc::SourceList={SOURCES} -o Dir::Etc::SourceParts=- update")
    assert update.rc == 0, update.stderr
    assert "W:" not in update.stdout + update.stderr and "E:" not in update.stdout + update.stderr


def test_persistence_mode_is_on_on_every_gpu(host, node):
    # Debian's and Ubuntu's units start nvidia-persistenced with --no-persistence-mode; the role's drop-in overrides it.
    modes = host.check_output("nvidia-smi --query-gpu=persistence_mode --format=csv,noheader").splitlines()
    assert modes == ["Enabled"] * node["count"]
