"""Run one play against this machine (connection: local) for the integration tests.

The bad-input tests need no server: the roles check their inputs before they read or change anything, so the play
runs here, in check mode for good measure, and must stop at those checks.
"""
import os
import pathlib
import shutil
import subprocess
import sys

import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]
ANSIBLE_PLAYBOOK = pathlib.Path(sys.executable).with_name("ansible-playbook")


# The lab inventory pins the key of the lab mirror (plain HTTP) by the fingerprint `make mirror` writes; the tests that
# copy the inventory run before the mirror is built on a fresh machine (make test runs the unit tests first) and never
# fetch the key, so a copy without that file pins this stand-in instead of being refused for an unpinned key.
MIRROR_FINGERPRINT = REPO / ".build" / "lab" / "mirror" / "onprem-gpu-lab.fingerprint"
STAND_IN_FINGERPRINT = "0123456789ABCDEF0123456789ABCDEF01234567"


def copy_inventory(name, target):
    """Copy inventories/<name> to target, without the artifacts/ (kubeconfigs) that a lab or e2e run may have written."""
    shutil.copytree(REPO / "inventories" / name, target, ignore=shutil.ignore_patterns("artifacts"))
    if name == "lab" and not MIRROR_FINGERPRINT.exists():
        all_vars = target / "group_vars" / "all.yml"
        settings = yaml.safe_load(all_vars.read_text())
        settings["onprem_gpu_mirror_key_fingerprint"] = STAND_IN_FINGERPRINT
        all_vars.write_text(yaml.safe_dump(settings, sort_keys=False))
    return target


def run_role_here(tmp_path, role, role_vars, name):
    """Run the collection's role with role_vars on this machine in check mode; return the finished process."""
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": name,
        "hosts": "all",
        "connection": "local",
        "gather_facts": False,
        "vars": role_vars,
        "roles": [{"role": role}],
    }]))
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"gpu-test": {"ansible_python_interpreter": sys.executable}}}}))
    environment = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    return subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "--check", "-i", str(inventory), str(playbook)],
        cwd=REPO, env=environment, capture_output=True, text=True, timeout=300, check=False,
    )


def one_line(text):
    """The text with every run of white space made one space, as Ansible wraps messages."""
    return " ".join(text.split())
