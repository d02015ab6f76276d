#!/usr/bin/python
# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_occupancy
short_description: Measure available, allocated, active and idle-allocated GPU-hours from DCGM metrics in Prometheus
version_added: 0.1.0
description:
  - Reads the dcgm-exporter metrics C(DCGM_FI_DEV_FB_USED) and C(DCGM_FI_PROF_SM_ACTIVE) from Prometheus over a window and
    counts, per sample step and per GPU series, whether the GPU was available (it has a sample of either), allocated
    (dcgm-exporter attributes it to a pod), active (allocated and C(SM_ACTIVE) above O(sm_active_threshold)) or
    idle-allocated (allocated and not active). GPU-hours are steps times the step; occupancy is active over available.
  - A series is attributed to a pod when it carries C(exported_pod), or a C(pod) other than the scrape target's own (the
    C(pod) of the C(up) series of its C(instance)); framebuffer use is not allocation, a free MIG instance uses some.
  - GPU series are keyed by their C(hostname) (C(Hostname) up to dcgm-exporter 4.5.3-4.8.2) and C(UUID) (or C(gpu) index) labels. MIG instances (series with
    C(GPU_I_PROFILE) and C(GPU_I_ID)) count with the weight of their compute slices, C(3g.40gb) on an H100 being 3/7 of
    the GPU; an A30 has 4 compute slices. A whole-GPU series of a MIG GPU counts only in steps without instance series.
  - Prometheus does the per-step work with subqueries; the module sends a fixed number of queries (eleven) whatever the
    window and the number of GPUs, and receives one number per series and per chart bucket.
  - A step without a sample is unknown, never idle. Nodes of O(expected_nodes) without series, GPUs missing from a node,
    gaps in a GPU's series and GPUs without C(SM_ACTIVE) are listed in RV(unknown).
  - The module only reads. Prometheus unreachable, credentials refused, a query Prometheus rejects, an answer over
    O(max_response_mib), a sample that is not a finite number of at least 0, answers that disagree (more active than
    available hours) and a window without any sample fail the task with one sentence.
author:
  - onprem.gpu maintainers (@onprem-gpu)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: The module only reads from Prometheus; it runs the same way in check mode.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  prometheus_url:
    description:
      - The base URL of the Prometheus server (or of a Prometheus-compatible API such as Thanos Query), without C(/api/v1).
    type: str
    required: true
  start:
    description:
      - The start of the window, RFC 3339 (C(2026-10-01T00:00:00Z)) or Unix seconds.
      - Moved up to a whole multiple of O(step); the window measured is returned in RV(window).
      - Default 30 days before O(end).
    type: str
  end:
    description:
      - The end of the window, RFC 3339 or Unix seconds. Moved down to a whole multiple of O(step). Default now.
    type: str
  step:
    description:
      - The sample step, a Prometheus duration. Each step counts when it holds at least one sample.
      - It must not be shorter than the scrape interval of dcgm-exporter, or steps between scrapes count as unknown.
    type: str
    default: 1m
  sm_active_threshold:
    description:
      - A step is active when C(DCGM_FI_PROF_SM_ACTIVE) (the ratio of cycles an SM has at least one warp assigned)
        is above this value.
    type: float
    default: 0.15
  selector:
    description:
      - Extra PromQL label matchers every query adds, for a Prometheus that holds several clusters, for example C(cluster="dc1").
    type: str
    default: ""
  expected_nodes:
    description:
      - The GPU nodes the inventory declares, each mapped to its GPU count. Nodes without series and GPUs missing from
        them are reported in RV(unknown). Names must equal the C(Hostname) label dcgm-exporter sets (the Kubernetes node name).
    type: dict
    default: {}
  bearer_token:
    description: A bearer token sent in the C(Authorization) header.
    type: str
  ca_path:
    description: A PEM file of the certificate authorities that sign the server's certificate.
    type: path
  client_cert:
    description: A PEM client certificate for mutual TLS.
    type: path
  client_key:
    description: The PEM private key of O(client_cert).
    type: path
  validate_certs:
    description: Whether to verify the server's TLS certificate.
    type: bool
    default: true
  timeout:
    description: Seconds each query may take.
    type: int
    default: 120
  replica_labels:
    description:
      - Labels that tell the members of an HA Prometheus pair apart (seen through Thanos Query without deduplication, or a
        federation). Every series is taken once, whatever their values; an empty list turns this off.
    type: list
    elements: str
    default: [prometheus_replica, replica]
  max_response_mib:
    description: The largest answer, in MiB, read for one query; a larger one fails the task rather than filling the memory.
    type: int
    default: 256
notes:
  - "The metric and label names are those of NVIDIA's dcgm-exporter (https://github.com/NVIDIA/dcgm-exporter).
    C(DCGM_FI_PROF_SM_ACTIVE) is a profiling metric that its default counters list leaves commented out: enable it."
  - Scraped through a ServiceMonitor with C(honorLabels) true (what C(cluster_addons) renders), the workload's C(namespace)
    and C(pod) replace the exporter's own; with C(honorLabels) false they become C(exported_namespace) and C(exported_pod),
    which then win. Series of free GPUs count under the namespace V("").
seealso:
  - name: GPU occupancy and cost
    description: The definitions, the cost model and the report playbook (docs/gpu-occupancy.md in this collection).
    link: https://github.com/NVIDIA/dcgm-exporter
  - name: Prometheus HTTP API
    description: The query and query_range endpoints the module uses.
    link: https://prometheus.io/docs/prometheus/latest/querying/api/
"""

EXAMPLES = r"""
- name: Measure October in dc1
  onprem.gpu.gpu_occupancy:
    prometheus_url: https://prometheus.dc1.example.internal
    start: "2026-10-01T00:00:00Z"
    end: "2026-11-01T00:00:00Z"
    step: 1m
    expected_nodes:
      dc1-h100-01: 8
      dc1-h100-02: 8
    bearer_token: "{{ lookup('ansible.builtin.file', '/etc/onprem-gpu/prometheus.token') }}"
    ca_path: /etc/onprem-gpu/dc1-ca.pem
  register: dc1_occupancy

- name: Say how busy the GPUs were
  ansible.builtin.debug:
    msg: >-
      {{ (dc1_occupancy['total']['occupancy'] * 100) | round(1) }} % of the available GPU-hours were active;
      {{ dc1_occupancy['total']['idle_allocated_gpu_hours'] | round(1) }} GPU-hours were held but idle.

- name: The last 7 days of one cluster in a shared Prometheus, 5-minute steps
  onprem.gpu.gpu_occupancy:
    prometheus_url: http://thanos-query.monitoring.svc:9090
    selector: cluster="dc2"
    start: "{{ '%s' | strftime(now(utc=true).timestamp() - 7 * 86400) }}"
    step: 5m
  register: dc2_week
"""

RETURN = r"""
window:
  description: The window measured, after aligning its ends to the step.
  returned: always
  type: dict
  contains:
    start:
      description: The start (exclusive), RFC 3339 in UTC.
      returned: always
      type: str
      sample: "2026-10-01T00:00:00Z"
    end:
      description: The end (inclusive), RFC 3339 in UTC.
      returned: always
      type: str
      sample: "2026-10-31T00:00:00Z"
    step_seconds:
      description: The step in seconds.
      returned: always
      type: int
      sample: 60
    steps:
      description: The number of steps.
      returned: always
      type: int
      sample: 43200
    hours:
      description: The length of the window in hours.
      returned: always
      type: float
      sample: 720.0
total:
  description: The GPU-hours of all series.
  returned: always
  type: dict
  contains:
    available_gpu_hours:
      description: GPU-hours the GPUs had samples (MIG-weighted for namespaces).
      returned: always
      type: float
      sample: 720.0
    allocated_gpu_hours:
      description: GPU-hours a pod held, MIG-weighted.
      returned: always
      type: float
      sample: 720.0
    active_gpu_hours:
      description: Allocated GPU-hours with C(SM_ACTIVE) above the threshold, MIG-weighted.
      returned: always
      type: float
      sample: 720.0
    idle_allocated_gpu_hours:
      description: Allocated GPU-hours with C(SM_ACTIVE) at or below the threshold, MIG-weighted.
      returned: always
      type: float
      sample: 720.0
    occupancy:
      description: Active over available GPU-hours; V(null) without available hours.
      returned: always
      type: float
      sample: 0.502781
    unknown_gpu_hours:
      description: GPU-hours of expected GPUs without samples (see RV(unknown)).
      returned: always
      type: float
      sample: 48.0
    gpus:
      description: GPUs with series.
      returned: always
      type: int
      sample: 24
nodes:
  description: One entry per C(hostname) (or C(Hostname)) label and per expected node, in name order.
  returned: always
  type: list
  elements: dict
  contains:
    node:
      description: The node (the C(hostname) or C(Hostname) label).
      returned: always
      type: str
      sample: dc1-gpu1
    available_gpu_hours:
      description: GPU-hours the node's GPUs had samples (MIG-weighted for namespaces).
      returned: always
      type: float
      sample: 720.0
    allocated_gpu_hours:
      description: GPU-hours a pod held, MIG-weighted.
      returned: always
      type: float
      sample: 720.0
    active_gpu_hours:
      description: Allocated GPU-hours with C(SM_ACTIVE) above the threshold, MIG-weighted.
      returned: always
      type: float
      sample: 720.0
    idle_allocated_gpu_hours:
      description: Allocated GPU-hours with C(SM_ACTIVE) at or below the threshold, MIG-weighted.
      returned: always
      type: float
      sample: 720.0
    occupancy:
      description: Active over available GPU-hours; V(null) without available hours.
      returned: always
      type: float
      sample: 0.502781
    gpus:
      description: GPUs of the node with series.
      returned: always
      type: int
      sample: 8
    expected_gpus:
      description: The GPU count of O(expected_nodes); V(null) for a node not expected.
      returned: always
      type: int
      sample: 8
    unknown_gpu_hours:
      description: GPU-hours of the node's expected GPUs without samples.
      returned: always
      type: float
      sample: 0.0
namespaces:
  description:
    - One entry per workload namespace (C(exported_namespace), else C(namespace); V("") for series no pod holds), in name order.
    - A namespace's available hours are the (MIG-weighted) hours its series had samples, the time it held GPUs.
  returned: always
  type: list
  elements: dict
  contains:
    namespace:
      description: The namespace.
      returned: always
      type: str
      sample: team-vision
    available_gpu_hours:
      description: GPU-hours the namespace's series had samples (MIG-weighted for namespaces).
      returned: always
      type: float
      sample: 720.0
    allocated_gpu_hours:
      description: GPU-hours a pod held, MIG-weighted.
      returned: always
      type: float
      sample: 720.0
    active_gpu_hours:
      description: Allocated GPU-hours with C(SM_ACTIVE) above the threshold, MIG-weighted.
      returned: always
      type: float
      sample: 720.0
    idle_allocated_gpu_hours:
      description: Allocated GPU-hours with C(SM_ACTIVE) at or below the threshold, MIG-weighted.
      returned: always
      type: float
      sample: 720.0
    occupancy:
      description: Active over available GPU-hours; V(null) without available hours.
      returned: always
      type: float
      sample: 0.502781
idle_allocations:
  description: Allocated but idle GPU-hours per node, GPU (and MIG instance), namespace and pod, the worst first.
  returned: always
  type: list
  elements: dict
  contains:
    node:
      description: The node.
      returned: always
      type: str
      sample: dc2-gpu1
    gpu:
      description: The GPU index (the C(gpu) label).
      returned: always
      type: str
      sample: "7"
    uuid:
      description: The GPU UUID.
      returned: always
      type: str
      sample: GPU-7b537d48-8432-e2ac-997c-02058a7eaab7
    gpu_instance:
      description: The MIG GPU instance id (C(GPU_I_ID)); V(null) for a whole GPU.
      returned: always
      type: str
      sample: "1"
    profile:
      description: The MIG profile (C(GPU_I_PROFILE)); V(null) for a whole GPU.
      returned: always
      type: str
      sample: 3g.40gb
    namespace:
      description: The workload's namespace.
      returned: always
      type: str
      sample: research
    pod:
      description: The workload's pod (C(exported_pod), else C(pod)).
      returned: always
      type: str
      sample: jupyter-anna
    idle_allocated_hours:
      description: Idle-allocated GPU-hours, MIG-weighted.
      returned: always
      type: float
      sample: 288.0
    since:
      description: The start of the first idle step, RFC 3339 in UTC.
      returned: always
      type: str
      sample: "2026-10-03T09:00:00Z"
    until:
      description: The end of the last idle step, RFC 3339 in UTC.
      returned: always
      type: str
      sample: "2026-10-15T09:00:00Z"
unknown:
  description: What has no data, one entry per node or GPU; these hours are neither available nor idle.
  returned: always
  type: list
  elements: dict
  contains:
    node:
      description: The node.
      returned: always
      type: str
      sample: dc2-gpu1
    gpu:
      description: The GPU index; V(null) for a whole node.
      returned: always
      type: str
      sample: "3"
    kind:
      description:
        - V(no_series) (a node without series), V(missing_gpus) (fewer GPUs than expected), V(gap) (steps without samples),
          V(no_sm_active) (no C(SM_ACTIVE) series).
      returned: always
      type: str
      sample: gap
    unknown_gpu_hours:
      description: The GPU-hours without data.
      returned: always
      type: float
      sample: 6.0
    reason:
      description: One sentence on what is missing.
      returned: always
      type: str
      sample: "dc2-gpu1 GPU 3 has no samples for 6 h of the window (exporter down or node absent): counted as unknown, not idle."
timeline:
  description: GPU-hours per chart bucket, at most 240 buckets that divide the window.
  returned: always
  type: dict
  contains:
    bucket_seconds:
      description: The length of a bucket in seconds.
      returned: always
      type: int
      sample: 10800
    total:
      description: The datacenter's points, each with C(time) (the bucket's start) and the four GPU-hours.
      returned: always
      type: list
      elements: dict
      sample: [{time: "2026-10-01T00:00:00Z", available_gpu_hours: 72.0, allocated_gpu_hours: 48.0, active_gpu_hours: 40.0,
                idle_allocated_gpu_hours: 8.0}]
    nodes:
      description: The points per node, by node name.
      returned: always
      type: dict
      sample: {"dc1-gpu1": []}
sm_active_threshold:
  description: The threshold used.
  returned: always
  type: float
  sample: 0.15
queries:
  description: How many queries were sent, the seconds they took, and each query with its time and series count.
  returned: always
  type: dict
  sample: {count: 11, seconds: 3.214, log: [{name: present, query: "count_over_time(...)", seconds: 0.41, series: 40}]}
"""

import json
import socket
from urllib.error import HTTPError, URLError
from urllib.parse import urlencode

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url

from ansible_collections.onprem.gpu.plugins.module_utils._occupancy import OccupancyError, make_window, measure


class PrometheusClient:
    """POSTs form-encoded queries to the Prometheus HTTP API and returns the ``data`` of successful answers."""

    def __init__(self, params):
        self.url = params["prometheus_url"].rstrip("/")
        self.params = params
        self.max_bytes = params["max_response_mib"] * 1024 * 1024

    def __call__(self, path, form):
        headers = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"}
        if self.params["bearer_token"]:
            headers["Authorization"] = "Bearer " + self.params["bearer_token"]
        try:
            response = open_url(
                self.url + path,
                method="POST",
                data=urlencode(form),
                headers=headers,
                validate_certs=self.params["validate_certs"],
                ca_path=self.params["ca_path"],
                client_cert=self.params["client_cert"],
                client_key=self.params["client_key"],
                timeout=self.params["timeout"],
                follow_redirects="safe",
            )
            body = response.read(self.max_bytes + 1)
        except HTTPError as error:
            raise OccupancyError(self._http_error(error))
        except (URLError, socket.timeout, ConnectionError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise OccupancyError(f"Prometheus at {self.url} cannot be reached: {reason}.")
        if len(body) > self.max_bytes:
            raise OccupancyError(
                f"Prometheus at {self.url} answered a query with more than max_response_mib={self.params['max_response_mib']} MiB, "
                "the most allowed: narrow the selector, lengthen the step, or raise max_response_mib.")
        return self._data(body)

    def _http_error(self, error):
        if error.code in (401, 403):
            return (f"Prometheus at {self.url} refused the credentials (HTTP {error.code}): check bearer_token or the "
                    "client certificate.")
        try:
            answer = json.loads(error.read() or b"{}")
        except ValueError:
            answer = {}
        detail = answer.get("error") if isinstance(answer, dict) else None
        if detail:
            return f"Prometheus at {self.url} rejected a query (HTTP {error.code}, {answer.get('errorType', 'error')}): {detail}."
        return f"Prometheus at {self.url} answered HTTP {error.code} {error.reason}: is this the Prometheus base URL?"

    def _data(self, body):
        try:
            answer = json.loads(body)
        except ValueError:
            raise OccupancyError(f"{self.url} did not answer with Prometheus API JSON: is this the Prometheus base URL?")
        if not isinstance(answer, dict) or answer.get("status") != "success":
            detail = answer.get("error") if isinstance(answer, dict) else None
            raise OccupancyError(f"Prometheus at {self.url} could not run a query: {detail or 'no success status'}.")
        return answer.get("data")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            prometheus_url=dict(type="str", required=True),
            start=dict(type="str"),
            end=dict(type="str"),
            step=dict(type="str", default="1m"),
            sm_active_threshold=dict(type="float", default=0.15),
            selector=dict(type="str", default=""),
            expected_nodes=dict(type="dict", default={}),
            bearer_token=dict(type="str", no_log=True),
            ca_path=dict(type="path"),
            client_cert=dict(type="path"),
            client_key=dict(type="path", no_log=False),
            validate_certs=dict(type="bool", default=True),
            timeout=dict(type="int", default=120),
            replica_labels=dict(type="list", elements="str", default=["prometheus_replica", "replica"]),
            max_response_mib=dict(type="int", default=256),
        ),
        required_by={"client_key": "client_cert"},
        supports_check_mode=True,
    )
    params = module.params
    if params["max_response_mib"] < 1:
        module.fail_json(msg=f"max_response_mib must be at least 1 (MiB), not {params['max_response_mib']}.")
    try:
        window = make_window(params["start"], params["end"], params["step"])
        result = measure(
            PrometheusClient(params),
            window,
            threshold=params["sm_active_threshold"],
            selector=params["selector"],
            expected_nodes=params["expected_nodes"],
            replica_labels=params["replica_labels"],
        )
    except OccupancyError as error:
        module.fail_json(msg=str(error))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
