#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The whole GPU check of the CollNet plug-in in one command, for a machine with one GPU, CUDA,
# PyTorch and NCCL (see perf/gpu/RESULTS.md): builds the plug-in, benchmarks allreduce through
# ftcc's CollNet against NCCL's own socket transport, then runs a DDP job with one rank killed
# mid-training. Logs under $OUT (default gpu-logs/).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-gpu-logs}
N=${N:-4}
mkdir -p "$OUT"
{
	nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
	python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'
} 2>&1 | tee "$OUT/versions.txt"
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release >"$OUT/build.log" 2>&1 &&
	cmake --build build-gpu -j 8 --target ftcc_plugin >>"$OUT/build.log" 2>&1 ||
	{ tail -30 "$OUT/build.log"; exit 1; }
SO=build-gpu/libnccl-net-ftcc.so
for mode in socket ftcc; do
	echo "== allreduce, $mode, 2 hosts (bytes, median us, busbw GB/s, wrong)"
	timeout 900 python3 perf/gpu/bench_allreduce.py --mode "$mode" --so "$SO" -n 2 \
		--max-bytes $((1 << 30)) 2>"$OUT/bench-$mode.err" | tee "$OUT/bench-$mode.txt"
	grep -m3 -iE 'collnet|NET/ftcc|Using network' "$OUT/bench-$mode.err"
done
echo "== DDP, $N hosts, rank 2 killed at step 100"
timeout 600 python3 perf/gpu/collnet_ddp.py --so "$SO" -n "$N" --kill 2 --kill-step 100 \
	--logdir "$OUT/ddp" | tee "$OUT/ddp.txt"
grep -h 'lost; continuing' "$OUT"/ddp/rank*.log | head -3
