#!/usr/bin/env bash
# The main job: builds ftcc and runs a live demo of the NCCL net plug-in between two local
# processes over loopback: throughput through the plug-in's ABI, then a peer killed in the
# middle of a transfer and the time until the survivor's pending request reports it.
set -euo pipefail

cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target ftcc_plugin ftcc-perf >/dev/null
export FTCC_PLUGIN_PATH=$PWD/build/libnccl-net-ftcc.so FTCC_SOCKET_IFNAME=lo

echo
echo "== 1. Throughput: rank 0 -> rank 1 through ncclNetPlugin_v11 (isend/irecv/test)"
build/ftcc-perf -m p2p -b 4K -e 64M -f 4 -n 10 -w 3 -c 1

echo
echo "== 2. Same sizes over one plain blocking TCP socket, for comparison"
build/ftcc-perf -m sock -b 4K -e 64M -f 4 -n 10 -w 3

echo
echo "== 3. A peer dies: rank 1 is SIGKILLed mid-transfer; rank 0's pending test() must"
echo "      return ncclRemoteError within 1 s, with one WARN line naming the peer"
build/ftcc-perf -m fault -b 16M -e 16M -k 20
echo
echo "== 4. A peer freezes: rank 1 is SIGSTOPped; heartbeats stop; reported after"
echo "      FTCC_FAILURE_TIMEOUT_MS=1000"
FTCC_FAILURE_TIMEOUT_MS=1000 build/ftcc-perf -m fault -b 16M -e 16M -k 20 -K STOP
