#!/bin/sh
# SPDX-License-Identifier: MIT
#
# The rendered copies of the man pages under doc/ are those of the pages
# built now: a page changed without `sh doc/render.sh build` fails here.
# TAP, one line per page.
#
# usage: man_rendered.sh SOURCE_ROOT BUILD_ROOT
set -u
src=${1:?usage: man_rendered.sh SOURCE_ROOT BUILD_ROOT}
build=${2:?usage: man_rendered.sh SOURCE_ROOT BUILD_ROOT}
if ! command -v groff >/dev/null; then
	echo "1..0 # SKIP groff is not installed (Debian: groff-base)"
	exit 77
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
sh "$src/doc/render.sh" "$build" "$tmp" || exit 1
n=0
fail=0
for f in "$tmp"/*.txt; do
	n=$((n + 1))
	name=$(basename "$f")
	if cmp -s "$f" "$src/doc/$name"; then
		echo "ok $n - doc/$name is current"
	else
		echo "not ok $n - doc/$name differs from the built page: run sh doc/render.sh $build"
		diff -u "$src/doc/$name" "$f" 2>&1 | head -20 | sed 's/^/# /'
		fail=1
	fi
done
for f in "$src"/doc/*.txt; do
	[ -e "$tmp/$(basename "$f")" ] && continue
	n=$((n + 1))
	echo "not ok $n - $f has no page any more"
	fail=1
done
echo "1..$n"
exit $fail
