#!/usr/bin/env bash
# Runs every libFuzzer target of a FUZZ=ON build for a while each.
#   scripts/fuzz.sh BUILD_DIR SECONDS_PER_TARGET
# Each target starts from its checked-in corpus (tests/fuzz/corpus/<name>)
# and dictionary (tests/fuzz/<name>.dict); new inputs go to a scratch corpus
# under BUILD_DIR so the checked-in one stays small. Crash reproducers are
# written to BUILD_DIR/crashes/ and the script fails if any target crashes,
# repeating the failed targets and their reports last.
# Targets run FUZZ_JOBS at a time (default: the CPUs; a target is one
# single-threaded process), each for the full SECONDS.
set -euo pipefail
build=${1:?usage: scripts/fuzz.sh BUILD_DIR SECONDS}
seconds=${2:-300}
jobs=${FUZZ_JOBS:-$(nproc)}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$build/crashes"

# Runs one target; its verdict goes to BUILD_DIR/NAME.verdict.
run_target() {
    local target=$1 name short scratch
    name=$(basename "$target")
    short=${name#fuzz_}
    scratch="$build/corpus/$short"
    mkdir -p "$scratch"
    local args=(-max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$build/crashes/$short-")
    [ -f "$root/tests/fuzz/$short.dict" ] && args+=(-dict="$root/tests/fuzz/$short.dict")
    if "$target" "${args[@]}" "$scratch" "$root/tests/fuzz/corpus/$short" 2>"$build/$name.log"; then
        echo ok >"$build/$name.verdict"
    else
        echo FAILED >"$build/$name.verdict"
    fi
}

targets=()
for target in "$build"/fuzz_*; do
    [ -x "$target" ] && [ -f "$target" ] && targets+=("$target")
done
echo "fuzz: ${#targets[@]} targets for ${seconds}s each, $jobs at a time"
running=0
for target in "${targets[@]}"; do
    if [ "$running" -ge "$jobs" ]; then
        wait -n
        running=$((running - 1))
    fi
    rm -f "$build/$(basename "$target").verdict"
    run_target "$target" &
    running=$((running + 1))
done
wait

# Results in a fixed order, whatever order the targets finished in.
failed=()
for target in "${targets[@]}"; do
    name=$(basename "$target")
    verdict=$(cat "$build/$name.verdict" 2>/dev/null || echo FAILED)
    if [ "$verdict" = ok ]; then
        echo "fuzz: $name ok"
    else
        echo "fuzz: $name FAILED — see $build/$name.log and $build/crashes/"
        failed+=("$name")
    fi
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$build/$name.log" | sed "s/^/  $name /" || true
done
# Failures again at the end, with the sanitizer's report, so that a log
# shown only by its tail still names the target and the fault.
for name in "${failed[@]}"; do
    echo "fuzz: $name FAILED; the end of $build/$name.log:"
    grep -E -A12 "^==[0-9]+==ERROR|runtime error: |^SUMMARY|libFuzzer: |Test unit written" "$build/$name.log" | tail -40 | sed "s/^/  /" || true
done
[ ${#failed[@]} -eq 0 ]
