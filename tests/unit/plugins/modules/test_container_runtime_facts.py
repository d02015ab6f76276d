# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import json
from pathlib import Path
from unittest import mock

import pytest

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args

from ansible_collections.onprem.gpu.plugins.module_utils import _package_probe
from ansible_collections.onprem.gpu.plugins.modules import container_runtime_facts

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def text(name):
    return (FIXTURES / name).read_text(encoding="utf-8")


def run_module(args, answers, capsys, bin_path="/usr/bin/tool"):
    """Run the module with commands answered from ``answers`` (argv tuple prefix -> (rc, stdout, stderr)); return result and argvs."""
    calls = []

    def run_command(argv, **kwargs):
        calls.append(argv)
        for prefix, answer in answers.items():
            if tuple(argv[: len(prefix)]) == prefix:
                return answer
        raise AssertionError(f"unexpected command {argv}")

    with patch_module_args(args), mock.patch.object(AnsibleModule, "get_bin_path", return_value=bin_path), \
            mock.patch.object(AnsibleModule, "run_command", side_effect=run_command), pytest.raises(SystemExit):
        container_runtime_facts.main()
    return json.loads(capsys.readouterr().out), calls


def test_gpus_of_a_mig_node_carry_their_mig_devices_and_cdi_is_read(tmp_path, capsys):
    spec = tmp_path / "nvidia.yaml"
    spec.write_text("hooks:\n  - args: [nvidia-cdi-hook, enable-cuda-compat, --host-driver-version=535.216.03]\n")
    answers = {
        ("/usr/bin/tool", "--query-gpu=index,uuid,name,pci.bus_id,pci.device_id,memory.total,mig.mode.current,mig.mode.pending,"
                          "persistence_mode,driver_version"): (0, text("nvidia-smi/query_gpu__4x_a100_sxm4_80gb_mig_pending.txt"), ""),
        ("/usr/bin/tool", "-L"): (0, "GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-9a3f7c15-2e8d-4b64-a1c7-3f6e9b2d5a12)\n"
                                     "  MIG 3g.40gb     Device  0: (UUID: MIG-da06d78f-7534-56a0-a062-62fef012be91)\n", ""),
        ("/usr/bin/tool", "cdi", "list"): (0, "nvidia.com/gpu=0\nnvidia.com/gpu=1:0\nnvidia.com/gpu=all\n", ""),
    }
    result, calls = run_module({"nvidia_smi": "nvidia-smi", "cdi_spec_file": str(spec)}, answers, capsys)
    gpus = result["container_runtime"]["gpus"]
    assert gpus["driver_loaded"] and [gpu["mig_devices"] for gpu in gpus["gpus"]] == [[], [0], [], []]
    assert result["container_runtime"]["cdi"] == {"devices": ["nvidia.com/gpu=0", "nvidia.com/gpu=1:0", "nvidia.com/gpu=all"],
                                                  "spec_file": str(spec), "spec_driver_version": "535.216.03"}
    assert result["changed"] is False and len(calls) == 3


def test_no_mig_gpu_means_no_listing(capsys):
    answers = {("/usr/bin/tool",): (0, text("nvidia-smi/query_gpu__8x_h100_sxm.txt"), "")}
    result, calls = run_module({"nvidia_smi": "nvidia-smi"}, answers, capsys)
    assert len(result["container_runtime"]["gpus"]["gpus"]) == 8 and len(calls) == 1


def test_packages_and_containerd_are_read_raw(capsys):
    answers = {
        ("apt-get", "update"): (0, "", ""),
        ("apt-cache", "policy"): (0, text("container_runtime/apt_cache_policy__toolkit_pinned.txt"), ""),
        ("apt-mark", "showhold"): (0, "nvidia-container-toolkit\n", ""),
        ("containerd", "config", "dump"): (0, "version = 2\n", ""),
        ("ctr",): (1, "", "ctr: failed to dial \"/run/containerd/containerd.sock\": connection refused\n"),
    }
    result, calls = run_module({"packages": ["containerd"], "update_cache": True, "containerd": True}, answers, capsys)
    state = result["container_runtime"]
    assert state["packages"]["containerd"]["installed"] == "1.6.20~ds1-1+b1" and state["holds"] == ["nvidia-container-toolkit"]
    assert state["containerd"] == {"dump": "version = 2\n", "dump_error": "", "rc": 1,
                                   "error": "ctr: failed to dial \"/run/containerd/containerd.sock\": connection refused"}
    assert calls[0] == ["apt-get", "update", "-q"]


POLICY_ANSWERS = {
    ("apt-get", "update"): (0, "", ""),
    ("apt-cache", "policy"): (0, text("container_runtime/apt_cache_policy__toolkit_pinned.txt"), ""),
    ("apt-mark", "showhold"): (0, "nvidia-container-toolkit\n", ""),
}


def test_lists_that_show_every_package_installed_and_offered_at_its_version_are_not_refreshed(capsys):
    args = {"packages": ["containerd", "nvidia-container-toolkit=1.18.0", "nvidia-container-toolkit-base=1.18.0"],
            "update_cache": True, "refresh_only_when_missing": True}
    result, calls = run_module(args, POLICY_ANSWERS, capsys)
    assert calls == [["apt-cache", "policy", "containerd", "nvidia-container-toolkit", "nvidia-container-toolkit-base"],
                     ["apt-mark", "showhold"]]
    assert {"containerd", "nvidia-container-toolkit", "nvidia-container-toolkit-base"} <= set(result["container_runtime"]["packages"])


@pytest.mark.parametrize("packages", [
    ["containerd", "libnvidia-container-tools=1.18.0"],  # not installed
    ["nvidia-container-toolkit=1.17.8"],                  # installed at another version
    ["nvidia-container-toolkit=1.19.0"],                  # a version the lists do not offer yet
    ["containerd", "nvidia-container-runtime"],           # a name the lists do not know
], ids=["not-installed", "other-version", "not-offered", "unknown"])
def test_lists_are_refreshed_and_read_again_when_a_package_is_not_there_at_its_version(packages, capsys):
    result, calls = run_module({"packages": packages, "update_cache": True, "refresh_only_when_missing": True}, POLICY_ANSWERS, capsys)
    names = [package.split("=")[0] for package in packages]
    assert calls == [["apt-cache", "policy", *names], ["apt-get", "update", "-q"], ["apt-cache", "policy", *names], ["apt-mark", "showhold"]]


def test_update_cache_alone_always_refreshes_first(capsys):
    result, calls = run_module({"packages": ["containerd"], "update_cache": True}, POLICY_ANSWERS, capsys)
    assert calls == [["apt-get", "update", "-q"], ["apt-cache", "policy", "containerd"], ["apt-mark", "showhold"]]


def test_a_failing_package_manager_fails_with_its_output(capsys):
    result, calls = run_module({"packages": ["containerd"]}, {("apt-cache",): (100, "", "E: broken cache\n")}, capsys)
    assert result["failed"] and result["msg"] == "apt-cache policy containerd failed with exit code 100: E: broken cache"


def test_keys_are_fetched_with_their_status(capsys):
    response = mock.Mock()
    response.read.return_value = b"-----BEGIN PGP PUBLIC KEY BLOCK-----\n"
    answers = [(response, {"status": 200, "msg": "OK"}), (None, {"status": -1, "msg": "Request failed: <urlopen error refused>"})]
    # The collection's one key fetch (module_utils/_package_probe) is what the module calls.
    with mock.patch.object(_package_probe, "fetch_url", side_effect=answers):
        result, calls = run_module({"repositories": [{"name": "a", "key_url": "https://m/a.asc", "url": "http://m"},
                                                     {"name": "b", "key_url": "https://down/b.asc"}]}, {}, capsys)
    keys = result["container_runtime"]["keys"]
    assert [(key["name"], key["url"], key["status"]) for key in keys] == [("a", "https://m/a.asc", 200), ("b", "https://down/b.asc", -1)]
    assert keys[0]["content"].startswith("-----BEGIN PGP") and keys[1]["msg"] == "Request failed: <urlopen error refused>"


SETTINGS = dict(
    host="gpu1", platform_supported=True, distribution="Debian 12.8", distribution_major="Debian 12", containerd_repo_required=False,
    containerd_repo_url="", containerd_package="containerd", containerd_version="", manager="apt", nvidia=False, toolkit_version="1.18.0",
    toolkit_packages=[], nvidia_repo_url="", nvidia_runtime_binary="/usr/bin/nvidia-container-runtime", socket="/run/containerd/containerd.sock",
)
POLICY = """containerd:
  Installed: 1.6.20~ds1-1+b1
  Candidate: 1.6.20~ds1-1+b1
  Version table:
 *** 1.6.20~ds1-1+b1 500
        500 http://deb.debian.org/debian bookworm/main amd64 Packages
        100 /var/lib/dpkg/status
"""


def test_offers_are_judged_in_the_task_that_reads_them_and_return_the_plan(capsys):
    answers = {("apt-cache", "policy"): (0, POLICY, ""), ("apt-mark", "showhold"): (0, "", "")}
    result = run_module({"packages": ["containerd"], "check": "offers", "settings": SETTINGS}, answers, capsys)[0]
    assert not result.get("failed") and result["plan"]["problems"] == [] and result["plan"]["install"] == ["containerd"]
    assert result["plan"]["containerd"]["version"] == "1.6.20"


def test_a_failed_check_fails_the_task_with_the_role_sentence(capsys):
    answers = {("apt-cache", "policy"): (0, POLICY, ""), ("apt-mark", "showhold"): (0, "", "")}
    result = run_module({"packages": ["containerd"], "check": "offers", "settings": dict(SETTINGS, containerd_version="2.1")}, answers, capsys)[0]
    assert result["failed"] and result["msg"].startswith("The package sources of gpu1 offer containerd 1.6.20~ds1-1+b1 where containerd 2.1")
    assert result["msg"].endswith(".") and result["msg"] == "; ".join(result["problems"]) + "."
    result = run_module({"check": "preflight", "settings": dict(SETTINGS, platform_supported=False)}, {}, capsys)[0]
    assert result["failed"] and "gpu1" in result["msg"] and result["container_runtime"] == {}


def test_a_check_without_settings_is_refused(capsys):
    result, calls = run_module({"check": "preflight"}, {}, capsys)
    assert result["failed"] and "settings" in result["msg"] and calls == []


def test_verify_is_read_on_the_node_and_left_to_the_action_to_judge(capsys):
    # The node's Python may lack tomllib: the dump comes back as text, judged by the action plugin on the controller.
    answers = {("containerd", "config", "dump"): (0, "version = [\n", ""), ("ctr",): (1, "", "connection refused\n")}
    result, calls = run_module({"containerd": True, "check": "verify", "settings": SETTINGS}, answers, capsys)
    assert not result.get("failed") and "problems" not in result and "plan" not in result
    assert result["container_runtime"]["containerd"]["dump"] == "version = [\n" and len(calls) == 2
    result, calls = run_module({"containerd": True, "check": "verify"}, {}, capsys)
    assert result["failed"] and "settings" in result["msg"] and calls == []
