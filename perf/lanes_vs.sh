#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# What lanes (FTCC_LANES) buy when several ops are in flight: ftcc-perf -m collnet (the plug-in
# dlopened, -d ops in flight as NCCL's proxy keeps them, polled with sched_yield) with
# FTCC_LANES=1 (one op at a time) against 2 and 4 (the plug-in's default), float32 SUM, 64 KiB .. 16 MiB,
# N = 2 and 3 ranks on this host. The settings take turns, the order rotating from rep to rep;
# every number is the median over REPS runs of each run's median op time (with ops in flight:
# the time between completions). A checked run (-c 1) per setting comes first and must report
# 0 wrong.
#
# usage: perf/lanes_vs.sh [BUILD_DIR]     (default: build)
# env:   REPS=3  NS="2 3"  LANES="1 2 4"  DEPTH=8  OUT=<dir to keep the raw JSON lines>
set -euo pipefail

BUILD=${1:-build}
PERF=$BUILD/ftcc-perf
PLUGIN=$BUILD/libnccl-net-ftcc.so
NS=${NS:-"2 3"}
REPS=${REPS:-3}
read -r -a LS <<<"${LANES:-1 2 4}"
DEPTH=${DEPTH:-8}
SWEEP=(-b 64K -e 16M -f 4 -n 20 -w 3 -d "$DEPTH")

# shellcheck source=perf/vs_lib.sh
source "$(dirname "$0")/vs_lib.sh"
vs_require "$BUILD" "$PERF" "$PLUGIN"
export FTCC_SOCKET_IFNAME=lo

# run NAME LANES MODE-ARGS...: one run of ftcc-perf, its JSON lines appended to $WORK/NAME.json
run() {
	local name=$1 lanes=$2
	shift 2
	FTCC_LANES=$lanes timeout 600 "$PERF" -p "$PLUGIN" -j "$@" 2>>"$WORK/stderr.log" |
		grep '^{' >>"$WORK/$name.json" || echo "failed: FTCC_LANES=$lanes $PERF $*" >&2
}

echo "# ftcc lanes: FTCC_LANES=${LS[*]} under ftcc-perf -m collnet, on 127.0.0.1," \
	"$(date -u +%Y-%m-%dT%H:%MZ)"
echo "# $(nproc) cores, $(uname -sr), REPS=$REPS, float32 sum, ${SWEEP[*]}"
echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

for n in $NS; do
	checks=""
	for l in "${LS[@]}"; do
		run "check$n-$l" "$l" -m collnet -N "$n" -b 1K -e 4M -f 16 -n 3 -w 1 -c 1 -d "$DEPTH"
		checks+=" FTCC_LANES=$l: $(wrong "check$n-$l");"
	done
	for ((i = 0; i < REPS; i++)); do
		for ((k = 0; k < ${#LS[@]}; k++)); do
			l=${LS[$(((i + k) % ${#LS[@]}))]}
			run "sweep$n-$l" "$l" -m collnet -N "$n" "${SWEEP[@]}"
		done
	done
	echo
	echo "## N=$n: median op time in us (median of $REPS runs); ratio = FTCC_LANES=L /" \
		"FTCC_LANES=${LS[0]} (below 1: faster)"
	echo "checked runs (-c 1, 1 KiB .. 4 MiB), #wrong:$checks"
	printf "%-8s" size
	for l in "${LS[@]}"; do
		printf " %11s" "L=$l(us)"
	done
	for l in "${LS[@]:1}"; do
		printf " %9s" "ratio L$l"
	done
	echo
	for s in $(jq -r 'select(.event | not) | .size' "$WORK/sweep$n-${LS[0]}.json" \
		2>/dev/null | sort -nu); do
		base=$(pick "sweep$n-${LS[0]}" "$s" time_median_us)
		printf "%-8s" "$((s >> 10))KiB"
		for l in "${LS[@]}"; do
			printf " %11.1f" "$(pick "sweep$n-$l" "$s" time_median_us)"
		done
		for l in "${LS[@]:1}"; do
			printf " %9s" "$(ratio "$(pick "sweep$n-$l" "$s" time_median_us)" "$base" 3)"
		done
		echo
	done
done
echo
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
if [[ -s $WORK/stderr.log ]]; then
	echo "# stderr of the runs ($(wc -l <"$WORK/stderr.log") lines; first lines):"
	head -5 "$WORK/stderr.log" | sed 's/^/#   /'
fi
