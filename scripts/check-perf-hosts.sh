#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# ftcc-perf between two hosts, one rank per process as mpirun or torchrun start them: two
# network namespaces joined by a veth pair stand for the hosts (10.231.R.1 and .2), and the
# ranks find each other through the bootstrap address only. Checked: the allreduce mode
# (torchrun's RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT), the collnet and p2p modes (mpirun's
# OMPI_COMM_WORLD_RANK/SIZE with FTCC_PERF_BOOT), the sock baseline (--rank/--boot); every
# rank exits 0, every row has 0 wrong bytes, and the report names several hosts. A stranger
# that connects to the bootstrap port first is refused and the run still completes.
#
# Usage: scripts/check-perf-hosts.sh [BUILD_DIR]. Needs root (network namespaces).
set -euo pipefail

build=${1:-build}
perf=$(readlink -f "$build/ftcc-perf")
plugin=$(readlink -f "$build/libnccl-net-ftcc.so")
tag=$$
ns0=ftccperf0-$tag
ns1=ftccperf1-$tag
net=10.231.$((tag % 200 + 20))
out=$(mktemp -d)
port=29661

cleanup() {
	ip netns del "$ns0" 2>/dev/null || true
	ip netns del "$ns1" 2>/dev/null || true
	rm -rf "$out"
}
trap cleanup EXIT

[ -x "$perf" ] || { echo "$perf was not built" >&2; exit 1; }
ip netns add "$ns0"
ip netns add "$ns1"
ip link add "fp0-$tag" netns "$ns0" type veth peer name "fp1-$tag" netns "$ns1"
for i in 0 1; do
	ns=ftccperf$i-$tag
	ip -n "$ns" addr add "$net.$((i + 1))/24" dev "fp$i-$tag"
	ip -n "$ns" link set "fp$i-$tag" up
	ip -n "$ns" link set lo up
done
# The kernel marks a link running a moment after it is up; an interface that is not running
# is no candidate for ftcc's device discovery.
for i in 0 1; do
	for _ in $(seq 1 100); do
		[ "$(ip netns exec "ftccperf$i-$tag" cat "/sys/class/net/fp$i-$tag/operstate")" = up ] &&
			break
		sleep 0.05
	done
done

# run_pair NAME ENV0 ENV1 ARGS...: rank 0 in the first namespace, rank 1 in the second, each
# with its own environment words (and the words in $extra0 / $extra1 after ARGS); both must
# exit 0 within the bound.
extra0=
extra1=
before1=true
run_pair() {
	local name=$1 env0=$2 env1=$3 rc0=0 rc1=0
	shift 3
	# shellcheck disable=SC2086
	timeout -k 5 120 ip netns exec "$ns0" env FTCC_PLUGIN_PATH="$plugin" $env0 "$perf" "$@" \
		$extra0 >"$out/$name.0" 2>&1 &
	local p0=$!
	"$before1" || return 1
	# shellcheck disable=SC2086
	timeout -k 5 120 ip netns exec "$ns1" env FTCC_PLUGIN_PATH="$plugin" $env1 "$perf" "$@" \
		$extra1 >"$out/$name.1" 2>&1 &
	local p1=$!
	wait "$p0" || rc0=$?
	wait "$p1" || rc1=$?
	if [ "$rc0" -ne 0 ] || [ "$rc1" -ne 0 ]; then
		echo "ftcc-perf $name across two hosts: rank 0 exit $rc0, rank 1 exit $rc1" >&2
		tail -n 30 "$out/$name.0" "$out/$name.1" >&2
		return 1
	fi
	# Every data row (first field a number) ends with its #wrong count: all 0.
	if ! awk '$1 ~ /^[0-9]+$/ { rows++; if ($NF != 0) bad++ }
		END { exit !(rows > 0 && bad == 0) }' "$out/$name.0"; then
		echo "ftcc-perf $name: no rows, or wrong bytes:" >&2
		cat "$out/$name.0" >&2
		return 1
	fi
	echo "ftcc-perf $name across two hosts:"
	grep -v '^#$' "$out/$name.0" | tail -n 4
}

# A stranger on the bootstrap port before rank 1 starts: rank 0 refuses it and goes on.
stranger() {
	for _ in $(seq 1 200); do
		if ip netns exec "$ns1" bash -c \
			"exec 3<>/dev/tcp/$net.1/$port && echo 'GET / HTTP/1.0' >&3" 2>/dev/null; then
			return 0
		fi
		sleep 0.05
	done
	echo "rank 0 never listened on $net.1:$port" >&2
	return 1
}

before1=stranger
run_pair allreduce "RANK=0 WORLD_SIZE=2 MASTER_ADDR=$net.1 MASTER_PORT=$port" \
	"RANK=1 WORLD_SIZE=2 MASTER_ADDR=$net.1 MASTER_PORT=$port" \
	-m allreduce -b 4K -e 1M -f 16 -n 5 -w 1 -c 1
before1=true
grep -q "several hosts" "$out/allreduce.0" || {
	echo "the allreduce report does not say the ranks are on several hosts" >&2
	exit 1
}
grep -q "refused a bootstrap connection\|sent no hello" "$out/allreduce.0" || {
	echo "rank 0 did not report the stranger it refused" >&2
	cat "$out/allreduce.0" >&2
	exit 1
}
run_pair collnet "OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 FTCC_PERF_BOOT=$net.1:$((port + 1))" \
	"OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 FTCC_PERF_BOOT=$net.1:$((port + 1))" \
	-m collnet -b 4K -e 1M -f 16 -n 5 -w 1 -c 1
run_pair p2p "OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 FTCC_PERF_BOOT=$net.1:$((port + 2))" \
	"OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 FTCC_PERF_BOOT=$net.1:$((port + 2))" \
	-m p2p -b 64K -e 4M -f 8 -n 5 -w 1 -c 1
extra0="--rank 0"
extra1="--rank 1"
run_pair sock "" "" -m sock -b 64K -e 4M -f 8 -n 5 -w 1 -c 1 --boot "$net.1:$((port + 3))"
