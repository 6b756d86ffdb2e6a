#!/usr/bin/python3
"""Writes the seed corpora of fuzz_image_jpeg and fuzz_image_png
(tests/fuzz/corpus/image_jpeg/, image_png/) with Pillow: small valid files
of every kind the decoders handle (RGB, gray, EXIF-rotated, progressive and
subsampled JPEGs; 8/16-bit, palette, gray+alpha, 1-bit PNGs)
and a truncated one of each."""
import io
import struct
import zlib
from pathlib import Path

from PIL import Image

HERE = Path(__file__).resolve().parent / "corpus"


def picture(mode, size=(24, 16)):
    """A gradient with a block, so that resizing and rotation show."""
    w, h = size
    im = Image.new("RGB", size)
    px = im.load()
    for y in range(h):
        for x in range(w):
            px[x, y] = (x * 255 // (w - 1), y * 255 // (h - 1), 255 if x < w // 3 else 40)
    return im.convert(mode)


def exif(orientation):
    e = Image.Exif()
    e[0x0112] = orientation
    return e.tobytes()


def jpeg(im, **kw):
    b = io.BytesIO()
    im.save(b, "JPEG", quality=90, **kw)
    return b.getvalue()


def png(im, **kw):
    b = io.BytesIO()
    im.save(b, "PNG", **kw)
    return b.getvalue()


def png_rgb16(w, h):
    """A 16-bit RGB PNG written by hand (Pillow cannot write one)."""
    def chunk(t, data):
        return struct.pack(">I", len(data)) + t + data + struct.pack(">I", zlib.crc32(t + data))
    rows = b"".join(b"\0" + b"".join(struct.pack(">HHH", x * 4000, y * 9000, 65535 - x * 3000)
                                      for x in range(w)) for y in range(h))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def main():
    rgb = picture("RGB")
    jpegs = {
        "rgb.jpg": jpeg(rgb),
        "gray.jpg": jpeg(picture("L")),
        "exif6.jpg": jpeg(rgb, exif=exif(6)),
        "exif3.jpg": jpeg(rgb, exif=exif(3)),
        "progressive.jpg": jpeg(rgb, progressive=True),
        "subsampled.jpg": jpeg(picture("RGB", (40, 33)), subsampling=2),
        "big_draft.jpg": jpeg(picture("RGB", (130, 70))),
    }
    jpegs["truncated.jpg"] = jpegs["rgb.jpg"][: len(jpegs["rgb.jpg"]) // 2]
    pngs = {
        "rgb.png": png(rgb),
        "rgba.png": png(picture("RGBA")),
        "gray.png": png(picture("L")),
        "gray_alpha.png": png(picture("LA")),
        "palette.png": png(rgb.convert("P", palette=Image.ADAPTIVE, colors=16)),
        "bits1.png": png(picture("1")),
        "gray16.png": png(picture("L").convert("I").point(lambda v: v * 257)),
        "rgb16.png": png_rgb16(12, 7),
    }
    pngs["truncated.png"] = pngs["rgb.png"][: len(pngs["rgb.png"]) // 2]
    for name, files in (("image_jpeg", jpegs), ("image_png", pngs)):
        out = HERE / name
        out.mkdir(parents=True, exist_ok=True)
        for f, data in files.items():
            (out / f).write_bytes(data)


if __name__ == "__main__":
    main()
