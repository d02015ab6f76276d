# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The collection as users get it: build the tarball, install it into an empty path, run its playbooks by name.

`ansible-galaxy collection build` writes the tarball into a temporary directory; `ansible-galaxy collection install
--offline --no-deps` puts it into an empty collections path. The playbooks are then syntax-checked by their names
(onprem.gpu.site, ...), and so is a playbook that imports each of them by name and applies every role, which loads
each role's statically imported tasks and resolves every module and action they name. Ansible sees only the
installed copy and the collections galaxy.yml declares (taken from the toolchain's ``ansible`` package): not the
checkout, not the other bundled collections, not the repository's ansible.cfg. So a file left out of the tarball,
a dependency missing from galaxy.yml or a playbook that reaches into the lab fails here.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import ansible
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
BUNDLED_COLLECTIONS = Path(ansible.__file__).resolve().parents[1] / "ansible_collections"
PLAYBOOKS = ("site", "cluster_addons", "network_benchmark", "gpu_occupancy_report")
# What users never need: the development toolchain, the simulated rack and the tests.
KEPT_OUT = (".build/", ".venv/", ".ci/", ".config/", "lab/", "molecule/", "tests/", "benchmarks/", "inventories/lab/",
            "playbooks/lab.yml", "Makefile", "ansible.cfg", "requirements.txt", "requirements.yml", ".ansible-lint")
# The tarball is about 0.3 MiB; recorded outputs or build artefacts slipping in would show as a jump.
SIZE_BUDGET = 1024 * 1024


def _run(argv, cwd, environment):
    finished = subprocess.run(argv, cwd=cwd, env=environment, capture_output=True, text=True, timeout=300, check=False)
    assert finished.returncode == 0, f"{' '.join(map(str, argv))} failed:\n{finished.stdout}\n{finished.stderr}"
    return finished


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(tarball, environment in which Ansible sees the installed collection and its declared dependencies only)."""
    root = tmp_path_factory.mktemp("collection")
    empty_config = root / "ansible.cfg"
    empty_config.write_text("")
    environment = dict(
        os.environ,
        ANSIBLE_CONFIG=str(empty_config),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_FORCE_COLOR="0",
        ANSIBLE_LOCAL_TEMP=str(root / "tmp"),
        ANSIBLE_HOME=str(root / "home"),
    )
    _run([BIN / "ansible-galaxy", "collection", "build", "--output-path", root / "dist", REPO], root, environment)
    (tarball,) = (root / "dist").glob("onprem-gpu-*.tar.gz")
    installed_path = root / "installed"
    _run([BIN / "ansible-galaxy", "collection", "install", "--offline", "--no-deps", "-p", installed_path, tarball], root, environment)
    dependencies = root / "dependencies" / "ansible_collections"
    for name in yaml.safe_load((REPO / "galaxy.yml").read_text()).get("dependencies") or {}:
        namespace, collection = name.split(".")
        (dependencies / namespace).mkdir(parents=True, exist_ok=True)
        (dependencies / namespace / collection).symlink_to(BUNDLED_COLLECTIONS / namespace / collection)
    environment.update(
        ANSIBLE_COLLECTIONS_PATH=f"{installed_path}{os.pathsep}{dependencies.parent}",
        ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false",
    )
    return tarball, environment


def test_the_tarball_holds_what_users_run_and_nothing_of_the_lab_or_the_tests(installed):
    tarball = installed[0]
    with tarfile.open(tarball) as archive:
        names = archive.getnames()
    leaked = sorted(name for name in names if any(name == kept.rstrip("/") or name.startswith(kept) for kept in KEPT_OUT))
    assert not leaked, f"galaxy.yml's build_ignore lets these into the tarball: {leaked[:20]}"
    wanted = ["MANIFEST.json", "meta/runtime.yml", "README.md"] + [f"playbooks/{name}.yml" for name in PLAYBOOKS]
    ee_metadata = yaml.safe_load((REPO / "meta" / "execution-environment.yml").read_text())
    wanted += ["meta/execution-environment.yml"] + list(ee_metadata["dependencies"].values())
    missing = [name for name in wanted if name not in names]
    assert not missing, f"the tarball lacks {missing}"
    size = tarball.stat().st_size
    assert size < SIZE_BUDGET, f"{tarball.name} is {size} bytes, over the {SIZE_BUDGET} bytes budget: what did build_ignore let in?"


def test_the_installed_playbooks_pass_a_syntax_check_by_name(installed, tmp_path):
    environment = installed[1]
    finished = _run([BIN / "ansible-playbook", "--syntax-check", "-i", "localhost,"] + [f"onprem.gpu.{name}" for name in PLAYBOOKS],
                    tmp_path, environment)
    assert finished.stdout.count("playbook: ") == len(PLAYBOOKS), finished.stdout


def test_every_role_and_playbook_loads_from_the_installed_copy(installed, tmp_path):
    """An AWX project's playbook imports the collection's playbooks by name; every role's tasks resolve their modules."""
    environment = installed[1]
    roles = sorted(path.name for path in (REPO / "roles").iterdir() if (path / "tasks" / "main.yml").is_file())
    plays = [{"ansible.builtin.import_playbook": f"onprem.gpu.{name}"} for name in PLAYBOOKS]
    plays += [{"name": f"Load {role}", "hosts": "all", "gather_facts": False, "roles": [f"onprem.gpu.{role}"]} for role in roles]
    playbook = tmp_path / "everything.yml"
    playbook.write_text(yaml.safe_dump(plays, sort_keys=False))
    finished = _run([BIN / "ansible-playbook", "--syntax-check", "-i", "localhost,", playbook], tmp_path, environment)
    assert f"playbook: {playbook}" in finished.stdout
