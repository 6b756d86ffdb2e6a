"""Every error status: the status code AND a JSON body {"error": "<non-empty>"}."""
import json

import pytest
import requests

from conftest import (assert_error_response, connect, http_request,
                      infer_request, parse_responses, raw_http, HttpReader, ok_json, tensor)

GOOD = [tensor("INPUT0", list(range(16)), "INT32", [1, 16]),
        tensor("INPUT1", [1] * 16, "INT32", [1, 16])]


def good_inputs():
    return json.loads(json.dumps(GOOD))


# ---------------------------------------------------------------- 400: request body


@pytest.mark.parametrize("body", [
    b"{", b"not json", b"", b"{\"inputs\": [}", b"{\"inputs\": []} trailing",
    b"[1, 2, 3]", b"\xff\xfe{}", b"{\"inputs\": [{\"name\": \"INPUT0\",}]}",
], ids=["open-brace", "text", "empty", "bad-array", "trailing", "array", "bad-utf8",
        "trailing-comma"])
def test_malformed_json(base_url, body):
    assert_error_response(infer_request(base_url, "simple", None, body=body), 400)


@pytest.mark.parametrize("doc", [{}, {"inputs": 5}, {"inputs": "INPUT0"}, {"id": "x"},
                                 {"inputs": [5]}],
                         ids=["empty-object", "number", "string", "only-id", "non-object-input"])
def test_missing_or_invalid_inputs(base_url, doc):
    assert_error_response(infer_request(base_url, "simple", None, body=json.dumps(doc)), 400)


def test_empty_inputs_list(infer):
    assert_error_response(infer("simple", []), 400)


def test_unknown_input_name(infer):
    inputs = good_inputs() + [tensor("INPUT9", [0] * 16, "INT32", [1, 16])]
    assert_error_response(infer("simple", inputs), 400)
    inputs = good_inputs()
    inputs[1]["name"] = "input1"  # names are case-sensitive
    assert_error_response(infer("simple", inputs), 400)


def test_missing_model_input(infer):
    assert_error_response(infer("simple", good_inputs()[:1]), 400)


def test_duplicate_input(infer):
    inputs = good_inputs() + good_inputs()[:1]
    assert_error_response(infer("simple", inputs), 400)


@pytest.mark.parametrize("datatype", ["FP32", "INT64", "UINT32", "BYTES", "int32", "NOPE"])
def test_datatype_mismatch(infer, datatype):
    inputs = good_inputs()
    inputs[0]["datatype"] = datatype
    if datatype == "BYTES":
        inputs[0]["data"] = [str(v) for v in inputs[0]["data"]]
    assert_error_response(infer("simple", inputs), 400)


@pytest.mark.parametrize("shape,count", [
    ([16], 16),          # rank too small
    ([1, 1, 16], 16),    # rank too large
    ([1, 15], 15),       # fixed dim mismatch
    ([2, 8], 16),        # fixed dim mismatch, same element count
    ([16, 1], 16),
])
def test_shape_mismatch(infer, shape, count):
    inputs = good_inputs()
    for t in inputs:
        t["shape"] = shape
        t["data"] = t["data"][:count]
    assert_error_response(infer("simple", inputs), 400)


def test_shape_mismatch_identity_rank(infer):
    assert_error_response(infer("identity_int32", [tensor("INPUT0", [1, 2, 3], "INT32", [3])]), 400)


@pytest.mark.parametrize("shape,data", [
    ([1, 16], list(range(15))),
    ([1, 16], list(range(17))),
    ([2, 16], list(range(16))),
    ([1, 16], [list(range(8)), list(range(7))]),  # ragged nested, 15 elements
    ([1, 16], []),
])
def test_element_count_mismatch(infer, shape, data):
    inputs = good_inputs()
    inputs[0]["shape"] = shape
    inputs[0]["data"] = data
    assert_error_response(infer("simple", inputs), 400)


@pytest.mark.parametrize("shape", [[1, -1], [-1, 16], [1, -16]])
def test_negative_dims_in_request(infer, shape):
    inputs = good_inputs()
    for t in inputs:
        t["shape"] = shape
    assert_error_response(infer("simple", inputs), 400)


@pytest.mark.parametrize("shape", [[4294967296, 4294967296], [2 ** 62, 4]])
@pytest.mark.parametrize("data", [[], [1]])
def test_shape_product_overflow(infer, shape, data):
    """The element count of these shapes overflows 64 bits (to 0); it does
    not match the elements sent: 400 per the element-count rule."""
    r = infer("identity_int32", [{"name": "INPUT0", "datatype": "INT32", "shape": shape,
                                  "data": data}])
    assert_error_response(r, 400)


@pytest.mark.parametrize("depth", [64, 100000])
def test_deeply_nested_json(base_url, depth):
    body = '{"inputs":' + "[" * depth + "]" * depth + "}"
    assert_error_response(infer_request(base_url, "identity_int32", None, body=body), 400)
    body = '{"a":' * depth + "1" + "}" * depth
    assert_error_response(infer_request(base_url, "identity_int32", None, body=body), 400)


OUT_OF_RANGE = [
    ("UINT8", 300), ("UINT8", 256), ("UINT8", -1),
    ("INT8", 128), ("INT8", -129),
    ("UINT16", 65536), ("UINT16", -1),
    ("INT16", 32768), ("INT16", -32769),
    ("UINT32", 4294967296), ("UINT32", -1),
    ("INT32", 2147483648), ("INT32", -2147483649), ("INT32", 1.5), ("INT32", True),
    ("INT32", "7"), ("INT32", None),
    ("INT64", 9223372036854775808), ("INT64", -9223372036854775809), ("INT64", 0.5),
    ("UINT64", 18446744073709551616), ("UINT64", -1),
    ("FP32", "x"), ("FP32", True), ("FP32", None), ("FP64", "1.0"), ("FP16", "x"),
    ("BOOL", "true"), ("BOOL", None),
    ("BYTES", 5), ("BYTES", None), ("BYTES", True),
]


@pytest.mark.parametrize("datatype,value", OUT_OF_RANGE,
                         ids=["%s-%s" % (d, json.dumps(v)) for d, v in OUT_OF_RANGE])
def test_value_out_of_range(infer, datatype, value):
    """A bad element among good ones is rejected (not clamped, not truncated)."""
    good = {"BOOL": True, "BYTES": "ok", "FP16": 1.0, "FP32": 1.0, "FP64": 1.0}.get(datatype, 1)
    data = [good, value, good]
    r = infer("identity_" + datatype.lower(),
              [{"name": "INPUT0", "datatype": datatype, "shape": [1, 3], "data": data}])
    assert_error_response(r, 400)


def test_value_out_of_range_in_simple(infer):
    inputs = good_inputs()
    inputs[0]["data"][5] = 1.5
    assert_error_response(infer("simple", inputs), 400)


@pytest.mark.parametrize("outputs", [["NOPE"], ["OUTPUT0", "NOPE"], ["output0"]])
def test_unknown_requested_output(infer, outputs):
    assert_error_response(infer("simple", good_inputs(), outputs=outputs), 400)


def test_input_without_data(infer):
    inputs = good_inputs()
    del inputs[0]["data"]
    assert_error_response(infer("simple", inputs), 400)


@pytest.mark.parametrize("field,value", [("name", None), ("shape", None), ("datatype", None),
                                         ("shape", "16"), ("shape", [1, "16"]),
                                         ("shape", [1, 16.5])])
def test_input_field_invalid(infer, field, value):
    inputs = good_inputs()
    if value is None:
        del inputs[0][field]
    else:
        inputs[0][field] = value
    assert_error_response(infer("simple", inputs), 400)


@pytest.mark.parametrize("name,value", [
    ("priority", "high"), ("priority", -1), ("priority", 1.5), ("priority", True),
    ("timeout", "soon"), ("timeout", -1),
])
def test_integer_request_parameter_invalid(infer, name, value):
    """Triton's `priority` (a level) and `timeout` (µs) are non-negative integers."""
    msg = assert_error_response(infer("simple", good_inputs(), parameters={name: value}), 400)
    assert "parameter '%s' must be a non-negative integer" % name in msg


@pytest.mark.parametrize("priority", [0, 1, 7])
def test_priority_accepted(infer, priority):
    """Any level is accepted: 0 and levels the model does not have mean its
    default level (simple has no priority levels)."""
    body = ok_json(infer("simple", good_inputs(), parameters={"priority": priority}))
    assert body["outputs"][0]["data"] == list(range(1, 17))


def test_good_request_still_works_after_errors(infer):
    body = ok_json(infer("simple", good_inputs()))
    assert body["outputs"][0]["data"] == list(range(1, 17))


# ---------------------------------------------------------------- 404


def test_unknown_model_infer(infer):
    assert_error_response(infer("nosuchmodel", good_inputs()), 404)


@pytest.mark.parametrize("path", [
    "/v2/models/nosuchmodel", "/v2/models/nosuchmodel/ready",
    "/v2/models/simple/versions/7", "/v2/models/simple/versions/7/ready",
    "/v2/models/simple/versions/0/ready",
    "/v2/foo", "/foo", "/v2/models", "/v2/models/simple/foo", "/v2/health/foo",
    "/v2/models/simple/versions/1/foo",
])
def test_not_found_get(base_url, path):
    assert_error_response(requests.get(base_url + path, timeout=10), 404)


def test_unknown_version_infer(infer):
    assert_error_response(infer("simple", good_inputs(), version="7"), 404)


# Triton's wording, which clients (Triton's own examples among them) match on.
@pytest.mark.parametrize("path,status,message", [
    ("/v2/models/nosuchmodel", 404, "Request for unknown model: 'nosuchmodel' is not found"),
    ("/v2/models/simple/versions/7/ready", 404,
     "Request for unknown model: 'simple' version 7 is not found (loaded versions: 1)"),
    ("/v2/models/simple/versions/abc", 400,
     "failed to get model version from specified version string 'abc'"),
    ("/v2/models/simple/versions/-1/config", 400,
     "failed to get model version from specified version string '-1'"),
    ("/v2/models/nosuchmodel/stats", 404, "Request for unknown model: 'nosuchmodel' is not found"),
    ("/v2/models/nosuchmodel/trace/setting", 404,
     "Request for unknown model: 'nosuchmodel' is not found"),
])
def test_regress_lookup_errors_use_tritons_wording(base_url, path, status, message):
    r = requests.get(base_url + path, timeout=10)
    assert_error_response(r, status)
    assert r.json()["error"] == message


@pytest.mark.parametrize("method, path", [
    ("GET", "/v2/models/simpel"), ("GET", "/v2/models/simpel/ready"),
    ("GET", "/v2/models/simpel/config"), ("POST", "/v2/models/simpel/infer"),
])
def test_unknown_model_suggests_the_nearest_served_name(base_url, method, path):
    """Triton's wording, then the served name the client most likely meant."""
    r = requests.request(method, base_url + path, json={"inputs": GOOD}, timeout=10)
    assert_error_response(r, 404)
    assert r.json()["error"] == \
        "Request for unknown model: 'simpel' is not found; did you mean 'simple'?"


def test_regress_lookup_errors_use_tritons_wording_on_infer(infer):
    r = infer("nosuchmodel", good_inputs())
    assert r.json()["error"] == "Request for unknown model: 'nosuchmodel' is not found"
    r = infer("simple", good_inputs(), version="x1")
    assert_error_response(r, 400)
    assert r.json()["error"] == "failed to get model version from specified version string 'x1'"


# ---------------------------------------------------------------- 405


@pytest.mark.parametrize("method,path,allowed", [
    ("GET", "/v2/models/simple/infer", "POST"),
    ("PUT", "/v2/models/simple/infer", "POST"),
    ("GET", "/v2/models/simple/versions/1/infer", "POST"),
    ("POST", "/v2/health/live", "GET"),
    ("POST", "/v2/health/ready", "GET"),
    ("DELETE", "/v2", "GET"),
    ("POST", "/v2/models/simple", "GET"),
    ("POST", "/v2/models/simple/ready", "GET"),
])
def test_method_not_allowed(base_url, method, path, allowed):
    r = requests.request(method, base_url + path, timeout=10,
                         data=b"{}" if method in ("POST", "PUT") else None)
    assert_error_response(r, 405)
    allow = [m.strip().upper() for m in r.headers.get("Allow", "").split(",")]
    assert allowed in allow, r.headers


# ---------------------------------------------------------------- limits (custom servers)


@pytest.fixture(scope="module")
def limited(module_server_factory):
    return module_server_factory.start("--max-request-line", "256", "--max-header-bytes", "2048",
                                       "--max-headers", "16", "--max-body-bytes", "4096")


def one_response(data):
    resps = parse_responses(data)
    assert resps, "no response: %r" % data[:500]
    return resps[0]


def test_413_body_too_large(limited):
    body = json.dumps({"inputs": good_inputs()}).encode() + b" " * 5000
    data = raw_http(limited.port, http_request("POST", "/v2/models/simple/infer", body))
    resp = one_response(data)
    assert_error_response(resp, 413)


def test_413_chunked_body_too_large(limited):
    head = (b"POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\n"
            b"Transfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n")
    chunk = b"x" * 1000
    body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(5)) + b"0\r\n\r\n"
    resp = one_response(raw_http(limited.port, head + body))
    assert_error_response(resp, 413)


def test_body_at_limit_is_accepted(limited):
    body = json.dumps({"inputs": good_inputs()}).encode()
    body += b" " * (4096 - len(body))  # JSON whitespace up to exactly the limit
    assert len(body) == 4096
    r = infer_request(limited.url, "simple", None, body=body)
    assert ok_json(r)["outputs"][0]["data"] == list(range(1, 17))


def test_431_header_bytes(limited):
    req = http_request("GET", "/v2/health/live", headers=[("X-Big", "a" * 3000)])
    resp = one_response(raw_http(limited.port, req))
    assert_error_response(resp, 431)


def test_431_too_many_headers(limited):
    req = http_request("GET", "/v2/health/live",
                       headers=[("X-H%d" % i, "v") for i in range(20)])
    resp = one_response(raw_http(limited.port, req))
    assert_error_response(resp, 431)


def test_headers_at_limits_accepted(limited):
    # Host + 15 more = 16 header fields
    req = http_request("GET", "/v2/health/live",
                       headers=[("X-H%d" % i, "v") for i in range(14)] + [("Connection", "close")])
    resp = one_response(raw_http(limited.port, req))
    assert resp.status == 200, resp


def test_414_request_line(limited):
    req = http_request("GET", "/v2/models/" + "m" * 300)
    resp = one_response(raw_http(limited.port, req))
    assert_error_response(resp, 414)


def test_limited_server_still_serves(limited):
    r = requests.get(limited.url + "/v2/health/ready", timeout=10)
    assert r.status_code == 200


# defaults on the shared server: request line 8192, 100 headers, 65536 header bytes


def test_default_request_line_limit(server):
    ok = raw_http(server.port, http_request("GET", "/v2/models/" + "m" * 7000,
                                            headers=[("Connection", "close")]))
    assert_error_response(one_response(ok), 404)
    resp = one_response(raw_http(server.port, http_request("GET", "/v2/models/" + "m" * 9000)))
    assert_error_response(resp, 414)


def test_default_header_count_limit(server):
    req = http_request("GET", "/v2/health/live", headers=[("X-H%d" % i, "v") for i in range(101)])
    resp = one_response(raw_http(server.port, req))
    assert_error_response(resp, 431)


def test_default_header_bytes_limit(server):
    req = http_request("GET", "/v2/health/live", headers=[("X-Big", "a" * 70000)])
    resp = one_response(raw_http(server.port, req))
    assert_error_response(resp, 431)


# ---------------------------------------------------------------- malformed HTTP


MALFORMED = [
    b"GARBAGE\r\n\r\n",
    b"GET\r\n\r\n",
    b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nNo colon here\r\n\r\n",
    b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nBad Name: v\r\n\r\n",
    b"POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
    b"POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
    b"POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
    b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\x00\x01\x02: \xff\r\n\r\n",
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 64 + b"\r\n\r\n",
]


@pytest.mark.parametrize("data", MALFORMED, ids=[
    "garbage", "no-target", "no-colon", "space-in-name", "bad-content-length",
    "conflicting-content-length", "bad-chunk-size", "binary-header", "tls-hello"])
def test_malformed_http_400_and_close(server, data):
    s = connect(server.port)
    try:
        s.sendall(data)
        reader = HttpReader(s)
        resp = reader.read_response()
        assert_error_response(resp, 400)
        assert reader.at_eof(), "server kept the connection open after a malformed request"
    finally:
        s.close()
    assert requests.get(server.url + "/v2/health/live", timeout=10).status_code == 200


def test_inputs_with_different_batch_sizes(infer):
    """simple's inputs share the batch dimension: 1 row + 2 rows is a client error, not a 500."""
    inputs = good_inputs()
    inputs[1]["shape"] = [2, 16]
    inputs[1]["data"] = list(range(32))
    r = infer("simple", inputs)
    assert_error_response(r, 400)
    assert "different batch sizes" in r.json()["error"]
