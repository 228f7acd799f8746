#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The ib transport under real CUDA, NCCL and PyTorch on a machine with a GPU and no HCA, over
# the verbs emulator (tests/ibemu, loaded through FTCC_IBVERBS_LIB): says nothing of speed,
# everything of whether NCCL drives the transport as the ABI tests do.
#   1. perf/gpu/gdr_check.c: CUDA's dma-buf of device memory, regMr(NCCL_PTR_CUDA), a message
#      into GPU memory, its flush, the bytes read back;
#   2. allreduce through NCCL's rings over the plug-in, and through ftcc's CollNet, over ib;
#   3. the DDP job with one of four ranks killed, its CollNet frames over ib.
#
#   SO=path/libnccl-net-ftcc.so IBEMU=path/libibverbs.so.1 (the emulator)   required
#   MAXB=bytes (default 64 MiB) T_BENCH=s T_DDP=s
# Summary on stdout; logs packed into $OUT/ib-logs.tgz (default gpu-logs/).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-gpu-logs}
LOG=${LOG:-/tmp/ftcc-gpu-ib-logs}
MAXB=${MAXB:-$((64 << 20))}
T_BENCH=${T_BENCH:-120}
T_DDP=${T_DDP:-120}
SO=$(readlink -f "${SO:?SO names the plug-in}")
IBEMU=$(readlink -f "${IBEMU:?IBEMU names the verbs emulator}")
rm -rf "$LOG"
mkdir -p "$OUT" "$LOG"
trap 'tar czf "$OUT/ib-logs.tgz" -C "$(dirname "$LOG")" "$(basename "$LOG")"' EXIT
export FTCC_TRANSPORT=ib FTCC_IBVERBS_LIB="$IBEMU" FTCC_SOCKET_IFNAME=lo

echo "== GPU memory through the ib transport (gdr_check)"
gcc -O1 -Iplugin perf/gpu/gdr_check.c -ldl -lpthread -o "$LOG/gdr_check" &&
	NCCL_DEBUG=INFO timeout 60 "$LOG/gdr_check" "$SO" 2>&1 | tee "$LOG/gdr_check.txt" |
	grep -vE '^  plug-in: (tcp|ib): (dev|device) '

# NCCL stages through host memory here: the emulator cannot take a GPU's dma-buf unless the CPU
# can map it (gdr_check says).
export FTCC_IB_DMABUF=0
FAILED=()
for mode in net ftcc; do
	d="$LOG/bench-ib-$mode"
	mkdir -p "$d"
	echo "== allreduce over ib, $mode, 2 hosts (bytes, median us, busbw GB/s, wrong elements)"
	NCCL_DEBUG_FILE="$d/nccl.%p.log" NCCL_DEBUG_SUBSYS=INIT,NET \
		python3 perf/gpu/bench_allreduce.py --mode "$mode" --so "$SO" -n 2 \
		--max-bytes "$MAXB" --iters 5 --warmup 2 --timeout "$T_BENCH" 2>&1 | tee "$d/table.txt"
	rc=${PIPESTATUS[0]}
	echo "rc $rc"
	[ "$rc" = 0 ] || FAILED+=("allreduce over ib, $mode (exit $rc)")
	grep -h -m3 -E 'over ib|frames over|Using network' "$d"/nccl.*.log | cut -c1-200
	pkill -9 -f "[p]erf/gpu/bench_allreduce.py"
done

echo "== DDP over ib, 4 hosts, rank 2 killed at step 100"
mkdir -p "$LOG/ddp"
timeout -k 5 $((T_DDP + 30)) python3 perf/gpu/collnet_ddp.py --so "$SO" -n 4 --kill 2 \
	--kill-step 100 --timeout "$T_DDP" --logdir "$LOG/ddp" | tee "$LOG/ddp.txt"
rc=${PIPESTATUS[0]}
[ "$rc" = 0 ] || FAILED+=("DDP over ib (exit $rc)")
grep -h -E 'frames over|lost; continuing' "$LOG"/ddp/rank*.log | cut -c1-200 | sort | uniq -c |
	head -6
pkill -9 -f "[p]erf/gpu/ddp_train.py"
# The exit status: 0 only when every allreduce and the DDP job passed (gdr_check stops where
# the emulator cannot map GPU memory, and says so; it is not counted).
for f in "${FAILED[@]}"; do echo "FAILED: $f"; done
[ ${#FAILED[@]} = 0 ]
