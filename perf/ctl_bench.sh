#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Membership service on this machine, one run (builds nothing):
#   failover: time from a fault to the new epoch at every survivor, for groups of 3 and 7 on
#             the embedded coordinator: a member SIGKILLed, the coordinator's host SIGKILLed, a
#             member SIGSTOPped (FTCC_FAILURE_TIMEOUT_MS = TIMEOUT, default 1000); each the
#             median of REPS runs (default 5)
#   scale:    a coordinator daemon with 256 members heartbeating at the default rate: the
#             daemon's CPU use over SECONDS (default 10) and the time to a new epoch at all
#             members after one member is SIGKILLed
#
# usage: perf/ctl_bench.sh [BUILD_DIR]      (default: build)
# env:   REPS=5 TIMEOUT=1000 SECONDS_HB=10 MEMBERS=256
set -euo pipefail

BUILD=${1:-build}
REPS=${REPS:-5}
TIMEOUT=${TIMEOUT:-1000}
SECONDS_HB=${SECONDS_HB:-10}
MEMBERS=${MEMBERS:-256}
BENCH=$BUILD/ftcc-ctl-bench
[ -x "$BENCH" ] || { echo "$BENCH not built (cmake --build $BUILD)" >&2; exit 1; }
export FTCC_DEBUG=${FTCC_DEBUG:-NONE}

echo "# membership failover: kill/freeze -> new epoch at every survivor (median of $REPS)"
for n in 3 7; do
	for kind in kill-member kill-coord stop-member; do
		"$BENCH" failover -n "$n" -k "$kind" -r "$REPS" -t "$TIMEOUT" | grep median
	done
done
echo "# coordinator daemon with $MEMBERS members"
"$BENCH" scale -n "$MEMBERS" -d "$SECONDS_HB"
