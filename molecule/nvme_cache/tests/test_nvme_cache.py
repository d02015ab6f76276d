"""What the nvme_cache role must leave on a lab node: its cache mounted by UUID, kubelet bound to it, local-path on
it, the dataset published read-only, and no credential anywhere. Runs after converge and again after the
side effect (refusals, erase, simulated reboot)."""
import base64
import json
from urllib.parse import quote

import pytest

MOUNT = "/raid"
CACHE_DISK = "/dev/nvme0n1"
DATASET = "/raid/datasets/tiny-imagenet@v1"
BUCKET = "/srv/s3/datasets/tiny-imagenet/v1"
SECRET = "lab/secret+key-4f9c2e"


def devno(host, path):
    major, minor = host.check_output(f"stat --dereference --format '%t %T' {path}").split()
    return f"{int(major, 16)}:{int(minor, 16)}"


def test_the_cache_disk_is_mounted_as_xfs(host):
    mount = json.loads(host.check_output(f"findmnt --json --mountpoint {MOUNT} --output MAJ:MIN,FSTYPE,OPTIONS"))["filesystems"][0]
    assert mount["maj:min"] == devno(host, CACHE_DISK)
    assert mount["fstype"] == "xfs"
    assert "noatime" in mount["options"].split(",")
    assert host.check_output(f"blkid -p -s LABEL -o value {CACHE_DISK}") == "nvme_cache"


def test_fstab_mounts_it_by_uuid_with_nofail(host):
    uuid = host.check_output(f"blkid -p -s UUID -o value {CACHE_DISK}")
    lines = [line.split() for line in host.file("/etc/fstab").content_string.splitlines() if line.strip() and not line.startswith("#")]
    assert [line for line in lines if line[1] == MOUNT] == [[f"UUID={uuid}", MOUNT, "xfs", "noatime,nofail,x-systemd.device-timeout=30s", "0", "0"]]


def test_the_filesystem_fills_the_disk(host):
    disk_bytes = int(host.check_output(f"blockdev --getsize64 {CACHE_DISK}"))
    statvfs = host.check_output(f"stat --file-system --format '%S %b' {MOUNT}").split()
    assert disk_bytes == 4 << 30
    # XFS keeps its log and metadata inside; what df sees is most of the disk.
    assert 0.9 * disk_bytes < int(statvfs[0]) * int(statvfs[1]) <= disk_bytes


def test_kubelet_requires_the_mount(host):
    dropin = host.file("/etc/systemd/system/kubelet.service.d/50-onprem-gpu-nvme-cache.conf")
    assert dropin.mode == 0o644
    assert "RequiresMountsFor=/raid" in dropin.content_string.splitlines()
    shown = dict(line.split("=", 1) for line in host.check_output("systemctl show kubelet.service --property=LoadState,RequiresMountsFor,After").splitlines())
    assert shown["LoadState"] == "loaded"
    assert shown["RequiresMountsFor"].split() == [MOUNT]
    # systemd resolved the path to the cache's mount unit. It adds Requires= on top only for a mount unit with a
    # unit file, which on a real server the fstab generator writes; in a container it ignores fstab's device lines.
    assert "raid.mount" in shown["After"].split()


def test_local_path_directory_is_on_the_cache(host):
    directory = host.file("/raid/local-path")
    assert directory.is_directory
    assert directory.mode == 0o711
    assert host.check_output("stat --file-system --format %T /raid/local-path") == "xfs"
    assert host.file(MOUNT).mode == 0o711
    entry = json.loads(host.file("/etc/onprem-gpu/nvme-cache/local-path-node.json").content_string)
    assert entry == {"node": "molecule-nvme-cache", "paths": ["/raid/local-path"]}


def test_dataset_is_published_complete_and_read_only(host):
    marker = json.loads(host.file(f"{DATASET}/.complete").content_string)
    source_files = host.check_output(f"cd {BUCKET} && find . -type f | sort").splitlines()
    published_files = host.check_output(f"cd {DATASET} && find . -type f ! -name .complete | sort").splitlines()
    assert published_files == source_files
    assert marker["files"] == len(source_files)
    assert marker["source"] == "datasets/tiny-imagenet/v1"
    assert host.check_output(f"cd {BUCKET} && find . -type f | sort | xargs sha256sum") == host.check_output(
        f"cd {DATASET} && find . -type f ! -name .complete | sort | xargs sha256sum"
    )
    assert host.check_output(f"find {DATASET} -perm /222 | wc -l") == "0"
    # Nothing half-mirrored is left next to it.
    assert host.check_output("ls -A /raid/datasets") == ".lock\ntiny-imagenet@v1"


@pytest.mark.parametrize("secret", [SECRET, quote(SECRET, safe="")], ids=["as-is", "url-encoded"])
def test_the_secret_key_is_written_nowhere(host, secret):
    # The pattern travels base64-encoded: this very command is logged (journal) and staged (AnsiballZ) on the node.
    encoded = base64.b64encode(secret.encode()).decode()
    found = host.run(f"grep -rlF -- \"$(echo {encoded} | base64 -d)\" /etc /root /raid /var/log /usr/local /tmp /srv")
    assert found.rc == 1, found.stdout
    # mc got the credentials through its environment only, never on its command line.
    assert secret not in host.file("/var/log/mc-stand-in.log").content_string
