"""Bad input to the GPU node base stops the nvidia_driver role with one sentence before it changes anything.

These cases need no server: the role reads the node without changing it, then checks the inputs, the mirror
and the node in one assert before any change, so they run against this machine, reached with connection: local,
in check mode for good measure. The
faults that need a server and the lab mirror (a branch the mirror lacks, missing kernel headers, an
unreachable mirror) are in the molecule scenario nvidia_driver (its refusals' server).
"""

import pytest

from local_play import one_line, run_role_here


def run_role(tmp_path, role_vars):
    return run_role_here(tmp_path, "onprem.gpu.nvidia_driver", role_vars, "GPU node base on this machine")


H100 = {"node_gpu_model": "NVIDIA H100 80GB HBM3", "node_gpu_count": 8}

# The one assert that stops the role before any change.
CHECK = "Check the inputs, the mirror and the node before any change"

BAD_INPUTS = [
    pytest.param(
        dict(H100, nvidia_driver_allow_reboot=True),
        CHECK,
        "gpu-test: It is reached with connection: local, so nvidia_driver_allow_reboot=true would reboot the machine running "
        "Ansible in the middle of the play; run the role on it without nvidia_driver_allow_reboot, then reboot it yourself "
        "(systemctl reboot) when the role reports a pending reboot.",
        id="reboot-on-connection-local",
    ),
    pytest.param(
        dict(H100, nvidia_driver_branch="580", nvidia_driver_version="570.172.08"),
        CHECK,
        "nvidia_driver_version 570.172.08 is not a version of driver branch 580: set nvidia_driver_branch to the three-digit "
        "branch (e.g. 580) and nvidia_driver_version to a full version of that branch (e.g. 580.65.06).",
        id="version-of-another-branch",
    ),
    pytest.param(
        dict(H100, nvidia_driver_branch="R580"),
        CHECK,
        "nvidia_driver_version 580.65.06 is not a version of driver branch R580",
        id="branch-not-a-number",
    ),
    pytest.param(
        dict(H100, nvidia_driver_kernel_module_flavor="closed"),
        "Validating arguments against arg spec",
        "value of nvidia_driver_kernel_module_flavor must be one of: auto, open, proprietary, got: closed",
        id="unknown-flavour",
    ),
]


@pytest.mark.parametrize(("role_vars", "failed_task", "message"), BAD_INPUTS)
def test_bad_input_stops_the_driver_role_before_any_change(tmp_path, role_vars, failed_task, message):
    result = run_role(tmp_path, role_vars)
    output = one_line(result.stdout + result.stderr)
    assert result.returncode != 0, output
    assert message in output
    # The failing task is a check of the inputs: nothing ran on the host before it.
    failed = [line for line in result.stdout.splitlines() if line.startswith("TASK [")][-1]
    assert failed_task in failed
    assert "changed=0" in result.stdout


def test_proprietary_modules_on_hopper_are_a_warning_not_a_refusal(tmp_path):
    """NVIDIA recommends the open modules for Hopper and requires them only from Grace Hopper and Blackwell on."""
    result = run_role(tmp_path, dict(H100, nvidia_driver_kernel_module_flavor="proprietary"))
    output = one_line(result.stdout + result.stderr)
    assert "NVIDIA recommends the open kernel modules for NVIDIA H100 80GB HBM3 (Hopper)" in output
    assert "runs only on the open kernel modules" not in output
    assert "changed=0" in result.stdout
