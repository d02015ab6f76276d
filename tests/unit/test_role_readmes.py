# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Role READMEs follow docs/role-readme-template.md and show the variables of meta/argument_specs.yml as
tests/tools/role_readme.py renders them.

The template's ``## `` sections are read from the template itself, so the two cannot drift. The generated variables
are checked in every README that holds the markers; the generator adds the markers to the others.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
_SPEC = importlib.util.spec_from_file_location("role_readme", REPO / "tests" / "tools" / "role_readme.py")
role_readme = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(role_readme)

TEMPLATE = REPO / "docs" / "role-readme-template.md"
# READMEs with a `## ` section the template lacks, each to become a `###` subsection by the role's owner; strict, so a
# README put in order fails here until its entry goes.
# Role READMEs allowed off the template for now, with the reason (none today).
OFF_TEMPLATE = {}
MARKED = sorted(path.parent.name for path in (REPO / "roles").glob("*/README.md") if role_readme.has_markers(path.read_text(encoding="utf-8")))

SPEC = {
    "argument_specs": {
        "main": {
            "short_description": "Do C(one) thing.",
            "options": {
                "demo_mode": {"type": "str", "choices": ["fast", "safe"], "default": "safe", "description": ["Which mode;", "V(safe) waits."]},
                "demo_hosts": {"type": "list", "elements": "str", "required": True, "description": "Hosts, O(demo_mode) decides | how."},
                "demo_rails": {
                    "type": "list", "elements": "dict", "default": [{"name": "rail0", "subnet": "10.0.0.0/24", "mtu": 9000, "pfc": 3, "switch": "leaf-01"}],
                    "description": "Rails.",
                    "options": {"name": {"type": "str", "required": True, "description": "Rail name."}},
                },
                "demo_empty": {"type": "str", "default": "", "description": "Empty by default."},
            },
        },
        "check": {"short_description": "Only checks.", "options": {}},
    },
}


def headings(markdown_text, marker="## "):
    """The titles of the markdown headings of one level (`## ` by default), outside fenced code blocks."""
    titles, fence = [], None
    for line in markdown_text.splitlines():
        opening = re.match(r"\s*(`{3,}|~{3,})", line)
        if opening and fence is None:
            fence = opening.group(1)
        elif opening and opening.group(1).startswith(fence) and not line.strip().strip(fence[0]):
            fence = None
        elif fence is None and line.startswith(marker):
            titles.append(line[len(marker):].strip())
    return titles


def template_readme():
    """The README skeleton of docs/role-readme-template.md: the text of its ````markdown block."""
    text = TEMPLATE.read_text(encoding="utf-8")
    block = re.search(r"^(`{4,})markdown\n(.*?)^\1$", text, flags=re.MULTILINE | re.DOTALL)
    assert block, f"{TEMPLATE.relative_to(REPO)} has no ````markdown block with the README skeleton"
    return block.group(2)


TEMPLATE_SECTIONS = headings(template_readme())
READMES = [pytest.param(path.parent.name, marks=pytest.mark.xfail(strict=True, reason=OFF_TEMPLATE[path.parent.name]))
           if path.parent.name in OFF_TEMPLATE else path.parent.name for path in sorted((REPO / "roles").glob("*/README.md"))]


@pytest.fixture(name="role")
def role_fixture(tmp_path):
    (tmp_path / "meta").mkdir()
    (tmp_path / "meta" / "argument_specs.yml").write_text(yaml.safe_dump(SPEC, sort_keys=False))
    return tmp_path


@pytest.mark.parametrize("role_name", MARKED)
def test_the_generated_variables_are_up_to_date(role_name):
    readme = REPO / "roles" / role_name / "README.md"
    text = readme.read_text(encoding="utf-8")
    assert role_readme.regenerate(text, readme.parent) == text, (
        f"roles/{role_name}/README.md does not match roles/{role_name}/meta/argument_specs.yml: "
        f"run `{role_readme.REGENERATE} roles/{role_name}` and commit the README"
    )


def test_the_template_gives_the_sections():
    assert TEMPLATE_SECTIONS[0] == "Purpose" and "Variables" in TEMPLATE_SECTIONS, TEMPLATE_SECTIONS
    assert len(TEMPLATE_SECTIONS) == len(set(TEMPLATE_SECTIONS))


@pytest.mark.parametrize("role_name", READMES)
def test_the_readme_has_the_sections_of_the_template_in_its_order(role_name):
    text = (REPO / "roles" / role_name / "README.md").read_text(encoding="utf-8")
    title = headings(template_readme(), "# ")[0].replace("<role>", role_name)
    assert headings(text, "# ") == [title], f"roles/{role_name}/README.md: one title, `# {title}`"
    assert headings(text) == TEMPLATE_SECTIONS, (
        f"roles/{role_name}/README.md has the sections {headings(text)}; docs/role-readme-template.md asks for "
        f"{TEMPLATE_SECTIONS}, in that order: move other text under them as `###` subsections"
    )
    variables = text.split("\n## Variables\n", 1)[1].split("\n## ", 1)[0]
    assert role_readme.has_markers(variables), (
        f"roles/{role_name}/README.md: the generated variables belong under `## Variables`: run `{role_readme.REGENERATE} roles/{role_name}`"
    )


def test_headings_in_fenced_code_are_not_sections():
    text = "# demo\n\n## Purpose\n\n```yaml\n## not a heading\n```\n\n````markdown\n```\n## nested\n```\n````\n\n### Sub\n\n## Testing\n"
    assert headings(text) == ["Purpose", "Testing"]
    assert headings(text, "# ") == ["demo"]


def test_every_role_readme_has_the_markers():
    assert MARKED == sorted(path.parent.name for path in (REPO / "roles").glob("*/README.md"))
    assert len(MARKED) >= 12


def test_the_table_shows_every_option_of_every_entry_point(role):
    text = role_readme.render_variables(role)
    assert "### Entry point `main`\n\nDo `one` thing.\n" in text
    assert "| `demo_mode` | str | `safe` | no | Which mode; `safe` waits. One of `fast`, `safe`. |" in text
    assert "| `demo_hosts` | list of str |  | yes | Hosts, `demo_mode` decides \\| how. |" in text
    assert "| `demo_rails[].name` | str |  | yes | Rail name. |" in text
    assert "| `demo_empty` | str | `''` | no | Empty by default. |" in text
    assert "| `demo_rails` | list of dict | see below | no | Rails. |" in text
    assert "Default of `demo_rails`:\n\n```yaml\ndemo_rails:\n- name: rail0\n  subnet: 10.0.0.0/24\n" in text
    assert "### Entry point `check`\n\nOnly checks.\n\nNo variables." in text
    assert text.startswith(role_readme.BEGIN) and text.endswith(role_readme.END)


def test_an_entry_point_with_the_options_of_an_earlier_one_points_there(role):
    specs = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())
    specs["argument_specs"]["stage"] = {"short_description": "A later stage.", "options": specs["argument_specs"]["main"]["options"]}
    (role / "meta" / "argument_specs.yml").write_text(yaml.safe_dump(specs, sort_keys=False))
    text = role_readme.render_variables(role)
    assert "### Entry point `stage`\n\nA later stage.\n\nThe variables of `main`.\n" in text
    assert text.count("| `demo_mode` |") == 1


def test_a_readme_gets_the_markers_under_its_variables_heading(role):
    before = "# demo\n\n## Variables\n\nHand-written notes.\n\n## Example\n"
    after = role_readme.regenerate(before, role)
    assert after.startswith("# demo\n\n## Variables\n\n" + role_readme.BEGIN)
    assert after.endswith(role_readme.END + "\n\nHand-written notes.\n\n## Example\n")
    assert role_readme.regenerate(after, role) == after


def test_a_readme_without_variables_heading_gets_one_at_the_end(role):
    after = role_readme.regenerate("# demo\n\nPurpose.\n", role)
    assert after.startswith("# demo\n\nPurpose.\n\n## Variables\n\n" + role_readme.BEGIN)
    assert after.endswith(role_readme.END + "\n")


def test_a_stale_readme_is_found_and_the_check_names_the_command(role, tmp_path, capsys, monkeypatch):
    roles = tmp_path / "roles"
    (roles / "demo").mkdir(parents=True)
    (roles / "demo" / "meta").symlink_to(role / "meta")
    readme = roles / "demo" / "README.md"
    readme.write_text(role_readme.regenerate("# demo\n\n## Variables\n", roles / "demo"))
    assert not role_readme.stale_readmes(roles)
    readme.write_text(readme.read_text().replace("Rail name.", "Old text."))
    assert role_readme.stale_readmes(roles) == [readme]
    monkeypatch.setattr(role_readme, "REPO", tmp_path)
    monkeypatch.setattr(role_readme, "stale_readmes", lambda: [readme])
    assert role_readme.main(["--check"]) == 1
    assert f"roles/demo/README.md is stale: run {role_readme.REGENERATE} roles/demo" in capsys.readouterr().out
