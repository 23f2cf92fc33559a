#!/usr/bin/env bash
# Runs every libFuzzer harness of a -DASGD_FUZZ=ON build for a bounded time
# each, starting from its seed corpus (tests/fuzz/<harness>/, read only; new
# inputs go to a scratch directory), and prints the executions per harness.
# Fails when a harness finds a crash, leak or broken invariant; the input is
# left in $ARTIFACTS (default: fuzz-artifacts/) — replay it with
# build-fuzz/fuzz_<harness> FILE, fix, and add it as tests/fuzz/<harness>/regress-*.
#
# Harnesses run side by side, one per core (libFuzzer's own process is single
# threaded), so the phase takes SECONDS x ceil(harnesses / cores), not the sum.
#
#   tests/fuzz/run_all.sh BUILD_DIR SECONDS_PER_HARNESS
set -euo pipefail
build=${1:?usage: run_all.sh BUILD_DIR SECONDS}
seconds=${2:?usage: run_all.sh BUILD_DIR SECONDS}
here=$(cd "$(dirname "$0")" && pwd)
artifacts=${ARTIFACTS:-fuzz-artifacts}
mkdir -p "$artifacts"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failed=0
cores=$(nproc)

# One harness, its log in $scratch/NAME.log and its exit status in $scratch/NAME.rc.
run_one() {
    local program=$1 name=${1##*/fuzz_}
    mkdir -p "$scratch/$name"
    # -close_fd_mask=1: the harness's own output is not wanted; its stderr carries a broken
    # invariant's message, which the report below shows.
    local rc=0
    "$program" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -close_fd_mask=1 \
        -artifact_prefix="$artifacts/$name-" "$scratch/$name" "$here/$name" >"$scratch/$name.log" 2>&1 || rc=$?
    echo "$rc" >"$scratch/$name.rc"
}

programs=()
for program in "$build"/fuzz_*; do
    [ -x "$program" ] && programs+=("$program")
done
running=0
for program in "${programs[@]}"; do
    if [ "$running" -ge "$cores" ]; then
        wait -n || true
        running=$((running - 1))
    fi
    run_one "$program" &
    running=$((running + 1))
done
wait

printf '%-10s %12s %10s  %s\n' harness executions exec/s result
for program in "${programs[@]}"; do
    name=${program##*/fuzz_}
    log="$scratch/$name.log"
    if [ "$(cat "$scratch/$name.rc" 2>/dev/null)" = 0 ]; then
        result=ok
    else
        result=FAILED
        failed=1
    fi
    runs=$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\1/p' "$log" | tail -n 1)
    secs=$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\2/p' "$log" | tail -n 1)
    printf '%-10s %12s %10s  %s\n' "$name" "${runs:-?}" "$(( ${runs:-0} / (${secs:-1} > 0 ? ${secs:-1} : 1) ))" "$result"
    if [ "$result" = FAILED ]; then
        grep -E 'ERROR|SUMMARY|fuzz invariant|^read |Test unit written' "$log" | head -n 20 || true
        # The input itself, so that a run on a machine gone by the time anyone reads the log
        # can still be replayed: base64 -d > FILE.
        for unit in "$artifacts/$name"-*; do
            [ -f "$unit" ] || continue
            echo "input $unit (base64):"
            base64 -w 0 "$unit" | head -c 4096
            echo
        done
    fi
done
exit $failed
