"""The nvme_cache role masks the S3 keys in mc's error output in every form mc may print them.

The keys reach mc in MC_HOST_<alias> (http(s)://KEY:SECRET@HOST, percent-encoded: minio/mc's MC_HOST_<alias> format, with
'/' escaped as %2F as the role writes it); mc may echo that URL when it cannot use it. The role's own variables
(roles/nvme_cache/vars/main.yml) are evaluated here by a local play on a failed mirror's result.
"""
import os
import subprocess
import sys

import yaml

from local_play import REPO

ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
SECRET = "wJalr/XUtnFEMI+K7MDENG/bPxRfiCY"
ACCESS = "AKIA/EXAMPLE+KEY"


def test_the_mc_host_form_of_the_keys_is_masked(tmp_path):
    mc_host = "https://AKIA%2FEXAMPLE%2BKEY:wJalr%2FXUtnFEMI%2BK7MDENG%2FbPxRfiCY@s3.example.internal"
    stderr = (f"mc: <ERROR> Unable to parse MC_HOST_nvmecachesrc={mc_host} (lower case: {mc_host.replace('%2F', '%2f')}); "
              f"key {ACCESS}, secret {SECRET}")
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([{
        "hosts": "localhost", "connection": "local", "gather_facts": False,
        "vars_files": [str(REPO / "roles" / "nvme_cache" / "vars" / "main.yml")],
        "vars": {"nvme_cache_s3_endpoint": "https://s3.example.internal", "nvme_cache_s3_access_key": ACCESS,
                 "nvme_cache_s3_secret_key": SECRET, "__nvme_cache_mirror": {"rc": 1, "stderr": stderr}},
        "tasks": [{"ansible.builtin.debug": {"msg": "MC_HOST={{ __nvme_cache_mc_host }} ERROR={{ __nvme_cache_mirror_error }}"}}],
    }]))
    environment = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    result = subprocess.run([ANSIBLE_PLAYBOOK, "-i", "localhost,", str(playbook)], cwd=REPO, env=environment,
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    shown_host, error = result.stdout.split("MC_HOST=", 1)[1].split(" ERROR=", 1)
    # The role writes the keys into MC_HOST exactly in the form the error above carries.
    assert shown_host.startswith(mc_host)
    for form in (SECRET, ACCESS, "wJalr%2FXUtnFEMI%2BK7MDENG%2FbPxRfiCY", "wJalr%2fXUtnFEMI%2bK7MDENG%2fbPxRfiCY", "XUtnFEMI"):
        assert form not in error, form
    assert "https://***:***@s3.example.internal" in error
