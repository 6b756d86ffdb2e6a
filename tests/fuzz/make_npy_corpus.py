#!/usr/bin/python3
"""Writes the seed corpus of fuzz_npy (tests/fuzz/corpus/npy/): .npy files
written by NumPy itself (every dtype the reader maps, both byte orders,
format versions 1.0 and 2.0, scalars, empty arrays, S and U strings) and a
few refusals (Fortran order, an object array, a structured dtype, a
complex dtype, truncated data).

Run from the repo root: /usr/bin/python3 tests/fuzz/make_npy_corpus.py
"""
import io
from pathlib import Path

import numpy as np
from numpy.lib import format as npformat

OUT = Path(__file__).resolve().parent / "corpus" / "npy"


def save(name, arr, version=None):
    b = io.BytesIO()
    if version:
        npformat.write_array(b, arr, version=version, allow_pickle=True)
    else:
        np.save(b, arr, allow_pickle=True)
    (OUT / (name + ".npy")).write_bytes(b.getvalue())
    return b.getvalue()


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.glob("*.npy"):
        old.unlink()
    for dt in ["bool", "int8", "uint8", "<i2", ">i2", "<u2", "<i4", ">i4", "<u4", "<i8",
               "<u8", "<f2", ">f2", "<f4", ">f4", "<f8"]:
        save("arange_" + dt.replace("<", "le_").replace(">", "be_"),
             (np.arange(6) % 2 if dt == "bool" else np.arange(6)).astype(dt).reshape(2, 3))
    save("scalar_f8", np.array(2.5))
    save("empty_f4", np.zeros((0, 4), np.float32))
    save("rank4_u1", np.arange(24, dtype=np.uint8).reshape(1, 2, 3, 4))
    save("bytes_S", np.array([[b"ab", b"xyz\x00q"]]))
    save("text_U", np.array(["h\u00e9llo", "\u20ac", ""]))
    save("text_U_be", np.array(["ab", "c"]).astype(">U2"))
    save("v2_f4", np.ones((3,), np.float32), version=(2, 0))
    save("fortran_f4", np.asfortranarray(np.ones((2, 3), np.float32)))
    save("object", np.array([1, "a"], dtype=object))
    save("structured", np.zeros(2, dtype=[("a", "<i4"), ("b", "<f4")]))
    save("complex", np.zeros(2, dtype=np.complex64))
    whole = save("truncated_i4", np.arange(8, dtype=np.int32))
    (OUT / "truncated_i4.npy").write_bytes(whole[:-3])


if __name__ == "__main__":
    main()
