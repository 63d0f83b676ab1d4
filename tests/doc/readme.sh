#!/bin/sh
# SPDX-License-Identifier: MIT
#
# README.md stays a tour (issue 32: 350 lines at most), and every file it
# links to exists. TAP.
#
# usage: readme.sh SOURCE_ROOT
set -u
src=${1:?usage: readme.sh SOURCE_ROOT}
n=0
fail=0
lines=$(wc -l < "$src/README.md")
n=$((n + 1))
if [ "$lines" -le 350 ]; then
	echo "ok $n - README.md has $lines lines (at most 350)"
else
	echo "not ok $n - README.md has $lines lines, more than 350: move detail to tests/README.md, bench/README.md or doc/"
	fail=1
fi
# Relative link targets: ](path) or ](path#anchor), not URLs.
for t in $(grep -o '](\([^)#:]*\)[)#]' "$src/README.md" | sed 's/^](//; s/[)#]$//' | sort -u); do
	[ -n "$t" ] || continue
	n=$((n + 1))
	if [ -e "$src/$t" ]; then
		echo "ok $n - README.md links to $t"
	else
		echo "not ok $n - README.md links to $t, which does not exist"
		fail=1
	fi
done
echo "1..$n"
exit $fail
