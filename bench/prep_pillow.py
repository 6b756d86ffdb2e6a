#!/usr/bin/python3
"""The Pillow + numpy side of `make bench` experiment 13 (preprocessing):
what a Python service does to an uploaded JPEG before its model runs, the
same steps as inferd's preprocess.json of the experiment
(bench/prep_images.py repo), per image, in one process.

  prep_pillow.py run DIR DRAFT DURATION WARMUP OUT
      loops over the JPEGs DIR/img_*.jpg (read into memory first), in turn,
      for WARMUP seconds unmeasured, then DURATION seconds measured, and
      writes OUT (JSON): images/s, the image count, and the mean time of
      each step in µs:
        decode     Image.open(BytesIO(b)) [+ img.draft("RGB", (w, h)) when
                   DRAFT is "true": (w, h) the resize target, so libjpeg's
                   DCT scaling picks the smallest scale still >= it, as
                   inferd's "draft"] + .convert("RGB") (which loads: the
                   decode itself)
        resize     img.resize((w, h), Image.BILINEAR), shorter side 256, the
                   longer rounded to nearest (inferd's shorter_side)
        crop       img.crop(...) 224x224, offsets floor((W - 224) / 2)
        normalize  np.asarray(img, np.float32) / 255, (x - mean) / std with
                   ImageNet's mean and std, transposed to CHW and made
                   contiguous (the tensor a runtime takes)
  prep_pillow.py means DIR DRAFT
      prints {"img_<i>.jpg": mean of the tensor, ...} (JSON): the value the
      experiment's model (the tensor's mean) should answer for each image.

Pin it with taskset like the server. Runs under /usr/bin/python3 with
Debian's PIL and numpy.
"""
import glob
import io
import json
import os
import sys
import time

import numpy as np
from PIL import Image

from prep_images import PREPROCESS, dispatch

# The experiment's steps, from the server's preprocess.json.
SHORTER = PREPROCESS["resize"]["shorter_side"]
CROP = PREPROCESS["center_crop"]["width"]  # square: "height" is the same
MEAN = np.array(PREPROCESS["normalize"]["mean"], np.float32)
STD = np.array(PREPROCESS["normalize"]["std"], np.float32)


def fit_shorter(w, h):
    """inferd's shorter_side: the shorter side becomes SHORTER, the longer
    keeps the aspect, rounded to nearest."""
    if w <= h:
        return SHORTER, int(h * SHORTER / w + 0.5)
    return int(w * SHORTER / h + 0.5), SHORTER


def preprocess(data, draft, times):
    """One image through the four steps; adds each step's ns to times."""
    t0 = time.perf_counter_ns()
    img = Image.open(io.BytesIO(data))
    rw, rh = fit_shorter(*img.size)
    if draft:
        img.draft("RGB", (rw, rh))
    img = img.convert("RGB")
    t1 = time.perf_counter_ns()
    img = img.resize((rw, rh), Image.BILINEAR)
    t2 = time.perf_counter_ns()
    left, top = (rw - CROP) // 2, (rh - CROP) // 2
    img = img.crop((left, top, left + CROP, top + CROP))
    t3 = time.perf_counter_ns()
    x = np.asarray(img, dtype=np.float32) / 255.0
    x = (x - MEAN) / STD
    x = np.ascontiguousarray(x.transpose(2, 0, 1))
    t4 = time.perf_counter_ns()
    times[0] += t1 - t0
    times[1] += t2 - t1
    times[2] += t3 - t2
    times[3] += t4 - t3
    return x


def images(d):
    paths = sorted(glob.glob(os.path.join(d, "img_*.jpg")))
    if not paths:
        sys.exit("prep_pillow.py: no img_*.jpg in %s" % d)
    out = []
    for p in paths:
        with open(p, "rb") as f:
            out.append((os.path.basename(p), f.read()))
    return out


def cmd_run(args):
    d, draft, duration, warmup, out = args
    draft, duration, warmup = draft == "true", float(duration), float(warmup)
    data = [b for _, b in images(d)]
    times = [0, 0, 0, 0]
    i = 0
    end = time.perf_counter() + warmup
    while time.perf_counter() < end:
        preprocess(data[i % len(data)], draft, times)
        i += 1
    times = [0, 0, 0, 0]
    n = 0
    start = time.perf_counter()
    end = start + duration
    while True:
        preprocess(data[(i + n) % len(data)], draft, times)
        n += 1
        now = time.perf_counter()
        if now >= end:
            break
    elapsed = now - start
    doc = {"draft": draft, "images": n, "duration_s": elapsed, "images_per_s": n / elapsed,
           "distinct_images": len(data),
           "step_us": {k: t / n / 1000.0 for k, t in
                       zip(("decode", "resize", "crop", "normalize"), times)},
           "versions": {"pillow": Image.__version__, "numpy": np.__version__}}
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)


def cmd_means(args):
    d, draft = args[0], args[1] == "true"
    times = [0, 0, 0, 0]
    print(json.dumps({name: float(preprocess(b, draft, times).mean(dtype=np.float64))
                      for name, b in images(d)}))


def main():
    dispatch({"run": cmd_run, "means": cmd_means},
             "prep_pillow.py run DIR DRAFT DURATION WARMUP OUT | means DIR DRAFT", 0)


if __name__ == "__main__":
    main()
