"""make test's table of wall times against budgets (tests/timing/report.py)."""

import importlib.util
import pathlib

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
SPEC = importlib.util.spec_from_file_location("timing_report", ROOT / "tests" / "timing" / "report.py")
timing_report = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(timing_report)


def test_a_stage_over_its_budget_is_flagged_and_warned_by_name():
    table, warnings = timing_report.report(
        ["unit tests: 108 s", "molecule kube: 410 s", "lab end to end: 700 s"],
        {"unit tests": 240, "molecule kube": 300, "lab end to end": 780},
        "budgets.yml",
    )
    assert warnings == ["WARNING: molecule kube took 410 s, over its budget of 300 s (budgets.yml)."]
    assert [line.split()[-1] for line in table[1:]] == ["240", "over", "780"]


def test_lines_without_budget_or_seconds_are_kept_as_they_are():
    table, warnings = timing_report.report(
        ["site.yml, first run: 404 s", "no-op site.yml, dc1-gpu1: ok=251 skipped=66", ""], {}, "budgets.yml"
    )
    assert warnings == []
    assert table[1].split()[-2:] == ["404", "-"]
    assert table[-1] == "no-op site.yml, dc1-gpu1: ok=251 skipped=66"


@pytest.mark.parametrize("name", ["make test", "unit tests", "ansible-test sanity", "ansible-lint", "collection docs", "molecule", "lab end to end"])
def test_every_stage_of_make_test_has_a_budget(name):
    budgets = yaml.safe_load((ROOT / "tests" / "timing" / "budgets.yml").read_text(encoding="utf-8"))
    assert isinstance(budgets[name], int) and budgets[name] > 0


def test_every_molecule_scenario_has_a_budget_and_they_fit_the_stage():
    budgets = yaml.safe_load((ROOT / "tests" / "timing" / "budgets.yml").read_text(encoding="utf-8"))
    scenarios = sorted(path.parent.name for path in (ROOT / "molecule").glob("*/molecule.yml"))
    assert sorted(name.split(" ", 1)[1] for name in budgets if name.startswith("molecule ")) == scenarios
    # make test: setup, unit tests, molecule, then sanity and lint beside the end-to-end stage.
    serial = ["setup (venv, lab image)", "unit tests", "molecule"]
    beside = max(budgets["sanity and lint"], budgets["lab end to end"])
    assert sum(budgets[stage] for stage in serial) + beside <= budgets["make test"]
