#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Checks README.md against the settings table: every FTCC_* setting is documented there, and
# the README names no FTCC_* variable that the table does not have.
#
# Usage: scripts/check-readme-settings.sh [BUILD_DIR]   (default: build). Builds nothing; it
# runs BUILD_DIR/ftcc-settings, which prints the table compiled from include/ftcc/settings.h.
set -euo pipefail

cd "$(dirname "$0")/.."
build=${1:-build}
printer="$build/ftcc-settings"
readme=README.md

if [ ! -x "$printer" ]; then
	echo "check-readme-settings: $printer not found; build first (cmake --build $build)" >&2
	exit 1
fi
if [ ! -f "$readme" ]; then
	echo "check-readme-settings: $readme does not exist; it must document every setting:" >&2
	"$printer" >&2
	exit 1
fi

mapfile -t table < <("$printer" --names)
if [ "${#table[@]}" -eq 0 ]; then
	echo "check-readme-settings: $printer printed no settings" >&2
	exit 1
fi

# Names that are not settings: CMake options (-DFTCC_WERROR=ON ...), and knobs of the test
# scripts and the ABI tests.
mapfile -t cmake_opts < <(grep -hoE '(option|set)\(FTCC_[A-Z0-9_]+' CMakeLists.txt cmake/*.cmake \
	2>/dev/null | sed -E 's/^(option|set)\(//' | sort -u)
not_settings() {
	local name=$1 opt
	case "$name" in
	FTCC_TEST_* | FTCC_FUZZ_* | FTCC_PLUGIN_PATH | FTCC_PERF_BOOT) return 0 ;;
	# Former names of settings, mentioned as such.
	FTCC_MIN_CHUNK | FTCC_EAGER_MAX | FTCC_SOCKBUF) return 0 ;;
	# Names of the C API (include/ftcc.h): error codes, types, operators, policies.
	FTCC_ERR_* | FTCC_DEGRADED_* | FTCC_OK | FTCC_SUM | FTCC_PROD | FTCC_MAX | FTCC_MIN) return 0 ;;
	FTCC_AVG | FTCC_INT* | FTCC_UINT* | FTCC_FLOAT* | FTCC_BFLOAT16 | FTCC_FP8_*) return 0 ;;
	FTCC_VERSION* | FTCC_MAX_INFLIGHT | FTCC_MAX_MEMBERS | FTCC_MAX_COUNT) return 0 ;;
	FTCC_CODEC_* | FTCC_ANY_SOURCE | FTCC_ANY_TAG | FTCC_TAG_MAX) return 0 ;;
	esac
	for opt in "${cmake_opts[@]}"; do
		[ "$name" = "$opt" ] && return 0
	done
	return 1
}

status=0
for name in "${table[@]}"; do
	if ! grep -qE "(^|[^A-Z0-9_])${name}([^A-Z0-9_]|\$)" "$readme"; then
		echo "check-readme-settings: $name is a setting but $readme does not mention it" >&2
		status=1
	fi
done

while read -r name; do
	not_settings "$name" && continue
	found=0
	for known in "${table[@]}"; do
		[ "$name" = "$known" ] && found=1 && break
	done
	if [ "$found" = 0 ]; then
		echo "check-readme-settings: $readme mentions $name, which is not in the settings table" >&2
		status=1
	fi
done < <(grep -oE 'FTCC_[A-Z0-9_]*[A-Z0-9]' "$readme" | sort -u)

if [ "$status" = 0 ]; then
	echo "check-readme-settings: README documents all ${#table[@]} settings"
fi
exit "$status"
