#!/bin/sh
# SPDX-License-Identifier: MIT
#
# The systemd unit as built: systemd-analyze verify accepts it (run against
# the daemon of this build tree: the installed path need not exist yet; man
# pages are not installed either), and systemd-analyze security scores its
# hardening, printed as the last TAP comment. The package CI verifies the
# installed unit as it is. TAP.
#
# usage: unit_verify.sh BUILT_UNIT PROGRAM  (shmclockd@.service with shmclockd,
#        shmclock-panel@.service with shmclock-panel)
set -u
unit=${1:?usage: unit_verify.sh BUILT_UNIT PROGRAM}
daemon=${2:?usage: unit_verify.sh BUILT_UNIT PROGRAM}
if ! command -v systemd-analyze >/dev/null; then
	echo "1..0 # SKIP systemd-analyze is not installed (Debian: systemd)"
	exit 77
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
base=$(basename "$unit")
sed "s#^ExecStart=[^ ]*#ExecStart=$daemon#" "$unit" >"$tmp/$base"
cd "$tmp" || exit 1
fail=0
if out=$(systemd-analyze verify --man=no "./$base" 2>&1) && [ -z "$out" ]; then
	echo "ok 1 - systemd-analyze verify: no complaint"
else
	echo "not ok 1 - systemd-analyze verify:"
	printf '%s\n' "$out" | sed 's/^/# /'
	fail=1
fi
score=$(systemd-analyze security --offline=yes "./$base" 2>&1 |
	sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
# 10 is a unit with no hardening at all; "OK" is below 5 (systemd's scale).
if [ -n "$score" ] && awk -v s="$score" 'BEGIN { exit !(s < 5) }'; then
	echo "ok 2 - systemd-analyze security: exposure $score (below 5: OK or better)"
else
	echo "not ok 2 - systemd-analyze security: exposure '${score}'"
	fail=1
fi
echo "1..2"
exit $fail
