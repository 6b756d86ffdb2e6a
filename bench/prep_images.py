#!/usr/bin/python3
"""Test images of `make bench` experiment 13 (preprocessing), and the tiny
model the server runs behind its preprocessing.

  prep_images.py images DIR [COUNT [WIDTH HEIGHT [QUALITY]]]
      writes COUNT (default 6) JPEGs DIR/img_<i>.jpg of WIDTHxHEIGHT (default
      1024x768) at QUALITY (default 90), and prints their sizes in bytes.
      Deterministic (seeded per image), photo-like content: smooth colour
      gradients, a few blurred shapes and mild noise, so the encoded sizes
      and the decoder's work are those of a photograph, not of a flat
      picture that compresses to nothing.
  prep_images.py repo DIR NAME DRAFT
      writes a model repository entry DIR/NAME: version 1 is an ONNX graph
      (onnx.helper) taking FP32 [-1, 3, 224, 224] and answering its mean,
      FP32 [-1, 1] (Reshape + ReduceMean: a small response and almost no
      compute), with config.pbtxt (max_batch_size 8) and preprocess.json:
      raw input "image" (JPEG) feeding it: RGB, shorter side 256 (bilinear),
      center crop 224, ImageNet mean/std, CHW FP32; DRAFT "true" or "false"
      sets "draft" (libjpeg DCT scaling).

The images are generated at bench time into a temporary directory and never
committed. Runs under /usr/bin/python3 with Debian's numpy, PIL and onnx.
"""
import io
import json
import os
import sys

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]
PREPROCESS = {
    "color": "rgb",
    "resize": {"shorter_side": 256, "method": "bilinear"},
    "center_crop": {"width": 224, "height": 224},
    "normalize": {"mean": MEAN, "std": STD},
    "layout": "CHW",
    "datatype": "FP32",
}


def photo(seed, w, h):
    """An RGB uint8 array that encodes like a photograph."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    base = np.empty((h, w, 3), np.float32)
    for c in range(3):  # a tilted gradient and a slow wave per channel
        a, b, f, p = rng.uniform(-1, 1), rng.uniform(-1, 1), rng.uniform(2, 6), rng.uniform(0, 6)
        base[..., c] = (128 + 60 * (a * x / w + b * y / h)
                        + 40 * np.sin(f * np.pi * (x / w + y / h) + p))
    img = Image.fromarray(np.clip(base, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(img)
    for _ in range(12):  # shapes with edges the codec has to keep
        x0, y0 = int(rng.integers(0, w)), int(rng.integers(0, h))
        x1, y1 = x0 + int(rng.integers(w // 20, w // 3)), y0 + int(rng.integers(h // 20, h // 3))
        fill = tuple(int(v) for v in rng.integers(0, 256, 3))
        if rng.random() < 0.5:
            draw.ellipse((x0, y0, x1, y1), fill=fill)
        else:
            draw.rectangle((x0, y0, x1, y1), fill=fill)
    img = img.filter(ImageFilter.GaussianBlur(1.5))
    arr = np.asarray(img).astype(np.float32) + rng.normal(0, 4, (h, w, 3)).astype(np.float32)
    return np.clip(arr, 0, 255).astype(np.uint8)


def cmd_images(args):
    out = args[0]
    count = int(args[1]) if len(args) > 1 else 6
    w, h = (int(args[2]), int(args[3])) if len(args) > 3 else (1024, 768)
    quality = int(args[4]) if len(args) > 4 else 90
    os.makedirs(out, exist_ok=True)
    sizes = []
    for i in range(count):
        buf = io.BytesIO()
        Image.fromarray(photo(1000 + i, w, h)).save(buf, format="JPEG", quality=quality)
        with open(os.path.join(out, "img_%d.jpg" % i), "wb") as f:
            f.write(buf.getvalue())
        sizes.append(len(buf.getvalue()))
    print(" ".join(str(s) for s in sizes))


def cmd_repo(args):
    from onnx import TensorProto, helper, save
    root, name, draft = args[0], args[1], args[2] == "true"
    os.makedirs(os.path.join(root, name, "1"), exist_ok=True)
    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [-1, 3 * 224 * 224])
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["flat"]),
         helper.make_node("ReduceMean", ["flat"], ["y"], axes=[1], keepdims=1)],
        "prep_bench",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 224, 224])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1])],
        [shape])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="bench/prep_images.py")
    model.ir_version = 8
    save(model, os.path.join(root, name, "1", "model.onnx"))
    with open(os.path.join(root, name, "config.pbtxt"), "w") as f:
        f.write("max_batch_size: 8\n")
    prep = {"inputs": [{"name": "image", "feeds": "x",
                        "image": dict(PREPROCESS, formats=["jpeg"], draft=draft)}]}
    with open(os.path.join(root, name, "preprocess.json"), "w") as f:
        json.dump(prep, f, indent=1)


def dispatch(cmds, usage, min_args):
    """Runs cmds[argv[1]] on the arguments after it; exits with "usage: "
    usage when argv[1] is no command or fewer than min_args follow it.
    (prep_pillow.py's too.)"""
    if len(sys.argv) < 2 + min_args or sys.argv[1] not in cmds:
        sys.exit("usage: " + usage)
    cmds[sys.argv[1]](sys.argv[2:])


def main():
    dispatch({"images": cmd_images, "repo": cmd_repo},
             "prep_images.py images DIR [COUNT [W H [QUALITY]]] | repo DIR NAME DRAFT", 1)


if __name__ == "__main__":
    main()
