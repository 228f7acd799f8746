#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Measures what the CollNet ABI layer costs: ftcc-perf -m collnet (the plug-in dlopened,
# ncclCollNetPlugin_v11 iallreduce + test polled with sched_yield, as NCCL's proxy drives it)
# against ftcc-perf -m allreduce -P (the same engine through the C API, ftcc_iallreduce +
# ftcc_test polled the same way), float32 SUM, 1 MiB .. 64 MiB, N = 2 and 4 ranks on this
# host. Both modes run the same sweep code; only the driver of an op differs, so the ratio
# isolates the plug-in (dlopen'd table, request slots, handles, connect path).
# For reference the blocking C API (ftcc-perf -m allreduce, ftcc_allreduce) runs too. The modes
# take turns, the order rotating from rep to rep (against drift of a shared host); every
# number is the median over REPS runs of each run's median op time (an op's time is the
# slowest rank's). An 8-byte op, 2000 per run, shows the fixed cost per op. A checked run
# (-c 1) of each mode per N comes first and must report 0 wrong.
#
# usage: perf/collnet_vs_capi.sh [BUILD_DIR]     (default: build)
# env:   REPS=5  NS="2 4"  QUICK=1 (1..8 MiB, fewer iterations: a smoke run)
#        OUT=<dir to keep the raw JSON lines>
set -euo pipefail

BUILD=${1:-build}
PERF=$BUILD/ftcc-perf
PLUGIN=$BUILD/libnccl-net-ftcc.so
NS=${NS:-"2 4"}
REPS=${REPS:-5}
if [[ -n ${QUICK:-} ]]; then
	MAX=8M
	IT=(-n 5 -w 2)
	LAT_IT=(-n 300 -w 30)
else
	MAX=64M
	IT=(-n 15 -w 3)
	LAT_IT=(-n 2000 -w 200)
fi
SWEEP=(-b 1M -e "$MAX" -f 2)
BIG=$(numfmt --from=iec "$MAX")

for f in "$PERF" "$PLUGIN"; do
	[[ -e $f ]] || { echo "missing $f (build first: cmake --build $BUILD)" >&2; exit 2; }
done
for t in jq timeout numfmt; do
	command -v "$t" >/dev/null || { echo "needs $t" >&2; exit 2; }
done
export FTCC_SOCKET_IFNAME=lo

# shellcheck source=perf/vs_lib.sh
source "$(dirname "$0")/vs_lib.sh"

# run NAME MODE-ARGS...: one run of ftcc-perf, its JSON lines appended to $WORK/NAME.json
run() {
	local name=$1
	shift
	timeout 600 "$PERF" -p "$PLUGIN" -j "$@" 2>>"$WORK/stderr.log" | grep '^{' \
		>>"$WORK/$name.json" || echo "failed: $PERF $*" >&2
}

# pick_close NAME: median close time in ms
pick_close() {
	[[ -s $WORK/$1.json ]] || { echo nan; return; }
	jq -r 'select(.event == "close") | .close_us / 1000' "$WORK/$1.json" | median
}

echo "# ftcc CollNet plug-in vs the C API it drives, on 127.0.0.1, $(date -u +%Y-%m-%dT%H:%MZ)"
echo "# $(nproc) cores, $(uname -sr), REPS=$REPS, float32 sum, ${SWEEP[*]} ${IT[*]}"
echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

for n in $NS; do
	run "check_collnet$n" -m collnet -N "$n" -b 1K -e 4M -f 16 -n 3 -w 1 -c 1
	run "check_capi$n" -m allreduce -P -N "$n" -b 1K -e 4M -f 16 -n 3 -w 1 -c 1
	for ((i = 0; i < REPS; i++)); do
		for ((k = 0; k < 3; k++)); do
			case $(((i + k) % 3)) in
			0) run "collnet$n" -m collnet -N "$n" "${SWEEP[@]}" "${IT[@]}" ;;
			1) run "capi$n" -m allreduce -P -N "$n" "${SWEEP[@]}" "${IT[@]}" ;;
			2) run "block$n" -m allreduce -N "$n" "${SWEEP[@]}" "${IT[@]}" ;;
			esac
		done
		run "lat_collnet$n" -m collnet -N "$n" -b 8 -e 8 "${LAT_IT[@]}"
		run "lat_capi$n" -m allreduce -P -N "$n" -b 8 -e 8 "${LAT_IT[@]}"
	done

	echo
	echo "## N=$n: median op time in us (median of $REPS runs); ratio = collnet / capi (polled);"
	echo "## busbw in GB/s; blocking = ftcc_allreduce, for reference"
	echo "checked run (-c 1, 1 KiB .. 4 MiB): #wrong collnet $(wrong "check_collnet$n")," \
		"capi $(wrong "check_capi$n")"
	printf "%-8s %12s %12s %8s %10s %10s %14s\n" size "collnet(us)" "capi(us)" ratio \
		"cn GB/s" "capi GB/s" "blocking(us)"
	for s in $(jq -r 'select(.event | not) | .size' "$WORK/capi$n.json" \
		"$WORK/collnet$n.json" 2>/dev/null | sort -nu); do
		c=$(pick "collnet$n" "$s" time_median_us)
		a=$(pick "capi$n" "$s" time_median_us)
		printf "%-8s %12.1f %12.1f %8s %10.3f %10.3f %14.1f\n" "$((s >> 20))MiB" "$c" \
			"$a" "$(ratio "$c" "$a" 3)" "$(pick "collnet$n" "$s" busbw_GBps)" \
			"$(pick "capi$n" "$s" busbw_GBps)" "$(pick "block$n" "$s" time_median_us)"
	done
	r=$(ratio "$(pick "collnet$n" "$BIG" time_median_us)" "$(pick "capi$n" "$BIG" time_median_us)" 3)
	echo "$((BIG >> 20)) MiB overhead of the CollNet layer: ratio $r," \
		"$(awk -v r="$r" 'BEGIN { if (r != r + 0) print "no result";
			else if (r < 1.03) printf "%+.1f%%: under 3%% (MET)", (r - 1) * 100;
			else printf "%+.1f%%: 3%% or more (NOT MET)", (r - 1) * 100 }')"
	c=$(pick "lat_collnet$n" 8 time_median_us)
	a=$(pick "lat_capi$n" 8 time_median_us)
	printf "8-byte op (median, us; the fixed cost per op): collnet %.2f, capi %.2f, ratio %s\n" \
		"$c" "$a" "$(ratio "$c" "$a" 3)"
	printf "close (median, ms): collnet %.3f (deregMr, closeColl, closeListen, finalize)," \
		"$(pick_close "collnet$n")"
	printf " capi %.3f (ftcc_comm_destroy)\n" "$(pick_close "capi$n")"
done
echo
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
if [[ -s $WORK/stderr.log ]]; then
	echo "# stderr of the runs ($(wc -l <"$WORK/stderr.log") lines; first lines):"
	head -5 "$WORK/stderr.log" | sed 's/^/#   /'
fi
