#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Every document a public header or a program's source points readers at
# (a NAME.md) exists in the project: a header once sent its readers to a
# DESIGN.md the project never had. TAP, one line per reference.
#
# usage: doc_links.sh SOURCE_ROOT
set -u
root=${1:?usage: doc_links.sh SOURCE_ROOT}
cd "$root" || exit 1
refs=$(grep -rhoE '[A-Za-z_/.-]*[A-Za-z_]+\.md\b' libshmclock/include shmclockd readers bench \
	--include='*.h' --include='*.hpp' --include='*.c' --include='*.py' --include='*.pyi' | sort -u)
n=0
fail=0
for ref in $refs; do
	n=$((n + 1))
	if [ -f "$ref" ] || [ -f "$(basename "$ref")" ] || [ -f "bench/$(basename "$ref")" ]; then
		echo "ok $n - $ref exists"
	else
		echo "not ok $n - $ref is referenced but does not exist"
		fail=1
	fi
done
echo "1..$n"
exit $fail
