#!/usr/bin/env bash
# The wall time of each phase of `make test` (and of .ci/run, over both builds).
#
#   scripts/phase.sh FILE NAME CMD...   runs CMD and appends "NAME<TAB>seconds<TAB>ok"
#                                       (or FAILED) to FILE; when CMD fails, prints
#                                       the table of FILE and exits with its status
#   scripts/phase.sh --table FILE...    prints the phases of every FILE as one table
#                                       (a file is named by its directory: build,
#                                       build-asan), with the total
set -uo pipefail

table() {
    local file total=0
    printf '\n%-12s %-12s %9s  %s\n' build phase seconds result
    for file in "$@"; do
        [ -f "$file" ] || continue
        local dir
        dir=$(basename "$(dirname "$file")")
        while IFS=$'\t' read -r name secs result; do
            printf '%-12s %-12s %9s  %s\n' "$dir" "$name" "$secs" "$result"
            total=$(awk -v a="$total" -v b="$secs" 'BEGIN { printf "%.1f", a + b }')
        done <"$file"
    done
    printf '%-12s %-12s %9s\n' "" total "$total"
}

if [ "${1:-}" = "--table" ]; then
    shift
    table "$@"
    exit 0
fi

file=${1:?usage: scripts/phase.sh FILE NAME CMD... | --table FILE...}
name=${2:?usage: scripts/phase.sh FILE NAME CMD...}
shift 2
mkdir -p "$(dirname "$file")"
start=$(date +%s.%N)
"$@"
rc=$?
secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
if [ "$rc" -eq 0 ]; then
    printf '%s\t%s\tok\n' "$name" "$secs" >>"$file"
    echo "phase $name: ${secs} s"
else
    printf '%s\t%s\tFAILED (exit %d)\n' "$name" "$secs" "$rc" >>"$file"
    table "$file"
fi
exit "$rc"
