#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# What fault tolerance costs an allreduce that meets no fault: ftcc-perf -m allreduce (blocking
# ftcc_allreduce, float32 sum) at SIZES, out of place and in place (-I), each with the have
# round (the default) and without it (FTCC_MEASURE_NO_HAVE=1, measurement only), N ranks on
# this host. The four settings take turns, the order rotating from rep to rep; each number is
# the median over REPS runs of each run's median op time. Printed per N and size:
#   have round   out of place with it / without it (what the settlement of an op costs)
#   input copy   in place / out of place, both with the have round (an in-place op keeps a copy
#                of its input until it is settled, for a redo; out of place, the input is
#                never written and preserving it is free)
#   all          in place with the have round / out of place without it
# Ratios above 1 are the cost. A checked run (-c 1) per setting comes first and must report 0
# wrong.
#
# usage: perf/ft_cost.sh [BUILD_DIR]     (default: build)
# env:   REPS=5  NS="2 4"  SIZES="1M 64M"  ITERS=10  OUT=<dir to keep the raw JSON lines>
set -euo pipefail

BUILD=${1:-build}
PERF=$BUILD/ftcc-perf
NS=${NS:-"2 4"}
REPS=${REPS:-5}
ITERS=${ITERS:-10}
read -r -a SZ <<<"${SIZES:-1M 64M}"

# shellcheck source=perf/vs_lib.sh
source "$(dirname "$0")/vs_lib.sh"
vs_require "$BUILD" "$PERF"
export FTCC_SOCKET_IFNAME=lo

# run NAME NO_HAVE ARGS...: one run of ftcc-perf, its JSON lines appended to $WORK/NAME.json
run() {
	local name=$1 nohave=$2
	shift 2
	FTCC_MEASURE_NO_HAVE=$nohave timeout 600 "$PERF" -j "$@" 2>>"$WORK/stderr.log" |
		grep '^{' >>"$WORK/$name.json" ||
		echo "failed: FTCC_MEASURE_NO_HAVE=$nohave $PERF $*" >&2
}

# the settings: name, FTCC_MEASURE_NO_HAVE, extra ftcc-perf flags
MODES=("oop-have 0" "oop-nohave 1" "ip-have 0 -I" "ip-nohave 1 -I")

echo "# ftcc: the cost of fault tolerance, ftcc-perf -m allreduce on 127.0.0.1," \
	"$(date -u +%Y-%m-%dT%H:%MZ)"
echo "# $(nproc) cores, $(uname -sr), REPS=$REPS, ITERS=$ITERS, float32 sum, sizes ${SZ[*]}"
echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for n in $NS; do
	checks=""
	for m in "${MODES[@]}"; do
		read -r name nohave flag <<<"$m"
		run "check$n-$name" "$nohave" -m allreduce -N "$n" -b 4K -e 4M -f 32 -n 3 -w 1 \
			-c 1 ${flag:+"$flag"}
		checks+=" $name: $(wrong "check$n-$name");"
	done
	for s in "${SZ[@]}"; do
		for ((i = 0; i < REPS; i++)); do
			for ((k = 0; k < ${#MODES[@]}; k++)); do
				read -r name nohave flag <<<"${MODES[$(((i + k) % ${#MODES[@]}))]}"
				run "t$n-$s-$name" "$nohave" -m allreduce -N "$n" -b "$s" -e "$s" \
					-n "$ITERS" -w 2 ${flag:+"$flag"}
			done
		done
	done
	echo
	echo "## N=$n: median op time in us (median of $REPS runs)"
	echo "checked runs (-c 1, 4 KiB .. 4 MiB), #wrong:$checks"
	printf "%-8s %11s %11s %11s %11s %10s %10s %10s\n" size "oop(us)" "oop-nohave" "ip(us)" \
		"ip-nohave" "have rnd" "input cp" all
	for s in "${SZ[@]}"; do
		bytes=$(jq -r 'select(.event | not) | .size' "$WORK/t$n-$s-oop-have.json" 2>/dev/null |
			head -1)
		[[ -n $bytes ]] || { echo "$s: no results"; continue; }
		oh=$(pick "t$n-$s-oop-have" "$bytes" time_median_us)
		on=$(pick "t$n-$s-oop-nohave" "$bytes" time_median_us)
		ih=$(pick "t$n-$s-ip-have" "$bytes" time_median_us)
		in=$(pick "t$n-$s-ip-nohave" "$bytes" time_median_us)
		printf "%-8s %11.1f %11.1f %11.1f %11.1f %10s %10s %10s\n" "$s" "$oh" "$on" "$ih" "$in" \
			"$(ratio "$oh" "$on" 3)" "$(ratio "$ih" "$oh" 3)" "$(ratio "$ih" "$on" 3)"
	done
done
echo
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
if [[ -s $WORK/stderr.log ]]; then
	echo "# stderr of the runs ($(grep -vc 'FTCC_MEASURE_NO_HAVE=1' "$WORK/stderr.log") lines" \
		"beside the measurement warnings; first of them):"
	grep -v 'FTCC_MEASURE_NO_HAVE=1' "$WORK/stderr.log" | head -5 | sed 's/^/#   /'
fi
