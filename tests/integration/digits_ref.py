"""Independent numpy reference for the `digits` models (any version).

Reads an ONNX digits file with `onnx` + `onnx.numpy_helper` only (neither
inferd nor ONNX Runtime), takes the initializers by name and evaluates the
graph's formula in float32 (models/README.md, "digits"):

    x      = pixels * scale
    h      = Relu(x @ W1 + b1)
    logits = h @ W2 + b2
    probabilities = Softmax(logits, axis=1)      (max subtracted first)
    label         = ArgMax(logits, axis=1)

Used by tests that serve models/digits/1 and tests/models/digits_v2/2 side by
side: outputs() gives each version's expected answers, test_images() real
held-out digits to send, compare() the numbers a server's version-diff
metrics should report.

    from digits_ref import compare, outputs, test_images

Self-check (not a pytest): /usr/bin/python3 tests/integration/digits_ref.py
"""
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[2]
V1 = REPO_ROOT / "models" / "digits" / "1" / "model.onnx"
V2 = REPO_ROOT / "tests" / "models" / "digits_v2" / "2" / "model.onnx"

_weights_cache = {}


def weights(model_path):
    """{name: np.ndarray} of the initializers scale, W1, b1, W2, b2."""
    key = str(Path(model_path).resolve())
    if key not in _weights_cache:
        import onnx
        from onnx import numpy_helper
        model = onnx.load(key)
        inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
        w = {name: np.asarray(inits[name], dtype=np.float32)
             for name in ("scale", "W1", "b1", "W2", "b2")}
        assert w["scale"].shape == () and w["W1"].shape[0] == 64
        assert w["W2"].shape == (w["W1"].shape[1], 10), w["W2"].shape
        _weights_cache[key] = w
    return _weights_cache[key]


def outputs(model_path, pixels):
    """The model's outputs for pixels (float32 [n, 64], raw values 0..16):
    dict(probabilities=float32 [n, 10], label=int64 [n])."""
    w = weights(model_path)
    x = np.asarray(pixels, dtype=np.float32).reshape(-1, 64) * w["scale"]
    h = np.maximum(x @ w["W1"] + w["b1"], np.float32(0))
    logits = h @ w["W2"] + w["b2"]
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    proba = (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
    return {"probabilities": proba,
            "label": logits.argmax(axis=1).astype(np.int64)}


def test_images(n):
    """The first n held-out images (float32 [n, 64], raw 0..16): the test set
    of models/build/make_digits.py's split, in the same order (so image 0 is
    the one in models/digits/sample.json). n <= 450."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    digits = load_digits()
    X, y = digits.data.astype(np.float64), digits.target
    _, X_test, _, _ = train_test_split(X, y, test_size=0.25, stratify=y, random_state=0)
    if not 0 <= n <= len(X_test):
        raise ValueError("only %d held-out images, asked for %d" % (len(X_test), n))
    return X_test[:n].astype(np.float32)


test_images.__test__ = False  # a helper, not a pytest test


def _parts(out):
    """(probabilities, label) of an outputs() dict or a bare probability array
    (then the label is its argmax)."""
    if isinstance(out, dict):
        p = np.asarray(out["probabilities"], dtype=np.float32)
        label = np.asarray(out["label"], dtype=np.int64)
    else:
        p = np.asarray(out, dtype=np.float32)
        label = p.argmax(axis=1).astype(np.int64)
    return p.reshape(len(label), -1), label.reshape(-1)


def compare(p1, p2):
    """Differences between two versions' answers for the same n images.

    p1, p2: outputs() dicts (or bare float32 [n, 10] probability arrays).
    Returns dict(max_abs=float: max |a - b| over all probabilities,
                 max_rel=float: max |a - b| / max(|a|, |b|), 0 where both are 0,
                 argmax_agree=int: rows whose probability argmax agrees,
                 label_equal=int: rows whose label outputs are equal)."""
    a, la = _parts(p1)
    b, lb = _parts(p2)
    assert a.shape == b.shape and la.shape == lb.shape, (a.shape, b.shape)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    diff = np.abs(a64 - b64)
    denom = np.maximum(np.abs(a64), np.abs(b64))
    rel = np.divide(diff, denom, out=np.zeros_like(diff), where=denom > 0)
    return {"max_abs": float(diff.max()) if diff.size else 0.0,
            "max_rel": float(rel.max()) if rel.size else 0.0,
            "argmax_agree": int((a.argmax(axis=1) == b.argmax(axis=1)).sum()),
            "label_equal": int((la == lb).sum())}


def _self_check():
    import json
    sample = json.loads((REPO_ROOT / "models" / "digits" / "sample.json").read_text())
    pixels = np.asarray(sample["inputs"][0]["data"], dtype=np.float32).reshape(1, 64)
    o1 = outputs(V1, pixels)
    print("v1 on sample.json: label %d, p=%.4f" % (o1["label"][0], o1["probabilities"][0].max()))
    # models/README.md: true label 2, v1 predicts 2 with p = 0.709.
    assert o1["label"][0] == 2 and abs(o1["probabilities"][0].max() - 0.709) < 5e-4
    assert (test_images(1) == pixels).all(), "test_images(0) is not sample.json's image"
    o2 = outputs(V2, pixels)
    print("v2 on sample.json: label %d, p=%.4f" % (o2["label"][0], o2["probabilities"][0].max()))
    for o in (o1, o2):
        assert o["probabilities"].dtype == np.float32 and o["label"].dtype == np.int64
        assert abs(float(o["probabilities"].sum()) - 1) < 1e-5
    assert compare(o1, o1) == {"max_abs": 0.0, "max_rel": 0.0,
                               "argmax_agree": 1, "label_equal": 1}
    for n in (200, 450):
        X = test_images(n)
        a, b = outputs(V1, X), outputs(V2, X)
        assert (a["label"] == a["probabilities"].argmax(axis=1)).all()
        c = compare(a, b)
        print("v1 vs v2 on %d held-out images: %s (labels agree %.2f %%)"
              % (n, c, 100.0 * c["label_equal"] / n))
        assert c["label_equal"] < n and c["max_abs"] > 1e-3


if __name__ == "__main__":
    _self_check()
