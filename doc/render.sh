#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Renders the built man pages as plain text, 80 columns, for reading on the
# web: doc/NAME.SECTION.txt. The footer (the build date) is left out so that
# a copy stays current until its page changes; tests/doc/man_rendered.sh
# checks that it is.
#
# usage: doc/render.sh BUILD_DIR [OUT_DIR]     (OUT_DIR defaults to doc/)
set -eu
build=${1:?usage: render.sh BUILD_DIR [OUT_DIR]}
out=${2:-$(dirname "$0")}
command -v groff >/dev/null || { echo "render.sh: groff is needed (Debian: groff-base)" >&2; exit 1; }
n=0
for page in "$build"/doc/*.[1-8]; do
	[ -f "$page" ] || continue
	# -rHY=0: no hyphenation, so an option is never split; -P-cbou: plain
	# text, no escapes for bold or underline.
	groff -man -Tutf8 -rHY=0 -rLL=80n -rLT=80n -P-cbou "$page" |
		sed -e :a -e '/^\n*$/{$d;N;ba' -e '}' | sed '$d' |
		sed -e :a -e '/^\n*$/{$d;N;ba' -e '}' >"$out/$(basename "$page").txt"
	n=$((n + 1))
done
[ "$n" -gt 0 ] || { echo "render.sh: no man pages in $build/doc (is scdoc installed?)" >&2; exit 1; }
