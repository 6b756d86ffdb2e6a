#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_wav (tests/fuzz/corpus/wav/): small WAV
files of every encoding the audio modality reads (PCM 8/16/24/32, IEEE
float 32/64, both also as WAVE_FORMAT_EXTENSIBLE), mono and stereo, at
several rates, one with an odd-sized chunk before "fmt ", and a few it
refuses (A-law, a header claiming an hour, a truncated data chunk).

Run from the repo root: /usr/bin/python3 tests/fuzz/make_wav_corpus.py
"""
import os
import struct

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "wav")
GUID_TAIL = bytes([0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38,
                   0x9B, 0x71])


def wav(tag, channels, rate, bits, data, extensible=False, extra=b"", declared=None):
    align = channels * bits // 8
    fmt = struct.pack("<HHIIHH", 0xFFFE if extensible else tag, channels, rate, rate * align,
                      align, bits)
    if extensible:
        fmt += struct.pack("<HHIH", 22, bits, 0, tag) + GUID_TAIL
    body = b"WAVE" + extra + b"fmt " + struct.pack("<I", len(fmt)) + fmt
    body += b"data" + struct.pack("<I", len(data) if declared is None else declared) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


def samples(n, rate, channels):
    t = np.arange(n) / rate
    x = 0.6 * np.sin(2 * np.pi * 440 * t) + 0.2 * np.sin(2 * np.pi * 1800 * t)
    return np.repeat(x[:, None], channels, axis=1).ravel()


def encode(x, tag, bits):
    if tag == 3:
        return x.astype("<f4" if bits == 32 else "<f8").tobytes()
    if bits == 8:
        return np.clip(np.round(x * 128 + 128), 0, 255).astype("u1").tobytes()
    if bits == 24:
        v = np.clip(np.round(x * 8388608), -8388608, 8388607).astype("<i4")
        return b"".join(int(s).to_bytes(4, "little", signed=True)[:3] for s in v)
    dt = {16: "<i2", 32: "<i4"}[bits]
    scale = 2.0 ** (bits - 1)
    return np.clip(np.round(x * scale), -scale, scale - 1).astype(dt).tobytes()


def main():
    os.makedirs(OUT, exist_ok=True)
    files = {}
    for tag, bits in ((1, 8), (1, 16), (1, 24), (1, 32), (3, 32), (3, 64)):
        for channels, rate in ((1, 8000), (2, 22050)):
            x = samples(120, rate, channels)
            name = f"{'pcm' if tag == 1 else 'float'}{bits}_{channels}ch_{rate}.wav"
            files[name] = wav(tag, channels, rate, bits, encode(x, tag, bits))
        files[f"ext_{tag}_{bits}.wav"] = wav(tag, 1, 16000, bits,
                                             encode(samples(100, 16000, 1), tag, bits), True)
    files["odd_chunk_44100.wav"] = wav(1, 1, 44100, 16, encode(samples(200, 44100, 1), 1, 16),
                                       extra=b"LIST\x03\x00\x00\x00abc\x00")
    files["alaw.wav"] = wav(6, 1, 8000, 8, bytes(64))
    files["hour.wav"] = wav(1, 1, 16000, 16, bytes(32), declared=16000 * 2 * 3600)
    files["truncated.wav"] = wav(1, 1, 16000, 16, bytes(32), declared=64)
    for name, data in files.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
