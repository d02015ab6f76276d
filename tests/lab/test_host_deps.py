"""lab/bin/host-deps.sh, read against a fresh Debian 12's package state rather than this machine's.

This machine has whatever an earlier run installed (iptables, say), so asking host-deps.sh here proves
nothing about a new machine. The lab image is a fresh Debian 12 minimal install: run there, the script
must name everything the lab needs that such a machine lacks, netavark's iptables first of all.
"""

import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
IMAGE = "localhost/onprem-gpu-lab:latest"


def podman(*arguments):
    environment = {**os.environ, "CONTAINERS_CONF": str(ROOT / "lab" / "podman" / "containers.conf")}
    return subprocess.run(["podman", *arguments], env=environment, capture_output=True, text=True, check=False, timeout=120)


def image_available():
    return shutil.which("podman") is not None and podman("image", "exists", IMAGE).returncode == 0


pytestmark = pytest.mark.skipif(not image_available(), reason=f"needs podman and the lab image {IMAGE} (make image)")


def missing_on_a_fresh_system(*extra_podman_arguments):
    result = podman("run", "--rm", "--network=none", "-v", f"{ROOT / 'lab' / 'bin'}:/deps:ro", *extra_podman_arguments,
                    IMAGE, "bash", "/deps/host-deps.sh", "--missing")
    assert result.returncode == 0, result.stderr
    return set(result.stdout.split())


def test_a_fresh_debian_12_is_missing_the_container_network_and_runtime():
    missing = missing_on_a_fresh_system()
    assert {"podman", "runc", "conmon", "netavark", "aardvark-dns", "iptables", "debootstrap", "python3-venv"} <= missing
    # Read from that system's dpkg state: the minimal install has iproute2 and gnupg's absence alike.
    assert "iproute2" not in missing
    assert "gnupg" in missing


def test_ubuntu_22_04_gets_the_cni_plugins_that_its_podman_3_uses(tmp_path):
    os_release = tmp_path / "os-release"
    os_release.write_text('ID=ubuntu\nVERSION_ID="22.04"\n', encoding="utf-8")
    missing = missing_on_a_fresh_system("-v", f"{os_release}:/etc/os-release:ro")
    assert {"containernetworking-plugins", "iptables", "podman"} <= missing
    assert "netavark" not in missing
