# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Render the variables of a role's README from its meta/argument_specs.yml, the one source of truth.

The text between ``<!-- BEGIN generated variables -->`` and ``<!-- END generated variables -->`` in
``roles/<role>/README.md`` is generated: per entry point (``main``, ``tasks_from`` ones such as ``join``) its short
description and a table of every option (name, type, default, required, description with its choices); defaults too
long for a table follow it as YAML. Edit meta/argument_specs.yml, never that text, and run from the repository root::

    .venv/bin/python tests/tools/role_readme.py                 # every role whose README has the markers
    .venv/bin/python tests/tools/role_readme.py roles/rdma ...   # these roles; a README without the markers gets
                                                                 # them under its "## Variables" heading (or at the end)
    .venv/bin/python tests/tools/role_readme.py --check         # exit 1 and name each stale README, change nothing

tests/unit/test_role_readmes.py fails on a stale README. The layout of a role README is in
docs/role-readme-template.md.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
BEGIN = "<!-- BEGIN generated variables -->"
END = "<!-- END generated variables -->"
NOTE = "<!-- Generated from meta/argument_specs.yml by tests/tools/role_readme.py: edit that file, then run the script. -->"
REGENERATE = ".venv/bin/python tests/tools/role_readme.py"
INLINE_LIMIT = 60
MARKUP = (
    (re.compile(r"[CVOEM]\(([^()]*)\)"), r"`\1`"),
    (re.compile(r"RV\(([^()]*)\)"), r"`\1`"),
    (re.compile(r"I\(([^()]*)\)"), r"*\1*"),
    (re.compile(r"B\(([^()]*)\)"), r"**\1**"),
    (re.compile(r"U\(([^()]*)\)"), r"<\1>"),
    (re.compile(r"L\(([^(),]*),\s*([^()]*)\)"), r"[\1](\2)"),
)


def markdown(text):
    """Ansible documentation markup (C(), V(), O(), I(), B(), U(), L()) as Markdown, on one line."""
    if isinstance(text, list):
        text = " ".join(str(part) for part in text)
    text = " ".join(str(text or "").split())
    for pattern, replacement in MARKUP:
        text = pattern.sub(replacement, text)
    return text


def code(value):
    """value as inline code, whatever backticks it holds."""
    fence = "``" if "`" in value else "`"
    padding = " " if fence == "``" else ""
    return f"{fence}{padding}{value}{padding}{fence}"


def flow(value):
    """A default as YAML on one line, as it would be written in an inventory."""
    if isinstance(value, str) and value and value == value.strip() and not re.search(r"[:#{}\[\],&*!|>'\"%@`]", value):
        return value
    return yaml.safe_dump(value, default_flow_style=True, width=float("inf"), sort_keys=False).strip().removesuffix("\n...").strip()


def cell(text):
    return text.replace("|", "\\|")


def option_rows(options, prefix=""):
    """(name, spec) of every option and sub-option, sub-options named parent.child (parent[].child in a list)."""
    for name, spec in (options or {}).items():
        spec = spec or {}
        yield prefix + name, spec
        nested = spec.get("options") or spec.get("suboptions")
        if nested:
            joint = "[]." if spec.get("type") == "list" else "."
            yield from option_rows(nested, prefix + name + joint)


def type_of(spec):
    kind = spec.get("type", "str")
    return f"list of {spec['elements']}" if kind == "list" and spec.get("elements") else kind


def render_entry_point(name, spec, same_options_as=None):
    lines = [f"### Entry point `{name}`", ""]
    summary = markdown(spec.get("short_description"))
    if summary:
        lines += [summary, ""]
    if same_options_as:
        return lines + [f"The variables of `{same_options_as}`.", ""]
    rows = list(option_rows(spec.get("options")))
    if not rows:
        return lines + ["No variables.", ""]
    lines += ["| variable | type | default | required | description |", "|---|---|---|---|---|"]
    long_defaults = []
    for option, option_spec in rows:
        if "default" in option_spec:
            shown = flow(option_spec["default"])
            if len(shown) > INLINE_LIMIT or "\n" in shown:
                long_defaults.append((option, option_spec["default"]))
                default = "see below"
            else:
                default = code(shown) if shown else '`""`'
        else:
            default = ""
        description = markdown(option_spec.get("description"))
        if option_spec.get("choices"):
            choices = ", ".join(code(flow(choice)) for choice in option_spec["choices"])
            description = f"{description} One of {choices}.".strip()
        required = "yes" if option_spec.get("required") else "no"
        lines.append(f"| `{option}` | {cell(type_of(option_spec))} | {cell(default)} | {required} | {cell(description)} |")
    lines.append("")
    for option, value in long_defaults:
        dumped = yaml.safe_dump({option: value}, default_flow_style=False, sort_keys=False, width=120, allow_unicode=True)
        lines += [f"Default of `{option}`:", "", "```yaml", dumped.rstrip("\n"), "```", ""]
    return lines


def render_variables(role_dir):
    """The generated text between the markers (markers included) for the role in role_dir."""
    specs = yaml.safe_load((Path(role_dir) / "meta" / "argument_specs.yml").read_text(encoding="utf-8"))["argument_specs"]
    lines = [BEGIN, NOTE, ""]
    rendered = []
    for name, spec in specs.items():
        spec = spec or {}
        # An entry point declared with the options of an earlier one (a YAML alias) points there instead of a copy.
        same = next((earlier for earlier, options in rendered if spec.get("options") and options == spec.get("options")), None)
        lines += render_entry_point(name, spec, same)
        rendered.append((name, spec.get("options")))
    return "\n".join(lines).rstrip("\n") + "\n" + END


def has_markers(text):
    return BEGIN in text and END in text


def regenerate(text, role_dir):
    """The README text with its generated section rendered anew; markers are added when missing."""
    generated = render_variables(role_dir)
    if has_markers(text):
        start = text.index(BEGIN)
        stop = text.index(END) + len(END)
        return text[:start] + generated + text[stop:]
    heading = re.search(r"^## Variables[^\n]*\n", text, flags=re.MULTILINE)
    if heading:
        return text[:heading.end()] + "\n" + generated + "\n" + text[heading.end():]
    return text.rstrip("\n") + "\n\n## Variables\n\n" + generated + "\n"


def stale_readmes(roles_dir=REPO / "roles"):
    """READMEs with markers whose generated section differs from what argument_specs.yml gives."""
    stale = []
    for readme in sorted(Path(roles_dir).glob("*/README.md")):
        text = readme.read_text(encoding="utf-8")
        if has_markers(text) and regenerate(text, readme.parent) != text:
            stale.append(readme)
    return stale


def main(argv=None):
    parser = argparse.ArgumentParser(description="Render the variables of role READMEs from meta/argument_specs.yml.")
    parser.add_argument("roles", nargs="*", type=Path, help="role directories (default: every role whose README has the markers)")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when a README is stale")
    arguments = parser.parse_args(argv)
    if arguments.check:
        stale = stale_readmes()
        for readme in stale:
            print(f"{readme.relative_to(REPO)} is stale: run {REGENERATE} {readme.parent.relative_to(REPO)}")
        return 1 if stale else 0
    roles = arguments.roles or [readme.parent for readme in sorted((REPO / "roles").glob("*/README.md")) if has_markers(readme.read_text(encoding="utf-8"))]
    for role_dir in roles:
        readme = Path(role_dir) / "README.md"
        before = readme.read_text(encoding="utf-8") if readme.exists() else f"# onprem.gpu.{Path(role_dir).resolve().name}\n"
        after = regenerate(before, role_dir)
        if after != before:
            readme.write_text(after, encoding="utf-8")
            print(f"{readme}: {'regenerated' if has_markers(before) else 'variables added; remove the hand-written ones it replaces'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
