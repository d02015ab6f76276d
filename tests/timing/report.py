"""Print make test's wall times next to their budgets, and warn about each stage over its budget.

Reads the lines `<name>: <seconds> s` that the Makefile and the end-to-end scripts append to
.build/timings.txt, and the budgets in tests/timing/budgets.yml. Other lines of the file (counts such as
the tasks of a no-op site.yml) are printed as they are. Always exits 0: timing is reported, not tested.
"""

import pathlib
import re
import sys

import yaml

TIMED_LINE = re.compile(r"^(?P<name>.+): (?P<seconds>\d+) s$")


def read_budgets(path):
    budgets = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return {str(name): int(seconds) for name, seconds in budgets.items()}


def report(timings_lines, budgets, budgets_name):
    """The table's lines and the warnings' lines."""
    rows, notes, warnings = [], [], []
    for line in timings_lines:
        line = line.rstrip("\n")
        match = TIMED_LINE.match(line)
        if not match:
            if line.strip():
                notes.append(line)
            continue
        name, seconds = match["name"], int(match["seconds"])
        budget = budgets.get(name)
        rows.append((name, seconds, budget))
        if budget is not None and seconds > budget:
            warnings.append(f"WARNING: {name} took {seconds} s, over its budget of {budget} s ({budgets_name}).")
    width = max([len(row[0]) for row in rows] + [len("stage")])
    table = [f"{'stage':<{width}}  {'seconds':>7}  {'budget':>6}"]
    for name, seconds, budget in rows:
        flag = "  over" if budget is not None and seconds > budget else ""
        table.append(f"{name:<{width}}  {seconds:>7}  {budget if budget is not None else '-':>6}{flag}")
    return table + notes, warnings


def main(timings_path, budgets_path):
    timings = pathlib.Path(timings_path)
    budgets = pathlib.Path(budgets_path)
    if not timings.exists():
        print(f"No wall times recorded ({timings} is missing).")
        return 0
    table, warnings = report(timings.read_text(encoding="utf-8").splitlines(), read_budgets(budgets), budgets_path)
    print(f"== wall times (budgets: {budgets_path}) ==")
    print("\n".join(table))
    for warning in warnings:
        print(warning)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
