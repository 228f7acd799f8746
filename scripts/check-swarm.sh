#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The SWARM-shaped example (examples/swarm.c) in a network namespace of its own (its ports are
# its own): 5 members, the first stage, 3 workers and the last stage, and worker 1 dies holding
# a microbatch. Checked: the first stage and the last stage exit 0 (every microbatch confirmed,
# every result right), the surviving workers exit 0, the dead worker exits as it chose to (3),
# and the first stage says microbatches were sent again.
#
# Usage: scripts/check-swarm.sh [BUILD_DIR]. Needs root (a network namespace).
set -euo pipefail

build=${1:-build}
swarm=$(readlink -f "$build/ftcc-swarm")
ns=ftccswarm-$$
out=$(mktemp -d)

cleanup() {
	ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
	ip netns del "$ns" 2>/dev/null || true
	rm -rf "$out"
}
trap cleanup EXIT

[ -x "$swarm" ] || { echo "$swarm was not built" >&2; exit 1; }
ip netns add "$ns"
ip -n "$ns" link set lo up
addrs=127.0.0.1:29701,127.0.0.1:29702,127.0.0.1:29703,127.0.0.1:29704,127.0.0.1:29705
pids=()
for r in 0 1 2 3 4; do
	ip netns exec "$ns" timeout -k 5 120 "$swarm" "$r" 5 "$addrs" --microbatches 48 \
		--die-after 3 >"$out/$r.out" 2>"$out/$r.err" &
	pids+=($!)
done
fail=0
for r in 0 1 2 3 4; do
	rc=0
	wait "${pids[$r]}" || rc=$?
	want=0
	[ "$r" = 1 ] && want=3
	if [ "$rc" != "$want" ]; then
		echo "member $r exited with $rc (expected $want)" >&2
		sed 's/^/  /' "$out/$r.err" | tail -20 >&2
		fail=1
	fi
done
cat "$out/0.out"
if ! grep -Eq "48 microbatches through 3 workers, [1-9][0-9]* sent again" "$out/0.out"; then
	echo "the first stage did not report the microbatches sent again" >&2
	fail=1
fi
exit "$fail"
