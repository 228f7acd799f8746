#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The main job: builds ftcc and runs a live demo of the fault-tolerant allreduce. Four local
# members allreduce 1 MiB per step on the embedded coordinator; member 2 is SIGKILLed inside
# step 12 (in the ring's reduce-scatter) and restarted after step 20. Each step prints its
# epoch, its contributors, its time and its result checksum on every member: the survivors
# finish step 12 without member 2 and go on in epoch 2; the restarted member is admitted at an
# op boundary the group agrees on, without stalling anyone, and contributes again.
# Then the NCCL net plug-in's own demo: a peer killed mid-transfer is reported within 1 s;
# and the CollNet tables driven as NCCL's proxy drives them.
# Extra arguments go to ftcc-demo (ftcc-demo -h).
set -euo pipefail

cd "$(dirname "$0")/.."
bash scripts/install-deps.sh --demo
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target ftcc-demo ftcc_plugin ftcc-perf >/dev/null
export FTCC_SOCKET_IFNAME=lo

echo
echo "== 1. Fault-tolerant allreduce through include/ftcc.h: kill, new epoch, rejoin"
build/ftcc-demo "$@"

echo
echo "== 2. NCCL net plug-in: rank 1 is SIGKILLed mid-transfer; rank 0's pending test()"
echo "      returns ncclRemoteError within 1 s, with one WARN line naming the peer"
FTCC_PLUGIN_PATH=$PWD/build/libnccl-net-ftcc.so build/ftcc-perf -m fault -b 16M -e 16M -k 20

echo
echo "== 3. NCCL CollNet plug-in: 4 node heads drive ncclCollNetPlugin_v11 as NCCL's proxy"
echo "      does (listen, handles exchanged, connect, iallreduce + test), results checked"
FTCC_PLUGIN_PATH=$PWD/build/libnccl-net-ftcc.so build/ftcc-perf -m collnet -N 4 -b 64K -e 16M \
	-f 4 -n 10 -w 2 -c 1
