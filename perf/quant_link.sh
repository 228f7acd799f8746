#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The quantized allreduce on a slow link: two network namespaces joined by a veth pair whose
# both ends tc tbf shapes to RATE (default 1gbit), one ftcc-perf rank in each. Runs float32 and
# every codec in the same call and prints, per size, the median time, the payload rank 0 sent,
# and the ratios against float32 (bytes, effective bus bandwidth: float32 bytes over the
# codec's time), then a Streaming-DiLoCo-shaped run (examples/diloco.c: FRAGMENTS fragments
# in flight, COMPUTE_MS of compute between) against the compute alone.
#
# Usage: perf/quant_link.sh [BUILD_DIR]   (root: namespaces and tc)
#   RATE=1gbit SIZES="4M 64M" ITERS=5 REPS=3 MIB=32 FRAGMENTS=4 COMPUTE_MS=100 STEPS=24
set -euo pipefail

build=${1:-build}
perf=$(readlink -f "$build/ftcc-perf")
diloco=$(readlink -f "$build/ftcc-diloco")
rate=${RATE:-1gbit}
iters=${ITERS:-5}
reps=${REPS:-3}
mib=${MIB:-32}
fragments=${FRAGMENTS:-4}
compute_ms=${COMPUTE_MS:-100}
steps=${STEPS:-24}
read -r -a sizes <<<"${SIZES:-4M 64M}"
tag=$$
ns0=ftccq0-$tag
ns1=ftccq1-$tag
net=10.233.$((tag % 200 + 20))
out=$(mktemp -d)
port=$((30000 + tag % 2000))

cleanup() {
	ip netns del "$ns0" 2>/dev/null || true
	ip netns del "$ns1" 2>/dev/null || true
	rm -rf "$out"
}
trap cleanup EXIT

if [ ! -x "$perf" ] || [ ! -x "$diloco" ]; then
	echo "build $build first" >&2
	exit 1
fi
ip netns add "$ns0"
ip netns add "$ns1"
ip link add "fq0-$tag" netns "$ns0" type veth peer name "fq1-$tag" netns "$ns1"
for i in 0 1; do
	ns=ftccq$i-$tag
	ip -n "$ns" addr add "$net.$((i + 1))/24" dev "fq$i-$tag"
	ip -n "$ns" link set "fq$i-$tag" up
	ip -n "$ns" link set lo up
	# each direction shaped where it leaves; a burst of 512 KiB (the rate over a 250 Hz tick)
	ip netns exec "$ns" tc qdisc add dev "fq$i-$tag" root tbf rate "$rate" burst 512kb \
		latency 100ms
done
for i in 0 1; do
	for _ in $(seq 1 100); do
		[ "$(ip netns exec "ftccq$i-$tag" cat "/sys/class/net/fq$i-$tag/operstate")" = up ] &&
			break
		sleep 0.05
	done
done

# pair NAME CMD0 CMD1: rank 0's command in the first namespace, rank 1's in the second.
pair() {
	local name=$1 rc0=0 rc1=0
	timeout -k 5 600 ip netns exec "$ns0" bash -c "$2" >"$out/$name.0" 2>&1 &
	local p0=$!
	timeout -k 5 600 ip netns exec "$ns1" bash -c "$3" >"$out/$name.1" 2>&1 &
	local p1=$!
	wait "$p0" || rc0=$?
	wait "$p1" || rc1=$?
	if [ "$rc0" -ne 0 ] || [ "$rc1" -ne 0 ]; then
		echo "$name: rank 0 exit $rc0, rank 1 exit $rc1" >&2
		tail -n 20 "$out/$name.0" "$out/$name.1" >&2
		exit 1
	fi
}

echo "# quantized allreduce, 2 ranks across a veth pair shaped to $rate each way (tc tbf)," \
	"float32 sum, median of $iters per run, median of $reps runs; $(date -u +%F)"
for rep in $(seq 1 "$reps"); do
	for codec in none int8 fp8_e4m3 int4; do
		for size in "${sizes[@]}"; do
			port=$((port + 1))
			env0="RANK=0 WORLD_SIZE=2 MASTER_ADDR=$net.1 MASTER_PORT=$port"
			env1="RANK=1 WORLD_SIZE=2 MASTER_ADDR=$net.1 MASTER_PORT=$port"
			args="-m allreduce -b $size -e $size -n $iters -w 1 -c 1 -q $codec"
			pair "$codec-$size-$rep" "$env0 $perf $args" "$env1 $perf $args"
			awk -v c="$codec" -v r="$rep" '
				$1 ~ /^[0-9]+$/ { size = $1; med = $6; wrong = $NF }
				/payload bytes/ { pay = $6; err = $(NF - 4) }
				END { if (c == "none") { pay = 0; err = 0 }
				      print c, size, r, med, pay, err, wrong }' \
				"$out/$codec-$size-$rep.0" >>"$out/rows"
		done
	done
done
# fp32's payload: rank 0 sends its half and the reduced half: the size
awk '
	function median(k,   n, i, j, t, v) {
		n = split(times[k], v, " ")
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
			if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
		return v[int((n + 1) / 2)]
	}
	{ k = $1 " " $2; times[k] = times[k] " " $4; pay[k] = $5; err[k] = $6
	  bad[k] += $7; if (!($2 in seen)) { seen[$2] = 1; order[++ns] = $2 } }
	END {
		printf "%10s %9s %11s %12s %11s %11s %10s %7s\n", "bytes", "codec",
			"median_us", "payload_B", "fewer_bytes", "busbw_x_f32", "max_err", "#wrong"
		for (s = 1; s <= ns; s++) {
			base = median("none " order[s])
			n = split("none int8 fp8_e4m3 int4", cs, " ")
			for (c = 1; c <= n; c++) {
				k = cs[c] " " order[s]
				if (!(k in times)) continue
				m = median(k)
				p = cs[c] == "none" ? order[s] : pay[k]
				printf "%10s %9s %11.0f %12s %11.2f %11.2f %10s %7d\n", order[s],
					cs[c], m, p, order[s] / p, base / m, err[k], bad[k]
			}
		}
	}' "$out/rows"

echo "# Streaming-DiLoCo-shaped: $fragments fragments of $mib MiB in flight, $compute_ms ms" \
	"of compute (sleep) per step, $steps steps, one fragment's allreduce (AVG) started per step"
for mode in "--alone" "--codec none" "--codec int8" "--codec int4"; do
	port=$((port + 1))
	addrs="$net.1:$port,$net.2:$port"
	args="--mib $mib --fragments $fragments --compute-ms $compute_ms --steps $steps $mode"
	pair "diloco${mode// /}" "$diloco 0 2 $addrs $args" "$diloco 1 2 $addrs $args"
	grep '^diloco' "$out/diloco${mode// /}.0"
done
