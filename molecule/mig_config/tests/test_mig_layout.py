"""The layout read back from the node's nvidia-smi after converge (and after the idempotence run)."""

import collections
import re

import pytest

# Per host: the GPU count, the partitioned GPUs and the MIG devices on each. The GH200's profile names are those
# its driver lists (the collection has no table for that model).
LAYOUT_BY_HOST = {
    "molecule-mig-h100": (8, [4, 5, 6, 7], {"MIG 1g.10gb": 2, "MIG 2g.20gb": 1, "MIG 3g.40gb": 1}),
    "molecule-mig-a100": (8, [4, 5, 6, 7], {"MIG 1g.5gb": 2, "MIG 2g.10gb": 1, "MIG 3g.20gb": 1}),
    "molecule-mig-gh200": (2, [1], {"MIG 1g.12gb": 2, "MIG 2g.24gb": 1, "MIG 3g.48gb": 1}),
}


@pytest.fixture(name="expected_layout")
def fixture_expected_layout(host):
    return LAYOUT_BY_HOST[host.backend.get_hostname()]


def test_training_gpus_whole_inference_gpus_partitioned(host, expected_layout):
    count, partitioned, dummy = expected_layout
    modes = host.check_output("nvidia-smi --query-gpu=index,mig.mode.current,mig.mode.pending --format=csv,noheader").splitlines()
    assert modes == [f"{index}, {'Enabled, Enabled' if index in partitioned else 'Disabled, Disabled'}" for index in range(count)]


def test_each_partitioned_gpu_holds_the_layout(host, expected_layout):
    dummy, partitioned, expected_profiles = expected_layout
    listing = host.check_output("nvidia-smi -L")
    per_gpu = collections.defaultdict(collections.Counter)
    gpu = None
    for line in listing.splitlines():
        header = re.match(r"GPU (\d+): ", line)
        if header:
            gpu = int(header.group(1))
            continue
        device = re.match(r"\s+(MIG \S+)\s+Device\s+\d+:", line)
        assert device, line
        per_gpu[gpu][device.group(1)] += 1
    assert sorted(per_gpu) == partitioned
    assert all(per_gpu[index] == collections.Counter(expected_profiles) for index in partitioned), per_gpu


def test_every_gpu_instance_has_a_compute_instance(host, expected_layout):
    dummy, partitioned, expected_profiles = expected_layout
    instances = host.check_output("nvidia-smi mig -lgi")
    computes = host.check_output("nvidia-smi mig -lci")
    gpu_instance_rows = [line for line in instances.splitlines() if re.match(r"\|\s+\d+\s+MIG ", line)]
    compute_instance_rows = [line for line in computes.splitlines() if re.match(r"\|\s+\d+\s+\d+\s+MIG ", line)]
    assert len(gpu_instance_rows) == len(compute_instance_rows) == len(partitioned) * sum(expected_profiles.values())
