"""The lab mirror's build (lab/mirror/build.py): the DOCA stand-ins are also published flat, as NVIDIA publishes DOCA
(https://linux.mellanox.com/public/repo/doca/<version>/<distro>/<arch>/, APT suite "./"), next to the existing
dists/bookworm layout; APT, given the source the package_source role writes for the rdma role's defaults, reads the flat one."""

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


def test_apt_reads_the_flat_repository_through_the_package_source_and_the_rdma_defaults(repo, tmp_path):
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    # Without onprem_gpu_mirror_url the role's own defaults apply: NVIDIA's flat layout, suite "./" and no components.
    assert defaults["rdma_doca_repo_suites"].endswith("else ['./'] }}") and defaults["rdma_doca_repo_components"].endswith("else [] }}")
    keyring = tmp_path / "doca.asc"
    shutil.copy(repo / "onprem-gpu-lab.asc", keyring)
    sources = tmp_path / "etc" / "sources.list.d"
    sources.mkdir(parents=True)
    repository = {"name": "doca", "url": "file://%s/doca/3.2.0/debian12/x86_64/" % repo, "suites": ["./"], "components": []}
    (sources / "doca.sources").write_text(source_text("Debian", repository, str(keyring), "bookworm"))
    for directory in ("state/lists/partial", "cache/archives/partial"):
        (tmp_path / directory).mkdir(parents=True)
    apt = ["-o", "Dir::Etc::sourcelist=/dev/null", "-o", "Dir::Etc::sourceparts=%s" % sources, "-o", "Dir::State=%s/state" % tmp_path,
           "-o", "Dir::Cache=%s/cache" % tmp_path, "-o", "Dir::State::status=/dev/null", "-o", "Debug::NoLocking=1",
           # The _apt sandbox user could not read a temporary directory.
           "-o", "APT::Sandbox::User=root"]
    update = subprocess.run(["apt-get"] + apt + ["update"], capture_output=True, text=True, check=False)
    assert update.returncode == 0 and "W:" not in update.stderr and "E:" not in update.stderr, update.stdout + update.stderr
    policy = subprocess.run(["apt-cache"] + apt + ["policy", "doca-roce"], capture_output=True, text=True, check=False)
    assert "Candidate: 3.2.0-125000" in policy.stdout, policy.stdout + policy.stderr
