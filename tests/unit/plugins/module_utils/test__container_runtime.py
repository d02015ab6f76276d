# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import pathlib
import tomllib

import pytest

from ansible_collections.onprem.gpu.plugins.module_utils import _container_runtime as runtime

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "container_runtime"
TOOLKIT = ["nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools", "libnvidia-container1"]
SETTINGS = dict(
    host="gpu1", platform_supported=True, distribution="Debian 12.8", distribution_major="Debian 12", containerd_repo_required=False,
    containerd_repo_url="", containerd_package="containerd", containerd_version="", manager="apt", nvidia=True, toolkit_version="1.18.0",
    toolkit_packages=TOOLKIT, nvidia_repo_url="http://mirror", nvidia_runtime_binary="/usr/bin/nvidia-container-runtime",
    socket="/run/containerd/containerd.sock",
)


def fixture(name):
    return (FIXTURES / name).read_text()


def gpu(index, mig=None, devices=()):
    return {"index": index, "mig_mode_current": mig, "mig_devices": list(devices)}


# ---------------------------------------------------------------- package sources


def test_apt_policy_separates_offered_from_installed_only_versions():
    packages = runtime.parse_apt_policy(fixture("apt_cache_policy__toolkit_pinned.txt"))
    assert packages["containerd"] == {"installed": "1.6.20~ds1-1+b1", "candidate": "1.6.20~ds1-1+b1", "offered": ["1.6.20~ds1-1+b1"]}
    assert packages["libnvidia-container-tools"] == {"installed": None, "candidate": "1.18.0-1", "offered": ["1.18.0-1", "1.17.8-1"]}
    # 1.17.7 is only in /var/lib/dpkg/status: installed, offered by no source.
    assert packages["libnvidia-container1"]["offered"] == ["1.18.0-1", "1.17.8-1"]
    assert packages["libnvidia-container1"]["installed"] == "1.17.7-1"
    assert runtime.parse_apt_policy("") == {}


def test_dnf_list_reads_installed_and_available_sections():
    packages = runtime.parse_dnf_list(fixture("dnf_list__containerd_io_el9.txt"))
    assert packages["containerd.io"] == {"installed": "1.7.27-3.1.el9", "candidate": "2.1.4-1.el9",
                                         "offered": ["2.1.4-1.el9", "1.7.28-1.el9", "1.7.27-3.1.el9", "1.6.32-3.1.el9"]}
    assert packages["nvidia-container-toolkit"]["installed"] is None


def test_holds_of_apt_mark_and_dnf_versionlock():
    assert runtime.parse_holds("nvidia-container-toolkit\nlibnvidia-container1\n") == ["libnvidia-container1", "nvidia-container-toolkit"]
    assert runtime.parse_holds(fixture("dnf_versionlock_list.txt")) == ["containerd.io", "libnvidia-container1", "nvidia-container-toolkit"]


@pytest.mark.parametrize("version, pin, release_required, expected", [
    ("1.18.0-1", "1.18.0", True, True),
    ("1:1.18.0-1", "1.18.0", True, True),
    ("1.18.01-1", "1.18.0", True, False),
    ("1.7.27", "1.7.27", False, True),
    ("1.7.27", "1.7.27", True, False),
    (None, "1.18.0", False, False),
])
def test_pins_match_whole_upstream_versions(version, pin, release_required, expected):
    assert runtime.matches(version, pin, release_required) is expected


def test_containerd_plan_follows_the_version_that_will_run():
    packages = runtime.parse_apt_policy(fixture("apt_cache_policy__toolkit_pinned.txt"))
    assert runtime.containerd_plan(packages, SETTINGS) == {"version": "1.6.20", "config_version": 2, "cri_cdi": False}
    assert runtime.containerd_plan({"containerd": {"installed": None, "candidate": "1.7.24-1", "offered": []}}, SETTINGS)["cri_cdi"] is True
    pinned = dict(SETTINGS, containerd_version="2.1.4")
    assert runtime.containerd_plan(packages, pinned) == {"version": "2.1.4", "config_version": 3, "cri_cdi": True}


def test_offers_refuse_a_containerd_or_toolkit_the_sources_lack():
    packages = runtime.parse_apt_policy(fixture("apt_cache_policy__toolkit_pinned.txt"))
    assert runtime.offer_problems(packages, SETTINGS) == []
    problems = runtime.offer_problems(packages, dict(SETTINGS, containerd_version="1.7.24", toolkit_version="1.19.0"))
    assert problems[0].startswith("The package sources of gpu1 offer containerd 1.6.20~ds1-1+b1 where containerd 1.7.24 is needed:")
    assert problems[1].startswith("The package sources of gpu1 do not offer NVIDIA Container Toolkit 1.19.0: missing nvidia-container-toolkit,")
    assert "http://mirror offers nvidia-container-toolkit 1.18.0-1, 1.17.8-1" in problems[1]
    old = {"containerd": {"installed": None, "candidate": "1.5.9-1", "offered": ["1.5.9-1"]}}
    assert "where containerd 1.6, 1.7 or 2.x is needed" in runtime.offer_problems(old, dict(SETTINGS, nvidia=False))[0]
    assert "offer containerd in no version" in runtime.offer_problems({}, dict(SETTINGS, nvidia=False))[0]


def test_package_changes_pin_and_hold_per_package_manager():
    packages = runtime.parse_apt_policy(fixture("apt_cache_policy__toolkit_pinned.txt"))
    changes = runtime.package_changes(packages, ["nvidia-container-toolkit"], SETTINGS)
    assert changes["install"] == ["containerd"] + [name + "=1.18.0-*" for name in TOOLKIT]
    # APT: every pinned package, held or not, at its version: package_source holds what is not held and moves the pins.
    assert changes["hold"] == [name + "=1.18.0" for name in TOOLKIT]
    pinned_containerd = runtime.package_changes(packages, TOOLKIT, dict(SETTINGS, containerd_version="1.6.20"))
    assert pinned_containerd["hold"] == [name + "=1.18.0" for name in TOOLKIT] + ["containerd=1.6.20"]
    dnf = dict(SETTINGS, manager="dnf", containerd_package="containerd.io", containerd_version="1.7.27")
    changes = runtime.package_changes({}, runtime.parse_holds(fixture("dnf_versionlock_list.txt")), dnf)
    assert changes["install"] == ["containerd.io-1.7.27"] + [name + "-1.18.0" for name in TOOLKIT]
    assert changes["hold"] == ["nvidia-container-toolkit-base-1.18.0", "libnvidia-container-tools-1.18.0"]


# ---------------------------------------------------------------- GPUs and CDI


def test_list_gpus_gives_mig_device_indices_per_gpu():
    assert runtime.parse_list_gpus(fixture("nvidia_smi_L__h100_mig.txt")) == {0: [0, 1, 2, 3], 1: []}


def test_mig_enabled_gpus_contribute_their_mig_devices_others_one_whole_gpu():
    gpus = [gpu(0, "Enabled", [0, 1, 2]), gpu(1, "Disabled"), gpu(2, None), gpu(3, "Enabled")]
    assert runtime.expected_cdi_devices(gpus) == ["1", "2", "0:0", "0:1", "0:2", "all"]


def cdi_state(gpus, devices, driver="580.65.06", spec_driver="580.65.06"):
    return {"gpus": {"driver_loaded": True, "driver_version": driver, "gpus": gpus},
            "cdi": {"devices": devices, "spec_file": "/var/run/cdi/nvidia.yaml", "spec_driver_version": spec_driver}}


def test_cdi_of_a_mig_node_matches_the_mig_devices():
    gpus = [gpu(0, "Enabled", [0, 1]), gpu(1, "Disabled")]
    listed = ["nvidia.com/gpu=0:0", "nvidia.com/gpu=0:1", "nvidia.com/gpu=1", "nvidia.com/gpu=all",
              "nvidia.com/gpu=GPU-1ad2", "nvidia.com/gpu=MIG-da06", "nvidia.com/gpu=MIG-8aa1"]
    assert runtime.cdi_problems(cdi_state(gpus, listed), "gpu1") == []


def test_cdi_that_predates_the_mig_layout_is_a_problem():
    # What the old check accepted: one whole-GPU device per GPU, although GPU 0 now runs MIG.
    gpus = [gpu(0, "Enabled", [0, 1]), gpu(1, "Disabled")]
    listed = ["nvidia.com/gpu=0", "nvidia.com/gpu=1", "nvidia.com/gpu=all"]
    assert runtime.cdi_problems(cdi_state(gpus, listed), "gpu1") == [
        "gpu1: the CDI specifications name 3 device(s) where the GPUs have 4 (1 whole GPU(s), 2 MIG device(s) and all);"
        " missing nvidia.com/gpu=0:0, nvidia.com/gpu=0:1; unexpected nvidia.com/gpu=0"
    ]


def test_cdi_of_another_driver_is_stale_and_a_stopped_driver_is_not_judged():
    gpus = [gpu(0)]
    listed = ["nvidia.com/gpu=0", "nvidia.com/gpu=all"]
    assert runtime.cdi_problems(cdi_state(gpus, listed, spec_driver="570.148.08"), "gpu1") == [
        "gpu1: the CDI specification /var/run/cdi/nvidia.yaml was generated for driver 570.148.08, the driver runs 580.65.06"
    ]
    assert runtime.cdi_problems({"gpus": {"driver_loaded": False, "gpus": []}, "cdi": {"devices": []}}, "gpu1") == []
    assert runtime.spec_driver_version("args:\n  - --host-driver-version=580.65.06\n") == "580.65.06"
    assert runtime.spec_driver_version("") is None


# ---------------------------------------------------------------- containerd configuration versions


@pytest.mark.parametrize("dump, version", [("config_dump__containerd_1.7_v2.toml", 2), ("config_dump__containerd_2.1_v3.toml", 3)])
def test_cri_settings_of_both_configuration_versions(dump, version):
    cri = runtime.cri_settings(tomllib.loads(fixture(dump)))
    assert cri["version"] == version
    assert cri["sandbox_image"] == "registry.k8s.io/pause:3.10.1"
    assert cri["default_runtime"] == "runc" and cri["cni_bin_dir"] == "/opt/cni/bin"
    assert cri["enable_cdi"] is True and cri["cdi_spec_dirs"] == ["/etc/cdi", "/var/run/cdi"]
    assert cri["runtimes"]["nvidia"]["options"] == {"BinaryName": "/usr/bin/nvidia-container-runtime", "SystemdCgroup": True}
    assert cri["runtimes"]["runc"]["options"]["SystemdCgroup"] is True


def verified(dump_name, **changes):
    state = {"containerd": {"config": tomllib.loads(fixture(dump_name)), "rc": 0, "error": ""},
             "packages": {name: {"installed": "1.18.0-1"} for name in TOOLKIT}, "holds": TOOLKIT}
    state.update(changes)
    return runtime.verify_problems(state, SETTINGS)


@pytest.mark.parametrize("dump", ["config_dump__containerd_1.7_v2.toml", "config_dump__containerd_2.1_v3.toml"])
def test_a_good_runtime_has_no_problem_on_either_version(dump):
    assert verified(dump) == []


def test_version_2_paths_on_a_version_3_dump_would_miss_everything():
    # What the old greps looked for does not exist in a containerd 2.x dump.
    config = tomllib.loads(fixture("config_dump__containerd_2.1_v3.toml"))
    assert runtime.cri_settings(dict(config, version=2))["runtimes"] == {}
    assert runtime.cri_settings(config)["runtimes"].keys() == {"nvidia", "runc"}


def test_verify_names_every_problem():
    config = tomllib.loads(fixture("config_dump__containerd_1.7_v2.toml"))
    config["plugins"][runtime.CRI_V2]["containerd"]["runtimes"]["runc"]["options"]["SystemdCgroup"] = False
    del config["plugins"][runtime.CRI_V2]["containerd"]["runtimes"]["nvidia"]
    problems = verified("config_dump__containerd_1.7_v2.toml",
                        containerd={"config": config, "rc": 1, "error": "connection refused\n"},
                        packages={name: {"installed": "1.17.8-1"} for name in TOOLKIT}, holds=TOOLKIT[:1])
    see = "see `containerd config dump` and `journalctl -u containerd`"
    assert problems == [
        f"containerd on gpu1 does not answer on /run/containerd/containerd.sock (connection refused); {see}",
        f"containerd on gpu1 does not run runc with SystemdCgroup = true; {see}",
        f"gpu1: containerd does not run the nvidia runtime (/usr/bin/nvidia-container-runtime) with SystemdCgroup = true; {see}",
        "gpu1: not at 1.18.0: " + ", ".join(TOOLKIT),
        "gpu1: not held: " + ", ".join(TOOLKIT[1:]),
    ]


def test_verify_includes_cdi_with_the_way_to_refresh_it():
    state = cdi_state([gpu(0, "Enabled", [0])], ["nvidia.com/gpu=0", "nvidia.com/gpu=all"])
    problems = verified("config_dump__containerd_2.1_v3.toml", **state)
    assert len(problems) == 1 and problems[0].endswith("; refresh them with `systemctl restart nvidia-cdi-refresh.service`")


def read_back(dump, dump_error=""):
    """What container_runtime_facts reads: the dump as text, unparsed."""
    return {"containerd": {"dump": dump, "dump_error": dump_error, "rc": 0, "error": ""},
            "packages": {name: {"installed": "1.18.0-1"} for name in TOOLKIT}, "holds": TOOLKIT}


@pytest.mark.parametrize("dump", ["config_dump__containerd_1.7_v2.toml", "config_dump__containerd_2.1_v3.toml"])
def test_running_problems_parse_the_dump_then_verify(dump):
    state = read_back(fixture(dump))
    assert runtime.running_problems(state, SETTINGS) == [] and "config" not in state["containerd"]
    # The judgement the module's action makes for check=verify is the same, without a plan.
    assert runtime.judgement("verify", state, SETTINGS) == ([], None)
    unheld = dict(state, holds=TOOLKIT[1:])
    assert runtime.judgement("verify", unheld, SETTINGS) == (["gpu1: not held: nvidia-container-toolkit"], None)


def test_running_problems_of_a_dump_that_fails_or_is_no_toml():
    see = "see `containerd config dump` and `journalctl -u containerd`"
    failing = runtime.running_problems(read_back("", "failed to load TOML: near line 3"), dict(SETTINGS, nvidia=False))
    # An empty dump parses to nothing: runc is not found either.
    assert failing == ["`containerd config dump` fails on gpu1: failed to load TOML: near line 3",
                       f"containerd on gpu1 does not run runc with SystemdCgroup = true; {see}"]
    garbled = runtime.running_problems(read_back("version = ["), dict(SETTINGS, nvidia=False))
    assert garbled[0].startswith("containerd on gpu1 prints a configuration that is no TOML (") and len(garbled) == 2


# ---------------------------------------------------------------- preflight


def test_preflight_names_the_platform_the_source_and_each_bad_key():
    keys = [
        {"name": "good", "url": "http://m/good.asc", "status": 200, "content": runtime.ARMORED_KEY + "\n..."},
        {"name": "html", "url": "http://m/html.asc", "status": 200, "content": "<html>"},
        {"name": "gone", "url": "http://m/gone.asc", "status": 404, "content": ""},
        {"name": "down", "url": "http://down/k.asc", "status": -1, "content": "", "msg": "Request failed: <urlopen error refused>"},
    ]
    problems = runtime.preflight_problems({"keys": keys}, SETTINGS)
    assert [problem.split(": ", 1)[1].split(";")[0] for problem in problems] == [
        "http://m/html.asc answered HTTP 200 with no ASCII-armored signing key",
        "http://m/gone.asc answered HTTP 404 with no ASCII-armored signing key",
        "http://down/k.asc is unreachable (Request failed: <urlopen error refused>)",
    ]
    assert problems[0].startswith("gpu1 cannot use the html repository:")
    unsupported = runtime.preflight_problems({}, dict(SETTINGS, platform_supported=False, distribution="Fedora 41"))
    assert unsupported == ["gpu1 runs Fedora 41, for which the container_runtime role has no package names; it supports"
                           " Debian 12, Ubuntu 22.04 and 24.04, RHEL, Rocky and AlmaLinux 9"]
    no_source = runtime.preflight_problems({}, dict(SETTINGS, containerd_repo_required=True, distribution_major="Rocky 9"))
    assert no_source[0].startswith("Rocky 9 ships no containerd: set container_runtime_containerd_repo_url")


def test_recorded_apt_policy_of_a_lab_node():
    # Recorded on the molecule node after the role ran: Debian's containerd (also offered by the security suite) and the toolkit held at 1.18.0.
    packages = runtime.parse_apt_policy(fixture("apt_cache_policy__lab_debian12_recorded.txt"))
    assert packages["containerd"]["offered"] == ["1.6.20~ds1-1+deb12u3", "1.6.20~ds1-1+deb12u2"]
    assert runtime.offer_problems(packages, SETTINGS) == []
    assert runtime.containerd_plan(packages, SETTINGS) == {"version": "1.6.20", "config_version": 2, "cri_cdi": False}
    assert runtime.package_changes(packages, TOOLKIT, SETTINGS)["hold"] == [name + "=1.18.0" for name in TOOLKIT]
