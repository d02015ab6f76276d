"""gpu_occupancy and playbooks/gpu_occupancy_report.yml on a real Prometheus holding the lab's month.

lab/prometheus generates the month of dcgm-exporter metrics from its scenario (a busy training node, inference on
MIG, a notebook forgotten for 12 days, a 6-hour exporter gap), backfills it with promtool and serves it on
127.0.0.1; its ground truth is counted by the generator, independently of the collection's code. The report's
numbers must equal it. The month is scraped every 30 minutes here so that the whole file runs in well under a
minute; benchmarks/gpu_occupancy.py runs the same month at 1-minute resolution.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ansible.module_utils.testing import patch_module_args

REPO = Path(__file__).resolve().parents[2]
# The module is imported as the collection's; tests/conftest.py makes the collection importable.
sys.path[:0] = [str(REPO / "tests" / "unit"), str(REPO / "lab" / "prometheus")]
import conftest  # noqa: E402,F401  pylint: disable=wrong-import-position,unused-import
import lab_prometheus  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.onprem.gpu.plugins.modules import gpu_occupancy  # noqa: E402  pylint: disable=wrong-import-position

ANSIBLE_PLAYBOOK = Path(sys.executable).with_name("ansible-playbook")
INTERVAL = "30m"
MONTH = {"start": "2026-10-01T00:00:00Z", "end": "2026-10-31T00:00:00Z", "step": INTERVAL}
LAB_NODES = {"dc1-gpu1": 8, "dc1-gpu2": 8, "dc2-gpu1": 8}
HOURS = ("available_gpu_hours", "allocated_gpu_hours", "active_gpu_hours", "idle_allocated_gpu_hours")

pytestmark = pytest.mark.skipif(lab_prometheus.binaries() is None,
                                reason="prometheus and promtool are missing: make prometheus-tools")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    directory = tmp_path_factory.mktemp("prometheus")
    truth, _timings = lab_prometheus.build(directory, INTERVAL)
    with lab_prometheus.serve(directory) as url:
        yield {"url": url, "truth": truth}


def run_module(capsys, **args):
    with patch_module_args(args), pytest.raises(SystemExit):
        gpu_occupancy.main()
    return json.loads(capsys.readouterr().out)


def hours(entry):
    return {key: entry[key] for key in HOURS}


def test_the_month_equals_the_ground_truth(lab, capsys):
    truth = lab["truth"]
    result = run_module(capsys, prometheus_url=lab["url"], expected_nodes=LAB_NODES, **MONTH)
    assert hours(result["total"]) == truth["total"]
    assert {node["node"]: hours(node) for node in result["nodes"]} == truth["nodes"]
    assert {entry["namespace"]: hours(entry) for entry in result["namespaces"]} == truth["namespaces"]
    keys = ("node", "gpu", "gpu_instance", "namespace", "pod", "idle_allocated_hours", "since", "until")
    assert [{key: entry[key] for key in keys} for entry in result["idle_allocations"]] == truth["idle_allocations"]
    notebook = result["idle_allocations"][0]
    assert (notebook["pod"], notebook["idle_allocated_hours"], notebook["since"]) == ("jupyter-anna", 288.0, "2026-10-03T09:00:00Z")
    gaps = {f"{entry['node']}/{entry['gpu']}": entry["unknown_gpu_hours"] for entry in result["unknown"] if entry["kind"] == "gap"}
    assert gaps == truth["unknown"]
    assert [entry["kind"] for entry in result["unknown"]] == ["gap"] * 8
    assert result["total"]["unknown_gpu_hours"] == 48.0
    assert result["queries"]["count"] == 11


def test_one_datacenter_by_its_cluster_label(lab, capsys):
    result = run_module(capsys, prometheus_url=lab["url"], selector='cluster="dc2"', expected_nodes={"dc2-gpu1": 8}, **MONTH)
    assert [node["node"] for node in result["nodes"]] == ["dc2-gpu1"]
    assert hours(result["total"]) == lab["truth"]["nodes"]["dc2-gpu1"]
    # dc2 is scraped through a ServiceMonitor without honorLabels: the workload's namespace is exported_namespace, and a
    # free GPU's namespace label is the exporter's own (gpu-operator), which is no namespace's GPU time.
    assert [entry["namespace"] for entry in result["namespaces"]] == ["", "research", "team-nlp"]


def test_a_node_without_series_is_unknown_not_idle(lab, capsys):
    result = run_module(capsys, prometheus_url=lab["url"], expected_nodes=dict(LAB_NODES, **{"dc2-gpu9": 8}), **MONTH)
    assert hours(result["total"]) == lab["truth"]["total"]
    missing = [entry for entry in result["unknown"] if entry["kind"] == "no_series"]
    assert missing == [{"node": "dc2-gpu9", "gpu": None, "kind": "no_series", "unknown_gpu_hours": 5760.0,
                        "reason": "dc2-gpu9 has no DCGM_FI_DEV_FB_USED or DCGM_FI_PROF_SM_ACTIVE series in the window: its exporter "
                                  "is down, the node is absent, or its hostname label (Hostname up to dcgm-exporter 4.5.3-4.8.2) "
                                  "differs from the inventory name."}]


def test_a_window_without_data(lab, capsys):
    result = run_module(capsys, prometheus_url=lab["url"], start="2026-08-01T00:00:00Z", end="2026-09-01T00:00:00Z", step=INTERVAL)
    assert result["msg"] == ("Prometheus holds no DCGM_FI_DEV_FB_USED or DCGM_FI_PROF_SM_ACTIVE samples between 2026-08-01T00:00:00Z and "
                             "2026-09-01T00:00:00Z: check that dcgm-exporter is scraped, the selector and the window.")


def run_report(lab, report_dir, *extra, cwd=REPO):
    environment = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    return subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", str(REPO / "inventories" / "lab"), str(REPO / "playbooks" / "gpu_occupancy_report.yml"),
         "-e", f"gpu_occupancy_report_dir={report_dir}", "-e", f"gpu_occupancy_prometheus_url={lab['url']}",
         "-e", f"gpu_occupancy_step={INTERVAL}", *extra],
        cwd=cwd, env=environment, capture_output=True, text=True, timeout=300, check=False,
    )


def test_a_relative_report_dir_is_relative_to_where_the_play_runs(lab, tmp_path):
    """Not to playbooks/, where a module resolves a relative path: the report would land inside the collection."""
    result = run_report(lab, "reports/2026-10", cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert (tmp_path / "reports" / "2026-10" / "gpu-occupancy.md").is_file()
    assert not (REPO / "playbooks" / "reports").exists()


def test_the_report_of_the_lab_month(lab, tmp_path):
    result = run_report(lab, tmp_path / "report")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    files = sorted(path.name for path in (tmp_path / "report").iterdir())
    assert files == ["cost-dc1.svg", "cost-dc2.svg", "gpu-cost.csv", "gpu-occupancy.csv", "gpu-occupancy.html", "gpu-occupancy.json",
                     "gpu-occupancy.md", "idle-heatmap.svg", "occupancy.svg", "teams.svg"]
    datacenters = {entry["datacenter"]: entry for entry in json.loads((tmp_path / "report" / "gpu-occupancy.json").read_text())}
    truth = lab["truth"]
    for datacenter in ("dc1", "dc2"):
        for node in datacenters[datacenter]["occupancy"]["nodes"]:
            assert hours(node) == truth["nodes"][node["node"]]
    # The reference server: about 8,000 EUR a month all in, breaking even against 25,000 EUR of cloud at 32 %.
    assert datacenters["dc1"]["costs"]["eur_per_month"] == 16032.67
    assert datacenters["dc1"]["costs"]["break_even_occupancy"] == 0.320653
    markdown = (tmp_path / "report" / "gpu-occupancy.md").read_text()
    assert "| dc2 | dc2-gpu1 | 7 | research | jupyter-anna | 288.0 | 2026-10-03T09:00:00Z | 2026-10-15T09:00:00Z |" in markdown


@pytest.mark.parametrize(("extra", "message"), [
    (["-e", '{"gpu_occupancy_cost_models": {"NVIDIA H100 80GB HBM3": {"purchase_eur": -280000}}}'],
     "gpu_occupancy_cost_models['NVIDIA H100 80GB HBM3'].purchase_eur must not be negative, got -280000."),
    (["-e", '{"gpu_occupancy_cost_models": {}}'], "Datacenter dc1 has no gpu_occupancy_cost_models (cost inputs per GPU node model)."),
])
def test_bad_cost_inputs_stop_before_any_query(lab, tmp_path, extra, message):
    result = run_report(lab, tmp_path / "report", *extra)
    assert result.returncode != 0
    assert message in " ".join(result.stdout.split())
    assert "Measure each datacenter" not in result.stdout
    assert not (tmp_path / "report").exists()
