#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Checks that every source file of the project names its license in an SPDX line within its
# first three lines (after a #! line where there is one). Data files (the fuzz corpora) and
# documents are not sources.
#
# Usage: scripts/check-spdx.sh          lists the files without one; exit 1 if any
#        scripts/check-spdx.sh --add    adds the line where it is missing
set -euo pipefail

cd "$(dirname "$0")/.."
id="SPDX-License-Identifier: BSD-3-Clause"
add=0
[ "${1:-}" = "--add" ] && add=1

mapfile -t files < <(git ls-files --cached --others --exclude-standard -- \
	'*.c' '*.h' '*.sh' '*.py' '*.cmake' 'CMakeLists.txt' '.ci/run' 'plugin/exports.map' \
	':(exclude)build*/**')
missing=0
for f in "${files[@]}"; do
	[ -f "$f" ] || continue
	if head -n 3 "$f" | grep -q "SPDX-License-Identifier: "; then
		continue
	fi
	if [ "$add" = 0 ]; then
		echo "check-spdx: $f has no SPDX-License-Identifier line" >&2
		missing=$((missing + 1))
		continue
	fi
	case "$f" in
	*.c | *.h | *.map) line="/* $id */" ;;
	*) line="# $id" ;;
	esac
	if head -n 1 "$f" | grep -q '^#!'; then
		sed -i "1a $line" "$f"
	else
		sed -i "1i $line" "$f"
	fi
done
[ "$missing" -eq 0 ]
