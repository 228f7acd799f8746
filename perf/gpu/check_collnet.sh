#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The whole GPU check of the CollNet plug-in in one command, for a machine with one GPU, CUDA,
# PyTorch and NCCL (see perf/gpu/RESULTS.md): allreduce through ftcc's CollNet, a DDP job with
# one rank killed mid-training, allreduce over ftcc's net plug-in (NCCL's rings), then NCCL's
# own socket transport as the baseline. Every phase has its own time bound, so the command
# ends (and packs its logs) inside a known time.
#
#   SO=path/libnccl-net-ftcc.so   use this build instead of building one here
#   MAXB=bytes N=hosts            largest allreduce (default 1 GiB), hosts of the DDP job (4)
#   T_BENCH=s T_DDP=s             bound of each benchmark run and of the DDP job
# A short summary goes to stdout; every log is packed into $OUT/logs.tgz (default gpu-logs/).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-gpu-logs}
LOG=${LOG:-/tmp/ftcc-gpu-logs}
N=${N:-4}
MAXB=${MAXB:-$((1 << 30))}
T_BENCH=${T_BENCH:-150}
T_DDP=${T_DDP:-150}
SO=${SO:-}
rm -rf "$LOG"
mkdir -p "$OUT" "$LOG"
trap 'tar czf "$OUT/logs.tgz" -C "$(dirname "$LOG")" "$(basename "$LOG")"' EXIT
{
	nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
	python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'
} 2>&1 | tee "$LOG/versions.txt"
if [ -z "$SO" ]; then
	cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release >"$LOG/build.log" 2>&1 &&
		cmake --build build-gpu -j 8 --target ftcc_plugin >>"$LOG/build.log" 2>&1 ||
		{ tail -30 "$LOG/build.log"; exit 1; }
	SO=build-gpu/libnccl-net-ftcc.so
fi
SO=$(readlink -f "$SO")

bench() { # mode
	local d="$LOG/bench-$1"
	mkdir -p "$d/status"
	echo "== allreduce, $1, 2 hosts (bytes, median us, busbw GB/s, wrong elements)"
	NCCL_DEBUG_FILE="$d/nccl.%p.log" NCCL_DEBUG_SUBSYS=INIT,NET FTCC_STATUS_DIR="$d/status" \
		python3 perf/gpu/bench_allreduce.py --mode "$1" --so "$SO" -n 2 \
		--max-bytes "$MAXB" --timeout "$T_BENCH" 2>&1 | tee "$d/table.txt"
	echo "rc ${PIPESTATUS[0]}"
	grep -h -m4 -iE 'collnet|NET/ftcc|Using network' "$d"/nccl.*.log | cut -c1-200
	cat "$d"/status/* 2>/dev/null | grep -E '^(state|members|last_op|reason)'
	pkill -9 -f "[p]erf/gpu/bench_allreduce.py"
}

bench ftcc
mkdir -p "$LOG/ddp/status"
echo "== DDP, $N hosts, rank 2 killed at step 100"
FTCC_STATUS_DIR="$LOG/ddp/status" timeout -k 5 $((T_DDP + 30)) python3 perf/gpu/collnet_ddp.py \
	--so "$SO" -n "$N" --kill 2 --kill-step 100 --timeout "$T_DDP" --logdir "$LOG/ddp" |
	tee "$LOG/ddp.txt"
grep -h -iE 'lost|WARN' "$LOG"/ddp/rank*.log | sort | uniq -c | sort -rn | head -8 | cut -c1-220
for r in $(seq 0 $((N - 1))); do
	echo "rank $r: $(grep -c '^step ' "$LOG/ddp/rank$r.log") hash lines," \
		"last: $(grep '^step ' "$LOG/ddp/rank$r.log" | tail -1)"
done
pkill -9 -f "[p]erf/gpu/ddp_train.py"
bench net
bench socket
