#!/usr/bin/env bash
# Regenerate every bundled and test-only ONNX model. Deterministic: running it
# again produces byte-identical files.
#   usage: models/build/make_all.sh [--kjv] [--prep]   (from anywhere; PYTHON overrides the interpreter)
# The generative model models/kjv is trained (about 8 minutes on 2 cores, needs
# Debian's python3-torch and bible-kjv), so it is rebuilt only with --kjv. The
# preprocessing models models/spoken_digits (espeak-ng) and models/langid
# (the word lists) train with torch for about 3 minutes each: they are
# rebuilt with --prep.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
py="${PYTHON:-/usr/bin/python3}"
kjv=0
prep=0
for arg in "$@"; do
    case "$arg" in
    --kjv) kjv=1 ;;
    --prep) prep=1 ;;
    *) echo "usage: $0 [--kjv] [--prep]" >&2; exit 2 ;;
    esac
done
cd "$root"
for s in make_simple make_digits make_digits_v2 make_strings make_identity make_digit_images; do
    echo "== $s"
    "$py" "models/build/$s.py"
done
if [ "$prep" = 1 ]; then
    for s in make_spoken_digits make_langid; do
        echo "== $s"
        "$py" "models/build/$s.py"
    done
else
    echo "== make_spoken_digits and make_langid skipped (train for ~3 minutes each; pass --prep)"
fi
if [ "$kjv" = 1 ]; then
    if ! "$py" -c "import torch" 2>/dev/null || ! command -v bible >/dev/null; then
        echo "make_kjv needs python3-torch and bible-kjv (apt-get install python3-torch bible-kjv)" >&2
        exit 1
    fi
    echo "== make_kjv"
    "$py" models/build/make_kjv.py
else
    echo "== make_kjv skipped (trains for ~8 minutes; pass --kjv); checking models/kjv/1"
    "$py" models/build/check_kjv.py
fi
