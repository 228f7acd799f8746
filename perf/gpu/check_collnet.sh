#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The whole GPU check of the CollNet plug-in in one command, for a machine with one GPU, CUDA,
# PyTorch and NCCL (see perf/gpu/RESULTS.md): allreduce through ftcc's CollNet, over ftcc's net
# plug-in (NCCL's rings), and over NCCL's own socket transport (the baseline), then a DDP job
# with one rank killed mid-training. Every phase has its own time bound, so the command ends
# (and packs its logs) inside a known time.
#
# The "hosts" share one GPU. Without MPS the GPU runs one process's kernels at a time, and every
# allreduce waits about 2 ms for the other process's time slice (perf/gpu/RESULTS.md): MPS=1
# runs the benchmarks under MPS, which measures the transports instead. The DDP job always runs
# without it: under MPS, a client killed with work on the GPU breaks the other clients.
#
#   SO=path/libnccl-net-ftcc.so   use this build instead of building one here
#   MAXB=bytes N=hosts            largest allreduce (default 1 GiB), hosts of the DDP job (4)
#   T_BENCH=s T_DDP=s             bound of each benchmark run and of the DDP job
#   LANES="1 2 4"                 FTCC_LANES of each CollNet benchmark run (default 0: the
#                                 plug-in's default, 4 lanes)
#   DDP_LANES="1 2"               FTCC_LANES of each DDP job (default 0)
#   DDP_STOP=s                    one more DDP job, rank 2 frozen (SIGSTOP) for s seconds
#                                 then thawed: a live member gone silent (default 5; 0: none)
#   DDP_GRACE=s                   how long the thawed rank has to leave (default 90: PyTorch
#                                 takes a process down about 60 s after a communicator error,
#                                 its TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC)
#   MPS=1                         the benchmarks under CUDA MPS (nvidia-cuda-mps-control)
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
LANES=${LANES:-0}
DDP_LANES=${DDP_LANES:-0}
MPS=${MPS:-0}
DDP_STOP=${DDP_STOP:-5}
DDP_GRACE=${DDP_GRACE:-90}
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

bench() { # mode [lanes]
	local d="$LOG/bench-$1${2:+-lanes$2}"
	mkdir -p "$d/status"
	echo "== allreduce, $1${2:+, FTCC_LANES=$2}, 2 hosts (bytes, median us, busbw GB/s, wrong elements)"
	FTCC_LANES=${2:-0} \
	NCCL_DEBUG_FILE="$d/nccl.%p.log" NCCL_DEBUG_SUBSYS=INIT,NET FTCC_STATUS_DIR="$d/status" \
		python3 perf/gpu/bench_allreduce.py --mode "$1" --so "$SO" -n 2 \
		--max-bytes "$MAXB" --timeout "$T_BENCH" 2>&1 | tee "$d/table.txt"
	local rc=${PIPESTATUS[0]}
	echo "rc $rc"
	verdict "allreduce $1${2:+, FTCC_LANES=$2}" "$rc"
	grep -h -m4 -iE 'collnet|NET/ftcc|Using network' "$d"/nccl.*.log | cut -c1-200
	cat "$d"/status/* 2>/dev/null | grep -E '^(state|members|last_op|reason)'
	pkill -9 -f "[p]erf/gpu/bench_allreduce.py"
}

ddp() { # lanes [seconds frozen]
	local d="$LOG/ddp-lanes$1${2:+-stop$2}"
	mkdir -p "$d/status"
	local what="killed" t=$T_DDP
	[ -z "${2:-}" ] || { what="frozen for $2 s"; t=$((T_DDP + DDP_GRACE)); }
	echo "== DDP, $N hosts, FTCC_LANES=$1, rank 2 $what at step 100"
	FTCC_LANES=$1 FTCC_STATUS_DIR="$d/status" timeout -k 5 $((t + 30)) \
		python3 perf/gpu/collnet_ddp.py --so "$SO" -n "$N" --kill 2 --kill-step 100 \
		${2:+--stop "$2" --grace "$DDP_GRACE"} --timeout "$t" --logdir "$d" | tee "$d.txt"
	verdict "DDP, FTCC_LANES=$1, rank 2 $what" "${PIPESTATUS[0]}"
	grep -h -iE 'lost|WARN' "$d"/rank*.log | sort | uniq -c | sort -rn | head -8 | cut -c1-220
	for r in $(seq 0 $((N - 1))); do
		echo "rank $r: $(grep -c '^step ' "$d/rank$r.log") hash lines," \
			"last: $(grep '^step ' "$d/rank$r.log" | tail -1)"
	done
	[ -z "${2:-}" ] || grep -hE 'Error|error|WARN' "$d/rank2.log" | tail -4 | cut -c1-220
	pkill -9 -f "[p]erf/gpu/ddp_train.py"
}

# Each phase's verdict, for the summary and the exit status (0 only when every phase passed).
PASSED=() FAILED=()
verdict() { # phase exit-status
	if [ "$2" = 0 ]; then PASSED+=("$1"); else FAILED+=("$1 (exit $2)"); fi
}

mps() { # start|stop
	[ "$MPS" = 1 ] || return 0
	export CUDA_MPS_PIPE_DIRECTORY=/tmp/ftcc-mps CUDA_MPS_LOG_DIRECTORY=$LOG/mps
	if [ "$1" = start ]; then
		mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
		nvidia-cuda-mps-control -d && echo "== MPS on" || { echo "MPS failed to start"; exit 1; }
	else
		echo quit | nvidia-cuda-mps-control && sleep 1 && echo "== MPS off"
		unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
	fi
}

mps start
for l in $LANES; do bench ftcc "$l"; done
bench net
bench socket
mps stop
for l in $DDP_LANES; do ddp "$l"; done
l=${DDP_LANES%% *}
[ "$DDP_STOP" = 0 ] || ddp "${l:-0}" "$DDP_STOP"
echo "== $((${#PASSED[@]} + ${#FAILED[@]})) phases, ${#PASSED[@]} passed"
for f in "${FAILED[@]}"; do echo "FAILED: $f"; done
[ ${#FAILED[@]} = 0 ]
