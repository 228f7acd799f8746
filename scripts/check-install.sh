#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Checks what a user installs, as a user would use it: `cmake --install BUILD_DIR` into a
# scratch prefix, then the README's example program built once through pkg-config and once
# through a CMake project with find_package(ftcc), both run against the installed library (size
# 1: it forms alone, runs its steps and exits 0); a program using the status-file reader
# (ftcc_status.h); and `cpack -G DEB` makes a package holding both libraries.
#
# Usage: scripts/check-install.sh [BUILD_DIR]   (default: build; built already)
set -euo pipefail

cd "$(dirname "$0")/.."
build=$(cd "${1:-build}" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
prefix=$scratch/prefix

cmake --install "$build" --prefix "$prefix" >/dev/null
awk '/^```c$/ { on = 1; next } on && /^```$/ { exit } on { print }' README.md >"$scratch/example.c"

# A port nobody listens on, for the example's single member (not the default 29500, which a
# torch job on the machine may hold).
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
pc=$(find "$prefix" -name ftcc.pc -print -quit)
[ -n "$pc" ] || {
	echo "check-install: no ftcc.pc installed" >&2
	exit 1
}
libdir=$(dirname "$(dirname "$pc")")

# pkg-config
export PKG_CONFIG_PATH=$(dirname "$pc")
[ "$(pkg-config --modversion ftcc)" = "$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build/CMakeCache.txt")" ] || {
	echo "check-install: ftcc.pc's version differs from the build's" >&2
	exit 1
}
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror "$scratch/example.c" $(pkg-config --cflags --libs ftcc) \
	-o "$scratch/example-pc"
LD_LIBRARY_PATH=$libdir timeout 60 "$scratch/example-pc" 0 1 "$port" >/dev/null
# the status-file reader of the installed header and library
cat >"$scratch/status.c" <<'C'
#include <stdio.h>
#include <string.h>

#include "ftcc_status.h"

int main(void)
{
	static struct ftcc_status st;
	const char *t = "format 1\ngroup g\nnode 0\nnodes 2\nstate running\nepoch 2\n"
			"members 0\nlost 1 epoch 2 at_ms 5\n";

	return ftcc_status_parse(t, strlen(t), &st) || st.nlost != 1 || st.lost[0].node != 1;
}
C
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror "$scratch/status.c" $(pkg-config --cflags --libs ftcc) \
	-o "$scratch/status-pc"
LD_LIBRARY_PATH=$libdir "$scratch/status-pc"

# find_package(ftcc)
mkdir -p "$scratch/consumer"
cp "$scratch/example.c" "$scratch/consumer/"
cat >"$scratch/consumer/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.20)
project(consumer LANGUAGES C)
find_package(ftcc 0.1 REQUIRED)
add_executable(example example.c)
target_link_libraries(example PRIVATE ftcc::ftcc)
CMAKE
cmake -S "$scratch/consumer" -B "$scratch/consumer/build" -DCMAKE_PREFIX_PATH="$prefix" \
	>/dev/null
cmake --build "$scratch/consumer/build" >/dev/null
LD_LIBRARY_PATH=$libdir timeout 60 "$scratch/consumer/build/example" 0 1 "$port" >/dev/null

# the Debian package
if command -v dpkg-deb >/dev/null 2>&1; then
	(cd "$scratch" && cpack -G DEB --config "$build/CPackConfig.cmake" >/dev/null)
	deb=$(ls "$scratch"/ftcc_*.deb)
	list=$(dpkg-deb -c "$deb")
	for want in libftcc.so.0 libnccl-net-ftcc.so include/ftcc.h include/ftcc_status.h pkgconfig/ftcc.pc \
		cmake/ftcc/ftccConfig.cmake bin/ftcc-coordinator bin/ftcc-settings; do
		if ! grep -q "$want" <<<"$list"; then
			echo "check-install: $(basename "$deb") lacks $want" >&2
			exit 1
		fi
	done
	echo "check-install: installed, built through pkg-config and find_package, ran; $(basename "$deb") built"
else
	echo "check-install: installed, built through pkg-config and find_package, ran; no dpkg-deb, no .deb"
fi
