# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""roles/node_health installs the collection's module_utils on the nodes: the list it installs is what its program imports,
closed under their imports, so that the program on a node runs the same judge as the module and never misses a file."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]
ROLE = REPO / "roles" / "node_health"
PREFIX = "ansible_collections.onprem.gpu.plugins.module_utils."


def imported_module_utils(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    found = {name[len(PREFIX):] for name in names if name.startswith(PREFIX)}
    found |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module == PREFIX.rstrip(".")
              for alias in node.names}
    return found


def test_the_installed_module_utils_are_closed_under_imports():
    listed = set(yaml.safe_load((ROLE / "vars" / "main.yml").read_text(encoding="utf-8"))["__node_health_module_utils"])
    needed, todo = set(), list(imported_module_utils(ROLE / "files" / "onprem-gpu-health"))
    while todo:
        name = todo.pop()
        if name not in needed:
            needed.add(name)
            todo.extend(imported_module_utils(REPO / "plugins" / "module_utils" / f"{name}.py"))
    assert listed == {f"{name}.py" for name in needed}


def test_the_program_runs_from_the_installed_layout_alone(tmp_path):
    """The layout the role installs (the program beside the module_utils bundle), without the checkout."""
    listed = yaml.safe_load((ROLE / "vars" / "main.yml").read_text(encoding="utf-8"))["__node_health_module_utils"]
    bundle = {name: (REPO / "plugins" / "module_utils" / name).read_text(encoding="utf-8") for name in listed}
    (tmp_path / "module_utils.json").write_text(json.dumps(bundle), encoding="utf-8")
    program = tmp_path / "onprem-gpu-health"
    program.write_bytes((ROLE / "files" / "onprem-gpu-health").read_bytes())
    config = tmp_path / "agent.json"
    config.write_text('{"server": "https://127.0.0.1:1", "ca_file": "/nonexistent/ca.crt", "cert_file": "/x", "key_file": "/x"}')
    result = subprocess.run([sys.executable, "-I", str(program), "agent", str(config)], capture_output=True, text=True, timeout=30,
                            check=False, cwd=tmp_path)
    # It imported everything (no ModuleNotFoundError) and failed on the credentials with one sentence.
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith("onprem-gpu-health agent: The credentials /x, /x (CA /nonexistent/ca.crt) cannot be loaded")
    assert "Traceback" not in result.stderr
