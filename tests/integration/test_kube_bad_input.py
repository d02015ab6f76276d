"""Bad Kubernetes settings stop site.yml in its preflight play, before anything changes, with one clear sentence.

The inventory cases run the real site.yml against copies of the lab inventory with no lab started: they must stop
in the pure inventory checks that run before any host is contacted. The version case runs kube_node's mirror check
on this machine (connection: local) against a flat APT repository (as pkgs.k8s.io is) signed with a throwaway key and
served from a temporary directory: the check reads it with APT through a private configuration, signature checked.
"""
import functools
import http.server
import os
import pathlib
import subprocess
import sys
import threading

import pytest
import yaml

from local_play import copy_inventory

REPO = pathlib.Path(__file__).resolve().parents[2]
ANSIBLE_PLAYBOOK = pathlib.Path(sys.executable).with_name("ansible-playbook")


def run(playbook, inventory, *extra):
    environment = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    return subprocess.run([str(ANSIBLE_PLAYBOOK), "-i", str(inventory), str(playbook), *extra],
                          cwd=REPO, env=environment, capture_output=True, text=True, timeout=300, check=False)


def one_line(text):
    return " ".join(text.split())


def lab_copy(tmp_path, edit):
    inventory = tmp_path / "inventory"
    copy_inventory("lab", inventory)
    edit(inventory)
    return inventory


def edit_yaml(path, change):
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data))


def overlapping_networks(inventory):
    edit_yaml(inventory / "group_vars" / "dc1.yml", lambda data: data.update(kube_service_cidr="10.32.0.0/16"))


def node_in_both_pools(inventory):
    edit_yaml(inventory / "hosts.yml", lambda data: data["all"]["children"]["dc1"]["children"]["dc1_gpu_workers"]["children"]
              ["dc1_inference"]["hosts"].update({"dc1-gpu1": None}))


def missing_api_endpoint(inventory):
    edit_yaml(inventory / "group_vars" / "dc2.yml", lambda data: data.pop("kube_api_endpoint"))


@pytest.mark.parametrize(
    "edit, message",
    [
        pytest.param(overlapping_networks,
                     "dc1: kube_pod_cidr 10.32.0.0/13 and kube_service_cidr 10.32.0.0/16 overlap: pod and service addresses would collide; "
                     "give them separate ranges (for example 10.32.0.0/12 for pods and 10.96.0.0/12 for services).",
                     id="overlapping-pod-and-service-networks"),
        pytest.param(node_in_both_pools,
                     "dc1-gpu1 is in the groups training_pool and inference_pool: a node belongs to one pool, so remove it from all but one of them.",
                     id="node-in-both-pools"),
        pytest.param(missing_api_endpoint,
                     "dc2-cp1: kube_api_endpoint must be the host:port where the cluster's API answers, for example 10.10.0.10:6443 or "
                     "api.dc1.example.internal:6443 (got nothing); set it in the group_vars of the datacenter.",
                     id="missing-api-endpoint"),
    ],
)
def test_bad_cluster_settings_stop_site_before_any_change(tmp_path, edit, message):
    result = run(REPO / "playbooks" / "site.yml", lab_copy(tmp_path, edit))
    output = one_line(result.stdout + result.stderr)
    assert result.returncode != 0
    assert message in output
    # Stopped in the preflight play's first checks: no host was contacted, no later play started.
    assert "TASK [onprem.gpu.preflight : Read the distribution]" not in result.stdout
    assert "PLAY [Install the GPU node base]" not in result.stdout
    assert "changed=1" not in result.stdout


def test_the_example_inventories_pass_the_checks(tmp_path):
    """onprem-dc1 and onprem-dc2 as shipped pass the inventory checks (site.yml's pre_tasks, no host contacted)."""
    for name in ("onprem-dc1", "onprem-dc2"):
        playbook = tmp_path / f"{name}.yml"
        playbook.write_text(yaml.safe_dump([{
            "name": "Kubernetes inventory checks", "hosts": "control_plane:gpu_nodes", "gather_facts": False,
            "tasks": [
                {"name": "Node checks", "ansible.builtin.include_role": {"name": "onprem.gpu.kube_node", "tasks_from": "preflight_inputs"}},
                {"name": "Network checks", "ansible.builtin.include_role": {"name": "onprem.gpu.kube_control_plane", "tasks_from": "preflight"},
                 "when": "inventory_hostname in groups['control_plane']"},
            ],
        }]))
        result = run(playbook, REPO / "inventories" / name)
        assert result.returncode == 0, result.stdout[-3000:]
        assert "failed=0" in result.stdout


PACKAGES = [("kubeadm", "1.35.4-1.1"), ("kubelet", "1.35.4-1.1"), ("kubectl", "1.35.4-1.1"), ("kubelet", "1.36.2-1.1")]


def signed_flat_repository(root, gnupg_home):
    """A flat repository (Packages, Release, InRelease at its root) signed with a new key; its armored key as Release.key."""
    architecture = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True, check=True).stdout.strip()
    (root / "Packages").write_text("\n".join(
        f"Package: {name}\nVersion: {version}\nArchitecture: {architecture}\nMaintainer: test\nFilename: ./{name}_{version}_{architecture}.deb\n"
        f"Size: 1\nSHA256: {'0' * 64}\nDescription: {name}\n" for name, version in PACKAGES))
    environment = dict(os.environ, GNUPGHOME=str(gnupg_home))
    gpg = ["gpg", "--batch", "--quiet", "--yes"]
    subprocess.run(gpg + ["--passphrase", "", "--quick-gen-key", "onprem.gpu test mirror", "ed25519", "sign", "never"], env=environment, check=True)
    release = subprocess.run(["apt-ftparchive", "release", "."], cwd=root, capture_output=True, text=True, check=True).stdout
    (root / "Release").write_text(release)
    subprocess.run(gpg + ["--clearsign", "--output", "InRelease", "Release"], cwd=root, env=environment, check=True)
    subprocess.run(gpg + ["--armor", "--output", "Release.key", "--export"], cwd=root, env=environment, check=True)
    subprocess.run(["gpgconf", "--kill", "gpg-agent"], env=environment, check=False)


@pytest.fixture()
def mirror(tmp_path):
    root = tmp_path / "mirror"
    root.mkdir()
    gnupg_home = tmp_path / "gnupg"
    gnupg_home.mkdir(mode=0o700)
    signed_flat_repository(root, gnupg_home)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


def served_fingerprint(tmp_path):
    """The fingerprint of the key the mirror serves, as gpg shows it (the mirror is plain HTTP, so its key is pinned)."""
    listing = subprocess.run(["gpg", "--show-keys", "--with-colons", str(tmp_path / "mirror" / "Release.key")], capture_output=True, text=True,
                             check=True, env=dict(os.environ, GNUPGHOME=str(tmp_path / "gnupg"))).stdout
    return next(line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:"))


def mirror_check(tmp_path, mirror, version, fingerprint=None):
    playbook = tmp_path / "mirror_check.yml"
    fingerprint = served_fingerprint(tmp_path) if fingerprint is None else fingerprint
    playbook.write_text(yaml.safe_dump([{
        "name": "kube_node's mirror check on this machine", "hosts": "all", "connection": "local", "gather_facts": False,
        "vars": {"kube_version": version, "kube_node_repo_url": mirror, "kube_node_repo_key_fingerprint": fingerprint},
        # The entry point `preflight` with the role's own variables, less its systemd units (this machine may not run
        # systemd as PID 1): the same module call on the mirror and the same problems filter.
        "tasks": [
            {"name": "Inventory", "ansible.builtin.include_role": {"name": "onprem.gpu.kube_node", "tasks_from": "preflight_inputs", "public": True}},
            {"name": "Read the packages and the mirror", "register": "facts", "check_mode": False,
             "onprem.gpu.kube_node_facts": {"packages": "{{ kube_node_packages }}", "repository": "{{ __kube_node_repository }}",
                                            "version": "{{ __kube_node_version }}"}},
            {"name": "Check the platform and the mirror", "ansible.builtin.assert": {
                "that": "problems | length == 0", "fail_msg": "{{ problems | join(' ') }}", "quiet": True},
             "vars": {"problems": "{{ __kube_node_settings | onprem.gpu.kube_node_preflight_problems(inventory_hostname, facts, __kube_node_wanted) }}"}},
        ],
    }]))
    # A valid inventory (a datacenter with its control plane), so that only the mirror can be wrong.
    inventory = tmp_path / "hosts.yml"
    host = {"ansible_python_interpreter": sys.executable, "datacenter": "dc1", "kube_api_endpoint": "10.0.0.1:6443"}
    inventory.write_text(yaml.safe_dump({"all": {"children": {"control_plane": {"hosts": {"node-test": host}}}}}))
    return run(playbook, inventory, "--check")


def test_a_version_the_mirror_lacks_is_refused(tmp_path, mirror):
    result = mirror_check(tmp_path, mirror, "1.36.2")
    assert result.returncode != 0
    assert (f"The mirror {mirror} has no kubeadm, kubectl at Kubernetes 1.36.2 (it offers kubeadm 1.35.4-1.1); "
            "set kube_version to an offered version or publish it on the mirror.") in one_line(result.stdout)


def test_a_version_the_mirror_has_passes(tmp_path, mirror):
    result = mirror_check(tmp_path, mirror, "1.35.4")
    assert result.returncode == 0, result.stdout[-3000:]


def test_a_mirror_signed_with_another_key_is_refused(tmp_path, mirror):
    """The check reads the repository as APT will install from it: a key that did not sign it is refused before any change."""
    other = tmp_path / "other"
    other.mkdir()
    (tmp_path / "other-gnupg").mkdir(mode=0o700)
    signed_flat_repository(other, tmp_path / "other-gnupg")
    (tmp_path / "mirror" / "Release.key").write_bytes((other / "Release.key").read_bytes())
    result = mirror_check(tmp_path, mirror, "1.35.4")
    assert result.returncode != 0
    output = one_line(result.stdout)
    assert f"node-test cannot read the Kubernetes repository {mirror} (APT cannot read {mirror} (suites /, components none):" in output
    assert "NO_PUBKEY" in output and "check kube_node_repo_url, that the mirror is up" in output


def test_a_plain_http_key_without_its_fingerprint_is_never_fetched(tmp_path, mirror):
    result = mirror_check(tmp_path, mirror, "1.35.4", fingerprint="")
    assert result.returncode != 0
    assert (f"The repository kubernetes takes its signing key from {mirror}Release.key over plain HTTP with no key_fingerprint, so anything on "
            "the network path could hand over another key and get packages installed as root on every node") in one_line(result.stdout)


def test_a_key_that_is_not_the_pinned_one_is_refused(tmp_path, mirror):
    """A network path that hands over its own key (here: the mirror serves another) is caught by the pin before APT trusts it."""
    pinned = served_fingerprint(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    (tmp_path / "other-gnupg").mkdir(mode=0o700)
    signed_flat_repository(other, tmp_path / "other-gnupg")
    (tmp_path / "mirror" / "Release.key").write_bytes((other / "Release.key").read_bytes())
    result = mirror_check(tmp_path, mirror, "1.35.4", fingerprint=pinned)
    assert result.returncode != 0
    assert (f"The signing key {mirror}Release.key of the repository kubernetes carries the key {served_fingerprint(tmp_path)} where "
            f"key_fingerprint pins {pinned} (and only that key): it is not installed") in one_line(result.stdout)
