# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A role's defaults are written twice, in defaults/main.yml and in meta/argument_specs.yml; the two agree.

defaults/main.yml sets the variables (argument specs validate, they never set one); the specs document them, and the
README's variables table is generated from the specs. So, per role:

- every option of every entry point with a ``default`` has that value in defaults/main.yml, compared after YAML load;
- an option without ``default`` is set in defaults/main.yml to a Jinja template (its description says what it
  resolves to), to null (computed by the role), or not at all: a plain value there would be a default the table hides.
  A ``required`` option is exempt: the entry point needs it from the caller whatever main's default is (mig's
  ``reconfigure_operator`` and ``mig_layout``);
- every public ``<role>_*`` variable of defaults/main.yml is an option of ``main``, or of the ``tasks_from`` entry point
  that reads it (mig's ``reconfigure``, package_source's ``hold``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
ROLES = sorted(path.parent.parent.name for path in (REPO / "roles").glob("*/meta/argument_specs.yml"))


def load(role, relative):
    return yaml.safe_load((REPO / "roles" / role / relative).read_text(encoding="utf-8")) or {}


def entry_points(role):
    """{entry point: {option: spec}} of the role's meta/argument_specs.yml."""
    specs = load(role, "meta/argument_specs.yml")["argument_specs"]
    return {name: {option: spec or {} for option, spec in ((entry or {}).get("options") or {}).items()} for name, entry in specs.items()}


def is_template(value):
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def disagreements(defaults, options_by_entry_point, role):
    """One sentence per place where defaults/main.yml and the argument specs say different things."""
    found = []
    for entry_point, options in options_by_entry_point.items():
        for option, spec in options.items():
            where = f"option {option} of entry point {entry_point}"
            if "default" in spec:
                if option not in defaults:
                    found.append(f"{where} has default {spec['default']!r}, but defaults/main.yml does not set it")
                elif defaults[option] != spec["default"]:
                    found.append(f"{where} has default {spec['default']!r}, defaults/main.yml {defaults[option]!r}")
            elif option in defaults and not spec.get("required") and defaults[option] is not None and not is_template(defaults[option]):
                found.append(f"{where} has no default, but defaults/main.yml sets it to {defaults[option]!r}")
    declared = {option for options in options_by_entry_point.values() for option in options}
    for variable in defaults:
        if variable.startswith(f"{role}_") and variable not in declared:
            found.append(f"defaults/main.yml sets {variable}, which no entry point of meta/argument_specs.yml declares")
    return found


@pytest.mark.parametrize("role", ROLES)
def test_the_defaults_and_the_argument_specs_agree(role):
    problems = disagreements(load(role, "defaults/main.yml"), entry_points(role), role)
    assert not problems, f"roles/{role}: " + "; ".join(problems)


def test_every_role_is_checked():
    assert len(ROLES) == len(list((REPO / "roles").glob("*/defaults/main.yml"))) >= 12


@pytest.mark.parametrize(
    ("defaults", "options", "sentence"),
    [
        ({"demo_mode": "fast"}, {"main": {"demo_mode": {"default": "safe"}}},
         "option demo_mode of entry point main has default 'safe', defaults/main.yml 'fast'"),
        ({}, {"check": {"demo_mode": {"default": "safe"}}},
         "option demo_mode of entry point check has default 'safe', but defaults/main.yml does not set it"),
        ({"demo_port": 80}, {"main": {"demo_port": {"type": "int"}}},
         "option demo_port of entry point main has no default, but defaults/main.yml sets it to 80"),
        ({"demo_extra": 1}, {"main": {}},
         "defaults/main.yml sets demo_extra, which no entry point of meta/argument_specs.yml declares"),
    ],
    ids=["different value", "missing from defaults", "default the table hides", "undeclared variable"],
)
def test_a_disagreement_is_named(defaults, options, sentence):
    assert disagreements(defaults, options, "demo") == [sentence]


def test_templates_nulls_required_options_internal_variables_and_equal_values_agree():
    defaults = yaml.safe_load(
        "demo_url: \"{{ site_url | default('') }}\"\ndemo_dir: ~\n__demo_cache: {}\n"
        "demo_list: [a, {b: 1}]\ndemo_version: '1.18.0'\n"
    )
    options = {
        "main": {"demo_url": {"description": "Defaults to site_url."}, "demo_dir": {}, "demo_list": {"default": ["a", {"b": 1}]}},
        "stage": {"demo_version": {"default": "1.18.0"}, "demo_list": {"required": True}},
    }
    assert disagreements(defaults, options, "demo") == []
