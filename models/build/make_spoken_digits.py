#!/usr/bin/env python3
"""Build models/spoken_digits: a spoken-digit ("zero".."nine") classifier.

The words are synthesized with espeak-ng (Debian's package, no download)
in many voices, speeds and pitches, resampled from espeak's 22050 Hz to
16 kHz (scipy's resample_poly), shifted in time, scaled and mixed with
noise, and turned into the log mel features the server computes for
models/spoken_digits/preprocess.json (docs/preprocessing.md, "Audio"):
1 s = 16000 samples, n_fft 512, Hann window of 400, hop 160, 40 HTK mel
filters from 0 to 8000 Hz, ln(max(mel, 1e-10)) -> [40, 98].

A small CNN (torch) is trained on some voices; whole other voices are
held out for the test accuracy, which is printed. The graph:

  features FP32 [batch, 40, 98]
    -> (x - mean) / std, a channel dim -> 3 x (Conv 3x3, ReLU, MaxPool 2)
    -> Flatten -> Linear -> Softmax => probabilities FP32 [batch, 10]

exported with torch.onnx.export (opset 14) to models/spoken_digits/1/model.onnx.
Also writes labels.txt, config.pbtxt, preprocess.json and two sample WAVs
(held-out voices). Deterministic (fixed seeds, one thread).

Run from the repo root: /usr/bin/python3 models/build/make_spoken_digits.py
"""
import io
import json
import os
import subprocess
import wave

import numpy as np
import torch
from scipy.signal import resample_poly

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT_DIR = os.path.join(ROOT, "models", "spoken_digits")

WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
TRAIN_VOICES = ["en", "en-us", "en-gb-x-rp", "en-029", "en-us-nyc", "en-gb-x-gbcwmd",
                "en+m3", "en+f2", "en-us+m1", "en-us+f3", "en+klatt", "en-gb-x-rp+m5",
                "en-029+f1", "en-us-nyc+m6", "en+f5", "en-us+klatt4"]
TEST_VOICES = ["en-gb-scotland", "en-gb-x-gbclan", "en+f4", "en-us+m7"]
SPEEDS = [120, 150, 180, 210]
PITCHES = [25, 50, 75]
AUGMENT = 3            # noisy/shifted copies of each training utterance

RATE = 16000
SAMPLES = 16000
N_FFT, WIN, HOP, N_MELS, FMIN, FMAX, FLOOR = 512, 400, 160, 40, 0.0, 8000.0, 1e-10
FRAMES = 1 + (SAMPLES - WIN) // HOP

PREPROCESS = {"inputs": [{"name": "audio", "feeds": "features", "audio": {
    "max_seconds": 10, "sample_rate": RATE, "samples": SAMPLES,
    "features": {"type": "log_mel", "n_fft": N_FFT, "win_length": WIN, "hop_length": HOP,
                 "window": "hann", "n_mels": N_MELS, "fmin": FMIN, "fmax": FMAX,
                 "log_floor": FLOOR},
    "layout": "mels_frames"}}]}


def synth(voice, speed, pitch, word):
    """espeak-ng's WAV (22050 Hz mono PCM16) as float samples in [-1, 1)."""
    wav = subprocess.run(["espeak-ng", "-v", voice, "-s", str(speed), "-p", str(pitch),
                          "--stdout", word], check=True, capture_output=True).stdout
    return wav


def wav_samples(data):
    with wave.open(io.BytesIO(data)) as w:
        assert w.getsampwidth() == 2 and w.getnchannels() == 1, "espeak-ng output changed"
        x = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float64) / 32768
        return x, w.getframerate()


def to_16k(x, rate):
    g = np.gcd(RATE, rate)
    return resample_poly(x, RATE // g, rate // g)


def mel_filters():
    def mel(f):
        return 2595.0 * np.log10(1.0 + f / 700.0)

    pts = 700.0 * (10.0 ** (np.linspace(mel(FMIN), mel(FMAX), N_MELS + 2) / 2595.0) - 1.0)
    f = np.arange(N_FFT // 2 + 1) * RATE / N_FFT
    up = (f[None, :] - pts[:-2, None]) / (pts[1:-1] - pts[:-2])[:, None]
    down = (pts[2:, None] - f[None, :]) / (pts[2:] - pts[1:-1])[:, None]
    return np.maximum(0.0, np.minimum(up, down))


FILTERS = mel_filters()
WINDOW = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(WIN) / WIN)


def features(x):
    """[N_MELS, FRAMES] log mel of exactly SAMPLES samples."""
    idx = np.arange(FRAMES)[:, None] * HOP + np.arange(WIN)[None, :]
    frames = x[idx] * WINDOW
    power = np.abs(np.fft.rfft(frames, n=N_FFT, axis=1)) ** 2
    return np.log(np.maximum(power @ FILTERS.T, FLOOR)).T.astype(np.float32)


def fit(x, rng, augment):
    """Pads/trims to SAMPLES; with augment, a random shift, gain and noise."""
    if augment:
        x = x * rng.uniform(0.2, 1.5)
        shift = rng.integers(0, 3200)
        x = np.concatenate([np.zeros(shift), x])
    out = np.zeros(SAMPLES)
    n = min(len(x), SAMPLES)
    out[:n] = x[:n]
    if augment and rng.random() < 0.7:
        level = 10 ** rng.uniform(-4.0, -1.7)
        out = out + rng.normal(0.0, level, SAMPLES)
    return out


def dataset(voices, rng, augment):
    xs, ys = [], []
    for voice in voices:
        for speed in SPEEDS:
            for pitch in PITCHES:
                for label, word in enumerate(WORDS):
                    x = to_16k(*wav_samples(synth(voice, speed, pitch, word)))
                    for _ in range(augment if augment else 1):
                        xs.append(features(fit(x, rng, augment > 0)))
                        ys.append(label)
    return np.stack(xs), np.array(ys)


class Net(torch.nn.Module):
    def __init__(self, mean, std):
        super().__init__()
        self.register_buffer("mean", torch.tensor(mean, dtype=torch.float32))
        self.register_buffer("std", torch.tensor(std, dtype=torch.float32))
        c = [1, 8, 16, 32]
        layers = []
        for i in range(3):
            layers += [torch.nn.Conv2d(c[i], c[i + 1], 3, padding=1), torch.nn.ReLU(),
                       torch.nn.MaxPool2d(2)]
        self.conv = torch.nn.Sequential(*layers)
        self.drop = torch.nn.Dropout(0.3)
        self.fc = torch.nn.Linear(32 * (N_MELS // 8) * (FRAMES // 8), 10)

    def forward(self, x):
        x = ((x - self.mean) / self.std).unsqueeze(1)
        x = self.conv(x).flatten(1)
        return torch.softmax(self.fc(self.drop(x)), dim=1)


def accuracy(net, x, y):
    net.eval()
    with torch.no_grad():
        return float((net(torch.from_numpy(x)).argmax(1).numpy() == y).mean())


def write_wav(path, x):
    pcm = np.clip(np.round(x * 32768), -32768, 32767).astype("<i2")
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(pcm.tobytes())


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    xtr, ytr = dataset(TRAIN_VOICES, rng, AUGMENT)
    xte, yte = dataset(TEST_VOICES, rng, 0)
    print(f"train {len(xtr)} utterances ({len(TRAIN_VOICES)} voices), "
          f"test {len(xte)} ({len(TEST_VOICES)} held-out voices)")
    net = Net(xtr.mean(), xtr.std())
    opt = torch.optim.Adam(net.parameters(), lr=2e-3)
    xt, yt = torch.from_numpy(xtr), torch.from_numpy(ytr)
    gen = torch.Generator().manual_seed(0)
    for epoch in range(12):
        net.train()
        perm = torch.randperm(len(xt), generator=gen)
        for i in range(0, len(xt), 64):
            b = perm[i:i + 64]
            loss = torch.nn.functional.nll_loss(torch.log(net(xt[b]) + 1e-9), yt[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(f"epoch {epoch}: loss {loss.item():.3f} held-out accuracy {accuracy(net, xte, yte):.3f}")
    acc = accuracy(net, xte, yte)
    print(f"held-out voices accuracy: {acc:.3f} ({len(xte)} utterances)")

    net.eval()
    os.makedirs(os.path.join(OUT_DIR, "1"), exist_ok=True)
    torch.onnx.export(net, torch.from_numpy(xte[:1]), os.path.join(OUT_DIR, "1", "model.onnx"),
                      input_names=["features"], output_names=["probabilities"],
                      dynamic_axes={"features": {0: "batch"}, "probabilities": {0: "batch"}},
                      opset_version=14)
    with open(os.path.join(OUT_DIR, "labels.txt"), "w") as f:
        f.write("\n".join(WORDS) + "\n")
    with open(os.path.join(OUT_DIR, "preprocess.json"), "w") as f:
        json.dump(PREPROCESS, f, indent=2)
        f.write("\n")
    with open(os.path.join(OUT_DIR, "config.pbtxt"), "w") as f:
        f.write('max_batch_size: 8\n'
                f'input [ {{ name: "features" data_type: TYPE_FP32 dims: [ {N_MELS}, {FRAMES} ] }} ]\n'
                'output [ { name: "probabilities" data_type: TYPE_FP32 dims: [ 10 ] '
                'label_filename: "labels.txt" } ]\n')
    for voice, word in (("en-gb-scotland", "seven"), ("en+f4", "three")):
        x = to_16k(*wav_samples(synth(voice, 160, 50, word)))
        write_wav(os.path.join(OUT_DIR, f"sample_{word}.wav"), x[:SAMPLES])


if __name__ == "__main__":
    main()
