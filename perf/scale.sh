#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# How a group's per-op cost and connections grow with its size: the scale test of the suite
# (tests/mproc/test_mproc_scale.c) run with FT_SCALE_N members for each N: every member in its
# own process on this host, 200 blocking allreduces of 2 floats (recursive doubling), one member
# SIGKILLed before op 100, results checked across the survivors. Printed per N, medians over
# REPS runs of what each run reports:
#   fds before kill   open descriptors per member before the kill (median and max over members)
#   fds at end        the same after the last op (the resume exchange after the kill talks to
#                     every member)
#   CPU/op            process CPU time per op per member over the 200 ops (median over members;
#                     every thread of the member: caller, control, point-to-point)
#   vs N=8            CPU/op relative to the smallest N, beside log2(N)/log2(8), what recursive
#                     doubling's rounds alone would give
#
# usage: perf/scale.sh [BUILD_DIR]     (default: build)
# env:   REPS=3  NS="8 16 32 64"
set -euo pipefail

BUILD=${1:-build}
BIN=$BUILD/test_mproc
NS=${NS:-"8 16 32 64"}
REPS=${REPS:-3}

# shellcheck source=perf/vs_lib.sh
source "$(dirname "$0")/vs_lib.sh"
vs_require "$BUILD" "$BIN"

echo "# ftcc group scale on $(nproc) cores, $(uname -sr), $(date -u +%Y-%m-%dT%H:%MZ), REPS=$REPS"
echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 0; r < REPS; r++)); do
	for n in $NS; do
		line=$(FT_SCALE_N=$n FTCC_DEBUG=NONE timeout 300 "$BIN" --filter 'ft_scale/members_64*' 2>&1 |
			grep '^scale:' || true)
		if [[ -z $line ]]; then
			echo "N=$n: the scale test failed (run: FT_SCALE_N=$n $BIN --filter 'ft_scale/members_64*')" >&2
			exit 1
		fi
		# scale: N members, ... before the kill median A max B, at the end median C max D;
		# CPU per op per member median E us max F us; G s in all
		sed -E 's/.*before the kill median ([0-9]+) max ([0-9]+), at the end median ([0-9]+) max ([0-9]+); CPU per op per member median ([0-9.]+) us max ([0-9.]+) us; ([0-9.]+) s in all/\1 \2 \3 \4 \5 \6 \7/' \
			<<<"$line" >>"$WORK/n$n.txt"
	done
done

col() { awk -v k="$2" '{ print $k }' "$WORK/n$1.txt" | median; }
base=
printf "%-4s %10s %10s %10s %10s %12s %12s %8s %12s %8s\n" N fds-med fds-max end-med end-max \
	CPU/op-us CPU/op-max wall-s "vs N=${NS%% *}" log2-ratio
for n in $NS; do
	cpu=$(col "$n" 5)
	[[ -n $base ]] || { base=$cpu; b2=$n; }
	printf "%-4s %10s %10s %10s %10s %12s %12s %8s %12s %8s\n" "$n" "$(col "$n" 1)" \
		"$(col "$n" 2)" "$(col "$n" 3)" "$(col "$n" 4)" "$cpu" "$(col "$n" 6)" \
		"$(col "$n" 7)" "$(awk -v a="$cpu" -v b="$base" 'BEGIN { printf "%.2f", a / b }')" \
		"$(awk -v n="$n" -v b="$b2" 'BEGIN { printf "%.2f", log(n) / log(b) }')"
done
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
