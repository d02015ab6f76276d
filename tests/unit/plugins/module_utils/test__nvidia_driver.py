# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import dataclasses
import re

import pytest

from ansible_collections.onprem.gpu.plugins.module_utils import _nvidia_driver as driver
from ansible_collections.onprem.gpu.plugins.module_utils import _package_source as package_source
from ansible_collections.onprem.gpu.plugins.module_utils._gpu_models import model_info

DEBIAN = driver.find_platform("debian", "12")
UBUNTU22 = driver.find_platform("ubuntu", "22.04")
UBUNTU24 = driver.find_platform("ubuntu", "24.04")
RHEL = driver.find_platform("rocky", "9.4")
VERSION = "580.65.06"
KEY = "-----BEGIN PGP PUBLIC KEY BLOCK-----\nlab\n-----END PGP PUBLIC KEY BLOCK-----\n"
H100_PACKAGES = ["nvidia-driver-cuda", "nvidia-kernel-open-dkms", "nvidia-modprobe", "nvidia-persistenced", "nvidia-fabricmanager", "libnvidia-nscq"]


@pytest.mark.parametrize("platform, branch, flavor, nvswitch, expected", [
    (DEBIAN, "580", "open", True, {"boot": ["nvidia-driver-cuda", "nvidia-kernel-open-dkms"], "tools": ["nvidia-modprobe", "nvidia-persistenced"],
                                   "fabric": ["nvidia-fabricmanager", "libnvidia-nscq"]}),
    (DEBIAN, "570", "proprietary", True, {"boot": ["nvidia-driver-cuda", "nvidia-kernel-dkms"], "tools": ["nvidia-modprobe", "nvidia-persistenced"],
                                          "fabric": ["nvidia-fabricmanager-570", "libnvidia-nscq-570"]}),
    (DEBIAN, "580", "open", False, {"boot": ["nvidia-driver-cuda", "nvidia-kernel-open-dkms"], "tools": ["nvidia-modprobe", "nvidia-persistenced"],
                                    "fabric": []}),
    # Ubuntu: the headless server packages, never the desktop nvidia-driver-<branch>(-open).
    (UBUNTU22, "580", "open", True, {"boot": ["nvidia-utils-580-server", "nvidia-headless-580-server-open"], "tools": ["nvidia-modprobe"],
                                     "fabric": ["nvidia-fabricmanager", "libnvidia-nscq"]}),
    (UBUNTU24, "580", "proprietary", False, {"boot": ["nvidia-utils-580-server", "nvidia-headless-580-server"], "tools": ["nvidia-modprobe"],
                                             "fabric": []}),
    (UBUNTU24, "570", "open", True, {"boot": ["nvidia-utils-570-server", "nvidia-headless-570-server-open"], "tools": ["nvidia-modprobe"],
                                     "fabric": ["nvidia-fabricmanager-570", "libnvidia-nscq-570"]}),
    # RHEL 9: nvidia-fabricmanager from 580 on, nvidia-fabric-manager before (gpu-driver-container rhel9 Dockerfiles).
    (RHEL, "580", "open", True, {"boot": ["nvidia-driver-cuda", "nvidia-driver-cuda-libs", "kmod-nvidia-open-dkms"],
                                 "tools": ["nvidia-modprobe", "nvidia-persistenced"], "fabric": ["nvidia-fabricmanager", "libnvidia-nscq"]}),
    (RHEL, "570", "proprietary", True, {"boot": ["nvidia-driver-cuda", "nvidia-driver-cuda-libs", "kmod-nvidia-latest-dkms"],
                                        "tools": ["nvidia-modprobe", "nvidia-persistenced"], "fabric": ["nvidia-fabric-manager", "libnvidia-nscq-570"]}),
], ids=["debian-580-open", "debian-570-proprietary", "debian-no-nvswitch", "ubuntu22-580-open", "ubuntu24-580-proprietary", "ubuntu24-570",
        "rhel-580", "rhel-570"])
def test_driver_packages(platform, branch, flavor, nvswitch, expected):
    assert driver.driver_packages(platform, branch, flavor, nvswitch) == expected


@pytest.mark.parametrize("platform, name, managed", [
    (UBUNTU22, "nvidia-driver-580-open", True),
    (UBUNTU22, "nvidia-headless-570-server", True),
    (UBUNTU22, "nvidia-utils-580", True),
    (UBUNTU22, "nvidia-utils-580-server", True),
    (UBUNTU22, "nvidia-container-toolkit", False),
    (RHEL, "nvidia-fabric-manager", True),
    (RHEL, "nvidia-fabricmanager", True),
    (DEBIAN, "nvidia-fabricmanager-570", True),
    (DEBIAN, "libnvidia-container1", False),
])
def test_managed_pattern(platform, name, managed):
    assert bool(re.match(driver.managed_pattern(platform), name)) is managed


@pytest.mark.parametrize("os_id, version_id, name", [
    ("debian", "12", "Debian 12"), ("ubuntu", "24.04", "Ubuntu 24.04"), ("almalinux", "9.5", "RHEL 9"), ("rhel", "9.6", "RHEL 9"),
    ("debian", "11", None), ("ubuntu", "20.04", None), ("rhel", "8.10", None), (None, None, None),
])
def test_find_platform(os_id, version_id, name):
    platform = driver.find_platform(os_id, version_id)
    assert (platform.name if platform else None) == name


BLACKWELL = {"architecture": "Blackwell", "open_kernel_modules": "required"}
GRACE_HOPPER = {"architecture": "Grace Hopper", "open_kernel_modules": "required"}
PASCAL = {"architecture": "Pascal", "open_kernel_modules": "unsupported"}


@pytest.mark.parametrize("requested, model, gpu, flavor, refused, warned", [
    ("auto", "NVIDIA H100 80GB HBM3", model_info("NVIDIA H100 80GB HBM3"), "open", False, False),
    ("auto", "NVIDIA L40S", model_info("NVIDIA L40S"), "open", False, False),
    ("auto", "unknown", None, "open", False, False),
    ("auto", "Tesla P100", PASCAL, "proprietary", False, False),
    # Hopper runs on the proprietary modules; NVIDIA recommends the open ones: a warning, no refusal.
    ("proprietary", "NVIDIA H100 80GB HBM3", model_info("NVIDIA H100 80GB HBM3"), "proprietary", False, True),
    ("proprietary", "NVIDIA H200", model_info("NVIDIA H200"), "proprietary", False, True),
    ("proprietary", "NVIDIA A100-SXM4-80GB", model_info("NVIDIA A100-SXM4-80GB"), "proprietary", False, False),
    ("proprietary", "NVIDIA B200", BLACKWELL, "proprietary", True, False),
    ("proprietary", "NVIDIA GH200 480GB", GRACE_HOPPER, "proprietary", True, False),
    ("open", "NVIDIA B200", BLACKWELL, "open", False, False),
])
def test_kernel_module_flavor(requested, model, gpu, flavor, refused, warned):
    chosen, problem, warning = driver.kernel_module_flavor(requested, model, gpu)
    assert (chosen, problem is not None, warning is not None) == (flavor, refused, warned)
    if refused:
        assert problem == (f"{model} ({gpu['architecture']}) runs only on the open kernel modules, but nvidia_driver_kernel_module_flavor "
                           "is proprietary; set it to open or auto.")


def test_input_problems():
    assert driver.input_problems("580", "580.65.06", True, "ssh") == []
    assert driver.input_problems("580", "570.172.08", False, "ssh")[0].startswith("nvidia_driver_version 570.172.08 is not a version of driver branch 580")
    assert driver.input_problems("58", "58.1", False, "ssh")
    assert driver.input_problems("580", "580.65.06", True, "local")[0].startswith("It is reached with connection: local")
    assert driver.input_problems("580", "580.65.06", False, "local") == []


def test_parsers():
    madison = ("nvidia-driver-cuda | 580.65.06-1 | http://lab-mirror:8080 bookworm/main amd64 Packages\n"
               "nvidia-driver-cuda | 570.172.08-1 | http://lab-mirror:8080 bookworm/main amd64 Packages\n")
    assert package_source.parse_madison(madison) == [("nvidia-driver-cuda", "580.65.06-1"), ("nvidia-driver-cuda", "570.172.08-1")]
    dnf = ("Available Packages\nnvidia-driver-cuda.x86_64    3:580.65.06-1.el9    cuda-rhel9-x86_64\n"
           "kernel-devel.x86_64  5.14.0-427.el9  baseos\n")
    assert package_source.parse_dnf_list(dnf) == [("nvidia-driver-cuda", "580.65.06-1.el9"), ("kernel-devel", "5.14.0-427.el9")]
    dpkg = "nvidia-driver-cuda\t580.65.06-1\thi \nnvidia-kernel-dkms\t570.172.08-1\trc \nlibc6\t2.36-9\tii \n"
    assert driver.parse_dpkg_query(dpkg) == {"nvidia-driver-cuda": "580.65.06-1", "libc6": "2.36-9"}
    assert driver.parse_rpm_query("nvidia-driver-cuda\t580.65.06-1.el9\n") == {"nvidia-driver-cuda": "580.65.06-1.el9"}
    assert package_source.parse_holds("nvidia-driver-cuda\nnvidia-modprobe\n", "Debian") == ["nvidia-driver-cuda", "nvidia-modprobe"]
    locks = "Last metadata expiration check: 0:01:00 ago.\nnvidia-driver-cuda-3:580.65.06-1.el9.*\nkmod-nvidia-open-dkms-580.65.06-1.el9.*\n"
    assert package_source.parse_holds(locks, "RedHat") == ["nvidia-driver-cuda", "kmod-nvidia-open-dkms"]
    show = ("Id=nvidia-persistenced.service\nLoadState=loaded\nActiveState=active\nUnitFileState=enabled\n\n"
            "Id=nvidia-fabricmanager.service\nLoadState=not-found\nActiveState=inactive\nUnitFileState=\n")
    assert driver.parse_systemctl_show(show) == {
        "nvidia-persistenced.service": {"Id": "nvidia-persistenced.service", "LoadState": "loaded", "ActiveState": "active", "UnitFileState": "enabled"},
        "nvidia-fabricmanager.service": {"Id": "nvidia-fabricmanager.service", "LoadState": "not-found", "ActiveState": "inactive", "UnitFileState": ""},
    }
    assert [driver.secure_boot_state(text) for text in ("SecureBoot enabled\n", "SecureBoot disabled\n", "EFI variables are not supported")] == [
        "enabled", "disabled", "unknown"]


def request(**changes):
    values = dict(branch="580", version=VERSION, flavor="open", nvswitch=True, persistenced=True, blacklist_nouveau=True, allow_reboot=False,
                  repo_name="lab", repo_url="http://mirror:8080", repo_suites=["bookworm"], repo_components=["main"],
                  kernel_headers=["linux-headers-6.1.0-lab"])
    values.update(changes)
    return driver.Request(**values)


ACTIVE = {"LoadState": "loaded", "ActiveState": "active", "UnitFileState": "enabled"}
GPUS = [{"index": index, "persistence_mode": "Enabled"} for index in range(8)]


def converged(platform=DEBIAN, req=None, **changes):
    """The node as the role leaves it: pinned packages held, files in place, services up, the driver answering."""
    req = req or request()
    wanted = sum(driver.driver_packages(platform, req.branch, req.flavor, req.nvswitch).values(), [])
    files = {path: content for path, (content, _mode, _effect) in driver.desired_files(platform, req, KEY).items()}
    if platform.family == "Debian":
        files[driver.PINS_PATH] = driver.expected_pins(wanted, req.version)
    values = dict(kernel="6.1.0-lab", installed=dict({name: VERSION + "-1" for name in wanted}, **{"linux-headers-6.1.0-lab": "6.1.0-1"}),
                  holds=list(wanted), offers=[(name, VERSION + "-1") for name in wanted], files=files,
                  services={"nvidia-persistenced.service": ACTIVE, "nvidia-fabricmanager.service": ACTIVE},
                  driver_loaded=True, driver_version=VERSION, gpus=GPUS)
    values.update(changes)
    return driver.Node(**values)


def test_a_converged_node_needs_nothing_and_verifies():
    node = converged()
    result = driver.plan(DEBIAN, request(), node, KEY)
    assert result["changes"] is False and result["actions"] == []
    assert driver.verify_problems(DEBIAN, request(), node) == []
    assert driver.offer_problems(DEBIAN, request(), node) == []


def test_a_fresh_node_gets_everything():
    node = converged(installed={}, holds=[], files={}, services={}, driver_loaded=False, driver_version=None, gpus=[])
    result = driver.plan(DEBIAN, request(), node, KEY)
    assert result["install"] == ["linux-headers-6.1.0-lab"] + H100_PACKAGES
    assert result["hold"] == H100_PACKAGES and result["remove"] == []
    assert [entry["path"] for entry in result["files"]] == [
        "/etc/apt/keyrings/lab.asc", "/etc/apt/sources.list.d/lab.sources", driver.BLACKLIST_PATH, driver.PERSISTENCED_DROPIN]
    assert result["effects"] == ["daemon_reload", "initramfs", "repository"]
    assert result["load_module"] is True and result["reboot_reason"] == "" and result["reboot"] is False
    assert result["services"] == [{"name": "nvidia-persistenced", "enabled": True, "state": "started"},
                                  {"name": "nvidia-fabricmanager", "enabled": True, "state": "started"}]


def test_check_mode_cannot_preview_packages_of_a_repository_it_has_not_configured():
    node = converged(installed={}, holds=[], files={}, services={}, driver_loaded=False, driver_version=None, gpus=[], check_mode=True)
    result = driver.plan(DEBIAN, request(), node, KEY)
    assert result["install"] == [] and result["hold"] == [] and result["services"] == []
    assert result["load_module"] is False and result["changes"] is True and result["verifiable"] is False
    assert "configure the driver repository, then install the packages it offers at 580.65.06" in result["actions"]


def test_a_node_held_before_the_pins_is_held_again_to_pin_it():
    """APT: the hold at the driver's version writes its pins (package_source); a node without them is held again."""
    node = converged(files=dict(converged().files, **{driver.PINS_PATH: None}))
    result = driver.plan(DEBIAN, request(), node, KEY)
    assert result["hold"] == H100_PACKAGES and result["install"] == [] and result["remove"] == []
    assert driver.expected_pins(["nvidia-modprobe"], "580.65.06") == (
        "# Written by the onprem.gpu collection (package_source): the versions this role installed and holds.\n"
        "Package: nvidia-modprobe\nPin: version 580.65.06-*\nPin-Priority: 1001\n")


def test_a_branch_upgrade_under_a_loaded_driver_waits_for_the_reboot():
    old = ["nvidia-driver-cuda", "nvidia-kernel-open-dkms", "nvidia-modprobe", "nvidia-persistenced", "nvidia-fabricmanager-570", "libnvidia-nscq-570"]
    node = converged(installed={name: "570.172.08-1" for name in old}, holds=old, driver_version="570.172.08")
    result = driver.plan(DEBIAN, request(), node, KEY)
    assert result["remove"] == ["libnvidia-nscq-570", "nvidia-fabricmanager-570"]
    assert result["retire_fabricmanager"] is False
    # APT drops the hold of a held package it installs at another version: every one is held again.
    assert result["hold"] == H100_PACKAGES
    assert result["reboot_reason"] == "the kernel runs driver 570.172.08, which cannot be replaced under its clients"
    assert result["write_marker"] is True and result["reboot"] is False and result["load_module"] is False
    # Enabled, not started: they would talk to the driver the kernel still runs.
    assert result["services"] == []
    pending = converged(marker="the kernel runs driver 570.172.08, which cannot be replaced under its clients\n", driver_version="570.172.08",
                        services={"nvidia-persistenced.service": dict(ACTIVE, ActiveState="inactive"), "nvidia-fabricmanager.service": ACTIVE})
    result = driver.plan(DEBIAN, request(), pending, KEY)
    assert result["changes"] is False and result["write_marker"] is False
    assert driver.verify_problems(DEBIAN, request(), pending) == []
    assert driver.plan(DEBIAN, request(allow_reboot=True), node, KEY)["reboot"] is True
    # Once the 580 packages are in, the 570 driver may not answer (library mismatch): the reason found before stays.
    mismatch = converged(driver_loaded=False, driver_version=None, gpus=[],
                         earlier_reason="the kernel runs driver 570.172.08, which cannot be replaced under its clients")
    result = driver.plan(DEBIAN, request(), mismatch, KEY)
    assert result["reboot_reason"] == mismatch.earlier_reason and result["write_marker"] is True and result["load_module"] is False


def test_a_board_without_nvswitch_retires_fabric_manager():
    req = request(nvswitch=False)
    node = converged(req=req, installed=dict(converged(req=req).installed, **{"nvidia-fabricmanager": VERSION + "-1"}))
    result = driver.plan(DEBIAN, req, node, KEY)
    assert result["remove"] == ["nvidia-fabricmanager"] and result["retire_fabricmanager"] is True
    assert driver.verify_problems(DEBIAN, req, node) == ["still installed from another branch, flavour or board: nvidia-fabricmanager"]


def test_a_module_that_does_not_load_waits_for_the_reboot():
    node = converged(driver_loaded=False, driver_version=None, gpus=[], load_failure="nvidia-modprobe exited 1")
    result = driver.plan(DEBIAN, request(), node, KEY)
    assert result["reboot_reason"].startswith("the NVIDIA module did not load (nvidia-modprobe exited 1): nouveau may still hold the GPUs")
    assert result["reboot_reason"].endswith("or Secure Boot refuses the unsigned module (enrol the DKMS key, see the README)")
    assert result["load_module"] is False and result["write_marker"] is True


def test_the_persistenced_drop_in_turns_persistence_mode_on():
    ubuntu = driver.desired_files(UBUNTU22, request(), KEY)[driver.PERSISTENCED_DROPIN][0]
    assert ubuntu.splitlines()[1:] == ["[Service]", "ExecStart=",
                                       "ExecStart=/usr/bin/nvidia-persistenced --user nvidia-persistenced --persistence-mode --verbose"]
    assert "--no-persistence-mode" not in ubuntu
    assert "ExecStart=/usr/bin/nvidia-persistenced --persistence-mode --verbose" in driver.desired_files(DEBIAN, request(), KEY)[driver.PERSISTENCED_DROPIN][0]
    assert driver.desired_files(DEBIAN, request(persistenced=False), KEY)[driver.PERSISTENCED_DROPIN][0] is None
    # A running daemon keeps its command line: a new drop-in restarts it.
    node = converged(files=dict(converged().files, **{driver.PERSISTENCED_DROPIN: None}))
    assert driver.plan(DEBIAN, request(), node, KEY)["services"] == [{"name": "nvidia-persistenced", "enabled": True, "state": "restarted"}]


def test_persistence_mode_off_is_a_verify_problem():
    gpus = [dict(gpu, persistence_mode="Disabled") if gpu["index"] in (0, 3) else gpu for gpu in GPUS]
    assert driver.verify_problems(DEBIAN, request(), converged(gpus=gpus)) == [
        f"persistence mode is off on GPU 0, 3 although nvidia-persistenced runs: its unit must not pass --no-persistence-mode "
        f"({driver.PERSISTENCED_DROPIN} overrides it)"]
    assert driver.verify_problems(DEBIAN, request(persistenced=False), converged(gpus=gpus, services={
        "nvidia-persistenced.service": dict(ACTIVE, ActiveState="inactive", UnitFileState="disabled"),
        "nvidia-fabricmanager.service": ACTIVE})) == []


def test_verify_problems_name_each_fault():
    node = converged(installed=dict(converged().installed, **{"nvidia-modprobe": "570.172.08-1"}), holds=["nvidia-driver-cuda"],
                     services={"nvidia-persistenced.service": ACTIVE}, driver_version="570.172.08")
    node = dataclasses.replace(node, driver_loaded=False, driver_version=None)
    assert driver.verify_problems(DEBIAN, request(), node) == [
        "not at 580.65.06: nvidia-modprobe",
        "not held: nvidia-kernel-open-dkms, nvidia-modprobe, nvidia-persistenced, nvidia-fabricmanager, libnvidia-nscq",
        "not running and enabled: nvidia-fabricmanager",
        "driver 580.65.06 is installed, but the driver does not answer; reboot the host to load the installed driver, "
        "and check dmesg for NVRM messages if it still does not answer",
    ]


H100 = "NVIDIA H100 80GB HBM3"
SHOWN = [dict(gpu, name=H100) for gpu in GPUS]
FALLEN_OFF = "check for a GPU fallen off the bus (nvidia-smi -L, dmesg) or fix the inventory"


@pytest.mark.parametrize("count, model", [(8, H100), (8, ""), (0, H100), (0, "")], ids=["both", "count", "model", "neither"])
def test_gpus_that_match_the_inventory_verify(count, model):
    assert driver.verify_problems(DEBIAN, request(expected_gpu_count=count, expected_gpu_model=model), converged(gpus=SHOWN)) == []


def test_gpus_that_do_not_match_the_inventory_are_a_verify_problem():
    # site.yml's sentence, with the host named by the role's failure message ("<host> does not hold driver ...: <problems>").
    seven = converged(gpus=SHOWN[:7])
    assert driver.verify_problems(DEBIAN, request(expected_gpu_count=8, expected_gpu_model=H100), seven) == [
        f"it shows 7 GPU(s) ({H100}) where the inventory declares 8 x {H100}: {FALLEN_OFF}"]
    assert driver.verify_problems(DEBIAN, request(expected_gpu_count=8), seven) == [
        f"it shows 7 GPU(s) ({H100}) where the inventory declares 8 GPU(s): {FALLEN_OFF}"]
    mixed = converged(gpus=SHOWN[:4] + [dict(gpu, name="NVIDIA A100-SXM4-80GB") for gpu in GPUS[4:]])
    assert driver.verify_problems(DEBIAN, request(expected_gpu_count=8, expected_gpu_model=H100), mixed) == [
        f"it shows 8 GPU(s) ({H100}, NVIDIA A100-SXM4-80GB) where the inventory declares 8 x {H100}: {FALLEN_OFF}"]
    assert driver.verify_problems(DEBIAN, request(expected_gpu_model="NVIDIA L40S"), converged(gpus=SHOWN)) == [
        f"it shows 8 GPU(s) ({H100}) where the inventory declares NVIDIA L40S: {FALLEN_OFF}"]


def test_gpus_are_not_judged_while_the_driver_does_not_answer():
    req = request(expected_gpu_count=8, expected_gpu_model=H100)
    stopped = converged(driver_loaded=False, driver_version=None, gpus=[])
    assert driver.inventory_gpu_problems(req, stopped) == []
    assert not any(FALLEN_OFF in problem for problem in driver.verify_problems(DEBIAN, req, stopped))
    # While a reboot is pending the old driver still answers: what it shows is judged with the packages.
    old = converged(marker="the kernel runs driver 570.172.08, which cannot be replaced under its clients\n", driver_version="570.172.08",
                    gpus=SHOWN[:7])
    assert driver.verify_problems(DEBIAN, req, old) == [f"it shows 7 GPU(s) ({H100}) where the inventory declares 8 x {H100}: {FALLEN_OFF}"]


def test_offer_problems():
    node = converged(installed={}, offers=[("nvidia-driver-cuda", "580.65.06-1"), ("nvidia-driver-cuda", "570.172.08-1")])
    problems = driver.offer_problems(DEBIAN, request(branch="575", version="575.64.05", kernel_headers=["linux-headers-0.0.0-lab-missing"]), node)
    assert problems == [
        "It runs kernel 6.1.0-lab, whose headers (linux-headers-0.0.0-lab-missing) are neither installed nor offered by its package sources, "
        "so DKMS cannot build the NVIDIA module for it; add the headers to the mirror (or set nvidia_driver_kernel_headers_packages), "
        "or boot a kernel whose headers the mirror carries.",
        "Its package sources do not offer driver 575.64.05 (branch 575): missing nvidia-driver-cuda, nvidia-kernel-open-dkms, nvidia-modprobe, "
        "nvidia-persistenced, nvidia-fabricmanager-575, libnvidia-nscq-575 at that version; http://mirror:8080 offers nvidia-driver-cuda "
        "580.65.06-1, 570.172.08-1. Pin a version the mirror publishes (nvidia_driver_branch, nvidia_driver_version) or publish that branch "
        "on the mirror.",
    ]


@pytest.mark.parametrize("platform", [DEBIAN, RHEL], ids=["deb822", "repo"])
def test_the_repository_files_are_the_package_source_roles(platform):
    """The driver plans the repository's files as the package_source role writes them for every role: a difference would make
    each run of one role undo the other's."""
    req = request(repo_key_url="http://mirror:8080/lab.asc")
    planned = {path: content for path, (content, _mode, effect) in driver.desired_files(platform, req, KEY).items() if effect == "repository"}
    assert planned == package_source.desired_files(platform.family, [req.repository], {"lab": KEY}, "bookworm")
    assert len(planned) == 2
