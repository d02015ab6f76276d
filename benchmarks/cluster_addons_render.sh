#!/usr/bin/env bash
# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# Time to render and validate the GPU platform of both example datacenters, offline, as an operator would:
#   1. playbooks/cluster_addons.yml -e cluster_addons_render_dir=DIR for inventories/onprem-dc1 and onprem-dc2, one after
#      the other (it contacts no host);
#   2. kubectl kustomize of each DIR/clusters/<datacenter> (kustomize 5.7 inside kubectl 1.35);
#   3. each chart Application rendered with helm template (its pinned chart archive and the rendered values).
# Prints each step's wall time, the files of each tree and the objects kustomize builds. Validation against the schemas
# and promtool are in tests/integration/test_cluster_addons_render.py, which prints its counts with -s.
# Needs `make venv k8s-clients`. Usage: benchmarks/cluster_addons_render.sh [DIR] (default: a temporary folder).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$(mktemp -d)}"
mkdir -p "$out"
export ANSIBLE_CONFIG="$repo/ansible.cfg" ANSIBLE_NOCOLOR=1 PYTHONPATH="$repo/.build/collections${PYTHONPATH:+:$PYTHONPATH}"
charts="$repo/tests/integration/data/cluster_addons/charts"
seconds() { python3 -c 'import sys, time; print(f"{time.monotonic() - float(sys.argv[1]):.1f}")' "$1"; }
now() { python3 -c 'import time; print(time.monotonic())'; }

total=$(now)
for dc in dc1 dc2; do
    start=$(now)
    "$repo/.venv/bin/ansible-playbook" -i "$repo/inventories/onprem-$dc" "$repo/playbooks/cluster_addons.yml" \
        -e "cluster_addons_render_dir=$out/onprem-$dc" >"$out/render-$dc.log" 2>&1 || { tail -20 "$out/render-$dc.log"; exit 1; }
    echo "render onprem-$dc: $(seconds "$start") s, $(find "$out/onprem-$dc/clusters/$dc" -type f | wc -l) files"
    start=$(now)
    "$repo/.build/bin/kubectl" kustomize "$out/onprem-$dc/clusters/$dc" >"$out/$dc.yaml"
    echo "kubectl kustomize clusters/$dc: $(seconds "$start") s, $(grep -c '^kind: ' "$out/$dc.yaml") objects"
    start=$(now)
    # The charts' helm template runs as direct apply makes them (module_utils/_addons_charts.py: no hooks, CRDs included), from
    # the archives, with helm's default --kube-version.
    objects=$("$repo/.venv/bin/python" - "$out/$dc.yaml" "$repo/.build/bin/helm" "$charts" <<'PY'
import subprocess, sys, yaml
from ansible_collections.onprem.gpu.plugins.module_utils._addons_charts import parse_documents, template_run
rendered, helm, charts = sys.argv[1], sys.argv[2], sys.argv[3]
count = 0
for app in (d for d in yaml.safe_load_all(open(rendered)) if d and d["kind"] == "Application" and "helm" in d["spec"].get("source", {})):
    run = template_run(app, helm, charts, "")
    assert run["argv"], run["problem"]
    count += len(parse_documents(subprocess.run(run["argv"], input=run["stdin"], capture_output=True, text=True, check=True).stdout))
print(count)
PY
)
    echo "helm template of clusters/$dc's charts: $(seconds "$start") s, $objects objects"
done
echo "both datacenters rendered, built and templated: $(seconds "$total") s (trees in $out)"
