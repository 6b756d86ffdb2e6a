"""Audio preprocessing (docs/preprocessing.md, "Audio"): WAV files in, the
server's waveform or log mel features out.

1. The server's tensor, seen through an identity model, against a NumPy
   reference of the spec's log mel written here (independent of the
   training script): at 16 kHz (no resampling) to 1e-3 in log (absolute,
   where the mel power is within e^12 of the frame's peak); at 22050 Hz
   stereo PCM24 and 44100 Hz stereo float32 (resampled by libsamplerate's
   sinc_best) against scipy's resample_poly + the same reference, to
   0.01 median and 0.05 max absolute in log over the mels under 7 kHz
   (measured: 0.0012 and 0.011).
   A waveform-only configuration returns the samples exactly.
2. models/spoken_digits on voices it was not trained on, synthesized here
   with espeak-ng (a seeded subset), through the binary tensor extension,
   gRPC and a raw `Content-Type: audio/wav` body: the three agree and the
   accuracy is well above chance (10%).
3. Hostile files: truncated, a header claiming hours (413 before
   decoding), A-law (400), not RIFF (400); the server keeps serving.
"""
import json
import random
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
import requests
from scipy.signal import resample_poly

from grpc_client import Client, generate

REPO_ROOT = Path(__file__).resolve().parents[2]
DIGITS = REPO_ROOT / "models" / "spoken_digits"
WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
# Voices models/build/make_spoken_digits.py holds out of training.
HELD_OUT_VOICES = ["en-gb-scotland", "en-gb-x-gbclan", "en+f4", "en-us+m7"]
HEADER = "Inference-Header-Content-Length"


# --------------------------------------------------------------------------
# WAV writing and the reference features


def wav_bytes(x, rate, encoding="pcm16", channels=1):
    """x: float samples [n] (or [n, channels]) in [-1, 1)."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 1:
        x = np.repeat(x[:, None], channels, axis=1)
    channels = x.shape[1]
    flat = x.ravel()
    if encoding == "pcm16":
        tag, bits = 1, 16
        data = np.clip(np.round(flat * 32768), -32768, 32767).astype("<i2").tobytes()
    elif encoding == "pcm24":
        tag, bits = 1, 24
        v = np.clip(np.round(flat * 8388608), -8388608, 8388607).astype("<i4")
        data = v.view(np.uint8).reshape(-1, 4)[:, :3].tobytes()
    elif encoding == "float32":
        tag, bits = 3, 32
        data = flat.astype("<f4").tobytes()
    elif encoding == "alaw":
        tag, bits = 6, 8
        data = bytes(len(flat))
    align = channels * bits // 8
    fmt = struct.pack("<HHIIHH", tag, channels, rate, rate * align, align, bits)
    body = b"WAVEfmt " + struct.pack("<I", len(fmt)) + fmt
    body += b"data" + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


def decoded(x, encoding):
    """What the file holds, as floats (the quantization of wav_bytes)."""
    x = np.asarray(x, dtype=np.float64)
    if encoding == "pcm16":
        return np.clip(np.round(x * 32768), -32768, 32767) / 32768
    if encoding == "pcm24":
        return np.clip(np.round(x * 8388608), -8388608, 8388607) / 8388608
    return x.astype(np.float32).astype(np.float64)


def ref_logmel(x, rate, n_fft, win_length, hop_length, n_mels, fmin, fmax, log_floor):
    """The spec's log mel of x, [n_mels, T], in float64."""
    win, hop, floor = win_length, hop_length, log_floor
    T = 1 + (len(x) - win) // hop
    n = np.arange(win)
    window = np.zeros(n_fft)
    window[:win] = 0.5 - 0.5 * np.cos(2 * np.pi * n / win)
    spec = np.empty((T, n_fft // 2 + 1))
    for t in range(T):
        frame = np.zeros(n_fft)
        frame[:win] = x[t * hop:t * hop + win]
        spec[t] = np.abs(np.fft.rfft(frame * window)) ** 2
    hz = np.arange(n_fft // 2 + 1) * rate / n_fft
    m_lo, m_hi = 2595 * np.log10(1 + fmin / 700), 2595 * np.log10(1 + fmax / 700)
    f = [700 * (10 ** ((m_lo + (m_hi - m_lo) * i / (n_mels + 1)) / 2595) - 1)
         for i in range(n_mels + 2)]
    out = np.empty((n_mels, T))
    for j in range(1, n_mels + 1):
        w = np.maximum(0, np.minimum((hz - f[j - 1]) / (f[j] - f[j - 1]),
                                     (f[j + 1] - hz) / (f[j + 1] - f[j])))
        out[j - 1] = np.log(np.maximum(spec @ w, floor))
    return out, f


# --------------------------------------------------------------------------
# Requests


def binary_request(url, model, raw, shape, outputs):
    header = json.dumps({
        "inputs": [{"name": "audio", "datatype": "BYTES", "shape": shape,
                    "parameters": {"binary_data_size": 4 + len(raw)}}],
        "outputs": [{"name": o} for o in outputs]}).encode()
    body = header + struct.pack("<I", len(raw)) + raw
    return requests.post("%s/v2/models/%s/infer" % (url, model), data=body,
                         headers={HEADER: str(len(header)),
                                  "Content-Type": "application/octet-stream"}, timeout=30)


def raw_request(url, model, raw, content_type="audio/wav"):
    return requests.post("%s/v2/models/%s/infer" % (url, model), data=raw,
                         headers={"Content-Type": content_type}, timeout=30)


def output(resp, name):
    assert resp.status_code == 200, resp.text
    for o in resp.json()["outputs"]:
        if o["name"] == name:
            return np.array(o["data"], dtype=np.float64).reshape(o["shape"])
    raise AssertionError("no output %s in %s" % (name, resp.text[:300]))


def identity_repo(root, audio_cfg):
    """A repository with one model, "ident": x FP32 [-1, -1] -> Identity -> y
    (the first dim taken as the batch), fed by the raw input "audio" with
    audio_cfg; a row comes back flattened."""
    import onnx
    from onnx import TensorProto, helper
    mdir = Path(root) / "models" / "ident"
    (mdir / "1").mkdir(parents=True)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [-1, -1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [-1, -1])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "ident", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(mdir / "1" / "model.onnx"))
    (mdir / "preprocess.json").write_text(json.dumps(
        {"inputs": [{"name": "audio", "feeds": "x", "audio": audio_cfg}]}))
    return mdir.parent


FEATURES = {"n_fft": 512, "win_length": 400, "hop_length": 160, "n_mels": 40, "fmin": 0,
            "fmax": 8000, "log_floor": 1e-10}


def test_logmel_at_16k(server_factory, tmp_path):
    """No resampling: the server's features are the reference's to 1e-3."""
    cfg = {"sample_rate": 16000, "samples": 8000,
           "features": dict(FEATURES, type="log_mel", window="hann")}
    srv = server_factory.start(repository=identity_repo(tmp_path, cfg))
    rng = np.random.default_rng(1)
    t = np.arange(6000) / 16000
    x = 0.3 * np.sin(2 * np.pi * (200 + 3000 * t) * t) + 0.05 * rng.standard_normal(len(t))
    raw = wav_bytes(x, 16000)
    got = output(binary_request(srv.url, "ident", raw, [1, 1], ["y"]), "y")
    want, _ = ref_logmel(np.concatenate([decoded(x, "pcm16"), np.zeros(2000)]), 16000,
                         **FEATURES)
    got = got.reshape(want.shape)
    near = want > want.max(axis=0, keepdims=True) - 12
    assert np.abs(got - want)[near].max() < 1e-3
    # The padded tail (all zeros) is at the floor.
    assert np.allclose(got[:, -3:], np.log(1e-10), atol=1e-4)


@pytest.mark.parametrize("rate,encoding", [(22050, "pcm24"), (44100, "float32")])
def test_logmel_resampled(server_factory, tmp_path, rate, encoding):
    """Stereo files at other rates, resampled by the server (libsamplerate
    sinc_best) vs scipy's resample_poly: the filters differ, so the
    tolerance is looser (0.01 median, 0.05 max, in log, below 7 kHz)."""
    feats = dict(FEATURES, fmax=7000)
    cfg = {"sample_rate": 16000, "samples": 16000, "resampler": "sinc_best",
           "features": feats, "layout": "frames_mels"}
    srv = server_factory.start(repository=identity_repo(tmp_path, cfg))
    rng = np.random.default_rng(2)
    n = rate  # 1 s
    t = np.arange(n) / rate
    left = 0.3 * np.sin(2 * np.pi * (300 + 2500 * t) * t) + 0.05 * rng.standard_normal(n)
    right = 0.2 * np.sin(2 * np.pi * 1200 * t) + 0.05 * rng.standard_normal(n)
    x = np.stack([left, right], axis=1)
    raw = wav_bytes(x, rate, encoding)
    got = output(raw_request(srv.url, "ident", raw), "y")
    mono = decoded(x, encoding).mean(axis=1)
    g = np.gcd(16000, rate)
    y16 = resample_poly(mono, 16000 // g, rate // g)[:16000]
    want, _ = ref_logmel(y16, 16000, **feats)
    got = got.reshape(want.shape[::-1]).T  # frames_mels
    diff = np.abs(got - want)[:, 2:-2]
    print("resampled %d Hz %s: median %.4f, max %.4f" % (rate, encoding, np.median(diff),
                                                          diff.max()))
    assert np.median(diff) < 0.01 and diff.max() < 0.05


def test_waveform_only(server_factory, tmp_path):
    cfg = {"sample_rate": 16000, "samples": 300}
    srv = server_factory.start(repository=identity_repo(tmp_path, cfg))
    x = np.sin(np.arange(200) * 0.3) * 0.5
    got = output(raw_request(srv.url, "ident", wav_bytes(x, 16000), "audio/x-wav"), "y")
    want = np.concatenate([decoded(x, "pcm16"), np.zeros(100)])
    assert np.array_equal(got.ravel().astype(np.float32), want.astype(np.float32))
    # Longer than samples: trimmed.
    x = np.sin(np.arange(1000) * 0.1) * 0.5
    got = output(binary_request(srv.url, "ident", wav_bytes(x, 16000), [1, 1], ["y"]), "y")
    assert np.array_equal(got.ravel().astype(np.float32),
                          decoded(x, "pcm16")[:300].astype(np.float32))


# --------------------------------------------------------------------------
# The spoken-digit model


def espeak(tmp, voice, speed, pitch, word):
    """espeak-ng's WAV file (22050 Hz PCM16; written with -w: on stdout its
    sizes say 0x7FFFF000 bytes, hours of audio)."""
    path = Path(tmp) / "word.wav"
    subprocess.run(["espeak-ng", "-v", voice, "-s", str(speed), "-p", str(pitch), "-w",
                    str(path), word], check=True)
    return path.read_bytes()


def held_out_utterances(tmp, count):
    """count (word, WAV) pairs, speeds and pitches between the trained ones."""
    rng = random.Random(16)
    out = []
    for i in range(count):
        label = i % 10
        out.append((label, espeak(tmp, rng.choice(HELD_OUT_VOICES), rng.choice([135, 165, 195]),
                                  rng.choice([35, 60]), WORDS[label])))
    return out


@pytest.fixture(scope="module")
def digits_server(module_server_factory, tmp_path_factory):
    repo = tmp_path_factory.mktemp("repo") / "models"
    shutil.copytree(DIGITS, repo / "spoken_digits")
    return module_server_factory.start(repository=repo)


def test_spoken_digits_three_ways(digits_server, tmp_path_factory):
    srv = digits_server
    pb, hpb = generate(tmp_path_factory.mktemp("proto_py"))
    client = Client(pb, hpb, "127.0.0.1:%d" % srv.grpc_port)
    utterances = held_out_utterances(tmp_path_factory.mktemp("espeak"), 30)
    right = 0
    try:
        for label, raw in utterances:
            p_bin = output(binary_request(srv.url, "spoken_digits", raw, [1, 1],
                                          ["probabilities"]), "probabilities")
            p_raw = output(raw_request(srv.url, "spoken_digits", raw), "probabilities")
            req = pb.ModelInferRequest(model_name="spoken_digits")
            inp = req.inputs.add()
            inp.name, inp.datatype = "audio", "BYTES"
            inp.shape.extend([1, 1])
            req.raw_input_contents.append(struct.pack("<I", len(raw)) + raw)
            resp = client.infer(req)
            p_grpc = np.frombuffer(resp.raw_output_contents[0], dtype="<f4").reshape(1, 10)
            assert np.array_equal(p_bin.astype(np.float32), p_raw.astype(np.float32))
            assert np.allclose(p_grpc, p_bin, rtol=0, atol=1e-6)
            right += int(np.argmax(p_bin) == label)
    finally:
        client.close()
    acc = right / len(utterances)
    print("spoken_digits held-out accuracy: %.3f (%d utterances)" % (acc, len(utterances)))
    assert acc >= 0.6


def test_spoken_digits_sample(digits_server):
    p = output(raw_request(digits_server.url, "spoken_digits",
                           (DIGITS / "sample_seven.wav").read_bytes()), "probabilities")
    assert WORDS[int(np.argmax(p))] == "seven"


# --------------------------------------------------------------------------
# Hostile files


def assert_error(resp, status, fragment):
    assert resp.status_code == status, resp.text
    assert "application/json" in resp.headers.get("Content-Type", "")
    assert fragment in resp.json()["error"], resp.text


def test_hostile_files(digits_server):
    srv = digits_server
    good = wav_bytes(np.zeros(1600), 16000)
    assert_error(raw_request(srv.url, "spoken_digits", good[:-100]), 400, "truncated")
    assert_error(binary_request(srv.url, "spoken_digits", good[:30], [1, 1], ["probabilities"]),
                 400, "WAV")
    # A data chunk claiming 3 hours at 48 kHz stereo PCM16, 8 bytes present:
    # refused from the header alone (the model allows 10 s).
    hours = bytearray(wav_bytes(np.zeros((2, 2)), 48000))
    hours[40:44] = struct.pack("<I", 48000 * 4 * 3 * 3600)
    assert_error(raw_request(srv.url, "spoken_digits", bytes(hours)), 413, "seconds")
    assert_error(raw_request(srv.url, "spoken_digits", wav_bytes(np.zeros(100), 8000, "alaw")),
                 400, "format tag 6")
    assert_error(raw_request(srv.url, "spoken_digits", b"ID3\x03" + bytes(200)), 400,
                 "not a WAV file")
    # Still serving.
    p = output(raw_request(srv.url, "spoken_digits", good), "probabilities")
    assert p.shape == (1, 10)
