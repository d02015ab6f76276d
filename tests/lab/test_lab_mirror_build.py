"""The lab mirror's build (lab/mirror/build.py): the DOCA stand-ins are also published flat, as NVIDIA publishes DOCA
(https://linux.mellanox.com/public/repo/doca/<version>/<distro>/<arch>/, APT suite "./"), next to the existing
dists/bookworm layout; APT, given the rdma role's repository template with its defaults, reads the flat one."""

import importlib.util
import pathlib
import shutil
import subprocess

import jinja2
import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
ROLE = ROOT / "roles" / "rdma"

pytestmark = pytest.mark.skipif(not all(shutil.which(tool) for tool in ("dpkg-deb", "apt-ftparchive", "gpg", "apt-get")),
                                reason="needs dpkg-deb, apt-ftparchive, gpg and apt-get")


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    spec = importlib.util.spec_from_file_location("lab_mirror_build", ROOT / "lab" / "mirror" / "build.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    output = tmp_path_factory.mktemp("mirror")
    build.build(output)
    return output / "published" / "repo"


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


def test_apt_reads_the_flat_repository_through_the_role_template_and_its_defaults(repo, tmp_path):
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    keyring = tmp_path / "doca.asc"
    shutil.copy(repo / "onprem-gpu-lab.asc", keyring)
    template = jinja2.Environment(trim_blocks=True).from_string((ROLE / "templates" / "repository.sources.j2").read_text())
    sources = tmp_path / "etc" / "sources.list.d"
    sources.mkdir(parents=True)
    (sources / "doca.sources").write_text(template.render(
        rdma_doca_repo_url="file://%s/doca/3.2.0/debian12/x86_64/" % repo, rdma_doca_repo_suites=defaults["rdma_doca_repo_suites"],
        rdma_doca_repo_components=defaults["rdma_doca_repo_components"], __rdma_doca_keyring=str(keyring),
        ansible_facts={"distribution_release": "bookworm"}))
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
