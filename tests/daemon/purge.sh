#!/bin/sh
# SPDX-License-Identifier: MIT
#
# The package's purge (debian/shmclockd.postrm) removes root's clocks whose
# writer is gone and those of shmclockd@ units, with their lockstep segments
# and sockets, and never a live clock of a daemon run by hand (it once
# removed every root clock in /dev/shm, live or not). Run in a mount
# namespace of its own, with its own /dev/shm and /run, so that the purge
# sees only this test's clocks. TAP.
#
# usage: purge.sh POSTRM SHMCLOCKD SHMCLOCKCTL
set -u
postrm=$1 daemon=$2 ctl=$3

if [ -z "${PURGE_INSIDE:-}" ]; then
	if [ "$(id -u)" != 0 ]; then
		echo "1..0 # SKIP needs root (a mount namespace; the purge judges root's clocks)"
		exit 77
	fi
	if ! unshare -m true 2>/dev/null; then
		echo "1..0 # SKIP cannot make a mount namespace here"
		exit 77
	fi
	PURGE_INSIDE=1 exec unshare -m --propagation private sh "$0" "$@"
fi

mount -t tmpfs -o size=4m tmpfs /dev/shm || { echo "1..0 # SKIP cannot mount a tmpfs"; exit 77; }
mount -t tmpfs -o size=1m tmpfs /run || { echo "1..0 # SKIP cannot mount a tmpfs"; exit 77; }
mkdir -p /run/shmclock
unset SHMCLOCK_RUNTIME_DIR XDG_RUNTIME_DIR SHMCLOCK_NAME SHMCLOCK_SOCKET
pids=""
cgdir=""
cleanup() {
	for p in $pids; do kill -9 "$p" 2>/dev/null; done
	wait 2>/dev/null
	[ -z "$cgdir" ] || rmdir "$cgdir/shmclockd@unit.service" "$cgdir" 2>/dev/null
}
trap cleanup EXIT
n=0
fails=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
notok() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $*"; }
check() { # check DESCRIPTION COMMAND...
	d=$1
	shift
	if "$@"; then ok "$d"; else notok "$d"; fi
}

# start NAME ARGS...: a daemon run by hand, serving once this returns.
start() {
	name=$1
	shift
	"$daemon" -n "$name" --log-level=error "$@" 2>/dev/null &
	last=$!
	pids="$pids $last"
	i=0
	while ! "$ctl" -n "$name" status >/dev/null 2>&1; do
		i=$((i + 1))
		[ $i -lt 200 ] || { echo "Bail out! shmclockd -n $name $* did not start"; exit 1; }
		sleep 0.05
	done
}

start live
start killed
kill -9 "$last"
wait "$last"
start stopped
kill "$last"
wait "$last"
start lslive --source fixed --lockstep 1
start lsdead --source fixed --lockstep 1
kill -9 "$last"
wait "$last"
# A live daemon of a shmclockd@ unit, as systemd would run it: in a cgroup
# of that name (the purge runs after prerm stopped the units; one still
# running is the package's all the same).
unit=""
for h in /sys/fs/cgroup/unified /sys/fs/cgroup/systemd /sys/fs/cgroup; do
	d="$h/shmclock-purge-test-$$"
	if mkdir "$d" 2>/dev/null; then
		if mkdir "$d/shmclockd@unit.service" && start unit &&
			echo "$last" >"$d/shmclockd@unit.service/cgroup.procs"; then
			cgdir=$d
			unit=$last
			break
		fi
		rmdir "$d/shmclockd@unit.service" "$d" 2>/dev/null
	fi
done

sh "$postrm" purge
check "the purge succeeds" test $? = 0
check "a live clock of a daemon run by hand stays" test -f /dev/shm/shmclock.live
check "its socket stays" test -S /run/shmclock/live.sock
# shellcheck disable=SC2016 # $0 is the inner shell's
check "and the daemon still serves it" sh -c '"$0" -n live status >/dev/null' "$ctl"
check "a clock whose writer was killed is removed" test ! -e /dev/shm/shmclock.killed
check "with the socket it left" test ! -e /run/shmclock/killed.sock
check "a clock whose daemon stopped is removed" test ! -e /dev/shm/shmclock.stopped
check "a live lockstep clock stays" test -f /dev/shm/shmclock.lslive
check "with its participants' segment" test -f /dev/shm/shmclock-lockstep.lslive
check "a dead lockstep clock is removed" test ! -e /dev/shm/shmclock.lsdead
check "with its participants' segment" test ! -e /dev/shm/shmclock-lockstep.lsdead
if [ -n "$unit" ]; then
	check "a live clock of a shmclockd@ unit is removed" test ! -e /dev/shm/shmclock.unit
	# Its daemon notices and stops (shmclockd(8), THE SEGMENT).
	wait "$unit"
	check "its daemon notices and exits with status 1" test $? = 1
else
	n=$((n + 1))
	echo "ok $n # SKIP no cgroup hierarchy to put a daemon in a shmclockd@ unit's cgroup"
fi

for p in $pids; do kill "$p" 2>/dev/null; done
wait
sh "$postrm" purge
check "once every daemon stopped, no clock is left" sh -c '! ls /dev/shm | grep -q shmclock'
check "nor /run/shmclock" test ! -e /run/shmclock
echo "1..$n"
[ $fails = 0 ]
