"""Triton's binary tensor data extension, end to end.

A request body is a JSON header of Inference-Header-Content-Length bytes
followed by the raw tensors of the inputs that carry
parameters.binary_data_size; a response with binary outputs is split the same
way. The encoder and decoder below are written from the protocol description
(numpy tobytes/frombuffer, struct for BYTES length prefixes) and share no
code with the server.
"""
import gzip
import json
import struct
import zlib

import numpy as np
import pytest
import requests

from conftest import (IDENTITY_TYPES, REPO_ROOT, assert_error, assert_error_response,
                      http_request, infer_request, ok_json, parse_responses, raw_http)

HEADER = "Inference-Header-Content-Length"

NUMPY = {
    "BOOL": np.bool_, "UINT8": np.uint8, "UINT16": np.uint16, "UINT32": np.uint32,
    "UINT64": np.uint64, "INT8": np.int8, "INT16": np.int16, "INT32": np.int32,
    "INT64": np.int64, "FP16": np.float16, "FP32": np.float32, "FP64": np.float64,
}


# --------------------------------------------------------------------------
# An independent encoder/decoder for the binary format


def tensor_bytes(datatype, values):
    """Raw little-endian row-major bytes of `values` (numpy array or list)."""
    if datatype == "BYTES":
        return b"".join(struct.pack("<I", len(v)) + v for v in values)
    arr = np.asarray(values, dtype=np.dtype(NUMPY[datatype]).newbyteorder("<"))
    return np.ascontiguousarray(arr).tobytes()


def tensor_from_bytes(datatype, shape, raw):
    """Inverse of tensor_bytes: a numpy array, or a list of bytes for BYTES."""
    count = int(np.prod(shape)) if shape else 1
    if datatype == "BYTES":
        out, off = [], 0
        for _ in range(count):
            (n,) = struct.unpack_from("<I", raw, off)
            out.append(raw[off + 4:off + 4 + n])
            off += 4 + n
        assert off == len(raw), "BYTES data: %d bytes, %d used" % (len(raw), off)
        return out
    arr = np.frombuffer(raw, dtype=np.dtype(NUMPY[datatype]).newbyteorder("<"))
    assert arr.size == count, (arr.size, shape)
    return arr.reshape(shape)


def binary_body(inputs, outputs=None, parameters=None, pad=0, trailing=b""):
    """Build (body, header_len). `inputs` are dicts name/datatype/shape and
    either "data" (sent as JSON) or "raw" (bytes sent as binary data).
    `pad` spaces after the JSON move the binary part's offset."""
    doc, blob = {"inputs": []}, b""
    for inp in inputs:
        t = {"name": inp["name"], "datatype": inp["datatype"], "shape": list(inp["shape"])}
        if "raw" in inp:
            t["parameters"] = dict(inp.get("parameters", {}), binary_data_size=len(inp["raw"]))
            blob += inp["raw"]
        else:
            t["data"] = inp["data"]
            if "parameters" in inp:
                t["parameters"] = inp["parameters"]
        doc["inputs"].append(t)
    if outputs is not None:
        doc["outputs"] = outputs
    if parameters is not None:
        doc["parameters"] = parameters
    header = json.dumps(doc).encode() + b" " * pad
    return header + blob + trailing, len(header)


def post(base_url, model, body, header_len=None, headers=None):
    h = {"Content-Type": "application/octet-stream"}
    if header_len is not None:
        h[HEADER] = str(header_len)
    h.update(headers or {})
    return requests.post("%s/v2/models/%s/infer" % (base_url, model), data=body, headers=h,
                         timeout=30)


def split_response(r):
    """Check a binary response and return (json doc, {output name: raw bytes})."""
    assert r.status_code == 200, "HTTP %d: %s" % (r.status_code, r.content[:2000])
    assert r.headers["Content-Type"] == "application/octet-stream"
    n = int(r.headers[HEADER])
    assert int(r.headers["Content-Length"]) == len(r.content)
    assert 0 < n <= len(r.content)
    doc = json.loads(r.content[:n])
    raw, off = {}, n
    for out in doc["outputs"]:
        size = out.get("parameters", {}).get("binary_data_size")
        if size is None:
            assert "data" in out, out
            continue
        assert "data" not in out, out
        raw[out["name"]] = r.content[off:off + size]
        off += size
    assert off == len(r.content), "binary part: %d bytes, outputs claim %d" % (
        len(r.content) - n, off - n)
    return doc, raw


def outputs_by_name(doc):
    return {o["name"]: o for o in doc["outputs"]}


# --------------------------------------------------------------------------
# Values per datatype: JSON-representable ones for comparing with the JSON
# path, plus bit patterns only the binary form can carry.

def identity_values(datatype):
    rng = np.random.default_rng(zlib.crc32(datatype.encode()))
    if datatype == "BOOL":
        return rng.integers(0, 2, size=(2, 5)).astype(np.bool_)
    if datatype == "BYTES":
        return [b"", b"a", "h\u00e9llo \U0001F642".encode(), b"x" * 300, b"tab\tnl\n", b"\"q\""]
    npt = NUMPY[datatype]
    if np.issubdtype(npt, np.integer):
        info = np.iinfo(npt)
        vals = rng.integers(info.min, info.max, size=(2, 7), dtype=npt, endpoint=True)
        vals[0, 0], vals[0, 1] = info.min, info.max
        return vals
    vals = rng.standard_normal((2, 7)).astype(npt)
    vals[0, :3] = [0.0, -0.0, np.finfo(npt).max]
    vals[1, 0] = np.finfo(npt).tiny
    return vals


def binary_only_values(datatype):
    """Values JSON cannot carry exactly: NaN payloads, infinities, bad UTF-8."""
    if datatype == "BYTES":
        return [b"\xff\xfe\x00", b"\x00" * 7, bytes(range(256))]
    if datatype in ("FP16", "FP32", "FP64"):
        npt = NUMPY[datatype]
        bits = {"FP16": (np.uint16, [0x7e01, 0xfc00, 0x7c00, 0x0001]),
                "FP32": (np.uint32, [0x7fc00123, 0xff800000, 0x7f800000, 0x00000001]),
                "FP64": (np.uint64, [0x7ff8000000000abc, 0xfff0000000000000,
                                     0x7ff0000000000000, 0x1])}[datatype]
        return np.array(bits[1], dtype=bits[0]).view(npt).reshape(1, 4)
    return None


def json_data(datatype, values):
    if datatype == "BYTES":
        return [v.decode("utf-8") for v in values]
    return np.asarray(values).reshape(-1).tolist()


def shape_of(datatype, values):
    return [1, len(values)] if datatype == "BYTES" else list(np.asarray(values).shape)


# --------------------------------------------------------------------------
# Round trips


def test_server_advertises_extension(base_url):
    doc = requests.get(base_url + "/v2", timeout=10).json()
    assert "binary_tensor_data" in doc["extensions"]


@pytest.mark.parametrize("datatype", [t.upper() for t in IDENTITY_TYPES])
def test_identity_binary_round_trip_matches_json(base_url, datatype):
    model = "identity_" + datatype.lower()
    values = identity_values(datatype)
    shape = shape_of(datatype, values)
    raw = tensor_bytes(datatype, values)
    body, n = binary_body([{"name": "INPUT0", "datatype": datatype, "shape": shape, "raw": raw}],
                          parameters={"binary_data_output": True})
    doc, out = split_response(post(base_url, model, body, n))
    o = doc["outputs"][0]
    assert (o["name"], o["datatype"], o["shape"]) == ("OUTPUT0", datatype, shape)
    assert o["parameters"] == {"binary_data_size": len(raw)}
    assert out["OUTPUT0"] == raw  # byte for byte

    # The JSON path gives the same tensor.
    j = ok_json(infer_request(base_url, model, [{"name": "INPUT0", "datatype": datatype,
                                                 "shape": shape,
                                                 "data": json_data(datatype, values)}]))
    jo = j["outputs"][0]
    assert jo["shape"] == shape
    if datatype == "BYTES":
        assert [s.encode() for s in jo["data"]] == tensor_from_bytes(datatype, shape, out["OUTPUT0"])
    else:
        from_json = np.array(jo["data"], dtype=np.float64 if datatype.startswith("FP")
                             else NUMPY[datatype]).astype(NUMPY[datatype]).reshape(shape)
        assert from_json.tobytes() == tensor_from_bytes(datatype, shape, out["OUTPUT0"]).tobytes()


@pytest.mark.parametrize("datatype", ["FP16", "FP32", "FP64", "BYTES"])
def test_identity_binary_carries_what_json_cannot(base_url, datatype):
    values = binary_only_values(datatype)
    shape = shape_of(datatype, values)
    raw = tensor_bytes(datatype, values)
    body, n = binary_body([{"name": "INPUT0", "datatype": datatype, "shape": shape, "raw": raw}],
                          outputs=[{"name": "OUTPUT0", "parameters": {"binary_data": True}}])
    _, out = split_response(post(base_url, "identity_" + datatype.lower(), body, n))
    assert out["OUTPUT0"] == raw


@pytest.mark.parametrize("pad", range(8))
def test_any_alignment_of_binary_data(base_url, pad):
    """The binary part may start at any offset (in place or copied)."""
    values = np.arange(-7, 9, dtype=np.float64).reshape(2, 8) / 3
    raw = tensor_bytes("FP64", values)
    body, n = binary_body([{"name": "INPUT0", "datatype": "FP64", "shape": [2, 8], "raw": raw}],
                          parameters={"binary_data_output": True}, pad=pad)
    _, out = split_response(post(base_url, "identity_fp64", body, n))
    assert out["OUTPUT0"] == raw


def test_large_binary_tensor(base_url):
    values = np.random.default_rng(3).standard_normal((4, 250000)).astype(np.float32)
    raw = tensor_bytes("FP32", values)
    body, n = binary_body([{"name": "INPUT0", "datatype": "FP32", "shape": [4, 250000],
                            "raw": raw}], parameters={"binary_data_output": True}, pad=1)
    _, out = split_response(post(base_url, "identity_fp32", body, n))
    assert out["OUTPUT0"] == raw


def test_chunked_binary_request(base_url):
    raw = tensor_bytes("INT16", np.arange(12, dtype=np.int16).reshape(3, 4))
    body, n = binary_body([{"name": "INPUT0", "datatype": "INT16", "shape": [3, 4], "raw": raw}],
                          parameters={"binary_data_output": True})
    chunks = iter([body[:5], body[5:n + 3], body[n + 3:]])
    r = requests.post(base_url + "/v2/models/identity_int16/infer", data=chunks,
                      headers={HEADER: str(n)}, timeout=30)
    _, out = split_response(r)
    assert out["OUTPUT0"] == raw


# --------------------------------------------------------------------------
# simple: mixed JSON and binary, per-output flags

A = np.arange(16, dtype=np.int32).reshape(1, 16)
B = np.full((1, 16), -3, dtype=np.int32)


def simple_inputs(binary0=False, binary1=True):
    def one(name, arr, binary):
        t = {"name": name, "datatype": "INT32", "shape": [1, 16]}
        if binary:
            t["raw"] = tensor_bytes("INT32", arr)
        else:
            t["data"] = arr.reshape(-1).tolist()
        return t
    return [one("INPUT0", A, binary0), one("INPUT1", B, binary1)]


def test_simple_mixed_json_and_binary_inputs(base_url):
    for b0, b1 in [(False, True), (True, False), (True, True)]:
        body, n = binary_body(simple_inputs(b0, b1), parameters={"binary_data_output": True})
        doc, out = split_response(post(base_url, "simple", body, n))
        assert [o["name"] for o in doc["outputs"]] == ["OUTPUT0", "OUTPUT1"]
        assert np.array_equal(tensor_from_bytes("INT32", [1, 16], out["OUTPUT0"]), A + B)
        assert np.array_equal(tensor_from_bytes("INT32", [1, 16], out["OUTPUT1"]), A - B)


def test_compressed_request_bodies(base_url, server_factory):
    """Content-Encoding gzip or deflate (zlib, or raw DEFLATE): the body is
    decompressed first, Inference-Header-Content-Length counting the
    decompressed bytes, as Triton's clients send it
    (--request-compression-algorithm). Refusals: an unknown coding 415,
    bad data 400, a body past --max-body-bytes once decompressed 413."""
    body, n = binary_body(simple_inputs(True, True), parameters={"binary_data_output": True})
    for enc, pack in (("gzip", gzip.compress), ("deflate", zlib.compress),
                      ("deflate", lambda b: zlib.compress(b)[2:-4]), ("identity", bytes)):
        doc, out = split_response(post(base_url, "simple", pack(body), n,
                                       headers={"Content-Encoding": enc}))
        assert np.array_equal(tensor_from_bytes("INT32", [1, 16], out["OUTPUT0"]), A + B), enc
    json_body = json.dumps({"inputs": [dict(t, data=t["data"]) for t in
                                       [{"name": "INPUT0", "datatype": "INT32", "shape": [1, 16],
                                         "data": A.reshape(-1).tolist()},
                                        {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16],
                                         "data": B.reshape(-1).tolist()}]]}).encode()
    r = post(base_url, "simple", gzip.compress(json_body), headers={"Content-Encoding": "GZIP"})
    assert r.status_code == 200, r.text
    assert r.json()["outputs"][0]["data"] == (A + B).reshape(-1).tolist()
    def refused(url, data, enc, status, says):
        r = post(url, "simple", data, headers={"Content-Encoding": enc})
        assert_error_response(r, status)
        assert says in r.json()["error"], r.text

    refused(base_url, json_body, "br", 415,
            "Content-Encoding 'br' is not supported (gzip, deflate and identity are)")
    refused(base_url, b"junk", "gzip", 400, "not valid gzip data")
    refused(base_url, gzip.compress(json_body)[:30], "gzip", 400, "ends too early")
    small = server_factory.start("--max-body-bytes", "100000")
    refused(small.url, gzip.compress(b" " * 200000), "gzip", 413,
            "the request body is larger than 100000 bytes once decompressed (--max-body-bytes)")


def test_simple_per_output_flags(base_url):
    # Request-level true, overridden to JSON for OUTPUT0; binary part in request order.
    body, n = binary_body(simple_inputs(),
                          outputs=[{"name": "OUTPUT1"},
                                   {"name": "OUTPUT0", "parameters": {"binary_data": False}}],
                          parameters={"binary_data_output": True})
    doc, out = split_response(post(base_url, "simple", body, n))
    outs = doc["outputs"]
    assert [o["name"] for o in outs] == ["OUTPUT1", "OUTPUT0"]
    assert outs[0]["parameters"] == {"binary_data_size": 64} and "data" not in outs[0]
    assert outs[1]["data"] == (A + B).reshape(-1).tolist() and "parameters" not in outs[1]
    assert list(out) == ["OUTPUT1"]
    assert np.array_equal(tensor_from_bytes("INT32", [1, 16], out["OUTPUT1"]), A - B)

    # Per-output true without the request-level parameter.
    body, n = binary_body(simple_inputs(), outputs=[
        {"name": "OUTPUT0", "parameters": {"binary_data": True}}, {"name": "OUTPUT1"}])
    doc, out = split_response(post(base_url, "simple", body, n))
    assert list(out) == ["OUTPUT0"]
    assert outputs_by_name(doc)["OUTPUT1"]["data"] == (A - B).reshape(-1).tolist()


@pytest.mark.parametrize("parameters,outputs", [
    (None, None),
    ({"binary_data_output": False}, None),
    (None, [{"name": "OUTPUT0", "parameters": {"binary_data": False}}]),
    ({"binary_data_output": True}, [{"name": "OUTPUT0", "parameters": {"binary_data": False}},
                                    {"name": "OUTPUT1", "parameters": {"binary_data": False}}]),
])
def test_no_binary_output_is_plain_json(base_url, parameters, outputs):
    """Binary inputs with JSON outputs: an ordinary JSON response."""
    body, n = binary_body(simple_inputs(True, True), outputs=outputs, parameters=parameters)
    r = post(base_url, "simple", body, n)
    doc = ok_json(r)
    assert HEADER.lower() not in {k.lower() for k in r.headers}
    assert outputs_by_name(doc)["OUTPUT0"]["data"] == (A + B).reshape(-1).tolist()


def test_json_request_with_binary_output(base_url):
    """A plain JSON request (no header) may ask for binary outputs."""
    r = infer_request(base_url, "simple", [
        {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16], "data": A.reshape(-1).tolist()},
        {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16], "data": B.reshape(-1).tolist()}],
        parameters={"binary_data_output": True}, id="j1")
    doc, out = split_response(r)
    assert doc["id"] == "j1"
    assert np.array_equal(tensor_from_bytes("INT32", [1, 16], out["OUTPUT0"]), A + B)


def test_header_splits_response_exactly(base_url):
    body, n = binary_body(simple_inputs(), parameters={"binary_data_output": True})
    r = post(base_url, "simple", body, n)
    hl = int(r.headers[HEADER])
    head, tail = r.content[:hl], r.content[hl:]
    doc = json.loads(head)  # exactly one JSON document, nothing after it
    assert head.rstrip().endswith(b"}")
    assert len(tail) == sum(o["parameters"]["binary_data_size"] for o in doc["outputs"]) == 128
    assert tail == tensor_bytes("INT32", A + B) + tensor_bytes("INT32", A - B)


def test_binary_with_batching_of_several_samples(base_url):
    a = np.arange(48, dtype=np.int32).reshape(3, 16)
    b = np.ones((3, 16), dtype=np.int32)
    body, n = binary_body([
        {"name": "INPUT0", "datatype": "INT32", "shape": [3, 16], "raw": tensor_bytes("INT32", a)},
        {"name": "INPUT1", "datatype": "INT32", "shape": [3, 16], "raw": tensor_bytes("INT32", b)}],
        parameters={"binary_data_output": True}, pad=3)
    doc, out = split_response(post(base_url, "simple", body, n))
    assert outputs_by_name(doc)["OUTPUT0"]["shape"] == [3, 16]
    assert np.array_equal(tensor_from_bytes("INT32", [3, 16], out["OUTPUT0"]), a + b)


# --------------------------------------------------------------------------
# digits: binary and JSON give the same probabilities


def digits_pixels():
    doc = json.loads((REPO_ROOT / "models" / "digits" / "sample.json").read_text())
    return np.array(doc["inputs"][0]["data"], dtype=np.float32).reshape(1, 64)


def test_digits_binary_matches_json(base_url):
    pixels = digits_pixels()
    j = ok_json(infer_request(base_url, "digits", [
        {"name": "pixels", "datatype": "FP32", "shape": [1, 64],
         "data": pixels.reshape(-1).tolist()}]))
    jp = np.array(outputs_by_name(j)["probabilities"]["data"], dtype=np.float32)
    jl = outputs_by_name(j)["label"]["data"]

    body, n = binary_body([{"name": "pixels", "datatype": "FP32", "shape": [1, 64],
                            "raw": tensor_bytes("FP32", pixels)}],
                          parameters={"binary_data_output": True})
    doc, out = split_response(post(base_url, "digits", body, n))
    bp = tensor_from_bytes("FP32", [1, 10], out["probabilities"]).reshape(-1)
    assert bp.tobytes() == jp.tobytes()
    assert tensor_from_bytes("INT64", [1], out["label"]).tolist() == jl == [2]


# --------------------------------------------------------------------------
# Inference-Header-Content-Length: 0 (raw binary request)


def test_raw_request_digits(base_url):
    pixels = digits_pixels()
    doc, out = split_response(post(base_url, "digits", tensor_bytes("FP32", pixels), 0))
    outs = outputs_by_name(doc)
    assert outs["probabilities"]["shape"] == [1, 10] and outs["label"]["shape"] == [1]
    assert tensor_from_bytes("INT64", [1], out["label"]).tolist() == [2]
    j = ok_json(infer_request(base_url, "digits", [
        {"name": "pixels", "datatype": "FP32", "shape": [1, 64],
         "data": pixels.reshape(-1).tolist()}]))
    assert out["probabilities"] == tensor_bytes(
        "FP32", outputs_by_name(j)["probabilities"]["data"])


def test_raw_request_strings(base_url):
    """BYTES: the whole body is the one element (no length prefix)."""
    text = "h\u00e9llo raw w\u00f6rld".encode()
    doc, out = split_response(post(base_url, "strings", text, 0))
    assert [o["name"] for o in doc["outputs"]] == ["UPPER", "ECHO"]
    assert tensor_from_bytes("BYTES", [1], out["ECHO"]) == [text]
    assert tensor_from_bytes("BYTES", [1], out["UPPER"]) == ["H\u00c9LLO RAW W\u00d6RLD".encode()]


@pytest.mark.parametrize("datatype", ["UINT8", "INT32", "FP16", "FP64", "BOOL"])
def test_raw_request_identity_deduces_the_variable_dim(base_url, datatype):
    """identity models are [batch, n]: batch 1, n from the body length."""
    values = identity_values(datatype).reshape(-1)
    raw = tensor_bytes(datatype, values)
    doc, out = split_response(post(base_url, "identity_" + datatype.lower(), raw, 0))
    assert doc["outputs"][0]["shape"] == [1, len(values)]
    assert out["OUTPUT0"] == raw


# --------------------------------------------------------------------------
# Errors: 400 with a JSON error body

def simple_error_bodies():
    good = simple_inputs(True, True)
    raw = tensor_bytes("INT32", A)

    def body(inputs, **kw):
        return binary_body(inputs, **kw)

    short = [dict(good[0], raw=raw[:-4]), good[1]]
    yield "size-not-count-times-dtype", "simple", *body(short), \
        "binary_data_size is 60 bytes, shape [1,16] of INT32 needs 64"
    b, n = body(good)
    yield "trailing-bytes", "simple", b + b"xx", n, "2 bytes after the JSON header are not claimed"
    yield "size-beyond-body", "simple", b[:-10], n, "exceeds the 54 bytes of binary data left"
    yield "header-beyond-body", "simple", b, len(b) + 1, "exceeds the body length"
    yield "header-cuts-json", "simple", b, n - 5, "malformed JSON"
    yield "header-not-numeric", "simple", b, "12a", "Inference-Header-Content-Length must be"
    yield "header-negative", "simple", b, "-1", "Inference-Header-Content-Length must be"
    yield "header-plus", "simple", b, "+%d" % n, "Inference-Header-Content-Length must be"
    yield "header-float", "simple", b, "%d.0" % n, "Inference-Header-Content-Length must be"
    yield "header-huge", "simple", b, "9" * 30, "exceeds the body length"
    yield "binary-without-header", "simple", b[:n], None, \
        "needs the Inference-Header-Content-Length"
    doc = json.loads(b[:n])
    doc["inputs"][0]["data"] = A.reshape(-1).tolist()
    hb = json.dumps(doc).encode()
    yield "data-and-binary", "simple", hb + raw + raw, len(hb), \
        "Input must set only one of the following fields: 'data', 'binary_data_size' in " \
        "'parameters', 'shared_memory_region' in 'parameters'. But set 'data' 'binary_data_size'"
    doc = json.loads(b[:n])
    doc["inputs"][0]["parameters"]["binary_data_size"] = "64"
    hb = json.dumps(doc).encode()
    yield "size-not-integer", "simple", hb + raw + raw, len(hb), \
        "'binary_data_size' must be a non-negative integer"
    b2, n2 = body(good, outputs=[{"name": "OUTPUT0", "parameters": {"binary_data": 1}}])
    yield "binary-data-not-bool", "simple", b2, n2, \
        "parameter 'binary_data' must be true or false"
    b2, n2 = body(good, parameters={"binary_data_output": "true"})
    yield "binary-output-not-bool", "simple", b2, n2, \
        "parameter 'binary_data_output' must be true or false"
    sb = tensor_bytes("BYTES", [b"abc", b"de"])
    bad = sb[:-1]
    b2, n2 = body([{"name": "INPUT0", "datatype": "BYTES", "shape": [1, 2], "raw": bad}])
    yield "bytes-truncated", "identity_bytes", b2, n2, \
        "BYTES element 1 has length 2 but only 1 bytes are left"
    b2, n2 = body([{"name": "INPUT0", "datatype": "BYTES", "shape": [1, 2], "raw": sb[:9]}])
    yield "bytes-prefix-truncated", "identity_bytes", b2, n2, \
        "BYTES element 1 is truncated: 2 bytes left for its 4-byte length"
    b2, n2 = body([{"name": "INPUT0", "datatype": "BYTES", "shape": [1, 1], "raw": sb}])
    yield "bytes-left-over", "identity_bytes", b2, n2, "are left after the 1 BYTES elements"
    b2, n2 = body([{"name": "INPUT0", "datatype": "BOOL", "shape": [1, 3], "raw": b"\1\0"}])
    yield "bool-size", "identity_bool", b2, n2, "binary_data_size is 2 bytes, shape [1,3] of BOOL needs 3"
    # Raw requests (header 0) the server cannot map to one input.
    yield "raw-two-inputs", "simple", raw + raw, 0, \
        "needs a model with exactly one input; model 'simple' has 2"
    yield "raw-wrong-length", "digits", b"\0" * 255, 0, \
        "input 'pixels' of shape [1,64] needs 256 bytes, the body has 255"
    yield "raw-not-whole-rows", "identity_fp32", b"\0" * 6, 0, \
        "a body of 6 bytes is not a whole number of 4-byte rows"
    yield "raw-bytes-shape", "identity_bytes", b"hello", 0, \
        "BYTES input 'INPUT0' must have exactly one element, the model's shape is [-1,-1]"


ERROR_CASES = list(simple_error_bodies())


@pytest.mark.parametrize("case", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_errors_are_400_with_json_body(base_url, case):
    _, model, body, header, needle = case
    r = post(base_url, model, body, header)
    msg = assert_error_response(r, 400)
    assert needle in msg, msg
    assert HEADER.lower() not in {k.lower() for k in r.headers}


def test_duplicate_header_is_400(server):
    body, n = binary_body(simple_inputs(), parameters={"binary_data_output": True})
    req = http_request("POST", "/v2/models/simple/infer", body,
                       headers=[(HEADER, str(n)), (HEADER.lower(), str(n))])
    last = http_request("GET", "/v2/health/live", headers=[("Connection", "close")])
    resp = parse_responses(raw_http(server.port, req + last, timeout=5))
    msg = assert_error_response(resp[0], 400)
    assert "more than one Inference-Header-Content-Length" in msg
    # The connection stays usable: the error is in the request, not the framing.
    assert len(resp) == 2 and resp[1].status == 200


def two_bytes_elements(raw):
    """Whether raw is exactly two length-prefixed BYTES elements."""
    off = 0
    for _ in range(2):
        if off + 4 > len(raw):
            return False
        (n,) = struct.unpack_from("<I", raw, off)
        off += 4 + n
    return off == len(raw)


def test_server_survives_garbage_binary(base_url):
    """Random bodies with random header lengths never crash the server, and
    each gets the one right answer: 200 only for a request that is valid."""
    rng = np.random.default_rng(11)
    for i in range(60):
        size = int(rng.integers(0, 300))
        blob = rng.integers(0, 256, size=size, dtype=np.uint8).tobytes()
        prefix = b""
        if i % 3 == 0:
            prefix = b'{"inputs":[{"name":"INPUT0","datatype":"BYTES","shape":[1,2],' \
                     b'"parameters":{"binary_data_size":%d}}]}' % size
        body = prefix + blob
        header = int(rng.integers(0, len(body) + 1))
        # Random bytes never form a JSON object header; the JSON prefix is
        # valid only when the header length is exactly its length and the
        # random part holds exactly the tensor's two elements.
        ok = bool(prefix) and header == len(prefix) and two_bytes_elements(blob)
        r = post(base_url, "identity_bytes", body, header)
        if ok:
            assert r.status_code == 200, (i, r.content[:300])
        else:
            assert_error(r.status_code, r.text, 400, r.headers.get("Content-Type"))
    assert requests.get(base_url + "/v2/health/live", timeout=5).status_code == 200
