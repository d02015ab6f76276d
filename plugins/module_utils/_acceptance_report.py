# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The acceptance report's files: Markdown, HTML with the charts inline, JSON, JUnit XML and the rail chart (SVG).

``report_files(records, run)`` takes the node records of ``_acceptance.node_record`` and the run's facts (``started``,
``check_mode``, ``dcgm_diag_level``) and returns ``{file name: text}``: one section per node, failing nodes first, each
finding with its action. Plain Python without Ansible imports.
"""

from __future__ import annotations

import json
from xml.etree import ElementTree
from html import escape

from ansible_collections.onprem.gpu.plugins.module_utils import _svg as svg

FONT = 12
LINE = 16
PASS, FAIL = svg.BLUE, svg.ORANGE
_THRESHOLD_LINE = svg.stroke(svg.THRESHOLD, 2)
_RATE_LINE = svg.stroke(svg.BLACK, 1.5, "4 3")
CHART = "rails.svg"
# The JUnit test cases of a node, one per check; a finding names its check.
CHECKS = (("health", "node_health"), ("rails", "RDMA rails (ib_write_bw)"), ("nccl", "NCCL all_reduce_perf alone"),
          ("nvme", "NVMe cache sequential read"))


def ordered(records):
    """Failed nodes first, then by datacenter and name."""
    return sorted(records, key=lambda record: (record["verdict"] != "failed", record["datacenter"], record["host"]))


def _where(entry):
    parts = []
    if entry.get("gpu_index") is not None or entry.get("pci_bus_id"):
        parts.append(f"GPU {entry['gpu_index'] if entry.get('gpu_index') is not None else '?'}"
                     + (f" ({entry['pci_bus_id']})" if entry.get("pci_bus_id") else ""))
    if entry.get("device"):
        parts.append(entry["device"])
    if entry.get("xid") is not None:
        parts.append(f"Xid {entry['xid']}")
    return ", ".join(parts) or "node"


def _cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def _summary(records):
    failed = [record["host"] for record in records if record["verdict"] == "failed"]
    return (f"{len(records) - len(failed)} of {len(records)} nodes passed"
            + (f"; failed: {', '.join(failed)}." if failed else "."))


def _dcgm(run):
    level = run.get("dcgm_diag_level")
    return f"DCGM diagnostics at level {level}" if level else "no DCGM diagnostics"


def _figures(record):
    """Lines of the node's measured figures."""
    lines = []
    nccl = record.get("nccl")
    if nccl:
        lines.append(f"NCCL all_reduce_perf alone: busbw {nccl.get('judged_busbw')} GB/s (threshold {nccl.get('threshold')}, "
                     f"expected {nccl.get('expected')}): {nccl.get('verdict')}")
    nvme = record.get("nvme")
    if nvme and nvme.get("device"):
        judged = (f" (at least {nvme['min_mbps']:g} of {nvme['expected_mbps']:g} MB/s expected)" if nvme.get("min_mbps") is not None
                  else " (no expected figure: not judged)")
        lines.append(f"NVMe cache {nvme['device']} at {nvme['mount']}: sequential read "
                     + (f"{nvme['mbps']:g} MB/s" if nvme.get("mbps") is not None else "failed") + judged)
    if record.get("peer"):
        lines.append(f"RDMA rails measured against {record['peer']}")
    return lines


def markdown(records, run):
    records = ordered(records)
    verdict = "FAIL" if any(record["verdict"] == "failed" for record in records) else "PASS"
    lines = [f"# Acceptance: {verdict}", "",
             f"Run started {run.get('started')}{' in check mode (read-only checks only, no label written)' if run.get('check_mode') else ''}; "
             f"{_dcgm(run)}. {_summary(records)}", "",
             "| node | datacenter | verdict | taint | failing findings |", "|---|---|---|---|---|"]
    for record in records:
        failing = sum(entry["severity"] == "fail" for entry in record["findings"])
        lines.append(f"| {record['host']} | {record['datacenter']} | {record['verdict']} | "
                     f"{'onprem.gpu/unhealthy=' + record['code'] + ':NoSchedule' if record['code'] else ''} | {failing} |")
    if any(record["rails"] for record in records):
        lines += ["", f"![RDMA rail bandwidth per node against line rate]({CHART})"]
    for record in records:
        lines += ["", f"## {record['host']}: {record['verdict']}"]
        figures = _figures(record)
        if figures:
            lines += [""] + [f"- {line}" for line in figures]
        if record["findings"]:
            lines += ["", "| severity | check | finding | where | action | message |", "|---|---|---|---|---|---|"]
            lines += [f"| {entry['severity']} | {entry.get('check') or ''} | {entry['code']} | {_cell(_where(entry))} | "
                      f"{entry['action']} | {_cell(entry['message'])} |" for entry in record["findings"]]
        else:
            lines += ["", "No finding."]
        if record["rails"]:
            lines += ["", "| rail | average Gb/s | line rate Gb/s | threshold Gb/s |", "|---|---|---|---|"]
            lines += [f"| {rail['device']} | {rail['average_gbps'] if rail['average_gbps'] is not None else 'no result'} | "
                      f"{rail['rate_gbps']} | {rail['min_gbps']:g} |" for rail in record["rails"]]
        if record["skipped"]:
            lines += ["", "Not checked: " + "; ".join(f"{entry['check']} ({entry['reason'].rstrip('.')})" for entry in record["skipped"]) + "."]
    return "\n".join(lines) + "\n"


def html(records, run, chart):
    """A standalone page with the same content as the Markdown and the chart inline."""
    records = ordered(records)
    verdict = "FAIL" if any(record["verdict"] == "failed" for record in records) else "PASS"

    def table(headers, rows, row_class=None):
        return ("<table><thead><tr>" + "".join(f"<th>{escape(header)}</th>" for header in headers) + "</tr></thead><tbody>"
                + "".join(f"<tr{(' class=' + chr(34) + row_class(row) + chr(34)) if row_class else ''}>"
                          + "".join(f"<td>{escape(str(cell))}</td>" for cell in row) + "</tr>" for row in rows)
                + "</tbody></table>")

    body = [f"<h1>Acceptance: {verdict}</h1>",
            f"<p>Run started {escape(str(run.get('started')))}"
            f"{' in check mode (read-only checks only, no label written)' if run.get('check_mode') else ''}; "
            f"{escape(_dcgm(run))}. {escape(_summary(records))}</p>",
            table(["node", "datacenter", "verdict", "taint"],
                  [[record["host"], record["datacenter"], record["verdict"],
                    f"onprem.gpu/unhealthy={record['code']}:NoSchedule" if record["code"] else ""] for record in records],
                  lambda row: row[2])]
    if chart:
        body.append(f"<figure>{chart}</figure>")
    for record in records:
        body.append(f"<h2 class=\"{record['verdict']}\">{escape(record['host'])}: {record['verdict']}</h2>")
        figures = _figures(record)
        if figures:
            body.append("<ul>" + "".join(f"<li>{escape(line)}</li>" for line in figures) + "</ul>")
        if record["findings"]:
            body.append(table(["severity", "check", "finding", "where", "action", "message"],
                              [[entry["severity"], entry.get("check") or "", entry["code"], _where(entry), entry["action"],
                                entry["message"]] for entry in record["findings"]], lambda row: row[0]))
        else:
            body.append("<p>No finding.</p>")
        if record["skipped"]:
            body.append("<p>Not checked: " + escape("; ".join(f"{entry['check']} ({entry['reason'].rstrip('.')})"
                                                              for entry in record["skipped"])) + ".</p>")
    style = ("body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;margin:1em 0}"
             "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}th{background:#f4f4f4}"
             "tr.failed td,tr.fail td{background:#fdecea}h2.failed{color:#b71c1c}h2.passed{color:#1b5e20}")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"/><title>Acceptance</title>"
            f"<style>{style}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")


def junit(records, run):
    """JUnit XML: a suite per node, a test case per check, failed when a failing finding names the check."""
    suites = ElementTree.Element("testsuites", name="acceptance")
    for record in ordered(records):
        suite = ElementTree.SubElement(suites, "testsuite", name=record["host"], timestamp=str(run.get("started") or ""))
        failures = 0
        for check, title in CHECKS:
            case = ElementTree.SubElement(suite, "testcase", classname=f"acceptance.{record['host']}", name=title)
            failing = [entry for entry in record["findings"] if entry.get("check") == check and entry["severity"] == "fail"]
            skipped = [entry for entry in record["skipped"] if entry["check"] == check]
            if failing:
                failures += 1
                element = ElementTree.SubElement(case, "failure", type=failing[0]["code"], message=failing[0]["message"])
                element.text = "\n".join(f"{entry['code']} ({_where(entry)}): {entry['message']} Action: {entry['action']}."
                                         for entry in failing)
            elif skipped:
                ElementTree.SubElement(case, "skipped", message=skipped[0]["reason"])
        suite.set("tests", str(len(CHECKS)))
        suite.set("failures", str(failures))
    return ElementTree.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def rail_chart(records, title="RDMA rail bandwidth per node against line rate"):
    """One horizontal bar per rail (ib_write_bw average), grouped by node, failing nodes first, with each rail's line rate
    (dashed) and threshold (red)."""
    rows = []
    for record in ordered(records):
        for rail in record["rails"]:
            rows.append({"node": record["host"], "rail": rail["device"], "value": rail["average_gbps"], "rate": rail["rate_gbps"],
                         "threshold": rail["min_gbps"], "failed": rail["average_gbps"] is None or rail["average_gbps"] < rail["min_gbps"]})
    if not rows:
        return None
    width, row_height, plot_width, value_room = 900, 18, 560, 110
    label_room = min(max(svg.text_width(f"{row['node']} {row['rail']}", FONT) for row in rows) + 12, width - plot_width - value_room - 24)
    left = 12 + label_room
    parts = [svg.text(width / 2, 24, svg.fit(title, width - 24, 15, bold=True), "middle", 15, ' font-weight="bold"')]
    legend_y = 50
    parts += svg.row_legend(left, legend_y, [("rect", PASS, PASS, "passed"), ("rect", "url(#failed)", FAIL, "below threshold"),
                                             ("line", _RATE_LINE, None, "line rate"),
                                             ("line", _THRESHOLD_LINE, None, "threshold")], FONT)[0]
    top = legend_y + 30
    gaps = sum(1 for index in range(1, len(rows)) if rows[index]["node"] != rows[index - 1]["node"])
    plot_height = row_height * len(rows) + gaps * 8
    axis_top, ticks = svg.axis(max([row["value"] or 0.0 for row in rows] + [row["rate"] for row in rows]), 8)

    def x_of(value):
        return left + value / axis_top * plot_width

    for value, label in zip(ticks, svg.tick_labels(ticks)):
        parts.append(svg.line(x_of(value), top, x_of(value), top + plot_height, 'stroke="#e0e0e0"'))
        parts.append(svg.text(x_of(value), top + plot_height + 16, label, "middle"))
    parts.append(svg.text(left + plot_width / 2, top + plot_height + 34, "ib_write_bw average (Gb/s)", "middle"))
    y = top
    for index, row in enumerate(rows):
        if index and row["node"] != rows[index - 1]["node"]:
            y += 8
        parts.append(svg.text(left - 8, y + row_height / 2 + 4, svg.fit(f"{row['node']} {row['rail']}", label_room - 12, FONT), "end"))
        if row["value"] is None:
            parts.append(svg.text(left + 6, y + row_height / 2 + 4, "no result: FAIL", extra=' font-weight="bold"'))
        else:
            fill, edge = ("url(#failed)", FAIL) if row["failed"] else (PASS, PASS)
            parts.append(f'<rect x="{left}" y="{y + 3}" width="{x_of(row["value"]) - left:.1f}" height="{row_height - 6}" fill="{fill}" stroke="{edge}"/>')
            label = f"{row['value']:g}" + (" FAIL" if row["failed"] else "")
            parts.append(svg.text(max(x_of(row["value"]), x_of(row["rate"])) + 6, y + row_height / 2 + 4, label,
                                  extra=svg.HALO + (' font-weight="bold"' if row["failed"] else "")))
        parts.append(svg.line(x_of(row["rate"]), y, x_of(row["rate"]), y + row_height, _RATE_LINE))
        parts.append(svg.line(x_of(row["threshold"]), y, x_of(row["threshold"]), y + row_height, _THRESHOLD_LINE))
        y += row_height
    parts.append(f'<rect x="{left}" y="{top}" width="{plot_width}" height="{plot_height}" fill="none" stroke="#333333"/>')
    return svg.document(width, top + plot_height + 48, FONT, title, parts, defs=[svg.hatch("failed", FAIL)])


def report_files(records, run):
    """File name -> text of every report file."""
    if not records:
        raise ValueError("The acceptance report needs at least one node.")
    chart = rail_chart(records)
    files = {"acceptance.md": markdown(records, run), "acceptance.html": html(records, run, chart),
             "acceptance.json": json.dumps({"run": run, "nodes": ordered(records)}, indent=1, sort_keys=True) + "\n",
             "junit.xml": junit(records, run)}
    if chart:
        files[CHART] = chart
    return files
