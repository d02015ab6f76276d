#!/usr/bin/env bash
# Continuous GPU health on the simulated rack (roles/node_health, playbooks/node_health.yml), after site.yml:
#   1. deploy the agents and the taint controllers (lab periods: agent 30 s, controller 10 s, hold-down 30 s);
#   2. an operator's own taint onprem.gpu/unhealthy on dc2-gpu1, then Xid 79 there: the controller leaves it as it is;
#   3. Xid 79 on dc1-gpu1 (lab-gpu-fault): GPUHealthy False and the taint onprem.gpu/unhealthy=xid (owner node-health)
#      within one agent period plus one controller round (the times are printed);
#   4. Xid 79 on dc1-gpu2 too, so every GPU node of dc1 fails: at most max(1, floor(2 * 10 / 100)) = 1 is tainted, the
#      circuit breaker opens (onprem_gpu_health_circuit_breaker_open 1 on dc1-cp1) and the alert's expression fires under
#      promtool test rules on that live metric;
#   5. the Xids cleared (what the reboot Xid 79 asks for does to the kernel log since boot): GPUHealthy True, the breaker
#      closes, the taint goes after the hold-down and not before; dc2-gpu1 keeps its operator's taint, which the script
#      then removes itself.
# Ends as it found the lab (faults cleared, taints gone, breaker closed), the agents still deployed.
# Needs the lab up with site.yml run (lab_e2e.sh), the real kubectl in .build/bin (make k8s-clients) and promtool.
set -euo pipefail

e2e_name="node health e2e"
out="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/.build/e2e/node_health"
# shellcheck source=tests/e2e/steps.sh
source "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
playbook=("$repo/.venv/bin/ansible-playbook" -i inventories/lab)
kubectl_dc1=("$repo/.build/bin/kubectl" --kubeconfig "$repo/inventories/lab/artifacts/dc1/admin.conf")
kubectl_dc2=("$repo/.build/bin/kubectl" --kubeconfig "$repo/inventories/lab/artifacts/dc2/admin.conf")
taint=onprem.gpu/unhealthy
agent_period=30 controller_period=10 hold_down=30
fail() { echo "$e2e_name: $*" >&2; exit 1; }
kube() { if [[ "$1" == dc2-* ]]; then "${kubectl_dc2[@]}" "${@:2}"; else "${kubectl_dc1[@]}" "${@:2}"; fi; }
# "<GPUHealthy status> <reason> <taint value or -> <owner or ->" of a node.
state() {
    kube "$1" get node "$1" -o json | python3 -c '
import json, sys
n = json.load(sys.stdin)
c = next((c for c in n["status"].get("conditions", []) if c["type"] == "GPUHealthy"), {})
t = next((t for t in n["spec"].get("taints") or [] if t["key"] == "onprem.gpu/unhealthy"), None)
owner = (n["metadata"].get("annotations") or {}).get("onprem.gpu/unhealthy-owner", "-")
print(c.get("status", "-"), c.get("reason", "-"), (t.get("value", "") if t else "-"), owner)'
}
# Wait up to $3 seconds for node $1's state to match the regular expression $2; prints the seconds it took.
wait_state() {
    local start deadline current
    start=$(date +%s.%N) deadline=$(( $(date +%s) + $3 ))
    while :; do
        current="$(state "$1")"
        [[ "$current" =~ $2 ]] && { printf '%.1f\n' "$(echo "$(date +%s.%N) - $start" | bc)"; return 0; }
        (( $(date +%s) < deadline )) || fail "$1 is '$current', not /$2/ after $3 s"
        sleep 1
    done
}
breaker() { podman exec onprem-gpu-lab-dc1-cp1 cat /var/lib/node_exporter/textfile/onprem_gpu_health_controller.prom 2>/dev/null \
    | awk '$1 ~ /^onprem_gpu_health_circuit_breaker_open/ {print $2}'; }
wait_breaker() {
    local deadline=$(( $(date +%s) + $2 ))
    until [[ "$(breaker)" == "$1" ]]; do (( $(date +%s) < deadline )) || fail "the dc1 circuit breaker is '$(breaker)', not $1"; sleep 1; done
}
fault() { podman exec "onprem-gpu-lab-$1" python3 /usr/share/nvidia-smi-double/lab-gpu-fault "${@:2}" >/dev/null; }
cleanup() {
    fault dc1-gpu1 xid 3 79 --clear || true
    fault dc1-gpu2 xid 3 79 --clear || true
    fault dc2-gpu1 xid 3 79 --clear || true
    "${kubectl_dc2[@]}" taint node dc2-gpu1 "$taint:NoSchedule-" >/dev/null 2>&1 || true
}
trap cleanup EXIT

# 1. Deploy (on a lab where it is deployed already: the no-op run).
run_step "node health: deploy" deploy pass playbooks/node_health.yml
for node in dc1-gpu1 dc1-gpu2 dc2-gpu1; do wait_state "$node" '^True GPUsHealthy - ' $(( agent_period + 15 )) >/dev/null; done
wait_breaker 0 $(( controller_period + 5 ))
start=$(date +%s)

# 2. The operator's own taint, then a failure under it.
"${kubectl_dc2[@]}" taint node dc2-gpu1 "$taint=operator:NoSchedule" >/dev/null
fault dc2-gpu1 xid 3 79

# 3. Xid 79 on dc1-gpu1: condition, then taint.
fault dc1-gpu1 xid 3 79
injected=$(date +%s.%N)
condition_s=$(wait_state dc1-gpu1 '^False Xid ' $(( agent_period + 15 )))
wait_state dc1-gpu1 '^False Xid xid node-health$' $(( agent_period + controller_period + 15 )) >/dev/null
taint_s=$(printf '%.1f' "$(echo "$(date +%s.%N) - $injected" | bc)")
echo "node health: Xid 79 -> GPUHealthy False in ${condition_s} s, taint in ${taint_s} s (agent period ${agent_period} s, controller ${controller_period} s)" | tee -a "$timings"
(( ${taint_s%.*} <= agent_period + controller_period + 5 )) || fail "the taint took ${taint_s} s, more than one agent period and one controller round"

wait_state dc2-gpu1 '^False Xid operator -$' $(( agent_period + 15 )) >/dev/null

# 4. Every GPU node of dc1 failing: one taint, the breaker open, the alert's expression fires on the live metric.
fault dc1-gpu2 xid 3 79
wait_state dc1-gpu2 '^False Xid - -$' $(( agent_period + 15 )) >/dev/null
wait_breaker 1 $(( controller_period + 5 ))
sleep "$controller_period"
[[ "$(state dc1-gpu2)" == "False Xid - -" ]] || fail "dc1-gpu2 got tainted past the circuit breaker: $(state dc1-gpu2)"
value=$(breaker)
"$repo/.venv/bin/python" - "$out" "$value" <<'PY'
import sys, yaml
sys.path.insert(0, ".build/collections")
from ansible_collections.onprem.gpu.plugins.module_utils._addons_render import continuous_health_rules
rules = [rule for rule in continuous_health_rules({"health_tainted_for": "5m", "health_unknown_for": "15m"})
         if rule["alert"] == "GPUHealthCircuitBreakerOpen"]
out, value = sys.argv[1], sys.argv[2]
yaml.safe_dump({"groups": [{"name": "breaker", "rules": [dict(rule, annotations={}) for rule in rules]}]}, open(f"{out}/rules.yaml", "w"))
yaml.safe_dump({"rule_files": [f"{out}/rules.yaml"], "evaluation_interval": "1m", "tests": [{
    "interval": "1m", "input_series": [{"series": 'onprem_gpu_health_circuit_breaker_open{cluster="dc1"}', "values": f"{value}x5"}],
    "alert_rule_test": [{"eval_time": "2m", "alertname": "GPUHealthCircuitBreakerOpen",
                         "exp_alerts": [{"exp_labels": {"severity": "critical", "cluster": "dc1"}}]}]}]}, open(f"{out}/rules-test.yaml", "w"))
PY
promtool="$repo/.build/bin/promtool"
[[ -x "$promtool" ]] || promtool="$(command -v promtool)"
"$promtool" test rules "$out/rules-test.yaml" >"$out/promtool.log" 2>&1 || { cat "$out/promtool.log" >&2; fail "the breaker alert did not fire on the live metric"; }
echo "node health: circuit breaker open with dc1-gpu2 held back; GPUHealthCircuitBreakerOpen fires under promtool test rules"

# 5. Cleared: healthy again, the breaker closes, the taint goes after the hold-down.
fault dc1-gpu1 xid 3 79 --clear
fault dc1-gpu2 xid 3 79 --clear
fault dc2-gpu1 xid 3 79 --clear
healthy_s=$(wait_state dc1-gpu1 '^True GPUsHealthy xid node-health$' $(( agent_period + 15 )))
healthy_at=$(date +%s)
wait_state dc2-gpu1 '^True GPUsHealthy operator -$' $(( agent_period + 15 )) >/dev/null
dc2_healthy_at=$(date +%s)
wait_breaker 0 $(( agent_period + controller_period + 15 ))
wait_state dc1-gpu1 '^True GPUsHealthy - -$' $(( hold_down + controller_period + 15 )) >/dev/null
released=$(( $(date +%s) - healthy_at ))
(( released + 2 >= hold_down )) || fail "the taint came off ${released} s after the node was healthy, before the ${hold_down} s hold-down"
echo "node health: healthy ${healthy_s} s after the clear, taint removed ${released} s later (hold-down ${hold_down} s)" | tee -a "$timings"
rest=$(( dc2_healthy_at + hold_down + controller_period - $(date +%s) ))
(( rest <= 0 )) || sleep "$rest"
[[ "$(state dc2-gpu1)" == "True GPUsHealthy operator -" ]] || fail "the operator's taint on dc2-gpu1 changed: $(state dc2-gpu1)"
echo "node health: the operator's taint on dc2-gpu1 stayed through a failure and ${hold_down} s of health"
"${kubectl_dc2[@]}" taint node dc2-gpu1 "$taint:NoSchedule-" >/dev/null
echo "node health e2e: $(( $(date +%s) - start )) s after the deploy"
