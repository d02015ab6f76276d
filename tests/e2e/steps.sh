# shellcheck shell=bash
# shellcheck disable=SC2154 # out, playbook and e2e_name are the sourcing script's
# Shared by the e2e scripts that run playbooks on the lab (source it): their environment, their log folder and
# run_step. The sourcing script sets e2e_name (for its messages) and out (its log folder, emptied here), then playbook
# (the ansible-playbook command, with its inventories).
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo" || exit 1
export CONTAINERS_CONF="$repo/lab/podman/containers.conf" ANSIBLE_CONFIG="$repo/ansible.cfg" ANSIBLE_NOCOLOR=1
timings="$repo/.build/timings.txt"
rm -rf "$out" && mkdir -p "$out"

# Run a playbook, keep its output, record its wall time; $1 is the name, $2 the log, $3 the expected outcome (pass or fail).
run_step() {
    local name="$1" log="$out/$2.log" expect="$3"
    shift 3
    local start cpu rc=0
    start=$(date +%s)
    cpu=$(bash "$repo/tests/timing/cpu.sh")
    "${playbook[@]}" "$@" >"$log" 2>&1 || rc=$?
    local took=$(( $(date +%s) - start ))
    if [[ "$expect" == pass && $rc -ne 0 ]] || [[ "$expect" == fail && $rc -eq 0 ]]; then
        tail -n 40 "$log" >&2
        echo "$e2e_name: $name should $expect but exited $rc; full log in $log" >&2
        return 1
    fi
    echo "$name: $took s" | tee -a "$timings"
    # shellcheck disable=SC2086 # two counters
    bash "$repo/tests/timing/cpu.sh" "$name" $cpu >>"$timings"
}
