#!/usr/bin/env bash
# Runs every libFuzzer target of a FUZZ=ON build for a while each.
#   scripts/fuzz.sh BUILD_DIR SECONDS_PER_TARGET
# Each target starts from its checked-in corpus (tests/fuzz/corpus/<name>)
# and dictionary (tests/fuzz/<name>.dict); new inputs go to a scratch corpus
# under BUILD_DIR so the checked-in one stays small. Crash reproducers are
# written to BUILD_DIR/crashes/ and the script fails if any target crashes,
# repeating the failed targets and their reports last.
set -euo pipefail
build=${1:?usage: scripts/fuzz.sh BUILD_DIR SECONDS}
seconds=${2:-300}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$build/crashes"
failed=()
for target in "$build"/fuzz_*; do
    [ -x "$target" ] || continue
    name=$(basename "$target")
    short=${name#fuzz_}
    scratch="$build/corpus/$short"
    mkdir -p "$scratch"
    args=(-max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$build/crashes/$short-")
    [ -f "$root/tests/fuzz/$short.dict" ] && args+=(-dict="$root/tests/fuzz/$short.dict")
    echo "fuzz: $name for ${seconds}s"
    if ! "$target" "${args[@]}" "$scratch" "$root/tests/fuzz/corpus/$short" 2>"$build/$name.log"; then
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
