"""The layout read back from the node's nvidia-smi after converge (and after the idempotence run)."""
import collections
import re

import pytest

PROFILES_BY_HOST = {
    "molecule-mig-h100": {"MIG 1g.10gb": 2, "MIG 2g.20gb": 1, "MIG 3g.40gb": 1},
    "molecule-mig-a100": {"MIG 1g.5gb": 2, "MIG 2g.10gb": 1, "MIG 3g.20gb": 1},
}


@pytest.fixture(name="expected_profiles")
def fixture_expected_profiles(host):
    return PROFILES_BY_HOST[host.backend.get_hostname()]


def test_training_gpus_whole_inference_gpus_partitioned(host):
    modes = host.check_output("nvidia-smi --query-gpu=index,mig.mode.current,mig.mode.pending --format=csv,noheader").splitlines()
    assert modes == [f"{index}, Disabled, Disabled" for index in range(4)] + [f"{index}, Enabled, Enabled" for index in range(4, 8)]


def test_each_partitioned_gpu_holds_the_layout(host, expected_profiles):
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
    assert sorted(per_gpu) == [4, 5, 6, 7]
    assert all(per_gpu[index] == collections.Counter(expected_profiles) for index in range(4, 8)), per_gpu


def test_every_gpu_instance_has_a_compute_instance(host):
    instances = host.check_output("nvidia-smi mig -lgi")
    computes = host.check_output("nvidia-smi mig -lci")
    gpu_instance_rows = [line for line in instances.splitlines() if re.match(r"\|\s+\d+\s+MIG ", line)]
    compute_instance_rows = [line for line in computes.splitlines() if re.match(r"\|\s+\d+\s+\d+\s+MIG ", line)]
    assert len(gpu_instance_rows) == 16
    assert len(compute_instance_rows) == 16
