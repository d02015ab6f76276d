# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Read one GPU node live and judge it: the part that the node_health module and the node agent share.

The caller hands in two functions, so that the module runs commands through ``AnsibleModule.run_command`` and the
agent through ``subprocess``: ``run(argv)`` returns ``(rc, stdout, stderr)`` and ``which(name)`` the path of a program
or None. Every command is bounded by coreutils' ``timeout`` (a stopped command exits 124, or 137 once killed), so a
hanging ``nvidia-smi`` makes the state ``unknown`` instead of blocking the caller.
"""

from __future__ import annotations

import os

from ansible_collections.onprem.gpu.plugins.module_utils._kernel_log import read_kernel_log_file
from ansible_collections.onprem.gpu.plugins.module_utils._node_health import judge, unknown

# Seconds a stopped command gets between SIGTERM and SIGKILL.
KILL_AFTER_SECONDS = 5
DCGM_DIAG_TIMEOUTS = {1: 300, 2: 900, 3: 2400, 4: 10800}
# nvidia-smi's answers when the driver cannot be used (see _nvsmi): the node's GPUs are then unknown, not failed.
_DRIVER_UNUSABLE = ("couldn't communicate with the nvidia driver", "driver/library version mismatch",
                    "couldn't find libnvidia-ml.so", "no devices were found")
# The options a live run reads, with their defaults (the module's argument spec has the same ones).
LIVE_OPTIONS = {"nvidia_smi": "nvidia-smi", "command_timeout": 60, "kernel_log_since": None, "kernel_log_file": None,
                "dcgm_diag_level": 1, "dcgm_diag_timeout": None}


class Runner:
    """Runs argv lists, each bounded by coreutils' timeout, and keeps them for the result."""

    def __init__(self, run, which):
        self._run = run
        self.which = which
        self.timeout = which("timeout")
        self.commands = []

    def run(self, argv, seconds):
        """Return (rc, stdout, stderr, timed_out)."""
        command = ([self.timeout, "-k", str(KILL_AFTER_SECONDS), str(seconds)] if self.timeout else []) + argv
        self.commands.append(command)
        rc, stdout, stderr = self._run(command)
        return rc, stdout, stderr, rc in (124, 137)

    def find(self, wanted):
        """A bare name is looked up with ``which``; a path is taken as it is when it is an executable file."""
        if os.path.basename(wanted) == wanted:
            return self.which(wanted)
        return wanted if os.path.isfile(wanted) and os.access(wanted, os.X_OK) else None


def read_live_outputs(runner, expected, checks, options):
    """Run what the checks need; return ``(outputs, reason_unknown, problems)``.

    ``problems`` maps a check to why its output could not be read (a kernel log file that is missing).
    """
    nvidia_smi = runner.find(options["nvidia_smi"])
    seconds = options["command_timeout"]
    if nvidia_smi is None:
        return {}, f"{options['nvidia_smi']} was not found, so the GPUs cannot be read.", {}
    rc, stdout, stderr, timed_out = runner.run([nvidia_smi, "-q", "-x"], seconds)
    if timed_out:
        return {}, f"nvidia-smi did not answer within {seconds} seconds.", {}
    lowered = (stdout + stderr).lower()
    if rc != 0 or "<nvidia_smi_log" not in stdout:
        known = next((message for message in _DRIVER_UNUSABLE if message in lowered), None)
        first = next((line.strip() for line in (stderr + "\n" + stdout).splitlines() if line.strip()), "no output")
        return {}, f"nvidia-smi -q -x failed with exit code {rc}: {known or first.rstrip('.')}.", {}
    outputs = {"nvidia_smi_q_xml": stdout}
    problems = {}
    if "nvlink" in checks and expected["nvlinks_per_gpu"]:
        rc, stdout, dummy, timed_out = runner.run([nvidia_smi, "nvlink", "-s"], seconds)
        if rc == 0 and not timed_out:
            outputs["nvlink_status"] = stdout
        else:
            problems["nvlink"] = ("nvidia-smi nvlink -s did not answer within {seconds} seconds." if timed_out
                                  else f"nvidia-smi nvlink -s failed with exit code {rc}.").format(seconds=seconds)
    if "xid" in checks:
        if options.get("kernel_log_file"):
            text, problem = read_kernel_log_file(options["kernel_log_file"], options.get("kernel_log_since"),
                                                 boot=options.get("boot_time"))
        else:
            text = read_kernel_log(runner, options)
            problem = None if text is not None else "Neither journalctl -k nor dmesg could be read."
        if problem:
            problems["xid"] = problem
        else:
            outputs["kernel_log"] = text
    if "dcgm_diag" in checks:
        dcgmi = runner.which("dcgmi")
        if dcgmi:
            level = options["dcgm_diag_level"]
            limit = options["dcgm_diag_timeout"] or DCGM_DIAG_TIMEOUTS[level]
            rc, stdout, stderr, timed_out = runner.run([dcgmi, "diag", "-r", str(level), "-j"], limit)
            # dcgmi exits non-zero when a test fails; its JSON still says which.
            outputs["dcgm_diag_json"] = stdout if "{" in stdout else ""
    return outputs, None, problems


def read_kernel_log(runner, options):
    """The kernel log since kernel_log_since (default the current boot): journalctl, or dmesg without a journal.

    None when neither could be read; an empty string when the log has no message.
    """
    seconds = options["command_timeout"]
    journalctl = runner.which("journalctl")
    if journalctl:
        argv = [journalctl, "-k", "-o", "short-iso", "--no-pager"]
        if options["kernel_log_since"]:
            argv += ["--since", options["kernel_log_since"]]
        rc, stdout, dummy, timed_out = runner.run(argv, seconds)
        if rc == 0 and not timed_out and "-- No entries --" not in stdout:
            return stdout
    dmesg = runner.which("dmesg")
    if dmesg:
        rc, stdout, dummy, timed_out = runner.run([dmesg, "--time-format", "iso"], seconds)
        if rc == 0 and not timed_out:
            return stdout
    return None


def check_node(run, which, expected, checks, options, xid_actions=None):
    """Read the node live and judge it; the judge's result plus ``commands`` (each an argv list).

    ``expected`` as resolve_expected() returns it, ``options`` LIVE_OPTIONS' keys (``boot_time`` optional: the boot time
    a kernel log file's ``dmesg`` uptime stamps count from). A check whose output could not be read is skipped with the
    reason why.
    """
    options = dict(LIVE_OPTIONS, **options)
    runner = Runner(run, which)
    outputs, reason, problems = read_live_outputs(runner, expected, checks, options)
    if reason:
        return dict(unknown(reason, [{"check": check, "reason": reason} for check in checks]), commands=runner.commands)
    result = judge(expected, checks, outputs, xid_actions or {})
    for skipped in result["skipped_checks"]:
        if skipped["check"] in problems:
            skipped["reason"] = problems[skipped["check"]]
    return dict(result, commands=runner.commands)
