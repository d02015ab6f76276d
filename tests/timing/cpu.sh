#!/usr/bin/env bash
# How busy the machine's CPUs were during a timed step, from /proc/stat (all processes, not only the step's).
#   cpu.sh                 prints the counters now: "<busy jiffies> <total jiffies>"
#   cpu.sh NAME BUSY TOTAL prints "NAME: CPU NN % busy (N cores)" since those counters
# A stage near 100 % gains nothing from running beside another; one well below it leaves cores idle.
set -euo pipefail
read -r _ user nice system idle iowait irq softirq steal _ < <(grep '^cpu ' /proc/stat)
busy=$(( user + nice + system + irq + softirq + steal ))
total=$(( busy + idle + iowait ))
if [[ $# -eq 0 ]]; then
    echo "$busy $total"
    exit 0
fi
name=$1 busy0=$2 total0=$3
elapsed=$(( total - total0 ))
(( elapsed > 0 )) || exit 0
echo "$name: CPU $(( 100 * (busy - busy0) / elapsed )) % busy ($(nproc) cores)"
