#!/bin/sh
# Usage: kinds.sh CC INCDIR... -- SOURCE
# The time kinds must compile when used right and be refused when mixed.
set -u
cc=$1; shift
incs=""
while [ "$1" != "--" ]; do incs="$incs -I$1"; shift; done
shift; src=$1
echo "1..6"
if $cc -std=c11 -Werror -fsyntax-only $incs -DMIX=0 "$src"; then echo "ok 1 - right use compiles"; else echo "not ok 1 - right use compiles"; fi
for n in 1 2 3 4 5; do
	if $cc -std=c11 -Werror -fsyntax-only $incs -DMIX=$n "$src" 2>/dev/null; then
		echo "not ok $((n + 1)) - MIX=$n compiled: kinds mix"
	else
		echo "ok $((n + 1)) - MIX=$n refused"
	fi
done
