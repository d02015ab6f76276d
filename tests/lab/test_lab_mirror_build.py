"""The lab mirror's build (lab/mirror/build.py): the DOCA stand-ins are also published flat, as NVIDIA publishes DOCA
(https://linux.mellanox.com/public/repo/doca/<version>/<distro>/<arch>/, APT suite "./"), and the Kubernetes packages one
flat repository per minor, as pkgs.k8s.io publishes them (core:/stable:/v<minor>/deb/ with Release.key), next to the
existing dists/bookworm layout; APT, given the source the package_source role writes, reads the flat ones."""

import importlib.util
import pathlib
import shutil
import subprocess

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
ROLE = ROOT / "roles" / "rdma"


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Plain Python (no Ansible imports): the text the package_source role writes for every role.
source_text = load("package_source", ROOT / "plugins" / "module_utils" / "_package_source.py").source_text

pytestmark = pytest.mark.skipif(not all(shutil.which(tool) for tool in ("dpkg-deb", "apt-ftparchive", "gpg", "apt-get")),
                                reason="needs dpkg-deb, apt-ftparchive, gpg and apt-get")


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    build = load("lab_mirror_build", ROOT / "lab" / "mirror" / "build.py")
    output = tmp_path_factory.mktemp("mirror")
    try:
        build.build(output)
        yield output / "published" / "repo"
    finally:
        # Signing started a gpg-agent for the mirror's keyring in the temporary directory: it would outlive the tests.
        subprocess.run(["gpgconf", "--homedir", str(output / "gnupg"), "--kill", "gpg-agent"], capture_output=True, check=False)


def test_the_doca_stand_ins_are_published_flat_beside_the_suite_layout(repo):
    flat = repo / "doca" / "3.2.0" / "debian12" / "x86_64"
    files = sorted(line.split(": ", 1)[1] for line in (flat / "Packages").read_text().splitlines() if line.startswith("Filename: "))
    assert [name.split("_")[0] for name in files] == ["./doca-roce", "./ibverbs-utils", "./mlnx-ofed-kernel-utils", "./mlnx-tools"]
    for name in files:
        assert (flat / name).read_bytes() == next((repo / "pool").rglob(name[2:])).read_bytes()
    assert (flat / "InRelease").is_file() and (flat / "Release.gpg").is_file()
    # The existing layout is still there.
    assert (repo / "dists" / "bookworm" / "InRelease").is_file()
    assert "Package: doca-roce" in (repo / "dists" / "bookworm" / "main" / "binary-amd64" / "Packages").read_text()


def apt_policy(repo, tmp_path, repository, package):
    """apt-cache policy of ``package`` with only ``repository`` as the package_source role writes it, keyed with the lab key."""
    keyring = tmp_path / f"{repository['name']}.asc"
    shutil.copy(repo / "onprem-gpu-lab.asc", keyring)
    sources = tmp_path / "etc" / "sources.list.d"
    sources.mkdir(parents=True)
    (sources / f"{repository['name']}.sources").write_text(source_text("Debian", repository, str(keyring), "bookworm"))
    for directory in ("state/lists/partial", "cache/archives/partial"):
        (tmp_path / directory).mkdir(parents=True)
    apt = ["-o", "Dir::Etc::sourcelist=/dev/null", "-o", "Dir::Etc::sourceparts=%s" % sources, "-o", "Dir::State=%s/state" % tmp_path,
           "-o", "Dir::Cache=%s/cache" % tmp_path, "-o", "Dir::State::status=/dev/null", "-o", "Debug::NoLocking=1",
           # The _apt sandbox user could not read a temporary directory.
           "-o", "APT::Sandbox::User=root"]
    update = subprocess.run(["apt-get"] + apt + ["update"], capture_output=True, text=True, check=False)
    assert update.returncode == 0 and "W:" not in update.stderr and "E:" not in update.stderr, update.stdout + update.stderr
    return subprocess.run(["apt-cache"] + apt + ["policy", package], capture_output=True, text=True, check=False).stdout


def test_the_kubernetes_packages_are_published_one_repository_per_minor_as_pkgs_k8s_io_has_them(repo, tmp_path):
    for minor, version in (("1.35", "1.35.4-1.1"), ("1.36", "1.36.2-1.1")):
        flat = repo / "core:" / "stable:" / f"v{minor}" / "deb"
        files = sorted(line.split(": ", 1)[1] for line in (flat / "Packages").read_text().splitlines() if line.startswith("Filename: "))
        assert [name.split("_")[:2] for name in files] == [[f"./{name}", version] for name in ("kubeadm", "kubectl", "kubelet")]
        assert (flat / "InRelease").is_file() and (flat / "Release.key").read_text().startswith("-----BEGIN PGP PUBLIC KEY BLOCK-----")
    # A source at one minor offers no kubeadm of the next: the upgrade must write the next minor's source first.
    repository = {"name": "kubernetes", "url": "file://%s/core:/stable:/v1.35/deb/" % repo, "suites": ["/"], "components": []}
    policy = apt_policy(repo, tmp_path, repository, "kubeadm")
    assert "Candidate: 1.35.4-1.1" in policy and "1.36.2" not in policy, policy


def test_apt_reads_the_flat_repository_through_the_package_source_and_the_rdma_defaults(repo, tmp_path):
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    # Without onprem_gpu_mirror_url the role's own defaults apply: NVIDIA's flat layout, suite "./" and no components.
    assert defaults["rdma_doca_repo_suites"].endswith("else ['./'] }}") and defaults["rdma_doca_repo_components"].endswith("else [] }}")
    repository = {"name": "doca", "url": "file://%s/doca/3.2.0/debian12/x86_64/" % repo, "suites": ["./"], "components": []}
    assert "Candidate: 3.2.0-125000" in apt_policy(repo, tmp_path, repository, "doca-roce")


def test_the_kubelet_stand_in_ships_the_static_pods_directory_as_the_real_package_does(repo):
    # kubeadm writes its configuration under /etc/kubernetes, which the kubelet package creates (kube_control_plane relies on it).
    deb = next((repo / "pool").rglob("kubelet_1.35.4-1.1_all.deb"))
    listing = subprocess.run(["dpkg-deb", "--contents", str(deb)], capture_output=True, text=True, check=True).stdout
    assert any(line.startswith("drwxr-xr-x") and line.endswith("./etc/kubernetes/manifests/") for line in listing.splitlines()), listing
