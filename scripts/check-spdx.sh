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

# The list comes from git (a clone), or from find when there is no git or no checkout; an empty
# list is an error, never a pass.
if listing=$(git ls-files --cached --others --exclude-standard -- \
	'*.c' '*.h' '*.sh' '*.py' '*.cmake' 'CMakeLists.txt' '.ci/run' 'plugin/exports.map' \
	':(exclude)build*/**' 2>/dev/null) && [ -n "$listing" ]; then
	mapfile -t files <<<"$listing"
else
	mapfile -t files < <(find . \( -path './build*' -o -path ./.git \) -prune -o -type f \
		\( -name '*.[ch]' -o -name '*.sh' -o -name '*.py' -o -name '*.cmake' \
		-o -name CMakeLists.txt -o -path ./.ci/run -o -path ./plugin/exports.map \) -print |
		sed 's|^\./||')
fi
if [ "${#files[@]}" -eq 0 ] || [ -z "${files[0]}" ]; then
	echo "check-spdx: found no source files to check" >&2
	exit 1
fi
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
