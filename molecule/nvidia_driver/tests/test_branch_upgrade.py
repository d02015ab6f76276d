"""After the 570 to 580 upgrade and the reboot: 580 held and answering, nothing of 570 left."""
testinfra_hosts = ["driver_upgrade"]
PINNED = "580.65.06"
WANTED = ["nvidia-driver-cuda", "nvidia-kernel-open-dkms", "nvidia-modprobe", "nvidia-persistenced",
          "nvidia-fabricmanager", "libnvidia-nscq"]
# From 580 on Fabric Manager and NSCQ lose the branch from their names: the 570 packages must be gone.
RETIRED = ["nvidia-fabricmanager-570", "libnvidia-nscq-570"]


def test_new_branch_is_installed_and_held_and_the_old_one_is_gone(host):
    listing = host.check_output("dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\\n' 'nvidia-*' 'libnvidia-*'")
    installed = {fields[0]: fields[1] for fields in map(str.split, listing.splitlines()) if len(fields) == 3 and fields[2][1] == "i"}
    held = host.check_output("apt-mark showhold").split()
    for name in WANTED:
        assert installed.get(name, "").startswith(f"{PINNED}-"), (name, installed.get(name))
        assert name in held, name
    assert not set(RETIRED) & set(installed)
    assert not [name for name, version in installed.items() if version.startswith("570.")]
    # The pins follow: the retired packages' stanzas left with their holds (test_nvidia_driver checks the whole file).
    pins = host.file("/etc/apt/preferences.d/onprem-gpu-nvidia_driver.pref").content_string
    assert "570" not in pins and all(f"Package: {name}\nPin: version {PINNED}-*\n" in pins for name in WANTED)


def test_driver_580_answers_after_the_reboot(host):
    rows = host.check_output("nvidia-smi --query-gpu=driver_version --format=csv,noheader").splitlines()
    assert rows == [PINNED] * 8
    assert not host.file("/run/onprem-gpu/nvidia-driver-reboot-required").exists


def test_fabric_manager_of_the_new_branch_runs(host):
    assert host.run("systemctl is-active nvidia-fabricmanager nvidia-persistenced").stdout.split() == ["active", "active"]
    assert host.check_output("nv-fabricmanager --version") == f"Fabric Manager version is : {PINNED}"
    last_start = [line for line in host.file("/var/log/fabricmanager.log").content_string.splitlines() if "is running" in line][-1]
    assert f"Fabric Manager version {PINNED}" in last_start


def test_persistence_mode_is_on_after_the_reboot(host):
    assert host.check_output("nvidia-smi --query-gpu=persistence_mode --format=csv,noheader").splitlines() == ["Enabled"] * 8
