"""The text modality end to end (src/preprocess/text.c behind the stage).

1. The server's tensors: an identity model (input_ids and attention_mask,
   INT64 [-1, -1] -> Identity) fed by a raw text input; its ids must equal
   the Python reference encoder of models/build/make_langid.py (make_kjv's
   Tokenizer over the same tokenizer.json) exactly, padded rows of one
   request with id 0 / mask 0; truncation to max_length; ASCII lowercasing
   (INT32 variant); invalid UTF-8 and empty texts 400, over max_bytes 413,
   all with a JSON error and the server still serving.
2. models/langid through REST JSON BYTES, the binary extension, gRPC
   (bytes_contents and raw_input_contents) and a text/plain body: held-out
   words and 3-word phrases (rebuilt with the training script's split)
   classified as well as the training script measured, and the server's
   probabilities equal to the graph evaluated in numpy on the reference ids.
3. Concurrent single-text requests of different lengths share executions
   (statistics: execution_count < inference_count: the padding budget lets
   them) and answer what they answer alone.
"""
import json
import random
import shutil
import sys
import threading

import numpy as np
import onnx
import pytest
import requests
from onnx import TensorProto, helper

from conftest import (REPO_ROOT, bytes_infer_request, infer_request, ok_json,
                      tensor)
from grpc_client import Client, generate, join_bytes

sys.path.insert(0, str(REPO_ROOT / "models" / "build"))
import make_langid  # noqa: E402  (the reference tokenizer and the held-out split)

LANGID = REPO_ROOT / "models" / "langid"
LABELS = [l for l in (LANGID / "labels.txt").read_text().split("\n") if l]
TOKENIZER = make_langid.load_tokenizer(LANGID / "tokenizer.json")

TEXTS = ["hello world", "Guten Morgen, wie geht's?", "Straße über Öl",
         "¿dónde está la estación?", "emoji \U0001F600 and\nnewline", "  two  spaces ",
         "a", "NUL \x00 byte", "x" * 40]


def identity_model(path, datatype):
    inputs = [helper.make_tensor_value_info(n, datatype, ["batch", "seq"])
              for n in ("input_ids", "attention_mask")]
    outputs = [helper.make_tensor_value_info(n, datatype, ["batch", "seq"])
               for n in ("ids", "mask")]
    nodes = [helper.make_node("Identity", ["input_ids"], ["ids"]),
             helper.make_node("Identity", ["attention_mask"], ["mask"])]
    model = helper.make_model(helper.make_graph(nodes, "ident", inputs, outputs),
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))


def add_identity(root, name, text_cfg, datatype):
    (root / name / "1").mkdir(parents=True)
    identity_model(root / name / "1" / "model.onnx", datatype)
    shutil.copy(LANGID / "tokenizer.json", root / name / "tokenizer.json")
    (root / name / "preprocess.json").write_text(json.dumps(
        {"inputs": [{"name": "text", "feeds": "input_ids", "text": text_cfg}]}))


@pytest.fixture(scope="module")
def srv(module_server_factory, tmp_path_factory):
    root = tmp_path_factory.mktemp("prep_text") / "repo"
    add_identity(root, "ident", {"max_length": 8, "max_bytes": 64,
                                 "attention_mask": "attention_mask"}, TensorProto.INT64)
    add_identity(root, "ident_lc", {"max_length": 16, "lowercase": True, "datatype": "INT32",
                                    "attention_mask": "attention_mask"}, TensorProto.INT32)
    shutil.copytree(LANGID, root / "langid")
    return module_server_factory.start("--model-repository", str(root))


@pytest.fixture(scope="module")
def held_out():
    """{"words": [(text, label)], "phrases3": [...]}: a deterministic sample of
    the training script's held-out words (never trained on) and 3-word
    phrases of them."""
    data = make_langid.split(make_langid.load_words())
    rng = random.Random(16)
    out = {"words": [], "phrases3": []}
    for label, (lang, _) in enumerate(make_langid.LANGS):
        held = [w.decode("utf-8") for w in data[lang][1]]
        out["words"] += [(w, label) for w in rng.sample(held, 150)]
        out["phrases3"] += [(" ".join(rng.sample(held, 3)), label) for _ in range(50)]
    return out


def outputs(doc):
    return {o["name"]: np.array(o["data"]).reshape(o["shape"]) for o in doc["outputs"]}


def reference(text, lowercase=False, max_length=8):
    b = text.encode("utf-8")
    return TOKENIZER.encode(make_langid.ascii_lower(b) if lowercase else b)[:max_length]


def check_rows(doc, texts, lowercase=False, max_length=8, datatype="INT64"):
    out = outputs(doc)
    assert {o["datatype"] for o in doc["outputs"]} == {datatype}
    refs = [reference(t, lowercase, max_length) for t in texts]
    width = max(len(r) for r in refs)
    assert out["ids"].shape == (len(texts), width) == out["mask"].shape
    for row, mrow, ref in zip(out["ids"], out["mask"], refs):
        assert row.tolist() == ref + [0] * (width - len(ref))
        assert mrow.tolist() == [1] * len(ref) + [0] * (width - len(ref))


def test_ids_equal_the_python_encoder(srv):
    for t in TEXTS:  # one per request: no padding
        check_rows(ok_json(bytes_infer_request(srv.url, "ident", "text", [t])), [t])
    # All in one request: rows padded with zeros to the longest.
    check_rows(ok_json(bytes_infer_request(srv.url, "ident", "text", TEXTS)), TEXTS)
    # JSON BYTES: a text is a JSON string.
    doc = ok_json(infer_request(srv.url, "ident", [tensor("text", TEXTS[:4], "BYTES",
                                                          shape=[4, 1])]))
    check_rows(doc, TEXTS[:4])


def test_truncation_and_lowercase(srv):
    long = "the quick brown fox jumps over the lazy dog again and again"
    assert len(reference(long, max_length=100)) > 8
    doc = ok_json(bytes_infer_request(srv.url, "ident", "text", [long]))
    assert outputs(doc)["ids"].shape == (1, 8)
    check_rows(doc, [long])
    mixed = ["HeLLo WORLD", "ÉCOLE Ärger STRASSE", long.upper()]
    doc = ok_json(bytes_infer_request(srv.url, "ident_lc", "text", mixed))
    check_rows(doc, mixed, lowercase=True, max_length=16, datatype="INT32")
    # Without lowercasing the ids differ (the upper-case bytes).
    assert reference("HeLLo WORLD") != reference("HeLLo WORLD", lowercase=True)


@pytest.mark.parametrize("element, status, needle", [
    (b"ab\xff", 400, "not valid UTF-8 (at byte 2)"),
    (b"\xc0\xaf", 400, "not valid UTF-8 (at byte 0)"),
    (b"\xed\xa0\x80 surrogate", 400, "not valid UTF-8"),
    (b"", 400, "empty text"),
    (b"x" * 65, 413, "text.max_bytes"),
])
def test_bad_texts(srv, element, status, needle):
    r = bytes_infer_request(srv.url, "ident", "text", ["fine", element])
    assert r.status_code == status, r.text
    assert r.headers["Content-Type"].startswith("application/json")
    msg = r.json()["error"]
    assert needle in msg and "input 'text'" in msg, msg
    check_rows(ok_json(bytes_infer_request(srv.url, "ident", "text", ["still serving"])),
               ["still serving"])


def test_bad_texts_raw_body(srv):
    post = lambda body: requests.post(srv.url + "/v2/models/ident/infer", data=body,
                                      headers={"Content-Type": "text/plain; charset=utf-8"})
    check_rows(ok_json(post("Guten Tag".encode("utf-8"))), ["Guten Tag"])
    r = post(b"\xe2\x82")
    assert r.status_code == 400 and "not valid UTF-8" in r.json()["error"]
    r = post(b"y" * 100)
    assert r.status_code == 413 and "error" in r.json()


# ---------------------------------------------------------------- langid

def numpy_probs(texts):
    seqs = [make_langid.encode_text(TOKENIZER, t) for t in texts]
    return make_langid.numpy_probs(str(LANGID / "1" / "model.onnx"), seqs)


def rest_probs(srv, texts):
    probs = []
    for i in range(0, len(texts), 32):  # max_batch_size
        chunk = texts[i:i + 32]
        doc = ok_json(infer_request(srv.url, "langid",
                                    [tensor("text", chunk, "BYTES", shape=[len(chunk), 1])]))
        (out,) = doc["outputs"]
        assert out["name"] == "probabilities" and out["shape"] == [len(chunk), 4]
        probs.append(np.array(out["data"], dtype=np.float64).reshape(len(chunk), 4))
    return np.concatenate(probs)


def raw_probs(srv, text):
    r = requests.post(srv.url + "/v2/models/langid/infer", data=text.encode("utf-8"),
                      headers={"Content-Type": "text/plain"})
    (out,) = ok_json(r)["outputs"]
    assert out["shape"] == [1, 4]
    return np.array(out["data"], dtype=np.float64)


@pytest.mark.parametrize("kind, floor", [("words", 0.84), ("phrases3", 0.97)])
def test_langid_accuracy_rest(srv, held_out, kind, floor):
    texts = [t for t, _ in held_out[kind]]
    labels = np.array([l for _, l in held_out[kind]])
    probs = rest_probs(srv, texts)
    np.testing.assert_allclose(probs, numpy_probs(texts), atol=1e-5)
    acc = float((probs.argmax(1) == labels).mean())
    print("langid %s: accuracy %.3f over %d" % (kind, acc, len(texts)))
    assert acc >= floor


def test_langid_grpc_and_raw_body(srv, held_out, tmp_path):
    pb, hpb = generate(tmp_path)
    client = Client(pb, hpb, "127.0.0.1:%d" % srv.grpc_port)
    texts = [t for t, _ in held_out["phrases3"][::10]] + ["good morning", "bonjour madame"]
    want = numpy_probs(texts)
    items = [t.encode("utf-8") for t in texts]
    try:
        for raw in (False, True):
            req = pb.ModelInferRequest(model_name="langid")
            t = req.inputs.add(name="text", datatype="BYTES", shape=[len(items), 1])
            if raw:
                req.raw_input_contents.append(join_bytes(items))
            else:
                t.contents.bytes_contents.extend(items)
            r = client.infer(req)
            assert [o.name for o in r.outputs] == ["probabilities"]
            assert list(r.outputs[0].shape) == [len(items), 4]
            got = np.frombuffer(r.raw_output_contents[0], dtype="<f4").reshape(len(items), 4)
            np.testing.assert_allclose(got, want, atol=1e-5)
    finally:
        client.close()
    for text, row in zip(texts[-4:], want[-4:]):
        np.testing.assert_allclose(raw_probs(srv, text), row, atol=1e-5)
    assert LABELS[int(np.argmax(raw_probs(srv, "the weather is nice today")))] == "en"
    assert LABELS[int(np.argmax(raw_probs(srv, "Das Wetter ist heute schön")))] == "de"


def stats(srv):
    doc = ok_json(requests.get(srv.url + "/v2/models/langid/stats"))
    (s,) = doc["model_stats"]
    return s["inference_count"], s["execution_count"]


def test_concurrent_texts_of_different_lengths_are_batched(srv, held_out):
    texts = [t for t, _ in held_out["words"][:48]] + [t for t, _ in held_out["phrases3"][:48]]
    alone = {t: raw_probs(srv, t) for t in texts}
    inf0, exe0 = stats(srv)
    results, errors = {}, []

    def worker(chunk):
        try:
            for t in chunk:
                results[t] = raw_probs(srv, t)
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(texts[i::16],)) for i in range(16)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    inf1, exe1 = stats(srv)
    assert inf1 - inf0 == len(texts)
    print("%d requests in %d executions" % (inf1 - inf0, exe1 - exe0))
    assert exe1 - exe0 < inf1 - inf0
    lengths = {len(make_langid.encode_text(TOKENIZER, t)) for t in texts}
    assert len(lengths) > 3
    for t in texts:
        np.testing.assert_allclose(results[t], alone[t], atol=1e-6)
