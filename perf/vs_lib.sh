# SPDX-License-Identifier: BSD-3-Clause
# Shared pieces of the comparison scripts (allreduce_vs.sh, collnet_vs_capi.sh, lanes_vs.sh, ...);
# sourced.
# Makes $WORK, a scratch directory whose JSON files are copied to $OUT (when set) at exit.

WORK=$(mktemp -d)
vs_cleanup() {
	if [[ -n ${OUT:-} ]]; then
		mkdir -p "$OUT"
		cp "$WORK"/*.json "$OUT"/ 2>/dev/null || true
	fi
	rm -rf "$WORK"
}
trap vs_cleanup EXIT
trap 'exit 130' INT TERM

# vs_require BUILD FILE...: exits (2) unless every FILE exists (built in BUILD) and jq and timeout
# are installed
vs_require() {
	local build=$1 f t
	shift
	for f in "$@"; do
		[[ -e $f ]] || { echo "missing $f (build first: cmake --build $build)" >&2; exit 2; }
	done
	for t in jq timeout; do
		command -v "$t" >/dev/null || { echo "needs $t" >&2; exit 2; }
	done
}

# median of the numbers on stdin
median() {
	sort -g | awk '{ v[NR] = $1 } END {
		if (NR == 0) { print "nan"; exit }
		if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# pick NAME SIZE FIELD (scripts keeping runs as $WORK/NAME.json; a script may define its own): median over runs of FIELD in the rows of SIZE
pick() {
	[[ -s $WORK/$1.json ]] || { echo nan; return; }
	jq -r --argjson s "$2" "select(.size == \$s and (.event | not)) | .$3" "$WORK/$1.json" |
		median
}

# wrong NAME: total wrong elements over the checked run, or "failed"
wrong() {
	[[ -s $WORK/$1.json ]] || { echo failed; return; }
	jq -s '[.[] | select(.event | not) | .wrong] | add' "$WORK/$1.json"
}

# ratio A B [DECIMALS]: A/B with DECIMALS (2) decimals, or "n/a"
ratio() {
	awk -v a="$1" -v b="$2" -v d="${3:-2}" \
		'BEGIN { if (b > 0 && a == a + 0) printf "%.*f", d, a / b; else print "n/a" }'
}
