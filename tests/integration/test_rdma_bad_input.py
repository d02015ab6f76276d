"""Bad input to the rdma role stops it with one sentence before it changes anything.

Like test_node_base_bad_input.py, these run the role against this machine (connection: local, check mode): the
checks only read the inventory and the host's interfaces, and the play must end at them with nothing changed.
"""
import json
import subprocess

import pytest

from local_play import one_line, run_role_here

RACK = ["gpu-test"] + ["gpu-%02d" % index for index in range(1, 20)]


def run_role(tmp_path, role_vars):
    return run_role_here(tmp_path, "onprem.gpu.rdma", dict({"rdma_address_hosts": RACK[:4]}, **role_vars), "RDMA rails on this machine")


def default_route_interface():
    try:
        routes = json.loads(subprocess.run(["ip", "-j", "route", "show", "default"], capture_output=True, text=True, check=False).stdout or "[]")
    except (OSError, ValueError):
        return None
    return routes[0].get("dev") if routes else None


# One assert lists every problem of the settings and of this host before any change.
PREFLIGHT = "Check the platform, the settings, the rails and this host's place in their subnets"

BAD_INPUTS = [
    pytest.param(
        {"rdma_rails": [{"name": "rail0", "interface": "ens1np0", "subnet": "10.99.0.0/24"},
                        {"name": "rail1", "interface": "ens2np0", "subnet": "10.99.0.0/25"}]},
        PREFLIGHT,
        "Rails rail0 (10.99.0.0/24) and rail1 (10.99.0.0/25) are in the same subnet: each rail needs its own subnet, or the "
        "kernel answers ARP and routes on the wrong NIC and RDMA CM connections fail.",
        id="two-rails-same-subnet",
    ),
    pytest.param(
        {"rdma_address_hosts": RACK, "rdma_rails": [{"name": "rail0", "interface": "ens1np0", "subnet": "10.99.0.0/28"}]},
        PREFLIGHT,
        "Subnet 10.99.0.0/28 of rail rail0 has 5 usable addresses from rdma_address_first (10) on but the rack has 20 hosts "
        "(rdma_address_hosts): use a larger subnet or a lower rdma_address_first.",
        id="subnet-too-small-for-the-rack",
    ),
    pytest.param(
        # gpu-02 is third in rdma_address_hosts (and not even in this inventory): place 2 is taken.
        {"rdma_address_index": 2, "rdma_rails": [{"name": "rail0", "interface": "ens1np0", "subnet": "10.99.0.0/24"}]},
        PREFLIGHT,
        "gpu-test and gpu-02 would get the same rail addresses (place 2 in the rails' subnets): give each host of "
        "rdma_address_hosts its own rdma_address_index.",
        id="two-hosts-same-place",
    ),
    pytest.param(
        {"rdma_address_index": -1, "rdma_rails": [{"name": "rail0", "interface": "ens1np0", "subnet": "10.99.0.0/24"}]},
        PREFLIGHT,
        "rdma_address_index of gpu-test must be 0 or more (got -1).",
        id="negative-place",
    ),
    pytest.param(
        {"rdma_address_index": 9, "rdma_rails": [{"name": "rail0", "interface": "ens1np0", "subnet": "10.99.0.0/28"}]},
        PREFLIGHT,
        "Subnet 10.99.0.0/28 of rail rail0 has 5 usable addresses from rdma_address_first (10) on but gpu-test has "
        "rdma_address_index 9: use a larger subnet, a lower rdma_address_first or a lower index.",
        id="place-beyond-the-subnet",
    ),
    pytest.param(
        {"rdma_rails": [{"name": "rail0", "interface": "ens99np0", "subnet": "10.99.0.0/24"}]},
        PREFLIGHT,
        "gpu-test has no interface ens99np0 (rdma_rails); its interfaces are",
        id="interface-does-not-exist",
    ),
    pytest.param(
        {"rdma_rails": [{"name": "rail0", "pci": "0000:1A:00.0", "subnet": "10.99.0.0/24"}]},
        PREFLIGHT,
        "rdma_rails must list the rails, each with either interface (a netdev name) or pci (a PCI address such as "
        "0000:1a:00.0, lower case) and, for RoCE, subnet as an IPv4 network in CIDR form (10.99.0.0/24).",
        id="pci-address-upper-case",
    ),
    pytest.param(
        {"rdma_driver_stack": "mofed", "rdma_rails": [{"interface": "lo", "subnet": "10.99.0.0/24"}]},
        "Validating arguments against arg spec",
        "value of rdma_driver_stack must be one of: inbox, doca, got: mofed",
        id="unknown-stack",
    ),
]


@pytest.mark.parametrize("role_vars, task, message", BAD_INPUTS)
def test_bad_input_stops_before_any_change(tmp_path, role_vars, task, message):
    result = run_role(tmp_path, role_vars)
    output = one_line(result.stdout)
    assert result.returncode == 2, output
    assert "TASK [onprem.gpu.rdma : %s" % task in output
    assert message in output
    assert "changed=0" in output


def test_the_interface_of_the_ansible_connection_is_refused_without_consent(tmp_path):
    interface = default_route_interface()
    if interface is None:
        pytest.skip("this machine has no default route, so no interface carries a connection")
    rails = [{"name": "rail0", "interface": interface, "subnet": "10.99.0.0/24"}]
    refused = run_role(tmp_path, {"rdma_rails": rails})
    output = one_line(refused.stdout)
    assert refused.returncode == 2, output
    assert "TASK [onprem.gpu.rdma : %s]" % PREFLIGHT in output
    assert ("%s carries the Ansible connection to gpu-test; reconfiguring it can cut this run off the host. Keep management "
            "off the RDMA rails, or set rdma_allow_management_change: true." % interface) in output
    assert "changed=0" in output
    # With consent the check passes and the role goes on (to installing the stack, which check mode only reports).
    allowed = run_role(tmp_path, {"rdma_rails": rails, "rdma_allow_management_change": True})
    assert "carries the Ansible connection to gpu-test" not in one_line(allowed.stdout)
    assert "TASK [onprem.gpu.rdma : Install the RDMA driver stack]" in one_line(allowed.stdout)
