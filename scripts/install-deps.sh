#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Installs what building and testing ftcc needs on Debian 12. Idempotent: does nothing (and
# needs no network) when every package is already installed.
#
#   scripts/install-deps.sh          the build and every test (scripts/test.sh)
#   scripts/install-deps.sh --demo   the build only (scripts/demo.sh)
set -euo pipefail

PACKAGES=(
	build-essential cmake pkg-config   # the build
	libhwloc-dev hwloc                 # NIC topology (header at build time; dlopen'ed at run)
	libibverbs-dev                     # verbs headers for the ib transport (dlopen'ed at run)
)
if [ "${1:-}" != "--demo" ]; then
	PACKAGES+=(
		libcriterion-dev           # unit, abi and chaos tests
		iperf3 nftables iproute2   # chaos tests: baselines, dropped links, netns
		clang libclang-rt-14-dev   # libFuzzer targets
		clang-format               # style check
		python3                    # the status reader's tests (python/ftcc_status.py)
	)
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
	# dpkg -s also succeeds for packages removed but not purged: read the status line.
	if ! dpkg -s "$pkg" 2>/dev/null | grep -q '^Status: install ok installed'; then
		missing+=("$pkg")
	fi
done

if [ "${#missing[@]}" -eq 0 ]; then
	echo "install-deps: all ${#PACKAGES[@]} packages present"
	exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
	SUDO=()
elif command -v sudo >/dev/null 2>&1; then
	SUDO=(sudo)
else
	echo "install-deps: missing ${missing[*]}; not root and no sudo to install them" >&2
	exit 1
fi

echo "install-deps: installing ${missing[*]}"
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
	"${missing[@]}"
