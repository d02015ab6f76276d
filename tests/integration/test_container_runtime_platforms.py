"""container_runtime's platform table (roles/container_runtime/vars/main.yml), evaluated by Ansible for each platform it
supports and one it does not: the containerd package, the package manager, whether containerd needs a repository, and
NVIDIA's toolkit repository."""
import json
import os
import subprocess
import sys

import yaml

from local_play import REPO

ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
ROLE = REPO / "roles" / "container_runtime"
PLATFORMS = [
    ({"distribution": "Debian", "distribution_major_version": "12", "os_family": "Debian", "architecture": "x86_64"},
     [True, "containerd", "apt", False, "https://nvidia.github.io/libnvidia-container/stable/deb/amd64", ["/"]]),
    ({"distribution": "Ubuntu", "distribution_major_version": "22", "os_family": "Debian", "architecture": "aarch64"},
     [True, "containerd", "apt", False, "https://nvidia.github.io/libnvidia-container/stable/deb/arm64", ["/"]]),
    ({"distribution": "Ubuntu", "distribution_major_version": "24", "os_family": "Debian", "architecture": "x86_64"},
     [True, "containerd", "apt", False, "https://nvidia.github.io/libnvidia-container/stable/deb/amd64", ["/"]]),
    # Rocky and AlmaLinux 9 by their OS family.
    ({"distribution": "Rocky", "distribution_major_version": "9", "os_family": "RedHat", "architecture": "x86_64"},
     [True, "containerd.io", "dnf", True, "https://nvidia.github.io/libnvidia-container/stable/rpm/$basearch", []]),
    ({"distribution": "Debian", "distribution_major_version": "11", "os_family": "Debian", "architecture": "x86_64"},
     [False, "", "", False, "https://nvidia.github.io/libnvidia-container/stable/deb/amd64", ["/"]]),
]


def test_each_platform_gets_its_packages_and_repositories(tmp_path):
    # One play, one result file per platform: the role's variables evaluated with that platform's facts.
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([{
        "hosts": "localhost", "connection": "local", "gather_facts": False,
        "vars_files": [str(ROLE / "defaults" / "main.yml"), str(ROLE / "vars" / "main.yml")],
        "vars": {"ansible_python_interpreter": sys.executable},
        "tasks": [{
            "ansible.builtin.copy": {"content": "{{ found | to_json }}", "dest": str(tmp_path) + "/out-{{ index }}.json"},
            "loop": [facts for facts, _expected in PLATFORMS],
            "loop_control": {"index_var": "index"},
            "vars": {
                "ansible_facts": "{{ item }}",
                "found": "{{ [__container_runtime_platform_supported | bool, __container_runtime_containerd_package"
                         " if __container_runtime_platform_supported else '', __container_runtime_package_manager,"
                         " __container_runtime_containerd_repo_required | bool, __container_runtime_upstream_nvidia_repo_url,"
                         " __container_runtime_upstream_nvidia_repo_suites] }}",
            },
        }],
    }]))
    environment = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    result = subprocess.run([ANSIBLE_PLAYBOOK, "-i", "localhost,", str(playbook)], cwd=REPO, env=environment, capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    found = [json.loads((tmp_path / f"out-{index}.json").read_text()) for index in range(len(PLATFORMS))]
    assert found == [expected for _facts, expected in PLATFORMS]
