"""Real models that must serve: models whose default warm-up fails on
zeros, models without inputs, and models that make ONNX Runtime log. The
models are built here with Debian's `onnx` module into each test's
temporary repository."""
import json
import re

import grpc
import numpy as np
import onnx
import pytest
import requests
from onnx import TensorProto, helper, numpy_helper

from conftest import assert_error_response, ok_json
from grpc_client import Client, generate
from test_model_config import get_when_listening

# One line of inferd's text log (src/base/log.c).
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (error|warn |info |debug) \S")


def save(graph, path):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))


def write_slice_steps(repo):
    """OUT = DATA[0:8:STEPS]: DATA FP32 [8], STEPS INT64 [1]. Slice rejects a
    zero step ("'step' value cannot be 0"), so a zero-filled run fails."""
    consts = [numpy_helper.from_array(np.array([v], np.int64), n)
              for n, v in (("STARTS", 0), ("ENDS", 8), ("AXES", 0))]
    save(helper.make_graph(
        [helper.make_node("Slice", ["DATA", "STARTS", "ENDS", "AXES", "STEPS"], ["OUT"])],
        "slice_steps",
        [helper.make_tensor_value_info("DATA", TensorProto.FLOAT, [8]),
         helper.make_tensor_value_info("STEPS", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("OUT", TensorProto.FLOAT, [None])], consts),
        repo / "slice_steps" / "1" / "model.onnx")


def write_constants(repo):
    """No inputs: SUM = [[0,1,2],[3,4,5]] + [10,20,30] (FP32 [2,3]) and
    IDS = [7, 8] (INT64 [2])."""
    def const(name, array):
        return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(array))
    save(helper.make_graph(
        [const("A", np.arange(6, dtype=np.float32).reshape(2, 3)),
         const("B", np.array([10, 20, 30], np.float32)),
         helper.make_node("Add", ["A", "B"], ["SUM"]),
         const("IDS", np.array([7, 8], np.int64))],
        "constants", [],
        [helper.make_tensor_value_info("SUM", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("IDS", TensorProto.INT64, [2])]),
        repo / "constants" / "1" / "model.onnx")


def write_unused_initializer(repo):
    """Y = -X with an initializer no node uses: ONNX Runtime removes it and
    logs a warning about it while creating the session."""
    save(helper.make_graph(
        [helper.make_node("Neg", ["X"], ["Y"])], "unused_init",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [4])],
        [numpy_helper.from_array(np.ones(4, np.float32), "UNUSED_WEIGHT")]),
        repo / "unused_init" / "1" / "model.onnx")


SUM = [[10.0, 21.0, 32.0], [13.0, 24.0, 35.0]]
IDS = [7, 8]

ZERO_WARMUP = """
model_warmup [
  { name: "zeros" batch_size: 1
    inputs { key: "DATA" value: { data_type: TYPE_FP32 dims: [ 8 ] zero_data: true } }
    inputs { key: "STEPS" value: { data_type: TYPE_INT64 dims: [ 1 ] zero_data: true } } }
]
"""


@pytest.fixture(scope="module")
def real(module_server_factory, tmp_path_factory):
    """One server with slice_steps, constants and unused_init."""
    repo = tmp_path_factory.mktemp("real") / "models"
    write_slice_steps(repo)
    write_constants(repo)
    write_unused_initializer(repo)
    return module_server_factory.start(repository=repo)


@pytest.fixture(scope="module")
def grpc_client(real, tmp_path_factory):
    c = Client(*generate(tmp_path_factory.mktemp("proto_py")), "127.0.0.1:%d" % real.grpc_port)
    yield c
    c.close()


def index(url):
    r = requests.post(url + "/v2/repository/index", timeout=30)
    assert r.status_code == 200, r.text
    return {m["name"]: m for m in r.json()}


def test_regress_default_warmup_rejecting_zeros_still_serves(real):
    """The default warm-up runs Slice with a zero step, which ONNX Runtime
    rejects: the model is served anyway and the log says why."""
    assert index(real.url)["slice_steps"]["state"] == "READY"
    r = requests.post(real.url + "/v2/models/slice_steps/infer", timeout=30, data=json.dumps(
        {"inputs": [{"name": "DATA", "datatype": "FP32", "shape": [8],
                     "data": [1, 2, 3, 4, 5, 6, 7, 8]},
                    {"name": "STEPS", "datatype": "INT64", "shape": [1], "data": [3]}]}))
    out = ok_json(r)["outputs"][0]
    assert out["shape"] == [3] and out["data"] == [1.0, 4.0, 7.0]
    warnings = [l for l in real.stderr().splitlines()
                if " warn  model slice_steps version 1: warm-up 'default' failed: " in l]
    assert len(warnings) == 1, real.stderr()
    assert "'step' value cannot be 0" in warnings[0]
    assert LOG_LINE.match(warnings[0]), warnings[0]
    assert re.search(r"model slice_steps version 1 sha256 \w+ loaded in \d+ ms, "
                     r"warm-up failed after \d+ us", real.stderr())


def test_regress_explicit_zero_warmup_still_fails_the_load(server_factory, tmp_path):
    """A warm-up config.pbtxt asks for must pass, as in Triton."""
    repo = tmp_path / "models"
    write_slice_steps(repo)
    (repo / "slice_steps" / "config.pbtxt").write_text(ZERO_WARMUP)
    srv = server_factory.start(repository=repo, wait=False)
    assert get_when_listening(srv.url + "/v2/health/ready").status_code == 503
    entry = index(srv.url)["slice_steps"]
    assert entry["state"] == "UNAVAILABLE"
    assert "warm-up 'zeros' failed" in entry["reason"], entry
    assert "'step' value cannot be 0" in entry["reason"], entry
    assert " warn  model slice_steps version 1: warm-up" not in srv.stderr()


def test_regress_model_without_inputs_serves_over_rest(real):
    meta = requests.get(real.url + "/v2/models/constants", timeout=30).json()
    assert meta["inputs"] == []
    assert [o["name"] for o in meta["outputs"]] == ["SUM", "IDS"]
    r = requests.post(real.url + "/v2/models/constants/infer", data='{"inputs": []}', timeout=30)
    outs = {o["name"]: o for o in ok_json(r)["outputs"]}
    assert outs["SUM"]["datatype"] == "FP32" and outs["SUM"]["shape"] == [2, 3]
    assert np.array(outs["SUM"]["data"]).reshape(2, 3).tolist() == SUM
    assert outs["IDS"]["datatype"] == "INT64" and outs["IDS"]["data"] == IDS
    r = requests.post(real.url + "/v2/models/constants/infer", timeout=30,
                      data='{"inputs": [], "outputs": [{"name": "IDS"}]}')
    assert [(o["name"], o["data"]) for o in ok_json(r)["outputs"]] == [("IDS", IDS)]
    # An input the model does not have is still an error.
    r = requests.post(real.url + "/v2/models/constants/infer", timeout=30, data=json.dumps(
        {"inputs": [{"name": "X", "datatype": "FP32", "shape": [1], "data": [1]}]}))
    assert "unexpected inference input 'X'" in assert_error_response(r, 400)


def test_regress_empty_inputs_name_the_missing_input(real):
    r = requests.post(real.url + "/v2/models/slice_steps/infer", data='{"inputs": []}',
                      timeout=30)
    assert "missing input 'DATA'" in assert_error_response(r, 400)


def test_regress_model_without_inputs_serves_over_grpc(grpc_client):
    pb = grpc_client.pb
    meta = grpc_client.call("ModelMetadata", name="constants")
    assert len(meta.inputs) == 0
    assert [o.name for o in meta.outputs] == ["SUM", "IDS"]
    resp = grpc_client.infer(pb.ModelInferRequest(model_name="constants"))
    outs = {o.name: (o, raw) for o, raw in zip(resp.outputs, resp.raw_output_contents)}
    sum_out, sum_raw = outs["SUM"]
    assert sum_out.datatype == "FP32" and list(sum_out.shape) == [2, 3]
    assert np.frombuffer(sum_raw, "<f4").reshape(2, 3).tolist() == SUM
    ids_out, ids_raw = outs["IDS"]
    assert ids_out.datatype == "INT64" and np.frombuffer(ids_raw, "<i8").tolist() == IDS
    # A model with inputs still needs them.
    with pytest.raises(grpc.RpcError) as e:
        grpc_client.infer(pb.ModelInferRequest(model_name="slice_steps"))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "missing input 'DATA'" in e.value.details()


def test_regress_model_without_inputs_refuses_max_batch_size(server_factory, tmp_path):
    """Nothing would carry a request's batch size."""
    repo = tmp_path / "models"
    write_constants(repo)
    (repo / "constants" / "config.pbtxt").write_text("max_batch_size: 4\n")
    srv = server_factory.start(repository=repo, wait=False)
    assert get_when_listening(srv.url + "/v2/health/ready").status_code == 503
    entry = index(srv.url)["constants"]
    assert entry["state"] == "UNAVAILABLE"
    assert "max_batch_size: 4 needs a model input" in entry["reason"], entry


def test_regress_onnxruntime_warning_in_inferd_log(real):
    """ONNX Runtime's warning about the unused initializer is an inferd log
    line naming the model version; nothing reaches stderr unformatted (no
    ORT colour codes, no ORT-format lines)."""
    err = real.stderr()
    lines = [l for l in err.splitlines()
             if " onnxruntime unused_init:1: Removing initializer 'UNUSED_WEIGHT'" in l]
    assert len(lines) == 1, err
    assert LOG_LINE.match(lines[0]) and " warn  onnxruntime " in lines[0], lines[0]
    assert "\x1b[" not in err
    assert [l for l in err.splitlines() if not LOG_LINE.match(l)] == []
    # The warm-up's failed Slice run is ONNX Runtime's error, named too.
    assert re.search(r" error onnxruntime slice_steps:1: .*'step' value cannot be 0", err)


def test_regress_onnxruntime_log_follows_level_and_format(server_factory, tmp_path):
    """JSON format: the ORT warning is a JSON line; --log-level error: ORT's
    warning is not logged at all."""
    repo = tmp_path / "models"
    write_unused_initializer(repo)
    srv = server_factory.start("--log-format", "json", repository=repo)
    docs = [json.loads(l) for l in srv.stderr().splitlines()]
    hits = [d for d in docs if d["msg"].startswith("onnxruntime unused_init:1: Removing")]
    assert len(hits) == 1 and hits[0]["level"] == "warn", docs
    quiet = server_factory.start("--log-level", "error", repository=repo)
    assert "Removing initializer" not in quiet.stderr()
