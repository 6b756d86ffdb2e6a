"""Triton's classification extension: an output requested with
"classification": k comes back as a BYTES tensor of each batch row's top k
classes, "value:index[:label]" (docs/api.md#classification). Checked over
REST JSON, REST binary tensor data and gRPC (Debian's python3-grpcio)
against the digits model's own probabilities, ranked by numpy.

Debian packages no Triton client (no python3-tritonclient), so the
expectations are built here from Triton's documented format and its
server's code (std::to_string of the value, i.e. "%f")."""
import json
import time
from multiprocessing import shared_memory

import grpc
import numpy as np
import pytest
import requests

from conftest import (REPO_ROOT, assert_error_response, bytes_infer_request, infer_request,
                      ok_json)
from grpc_client import Client, generate, split_bytes

DIGITS = REPO_ROOT / "models" / "digits"
SAMPLE = json.loads((DIGITS / "sample.json").read_text())["inputs"][0]["data"]
LABELS = (DIGITS / "labels.txt").read_text().splitlines()


def images():
    """Three rows of `pixels`: the sample, its mirror image, a blank one."""
    a = np.array(SAMPLE, dtype=np.float32).reshape(8, 8)
    return np.stack([a.ravel(), a[:, ::-1].ravel(), np.zeros(64, np.float32)])


def pixels_input(x):
    return [{"name": "pixels", "datatype": "FP32", "shape": list(x.shape),
             "data": x.ravel().tolist()}]


def probabilities(server, x):
    """The model's plain output for the same rows, as float32."""
    body = ok_json(infer_request(server.url, "digits", pixels_input(x), outputs=["probabilities"]))
    out = body["outputs"][0]
    return np.array(out["data"], dtype=np.float32).reshape(out["shape"])


def expected(probs, k, labels=LABELS):
    """Triton's strings for each row: top k by value (ties: lower index)."""
    rows = []
    for p in probs:
        order = np.argsort(-p.astype(np.float64), kind="stable")[:k]
        rows.append(["%f:%d:%s" % (float(p[i]), i, labels[i]) if labels else
                     "%f:%d" % (float(p[i]), i) for i in order])
    return rows


def classify(server, x, k, output="probabilities", **params):
    return infer_request(server.url, "digits", pixels_input(x),
                         outputs=[{"name": output,
                                   "parameters": dict({"classification": k}, **params)}])


def test_listed_in_server_metadata(server, pbs):
    assert "classification" in ok_json(requests.get(server.url + "/v2", timeout=10))["extensions"]
    c = Client(*pbs, "127.0.0.1:%d" % server.grpc_port)
    try:
        assert "classification" in c.call("ServerMetadata").extensions
    finally:
        c.close()


def test_digits_config_names_the_labels(server):
    cfg = ok_json(requests.get(server.url + "/v2/models/digits/config", timeout=10))
    out = {o["name"]: o for o in cfg["output"]}
    assert out["probabilities"]["label_filename"] == "labels.txt"
    assert out["label"]["label_filename"] == ""
    # Listing the output only for its labels keeps the ONNX-derived batching.
    assert cfg["max_batch_size"] == 64
    assert cfg["dynamic_batching"]["max_queue_delay_microseconds"] == 0
    assert LABELS == [str(i) for i in range(10)]


@pytest.mark.parametrize("k", [1, 3, 10])
def test_rest_json_top_k_matches_numpy(server, k):
    x = images()
    probs = probabilities(server, x)
    out = ok_json(classify(server, x, k))["outputs"]
    assert len(out) == 1
    assert out[0]["name"] == "probabilities"
    assert out[0]["datatype"] == "BYTES"
    assert out[0]["shape"] == [3, k]
    got = np.array(out[0]["data"]).reshape(3, k).tolist()
    assert got == expected(probs, k)
    # The sample's true digit is 2 (models/README.md).
    assert got[0][0].endswith(":2:2")


def test_k_beyond_the_classes_is_clamped(server):
    x = images()[:2]
    out = ok_json(classify(server, x, 1000))["outputs"][0]
    assert out["shape"] == [2, 10]
    assert np.array(out["data"]).reshape(2, 10).tolist() == expected(probabilities(server, x), 10)


@pytest.mark.parametrize("k", [0, -1, 2.5, "3", True])
def test_k_not_a_positive_integer_is_400(server, k):
    msg = assert_error_response(classify(server, images()[:1], k), 400)
    assert "output 'probabilities': parameter 'classification' must be a positive integer" in msg


def test_output_without_labels_gives_value_and_index(server):
    """`label` (INT64 [batch]) has no label file: one class per row, its
    value formatted as an integer."""
    x = images()
    plain = ok_json(infer_request(server.url, "digits", pixels_input(x), outputs=["label"]))
    labels = plain["outputs"][0]["data"]
    out = ok_json(classify(server, x, 5, output="label"))["outputs"][0]
    assert out["datatype"] == "BYTES"
    assert out["shape"] == [3, 1]
    assert out["data"] == ["%d:0" % v for v in labels]


def test_only_the_classified_output_changes(server):
    x = images()
    probs = probabilities(server, x)
    body = ok_json(infer_request(server.url, "digits", pixels_input(x), outputs=[
        {"name": "label"}, {"name": "probabilities", "parameters": {"classification": 2}}]))
    label, cls = body["outputs"]
    assert label["datatype"] == "INT64" and label["shape"] == [3]
    assert label["data"] == np.argmax(probs, axis=1).tolist()
    assert cls["datatype"] == "BYTES"
    assert np.array(cls["data"]).reshape(3, 2).tolist() == expected(probs, 2)


def test_rest_binary_output(server):
    x = images()
    probs = probabilities(server, x)
    r = classify(server, x, 4, binary_data=True)
    assert r.status_code == 200, r.text
    n = int(r.headers["Inference-Header-Content-Length"])
    head = json.loads(r.content[:n])
    out = head["outputs"][0]
    assert out["datatype"] == "BYTES"
    assert out["shape"] == [3, 4]
    size = out["parameters"]["binary_data_size"]
    raw = r.content[n:]
    assert len(raw) == size
    got = [b.decode() for b in split_bytes(raw)]
    assert np.array(got).reshape(3, 4).tolist() == expected(probs, 4)
    # binary_data_output at the request level does the same.
    body = {"inputs": pixels_input(x), "parameters": {"binary_data_output": True},
            "outputs": [{"name": "probabilities", "parameters": {"classification": 4}}]}
    r2 = requests.post(server.url + "/v2/models/digits/infer", json=body, timeout=30)
    assert r2.status_code == 200
    assert r2.content[int(r2.headers["Inference-Header-Content-Length"]):] == raw


def test_preprocessed_picture(server):
    """digits read from a picture (its preprocess.json): the classes of the
    preprocessed request are those of its own probabilities."""
    png = (DIGITS / "sample_7.png").read_bytes()
    plain = ok_json(bytes_infer_request(server.url, "digits", "image", [png, png],
                                        outputs=["probabilities"]))["outputs"][0]
    probs = np.array(plain["data"], dtype=np.float32).reshape(plain["shape"])
    r = bytes_infer_request(server.url, "digits", "image", [png, png], outputs=[
        {"name": "probabilities", "parameters": {"classification": 2}}])
    out = ok_json(r)["outputs"][0]
    assert out["shape"] == [2, 2]
    got = np.array(out["data"]).reshape(2, 2).tolist()
    assert got == expected(probs, 2)
    assert got[0][0].endswith(":7:7")


@pytest.fixture(scope="module")
def pbs(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("proto_py"))


@pytest.fixture
def gclient(server, pbs):
    c = Client(*pbs, "127.0.0.1:%d" % server.grpc_port)
    yield c
    c.close()


def grpc_request(pb, x, k, output="probabilities"):
    req = pb.ModelInferRequest(model_name="digits")
    t = req.inputs.add(name="pixels", datatype="FP32", shape=list(x.shape))
    t.contents.fp32_contents.extend(x.ravel().tolist())
    o = req.outputs.add(name=output)
    if k is not None:
        o.parameters["classification"].int64_param = k
    return req


def test_grpc_top_k_matches_numpy(server, pbs, gclient):
    pb = pbs[0]
    x = images()
    plain = gclient.infer(grpc_request(pb, x, None))
    probs = np.frombuffer(plain.raw_output_contents[0], dtype="<f4").reshape(3, 10)
    assert np.array_equal(probs, probabilities(server, x))
    r = gclient.infer(grpc_request(pb, x, 3))
    assert r.outputs[0].name == "probabilities"
    assert r.outputs[0].datatype == "BYTES"
    assert list(r.outputs[0].shape) == [3, 3]
    got = [b.decode() for b in split_bytes(r.raw_output_contents[0])]
    assert np.array(got).reshape(3, 3).tolist() == expected(probs, 3)
    r = gclient.infer(grpc_request(pb, x[:1], 50))
    assert list(r.outputs[0].shape) == [1, 10]


@pytest.mark.parametrize("k", [0, -4])
def test_grpc_k_not_positive_is_invalid_argument(pbs, gclient, k):
    with pytest.raises(grpc.RpcError) as e:
        gclient.infer(grpc_request(pbs[0], images()[:1], k))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "parameter 'classification' must be a positive int64_param" in e.value.details()


@pytest.mark.parametrize("datatype,values,want", [
    ("INT32", [5, -7, 9, 9], ["9:2", "9:3", "5:0"]),
    ("UINT8", [0, 255, 3, 4], ["255:1", "4:3", "3:2"]),
    ("FP64", [0.5, -1.25, 2.0, 0.0], ["2.000000:2", "0.500000:0", "0.000000:3"]),
    ("FP16", [0.5, 1.5, -2.0, 0.25], ["1.500000:1", "0.500000:0", "0.250000:3"]),
])
def test_other_numeric_types(server, datatype, values, want):
    """The identity models echo their input: [1, 4] is one row of 4."""
    model = "identity_" + datatype.lower()
    r = infer_request(server.url, model,
                      [{"name": "INPUT0", "datatype": datatype, "shape": [1, 4], "data": values}],
                      outputs=[{"name": "OUTPUT0", "parameters": {"classification": 3}}])
    out = ok_json(r)["outputs"][0]
    assert out["datatype"] == "BYTES"
    assert out["shape"] == [1, 3]
    assert out["data"] == want


@pytest.mark.parametrize("datatype,values", [("BOOL", [True, False]), ("BYTES", ["a", "b"])])
def test_non_numeric_output_is_400(server, datatype, values):
    model = "identity_" + datatype.lower()
    r = infer_request(server.url, model,
                      [{"name": "INPUT0", "datatype": datatype, "shape": [1, 2], "data": values}],
                      outputs=[{"name": "OUTPUT0", "parameters": {"classification": 1}}])
    msg = assert_error_response(r, 400)
    assert "output 'OUTPUT0': classification needs a numeric output" in msg
    assert datatype in msg


def test_shared_memory_output_is_400(server):
    m = shared_memory.SharedMemory(create=True, size=64)
    try:
        r = requests.post(server.url + "/v2/systemsharedmemory/region/cls/register",
                          json={"key": "/" + m.name, "byte_size": 64}, timeout=10)
        assert r.status_code == 200, r.text
        ints = list(range(16))
        r = infer_request(server.url, "simple", [
            {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16], "data": ints},
            {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16], "data": ints}],
            outputs=[{"name": "OUTPUT0", "parameters": {
                "classification": 2, "shared_memory_region": "cls",
                "shared_memory_byte_size": 64}}])
        msg = assert_error_response(r, 400)
        assert "output 'OUTPUT0': classification cannot be written to shared memory" in msg
    finally:
        requests.post(server.url + "/v2/systemsharedmemory/region/cls/unregister", timeout=10)
        m.close()
        m.unlink()


def digits_repo(server_factory, config, labels=None):
    repo = server_factory.repository({"digits": {1: DIGITS / "1" / "model.onnx"}})
    (repo / "digits" / "config.pbtxt").write_text(config)
    if labels is not None:
        (repo / "digits" / "names.txt").write_bytes(labels)
    return repo


def model_reason(srv, name):
    r = requests.post(srv.url + "/v2/repository/index", json={}, timeout=10)
    for m in ok_json(r):
        if m["name"] == name:
            return m.get("state"), m.get("reason", "")
    return None, ""


OUTPUT_CONFIG = 'output [{ name: "probabilities" label_filename: "%s" }]\n'


def test_own_label_file_crlf_and_short(server_factory):
    """Labels from another file: CRLF line ends dropped, indices past the
    last line and empty lines have no label."""
    repo = digits_repo(server_factory, OUTPUT_CONFIG % "names.txt",
                       b"zero\r\none\r\n\r\nthree\r\n")
    srv = server_factory.start(repository=repo)
    x = images()
    probs = probabilities(srv, x)
    out = ok_json(classify(srv, x, 10))["outputs"][0]
    names = ["zero", "one", "", "three"]
    want = [["%f:%d" % (float(p[i]), i) + (":" + names[i] if i < 4 and names[i] else "")
             for i in np.argsort(-p.astype(np.float64), kind="stable")] for p in probs]
    assert np.array(out["data"]).reshape(3, 10).tolist() == want


@pytest.mark.parametrize("name,needle", [
    ("missing.txt", "cannot read label file"),
    ("../digits/names.txt", "must be a relative path inside the model directory"),
])
def test_bad_label_file_fails_the_load(server_factory, name, needle):
    repo = digits_repo(server_factory, OUTPUT_CONFIG % name, b"a\nb\n")
    srv = server_factory.start(repository=repo, wait=False)
    srv.wait_ready(path="/v2/health/live")
    deadline = time.monotonic() + 30
    state, reason = model_reason(srv, "digits")
    while state not in ("UNAVAILABLE", "READY") and time.monotonic() < deadline:
        time.sleep(0.1)
        state, reason = model_reason(srv, "digits")
    assert state == "UNAVAILABLE"
    assert "output 'probabilities'" in reason and needle in reason, reason
