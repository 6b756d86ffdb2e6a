"""Error messages that clients match on use Triton's wording, word for word,
over REST and gRPC alike (inferd may add detail after it). Triton's own
client examples test for these prefixes (e.g. "Request for unknown model");
the strings are those of triton-inference-server/core (model_lifecycle.cc,
model_repository_manager.cc, model.cc, infer_request.cc) and the server's
(triton-inference-server/server: "failed to get model version from specified
version string", http_server.cc's ValidateInputContentType and
grpc/infer_handler.cc's contents/raw_input_contents check)."""
import grpc
import numpy as np
import pytest
import requests

from conftest import MAIN_MODELS, assert_error_response
from grpc_client import Client, generate

SIMPLE_DATA = list(range(16))


@pytest.fixture(scope="module")
def pbs(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("proto_py"))


@pytest.fixture(scope="module")
def srv(module_server_factory):
    """simple, and `broken`: a model whose only version cannot load."""
    repo = module_server_factory.repository({"simple": MAIN_MODELS["simple"]})
    (repo / "broken" / "1").mkdir(parents=True)
    (repo / "broken" / "1" / "model.onnx").write_bytes(b"not onnx")
    srv = module_server_factory.start("--model-repository", str(repo), wait=False)
    srv.wait_ready(path="/v2/health/live")
    return srv


def rest_infer(srv, model, inputs, version=None, outputs=None):
    path = "/v2/models/%s%s/infer" % (model, "/versions/%s" % version if version else "")
    body = {"inputs": inputs}
    if outputs:
        body["outputs"] = [{"name": o} for o in outputs]
    return requests.post(srv.url + path, json=body, timeout=30)


def json_inputs(dtype="INT32", shape=(1, 16), name0="INPUT0"):
    n = shape[0] * shape[1]
    return [{"name": name0, "datatype": dtype, "shape": list(shape), "data": SIMPLE_DATA[:n]},
            {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16], "data": SIMPLE_DATA}]


def grpc_infer(srv, pbs, model, version="", dtype="INT32", shape=(1, 16), name0="INPUT0",
               outputs=()):
    pb, _ = pbs
    req = pb.ModelInferRequest(model_name=model, model_version=version)
    for name, dt, shp in ((name0, dtype, shape), ("INPUT1", "INT32", (1, 16))):
        t = req.inputs.add(name=name, datatype=dt, shape=list(shp))
        n = shp[0] * shp[1]
        if dt == "INT32":
            t.contents.int_contents.extend(SIMPLE_DATA[:n])
        else:
            t.contents.fp32_contents.extend(float(x) for x in SIMPLE_DATA[:n])
    for o in outputs:
        req.outputs.add(name=o)
    return grpc_infer_request(srv, pbs, req)


def grpc_infer_request(srv, pbs, req):
    """The RpcError that ModelInfer of req ends with."""
    pb, hpb = pbs
    c = Client(pb, hpb, "127.0.0.1:%d" % srv.grpc_port)
    try:
        with pytest.raises(grpc.RpcError) as e:
            c.infer(req)
    finally:
        c.close()
    return e.value


CASES = [
    # (what, REST call args, gRPC call args, REST status, gRPC code, Triton's prefix)
    ("unknown model", ("nosuch", json_inputs()), ("nosuch",), 404, grpc.StatusCode.NOT_FOUND,
     "Request for unknown model: 'nosuch' is not found"),
    ("no available versions", ("broken", json_inputs()), ("broken",), 404,
     grpc.StatusCode.NOT_FOUND, "Request for unknown model: 'broken' has no available versions"),
    ("unknown version", ("simple", json_inputs(), "7"), ("simple", "7"), 404,
     grpc.StatusCode.NOT_FOUND, "Request for unknown model: 'simple' version 7 is not found"),
    ("unparsable version", ("simple", json_inputs(), "v1"), ("simple", "v1"), 400,
     grpc.StatusCode.INVALID_ARGUMENT,
     "failed to get model version from specified version string 'v1'"),
    ("unknown input", ("simple", json_inputs(name0="X")), ("simple", "", "INT32", (1, 16), "X"),
     400, grpc.StatusCode.INVALID_ARGUMENT,
     "unexpected inference input 'X' for model 'simple'"),
    ("datatype", ("simple", json_inputs(dtype="FP32")), ("simple", "", "FP32"), 400,
     grpc.StatusCode.INVALID_ARGUMENT,
     "inference input 'INPUT0' data-type is 'FP32', but model 'simple' expects 'INT32'"),
    ("shape", ("simple", json_inputs(shape=(1, 8))), ("simple", "", "INT32", (1, 8)), 400,
     grpc.StatusCode.INVALID_ARGUMENT,
     "unexpected shape for input 'INPUT0' for model 'simple'. Expected [-1,16], got [1,8]"),
]


@pytest.mark.parametrize("what,rest,rpc,status,code,prefix", CASES, ids=[c[0] for c in CASES])
def test_regress_tritons_wording_rest(srv, what, rest, rpc, status, code, prefix):
    r = rest_infer(srv, *rest)
    assert_error_response(r, status)
    assert r.json()["error"].startswith(prefix), r.json()


@pytest.mark.parametrize("what,rest,rpc,status,code,prefix", CASES, ids=[c[0] for c in CASES])
def test_regress_tritons_wording_grpc(srv, pbs, what, rest, rpc, status, code, prefix):
    e = grpc_infer(srv, pbs, *rpc)
    assert e.code() == code
    assert e.details().startswith(prefix), e.details()


def test_regress_unknown_output_uses_tritons_wording(srv, pbs):
    r = rest_infer(srv, "simple", json_inputs(), outputs=["OUT9"])
    assert_error_response(r, 400)
    assert r.json()["error"].startswith("unexpected inference output 'OUT9' for model 'simple'")
    e = grpc_infer(srv, pbs, "simple", outputs=["OUT9"])
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert e.details().startswith("unexpected inference output 'OUT9' for model 'simple'")


def test_regress_explicit_contents_with_raw_uses_tritons_wording(srv, pbs):
    """An input given as contents in a request that also carries
    raw_input_contents (here INPUT1's, so the raw entries do not even match
    the inputs in number): Triton names the input before anything else."""
    pb, _ = pbs
    req = pb.ModelInferRequest(model_name="simple")
    t = req.inputs.add(name="INPUT0", datatype="INT32", shape=[1, 16])
    t.contents.int_contents.extend(SIMPLE_DATA)
    req.inputs.add(name="INPUT1", datatype="INT32", shape=[1, 16])
    req.raw_input_contents.append(np.arange(16, dtype="<i4").tobytes())
    e = grpc_infer_request(srv, pbs, req)
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert e.details() == ("contents field must not be specified when using raw_input_contents "
                           "for 'INPUT0' for model 'simple'")


@pytest.mark.parametrize("fields,named", [
    ({"data": SIMPLE_DATA, "parameters": {"binary_data_size": 64}}, "set 'data' 'binary_data_size'"),
    ({}, "no field is set"),
    ({"parameters": {"shared_memory_region": "r", "shared_memory_byte_size": 64},
      "data": SIMPLE_DATA}, "set 'data' 'shared_memory_region'"),
], ids=["data-and-binary", "none", "data-and-shm"])
def test_regress_rest_input_data_fields_use_tritons_wording(srv, fields, named):
    """REST's counterpart: an input's data comes from exactly one of data,
    binary_data_size and shared_memory_region."""
    inputs = json_inputs()
    del inputs[0]["data"]
    inputs[0].update(fields)
    r = rest_infer(srv, "simple", inputs)
    assert assert_error_response(r, 400).startswith(
        "Input must set only one of the following fields: 'data', 'binary_data_size' in "
        "'parameters', 'shared_memory_region' in 'parameters'. But " + named)
