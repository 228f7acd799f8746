#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Compares ftcc's allreduce (ftcc-perf -m allreduce over libftcc.so) with Open MPI's
# MPI_Allreduce (TCP BTL on loopback) and torch.distributed's Gloo backend, all float32 SUM on
# this host, measured in the same run:
#   busbw from 16 B to 256 MiB (x4 steps) for N = 2 and 4 ranks
#       targets: ftcc busbw >= 1.3x the better baseline from 1 MiB up, and >= 1.0x Open MPI
#       from 4 KiB to 1 MiB
#   8-byte latency (median op time)    target: ftcc <= 1.0x Open MPI with 2 ranks, 1.5x with 4
#   64 MiB out of place vs in place (an in-place op keeps a copy of its input until it is
#       settled: the measurable cost of fault tolerance)
# Every number is the median over REPS runs of each run's median op time (every rank times
# each call back to back; an op's time is the slowest rank's). busbw = algbw * 2(n-1)/n.
# With 2 ranks each system's ranks are bound to a core each (mpirun's default, and ftcc-perf's
# and the Gloo script's to match); with 4 on this host none is bound.
# Installs what it lacks (openmpi-bin libopenmpi-dev python3-torch) and builds the MPI baseline
# with mpicc into BUILD_DIR; ftcc-perf must be built already.
#
# usage: perf/allreduce_vs.sh [BUILD_DIR]     (default: build)
# env:   REPS=3  QUICK=1 (sizes up to 16 MiB, one rep: a smoke run)  NS="2 4"
#        OUT=<dir to keep the raw JSON lines>
set -euo pipefail

BUILD=${1:-build}
SRC=$(cd "$(dirname "$0")/.." && pwd)
PERF=$BUILD/ftcc-perf
MPIBIN=$BUILD/mpi_allreduce
PY=/usr/bin/python3 # sees Debian's python3-torch; a python3 earlier on PATH may not
NS=${NS:-"2 4"}
if [[ -n ${QUICK:-} ]]; then
	REPS=${REPS:-1}
	MAX=16M
	SWEEP_IT=(-n 5 -w 2)
	SMALL_IT=(-n 20 -w 5)
	LAT_IT=(-n 200 -w 20)
else
	REPS=${REPS:-3}
	MAX=256M
	SWEEP_IT=(-n 10 -w 2)
	SMALL_IT=(-n 100 -w 10)
	LAT_IT=(-n 1000 -w 100)
fi
# Up to 1 MiB an op takes well under a millisecond and one scheduling hiccup moves a median of 10
# by 2x, so the small sizes get SMALL_IT ops per run; the large ones SWEEP_IT.
SMALL=(-b 16 -e 1M -f 4)
SWEEP=(-b 4M -e "$MAX" -f 4)
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --mca pml ob1 --mca btl tcp,self
	--mca btl_tcp_if_include lo)

[[ -x $PERF ]] || { echo "missing $PERF (build first: cmake --build $BUILD)" >&2; exit 2; }

need_install=
command -v mpicc >/dev/null && command -v mpirun >/dev/null || need_install=1
"$PY" -c 'import torch.distributed' 2>/dev/null || need_install=1
if [[ -n $need_install ]]; then
	pkgs=(openmpi-bin libopenmpi-dev python3-torch)
	apt-get install -y "${pkgs[@]}" >/dev/null ||
		{ apt-get update >/dev/null && apt-get install -y "${pkgs[@]}" >/dev/null; }
fi
for t in jq timeout mpicc mpirun; do
	command -v "$t" >/dev/null || { echo "needs $t" >&2; exit 2; }
done
mpicc -O2 -o "$MPIBIN" "$SRC/perf/baselines/mpi_allreduce.c"

# shellcheck source=perf/vs_lib.sh
source "$(dirname "$0")/vs_lib.sh"

# run NAME CMD...: one run, its JSON lines appended to $WORK/NAME.json (rows only)
run() {
	local name=$1
	shift
	timeout 600 "$@" 2>>"$WORK/stderr.log" | grep '^{' | grep -v '"event"' >>"$WORK/$name.json" ||
		echo "failed: $*" >&2
}

# pick NAME SIZE FIELD: median over runs of FIELD in the rows of SIZE
pick() {
	[[ -s $WORK/$1.json ]] || { echo nan; return; }
	jq -r --argjson s "$2" "select(.size == \$s) | .$3" "$WORK/$1.json" | median
}

echo "# ftcc allreduce vs Open MPI and Gloo on 127.0.0.1, $(date -u +%Y-%m-%dT%H:%MZ)"
echo "# $(nproc) cores, $(uname -sr), $(mpirun --version | head -1), torch" \
	"$("$PY" -c 'import torch; print(torch.__version__)'), REPS=$REPS, float32 sum"
echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

for n in $NS; do
	for ((i = 0; i < REPS; i++)); do
		for part in small large; do
			if [[ $part == small ]]; then
				sz=("${SMALL[@]}" "${SMALL_IT[@]}")
			else
				sz=("${SWEEP[@]}" "${SWEEP_IT[@]}")
			fi
			run "ftcc$n" "$PERF" -m allreduce -N "$n" -j "${sz[@]}"
			run "mpi$n" "${MPIRUN[@]}" -np "$n" "$MPIBIN" -j "${sz[@]}"
			run "gloo$n" "$PY" "$SRC/perf/baselines/gloo_allreduce.py" -N "$n" -j "${sz[@]}"
		done
		run "ftcc_lat$n" "$PERF" -m allreduce -N "$n" -j -b 8 -e 8 "${LAT_IT[@]}"
		run "mpi_lat$n" "${MPIRUN[@]}" -np "$n" "$MPIBIN" -j -b 8 -e 8 "${LAT_IT[@]}"
		run "ftcc_oop$n" "$PERF" -m allreduce -N "$n" -j -b 64M -e 64M -n 10 -w 2
		run "ftcc_inp$n" "$PERF" -m allreduce -N "$n" -j -b 64M -e 64M -n 10 -w 2 -I
	done

	echo
	echo "## N=$n: busbw in GB/s (1e9 B/s), median of $REPS runs"
	printf "%-10s %9s %9s %9s %12s %9s  %s\n" size ftcc mpi gloo "ftcc/best" "ftcc/mpi" \
		"target (>= 1.3x best from 1 MiB, >= 1.0x mpi 4 KiB..1 MiB)"
	for s in $(jq -r .size "$WORK/ftcc$n.json" "$WORK/mpi$n.json" 2>/dev/null | sort -nu); do
		f=$(pick "ftcc$n" "$s" busbw_GBps)
		m=$(pick "mpi$n" "$s" busbw_GBps)
		g=$(pick "gloo$n" "$s" busbw_GBps)
		# the ratios from the median op times (busbw = the same factor / time; the printed
		# busbw of the smallest sizes rounds to 0)
		ft=$(pick "ftcc$n" "$s" time_median_us)
		mt=$(pick "mpi$n" "$s" time_median_us)
		gt=$(pick "gloo$n" "$s" time_median_us)
		best=$(awk -v m="$mt" -v g="$gt" 'BEGIN {
			if (m != m + 0) m = 0; if (g != g + 0) g = 0
			print (m > 0 && (g <= 0 || m < g)) ? m : g }')
		r=$(ratio "$best" "$ft")
		rm_=$(ratio "$mt" "$ft")
		verdict=
		if ((s >= 4096 && s <= 1048576)); then
			verdict=$(awk -v r="$rm_" 'BEGIN { print (r == r + 0 && r >= 1.0) ? "mpi MET" : "mpi NOT MET" }')
		fi
		if ((s >= 1048576)); then
			verdict="$verdict $(awk -v r="$r" 'BEGIN { print (r == r + 0 && r >= 1.3) ? "best MET" : "best NOT MET" }')"
		fi
		if ((s >= 1048576)); then
			label="$((s >> 20))MiB"
		elif ((s >= 1024)); then
			label="$((s >> 10))KiB"
		else
			label="${s}B"
		fi
		printf "%-10s %9.3f %9.3f %9.3f %12s %9s  %s\n" "$label" "$f" "$m" "$g" "$r" "$rm_" \
			"$verdict"
	done

	fl=$(pick "ftcc_lat$n" 8 time_median_us)
	ml=$(pick "mpi_lat$n" 8 time_median_us)
	r=$(ratio "$fl" "$ml")
	lim=$( ((n <= 2)) && echo 1.0 || echo 1.5)
	echo
	printf "8-byte latency (median op, us): ftcc %.2f  mpi %.2f  ftcc/mpi %s  %s\n" "$fl" "$ml" \
		"$r" "$(awk -v r="$r" -v l="$lim" 'BEGIN { print (r == r + 0 && r <= l + 0) ? "MET (<= " l ")" : "NOT MET (<= " l ")" }')"
	fo=$(pick "ftcc_oop$n" 67108864 busbw_GBps)
	fi_=$(pick "ftcc_inp$n" 67108864 busbw_GBps)
	printf "64 MiB busbw: out of place %.3f, in place %.3f GB/s (in place / out of place %s)\n" \
		"$fo" "$fi_" "$(ratio "$fi_" "$fo")"
done
echo
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
if [[ -s $WORK/stderr.log ]]; then
	echo "# stderr of the runs (first lines):"
	head -5 "$WORK/stderr.log" | sed 's/^/#   /'
fi
