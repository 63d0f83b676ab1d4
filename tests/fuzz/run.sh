#!/usr/bin/env bash
# Runs every libFuzzer target of a -Dfuzz=enabled build for a bounded time
# and prints the executions each reached.
#
#   tests/fuzz/run.sh BUILD_DIR [SECONDS_PER_TARGET] [TARGET...]
#
# The corpus grows in BUILD_DIR/fuzz-corpus/<target> (seeded from
# tests/fuzz/corpus/<target>); an input that crashes or fails a check is
# saved as BUILD_DIR/fuzz-artifacts/<target>-crash-* and the script exits 1.
# Copy it into tests/fuzz/regress/<target>/ once fixed: the fuzz test suite
# replays that directory in every build.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [ $# -lt 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
	sed -n '2,11s/^# \{0,1\}//p' "$0"
	exit $(( $# < 1 ? 2 : 0 ))
fi
build="$1"
secs="${2:-20}"
shift $(( $# >= 2 ? 2 : 1 ))
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(config control duration segment mcap)
case "$secs" in ''|*[!0-9]*) echo "run.sh: SECONDS must be a whole number, got '$secs'" >&2; exit 2;; esac

# The JSON targets' dictionary: the config's words (dict.json) and the
# control protocol's commands and keys, from its table.
mkdir -p "$build/fuzz-artifacts"
dict_json="$build/fuzz-artifacts/dict.json"
{
	cat "$here/dict.json"
	"$build/shmclockd/shmclockd" --help-commands | awk 'NR > 1 {
		printf "\"\\\"%s\\\"\"\n", $1
		n = split($2, args, ",")
		for (i = 1; i <= n; i++) if (split(args[i], f, ":") == 3) printf "\"\\\"%s\\\"\"\n", f[2]
	}'
} >"$dict_json" || { echo "run.sh: cannot list the commands ($build/shmclockd/shmclockd)" >&2; exit 2; }

export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export ASAN_OPTIONS="detect_leaks=1"
status=0
printf '%-10s %12s %10s %8s %8s  %s\n' target executions exec/s edges corpus result
for t in "${targets[@]}"; do
	exe="$build/tests/fuzz/fuzz-$t"
	if [ ! -x "$exe" ]; then
		echo "run.sh: $exe not built (configure with CC=clang meson setup $build -Dfuzz=enabled)" >&2
		exit 2
	fi
	corpus="$build/fuzz-corpus/$t"
	mkdir -p "$corpus" "$build/fuzz-artifacts"
	dict=()
	case "$t" in config|control) dict=(-dict="$dict_json");; esac
	log="$build/fuzz-artifacts/$t.log"
	"$exe" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
		"${dict[@]}" -artifact_prefix="$build/fuzz-artifacts/$t-" \
		"$corpus" "$here/corpus/$t" >"$log" 2>&1
	rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
	edges=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
	size=$(find "$corpus" -type f | wc -l)
	if [ $rc -eq 0 ]; then
		result=ok
	else
		result="FAILED (exit $rc; log $log)"
		status=1
	fi
	printf '%-10s %12s %10s %8s %8s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "${edges:-?}" "$size" "$result"
	if [ $rc -ne 0 ]; then
		grep -E 'ERROR|check failed|runtime error|SUMMARY|Test unit written' "$log" | head -8 >&2
	fi
done
exit $status
