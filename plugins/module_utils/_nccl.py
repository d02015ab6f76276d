# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Read what an nccl-tests ``*_perf`` binary printed, judge the run, and build the command that runs it.

Plain Python without Ansible imports: it runs on managed nodes (Python 3.8+) and is unit-tested directly.
Every nccl-tests release from 2.0 to 2.20 is read the same way: launcher prefixes (``srun -l``, OpenMPI
``--tag-output``) are removed, the columns of the results table are located from its header line, and any
line that is neither header, row, device line nor footer (NCCL log lines, ssh and UCX chatter) is skipped.
The ``-J`` JSON file (nccl-tests 2.17.3+) is read into the same result.
"""

from __future__ import annotations

import json
import math
import re

HALVES = ("out_of_place", "in_place")
# No GPU interconnect carries 10 TB/s per GPU (NVLink 5 is 1.8 TB/s in both directions together): a busbw or algbw
# above it, or below 0, is not a measurement but a corrupted or forged output.
PLAUSIBLE_BANDWIDTH_GBS = 10000
# Past its peak an all-reduce sweep stays on a plateau (within 15 % in every recorded real run): a larger message that
# falls under this share of the peak lost its bandwidth (congestion, a flapping link, memory pressure).
PLATEAU_SHARE = 0.7
TRANSPORTS = ("IB", "RoCE", "Socket")

# srun -l prints "0: " (padded to the widest task id); OpenMPI --tag-output prints "[jobid,rank]<stdout>:".
_LAUNCHER_PREFIX = re.compile(r"^(?:\s*\d+: ?|\[\d+,\d+\]<std(?:out|err)>: ?)")
# 2.17.4+; "2.20.0" inserts the git hash: "# nccl-tests version 2.20.0 (b4d5bee) nccl-headers=23102 nccl-library=23102".
_TESTS_VERSION = re.compile(r"^# nccl-tests version (\S+)(?: \(\w+\))? nccl-headers=\d+ nccl-library=(\d+)")
# Bare with NCCL_DEBUG=VERSION or WARN, an INFO line with NCCL_DEBUG=INFO.
_NCCL_VERSION = re.compile(r"(?:^|NCCL INFO )NCCL version (\d+\.\d+\.\d+)")
# Printed once per process: twice means two processes that did not form one MPI job.
_CONFIG = re.compile(r"^#\s*nThread \d+ nGpus \d+ ")
# "#   Rank  0 Pid ..." up to 2.13.3, "#  Rank  0 Group  0 Pid ..." since 2.13.4.
_DEVICE = re.compile(r"^#\s+Rank\s+\d+(?:\s+Group\s+\d+)?\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+")
_OUT_OF_BOUNDS = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)\s*(OK|FAILED)?")
# "OK"/"FAILED" follow only when NCCL_TESTS_MIN_BW is set.
_AVERAGE = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)\s*(OK|FAILED)?")
_USAGE = re.compile(r"^USAGE: (\S+)")

_USING_NETWORK = re.compile(r"NCCL INFO Using network (\S.*?)\s*$")
# "Channel 00/0 : 16[0] -> 0[0] [receive] via NET/IBext_v8/7/GDRDMA"; older NCCL says "Ring 00 : ...".
_CHANNEL_NETWORK = re.compile(r"NCCL INFO .* via NET/([^/]+)/\d+")
_IB_DEVICES = re.compile(r"NCCL INFO NET/IB ?: Using ")
_IB_MISSING = re.compile(r"NET/IB ?: No device found|Failed to open libibverbs")
_SOCKET_DEVICES = re.compile(r"NCCL INFO NET/Socket ?: Using ")
# One " [0]mlx5_0:1/RoCE" per device in the "NET/IB : Using" line.
_LINK_LAYER = re.compile(r"\[\d+\][^\s:]+:\d+/(IB|RoCE)\b")
_NCCL_WARN = re.compile(r"NCCL WARN (.*?)\s*$")
# NVLink SHARP (NVLS), NVIDIA/nccl src/transport/nvls.cc and src/init.cc, both at NCCL_DEBUG_SUBSYS=INIT:
# "NVLS multicast support is [not ]available on dev 0", and "32 coll channels, 32 collnet channels, 16 nvls channels, ..."
# once the graphs are searched (0 nvls channels when NVLS was found unusable after all).
_NVLS_SUPPORT = re.compile(r"NCCL INFO NVLS multicast support is (not )?available on dev \d+")
_NVLS_CHANNELS = re.compile(r"NCCL INFO \d+ coll channels, \d+ collnet channels, (\d+) nvls channels")
# src/graph/tuning.cc at NCCL_DEBUG_SUBSYS=ENV (in NCCL's default subsystems).
_ALGO_SET = re.compile(r"NCCL INFO NCCL_ALGO set by environment to (\S+)")

_TEST_FAILURE = re.compile(r"^(\S+): Test (NCCL|CUDA) failure \S+ '(.*)'\s*$")
_TEST_TIMEOUT = re.compile(r"^(\S+): Test timeout \((\d+)s\)")
_FORCED_NETWORK_MISSING = re.compile(r"NCCL WARN (Failed to initialize any NET plugin|Error: network \S+ not found\.?)")
_RUN_ERRORS = (
    (re.compile(r"^(Invalid number of GPUs: .*?\.)\s*$"), "{0}"),
    (re.compile(r"invalid size specified for '(\w+)'"), "nccl-tests rejected the size given for {0}."),
    (re.compile(r"^# error: (\S.*?)\s*$"), "nccl-tests ended with an NCCL error: {0}."),
    (
        re.compile(r"^mpirun detected that one or more processes exited with non-zero status"),
        "mpirun reports that one or more ranks exited with a non-zero status.",
    ),
    (
        re.compile(r"^mpirun noticed that process rank (\d+) .*exited on signal (\d+) \(([^)]*)\)"),
        "mpirun reports that rank {0} was killed by signal {1} ({2}).",
    ),
    (
        re.compile(r"ORTE was unable to reliably start one or more daemons"),
        "mpirun could not start its daemons on the other hosts: check passwordless ssh and the same OpenMPI on each.",
    ),
)

# Columns of the table header, by the names nccl-tests prints.
_ROW_KEYS = ("size", "count", "type", "redop", "root")
_HALF_KEYS = {"time": "time_us", "cputime": "time_us", "algbw": "algbw", "busbw": "busbw", "#wrong": "wrong"}
# Before 2.13 the last column of a half was "error", the largest deviation as a float, not a count of
# wrong elements: it is read past, and "wrong" stays None for those versions.
_KNOWN_COLUMNS = set(_ROW_KEYS) | set(_HALF_KEYS) | {"error"}

_EXIT_MEANINGS = {
    2: "nccl-tests stopped on a CUDA error",
    3: "nccl-tests stopped on an NCCL error",
    4: "a collective did not complete within the -T timeout",
    127: "a command or shared library was not found",
    255: "nccl-tests could not read a size option",
}


def parse(text):
    """Return the result dict for the stdout (or ``-J`` JSON) of one nccl-tests run."""
    if not text.strip():
        return _result(errors=["The output is empty: nccl-tests printed nothing."])
    if text.lstrip().startswith("{"):
        return _parse_json(text)
    return _parse_text([_LAUNCHER_PREFIX.sub("", line, count=1) for line in text.splitlines()])


def judge(
    result, min_busbw=None, min_size=0, expect_transport=None, expect_ranks=None, expect_hosts=None, min_busbw_without_nvls=None, nccl_algo=None
):
    """Return ``verdict`` ('pass' or 'fail'), ``reasons`` (sentences), ``judged_busbw`` and ``judged_min_busbw`` for a parse() result.

    ``judged_busbw`` is the peak busbw over the rows of at least ``min_size`` bytes, the value compared with
    ``judged_min_busbw`` (GB/s); the sweep average is never judged because small messages drag it down.
    ``judged_min_busbw`` is ``min_busbw_without_nvls`` when it is given and NCCL did not use NVLink SHARP
    (nvls_in_use() is False: its log says so, or ``nccl_algo``, the run's NCCL_ALGO, leaves NVLS out of
    all-reduce), else ``min_busbw``: a run that does not say stays held to ``min_busbw``.
    """
    judged_busbw = _peak_busbw(row for row in result["rows"] if row["size"] >= min_size)
    without_nvls = min_busbw_without_nvls is not None and nvls_in_use(result, nccl_algo) is False
    threshold = min_busbw_without_nvls if without_nvls else min_busbw
    reasons = list(result["errors"])
    reasons += _layout_reasons(result, expect_ranks, expect_hosts)
    reasons += _transport_reasons(result, expect_transport)
    reasons += _bandwidth_reasons(result["rows"], judged_busbw, threshold, min_size, without_nvls)
    reasons += _plateau_reasons([row for row in result["rows"] if row["size"] >= min_size], judged_busbw)
    return {"verdict": "fail" if reasons else "pass", "reasons": reasons, "judged_busbw": judged_busbw, "judged_min_busbw": threshold}


def nvls_in_use(result, nccl_algo=None):
    """Return whether all-reduce could use NVLink SHARP in this run: True, False, or None when nothing says.

    False when ``nccl_algo`` (the NCCL_ALGO the run was given) leaves NVLS out of all-reduce, else what
    NCCL's log said (the ``nvls`` of parse()).
    """
    if nccl_algo and not algo_allows_nvls(nccl_algo):
        return False
    return result.get("nvls")


def algo_allows_nvls(algo):
    """Return whether an NCCL_ALGO value lets all-reduce use NVLS, read as NCCL's parseList() reads it.

    "ring,tree" or "^nvls" apply to every collective; a later "allreduce:..." entry replaces them for all-reduce.
    """
    allowed = True
    for index, entry in enumerate(part for part in algo.split(";") if part):
        prefix, separator, names = entry.partition(":")
        if not separator:
            if index:
                continue  # NCCL refuses this value; whichever way, it is not ours to read
            prefix, names = None, entry
        if prefix is not None and prefix.strip().lower() != "allreduce":
            continue
        excluded = names.startswith("^")
        listed = "nvls" in [name.strip().lower() for name in names.lstrip("^").split(",")]
        allowed = listed != excluded
    return allowed


def exit_reasons(rc, timed_out, timeout):
    """Return the sentences that the exit of the benchmark command adds to the reasons."""
    if timed_out:
        return [
            f"The benchmark did not finish within {timeout} seconds and was stopped: a run that hangs after "
            "'# Using devices' usually has a host that cannot reach the others."
        ]
    if rc == 0:
        return []
    meaning = _EXIT_MEANINGS.get(rc)
    return [f"The benchmark exited with code {rc}" + (f": {meaning}." if meaning else ".")]


def benchmark_environment(secret, extra, fabric):
    """Return the environment of a run: ``secret`` < ``extra`` < ``fabric`` (from fabric_variables()) < NCCL_DEBUG=INFO.

    NCCL_DEBUG=INFO is forced because the transport can only be read from NCCL's INFO lines;
    NCCL_DEBUG_SUBSYS=INIT,NET keeps those lines to what names the network unless a caller sets it.
    """
    environment = {"NCCL_DEBUG_SUBSYS": "INIT,NET"}
    environment.update(_as_strings(secret))
    environment.update(_as_strings(extra))
    environment.update(_as_strings(fabric))
    environment["NCCL_DEBUG"] = "INFO"
    return environment


def fabric_variables(ib_hca=None, ib_gid_index=None, ib_tc=None, socket_ifname=None, net=None):
    """Return the NCCL variables that select and tune the network, for the options that are set."""
    variables = {
        "NCCL_IB_HCA": ",".join(ib_hca) if ib_hca else None,
        "NCCL_IB_GID_INDEX": ib_gid_index,
        "NCCL_IB_TC": ib_tc,
        "NCCL_SOCKET_IFNAME": socket_ifname,
        "NCCL_NET": net,
    }
    return {name: value for name, value in variables.items() if value is not None}


def all_reduce_perf_argv(binary, gpus_per_process, min_bytes, max_bytes, step_factor, iters, warmup_iters, check_iters):
    """Return the all_reduce_perf argv; sizes are bytes, which every nccl-tests version reads."""
    flags = (
        ("-b", min_bytes),
        ("-e", max_bytes),
        ("-f", step_factor),
        ("-g", gpus_per_process),
        ("-n", iters),
        ("-w", warmup_iters),
        ("-c", check_iters),
    )
    return [binary] + [text for flag, value in flags for text in (flag, str(value))]


def mpirun_argv(mpirun, hosts, slots, variable_names, extra_args=(), as_root=False, tcp_include=()):
    """Return the OpenMPI argv that starts one rank per GPU on every host.

    ``-x NAME`` without a value forwards the variable from mpirun's environment, so values (secrets
    included) never appear on a command line; ``--bind-to none`` because OpenMPI's default core binding
    slows NCCL down (NVIDIA/nccl#644). ``tcp_include`` (interface names or CIDR subnets) pins OpenMPI's own
    TCP traffic, its out-of-band channel to the orted daemons and its TCP BTL, to those networks
    (``oob_tcp_if_include``, ``btl_tcp_if_include``): otherwise OpenMPI tries every interface, the RDMA
    rails' and container bridges' included, and a job can hang on one that does not route.
    """
    argv = [mpirun] + (["--allow-run-as-root"] if as_root else [])
    argv += ["-np", str(len(hosts) * slots), "-H", ",".join(f"{host}:{slots}" for host in hosts), "--bind-to", "none"]
    if tcp_include:
        networks = ",".join(tcp_include)
        argv += ["--mca", "oob_tcp_if_include", networks, "--mca", "btl_tcp_if_include", networks]
    for name in sorted(variable_names):
        argv += ["-x", name]
    return argv + list(extra_args)


def _result(**found):
    result = {
        "rows": [],
        "avg_busbw": None,
        "peak_busbw": None,
        "out_of_bounds": None,
        "ranks": 0,
        "hosts": [],
        "nccl_tests_version": None,
        "nccl_version": None,
        "transport": None,
        "link_layers": [],
        "nccl_warnings": [],
        "nvls": None,
        "errors": [],
        "usage_text": False,
    }
    result.update(found)
    return result


def _parse_text(lines):
    rows, headers_seen = _read_table(lines)
    out_of_bounds, out_of_bounds_failed = _read_out_of_bounds(lines)
    average, average_verdict = _read_average(lines)
    tests_version, library_code = _first_groups(_TESTS_VERSION, lines, (None, None))
    device_hosts = [match.group(1) for match in _matches(_DEVICE, lines)]
    result = _result(
        rows=rows,
        avg_busbw=average,
        peak_busbw=_peak_busbw(rows),
        out_of_bounds=out_of_bounds,
        ranks=len(device_hosts),
        hosts=_unique(device_hosts),
        nccl_tests_version=tests_version,
        nccl_version=_first_groups(_NCCL_VERSION, lines, (_version_from_code(library_code),))[0],
        transport=_transport(lines),
        link_layers=sorted(_unique(layer for line in lines if _IB_DEVICES.search(line) for layer in _LINK_LAYER.findall(line))),
        nccl_warnings=_unique(match.group(1) for match in _matches(_NCCL_WARN, lines)),
        nvls=_nvls(lines),
        usage_text=any(_USAGE.search(line) for line in lines),
    )
    footer_seen = out_of_bounds is not None or average is not None
    result["errors"] = (
        _launch_errors(lines, result["usage_text"])
        + _completion_errors(rows, headers_seen, footer_seen, result["usage_text"])
        + _data_errors(result, out_of_bounds_failed)
        + _repetition_errors(lines)
        + _min_bw_errors(average, average_verdict)
    )
    return result


def _read_table(lines):
    """Return the rows under every table header, and how many headers there were."""
    layout = None
    headers_seen = 0
    rows = []
    for line in lines:
        if line.startswith("#"):
            found = _table_layout(line)
            if found is not None:
                layout = found
                headers_seen += 1
        elif layout is not None:
            row = _table_row(layout, line.split())
            if row is not None:
                rows.append(row)
    return rows, headers_seen


def _table_layout(line):
    """Return where each value sits in a row, from the column-name line of a table header; None for other lines.

    The names before the first ``time`` describe the message; from each ``time`` (or ``cputime`` with -C)
    on, the names describe one half, out-of-place first. Columns nccl-tests adds later (``root`` in 2.13,
    the per-iteration ``i_*`` columns of -I in 2.19.2) are found or skipped by name.
    """
    names = line.lstrip("#").split()
    starts = [index for index, name in enumerate(names) if name in ("time", "cputime")]
    if len(starts) != len(HALVES) or not {"size", "count"} <= set(names[: starts[0]]):
        return None
    row = {name: index for index, name in enumerate(names[: starts[0]]) if name in _ROW_KEYS}
    halves = {}
    for half, start, end in zip(HALVES, starts, starts[1:] + [len(names)]):
        halves[half] = {_HALF_KEYS[name]: index for index, name in enumerate(names[start:end], start) if name in _HALF_KEYS}
        if not {"algbw", "busbw"} <= set(halves[half]):
            return None
    width = 1 + max(index for index, name in enumerate(names) if name in _KNOWN_COLUMNS)
    return {"row": row, "halves": halves, "width": width}


def _table_row(layout, cells):
    """Return the row dict for the cells of one line, or None when the line is not a complete row."""
    if len(cells) < layout["width"]:
        return None
    where = layout["row"]
    try:
        row = {
            "size": int(cells[where["size"]]),
            "count": int(cells[where["count"]]),
            "type": cells[where["type"]] if "type" in where else None,
            "redop": cells[where["redop"]] if "redop" in where else None,
            "root": int(cells[where["root"]]) if "root" in where else None,
        }
        for half, columns in layout["halves"].items():
            row[half] = {
                "time_us": _number(cells[columns["time_us"]]),
                "algbw": _number(cells[columns["algbw"]]),
                "busbw": _number(cells[columns["busbw"]]),
                "wrong": _count(cells[columns["wrong"]]) if "wrong" in columns else None,
            }
    except ValueError:
        return None
    return row


def _number(cell):
    """Return the float in a cell, None for N/A (-c 0) and for nan or inf."""
    if cell == "N/A":
        return None
    value = float(cell)
    return value if math.isfinite(value) else None


def _count(cell):
    # "%g" prints large counts as 1.04858e+06.
    value = _number(cell)
    return None if value is None else int(value)


def _read_out_of_bounds(lines):
    """Return the count of failed checks summed over every footer, and whether any footer said FAILED."""
    matches = list(_matches(_OUT_OF_BOUNDS, lines))
    if not matches:
        return None, False
    return sum(int(match.group(1)) for match in matches), any(match.group(2) == "FAILED" for match in matches)


def _read_average(lines):
    """Return the last 'Avg bus bandwidth' value (None when absent or not a number) and its OK/FAILED word."""
    matches = list(_matches(_AVERAGE, lines))
    if not matches:
        return None, None
    try:
        value = _number(matches[-1].group(1))
    except ValueError:
        value = None
    return value, matches[-1].group(2)


def _transport(lines):
    """Return the network NCCL used, as it names it ('IB', 'Socket', 'IBext_v8'...); 'Socket' if any rank fell back.

    'Using network X' and the 'via NET/X/' channel lines are decisive; without them (older NCCL, filtered
    logs) the device lines of the IB and Socket transports decide.
    """
    named = []
    for line in lines:
        match = _USING_NETWORK.search(line) or _CHANNEL_NETWORK.search(line)
        if match:
            named.append(match.group(1))
    if named:
        return "Socket" if "Socket" in named else named[0]
    socket_used = any(_SOCKET_DEVICES.search(line) for line in lines)
    if socket_used and any(_IB_MISSING.search(line) for line in lines):
        return "Socket"
    if any(_IB_DEVICES.search(line) for line in lines):
        return "IB"
    return "Socket" if socket_used else None


def _nvls(lines):
    """Return whether all-reduce could use NVLink SHARP as NCCL logged it: None when no line says.

    False when any rank found no multicast support or no NVLS channel, or NCCL_ALGO (as NCCL echoes it)
    leaves NVLS out of all-reduce.
    """
    said = [match.group(1) is None for match in _matches(_NVLS_SUPPORT, lines)]
    said += [int(match.group(1)) > 0 for match in _matches(_NVLS_CHANNELS, lines)]
    said += [algo_allows_nvls(match.group(1)) for match in _matches(_ALGO_SET, lines)]
    return all(said) if said else None


def _launch_errors(lines, usage_text):
    """Return sentences for a run that did not start or did not finish: usage text, test and launcher failures."""
    errors = []
    if usage_text:
        program = _first_groups(_USAGE, lines, ("nccl-tests",))[0]
        errors.append(f"{program} printed its usage text instead of running: this build does not understand one of the options it was given.")
    errors += _test_failures(lines)
    errors += [f"A collective did not complete within the -T timeout of {match.group(2)} s on {match.group(1)}." for match in _matches(_TEST_TIMEOUT, lines)]
    forced = _first_groups(_FORCED_NETWORK_MISSING, lines, (None,))[0]
    if forced:
        errors.append(f"NCCL could not start the network that NCCL_NET asks for ('{forced}'): RDMA devices are missing or unusable on at least one host.")
    for pattern, sentence in _RUN_ERRORS:
        errors += _unique(sentence.format(*match.groups()) for match in _matches(pattern, lines))
    return errors


def _test_failures(lines):
    """Return one sentence per distinct NCCL/CUDA failure, naming the hosts that hit it."""
    hosts_by_failure = {}
    for match in _matches(_TEST_FAILURE, lines):
        host, kind, quoted = match.groups()
        # "<error string> / <ncclGetLastError()>" since NCCL 2.13; the second part is often empty.
        text = " - ".join(part.strip() for part in quoted.split(" / ", 1) if part.strip())
        hosts = hosts_by_failure.setdefault((kind, text), [])
        if host not in hosts:
            hosts.append(host)
    return [f"{kind} failed on {', '.join(hosts)}: {text}." for (kind, text), hosts in hosts_by_failure.items()]


def _completion_errors(rows, headers_seen, footer_seen, usage_text):
    """Return a sentence when the table is missing, empty or cut off before its footer."""
    if usage_text:
        return []  # the usage sentence already explains why there is no table
    if not headers_seen:
        return ["The output holds no results table, so the benchmark did not run to its first measurement."]
    if not footer_seen:
        where = f"after the {_size_text(rows[-1]['size'])} row" if rows else "after the table header"
        return [f"The run stopped {where}, before its footer: it was cut short or crashed."]
    if not rows:
        return ["The results table has no rows."]
    return []


def _data_errors(result, out_of_bounds_failed):
    """Return sentences for corrupted data and for a run whose busbw is 0 because only one rank took part."""
    errors = []
    wrong_rows = [row for row in result["rows"] if any((row[half]["wrong"] or 0) > 0 for half in HALVES)]
    if wrong_rows:
        errors.append(
            f"{len(wrong_rows)} of {len(result['rows'])} rows report wrong results (#wrong above 0), the first at "
            f"{_size_text(wrong_rows[0]['size'])}: the all-reduce returned corrupted data."
        )
    implausible = [
        (row, half, kind)
        for row in result["rows"]
        for half in HALVES
        for kind in ("busbw", "algbw")
        if row[half][kind] is not None and not 0 <= row[half][kind] <= PLAUSIBLE_BANDWIDTH_GBS
    ]
    if implausible:
        row, half, kind = implausible[0]
        errors.append(
            f"{len(implausible)} bandwidth values are outside 0 to {PLAUSIBLE_BANDWIDTH_GBS} GB/s, the first the {kind} of "
            f"{_number_text(row[half][kind])} GB/s at {_size_text(row['size'])} ({half.replace('_', '-')}): the output is not a measurement."
        )
    if out_of_bounds_failed or (result["out_of_bounds"] or 0) > 0:
        errors.append(f"nccl-tests counted {result['out_of_bounds']} out-of-bounds values (FAILED): its correctness checks found corrupted data.")
    # Without device lines (an excerpt) a single rank shows as a zero average over rows that are all zero.
    if result["ranks"] == 1 or (result["ranks"] == 0 and result["avg_busbw"] == 0 and result["peak_busbw"] == 0):
        errors.append(
            "busbw is 0 because only one rank took part (busbw = algbw x 2(n-1)/n): run one rank per GPU "
            "on several GPUs, with an nccl-tests built with MPI=1 under mpirun across hosts."
        )
    return errors


def _repetition_errors(lines):
    runs = len(list(_matches(_CONFIG, lines)))
    if runs < 2:
        return []
    return [
        f"The output holds {runs} runs that each printed their own header: this nccl-tests was not built with MPI=1, "
        "so every process under mpirun ran alone."
    ]


def _min_bw_errors(average, average_verdict):
    if average_verdict != "FAILED":
        return []
    return [f"nccl-tests marked the average busbw of {_number_text(average)} GB/s FAILED: it is below 0.9 x NCCL_TESTS_MIN_BW."]


def _parse_json(text):
    """Return the result for a ``-J`` file: the same keys as for text; its ``env`` is never copied."""
    try:
        document = json.loads(text)
    except ValueError as error:
        return _result(errors=[f"The JSON output is incomplete or malformed ({error}): the run was probably cut short."])
    except RecursionError:
        return _result(errors=["The JSON output nests deeper than Python can read: it is not what nccl-tests writes."])
    try:
        return _json_result(document)
    except (AttributeError, KeyError, TypeError, ValueError):
        return _result(errors=["The JSON output does not have the layout nccl-tests writes (results with size, count and both halves)."])


def _json_result(document):
    devices = document.get("config", {}).get("devices", [])
    rows = [_json_row(entry) for entry in document.get("results", [])]
    # nccl-tests 2.17.3-2.17.8 misspelt both keys "bandwidith".
    average = _first_present(document, "average_bus_bandwidth", "average_bus_bandwidith") or {}
    out_of_bounds = document.get("out_of_bounds", {})
    result = _result(
        rows=rows,
        avg_busbw=_json_number(_first_present(average, "bandwidth", "bandwidith")),
        peak_busbw=_peak_busbw(rows),
        out_of_bounds=out_of_bounds.get("count"),
        ranks=len(devices),
        hosts=_unique(device.get("hostname") for device in devices),
        nccl_version=_version_from_code(document.get("nccl_version")),
    )
    nccl_errors = document.get("errors", [])
    if not isinstance(nccl_errors, list):
        raise TypeError("errors is not a list")
    # Booleans are the strings "true"/"false"; an unchecked average says "unchecked".
    result["errors"] = (
        [f"nccl-tests ended with an NCCL error: {error}." for error in nccl_errors if error]
        + ([] if rows else ["The results table has no rows."])
        + _data_errors(result, out_of_bounds.get("okay") == "false")
        + _min_bw_errors(result["avg_busbw"], "FAILED" if average.get("okay") == "false" else None)
    )
    return result


def _json_row(entry):
    row = {
        "size": entry["size"],
        "count": entry["count"],
        "type": entry.get("type"),
        "redop": entry.get("redop"),
        # Written as the padded text of the table, "    -1".
        "root": int(entry["root"]) if "root" in entry else None,
    }
    for half in HALVES:
        values = entry[half]
        wrong = _json_number(values.get("nwrong"))
        row[half] = {
            "time_us": _json_number(_first_present(values, "time", "cpu_time")),
            "algbw": _json_number(values.get("alg_bw")),
            "busbw": _json_number(values.get("bus_bw")),
            "wrong": None if wrong is None else int(wrong),
        }
    return row


def _json_number(value):
    # NaN is written as the string "nan"; nwrong is null with -c 0.
    if value is None or isinstance(value, str):
        return None
    return value if math.isfinite(value) else None


def _first_present(mapping, *keys):
    for key in keys:
        if key in mapping:
            return mapping[key]
    return None


def _layout_reasons(result, expect_ranks, expect_hosts):
    if not result["ranks"]:
        return []  # no device list: the run stopped before it, which the errors already say
    reasons = []
    if expect_ranks is not None and result["ranks"] != expect_ranks:
        reasons.append(f"The output lists {_count_text(result['ranks'], 'rank')}, not the {expect_ranks} that were started.")
    if expect_hosts is not None and len(result["hosts"]) != expect_hosts:
        hosts = _count_text(len(result["hosts"]), "host")
        reasons.append(f"The ranks ran on {hosts} ({', '.join(result['hosts'])}), not on the {expect_hosts} asked for.")
    return reasons


def _transport_reasons(result, expect_transport):
    """Return why the network NCCL used is not the expected one.

    NCCL's IB transport (and its IBext plugins) is RDMA verbs, named 'IB' over InfiniBand and RoCE alike:
    'IB' accepts either link layer, 'RoCE' also needs every device NCCL listed to be a RoCE port.
    """
    transport = result["transport"]
    if expect_transport is None or transport == expect_transport:
        return []
    if transport is None:
        if result["errors"]:
            return []  # the run failed before NCCL chose a network, or for reasons that matter more
        return [f"NCCL did not log which network it used, so {expect_transport} cannot be confirmed: run with NCCL_DEBUG=INFO."]
    if transport == "Socket":
        return [
            f"NCCL fell back to TCP sockets instead of RDMA over {expect_transport}: check that the RDMA devices are up "
            "on every host (ibv_devinfo), NCCL_IB_HCA, and libibverbs; set NCCL_NET=IB to make this an error at start."
        ]
    if expect_transport == "Socket" or not transport.startswith("IB"):
        return [f"NCCL used the {transport} network where {expect_transport} was expected."]
    if expect_transport == "RoCE" and result["link_layers"] != ["RoCE"]:
        seen = " and ".join(result["link_layers"]) or "no link layer"
        return [f"NCCL's RDMA devices show {seen} where RoCE was expected ('NET/IB : Using ...' lines)."]
    return []


def _bandwidth_reasons(rows, judged_busbw, min_busbw, min_size, without_nvls=False):
    if min_busbw is None or not rows:
        return []
    if judged_busbw is None:
        largest = max(row["size"] for row in rows)
        return [
            f"No row reaches {_size_text(min_size)} (the largest is {_size_text(largest)}), so the bandwidth cannot be judged: "
            "raise the largest message size or lower min_size."
        ]
    if judged_busbw >= min_busbw:
        return []
    at = f" at {_size_text(min_size)} and above" if min_size else ""
    which = " (the threshold without NVLink SHARP, which NCCL did not use)" if without_nvls else ""
    return [f"The peak busbw{at} is {_number_text(judged_busbw)} GB/s, below the required {_number_text(min_busbw)} GB/s{which}."]


def _plateau_reasons(rows, peak):
    """Return why the messages past the peak do not hold it: the peak alone hides a sweep that collapses at its end."""
    if not peak or peak > PLAUSIBLE_BANDWIDTH_GBS:
        return []
    best = [(row["size"], _peak_busbw([row])) for row in rows]
    best = [(size, busbw) for size, busbw in best if busbw is not None]
    peak_at = next(size for size, busbw in best if busbw == peak)
    fallen = [(size, busbw) for size, busbw in best if size > peak_at and busbw < PLATEAU_SHARE * peak]
    if not fallen:
        return []
    size, busbw = min(fallen, key=lambda pair: pair[1])
    return [
        f"The busbw falls from its peak of {_number_text(peak)} GB/s at {_size_text(peak_at)} to {_number_text(busbw)} GB/s at "
        f"{_size_text(size)}, under {PLATEAU_SHARE:.0%} of the peak: the largest messages lose their bandwidth (congestion, a "
        "flapping link or memory pressure)."
    ]


def _peak_busbw(rows):
    values = [row[half]["busbw"] for row in rows for half in HALVES if row[half]["busbw"] is not None]
    return max(values) if values else None


def _version_from_code(code):
    """Return '2.30.4' for NCCL_VERSION_CODE 23004 (2.9+: major*10000 + minor*100 + patch; before: *1000)."""
    if code is None:
        return None
    code = int(code)
    major, rest = divmod(code, 10000) if code >= 10000 else divmod(code, 1000)
    return f"{major}.{rest // 100}.{rest % 100}"


def _size_text(size):
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} bytes"


def _count_text(count, noun):
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _number_text(value):
    return "nan" if value is None else f"{value:g}"


def _matches(pattern, lines):
    for line in lines:
        match = pattern.search(line)
        if match:
            yield match


def _first_groups(pattern, lines, default):
    for match in _matches(pattern, lines):
        return match.groups()
    return default


def _unique(values):
    seen = []
    for value in values:
        if value not in seen:
            seen.append(value)
    return seen


def _as_strings(variables):
    return {name: str(value) for name, value in (variables or {}).items()}
