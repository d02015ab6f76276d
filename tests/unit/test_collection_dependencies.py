# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""galaxy.yml's dependencies are exactly the collections that the shipped roles, plugins and playbooks use.

Every file under roles/, plugins/ and playbooks/ that the tarball holds (galaxy.yml's build_ignore applied) and
meta/runtime.yml is read for collection names: module and action names (task keys, ``module_defaults``, ``action``),
role names, ``collections:`` keywords, Jinja filters, tests and lookups (``| ns.coll.name``, ``is ns.coll.name``,
``lookup('ns.coll.name')``, ``map('ns.coll.name')``), any ``ns.coll.name`` of a collection the ``ansible`` package
bundles, and ``ansible_collections.ns.coll`` imports and ``extends_documentation_fragment`` in Python plugins.
YAML comments do not count. A collection used but not declared fails, and so does one declared but not used
(containers.podman, the lab's, is the case that was there).
"""

from __future__ import annotations

import ast
import fnmatch
import functools
import os
import re
from pathlib import Path

import ansible
import pytest
import yaml
from ansible.galaxy.dependency_resolution.versioning import meets_requirements

REPO = Path(__file__).resolve().parents[2]
BUNDLED_COLLECTIONS = Path(ansible.__file__).resolve().parents[1] / "ansible_collections"
SCANNED = ("roles", "plugins", "playbooks")
OWN = "onprem.gpu"
ALWAYS_THERE = {"ansible.builtin", "ansible.legacy", OWN}
# Collections that only the lab, molecule and the tests use: never a dependency of what users install.
LAB_ONLY = {"containers.podman"}

NAME = r"[a-z][a-z0-9_]*"
FQCN = rf"{NAME}\.{NAME}\.{NAME}"
FQCN_WHOLE = re.compile(rf"(?:group/)?({FQCN})")
JINJA_USES = (
    re.compile(rf"\|\s*({FQCN})\b"),
    re.compile(rf"\bis\s+(?:not\s+)?({FQCN})\b"),
    re.compile(rf"\b(?:lookup|query|q)\(\s*['\"]({FQCN})['\"]"),
    re.compile(rf"\b(?:map|select|reject|selectattr|rejectattr)\((?:\s*['\"][^'\"]*['\"]\s*,)?\s*['\"]({FQCN})['\"]"),
)
DOTTED_NAME = re.compile(rf"(?<![\w.])({NAME}\.{NAME})\.{NAME}\b")
TASK_LISTS = {"tasks", "pre_tasks", "post_tasks", "handlers", "block", "rescue", "always"}
ROLE_KEYS = {"include_role", "import_role", "ansible.builtin.include_role", "ansible.builtin.import_role"}


class _TolerantLoader(yaml.SafeLoader):  # pylint: disable=too-many-ancestors
    """A safe loader that reads Ansible's tags (!unsafe, !vault) as plain values."""


def _untagged(loader, tag_suffix, node):
    del tag_suffix
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node)
    return loader.construct_mapping(node)


_TolerantLoader.add_multi_constructor("!", _untagged)


def collection_of(fqcn):
    return ".".join(fqcn.split(".")[:2])


def bundled_collections():
    """namespace.name of every collection the ansible package installed next to ansible-core."""
    return {f"{path.parent.name}.{path.name}" for path in BUNDLED_COLLECTIONS.glob("*/*") if (path / "MANIFEST.json").is_file()}


def uses_in_text(text, known):
    """Collections named in Jinja or plain text: filters, tests, lookups, and any name of a known collection."""
    found = {collection_of(match) for pattern in JINJA_USES for match in pattern.findall(text)}
    return found | (set(DOTTED_NAME.findall(text)) & known)


def uses_in_yaml(data, known, parent_key=None, task=False):
    """Collections used by a loaded YAML document (tasks, plays, role meta, defaults, vars).

    A key names a module or action only in a task (an item of a file's top-level list or of a tasks, handlers or block
    list) or under module_defaults; elsewhere keys are data, such as sysctl names (net.ipv4.ip_forward).
    """
    found = set()
    if isinstance(data, dict):
        for key, value in data.items():
            key = str(key)
            whole = FQCN_WHOLE.fullmatch(key)
            if whole and (task or parent_key == "module_defaults"):
                found.add(collection_of(whole.group(1)))
            if key == "collections" and isinstance(value, list):
                found.update(str(item) for item in value if re.fullmatch(rf"{NAME}\.{NAME}", str(item)))
            if key in ("action", "local_action") and isinstance(value, str) and value.split():
                first = FQCN_WHOLE.fullmatch(value.split()[0])
                found.update({collection_of(first.group(1))} if first else set())
            role_name = key == "role" or (key == "name" and parent_key in ROLE_KEYS)
            if role_name and isinstance(value, str) and re.fullmatch(FQCN, value):
                found.add(collection_of(value))
            found |= uses_in_text(key, known) | uses_in_yaml(value, known, key)
    elif isinstance(data, list):
        for item in data:
            if parent_key == "roles" and isinstance(item, str) and re.fullmatch(FQCN, item):
                found.add(collection_of(item))
            found |= uses_in_yaml(item, known, parent_key, task=parent_key is None or parent_key in TASK_LISTS)
    elif isinstance(data, str):
        found |= uses_in_text(data, known)
    return found


def uses_in_python(source, known):
    """Collections a Python plugin imports or takes documentation fragments from."""
    found = set()
    tree = ast.parse(source)
    for node in ast.walk(tree):
        modules = []
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module]
        for module in modules:
            parts = module.split(".")
            if parts[0] == "ansible_collections" and len(parts) >= 3:
                found.add(".".join(parts[1:3]))
        if isinstance(node, ast.Assign) and any(getattr(target, "id", "") == "DOCUMENTATION" for target in node.targets):
            documentation = yaml.load(ast.literal_eval(node.value), Loader=_TolerantLoader) or {}
            fragments = documentation.get("extends_documentation_fragment") or []
            fragments = [fragments] if isinstance(fragments, str) else fragments
            found.update(collection_of(fragment) for fragment in fragments if re.fullmatch(FQCN, fragment))
            found |= uses_in_yaml(documentation.get("requirements") or [], known)
    return found


def uses_in_file(path, known):
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".py":
        return uses_in_python(text, known)
    if path.suffix in (".yml", ".yaml"):
        found = set()
        for document in yaml.load_all(text, Loader=_TolerantLoader):
            # A document's top-level list is a task file's tasks or a playbook's plays.
            found |= uses_in_yaml(document, known)
        return found
    return uses_in_text(text, known)


def galaxy():
    return yaml.safe_load((REPO / "galaxy.yml").read_text())


def shipped_files(top):
    """Files under top that `ansible-galaxy collection build` puts in the tarball (build_ignore as it applies it)."""
    ignore = galaxy().get("build_ignore") or []
    ignore = list(ignore) + ["*.pyc", "__pycache__", "*.retry"]
    for base, directories, files in os.walk(REPO / top):
        relative_base = Path(base).relative_to(REPO)
        directories[:] = [name for name in directories if not any(fnmatch.fnmatch(str(relative_base / name), pattern) for pattern in ignore)]
        for name in files:
            relative = relative_base / name
            if not any(fnmatch.fnmatch(str(relative), pattern) for pattern in ignore):
                yield REPO / relative


@functools.lru_cache(maxsize=None)
def used_collections():
    """{collection: [files that use it]} over the shipped roles, plugins, playbooks and meta/runtime.yml."""
    known = bundled_collections()
    users = {}
    paths = [path for top in SCANNED for path in shipped_files(top)] + [REPO / "meta" / "runtime.yml"]
    for path in paths:
        if path.suffix not in (".py", ".yml", ".yaml", ".j2"):
            continue
        for collection in uses_in_file(path, known) - ALWAYS_THERE:
            users.setdefault(collection, []).append(str(path.relative_to(REPO)))
    return users


@pytest.mark.parametrize("text, expected", [
    ("- name: Load\n  community.general.modprobe:\n    name: rdma_cm\n", {"community.general"}),
    ("- name: Check\n  ansible.builtin.assert:\n    that: rails | map('ansible.utils.ipv4', 'net') | list\n", {"ansible.utils"}),
    ("- ansible.builtin.set_fact:\n    size: \"{{ subnet | ansible.utils.ipaddr('size') }}\"\n", {"ansible.utils"}),
    ("- ansible.builtin.debug:\n    msg: \"{{ lookup('community.general.random_string') }}\"\n", {"community.general"}),
    ("- ansible.builtin.assert:\n    that: address is ansible.utils.in_network('10.0.0.0/8')\n", {"ansible.utils"}),
    ("- hosts: all\n  collections: [community.docker]\n  roles: [other.things.role]\n", {"community.docker", "other.things"}),
    ("- ansible.builtin.include_role:\n    name: vendor.stack.setup\n", {"vendor.stack"}),
    ("- hosts: all\n  module_defaults:\n    group/kubernetes.core.k8s: {kubeconfig: x}\n", {"kubernetes.core"}),
    ("- action: community.general.make target=all\n", {"community.general"}),
    ("# community.general.modprobe would do\n- ansible.builtin.command:\n    argv: [modprobe, x]\n", set()),
    ("- ansible.builtin.debug:\n    msg: \"{{ ansible_facts.default_ipv4.address }} {{ item.settings.start }}\"\n", set()),
    ("kube_node_sysctls:\n  net.ipv4.ip_forward: 1\n  net.bridge.bridge_nf_call_iptables: 1\n", set()),
    ("- hosts: all\n  tasks:\n    - block:\n        - ansible.posix.mount: {path: /raid}\n", {"ansible.posix"}),
    ("- ansible.builtin.debug:\n    msg: !unsafe \"{{ x | ansible.utils.ipaddr }}\"\n", {"ansible.utils"}),
])
def test_the_scanner_finds_collection_names(tmp_path, text, expected):
    path = tmp_path / "tasks.yml"
    path.write_text(text)
    assert uses_in_file(path, {"community.general", "ansible.utils"}) - ALWAYS_THERE == expected


def test_the_scanner_reads_python_plugins():
    source = (
        'DOCUMENTATION = """\nmodule: x\nextends_documentation_fragment:\n  - vendor.docs.common\n"""\n'
        "from ansible_collections.ansible.netcommon.plugins.module_utils.network.common import utils\n"
        "import ansible_collections.onprem.gpu.plugins.module_utils._nccl\n"
    )
    assert uses_in_python(source, set()) == {"vendor.docs", "ansible.netcommon", OWN}


def test_the_scanner_sees_what_the_rdma_role_uses():
    assert "roles/rdma/handlers/main.yml" in used_collections()["community.general"]


def test_the_lab_playbook_is_not_scanned():
    assert REPO / "playbooks" / "lab.yml" not in set(shipped_files("playbooks"))


def test_galaxy_yml_declares_exactly_the_collections_used():
    used = used_collections()
    declared = set(galaxy().get("dependencies") or {})
    problems = [f"{name} is used ({', '.join(sorted(used[name])[:3])}) but galaxy.yml does not declare it" for name in sorted(set(used) - declared)]
    problems += [f"{name} is declared in galaxy.yml but only the lab uses it: list it in requirements.yml only" for name in sorted(declared & LAB_ONLY)]
    problems += [f"{name} is declared in galaxy.yml but nothing shipped uses it" for name in sorted(declared - set(used) - LAB_ONLY)]
    assert not problems, "\n".join(problems)


def test_the_declared_ranges_hold_the_versions_the_toolchain_tests():
    problems = []
    for name, wanted in sorted((galaxy().get("dependencies") or {}).items()):
        manifest = BUNDLED_COLLECTIONS.joinpath(*name.split("."), "MANIFEST.json")
        if not manifest.is_file():
            problems.append(f"{name} is not installed in the toolchain (requirements.txt's ansible package)")
            continue
        version = yaml.safe_load(manifest.read_text())["collection_info"]["version"]
        if not meets_requirements(version, wanted):
            problems.append(f"{name} {version} from the toolchain is outside galaxy.yml's range {wanted}")
    assert not problems, "\n".join(problems)


def test_requirements_yml_installs_the_same_dependencies_for_development():
    development = {entry["name"]: entry.get("version", "*") for entry in yaml.safe_load((REPO / "requirements.yml").read_text())["collections"]}
    dependencies = galaxy().get("dependencies") or {}
    assert {name: development.get(name) for name in dependencies} == dependencies


def test_the_execution_environment_metadata_names_what_the_controller_needs():
    """ansible-builder reads meta/execution-environment.yml; the address filters of ansible.utils need netaddr."""
    metadata = yaml.safe_load((REPO / "meta" / "execution-environment.yml").read_text())
    files = metadata["dependencies"]
    assert sorted(files) == ["python", "system"] and all((REPO / path).is_file() for path in files.values()), files
    python_packages = {re.split(r"[<>=!~;\[ ]", line.strip())[0].lower() for line in (REPO / files["python"]).read_text().splitlines()
                       if line.strip() and not line.startswith("#")}
    if "ansible.utils" in used_collections():
        assert "netaddr" in python_packages, f"ansible.utils' address filters run on the controller with netaddr: add it to {files['python']}"
