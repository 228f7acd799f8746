#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Compares two builds of ftcc's allreduce (ftcc-perf -m allreduce over each build's libftcc.so)
# in the same run, interleaved: what a change costs or gains on the fast path. float32 SUM on
# this host, N = 2 and 4 ranks, sizes 4 KiB to 64 MiB (x4 steps; 300 timed iterations below
# 1 MiB, 10 above), the 8-byte op (1000), 64 MiB in place.
# Every number is the median over REPS runs of each run's median op time (an op's time is the
# slowest rank's); the ratio is NEW / OLD busbw (above 1: NEW is faster).
#
# usage: perf/builds_vs.sh OLD_BUILD_DIR NEW_BUILD_DIR
# env:   REPS=3  NS="2 4"  OUT=<dir to keep the raw JSON lines>
set -euo pipefail

OLD=${1:?usage: $0 OLD_BUILD_DIR NEW_BUILD_DIR}
NEW=${2:?usage: $0 OLD_BUILD_DIR NEW_BUILD_DIR}
REPS=${REPS:-3}
NS=${NS:-"2 4"}
for b in "$OLD" "$NEW"; do
	[[ -x $b/ftcc-perf ]] || { echo "missing $b/ftcc-perf (build it first)" >&2; exit 2; }
done
command -v jq >/dev/null || { echo "needs jq" >&2; exit 2; }

# shellcheck source=perf/vs_lib.sh
source "$(dirname "$0")/vs_lib.sh"

# run NAME BUILD ARGS...: one run of BUILD's ftcc-perf, its JSON rows appended to NAME.json
run() {
	local name=$1 build=$2
	shift 2
	LD_LIBRARY_PATH=$build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} timeout 600 \
		"$build/ftcc-perf" -m allreduce -j "$@" 2>>"$WORK/stderr.log" | grep '^{' |
		grep -v '"event"' >>"$WORK/$name.json" || echo "failed: $build $*" >&2
}

pick() {
	[[ -s $WORK/$1.json ]] || { echo nan; return; }
	jq -r --argjson s "$2" "select(.size == \$s) | .$3" "$WORK/$1.json" | median
}

echo "# ftcc allreduce, $NEW against $OLD on 127.0.0.1, $(date -u +%Y-%m-%dT%H:%MZ)"
echo "# $(nproc) cores, $(uname -sr), REPS=$REPS, float32 sum"
echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for n in $NS; do
	for ((i = 0; i < REPS; i++)); do
		for side in old new; do
			b=$OLD
			[[ $side == new ]] && b=$NEW
			run "$side$n" "$b" -N "$n" -b 1M -e 64M -f 4 -n 10 -w 2
			run "${side}_mid$n" "$b" -N "$n" -b 4K -e 256K -f 4 -n 300 -w 30
			run "${side}_lat$n" "$b" -N "$n" -b 8 -e 8 -n 1000 -w 100
			run "${side}_inp$n" "$b" -N "$n" -b 64M -e 64M -n 10 -w 2 -I
		done
	done
	echo
	echo "## N=$n: busbw in GB/s, median of $REPS runs"
	printf "%-10s %9s %9s %9s\n" size old new new/old
	for s in 4096 65536 262144 1048576 4194304 16777216 67108864; do
		f=old$n
		g=new$n
		if ((s < 1048576)); then
			f=old_mid$n
			g=new_mid$n
		fi
		o=$(pick "$f" "$s" busbw_GBps)
		w=$(pick "$g" "$s" busbw_GBps)
		if ((s >= 1048576)); then
			label="$((s >> 20))MiB"
		else
			label="$((s >> 10))KiB"
		fi
		printf "%-10s %9.3f %9.3f %9s\n" "$label" "$o" "$w" "$(ratio "$w" "$o")"
	done
	ol=$(pick "old_lat$n" 8 time_median_us)
	nl=$(pick "new_lat$n" 8 time_median_us)
	printf "8-byte op (median, us): old %.2f  new %.2f  new/old %s\n" "$ol" "$nl" \
		"$(ratio "$nl" "$ol")"
	oi=$(pick "old_inp$n" 67108864 busbw_GBps)
	ni=$(pick "new_inp$n" 67108864 busbw_GBps)
	printf "64 MiB in place busbw: old %.3f  new %.3f GB/s  new/old %s\n" "$oi" "$ni" \
		"$(ratio "$ni" "$oi")"
done
echo
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
