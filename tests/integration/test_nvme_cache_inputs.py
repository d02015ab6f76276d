"""The nvme_cache role's input checks (roles/nvme_cache/vars/main.yml's problem list), evaluated by a local play.

Names that reach mdadm, mkfs.xfs, paths and mc must match whole: a value with a trailing newline (a YAML block scalar
kept with `|`) passes a `$`-anchored match, since `$` also matches before a final newline.
"""
import os
import subprocess
import sys

import pytest
import yaml

from local_play import REPO

ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
ROLE = REPO / "roles" / "nvme_cache"
GOOD = {"nvme_cache_devices": ["/dev/disk/by-id/nvme-lab-0"],
        "nvme_cache_datasets": [{"name": "imagenet", "version": "2012", "source": "datasets/imagenet"}],
        "nvme_cache_s3_endpoint": "https://s3.example.internal", "nvme_cache_s3_access_key": "access",
        "nvme_cache_s3_secret_key": "secret"}


def problems(tmp_path, facts=None, **overrides):
    # The role's defaults with the test's values over them, in one file: vars_files take precedence over play vars.
    settings = dict(yaml.safe_load((ROLE / "defaults" / "main.yml").read_text()), **dict(GOOD, **overrides))
    (tmp_path / "settings.yml").write_text(yaml.safe_dump(settings))
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([{
        "hosts": "localhost", "connection": "local", "gather_facts": False,
        "vars_files": [str(tmp_path / "settings.yml"), str(ROLE / "vars" / "main.yml")],
        "vars": {"ansible_facts": facts or {"distribution": "Debian", "os_family": "Debian"}, "ansible_python_interpreter": sys.executable},
        "tasks": [{"ansible.builtin.copy": {"content": "{{ __nvme_cache_problems | to_json }}", "dest": str(tmp_path / "out.json")}}],
    }]))
    environment = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    result = subprocess.run([ANSIBLE_PLAYBOOK, "-i", "localhost,", str(playbook)], cwd=REPO, env=environment,
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    return yaml.safe_load((tmp_path / "out.json").read_text())


def test_good_inputs_have_no_problem(tmp_path):
    assert problems(tmp_path) == []


@pytest.mark.parametrize("overrides, sentence", [
    ({"nvme_cache_array_name": "cache\n"}, "nvme_cache_array_name needs 1 to 16 and nvme_cache_fs_label 1 to 12 letters"),
    ({"nvme_cache_fs_label": "raid\n"}, "nvme_cache_array_name needs 1 to 16 and nvme_cache_fs_label 1 to 12 letters"),
    ({"nvme_cache_s3_endpoint": "https://s3.example.internal\n"}, "mirroring needs nvme_cache_s3_endpoint"),
    ({"nvme_cache_datasets": [{"name": "imagenet\n", "version": "2012", "source": "datasets/imagenet"}]},
     "Each of nvme_cache_datasets needs a name and a version"),
    ({"nvme_cache_datasets": [{"name": "imagenet", "version": "2012\n", "source": "datasets/imagenet"}]},
     "Each of nvme_cache_datasets needs a name and a version"),
])
def test_a_value_with_a_trailing_newline_is_a_problem(tmp_path, overrides, sentence):
    found = problems(tmp_path, **overrides)
    assert any(sentence in problem for problem in found), found


def test_a_platform_outside_the_two_families_is_a_problem_and_el_is_not(tmp_path):
    assert problems(tmp_path, facts={"distribution": "Rocky", "os_family": "RedHat"}) == []
    assert problems(tmp_path, facts={"distribution": "openSUSE Leap", "os_family": "Suse"})[0].startswith(
        "localhost runs openSUSE Leap; the nvme_cache role supports the Debian and Red Hat families")
