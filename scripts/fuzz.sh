#!/usr/bin/env bash
# Runs every libFuzzer target of a FUZZ=ON build for a while each.
#   scripts/fuzz.sh BUILD_DIR SECONDS_PER_TARGET
# Each target starts from its checked-in corpus (tests/fuzz/corpus/<name>)
# and dictionary (tests/fuzz/<name>.dict); new inputs go to a scratch corpus
# under BUILD_DIR so the checked-in one stays small. Crash reproducers are
# written to BUILD_DIR/crashes/ and the script fails if any target crashes.
set -euo pipefail
build=${1:?usage: scripts/fuzz.sh BUILD_DIR SECONDS}
seconds=${2:-300}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$build/crashes"
status=0
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
        status=1
    fi
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$build/$name.log" | sed "s/^/  $name /" || true
done
exit $status
