"""Ensembles (platform "ensemble", serve/ensemble.h): pipelines of served
models, each step an internal call through the serving pipeline.

- the bundled example models/simple_chain (simple twice), over REST and
  grpcio;
- the issue's acceptance: a three-step ensemble whose first step is a
  preprocessing model (digits, from a PNG), whose second step is a remote
  version behind the gateway and whose third is local, giving the same
  answers as calling the steps one by one;
- errors that name the step, the nesting limit, and the statistics each
  step's model counts."""
import json
import os
import sys

import numpy as np
import pytest
import requests

from conftest import IDENTITY_MODELS, MAIN_MODELS, REPO_ROOT, assert_error_response
from grpc_client import Client, generate

CHAIN = REPO_ROOT / "models" / "simple_chain"
A = list(range(16))
B = [1] * 16


@pytest.fixture(scope="module")
def pbs(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("proto_py"))


def chain_body():
    return {"inputs": [{"name": "A", "datatype": "INT32", "shape": [1, 16], "data": A},
                       {"name": "B", "datatype": "INT32", "shape": [1, 16], "data": B}]}


def inference_count(srv, model):
    stats = requests.get(srv.url + "/v2/models/%s/stats" % model, timeout=30).json()
    return sum(v["inference_count"] for v in stats["model_stats"])


def test_bundled_chain_over_rest_and_grpc(server_factory, tmp_path, pbs):
    root = tmp_path / "models"
    root.mkdir()
    for name, d in (("simple", MAIN_MODELS["simple"]), ("simple_chain", CHAIN)):
        (root / name).symlink_to(d)
    srv = server_factory.start("--model-repository", str(root))
    r = requests.post(srv.url + "/v2/models/simple_chain/infer", json=chain_body(), timeout=30)
    assert r.status_code == 200, r.text
    outs = {o["name"]: o for o in r.json()["outputs"]}
    assert outs["TWICE_A"]["data"] == [2 * a for a in A]
    assert outs["TWICE_B"]["data"] == [2 * b for b in B]
    assert outs["TWICE_A"]["shape"] == [1, 16]
    meta = requests.get(srv.url + "/v2/models/simple_chain", timeout=30).json()
    assert meta["platform"] == "ensemble"
    assert [t["name"] for t in meta["inputs"]] == ["A", "B"]
    cfg = requests.get(srv.url + "/v2/models/simple_chain/config", timeout=30).json()
    steps = cfg["ensemble_scheduling"]["step"]
    assert [s["model_name"] for s in steps] == ["simple", "simple"]
    assert steps[1]["input_map"] == {"INPUT0": "SUM", "INPUT1": "DIFF"}
    # Each step counts in simple's statistics; the request in the ensemble's.
    assert inference_count(srv, "simple") == 2
    assert inference_count(srv, "simple_chain") == 1
    pb, hpb = pbs
    c = Client(pb, hpb, "127.0.0.1:%d" % srv.grpc_port)
    try:
        req = pb.ModelInferRequest(model_name="simple_chain")
        for name, data in (("A", A), ("B", B)):
            req.inputs.add(name=name, datatype="INT32", shape=[1, 16])
            req.raw_input_contents.append(np.array(data, dtype="<i4").tobytes())
        req.outputs.add(name="TWICE_B")
        resp = c.infer(req)
        assert [o.name for o in resp.outputs] == ["TWICE_B"]
        assert np.frombuffer(resp.raw_output_contents[0], dtype="<i4").tolist() == [2] * 16
    finally:
        c.close()


PIPELINE = """name: "digit_pipeline"
platform: "ensemble"
max_batch_size: 8
input [ { name: "IMAGE" data_type: TYPE_STRING dims: [ 1 ] } ]
output [
  { name: "PROBS" data_type: TYPE_FP32 dims: [ 10 ] },
  { name: "FINAL" data_type: TYPE_FP32 dims: [ 10 ] }
]
ensemble_scheduling {
  step [
    { model_name: "digits"
      input_map { key: "image" value: "IMAGE" }
      output_map { key: "probabilities" value: "PROBS" } },
    { model_name: "echo_fp32"
      input_map { key: "INPUT0" value: "PROBS" }
      output_map { key: "OUTPUT0" value: "REMOTE" } },
    { model_name: "identity_fp32"
      input_map { key: "INPUT0" value: "REMOTE" }
      output_map { key: "OUTPUT0" value: "FINAL" } }
  ]
}
"""


def ensemble_repo(tmp_path, name, config, models):
    root = tmp_path / "models"
    root.mkdir(exist_ok=True)
    for n, d in models.items():
        (root / n).symlink_to(d)
    (root / name / "1").mkdir(parents=True)
    (root / name / "config.pbtxt").write_text(config)
    return root


def pipeline_gateway(server_factory, tmp_path):
    """The three-step pipeline: an upstream serving echo_fp32, and a gateway
    with digits, identity_fp32, the remote echo_fp32 and digit_pipeline.
    Returns (gateway, upstream, the sample PNG)."""
    upstream = server_factory.start(models={"echo_fp32": IDENTITY_MODELS["identity_fp32"]})
    repo = ensemble_repo(tmp_path, "digit_pipeline", PIPELINE,
                         {"digits": MAIN_MODELS["digits"],
                          "identity_fp32": IDENTITY_MODELS["identity_fp32"]})
    cfg = tmp_path / "gateway.yaml"
    cfg.write_text("remote-models:\n  - model: echo_fp32\n    upstreams: [\"127.0.0.1:%d\"]\n"
                   % upstream.grpc_port)
    gw = server_factory.start("--config", str(cfg), "--model-repository", str(repo))
    return gw, upstream, (REPO_ROOT / "models" / "digits" / "sample_7.png").read_bytes()


def test_three_steps_preprocessing_remote_and_local_match_the_steps_one_by_one(
        server_factory, tmp_path, pbs):
    """digits turns the PNG into probabilities (preprocessing), an upstream
    behind the gateway echoes them (echo_fp32, a remote version), and a
    local identity gives them back: the same as calling each step."""
    gw, upstream, png = pipeline_gateway(server_factory, tmp_path)
    # The steps one by one (the PNG with the binary tensor extension).
    probs = binary_infer(gw, "digits", "image", png, "probabilities")
    assert int(np.argmax(probs)) == 7
    remote = json_floats(gw, "echo_fp32", "INPUT0", probs, "OUTPUT0")
    local = json_floats(gw, "identity_fp32", "INPUT0", remote, "OUTPUT0")
    # The ensemble.
    out = binary_infer(gw, "digit_pipeline", "IMAGE", png, None)
    assert np.array_equal(out["PROBS"], probs) and np.array_equal(out["FINAL"], local)
    assert np.array_equal(out["FINAL"], probs)
    # The remote step reached the upstream.
    assert inference_count(upstream, "echo_fp32") == 2  # one call above, one in the ensemble
    # Over gRPC, with grpcio: the same answer.
    pb, hpb = pbs
    c = Client(pb, hpb, "127.0.0.1:%d" % gw.grpc_port)
    try:
        req = pb.ModelInferRequest(model_name="digit_pipeline")
        req.inputs.add(name="IMAGE", datatype="BYTES", shape=[1, 1])
        req.raw_input_contents.append(len(png).to_bytes(4, "little") + png)
        resp = c.infer(req)
        got = {o.name: np.frombuffer(resp.raw_output_contents[i], dtype="<f4")
               for i, o in enumerate(resp.outputs)}
        assert np.array_equal(got["FINAL"], probs)
    finally:
        c.close()


TRITON_CLIENT = os.environ.get("TRITON_CLIENT_REPO")
TRITON_COMMON = os.environ.get("TRITON_COMMON_REPO")


@pytest.mark.skipif(not (TRITON_CLIENT and TRITON_COMMON), reason=(
    "TRITON_CLIENT_REPO and TRITON_COMMON_REPO do not name checkouts of Triton's client and "
    "common repositories: tritonclient is not shipped or packaged for Debian "
    "(docs/development.md); the test above makes the same calls with requests and grpcio"))
def test_three_steps_with_tritonclient(server_factory, tmp_path):
    """The same pipeline through Triton's own client library (HTTP and
    gRPC), built from the given sources as scripts/triton_examples.py
    builds it: the ensemble's answer equals the steps called one by one."""
    sys.path.insert(0, str(REPO_ROOT / "scripts"))
    import triton_examples
    site, _ = triton_examples.build_client(TRITON_CLIENT, TRITON_COMMON, str(tmp_path / "tc"))
    sys.path.insert(0, site)
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient
    gw, _, png = pipeline_gateway(server_factory, tmp_path)
    for lib, url in ((httpclient, "127.0.0.1:%d" % gw.port),
                     (grpcclient, "127.0.0.1:%d" % gw.grpc_port)):
        client = lib.InferenceServerClient(url=url)

        def call(model, name, array, dtype, output):
            inp = lib.InferInput(name, list(array.shape), dtype)
            inp.set_data_from_numpy(array)
            result = client.infer(model, [inp], outputs=[lib.InferRequestedOutput(output)])
            return result.as_numpy(output)

        probs = call("digits", "image", np.array([[png]], dtype=np.object_), "BYTES",
                     "probabilities")
        assert int(np.argmax(probs)) == 7
        remote = call("echo_fp32", "INPUT0", probs.reshape(1, -1), "FP32", "OUTPUT0")
        local = call("identity_fp32", "INPUT0", remote, "FP32", "OUTPUT0")
        final = call("digit_pipeline", "IMAGE", np.array([[png]], dtype=np.object_), "BYTES",
                     "FINAL")
        assert np.array_equal(final.reshape(-1), local.reshape(-1)), lib.__name__
        assert np.array_equal(final.reshape(-1), probs.reshape(-1)), lib.__name__
        client.close()


def binary_infer(srv, model, input_name, data, output):
    """One BYTES element with Triton's binary tensor extension; the
    outputs as float32 arrays (all of them when output is None)."""
    element = len(data).to_bytes(4, "little") + data
    head = {"inputs": [{"name": input_name, "datatype": "BYTES", "shape": [1, 1],
                        "parameters": {"binary_data_size": len(element)}}]}
    if output:
        head["outputs"] = [{"name": output}]
    h = json.dumps(head).encode()
    r = requests.post(srv.url + "/v2/models/%s/infer" % model, data=h + element, timeout=30,
                      headers={"Inference-Header-Content-Length": str(len(h))})
    assert r.status_code == 200, r.text
    outs = {o["name"]: np.array(o["data"], dtype=np.float32) for o in r.json()["outputs"]}
    return outs[output] if output else outs


def json_floats(srv, model, input_name, values, output):
    r = requests.post(srv.url + "/v2/models/%s/infer" % model, timeout=30, json={
        "inputs": [{"name": input_name, "datatype": "FP32", "shape": [1, len(values)],
                    "data": [float(v) for v in values]}],
        "outputs": [{"name": output}]})
    assert r.status_code == 200, r.text
    return np.array(r.json()["outputs"][0]["data"], dtype=np.float32)


BROKEN = """name: "broken"
platform: "ensemble"
max_batch_size: 8
input [ { name: "A" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "B" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 16 ] } ]
ensemble_scheduling { step [
  { model_name: "%s"
    input_map { key: "INPUT0" value: "A" } input_map { key: "%s" value: "B" }
    output_map { key: "OUTPUT0" value: "OUT" } } ] }
"""


def test_errors_name_the_step(server_factory, tmp_path):
    root = tmp_path / "models"
    root.mkdir()
    (root / "simple").symlink_to(MAIN_MODELS["simple"])
    for name, (model, key) in {"missing": ("nosuch", "INPUT1"),
                               "badmap": ("simple", "NOPE")}.items():
        (root / name / "1").mkdir(parents=True)
        (root / name / "config.pbtxt").write_text(
            BROKEN.replace('name: "broken"', 'name: "%s"' % name) % (model, key))
    # Two ensembles that run each other.
    for name, other in (("ping", "pong"), ("pong", "ping")):
        (root / name / "1").mkdir(parents=True)
        config = BROKEN.replace('name: "broken"', 'name: "%s"' % name) % (other, "B")
        (root / name / "config.pbtxt").write_text(
            config.replace('key: "INPUT0" value: "A"', 'key: "A" value: "A"')
            .replace('key: "OUTPUT0"', 'key: "OUT"'))
    srv = server_factory.start("--model-repository", str(root))

    def call(model):
        body = {"inputs": [{"name": "A", "datatype": "INT32", "shape": [1, 16], "data": A},
                           {"name": "B", "datatype": "INT32", "shape": [1, 16], "data": B}]}
        return requests.post(srv.url + "/v2/models/%s/infer" % model, json=body, timeout=30)
    assert assert_error_response(call("missing"), 404) == (
        "in ensemble 'missing', step 0 ('nosuch'): Request for unknown model: 'nosuch' is not "
        "found")
    assert assert_error_response(call("badmap"), 400) == (
        "in ensemble 'badmap', step 0 ('simple'): model 'simple' has no input 'NOPE' (input_map)")
    msg = assert_error_response(call("ping"), 400)
    assert msg.startswith("in ensemble 'pong', step 0 ('ping'): ensemble 'ping' runs inside 8 "
                          "ensembles already (the most is 8)"), msg
    # A broken ensemble config does not load, with the reason in the index.
    (root / "cycle" / "1").mkdir(parents=True)
    (root / "cycle" / "config.pbtxt").write_text(
        'platform: "ensemble"\ninput [ { name: "A" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
        'output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
        'ensemble_scheduling { step [ { model_name: "simple" output_map { key: "x" value: "A" '
        '} } ] }\n')
    srv2 = server_factory.start("--model-repository", str(root), wait=False)
    srv2.wait_ready(path="/v2/health/live")
    rows = requests.post(srv2.url + "/v2/repository/index", timeout=30).json()
    row = [x for x in rows if x["name"] == "cycle"][0]
    assert row["state"] == "UNAVAILABLE"
    assert "output_map gives 'A', which is an ensemble input" in row["reason"], row


def test_steps_carry_the_clients_api_key(server_factory, tmp_path):
    """A step is a call of its own with the client's headers: a key scoped
    to the ensemble alone is refused at the first step (403, the step
    named); a key that may run both the ensemble and its step model gets
    the answer."""
    from test_auth import auth_yaml, new_key
    only, both = new_key(), new_key()
    cfg = tmp_path / "inferd.yaml"
    cfg.write_text(auth_yaml([("chain-only", [only[1]], ["infer:simple_chain"]),
                              ("chain-and-simple", [both[1]],
                               ["infer:simple_chain", "infer:simple"])]))
    root = tmp_path / "models"
    root.mkdir()
    for name, d in (("simple", MAIN_MODELS["simple"]), ("simple_chain", CHAIN)):
        (root / name).symlink_to(d)
    srv = server_factory.start("--config", str(cfg), "--model-repository", str(root))
    url = srv.url + "/v2/models/simple_chain/infer"
    r = requests.post(url, json=chain_body(), timeout=30,
                      headers={"Authorization": "Bearer " + only[0]})
    msg = assert_error_response(r, 403)
    assert msg.startswith("in ensemble 'simple_chain', step 0 ('simple'): "), msg
    r = requests.post(url, json=chain_body(), timeout=30,
                      headers={"Authorization": "Bearer " + both[0]})
    assert r.status_code == 200, r.text
    assert requests.post(url, json=chain_body(), timeout=30).status_code == 401
