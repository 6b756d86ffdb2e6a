#!/usr/bin/env bash
# Regenerate every bundled and test-only ONNX model. Deterministic: running it
# again produces byte-identical files.
#   usage: models/build/make_all.sh   (from anywhere; PYTHON overrides the interpreter)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
py="${PYTHON:-/usr/bin/python3}"
cd "$root"
for s in make_simple make_digits make_digits_v2 make_strings make_identity; do
    echo "== $s"
    "$py" "models/build/$s.py"
done
