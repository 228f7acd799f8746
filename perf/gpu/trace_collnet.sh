#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Where a CollNet allreduce's time goes under NCCL: the same plug-in driven by NCCL's proxy
# (perf/gpu/bench_allreduce.py --mode ftcc) with its per-op TRACE lines (NCCL_DEBUG=TRACE,
# NCCL_DEBUG_SUBSYS=NET: each op's size, when it was posted and seen done, ops in flight), and
# by ftcc-perf's collnet mode (no GPU, no NCCL: the plug-in's own cost at the same sizes) on the
# same machine. perf/gpu/trace_summary.py reads the logs afterwards.
#
#   SO=path/libnccl-net-ftcc.so PERF=path/ftcc-perf (with its libftcc beside it)   required
#   MAXB=bytes (default 32 MiB) LANES="1 2" T_BENCH=s
# Logs go to $OUT/trace-logs.tgz (default gpu-logs/).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-gpu-logs}
LOG=${LOG:-/tmp/ftcc-gpu-trace-logs}
MAXB=${MAXB:-$((32 << 20))}
LANES=${LANES:-1 2}
T_BENCH=${T_BENCH:-60}
SO=$(readlink -f "${SO:?SO names the plug-in}")
PERF=$(readlink -f "${PERF:?PERF names ftcc-perf}")
rm -rf "$LOG"
mkdir -p "$OUT" "$LOG"
trap 'tar czf "$OUT/trace-logs.tgz" -C "$(dirname "$LOG")" "$(basename "$LOG")"' EXIT
export FTCC_SOCKET_IFNAME=lo

for d in 1 8; do
	echo "== ftcc-perf -m collnet, 2 ranks, $d in flight (no GPU, no NCCL)"
	# TCP, as under NCCL on this machine: a verbs library found beside the binary (the
	# emulator, say) must not be picked up through LD_LIBRARY_PATH.
	FTCC_TRANSPORT=tcp LD_LIBRARY_PATH=$(dirname "$PERF") timeout 120 "$PERF" -m collnet -p "$SO" -N 2 -b 512K \
		-e "$MAXB" -f 2 -n 20 -w 3 -d "$d" 2>&1 | grep -v '^#' | tee "$LOG/perf-d$d.txt"
done
for l in $LANES; do
	d="$LOG/bench-lanes$l"
	mkdir -p "$d"
	echo "== allreduce through NCCL, FTCC_LANES=$l, 2 hosts, per-op TRACE"
	FTCC_LANES=$l NCCL_DEBUG=TRACE NCCL_DEBUG_SUBSYS=INIT,NET NCCL_DEBUG_FILE="$d/nccl.%p.log" \
		python3 perf/gpu/bench_allreduce.py --mode ftcc --so "$SO" -n 2 --max-bytes "$MAXB" \
		--iters 10 --warmup 3 --marks --timeout "$T_BENCH" 2>&1 | tee "$d/table.txt" |
		grep -v "^mark "
	pkill -9 -f "[p]erf/gpu/bench_allreduce.py"
	python3 perf/gpu/trace_summary.py "$d/table.txt" "$d"/nccl.*.log 2>&1 | tee "$d/summary.txt"
done
