"""Bad site inventory stops site.yml in its preflight play, before any host is contacted, with one sentence (#30).

Each case runs the real site.yml against a copy of the lab inventory with no lab started: the run must fail in the pure
inventory checks, never reach a task that contacts a host, and never show a raw exception.
"""
import pytest

from test_kube_bad_input import REPO, edit_yaml, lab_copy, one_line, run


def group_vars(name, **values):
    return lambda inventory: edit_yaml(inventory / "group_vars" / f"{name}.yml", lambda data: data.update(values))


def host_vars(name, **values):
    def edit(inventory):
        path = inventory / "host_vars" / f"{name}.yml"
        if not path.exists():
            path.write_text("{}\n")
        edit_yaml(path, lambda data: data.update(values))
    return edit


CASES = [
    pytest.param(group_vars("dc2", kube_cluster_name="dc1"),
                 "Datacenters dc1 and dc2 have the same cluster name dc1 (kube_cluster_name, else the datacenter)", id="one-cluster-name-two-datacenters"),
    pytest.param(group_vars("dc2", kube_cluster_name="../dc1"), "kube_cluster_name of datacenter dc2 must be a DNS name", id="cluster-name-a-path"),
    pytest.param(host_vars("dc1-gpu2", kube_node_name="dc1-gpu1"), "dc1-gpu1 and dc1-gpu2 have the same kube_node_name dc1-gpu1", id="duplicate-node-name"),
    pytest.param(lambda inventory: [host_vars(host, rdma_address_index=0, rdma_rails=[{"interface": "ens1", "subnet": "10.99.0.0/24"}])(inventory)
                                    for host in ("dc1-gpu1", "dc1-gpu2")],
                 "dc1-gpu1 and dc1-gpu2 have the same rdma_address_index 0", id="duplicate-rdma-address-index"),
    pytest.param(host_vars("dc1-gpu1", rdma_rails=[{"interface": "ens1", "subnet": "10.99.0.0/24"}, {"interface": "ens2", "subnet": "10.99.0.0/25"}]),
                 "dc1-gpu1: rdma_rails ens1 and ens2 (10.99.0.0/24) are in the same subnet", id="rails-in-one-subnet"),
    pytest.param(host_vars("dc1-gpu1", kube_node_labels={"onprem.gpu/team": "a,node-role.kubernetes.io/control-plane=x"}),
                 "dc1-gpu1: kube_node_labels gives the label onprem.gpu/team the value 'a,node-role.kubernetes.io/control-plane=x', which Kubernetes refuses",
                 id="label-value-injects-labels"),
    pytest.param(host_vars("dc1-gpu1", kube_node_labels=["onprem.gpu/team=a"]),
                 # kube_node's argument spec refuses it before the role's own check (which says it for the filter's other callers).
                 "argument 'kube_node_labels' is of type list and we were unable to convert to dict", id="labels-a-list"),
    pytest.param(host_vars("dc1-gpu1", node_gpu_count="eight"), "dc1-gpu1: node_gpu_count must be a whole number from 1 to 16, not 'eight'.",
                 id="gpu-count-a-word"),
    pytest.param(
        group_vars("dc2", datacenter="dc2\n"), "datacenter (set in the group_vars of its datacenter group) must be a DNS label", id="datacenter-newline"
    ),
    pytest.param(group_vars("all", onprem_gpu_mirror_key_fingerprint=""),
                 "onprem_gpu_mirror_key_url is http://lab-mirror.onprem-gpu.internal:8080/onprem-gpu-lab.asc, a signing key fetched over plain HTTP, "
                 "with no onprem_gpu_mirror_key_fingerprint", id="http-key-unpinned"),
]


@pytest.mark.parametrize("edit, message", CASES)
def test_bad_site_inventory_stops_site_in_its_preflight(tmp_path, edit, message):
    result = run(REPO / "playbooks" / "site.yml", lab_copy(tmp_path, edit))
    output = one_line(result.stdout + result.stderr)
    assert result.returncode != 0
    assert message in output, output[-3000:]
    assert "Traceback" not in output and "has no attribute" not in output and "invalid literal" not in output
    # Nothing contacted a host: the run stopped before the preflight's host check (the first task that gathers facts).
    assert "Read the distribution" not in result.stdout


def test_a_limited_run_is_checked_against_the_rest_of_its_datacenter(tmp_path):
    """site.yml --limit dc1-gpu2 (a node replaced or added): the run's host may not take a Node name or rail addresses that
    another host of its datacenter, outside the run, already has."""
    rails = {"rdma_rails": [{"interface": "ens1", "subnet": "10.99.0.0/24"}]}
    inventory = lab_copy(tmp_path, lambda inventory: [host_vars("dc1-gpu1", rdma_address_index=3, **rails)(inventory),
                                                      host_vars("dc1-gpu2", rdma_address_index=3, **rails)(inventory)])
    result = run(REPO / "playbooks" / "site.yml", inventory, "--limit", "dc1-gpu2")
    output = one_line(result.stdout + result.stderr)
    assert result.returncode != 0
    assert "dc1-gpu1 and dc1-gpu2 have the same rdma_address_index 3" in output, output[-3000:]
    assert "Read the distribution" not in result.stdout
