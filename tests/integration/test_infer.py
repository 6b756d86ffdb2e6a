"""POST /v2/models/{m}/infer on the real models: simple, digits, strings."""
import json
import re
import threading

import numpy as np
import pytest

from conftest import REPO_ROOT, ok_json, tensor

# Triton's documented example for `simple`: INPUT0 = 0..15, INPUT1 = all ones.
IN0 = np.arange(16, dtype=np.int32).reshape(1, 16)
IN1 = np.ones((1, 16), dtype=np.int32)


def simple_inputs(a, b, nested=False):
    if nested:
        return [{"name": "INPUT0", "shape": list(a.shape), "datatype": "INT32", "data": a.tolist()},
                {"name": "INPUT1", "shape": list(b.shape), "datatype": "INT32", "data": b.tolist()}]
    return [tensor("INPUT0", a, "INT32"), tensor("INPUT1", b, "INT32")]


def check_output(out, name, datatype, expected):
    assert out["name"] == name
    assert out["datatype"] == datatype
    assert out["shape"] == list(expected.shape)
    assert out["data"] == expected.reshape(-1).tolist()


def test_simple_triton_example(infer):
    body = ok_json(infer("simple", simple_inputs(IN0, IN1)))
    assert body["model_name"] == "simple"
    assert body["model_version"] == "1"
    assert "id" not in body
    assert [o["name"] for o in body["outputs"]] == ["OUTPUT0", "OUTPUT1"]
    check_output(body["outputs"][0], "OUTPUT0", "INT32", IN0 + IN1)
    check_output(body["outputs"][1], "OUTPUT1", "INT32", IN0 - IN1)
    # the literal values of Triton's example, not just numpy's opinion
    assert body["outputs"][0]["data"] == list(range(1, 17))
    assert body["outputs"][1]["data"] == list(range(-1, 15))


def test_simple_versioned_path(infer):
    body = ok_json(infer("simple", simple_inputs(IN0, IN1), version="1"))
    assert body["model_version"] == "1"
    check_output(body["outputs"][0], "OUTPUT0", "INT32", IN0 + IN1)


def test_simple_batch4(infer):
    rng = np.random.default_rng(1234)
    a = rng.integers(-1_000_000, 1_000_000, size=(4, 16), dtype=np.int32)
    b = rng.integers(-1_000_000, 1_000_000, size=(4, 16), dtype=np.int32)
    body = ok_json(infer("simple", simple_inputs(a, b)))
    check_output(body["outputs"][0], "OUTPUT0", "INT32", a + b)
    check_output(body["outputs"][1], "OUTPUT1", "INT32", a - b)


def test_simple_int32_extremes(infer):
    a = np.array([[2147483646, -2147483647, 2147483647, -2147483648] + [0] * 12], dtype=np.int32)
    b = np.array([[1, -1, 0, 0] + [7] * 12], dtype=np.int32)
    body = ok_json(infer("simple", simple_inputs(a, b)))
    check_output(body["outputs"][0], "OUTPUT0", "INT32", a + b)
    assert body["outputs"][0]["data"][:4] == [2147483647, -2147483648, 2147483647, -2147483648]


def test_simple_empty_batch(infer):
    """Batch 0 matches the -1 dimension: empty outputs with shape [0, 16]."""
    a = np.zeros((0, 16), dtype=np.int32)
    body = ok_json(infer("simple", simple_inputs(a, a)))
    check_output(body["outputs"][0], "OUTPUT0", "INT32", a)
    check_output(body["outputs"][1], "OUTPUT1", "INT32", a)


def test_simple_large_batch(infer):
    rng = np.random.default_rng(99)
    a = rng.integers(-2 ** 30, 2 ** 30, size=(2000, 16), dtype=np.int32)
    b = rng.integers(-2 ** 30, 2 ** 30, size=(2000, 16), dtype=np.int32)
    body = ok_json(infer("simple", simple_inputs(a, b)))
    check_output(body["outputs"][0], "OUTPUT0", "INT32", a + b)
    check_output(body["outputs"][1], "OUTPUT1", "INT32", a - b)


def test_simple_nested_data(infer):
    a = np.arange(32, dtype=np.int32).reshape(2, 16) * 3
    b = np.arange(32, dtype=np.int32).reshape(2, 16)[::-1].copy()
    body = ok_json(infer("simple", simple_inputs(a, b, nested=True)))
    check_output(body["outputs"][0], "OUTPUT0", "INT32", a + b)
    check_output(body["outputs"][1], "OUTPUT1", "INT32", a - b)


def test_simple_mixed_flat_and_nested(infer):
    a = np.arange(16, dtype=np.int32).reshape(1, 16) * -5
    inputs = [{"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": a.tolist()},
              tensor("INPUT1", IN1, "INT32")]
    body = ok_json(infer("simple", inputs))
    check_output(body["outputs"][0], "OUTPUT0", "INT32", a + IN1)


def test_inputs_in_any_order(infer):
    body = ok_json(infer("simple", simple_inputs(IN0, IN1)[::-1]))
    check_output(body["outputs"][0], "OUTPUT0", "INT32", IN0 + IN1)
    check_output(body["outputs"][1], "OUTPUT1", "INT32", IN0 - IN1)


def test_output_subset(infer):
    body = ok_json(infer("simple", simple_inputs(IN0, IN1), outputs=["OUTPUT1"]))
    assert len(body["outputs"]) == 1
    check_output(body["outputs"][0], "OUTPUT1", "INT32", IN0 - IN1)


def test_output_order_follows_request(infer):
    body = ok_json(infer("simple", simple_inputs(IN0, IN1), outputs=["OUTPUT1", "OUTPUT0"]))
    assert [o["name"] for o in body["outputs"]] == ["OUTPUT1", "OUTPUT0"]
    check_output(body["outputs"][0], "OUTPUT1", "INT32", IN0 - IN1)
    check_output(body["outputs"][1], "OUTPUT0", "INT32", IN0 + IN1)


def test_id_echo(infer):
    rid = "req-42 \u00e9\"quoted\"\\"
    body = ok_json(infer("simple", simple_inputs(IN0, IN1), id=rid))
    assert body["id"] == rid
    check_output(body["outputs"][0], "OUTPUT0", "INT32", IN0 + IN1)


def test_parameters_accepted(infer):
    inputs = simple_inputs(IN0, IN1)
    inputs[0]["parameters"] = {"note": "x", "n": 1}
    inputs[1]["parameters"] = {}
    outputs = [{"name": "OUTPUT0", "parameters": {"flag": False}}, {"name": "OUTPUT1"}]
    body = ok_json(infer("simple", inputs, outputs=outputs,
                         parameters={"foo": "bar", "n": 3, "x": 1.5, "flag": True}))
    check_output(body["outputs"][0], "OUTPUT0", "INT32", IN0 + IN1)
    check_output(body["outputs"][1], "OUTPUT1", "INT32", IN0 - IN1)


def test_concurrent_requests_get_their_own_results(server):
    """Several clients at once: no response carries another request's data."""
    from conftest import infer_request
    errors = []

    def client(k):
        try:
            for i in range(15):
                a = np.full((1, 16), k * 1000 + i, dtype=np.int32)
                b = np.arange(16, dtype=np.int32).reshape(1, 16) * k
                body = ok_json(infer_request(server.url, "simple", simple_inputs(a, b), id="%d-%d" % (k, i)))
                assert body["id"] == "%d-%d" % (k, i)
                assert body["outputs"][0]["data"] == (a + b).reshape(-1).tolist()
                assert body["outputs"][1]["data"] == (a - b).reshape(-1).tolist()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append("client %d: %r" % (k, e))

    threads = [threading.Thread(target=client, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors


# ---------------------------------------------------------------- digits


def digits_reference(pixels):
    """The digits graph evaluated in numpy from the model's own weights."""
    import onnx
    from onnx import numpy_helper
    model = onnx.load(str(REPO_ROOT / "models" / "digits" / "1" / "model.onnx"))
    w = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    x = np.asarray(pixels, dtype=np.float32) * w["scale"]
    h = np.maximum(x @ w["W1"] + w["b1"], 0)
    logits = h @ w["W2"] + w["b2"]
    e = np.exp((logits - logits.max(axis=1, keepdims=True)).astype(np.float64))
    return e / e.sum(axis=1, keepdims=True), logits.argmax(axis=1)


def readme_label():
    readme = REPO_ROOT / "models" / "README.md"
    if not readme.exists():
        pytest.fail("models/README.md is missing (it must name the label of digits/sample.json)")
    text = readme.read_text()
    # Look for the sentence about sample.json and the digit it names.
    for para in re.split(r"\n\s*\n", text):
        if "sample.json" not in para:
            continue
        m = re.search(r"(?:label|digit|class)\D{0,40}?(\d)\b", para, re.IGNORECASE)
        if m:
            return int(m.group(1))
    pytest.fail("could not find the label of digits/sample.json in models/README.md")


def load_sample():
    with open(REPO_ROOT / "models" / "digits" / "sample.json") as f:
        return json.load(f)


def test_digits_sample(infer):
    sample = load_sample()
    body = ok_json(infer("digits", sample["inputs"]))
    assert body["model_name"] == "digits"
    outs = {o["name"]: o for o in body["outputs"]}
    assert [o["name"] for o in body["outputs"]] == ["probabilities", "label"]
    probs, label = outs["probabilities"], outs["label"]
    assert probs["datatype"] == "FP32" and probs["shape"] == [1, 10]
    assert label["datatype"] == "INT64" and label["shape"] == [1]
    p = np.array(probs["data"], dtype=np.float64)
    assert abs(p.sum() - 1.0) < 1e-5
    assert (p >= 0).all()
    assert label["data"] == [readme_label()]
    assert int(np.argmax(p)) == label["data"][0]
    ref_p, ref_label = digits_reference(np.array(sample["inputs"][0]["data"]).reshape(1, 64))
    np.testing.assert_allclose(p, ref_p[0], rtol=1e-4, atol=1e-6)
    assert label["data"][0] == int(ref_label[0])


def test_digits_batch(infer):
    sample = np.array(load_sample()["inputs"][0]["data"], dtype=np.float32)
    batch = np.stack([sample, np.zeros(64, np.float32), sample[::-1].copy(),
                      np.clip(sample + 3, 0, 16)])
    body = ok_json(infer("digits", [tensor("pixels", batch, "FP32")]))
    outs = {o["name"]: o for o in body["outputs"]}
    p = np.array(outs["probabilities"]["data"], dtype=np.float64).reshape(4, 10)
    ref_p, ref_label = digits_reference(batch)
    np.testing.assert_allclose(p, ref_p, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(p.sum(axis=1), np.ones(4), atol=1e-5)
    assert outs["label"]["shape"] == [4]
    assert outs["label"]["data"] == ref_label.tolist()


def test_digits_label_only(infer):
    sample = load_sample()
    body = ok_json(infer("digits", sample["inputs"], outputs=["label"]))
    assert [o["name"] for o in body["outputs"]] == ["label"]
    assert body["outputs"][0]["data"] == [readme_label()]


# ---------------------------------------------------------------- strings


def check_strings(infer, texts):
    body = ok_json(infer("strings", [tensor("TEXT", texts, "BYTES", [len(texts)])]))
    assert body["model_name"] == "strings"
    outs = {o["name"]: o for o in body["outputs"]}
    assert [o["name"] for o in body["outputs"]] == ["UPPER", "ECHO"]
    for name in ("UPPER", "ECHO"):
        assert outs[name]["datatype"] == "BYTES"
        assert outs[name]["shape"] == [len(texts)]
    assert outs["ECHO"]["data"] == texts
    assert outs["UPPER"]["data"] == [t.upper() for t in texts]


def test_strings_ascii(infer):
    check_strings(infer, ["hello", "World 42!", "MiXeD_case-text", "a"])


def test_strings_unicode(infer):
    # Characters whose upper case is one code point (not e.g. German sharp s).
    check_strings(infer, ["h\u00e9llo w\u00f6rld", "\u043f\u0440\u0438\u0432\u0435\u0442",
                          "\u65e5\u672c\u8a9e", "smile \U0001F642 ok", "\u00e0\u00e7\u00ee"])


def test_strings_empty(infer):
    check_strings(infer, [""])
    check_strings(infer, ["", "x", ""])


def test_strings_embedded_nul(infer):
    check_strings(infer, ["a\u0000b", "\u0000", "end\u0000"])


def test_strings_json_escapes(infer):
    check_strings(infer, ['quote " backslash \\ slash /', "tab\tnewline\ncr\r", "\u0001\u001f"])


def test_strings_long(infer):
    check_strings(infer, ["abc\u00e9" * 5000])
