#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The test command: builds ftcc and runs every check CI runs, stopping at the first failure.
#
#   (a) build/       Release, -Werror: unit, abi, chaos tests (those of faults between live
#                    members also with FTCC_LANES=2); fuzz replays; exported symbols;
#                    no link-time hwloc/verbs/CUDA/NCCL; clang-format; README settings table;
#                    the net plug-in's faults over ib (the verbs emulator)
#   (b) build-asan/  gcc with address,undefined sanitizers: every test binary again, and the
#                    net, allreduce and CollNet tests over ib
#   (c) build-fuzz/  clang with libFuzzer: each fuzz target for FTCC_FUZZ_SECONDS
#
# Knobs: FTCC_TEST_QUICK=1 runs (a) only; FTCC_FUZZ_SECONDS (15); FTCC_FUZZ_RUNS (20000) and
# FTCC_FUZZ_SEED (1) for the replays; FTCC_TEST_TIMEOUT (900 s) bounds each test binary.
set -uo pipefail

cd "$(dirname "$0")/.." || exit 1
ROOT=$(pwd)
JOBS=$(nproc 2>/dev/null || echo 4)
QUICK=${FTCC_TEST_QUICK:-0}
FUZZ_SECONDS=${FTCC_FUZZ_SECONDS:-15}
FUZZ_RUNS=${FTCC_FUZZ_RUNS:-20000}
FUZZ_SEED=${FTCC_FUZZ_SEED:-1}
TEST_TIMEOUT=${FTCC_TEST_TIMEOUT:-900}

passed=0
failed=0
skipped=0
STEP_LOG=$(mktemp "${TMPDIR:-/tmp}/ftcc-step.XXXXXX") || exit 1
trap 'rm -f "$STEP_LOG"' EXIT

summary() {
	echo "test.sh: $passed passed, $failed failed, $skipped skipped"
}

# step NAME COMMAND...: runs one counted step; the first failure ends the run.
step() {
	local name=$1 t0=$SECONDS
	shift
	echo "==> $name"
	if "$@" 2>&1 | tee "$STEP_LOG"; then
		passed=$((passed + 1))
		echo "<== $name: $((SECONDS - t0)) s"
	else
		failed=$((failed + 1))
		# Later tests' output may bury a failure's lines: they are repeated at the end.
		# First the warnings of the processes a failed test described (their logs are
		# printed only on failure) and late wake-ups of their own (sched_watch.h), then the
		# failures themselves.
		echo "test.sh: warnings and scheduling gaps in step: $name"
		grep -E ' WARN |sched watch:' "$STEP_LOG" | cut -c1-200 |
			awk '{ k = match($0, /(head|member) [0-9]+/) ? substr($0, RSTART, RLENGTH) : "";
			       if (++n[k] <= 8) print }' | head -40
		# A library thread that stopped running while its process ran (sched_watch.h):
		# the report and every thread's state; then what the heads still running showed
		# when the failed test asked them (their threads' states).
		grep -E -A20 'thread watch: .* has not run for' "$STEP_LOG" | cut -c1-200 | head -44
		grep -E -A14 'thread watch: asked for a dump' "$STEP_LOG" | cut -c1-200 | head -70
		echo "test.sh: what failed in step: $name"
		grep -E -A6 'Assertion Failed|\[FAIL\]|CRASH|Sanitizer|runtime error' "$STEP_LOG" |
			cut -c1-300 | head -40
		echo "test.sh: FAILED step: $name" >&2
		summary
		exit 1
	fi
}

skip() {
	echo "==> SKIP $1: $2"
	skipped=$((skipped + 1))
}

# A setting left in the caller's environment (FTCC_INJECT above all) would change what the
# tests see; they start from the defaults and set what they need themselves.
for var in $(compgen -e | grep -E '^FTCC_' | grep -Ev '^FTCC_(TEST|FUZZ)_'); do
	echo "test.sh: unsetting $var for the tests"
	unset "$var"
done

# run_bounded CMD...: runs a test binary under the time bound.
run_bounded() {
	timeout -k 30 "$TEST_TIMEOUT" "$@"
}

# run_tests DIR: every test binary built in DIR.
run_tests() {
	local dir=$1 kind
	if [ -x "$dir/test_unit" ]; then
		step "$dir: unit tests" run_bounded "$dir/test_unit" --jobs "$JOBS"
	fi
	if [ -x "$dir/test_abi" ]; then
		step "$dir: ABI tests" run_bounded "$dir/test_abi"
	fi
	for kind in mproc hw; do
		if [ -x "$dir/test_$kind" ]; then
			step "$dir: $kind tests" run_bounded "$dir/test_$kind" --jobs 1
		fi
	done
	if [ -x "$dir/test_chaos" ]; then
		if [ "$(id -u)" -eq 0 ]; then
			# The soaks (random faults for a fixed time) run their full time in the
			# Release build and a third of it with the sanitizers.
			if [ "$dir" = build ]; then
				step "$dir: chaos tests" run_bounded "$dir/test_chaos" --jobs 1
			else
				step "$dir: chaos tests" env FTCC_TEST_LIVE_SOAK_SECONDS=20 \
					FTCC_TEST_SOAK_SECONDS=7 timeout -k 30 "$TEST_TIMEOUT" \
					"$dir/test_chaos" --jobs 1
			fi
		else
			skip "$dir: chaos tests" "need root (network namespaces, nftables); NOT run"
		fi
	fi
	if [ "$dir" = build ] && [ -x "$dir/test_chaos" ] && [ "$(id -u)" -eq 0 ]; then
		# Lanes (FTCC_LANES): the faults between live members again with two ops in flight
		# side by side (the kill tests with 2 to 4 lanes are in the chaos run above). Not
		# here: ft_cut, whose `nft delete table` hung in the kernel after the cut member left
		# in 2 of 5 runs with two lanes (the nft process outlived its SIGKILL by 5 s; cause
		# not found), the other crash suites, and groups of 3 and 8 (over ib in the sanitizer
		# build), for time.
		step "$dir: faults between live members with two lanes" env FTCC_LANES=2 \
			timeout -k 30 "$TEST_TIMEOUT" "$dir/test_chaos" --jobs 1 \
			--filter 'live/*_of_@(2|4)'
	fi
	run_ib_tests "$dir"
	run_replays "$dir"
}

# run_ib_tests DIR: the same tests again over the ib transport, on the verbs emulator built in
# DIR/ibemu (chaos_ib, in the chaos run above, already forces ib): the net plug-in's ABI tests
# and its process, listener and side-channel link faults; the CollNet ABI tests and node
# faults; the engine's allreduce tests (mproc), its crash faults and its faults between live
# members (groups of 3 and 8), whose frames then travel over ib. The sanitizer build runs them
# all; the Release build only the net plug-in's faults and the fallback without libibverbs
# (its other runs over ib repeated the sanitizer build's, and the suite must stay within
# 30 minutes on 2 cores). The tests cut the
# emulated fabric where they cut an IP with nftables. Left out: reset_by_nft_reject (its fault
# rejects the TCP segments of the busiest flow, and over ib the side channel's flows carry too
# little to be hit). The ABI tests run one at a time here:
# two groups of four emulated nodes at once on two cores starve one head's emulated NIC past
# the failure timeout. The soaks run over tcp only. `FTCC_TEST_TRANSPORT=ib` runs any test by
# hand.
run_ib_tests() {
	local dir=$1
	if [ ! -d "$dir/ibemu" ]; then
		skip "$dir: tests over ib" "built without the ib transport (libibverbs-dev); NOT run"
		return
	fi
	if [ -x "$dir/test_chaos" ] && [ "$(id -u)" -eq 0 ]; then
		step "$dir: net process and link faults over ib" env FTCC_TEST_TRANSPORT=ib \
			timeout -k 30 "$TEST_TIMEOUT" "$dir/test_chaos" --jobs 1 \
			--filter '@(chaos_proc|chaos_listen|chaos_link)/!(reset_by_nft_reject)'
	fi
	if [ "$dir" = build ]; then
		# The same .so where libibverbs cannot be loaded: auto must serve TCP.
		step "$dir: net ABI tests without libibverbs" env FTCC_TEST_TRANSPORT=no-verbs \
			timeout -k 30 "$TEST_TIMEOUT" "$dir/test_abi" --filter 'net_v*/*'
		return
	fi
	step "$dir: net and CollNet ABI tests over ib" env FTCC_TEST_TRANSPORT=ib \
		timeout -k 30 "$TEST_TIMEOUT" "$dir/test_abi" --jobs 1 \
		--filter '@(net_v*|collnet*)/*'
	if [ -x "$dir/test_mproc" ]; then
		# Not the control plane's own tests (ctl_*): they never use the data transport.
		step "$dir: allreduce tests over ib" env FTCC_TEST_TRANSPORT=ib \
			timeout -k 30 "$TEST_TIMEOUT" "$dir/test_mproc" --jobs 1 \
			--filter '!(ctl_*)/*'
	fi
	if [ -x "$dir/test_chaos" ] && [ "$(id -u)" -eq 0 ]; then
		step "$dir: allreduce and CollNet faults over ib" env FTCC_TEST_TRANSPORT=ib \
			timeout -k 30 "$TEST_TIMEOUT" "$dir/test_chaos" --jobs 1 --filter \
			'@(ft_kill|ft_freeze|ft_cut|ft_join|ft_degraded|ft_abort|collnet_chaos|collnet_stop)/*'
		step "$dir: faults between live members over ib" env FTCC_TEST_TRANSPORT=ib \
			timeout -k 30 "$TEST_TIMEOUT" "$dir/test_chaos" --jobs 1 \
			--filter 'live/*_of_@(3|8)'
	fi
}

# run_replays DIR: each fuzz target's replay binary over its corpus plus random inputs.
run_replays() {
	local dir=$1 bin name corpus
	for bin in "$dir"/fuzz_*_replay; do
		[ -x "$bin" ] || continue
		name=$(basename "$bin" _replay)
		corpus=()
		if [ -d "tests/fuzz/corpus/$name" ]; then
			corpus=("tests/fuzz/corpus/$name")
		fi
		step "$dir: $name replay" run_bounded "$bin" -runs="$FUZZ_RUNS" -seed="$FUZZ_SEED" \
			"${corpus[@]}"
	done
}

check_exports() {
	local so=$1 syms bad want
	[ -f "$so" ] || { echo "$so was not built" >&2; return 1; }
	# Type A entries are version nodes of the export map, not symbols anyone can call; a
	# name's @VERSION suffix, if the map names one, is not part of the name.
	syms=$(nm -D --defined-only "$so" | awk '$2 != "A" { sub(/@.*/, "", $3); print $3 }')
	bad=$(echo "$syms" | grep -Ev '^(ncclNetPlugin_v|ncclCollNetPlugin_v)' || true)
	if [ -n "$bad" ]; then
		echo "unexpected exported symbols in $so:" >&2
		echo "$bad" >&2
		return 1
	fi
	for want in ncclNetPlugin_v8 ncclNetPlugin_v9 ncclNetPlugin_v10 ncclNetPlugin_v11 \
		ncclCollNetPlugin_v8 ncclCollNetPlugin_v9 ncclCollNetPlugin_v10 ncclCollNetPlugin_v11; do
		if ! echo "$syms" | grep -qx "$want"; then
			echo "$so does not export $want" >&2
			return 1
		fi
	done
}

check_no_runtime_deps() {
	local so=$1 bad
	bad=$(ldd "$so" | grep -Ei 'libhwloc|libibverbs|libmlx5|libcuda|libcudart|libnccl' || true)
	bad+=$(readelf -d "$so" | grep NEEDED |
		grep -Ei 'hwloc|ibverbs|mlx5|rdmacm|cuda|nccl' || true)
	if [ -n "$bad" ]; then
		echo "$so links libraries it must only dlopen (or never load):" >&2
		echo "$bad" >&2
		return 1
	fi
	# A verb left undefined would make the .so fail to load where rdma-core is absent.
	bad=$(nm -D --undefined-only "$so" | grep -E ' (ibv_|_ibv_|hwloc_|cu[A-Z])' || true)
	if [ -n "$bad" ]; then
		echo "$so has undefined symbols it must resolve with dlsym:" >&2
		echo "$bad" >&2
		return 1
	fi
}

check_format() {
	local files
	if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
		# Untracked files count too (new work is checked before it is committed); build
		# trees do not, even where .gitignore does not list them.
		mapfile -t files < <(git ls-files --cached --others --exclude-standard -- \
			'*.c' '*.h' ':(exclude)build*/**')
	else
		mapfile -t files < <(find . -path ./build\* -prune -o -name '*.[ch]' -print)
	fi
	[ "${#files[@]}" -gt 0 ] || return 0
	clang-format --dry-run -Werror "${files[@]}"
}

# run_fuzzer DIR NAME: libFuzzer target NAME for FUZZ_SECONDS, from its corpus. New inputs go
# to a scratch directory, never into the source tree; crashes are kept as DIR/NAME-crash-*.
run_fuzzer() {
	local dir=$1 name=$2 scratch log ret=0
	local corpus=()
	if [ -d "tests/fuzz/corpus/$name" ]; then
		corpus=("tests/fuzz/corpus/$name")
	fi
	scratch=$(mktemp -d)
	log="$dir/$name.log"
	timeout -k 30 $((FUZZ_SECONDS + 300)) "$dir/$name" -max_total_time="$FUZZ_SECONDS" \
		-timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
		-artifact_prefix="$dir/$name-" "$scratch" "${corpus[@]}" >"$log" 2>&1 || ret=$?
	rm -rf "$scratch"
	if [ "$ret" -ne 0 ]; then
		tail -n 80 "$log" >&2
		echo "$name failed (exit $ret); full log $log, inputs $dir/$name-*" >&2
		return 1
	fi
	grep -E '^stat::number_of_executed_units|^Done' "$log" || true
}

# sweep_stale_nft: deletes the nftables tables of chaos test processes that are gone. A test
# run killed mid-fault (its teardown never ran) leaves a table dropping loopback traffic between
# test addresses, and every later multi-process test on the machine would see a cut link.
sweep_stale_nft() {
	local table pid
	command -v nft >/dev/null 2>&1 || return 0
	[ "$(id -u)" -eq 0 ] || return 0
	while read -r table; do
		pid=${table#ftcc_test_}
		case $pid in '' | *[!0-9]*) continue ;; esac
		if ! kill -0 "$pid" 2>/dev/null; then
			echo "test.sh: deleting nftables table $table left by a killed test run (pid $pid)"
			# Another run may have deleted it first: only a table still there is an error.
			if ! nft delete table inet "$table" 2>/dev/null &&
				nft list table inet "$table" >/dev/null 2>&1; then
				echo "test.sh: could not delete nftables table $table" >&2
				return 1
			fi
		fi
	done < <(nft list tables inet 2>/dev/null | awk '$1 == "table" && $3 ~ /^ftcc_test_/ { print $3 }')
}

# check_readme_example: the README's first C block compiles, warning-free, against
# include/ftcc.h and links with libftcc.so, as a reader would build it, and is the program
# built as ftcc-example (examples/allreduce.c).
check_readme_example() {
	local dir=$1 src
	src=$(mktemp --suffix=.c)
	awk '/^```c$/ { on = 1; next } on && /^```$/ { exit } on { print }' README.md >"$src"
	if [ ! -s "$src" ]; then
		echo "README.md has no \`\`\`c block" >&2
		rm -f "$src"
		return 1
	fi
	if ! cc -std=c11 -Wall -Wextra -Werror -Iinclude "$src" -L"$dir" -lftcc \
		-o "$dir/readme-example"; then
		rm -f "$src"
		return 1
	fi
	# build/ftcc-example is the same program: examples/allreduce.c after its comment
	if ! diff -u "$src" <(sed -n '/^#define _POSIX_C_SOURCE/,$p' examples/allreduce.c); then
		echo "examples/allreduce.c differs from README.md's example" >&2
		rm -f "$src"
		return 1
	fi
	rm -f "$src"
}

configure_and_build() {
	local dir=$1
	shift
	cmake -S "$ROOT" -B "$dir" "$@" && cmake --build "$dir" -j "$JOBS"
}

# ---- (a) ----------------------------------------------------------------------------------
step "install dependencies" bash scripts/install-deps.sh
step "leftovers of killed test runs" sweep_stale_nft
step "build (Release, -Werror)" configure_and_build build -DCMAKE_BUILD_TYPE=Release \
	-DFTCC_WERROR=ON -DFTCC_SANITIZE= -DFTCC_FUZZ=OFF -DFTCC_WITH_IB=ON
step "exported symbols" check_exports build/libnccl-net-ftcc.so
step "no link-time hwloc/verbs/CUDA/NCCL" check_no_runtime_deps build/libnccl-net-ftcc.so
run_tests build
step "clang-format" check_format
step "README settings table" bash scripts/check-readme-settings.sh build
step "README example compiles" check_readme_example build
step "SPDX license lines" bash scripts/check-spdx.sh
step "install, pkg-config, find_package, .deb" bash scripts/check-install.sh build
if [ "$(id -u)" -eq 0 ]; then
	step "ftcc-perf between two hosts (network namespaces)" bash scripts/check-perf-hosts.sh build
	step "SWARM-shaped example, a worker lost (network namespace)" \
		bash scripts/check-swarm.sh build
else
	skip "ftcc-perf between two hosts" "needs root (network namespaces); NOT run"
	skip "SWARM-shaped example" "needs root (a network namespace); NOT run"
fi

if [ "$QUICK" = 1 ]; then
	skip "sanitizer and fuzz builds" "FTCC_TEST_QUICK=1"
	summary
	exit 0
fi

# ---- (b) ----------------------------------------------------------------------------------
# allocator_may_return_null: a failed allocation is NULL, as without ASan (the local failure
# tests cap a member's address space and expect the library to cope, not the sanitizer to abort)
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1
export LSAN_OPTIONS=suppressions=$ROOT/tests/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
step "build (address,undefined sanitizers)" configure_and_build build-asan \
	-DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	-DFTCC_SANITIZE=address,undefined -DFTCC_FUZZ=OFF -DFTCC_WITH_IB=ON
run_tests build-asan
if [ "$(id -u)" -eq 0 ]; then
	step "build-asan: SWARM-shaped example, a worker lost" bash scripts/check-swarm.sh build-asan
fi

# ---- (c) ----------------------------------------------------------------------------------
mapfile -t fuzzers < <(for f in tests/fuzz/fuzz_*.c; do [ -f "$f" ] && basename "$f" .c; done)
if ! command -v clang >/dev/null 2>&1; then
	skip "libFuzzer runs" "clang not installed"
elif [ "${#fuzzers[@]}" -eq 0 ]; then
	skip "libFuzzer runs" "no tests/fuzz/fuzz_*.c"
else
	unset ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS # libFuzzer sets what it needs
	step "build (libFuzzer, clang)" cmake -S "$ROOT" -B build-fuzz -DCMAKE_C_COMPILER=clang \
		-DCMAKE_BUILD_TYPE=RelWithDebInfo -DFTCC_FUZZ=ON -DFTCC_SANITIZE= -DFTCC_WITH_IB=ON
	step "build fuzz targets" cmake --build build-fuzz -j "$JOBS" --target "${fuzzers[@]}"
	for name in "${fuzzers[@]}"; do
		step "fuzz $name for ${FUZZ_SECONDS}s" run_fuzzer build-fuzz "$name"
	done
fi

summary
