#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The InfiniBand / RoCE comparison, for a machine with an HCA (it has not run yet: no machine
# here has one). One command, everything in the same run, on one host through its HCA
# (loopback through the NIC, as perftest does it):
#
#   1. ib_write_bw (perftest) at 64 MiB: what the port can do with one QP
#   2. ftcc-perf -m p2p over the ib transport at 1 MiB .. 256 MiB: ftcc's p2p through the
#      net plug-in, no GPU needed
#   3. with GPUs and nccl-tests: sendrecv_perf between two GPUs forced onto the network
#      (NCCL_P2P_DISABLE, NCCL_SHM_DISABLE), once over NCCL's own IB transport and once over
#      ftcc's; the ratio of their busbw at 64 MiB is the issue's target (>= 1.0)
#   4. ftcc-perf -m fault over the ib transport: how fast a killed and a frozen peer are
#      reported (target: 30x faster than NCCL's default, about 30 s: under 1 s)
#
# usage: perf/ib_vs_nccl.sh [BUILD_DIR]        (default: build)
# env:   HCA=mlx5_0 (default: the first device ibv_devices lists)
#        NCCL_TESTS=/path/to/nccl-tests/build  (step 3 is skipped without it or without 2 GPUs)
#        REPS=3 (medians of REPS runs)  OUT=<dir to keep raw output>
set -euo pipefail

BUILD=${1:-build}
REPS=${REPS:-3}
PERF=$BUILD/ftcc-perf
PLUGIN=$BUILD/libnccl-net-ftcc.so
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"

for f in "$PERF" "$PLUGIN"; do
	[[ -e $f ]] || { echo "missing $f (build first: cmake --build $BUILD)" >&2; exit 2; }
done
command -v ibv_devices >/dev/null || { echo "needs ibv_devices (ibverbs-utils)" >&2; exit 2; }
HCA=${HCA:-$(ibv_devices | awk 'NR > 2 { print $1; exit }')}
[[ -n $HCA ]] || { echo "no HCA: ibv_devices lists none" >&2; exit 2; }
echo "# HCA $HCA, $REPS runs per number (median), raw output in $OUT"

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }

# 1. perftest
if command -v ib_write_bw >/dev/null; then
	for r in $(seq "$REPS"); do
		ib_write_bw -d "$HCA" -s $((64 << 20)) -n 200 -F --report_gbits \
			>"$OUT/ib_write_bw.server.$r" 2>&1 &
		srv=$!
		sleep 1
		ib_write_bw -d "$HCA" -s $((64 << 20)) -n 200 -F --report_gbits localhost \
			>"$OUT/ib_write_bw.$r" 2>&1 || true
		wait "$srv" || true
		awk '$1 == 67108864 { print $4 }' "$OUT/ib_write_bw.$r"
	done | median | awk '{ printf "ib_write_bw 64 MiB: %s Gb/s (BW average)\n", $1 }'
else
	echo "ib_write_bw: not installed (apt-get install perftest); skipped"
fi

# 2. ftcc p2p over ib
export FTCC_TRANSPORT=ib FTCC_IB_HCA="=$HCA"
for r in $(seq "$REPS"); do
	"$PERF" -m p2p -b 1M -e 256M -f 4 -n 20 -j >"$OUT/ftcc_p2p.$r"
done
for size in 1048576 4194304 16777216 67108864 268435456; do
	for r in $(seq "$REPS"); do
		grep "\"size\":$size," "$OUT/ftcc_p2p.$r" |
			sed 's/.*"busbw_GBps":\([0-9.e+-]*\).*/\1/'
	done | median | awk -v s="$size" '{ printf "ftcc p2p over ib %9d B: %s GB/s\n", s, $1 }'
done

# 3. NCCL's IB transport against ftcc's, under nccl-tests
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l || echo 0)
if [[ -n ${NCCL_TESTS:-} && -x $NCCL_TESTS/sendrecv_perf && $ngpu -ge 2 ]]; then
	run_nccl() { # $1: label; rest: env
		local label=$1
		shift
		for r in $(seq "$REPS"); do
			env NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_HCA="=$HCA" "$@" \
				"$NCCL_TESTS/sendrecv_perf" -b 64M -e 64M -g 2 -n 50 -w 10 \
				>"$OUT/nccl_$label.$r" 2>&1
			awk '$1 == 67108864 { print $(NF - 2) }' "$OUT/nccl_$label.$r"
		done | median
	}
	nccl_ib=$(run_nccl nccl_ib NCCL_NET=IB)
	ftcc_ib=$(run_nccl ftcc_ib NCCL_NET_PLUGIN="$PLUGIN" NCCL_NET=ftcc)
	echo "sendrecv_perf 64 MiB busbw: NCCL IB $nccl_ib GB/s, ftcc ib $ftcc_ib GB/s"
	awk -v a="$ftcc_ib" -v b="$nccl_ib" \
		'BEGIN { if (b > 0) printf "ratio ftcc / NCCL IB at 64 MiB: %.2f (target >= 1.0)\n", a / b }'
else
	echo "sendrecv_perf: skipped (set NCCL_TESTS to an nccl-tests build; needs 2 GPUs)"
fi

# 4. dead-peer detection over ib
for sig in KILL STOP; do
	for r in $(seq "$REPS"); do
		"$PERF" -m fault -b 1M -k 20 -K "$sig" 2>&1 | tee "$OUT/fault_$sig.$r" |
			sed -n 's/.*returned ncclRemoteError ([0-9]*) after \([0-9.]*\) ms.*/\1/p'
	done | median | awk -v s="$sig" \
		'{ printf "SIG%s peer reported after %s ms (NCCL IB default: about 30000 ms)\n", s, $1 }'
done
