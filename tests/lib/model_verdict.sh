#!/bin/sh
# SPDX-License-Identifier: MIT
#
# A protocol model's verdict, checked once per content (issue 50).
#
# spin checks a model's design, not the C code: its verdict is a function of
# the model file (its mutants are -D switches inside it), spin_check.sh
# (which configurations and mutants, and the flags pan is compiled with), the
# part checked and spin's version. The verdict is recorded beside the model
# (MODEL's directory, NAME[.PART].verdict) with the hash of all of these.
#
# usage: model_verdict.sh check  MODEL [PART]
#          the hash unchanged: print the recorded verdict, exit 0 (seconds);
#          changed or no record: run spin_check.sh in full, print what it
#          found and the record it would write, and exit 1: a model that
#          changed without a new verdict never passes.
#        model_verdict.sh record MODEL [PART]
#          run spin_check.sh in full; when the model holds and every mutant
#          fails, write the record (commit it with the model).
#        model_verdict.sh hash   MODEL [PART]
#          print the hash alone.
# Exit 77 (skip) from check when the record is stale and spin or a C
# compiler is missing (spin_check.sh's own skip).

set -u
mode=${1:-}
model=${2:-}
part=${3:-}
case $mode in check | record | hash) ;; *)
	echo "usage: model_verdict.sh check|record|hash MODEL [PART]" >&2
	exit 2 ;;
esac
[ -f "$model" ] || { echo "model_verdict.sh: no model file '$model'" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
check_script=$here/spin_check.sh

base=$(basename "$model" .pml)
record=$(dirname "$model")/$base${part:+.$part}.verdict

# The spin version: the first line of spin -V ("none" without spin, which
# never matches a record, so a stale record is noticed there too).
spin_version=$(spin -V 2>/dev/null | head -n 1)
[ -n "$spin_version" ] || spin_version=none

# Everything the verdict depends on, each input named, in one stream.
inputs() {
	printf 'model %s\n' "$(basename "$model")"
	cat "$model"
	printf '\nspin_check.sh\n'
	cat "$check_script"
	printf '\npart %s\nspin %s\n' "${part:-all}" "$spin_version"
}
hash=$(inputs | sha256sum | cut -d ' ' -f 1)

# Whether the committed record holds this very hash and a passing verdict.
recorded() {
	[ -f "$record" ] && [ "$(sed -n 's/^hash: //p' "$record")" = "$hash" ] &&
		grep -qx 'result: holds, every mutant fails' "$record"
}

if [ "$mode" = hash ]; then
	echo "$hash"
	exit 0
fi

what="$(basename "$model")${part:+ part $part}"

# run_spin OUT: runs the full check, its output into OUT; spin_check.sh's
# exit status.
run_spin() {
	sh "$check_script" "$model" ${part:+"$part"} >"$1" 2>&1
}

# write_record FROM TO: the record, from spin_check.sh's output FROM.
write_record() {
	{
		echo "# The spin verdict of $what, written by"
		echo "# tests/lib/model_verdict.sh record; checked by 'model_verdict.sh check'."
		echo "# Re-verify after changing the model or spin_check.sh (tests/README.md)."
		echo "hash: $hash"
		echo "spin: $spin_version"
		echo "recorded: $(date -u +%Y-%m-%d)"
		echo "checks: $(grep -c '^ok: ' "$1")"
		grep '^ok: ' "$1"
		echo "result: holds, every mutant fails"
	} >"$2"
}

if [ "$mode" = check ]; then
	if recorded; then
		echo "$what: unchanged since its verdict of $(sed -n 's/^recorded: //p' "$record") ($record)"
		grep '^ok: ' "$record" | sed 's/^/recorded /'
		echo "ok: $(sed -n 's/^checks: //p' "$record") checks recorded, model, spin_check.sh and spin unchanged"
		exit 0
	fi
	if [ -f "$record" ]; then
		echo "$what: changed since its record ($record): the model, spin_check.sh or spin's version"
		echo "(recorded hash $(sed -n 's/^hash: //p' "$record"), now $hash); checking it in full"
	else
		echo "$what: no recorded verdict ($record); checking it in full"
	fi
	out=$(mktemp "${TMPDIR:-/tmp}/shmclock-verdict.XXXXXX") || exit 1
	trap 'rm -f "$out"' EXIT INT TERM
	run_spin "$out"
	rc=$?
	cat "$out"
	[ $rc = 77 ] && exit 77
	if [ $rc = 0 ]; then
		echo "not ok: $what holds, but its verdict is not recorded: run"
		echo "  sh tests/lib/model_verdict.sh record $model${part:+ $part}"
		echo "and commit $record with the model"
	else
		echo "not ok: $what does not hold, or a mutant passes (above)"
	fi
	exit 1
fi

# record
out=$(mktemp "${TMPDIR:-/tmp}/shmclock-verdict.XXXXXX") || exit 1
trap 'rm -f "$out"' EXIT INT TERM
run_spin "$out"
rc=$?
cat "$out"
if [ $rc != 0 ]; then
	echo "not ok: $what: no verdict recorded (spin_check.sh exit $rc)"
	exit 1
fi
# A record of the same hash stays as it is (its date and timings): a re-run
# of an unchanged model changes no file.
if recorded; then
	echo "unchanged: $record (the same hash)"
	exit 0
fi
write_record "$out" "$record"
echo "recorded: $record"
