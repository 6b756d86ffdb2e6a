"""The image modality end to end (src/preprocess/image*.c): the tensors the
server makes from JPEG and PNG files against an independent Pillow + numpy
reference, the `digits` model read from pictures of handwriting, the same
picture over REST and gRPC, and hostile files.

The reference resizes each band as a mode "F" image (Pillow's float
resampling, as the server does: no rounding to 8 bits in between) after
Pillow's own decoding, ImageOps.exif_transpose, Image.draft and
convert("L"/"RGB"). Both decode with the system's libjpeg-turbo and libpng
and use the same resampling formulas, so values agree to within float
rounding: ATOL below, on the 0..255 scale (scaled like the values when
normalized)."""
import io
import json
import shutil
import sys

import numpy as np
import pytest
import requests
from PIL import Image, ImageOps

from conftest import (REPO_ROOT, assert_error_response, bytes_infer_request, ok_json)
from grpc_client import Client, generate

sys.path.insert(0, str(REPO_ROOT / "models" / "build"))
from make_digit_images import rendered_split  # noqa: E402
from make_digits import split  # noqa: E402

IDENTITY = REPO_ROOT / "tests" / "models" / "identity_fp32" / "1" / "model.onnx"
DIGITS = REPO_ROOT / "models" / "digits"
ATOL = 2e-3  # on the 0..255 scale

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]

# name -> the "image" object of its preprocess.json
CONFIGS = {
    "rgb_mean": {"resize": {"width": 20, "height": 14, "method": "bilinear"},
                 "normalize": {"mean": MEAN, "std": STD}},
    "gray_hwc": {"color": "gray", "layout": "HWC",
                 "resize": {"width": 9, "height": 7, "method": "area"}},
    "bgr_scale": {"color": "bgr", "layout": "HWC", "invert": True,
                  "resize": {"width": 11, "height": 13},
                  "normalize": {"scale": 0.00392156862745098, "offset": -0.5}},
    "crop": {"resize": {"shorter_side": 12, "method": "area"},
             "center_crop": {"width": 10, "height": 8}},
    "crop_bilinear": {"color": "gray", "resize": {"shorter_side": 16},
                      "center_crop": {"width": 15, "height": 9}},
    "draft": {"draft": True, "resize": {"width": 24, "height": 18}},
    "draft_crop": {"draft": True, "color": "gray",
                   "resize": {"shorter_side": 20, "method": "area"},
                   "center_crop": {"width": 20, "height": 20}},
    "noexif": {"exif_orientation": False, "resize": {"width": 10, "height": 6}},
    "limits": {"max_bytes": 20000, "max_pixels": 1000000, "color": "gray",
               "resize": {"width": 8, "height": 8}},
}


# --------------------------------------------------------------------------
# the reference


def reference(data, cfg):
    """The row the server should make of `data` under `cfg`, flattened."""
    im = Image.open(io.BytesIO(data))
    resize = cfg["resize"]
    exif = cfg.get("exif_orientation", True)
    orientation = im.getexif().get(0x0112, 1) if exif and im.format == "JPEG" else 1
    if cfg.get("draft") and im.format == "JPEG":
        w, h = im.size
        if orientation >= 5:
            w, h = h, w
        tw, th = target_size(w, h, resize)
        if orientation >= 5:
            tw, th = th, tw
        im.draft("RGB", (tw, th))
    if orientation != 1:
        im = ImageOps.exif_transpose(im)
    gray = cfg.get("color") == "gray"
    im = im.convert("L" if gray else "RGB")
    tw, th = target_size(im.size[0], im.size[1], resize)
    method = Image.BOX if resize.get("method") == "area" else Image.BILINEAR
    arr = np.stack([np.asarray(b.convert("F").resize((tw, th), method), dtype=np.float64)
                    for b in im.split()])
    if "center_crop" in cfg:
        cw, ch = cfg["center_crop"]["width"], cfg["center_crop"]["height"]
        x0, y0 = (tw - cw) // 2, (th - ch) // 2
        arr = arr[:, y0:y0 + ch, x0:x0 + cw]
    if cfg.get("invert"):
        arr = 255.0 - arr
    if cfg.get("color") == "bgr":
        arr = arr[::-1]
    norm = cfg.get("normalize", {})
    if "mean" in norm:
        arr = (arr / 255.0 - np.array(norm["mean"])[:, None, None]) / np.array(
            norm["std"])[:, None, None]
    elif norm:
        arr = arr * norm.get("scale", 1.0) + norm.get("offset", 0.0)
    if cfg.get("layout") == "HWC":
        arr = arr.transpose(1, 2, 0)
    return arr.reshape(-1)


def target_size(w, h, resize):
    if "shorter_side" not in resize:
        return resize["width"], resize["height"]
    s = resize["shorter_side"]
    short = min(w, h)
    return max(1, (w * s * 2 + short) // (2 * short)), max(1, (h * s * 2 + short) // (2 * short))


def tolerance(cfg):
    norm = cfg.get("normalize", {})
    if "mean" in norm:
        return ATOL / 255.0 / min(norm["std"])
    return ATOL * abs(norm.get("scale", 1.0))


# --------------------------------------------------------------------------
# pictures


def photo(w, h, seed=0, mode="RGB"):
    """A smooth picture with edges and noise: gradients, a disc, a bar."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    r = 255 * x / max(w - 1, 1)
    g = 255 * y / max(h - 1, 1)
    b = np.where((x - w * 0.6) ** 2 + (y - h * 0.4) ** 2 < (min(w, h) * 0.3) ** 2, 230.0, 30.0)
    b[:, : max(1, w // 8)] = 120.0
    arr = np.stack([r, g, b], axis=-1) + rng.normal(0, 6, (h, w, 3))
    im = Image.fromarray(np.clip(np.rint(arr), 0, 255).astype(np.uint8), "RGB")
    return im.convert(mode)


def encode(im, fmt, **kw):
    out = io.BytesIO()
    im.save(out, format=fmt, **kw)
    return out.getvalue()


def exif_bytes(orientation):
    e = Image.Exif()
    e[0x0112] = orientation
    return e.tobytes()


def pictures():
    """name -> encoded file, every kind the reference comparison covers."""
    rgb = photo(61, 43, seed=1)
    return {
        "png_rgb": encode(rgb, "PNG"),
        "png_gray": encode(photo(50, 37, seed=2, mode="L"), "PNG"),
        "png_rgba": encode(photo(33, 47, seed=3, mode="RGBA"), "PNG"),
        "png_palette": encode(rgb.convert("P", palette=Image.ADAPTIVE, colors=64), "PNG"),
        "jpeg_rgb": encode(rgb, "JPEG", quality=92),
        "jpeg_gray": encode(photo(45, 52, seed=4, mode="L"), "JPEG", quality=90),
        "jpeg_420": encode(photo(77, 58, seed=5), "JPEG", quality=85, subsampling=2),
        "jpeg_progressive": encode(photo(64, 48, seed=6), "JPEG", quality=90, progressive=True),
        "jpeg_exif6": encode(photo(40, 30, seed=7), "JPEG", quality=95, exif=exif_bytes(6)),
        "jpeg_exif8": encode(photo(40, 30, seed=8), "JPEG", quality=95, exif=exif_bytes(8)),
        "jpeg_exif3": encode(photo(40, 30, seed=9), "JPEG", quality=95, exif=exif_bytes(3)),
        "jpeg_big": encode(photo(400, 300, seed=10), "JPEG", quality=90),
        "jpeg_big_exif6": encode(photo(330, 250, seed=11), "JPEG", quality=90,
                                 exif=exif_bytes(6)),
    }


# --------------------------------------------------------------------------
# the server: an identity model per configuration, and digits


@pytest.fixture(scope="module")
def srv(module_server_factory, tmp_path_factory):
    root = tmp_path_factory.mktemp("prep_image") / "repo"
    for name, cfg in CONFIGS.items():
        (root / name / "1").mkdir(parents=True)
        shutil.copy(IDENTITY, root / name / "1" / "model.onnx")
        prep = {"inputs": [{"name": "image", "feeds": "INPUT0", "image": cfg}]}
        (root / name / "preprocess.json").write_text(json.dumps(prep))
    (root / "digits" / "1").mkdir(parents=True)
    shutil.copy(DIGITS / "1" / "model.onnx", root / "digits" / "1" / "model.onnx")
    shutil.copy(DIGITS / "preprocess.json", root / "digits" / "preprocess.json")
    return module_server_factory.start("--model-repository", str(root))


def rows(r, name="OUTPUT0"):
    doc = ok_json(r)
    out = [o for o in doc["outputs"] if o["name"] == name][0]
    return np.array(out["data"], dtype=np.float64).reshape(out["shape"][0], -1)


def raw_body(srv, model, data, ctype="image/png"):
    return requests.post("%s/v2/models/%s/infer" % (srv.url, model), data=data,
                         headers={"Content-Type": ctype}, timeout=30)


# --------------------------------------------------------------------------
# (1) tensors against Pillow + numpy

PAIRS = [
    ("rgb_mean", ["png_rgb", "png_gray", "png_rgba", "png_palette", "jpeg_rgb", "jpeg_gray",
                  "jpeg_420", "jpeg_progressive"]),
    ("gray_hwc", ["png_rgb", "png_gray", "png_palette", "jpeg_rgb", "jpeg_gray"]),
    ("bgr_scale", ["png_rgb", "jpeg_420"]),
    ("crop", ["png_rgb", "png_rgba", "jpeg_rgb", "jpeg_exif6"]),
    ("crop_bilinear", ["png_gray", "jpeg_420", "jpeg_exif8"]),
    ("rgb_mean", ["jpeg_exif6", "jpeg_exif8", "jpeg_exif3"]),
    ("noexif", ["jpeg_exif6", "jpeg_exif8"]),
    ("draft", ["jpeg_big", "jpeg_rgb", "jpeg_big_exif6", "png_rgb"]),
    ("draft_crop", ["jpeg_big", "jpeg_big_exif6"]),
]


@pytest.mark.parametrize("model,names", PAIRS, ids=["%s-%d" % (m, i) for i, (m, _) in
                                                      enumerate(PAIRS)])
def test_tensors_match_pillow(srv, model, names):
    pics = pictures()
    files = [pics[n] for n in names]
    got = rows(bytes_infer_request(srv.url, model, "image", files))
    cfg = CONFIGS[model]
    for row, name, data in zip(got, names, files):
        want = reference(data, cfg)
        assert row.shape == want.shape, name
        np.testing.assert_allclose(row, want, rtol=0, atol=tolerance(cfg), err_msg=name)


def test_exif_orientation_changes_the_picture(srv):
    """Guards the comparison above: rotated and unrotated really differ."""
    pics = pictures()
    a = rows(raw_body(srv, "rgb_mean", pics["jpeg_exif6"], "image/jpeg"))[0]
    b = reference(pics["jpeg_exif6"], dict(CONFIGS["rgb_mean"], exif_orientation=False))
    assert np.abs(a - b).max() > 0.5


def test_draft_decodes_smaller(srv):
    """Guards the draft comparison: 400x300 to 24x18 decodes at 1/8, which
    differs from resizing the full picture."""
    data = pictures()["jpeg_big"]
    got = rows(raw_body(srv, "draft", data, "image/jpeg"))[0]
    full = reference(data, dict(CONFIGS["draft"], draft=False))
    assert np.abs(got - full).max() > 0.5


# --------------------------------------------------------------------------
# (2) digits from pictures


def batches(items, n):
    for i in range(0, len(items), n):
        yield items[i:i + n]


def tensor_labels(srv, X):
    labels = []
    for chunk in batches(X.astype(np.float32), 90):
        blob = chunk.tobytes()
        head = json.dumps({"inputs": [{"name": "pixels", "shape": list(chunk.shape),
                                       "datatype": "FP32",
                                       "parameters": {"binary_data_size": len(blob)}}],
                           "outputs": [{"name": "label"}]}).encode()
        r = requests.post(srv.url + "/v2/models/digits/infer", data=head + blob, timeout=60,
                          headers={"Content-Type": "application/octet-stream",
                                   "Inference-Header-Content-Length": str(len(head))})
        labels += rows(r, "label").reshape(-1).astype(int).tolist()
    return np.array(labels)


def image_labels(srv, files):
    labels = []
    for chunk in batches(files, 90):
        r = bytes_infer_request(srv.url, "digits", "image", chunk, outputs=["label"],
                                timeout=60)
        labels += rows(r, "label").reshape(-1).astype(int).tolist()
    return np.array(labels)


def test_digits_accuracy_from_pictures(srv):
    _, X_test, _, y_test = split()
    acc_tensor = float((tensor_labels(srv, X_test) == y_test).mean())
    accs = {}
    for fmt in ("png", "jpeg"):
        files = [data for data, _ in rendered_split(fmt)]
        accs[fmt] = float((image_labels(srv, files) == y_test).mean())
    print("\ndigits held-out accuracy (%d images): tensors %.4f, PNG pictures %.4f, "
          "JPEG pictures %.4f" % (len(y_test), acc_tensor, accs["png"], accs["jpeg"]))
    assert acc_tensor > 0.95
    for fmt, acc in accs.items():
        assert acc >= acc_tensor - 0.03, fmt


def test_digits_sample_pictures(srv):
    for name, ctype in (("sample_7.png", "image/png"), ("sample_7.jpg", "image/jpeg")):
        r = raw_body(srv, "digits", (DIGITS / name).read_bytes(), ctype)
        assert rows(r, "label")[0][0] == 7, name


# --------------------------------------------------------------------------
# (3) gRPC, binary extension and raw body agree


@pytest.fixture(scope="module")
def pbs(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("proto_py_image"))


def test_grpc_rest_and_raw_body_agree(srv, pbs):
    data = pictures()["png_rgb"]
    via_body = rows(raw_body(srv, "rgb_mean", data))[0]
    via_binary = rows(bytes_infer_request(srv.url, "rgb_mean", "image", [data]))[0]
    client = Client(*pbs, "127.0.0.1:%d" % srv.grpc_port)
    try:
        pb = pbs[0]
        req = pb.ModelInferRequest(model_name="rgb_mean")
        t = req.inputs.add(name="image", datatype="BYTES", shape=[1, 1])
        t.contents.bytes_contents.append(data)
        resp = client.unary("ModelInfer")(req, timeout=30)
    finally:
        client.close()
    assert resp.outputs[0].name == "OUTPUT0"
    via_grpc = np.frombuffer(resp.raw_output_contents[0], dtype="<f4")
    np.testing.assert_array_equal(via_body, via_binary)
    # JSON carries each FP32 in its shortest round-trip form: compare as FP32
    np.testing.assert_array_equal(via_body.astype(np.float32), via_grpc)
    np.testing.assert_allclose(via_body, reference(data, CONFIGS["rgb_mean"]), rtol=0,
                               atol=tolerance(CONFIGS["rgb_mean"]))


# --------------------------------------------------------------------------
# (4) hostile files


def bomb_png(w, h):
    """A valid PNG signature and IHDR claiming w x h, then a tiny IDAT."""
    import struct
    import zlib

    def chunk(t, body):
        return struct.pack(">I", len(body)) + t + body + struct.pack(">I", zlib.crc32(t + body))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b""))


def assert_still_serving(srv):
    r = raw_body(srv, "limits", encode(photo(16, 16), "PNG"))
    assert rows(r).shape == (1, 64)


@pytest.mark.parametrize("name,ctype", [("png_rgb", "image/png"), ("jpeg_rgb", "image/jpeg")])
def test_truncated_files_are_400(srv, name, ctype):
    data = pictures()[name]
    for cut in (len(data) // 2, 40):
        msg = assert_error_response(raw_body(srv, "limits", data[:cut], ctype), 400)
        assert "truncated" in msg and "image" in msg
    assert_still_serving(srv)


def test_decompression_bomb_is_413_before_decoding(srv):
    # Refused from the header's dimensions (the message names them and the
    # limit), never decoded.
    msg = assert_error_response(raw_body(srv, "limits", bomb_png(100000, 100000)), 413)
    assert "100000x100000" in msg and "1000000" in msg
    # also in a batch through the binary extension
    r = bytes_infer_request(srv.url, "limits", "image", [encode(photo(8, 8), "PNG"),
                                                         bomb_png(100000, 100000)])
    assert_error_response(r, 413)
    assert_still_serving(srv)


def test_text_sent_as_an_image_is_400(srv):
    msg = assert_error_response(raw_body(srv, "limits", b"hello, I am not a picture"), 400)
    assert "not a PNG or JPEG" in msg
    assert_still_serving(srv)


def test_over_max_bytes_is_413(srv):
    big = encode(photo(300, 300, seed=3), "PNG")
    assert len(big) > 20000
    msg = assert_error_response(raw_body(srv, "limits", big), 413)
    assert "20000" in msg
    assert_still_serving(srv)
