"""A new user's first hour (issue 22): errors that name the cause and the fix.

- binary tensor data sent without (or with a misspelt)
  Inference-Header-Content-Length: the answer names the header and the
  length of the JSON part, and that length works;
- config.pbtxt dims (or reshape) that repeat the batch dimension with
  max_batch_size > 0: both shapes side by side, and the fix;
- an unknown input or output name: the model's tensors are listed (REST and
  gRPC);
- a body over --max-body-bytes: its size, the limit and the flag (HTTP/1.1,
  chunked, HTTP/2 with and without content-length; gRPC's message limit);
- the access log's `error` field carries the message of a failed request
  (REST over HTTP/1.1 and HTTP/2, gRPC unary and stream).
"""
import json
import re
import subprocess

import grpc
import pytest
import requests

from conftest import (assert_error, assert_error_response, http_request, parse_responses,
                      raw_http)
from grpc_client import Client, generate
from test_accesslog import FIELDS, grpc_simple_request, wait_lines
from test_http2 import DATA, END_HEADERS, END_STREAM, H2, HEADERS, curl_h2, frame, request_block
from test_model_config import SIMPLE_CONFIG, get_when_listening, make_repo

SIMPLE_INPUTS_LIST = "'INPUT0' (INT32 [-1,16]), 'INPUT1' (INT32 [-1,16])"
SIMPLE_OUTPUTS_LIST = "'OUTPUT0' (INT32 [-1,16]), 'OUTPUT1' (INT32 [-1,16])"


@pytest.fixture(scope="module")
def pbs(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("proto_py"))


def simple_json(**extra):
    return {"inputs": [
        {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16], "data": list(range(16))},
        {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16], "data": [1] * 16}], **extra}


# --------------------------------------------------------------------------
# 1. binary tensor data without Inference-Header-Content-Length


def binary_body():
    doc = {"inputs": [
        {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16],
         "parameters": {"binary_data_size": 64}},
        {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16],
         "parameters": {"binary_data_size": 64}}]}
    head = json.dumps(doc).encode()
    data = b"".join(i.to_bytes(4, "little") for i in range(16)) + (1).to_bytes(4, "little") * 16
    return head, head + data


@pytest.mark.parametrize("header", [None, "Inference-Header-Content-Lenght"],
                         ids=["missing", "misspelt"])
def test_regress_binary_data_without_header_length(server, header):
    head, body = binary_body()
    headers = {"Content-Type": "application/octet-stream"}
    if header:
        headers[header] = str(len(head))
    r = requests.post(server.url + "/v2/models/simple/infer", data=body, headers=headers,
                      timeout=30)
    msg = assert_error_response(r, 400)
    assert msg == ("128 bytes follow the %d-byte JSON request: binary tensor data after the JSON "
                   "needs the header Inference-Header-Content-Length: %d (the length of the "
                   "JSON part)" % (len(head), len(head)))
    # The length the message names is the one that works.
    n = re.search(r"Inference-Header-Content-Length: (\d+)", msg).group(1)
    r = requests.post(server.url + "/v2/models/simple/infer", data=body,
                      headers={"Inference-Header-Content-Length": n}, timeout=30)
    assert r.status_code == 200, r.text
    assert r.json()["outputs"][0]["data"] == list(range(1, 17))


# --------------------------------------------------------------------------
# 2. config.pbtxt dims that repeat the batch dimension


@pytest.mark.parametrize("old, new, msg", [
    ('{ name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] }',
     '{ name: "INPUT0" data_type: TYPE_INT32 dims: [ -1, 16 ] }',
     "input 'INPUT0': config dims [-1,16] plus the batch dimension make [-1,-1,16], the model's "
     "shape is [-1,16]: leave the batch dimension out of dims when max_batch_size > 0 "
     "(dims: [16])"),
    ('{ name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] }',
     '{ name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 8, 16 ] }',
     "output 'OUTPUT1': config dims [8,16] plus the batch dimension make [-1,8,16], the model's "
     "shape is [-1,16]: leave the batch dimension out of dims when max_batch_size > 0 "
     "(dims: [16])"),
    ('{ name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] }',
     '{ name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] reshape: { shape: [ 1, 16 ] } }',
     "input 'INPUT1': config reshape [1,16] plus the batch dimension make [-1,1,16], the "
     "model's shape is [-1,16]: leave the batch dimension out of reshape when max_batch_size > 0 "
     "(reshape: [16])"),
], ids=["input-dims", "output-dims", "reshape"])
def test_regress_config_dims_with_batch_dimension(server_factory, tmp_path, pbs, old, new, msg):
    assert old in SIMPLE_CONFIG
    repo = make_repo(tmp_path, SIMPLE_CONFIG.replace(old, new), versions=(1,))
    srv = server_factory.start(repository=repo, wait=False)
    r = get_when_listening(srv.url + "/v2/models/simple")
    assert msg in assert_error_response(r, 404)
    c = Client(*pbs, "127.0.0.1:%d" % srv.grpc_port)
    with pytest.raises(grpc.RpcError) as e:
        c.call("ModelMetadata", name="simple")
    c.close()
    assert e.value.code() == grpc.StatusCode.NOT_FOUND and msg in e.value.details()
    assert msg in srv.stderr()


# --------------------------------------------------------------------------
# 7a. unknown input and output names list the model's


def test_regress_unknown_input_lists_inputs(server, pbs):
    doc = simple_json()
    doc["inputs"][0]["name"] = "input"
    r = requests.post(server.url + "/v2/models/simple/infer", json=doc, timeout=30)
    assert assert_error_response(r, 400) == (
        "unexpected inference input 'input' for model 'simple', which has inputs: " + SIMPLE_INPUTS_LIST)
    r = requests.post(server.url + "/v2/models/simple/infer",
                      json=simple_json(outputs=[{"name": "output"}]), timeout=30)
    assert assert_error_response(r, 400) == (
        "unexpected inference output 'output' for model 'simple', which has outputs: " + SIMPLE_OUTPUTS_LIST)

    pb, hpb = pbs
    c = Client(pb, hpb, "127.0.0.1:%d" % server.grpc_port)
    req = grpc_simple_request(pb)
    req.inputs[1].name = "x"
    with pytest.raises(grpc.RpcError) as e:
        c.infer(req)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert e.value.details() == (
        "unexpected inference input 'x' for model 'simple', which has inputs: " + SIMPLE_INPUTS_LIST)
    req = grpc_simple_request(pb)
    req.outputs.add(name="y")
    with pytest.raises(grpc.RpcError) as e:
        c.infer(req)
    assert e.value.details() == (
        "unexpected inference output 'y' for model 'simple', which has outputs: " + SIMPLE_OUTPUTS_LIST)
    c.close()


# --------------------------------------------------------------------------
# 7b. 413 names the size, the limit and the flag


LIMIT = 4096
TOO_LARGE = ("request body of %d bytes exceeds the limit of 4096 bytes (--max-body-bytes)"
             % (LIMIT + 1000))


@pytest.fixture(scope="module")
def limited(module_server_factory):
    return module_server_factory.start("--max-body-bytes", str(LIMIT),
                                       "--grpc-max-message-bytes", str(LIMIT))


def test_regress_413_names_size_limit_and_flag_http1(limited):
    body = b" " * (LIMIT + 1000)
    resp = parse_responses(raw_http(limited.port, http_request(
        "POST", "/v2/models/simple/infer", body)))[0]
    assert assert_error_response(resp, 413) == TOO_LARGE
    head = (b"POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n")
    chunks = b"1000\r\n" + b" " * 4096 + b"\r\n10\r\n" + b" " * 16 + b"\r\n0\r\n\r\n"
    resp = parse_responses(raw_http(limited.port, head + chunks))[0]
    assert assert_error_response(resp, 413) == (
        "request body of at least 4112 bytes exceeds the limit of 4096 bytes (--max-body-bytes)")


def test_regress_413_names_size_limit_and_flag_h2(limited, tmp_path):
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (LIMIT + 1000))
    _, status, headers, body = curl_h2(limited.url + "/v2/models/simple/infer",
                                       "--data-binary", "@%s" % big)
    assert assert_error(status, body, 413, headers.get("content-type")) == TOO_LARGE
    # Without content-length: as much as arrived when the limit was passed.
    conn = H2(limited.port)
    conn.send(frame(HEADERS, END_HEADERS, 1, request_block("POST", "/v2/models/simple/infer")))
    conn.send(frame(DATA, 0, 1, b" " * 3000) + frame(DATA, END_STREAM, 1, b" " * 3000))
    frames = conn.stream_end(1)
    conn.close()
    data = b"".join(f[3] for f in frames if f and f[0] == DATA and f[2] == 1)
    assert json.loads(data) == {"error": "request body of at least 6000 bytes exceeds the limit "
                                         "of 4096 bytes (--max-body-bytes)"}


def test_regress_413_grpc_message_limit_names_flag(limited, pbs):
    pb, hpb = pbs
    c = Client(pb, hpb, "127.0.0.1:%d" % limited.grpc_port)
    req = grpc_simple_request(pb)
    req.raw_input_contents.append(b"\0" * (LIMIT + 1000))
    with pytest.raises(grpc.RpcError) as e:
        c.infer(req)
    c.close()
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert e.value.details() == (
        "request message of %d bytes exceeds the limit of 4096 bytes (--grpc-max-message-bytes)"
        % req.ByteSize())


# --------------------------------------------------------------------------
# 7c. the access log's error field


def test_regress_access_log_error_field(server_factory, tmp_path, pbs):
    log = tmp_path / "access.log"
    srv = server_factory.start("--access-log", str(log))
    url = srv.url + "/v2/models/simple/infer"
    bad = simple_json()
    bad["inputs"][0]["name"] = "input"
    r = requests.post(url, json=bad, headers={"x-request-id": "rest-bad"}, timeout=30)
    rest_msg = assert_error_response(r, 400)
    r = requests.post(url, json=simple_json(), headers={"x-request-id": "rest-ok"}, timeout=30)
    assert r.status_code == 200
    _, status, headers, body = curl_h2(url, "-H", "x-request-id: h2-bad", "--data-binary",
                                       '{"inputs": 1}')
    h2_msg = assert_error(status, body, 400, headers.get("content-type"))

    pb, hpb = pbs
    c = Client(pb, hpb, "127.0.0.1:%d" % srv.grpc_port)
    req = grpc_simple_request(pb)
    req.inputs[0].name = "input"
    with pytest.raises(grpc.RpcError) as e:
        c.infer(req, metadata=[("x-request-id", "grpc-bad")])
    grpc_msg = e.value.details()
    c.infer(grpc_simple_request(pb), metadata=[("x-request-id", "grpc-ok")])
    bad_message = pb.ModelInferRequest(model_name="simple", id="stream-bad")
    answers = list(c.stream_infer()(iter([bad_message]), timeout=30))
    c.close()

    lines = [json.loads(l) for l in wait_lines(log, 6)]
    by_id = {l["request_id"]: l for l in lines}
    assert all(list(l) == FIELDS for l in lines)
    assert by_id["rest-bad"]["status"] == 400 and by_id["rest-bad"]["error"] == rest_msg
    assert by_id["h2-bad"]["protocol"] == "h2" and by_id["h2-bad"]["error"] == h2_msg
    assert by_id["grpc-bad"]["status"] == 400 and by_id["grpc-bad"]["error"] == grpc_msg
    assert by_id["stream-bad"]["error"] == answers[0].error_message
    assert answers[0].error_message == "missing input 'INPUT0' for model 'simple'"
    assert by_id["rest-ok"]["error"] is None and by_id["grpc-ok"]["error"] is None


def test_regress_access_log_error_field_text(server_factory):
    srv = server_factory.start("--access-log", "-", "--log-format", "text")
    r = requests.post(srv.url + "/v2/models/nope/infer", data="{}",
                      headers={"x-request-id": "text-bad"}, timeout=30)
    msg = assert_error_response(r, 404)
    assert srv.stop() == []
    line = next(l for l in srv.stdout_path.read_text().splitlines() if "request_id=text-bad" in l)
    assert line.endswith(" error=" + re.sub(r"[^\x21-\x7e]", "_", msg))
