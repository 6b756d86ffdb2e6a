#!/usr/bin/env python3
"""Render scikit-learn's 8x8 digits as photographs of handwriting, for the
`digits` model's image input (models/digits/preprocess.json).

Each held-out digit of the split models/build/make_digits.py trains on
(load_digits 75/25, stratified, random_state=0) becomes a SIZE x SIZE
grayscale picture: the 8x8 ink values (0..16) upscaled smoothly (bicubic),
drawn as dark ink on white-ish paper, moved by a small random offset,
slightly blurred, with a little noise. The seed is fixed, so the pictures
are the same on every run.

The server's preprocessing (gray, area resize to 8x8, invert, scale 16/255)
maps such a picture back to about the 0..16 values the model was trained
on; tests/integration/test_prep_image.py compares the model's accuracy on
these pictures with its accuracy on the original tensors.

    from make_digit_images import rendered_split
    for data, label in rendered_split("png"): ...

Run from the repo root to rewrite the samples models/digits/sample_7.png and
models/digits/sample_7.jpg (the first held-out 7):
    /usr/bin/python3 models/build/make_digit_images.py
"""
import io
import os
import sys

import numpy as np
from PIL import Image, ImageFilter

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from make_digits import split  # noqa: E402  (the model's own split)

SIZE = 64     # pixels per side of a rendered digit
SEED = 16     # of the offsets, blur, paper, ink and noise
SAMPLE_LABEL = 7


def render(pixels, rng, size=SIZE):
    """One 8x8 digit (64 values 0..16) as a size x size uint8 picture."""
    ink_amount = np.asarray(pixels, dtype=np.float32).reshape(8, 8) / 16.0
    up = Image.fromarray(ink_amount, mode="F").resize((size, size), Image.BICUBIC)
    a = np.clip(np.asarray(up), 0.0, 1.0)
    dx, dy = rng.integers(-1, 2, size=2)                # offset of at most 1/64 of a side
    a = np.roll(a, (int(dy), int(dx)), axis=(0, 1))
    paper = rng.uniform(240.0, 255.0)
    ink = rng.uniform(0.0, 25.0)
    img = paper - (paper - ink) * a
    blurred = Image.fromarray(np.rint(img).astype(np.uint8), mode="L").filter(
        ImageFilter.GaussianBlur(rng.uniform(0.3, 0.8)))
    img = np.asarray(blurred, dtype=np.float64) + rng.normal(0.0, 3.0, (size, size))
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def encode(arr, fmt):
    out = io.BytesIO()
    if fmt == "png":
        Image.fromarray(arr, mode="L").save(out, format="PNG")
    else:
        Image.fromarray(arr, mode="L").convert("RGB").save(out, format="JPEG", quality=90)
    return out.getvalue()


def rendered_split(fmt="png", size=SIZE, seed=SEED):
    """[(encoded picture, label)] for every held-out digit, in split order;
    fmt "png" (8-bit gray) or "jpeg" (RGB, quality 90)."""
    _, X_test, _, y_test = split()
    rng = np.random.default_rng(seed)
    return [(encode(render(x, rng, size), fmt), int(y)) for x, y in zip(X_test, y_test)]


def main():
    _, X_test, _, y_test = split()
    rng = np.random.default_rng(SEED)
    pictures = [render(x, rng) for x in X_test]
    i = int(np.flatnonzero(y_test == SAMPLE_LABEL)[0])
    for fmt, ext in (("png", "png"), ("jpeg", "jpg")):
        path = os.path.join(ROOT, "models", "digits", "sample_%d.%s" % (SAMPLE_LABEL, ext))
        with open(path, "wb") as f:
            f.write(encode(pictures[i], fmt))
        print("wrote", os.path.relpath(path, ROOT))


if __name__ == "__main__":
    main()
