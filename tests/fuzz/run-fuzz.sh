#!/usr/bin/env bash
# run-fuzz.sh SECONDS JOBS SRC BUILD NAME...: run each libFuzzer target
# BUILD/fuzz-NAME for SECONDS, JOBS at a time ('make fuzz' calls it).
#
# Each reads its seeds from SRC/corpus/NAME and SRC/regress/NAME and writes
# the inputs it finds to BUILD/work/NAME (kept between runs: a later run
# starts where this one ended); never into the source tree.  A crash is
# saved as BUILD/crashes/NAME-crash-<sha1> (libFuzzer's name), with its
# log in BUILD/work/NAME.log.  One line per target: executions, the
# corpus at the end, and the outcome.  Exit status 1 when any target
# crashed (or did not run), else 0.
set -uo pipefail

if [ $# -lt 5 ]; then
    echo "usage: $0 SECONDS JOBS SRC BUILD NAME..." >&2
    exit 64
fi
seconds=$1 jobs=$2 src=$3 build=$4
shift 4
mkdir -p "$build/work" "$build/crashes" || exit 1

# fuzz_one NAME: run one target; its summary line goes to work/NAME.result.
fuzz_one() {
    local name=$1 bin=$build/fuzz-$1 work=$build/work/$1 log=$build/work/$1.log
    local -a seeds=("$src/corpus/$name") dict=()
    [ -d "$src/regress/$name" ] && seeds+=("$src/regress/$name")
    [ -f "$src/dict/$name.dict" ] && dict=("-dict=$src/dict/$name.dict")
    mkdir -p "$work"
    # -timeout: an input that takes 10 s is a hang, reported as a crash.
    ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
        nice -n 10 "$bin" -max_total_time="$seconds" -timeout=10 -print_final_stats=1 \
        -artifact_prefix="$build/crashes/$name-" "${dict[@]}" \
        "$work" "${seeds[@]}" >"$log" 2>&1
    local rc=$? execs corp outcome
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    corp=$(grep -oE 'corp: [0-9]+/[0-9]+[bKM]?b?' "$log" | tail -n 1 | sed 's/corp: //')
    corp=${corp:-?/?}
    if [ "$rc" = 0 ]; then
        outcome="no crash"
    else
        outcome="CRASH (exit $rc): $(grep -m1 -oE 'Test unit written to .*' "$log" \
            || echo "see $log")"
    fi
    printf 'fuzz %-10s %10s executions in %ss, corpus %s inputs (%s): %s\n' \
        "$name" "${execs:-?}" "$seconds" "${corp%%/*}" "${corp#*/}" "$outcome" \
        >"$work.result"
    [ "$rc" = 0 ]
}

failed=0
running=0
for name in "$@"; do
    if [ ! -x "$build/fuzz-$name" ]; then
        echo "fuzz $name: $build/fuzz-$name is not built" >&2
        failed=1
        continue
    fi
    rm -f "$build/work/$name.result"
    fuzz_one "$name" &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then
        wait -n || failed=1
        running=$((running - 1))
    fi
done
while [ "$running" -gt 0 ]; do
    wait -n || failed=1
    running=$((running - 1))
done
for name in "$@"; do
    [ -f "$build/work/$name.result" ] && cat "$build/work/$name.result"
done
if [ "$failed" != 0 ]; then
    for name in "$@"; do
        grep -q CRASH "$build/work/$name.result" 2>/dev/null \
            && tail -n 40 "$build/work/$name.log"
    done
fi
exit "$failed"
