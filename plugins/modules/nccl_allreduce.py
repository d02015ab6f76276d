#!/usr/bin/python
# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nccl_allreduce
short_description: Run the nccl-tests all-reduce benchmark and judge the GPU fabric
version_added: 0.1.0
description:
  - Runs C(all_reduce_perf) from nccl-tests on this node alone, or across O(hosts) through OpenMPI's C(mpirun)
    with one rank per GPU, and judges what it printed. With O(output_file) it runs nothing and judges the
    output of an earlier run instead, text or C(-J) JSON.
  - The run fails the task, with one sentence in C(msg) and every finding in RV(reasons), when the data was
    corrupted (C(#wrong) above 0, out-of-bounds values), when the binary printed its usage text, when the
    results table is missing or cut off, when nccl-tests, NCCL or C(mpirun) reported an error, when fewer
    ranks or hosts took part than were started, when NCCL used another network than O(expect_transport)
    (for example a silent fall-back to TCP sockets), or when the bandwidth is below O(min_busbw).
  - Bandwidth is judged on the peak bus bandwidth (busbw, GB/s) over the rows of at least O(min_size) bytes, never
    on the C(Avg bus bandwidth) of the sweep, which small messages drag down.
  - The sweep past that peak must hold it; a larger message whose busbw falls under 70% of the peak fails the run
    (real runs stay within 15%), and a busbw or algbw outside 0 to 10000 GB/s is not a measurement.
  - C(NCCL_DEBUG=INFO) is always set, because the network NCCL used can only be read from its log lines.
  - The task never reports a change, as a benchmark only reads the fabric.
author:
  - onprem.gpu maintainers (@onprem-gpu)
requirements:
  - nccl-tests' C(all_reduce_perf) on every host, at the same path; built with C(MPI=1) for runs across O(hosts).
  - For runs across O(hosts), OpenMPI's C(mpirun) on this node and passwordless ssh from it to every host.
  - C(timeout) from GNU coreutils on this node.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details:
      - The benchmark changes nothing on the hosts, so it runs in check mode too and judges the fabric for real.
      - "It does occupy the GPUs and the network while it runs; add C(when: not ansible_check_mode) to the task to skip it."
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  hosts:
    description:
      - The hosts to run across, as C(mpirun) reaches them (names or addresses); each gets O(gpus_per_host) ranks.
      - Empty runs C(all_reduce_perf -g) O(gpus_per_host) on this node alone, without C(mpirun).
      - This node starts C(mpirun); it need not be in the list.
    type: list
    elements: str
    default: []
  gpus_per_host:
    description:
      - GPUs to use on each host. Alone, C(all_reduce_perf) drives them all from one process (C(-g));
        across O(hosts), each is one rank (C(-H host:slots), C(-g 1)).
    type: int
    default: 8
  min_bytes:
    description: The smallest message size (C(-b)), in bytes or with a binary suffix such as V(1G).
    type: bytes
    default: 1G
  max_bytes:
    description: The largest message size (C(-e)), in bytes or with a binary suffix such as V(8G).
    type: bytes
    default: 8G
  step_factor:
    description: The factor between consecutive message sizes (C(-f)).
    type: int
    default: 2
  iters:
    description: Timed iterations per message size (C(-n)).
    type: int
    default: 20
  warmup_iters:
    description: Untimed warm-up iterations (C(-w)).
    type: int
    default: 5
  check_iters:
    description:
      - Iterations whose results are checked for corruption (C(-c)).
      - V(0) makes large runs faster but hides corrupted data; C(wrong) is then V(null) in every row.
    type: int
    default: 1
  timeout:
    description:
      - Seconds the whole run may take; it is then stopped and the task fails saying so.
      - nccl-tests' own C(-T) covers only collectives, not a launch or a bootstrap that hangs, so this is enforced
        with C(timeout) from coreutils.
    type: int
    default: 600
  nccl_ib_hca:
    description:
      - The RDMA devices NCCL may use, set as C(NCCL_IB_HCA) joined with commas, for example V(mlx5_0:1).
      - Entries are prefixes (V(mlx5_1) also matches V(mlx5_10)); start the first with V(=) for exact names or V(^) to exclude.
    type: list
    elements: str
  nccl_ib_gid_index:
    description:
      - The RoCE GID index, set as C(NCCL_IB_GID_INDEX).
      - Since NCCL 2.21 the default picks a RoCEv2 GID by itself; set it only for older NCCL or unusual GID tables.
    type: int
  nccl_ib_tc:
    description: The traffic class of NCCL's RDMA traffic, set as C(NCCL_IB_TC); it must match the switches' lossless class.
    type: int
  nccl_socket_ifname:
    description:
      - The IP interfaces for NCCL's bootstrap and socket transport, set as C(NCCL_SOCKET_IFNAME), for example V(eno1).
      - It does not choose the RDMA devices; O(nccl_ib_hca) does.
    type: str
  nccl_net:
    description:
      - The network NCCL must use, set as C(NCCL_NET). V(IB) turns a silent fall-back to TCP sockets into an error at start.
      - With a network plugin, give the name NCCL logs in C(Using network), for example V(IBext_v8) for the SHARP plugin;
        V(IB) would bypass the plugin.
    type: str
  nccl_env:
    description:
      - Further environment variables for the run whose values may be shown, for example C(NCCL_ALGO) or
        C(NCCL_IB_QPS_PER_CONNECTION); returned in RV(env).
      - The dedicated C(nccl_*) options win over the same names here.
    type: dict
    default: {}
  environment:
    description:
      - Further environment variables whose values must not be shown, such as credentials of a network plugin.
      - Ansible masks each of these values wherever it appears in the result, even inside numbers and the output;
        put values that are not secret in O(nccl_env), or a short value such as V(2) would garble the result.
      - O(nccl_env) and the dedicated C(nccl_*) options win over the same names here.
    type: dict
    default: {}
  all_reduce_perf:
    description:
      - The C(all_reduce_perf) to run, a command name looked up in E(PATH) on this node or an absolute path.
      - Across O(hosts) the path found here is used on every host.
    type: str
    default: all_reduce_perf
  mpirun:
    description: The OpenMPI C(mpirun) that starts a run across O(hosts), a command name looked up in E(PATH) or an absolute path.
    type: str
    default: mpirun
  mpirun_args:
    description:
      - Further C(mpirun) arguments, placed before the benchmark, for example V(--mca plm_rsh_args "-p 2222") as
        separate items.
      - C(--allow-run-as-root) is added by the module when it runs as root.
    type: list
    elements: str
    default: []
  mpirun_tcp_include:
    description:
      - The networks OpenMPI's own TCP traffic may use, interface names (V(eno1)) or CIDR subnets (V(10.20.0.0/24)),
        given to C(mpirun) as C(--mca oob_tcp_if_include) (its channel to the daemons it starts on each host) and
        C(--mca btl_tcp_if_include). Use the management network every host shares.
      - Empty lets OpenMPI try every interface, the RDMA rails and container bridges included, where a launch can
        hang on one that does not route between the hosts.
      - OpenMPI refuses C(btl_tcp_if_exclude) or C(oob_tcp_if_exclude) together with these; leave them out of O(mpirun_args).
    type: list
    elements: str
    default: []
  output_file:
    description:
      - Judge the output an earlier run left in this file on the node (its stdout, or its C(-J) JSON) instead of running.
      - The run options (O(hosts), sizes, iterations, fabric variables) are then ignored, and RV(cmd) is not returned.
    type: path
  min_busbw:
    description:
      - The lowest acceptable peak busbw in GB/s over the rows of at least O(min_size) bytes; unset, bandwidth is not judged.
      - busbw is per rank, not the sum over the fabric. Healthy peaks are around 480 for 8 H100 with NVLink alone,
        230 for 8 A100, 370-480 for two H100 nodes with eight 400G NICs, and about 12 per 100G NIC.
    type: float
  min_busbw_without_nvls:
    description:
      - The lowest acceptable peak busbw in GB/s when all-reduce could not use NVLink SHARP (NVLS), instead of O(min_busbw).
      - NCCL says so at C(NCCL_DEBUG=INFO) (C(NVLS multicast support is not available), C(0 nvls channels)), or
        C(NCCL_ALGO) in O(nccl_env) or O(environment) leaves NVLS out of all-reduce (V(Ring)). A run whose log says
        nothing about NVLS is held to O(min_busbw).
      - 8 H100 or H200 reach about 480 with NVLS and 360-370 with the ring alone; unset, O(min_busbw) applies whatever NCCL used.
    type: float
  min_size:
    description:
      - Only rows of at least this many bytes count for O(min_busbw); small messages measure latency, not bandwidth.
      - The task fails when no row is that large.
    type: bytes
    default: 1G
  expect_transport:
    description:
      - The network NCCL must have used, read from its INFO lines; unset, the network is not judged.
      - V(IB) is NCCL's RDMA transport (C(NET/IB), or an C(IBext) plugin), which NCCL names V(IB) over InfiniBand and RoCE alike.
      - V(RoCE) is that transport with every device NCCL lists being a RoCE port.
      - V(Socket) is plain TCP, for a deliberate baseline without RDMA.
    type: str
    choices: [IB, RoCE, Socket]
notes:
  - Run it with C(run_once) on one node of the group, or per node for single-node checks; across O(hosts) every host
    needs the same nccl-tests and OpenMPI, and C(mpirun) forwards each variable with C(-x NAME), so no value shows on a command line.
  - Two nodes overstate what a larger job sees; ring busbw slowly drops as nodes are added.
seealso:
  - plugin: onprem.gpu.nccl_results
    plugin_type: filter
  - name: nccl-tests performance notes (algbw and busbw)
    description: How nccl-tests computes the bus bandwidth it reports.
    link: https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md
"""

EXAMPLES = r"""
- name: Prove the NVLink fabric of one 8-GPU node, with or without NVLink SHARP
  onprem.gpu.nccl_allreduce:
    gpus_per_host: 8
    min_busbw: 384
    min_busbw_without_nvls: 296

- name: Prove the RoCE fabric between two nodes, failing on any fall-back to TCP
  onprem.gpu.nccl_allreduce:
    hosts: "{{ groups['gpu_nodes'][:2] }}"
    gpus_per_host: 8
    nccl_ib_hca: [mlx5_0, mlx5_1, mlx5_2, mlx5_3, mlx5_4, mlx5_5, mlx5_6, mlx5_7]
    nccl_ib_tc: 106
    nccl_socket_ifname: eno1
    nccl_net: IB
    nccl_env:
      NCCL_ALGO: Ring
    expect_transport: RoCE
    min_busbw: 300
    mpirun_tcp_include: [eno1]
    timeout: 900
  run_once: true
  register: fabric

- name: Show the in-place busbw of each message size
  ansible.builtin.debug:
    msg: "{{ fabric['rows'] | map(attribute='size') | zip(fabric['rows'] | map(attribute='in_place.busbw')) | list }}"
  run_once: true

- name: Judge the output of a run started by Slurm
  onprem.gpu.nccl_allreduce:
    output_file: /scratch/nccl/all_reduce_2x8.out
    expect_transport: IB
    min_busbw: 350
    min_size: 4G
"""

RETURN = r"""
verdict:
  description: V(pass), or V(fail) when RV(reasons) is not empty (the task then fails).
  returned: always
  type: str
  sample: pass
reasons:
  description: One sentence per finding that fails the check.
  returned: always
  type: list
  elements: str
  sample: ["The peak busbw at 1 GiB and above is 149.91 GB/s, below the required 300 GB/s."]
judged_busbw:
  description: The peak busbw in GB/s over the rows of at least O(min_size) bytes, the value compared with RV(judged_min_busbw).
  returned: always
  type: float
  sample: 481.93
judged_min_busbw:
  description:
    - The threshold the run was judged against, O(min_busbw_without_nvls) when NVLS was not used and that option is set,
      else O(min_busbw); V(null) when bandwidth is not judged.
  returned: always
  type: float
  sample: 384.0
nvls:
  description:
    - Whether all-reduce could use NVLink SHARP, as NCCL logged it (multicast support, NVLS channels, an echoed C(NCCL_ALGO));
      V(false) when any rank could not; V(null) when no line says (older NCCL, no INFO lines, or a C(-J) JSON file).
  returned: always
  type: bool
  sample: true
rows:
  description: The rows of the results table, in the order printed.
  returned: always
  type: list
  elements: dict
  contains:
    size:
      description: The message size in bytes.
      type: int
      sample: 8589934592
    count:
      description: The number of elements.
      type: int
      sample: 2147483648
    type:
      description: The data type, for example V(float) or V(bfloat16).
      type: str
      sample: float
    redop:
      description: The reduction, for example V(sum).
      type: str
      sample: sum
    root:
      description: The root rank (V(-1) for all-reduce); V(null) before nccl-tests 2.13, which had no root column.
      type: int
      sample: -1
    out_of_place:
      description: The out-of-place measurement.
      type: dict
      contains:
        time_us:
          description: The time of one operation in microseconds.
          type: float
          sample: 33420.1
        algbw:
          description: The algorithm bandwidth, size divided by time, in GB/s.
          type: float
          sample: 257.03
        busbw:
          description: The bus bandwidth in GB/s, algbw times 2(n-1)/n for n ranks; comparable across rank counts.
          type: float
          sample: 481.93
        wrong:
          description:
            - The number of wrong elements found; V(null) with C(-c 0) and before nccl-tests 2.13, whose C(error)
              column is not a count.
          type: int
          sample: 0
    in_place:
      description: The in-place measurement, with the keys of RV(rows[].out_of_place).
      type: dict
avg_busbw:
  description: The C(Avg bus bandwidth) of the footer as printed (the mean over every row and both halves); V(null) without a footer.
  returned: always
  type: float
  sample: 469.987
peak_busbw:
  description: The highest busbw of any row, in either half; V(null) without rows.
  returned: always
  type: float
  sample: 481.93
out_of_bounds:
  description: The C(Out of bounds values) count of the footer, checks that found corrupted data; V(null) without a footer.
  returned: always
  type: int
  sample: 0
ranks:
  description: The number of ranks listed under C(# Using devices).
  returned: always
  type: int
  sample: 16
hosts:
  description: The host names those ranks ran on, as the hosts report them, in rank order.
  returned: always
  type: list
  elements: str
  sample: [gpu-b01, gpu-b02]
nccl_tests_version:
  description: The nccl-tests version, printed since 2.17.4; V(null) before.
  returned: always
  type: str
  sample: 2.18.3
nccl_version:
  description: The NCCL library version; V(null) when the output does not say.
  returned: always
  type: str
  sample: 2.27.7
transport:
  description:
    - The network NCCL used, as it names it (V(IB) for RDMA over InfiniBand or RoCE, V(Socket) for TCP, or a plugin
      such as V(IBext_v8)); V(Socket) when any rank fell back to it; V(null) when no NCCL INFO line says.
  returned: always
  type: str
  sample: IB
link_layers:
  description: The link layers of the RDMA devices NCCL listed, V(IB) and/or V(RoCE).
  returned: always
  type: list
  elements: str
  sample: [RoCE]
nccl_warnings:
  description: The distinct messages of NCCL WARN lines, which usually explain a failure.
  returned: always
  type: list
  elements: str
  sample: ["NET/IB: Got completion from peer 10.20.1.3<41872> with status=12 opcode=0 len=0 vendor err 129 (Recv)"]
errors:
  description: The problems found in the output itself, also the first entries of RV(reasons).
  returned: always
  type: list
  elements: str
  sample: []
usage_text:
  description: Whether the binary printed its usage text instead of running.
  returned: always
  type: bool
  sample: false
cmd:
  description: The command that ran.
  returned: when the module ran the benchmark
  type: list
  elements: str
  sample: [/usr/bin/timeout, "-k", "30", "600", /usr/bin/all_reduce_perf, "-b", "1073741824", "-e", "8589934592", "-f", "2", "-g", "8",
           "-n", "20", "-w", "5", "-c", "1"]
rc:
  description: The exit code of RV(cmd); nccl-tests uses 2 for CUDA errors and 3 for NCCL errors, C(timeout) 124 when it stopped the run.
  returned: when the module ran the benchmark
  type: int
  sample: 0
stdout:
  description: What the run printed on standard output.
  returned: when the module ran the benchmark
  type: str
stderr:
  description: What the run printed on standard error.
  returned: when the module ran the benchmark
  type: str
env:
  description: The environment variables set for the run; the values of O(environment) show as V(********).
  returned: when the module ran the benchmark
  type: dict
  sample: {NCCL_DEBUG: INFO, NCCL_DEBUG_SUBSYS: "INIT,NET", NCCL_IB_HCA: "mlx5_0,mlx5_1", NCCL_NET: IB}
"""

import os
import time
from collections import namedtuple

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.onprem.gpu.plugins.module_utils._commands import find_command
from ansible_collections.onprem.gpu.plugins.module_utils._nccl import (
    TRANSPORTS,
    all_reduce_perf_argv,
    benchmark_environment,
    exit_reasons,
    fabric_variables,
    judge,
    mpirun_argv,
    parse,
)

ARGUMENT_SPEC = dict(
    hosts=dict(type="list", elements="str", default=[]),
    gpus_per_host=dict(type="int", default=8),
    min_bytes=dict(type="bytes", default="1G"),
    max_bytes=dict(type="bytes", default="8G"),
    step_factor=dict(type="int", default=2),
    iters=dict(type="int", default=20),
    warmup_iters=dict(type="int", default=5),
    check_iters=dict(type="int", default=1),
    timeout=dict(type="int", default=600),
    nccl_ib_hca=dict(type="list", elements="str"),
    nccl_ib_gid_index=dict(type="int"),
    nccl_ib_tc=dict(type="int"),
    nccl_socket_ifname=dict(type="str"),
    nccl_net=dict(type="str"),
    nccl_env=dict(type="dict", default={}),
    environment=dict(type="dict", default={}, no_log=True),
    all_reduce_perf=dict(type="str", default="all_reduce_perf"),
    mpirun=dict(type="str", default="mpirun"),
    mpirun_args=dict(type="list", elements="str", default=[]),
    mpirun_tcp_include=dict(type="list", elements="str", default=[]),
    output_file=dict(type="path"),
    min_busbw=dict(type="float"),
    min_busbw_without_nvls=dict(type="float"),
    min_size=dict(type="bytes", default="1G"),
    expect_transport=dict(type="str", choices=list(TRANSPORTS)),
)

# coreutils' timeout gives a run that ignores SIGTERM this long before it sends SIGKILL.
KILL_AFTER_SECONDS = 30
SECRET_MASK = "********"

# What a run leaves to judge: its output, what to report about it, reasons from its exit, and the ranks and hosts it started.
Benchmark = namedtuple("Benchmark", "output report reasons expectations")


def invalid_run_options(params):
    """Return one sentence per run option that nccl-tests would reject or misread."""
    problems = [f"{name} must be at least 1, not {params[name]}." for name in ("gpus_per_host", "iters", "step_factor", "timeout") if params[name] < 1]
    problems += [f"{name} must not be negative, not {params[name]}." for name in ("warmup_iters", "check_iters") if params[name] < 0]
    if params["min_bytes"] > params["max_bytes"]:
        problems.append(f"min_bytes ({params['min_bytes']}) is larger than max_bytes ({params['max_bytes']}).")
    return problems


def find_binary(module, wanted, what):
    """Return the executable for a command name (looked up in PATH) or an absolute path; fail the task without one."""
    found = find_command(module, wanted)
    if found is None:
        module.fail_json(msg=f"{wanted} was not found on this host: install {what}, or give its path.")
    return found


def read_output_file(module):
    path = module.params["output_file"]
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return Benchmark(output=handle.read(), report={}, reasons=[], expectations={})
    except OSError as error:
        module.fail_json(msg=f"Cannot read output_file {path}: {error.strerror}.")


def run_benchmark(module):
    """Run the benchmark and return it as a Benchmark."""
    params = module.params
    problems = invalid_run_options(params)
    if problems:
        module.fail_json(msg=" ".join(problems))
    hosts = params["hosts"]
    fabric = fabric_variables(
        ib_hca=params["nccl_ib_hca"],
        ib_gid_index=params["nccl_ib_gid_index"],
        ib_tc=params["nccl_ib_tc"],
        socket_ifname=params["nccl_socket_ifname"],
        net=params["nccl_net"],
    )
    environment = benchmark_environment(params["environment"], params["nccl_env"], fabric)
    shown_environment = benchmark_environment(dict.fromkeys(params["environment"], SECRET_MASK), params["nccl_env"], fabric)
    argv = benchmark_argv(module, hosts, environment)
    timeout = module.get_bin_path("timeout", required=True)
    cmd = [timeout, "-k", str(KILL_AFTER_SECONDS), str(params["timeout"])] + argv
    started = time.monotonic()
    rc, stdout, stderr = module.run_command(cmd, environ_update=dict(environment, LC_ALL="C"))
    # 124: timeout stopped the run; 137 after it, SIGKILL was needed (137 before it is some other SIGKILL).
    timed_out = rc == 124 or (rc == 137 and time.monotonic() - started >= params["timeout"])
    return Benchmark(
        # nccl-tests prints its own errors on stdout, the loader and the usage complaint of glibc on stderr.
        output=stdout + "\n" + stderr,
        report=dict(cmd=cmd, rc=rc, stdout=stdout, stderr=stderr, env=shown_environment),
        reasons=exit_reasons(rc, timed_out, params["timeout"]),
        expectations=dict(
            expect_ranks=params["gpus_per_host"] * max(1, len(hosts)), expect_hosts=max(1, len(hosts)), nccl_algo=environment.get("NCCL_ALGO")
        ),
    )


def benchmark_argv(module, hosts, environment):
    params = module.params
    binary = find_binary(module, params["all_reduce_perf"], "nccl-tests (all_reduce_perf)")
    sizes = dict(
        min_bytes=params["min_bytes"],
        max_bytes=params["max_bytes"],
        step_factor=params["step_factor"],
        iters=params["iters"],
        warmup_iters=params["warmup_iters"],
        check_iters=params["check_iters"],
    )
    if not hosts:
        return all_reduce_perf_argv(binary, params["gpus_per_host"], **sizes)
    mpirun = find_binary(module, params["mpirun"], "OpenMPI (mpirun)")
    launcher = mpirun_argv(
        mpirun, hosts, params["gpus_per_host"], environment, params["mpirun_args"], as_root=os.geteuid() == 0, tcp_include=params["mpirun_tcp_include"]
    )
    return launcher + all_reduce_perf_argv(binary, 1, **sizes)


def failure_message(reasons):
    more = len(reasons) - 1
    tail = f"; {more} more in reasons" if more else ""
    return f"The all-reduce benchmark failed its check: {reasons[0].rstrip('.')}{tail}."


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, mutually_exclusive=[("output_file", "hosts")], supports_check_mode=True)
    params = module.params
    benchmark = read_output_file(module) if params["output_file"] else run_benchmark(module)
    result = parse(benchmark.output)
    judgement = judge(
        result,
        min_busbw=params["min_busbw"],
        min_busbw_without_nvls=params["min_busbw_without_nvls"],
        min_size=params["min_size"],
        expect_transport=params["expect_transport"],
        **benchmark.expectations,
    )
    reasons = benchmark.reasons + judgement["reasons"]
    report = dict(
        benchmark.report,
        changed=False,
        verdict="fail" if reasons else "pass",
        reasons=reasons,
        judged_busbw=judgement["judged_busbw"],
        judged_min_busbw=judgement["judged_min_busbw"],
    )
    report.update(result)
    if reasons:
        module.fail_json(msg=failure_message(reasons), **report)
    module.exit_json(**report)


if __name__ == "__main__":
    main()
