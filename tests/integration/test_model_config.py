"""config.pbtxt: Triton's configuration drives batching, instances and
versions; GET /v2/models/{m}/config returns the effective configuration."""
import json
import shutil
import time

import numpy as np
import requests

from conftest import REPO_ROOT, assert_error_response

SIMPLE_ONNX = REPO_ROOT / "models" / "simple" / "1" / "model.onnx"

# Triton's documented config for its `simple` example, plus batching,
# two instances and every version.
SIMPLE_CONFIG = """
name: "simple"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [
  { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] },
  { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] }
]
output [
  { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] },
  { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] }
]
dynamic_batching { preferred_batch_size: [ 4, 8 ] max_queue_delay_microseconds: 500 }
instance_group [ { count: 2 kind: KIND_CPU } ]
version_policy: { all { } }
optimization { execution_accelerators { } }   # known to Triton, unused here
"""


def make_repo(tmp_path, config, versions=(1, 2), name="simple"):
    root = tmp_path / "models"
    for v in versions:
        (root / name / str(v)).mkdir(parents=True)
        shutil.copy(SIMPLE_ONNX, root / name / str(v) / "model.onnx")
    (root / name / "config.pbtxt").write_text(config)
    return root


def get_when_listening(url, timeout=30.0):
    """GET url once the server accepts connections (it is not ready: a model failed)."""
    deadline = time.time() + timeout
    while True:
        try:
            return requests.get(url, timeout=5)
        except requests.ConnectionError:
            if time.time() > deadline:
                raise
            time.sleep(0.05)


def rows(n):
    a = np.arange(n * 16, dtype=np.int32).reshape(n, 16)
    b = np.ones((n, 16), dtype=np.int32)
    return a, b, {"inputs": [
        {"name": "INPUT0", "shape": [n, 16], "datatype": "INT32", "data": a.ravel().tolist()},
        {"name": "INPUT1", "shape": [n, 16], "datatype": "INT32", "data": b.ravel().tolist()}]}


def test_config_drives_versions_batching_and_metadata(server_factory, tmp_path):
    srv = server_factory.start(repository=make_repo(tmp_path, SIMPLE_CONFIG))
    meta = requests.get(srv.url + "/v2/models/simple").json()
    assert meta["versions"] == ["1", "2"]
    assert meta["inputs"][0]["shape"] == [-1, 16]

    cfg = requests.get(srv.url + "/v2/models/simple/config").json()
    assert cfg["name"] == "simple"
    assert cfg["max_batch_size"] == 8
    assert cfg["input"][0]["data_type"] == "TYPE_INT32" and cfg["input"][0]["dims"] == [16]
    assert cfg["dynamic_batching"]["preferred_batch_size"] == [4, 8]
    assert cfg["dynamic_batching"]["max_queue_delay_microseconds"] == 500
    assert sum(g["count"] for g in cfg["instance_group"]) == 2
    assert requests.get(srv.url + "/v2/models/simple/versions/1/config").status_code == 200

    for path in ("/v2/models/simple/versions/1/infer", "/v2/models/simple/versions/2/infer",
                 "/v2/models/simple/infer"):
        a, b, body = rows(3)
        r = requests.post(srv.url + path, data=json.dumps(body))
        assert r.status_code == 200, r.text
        out = r.json()
        assert out["model_version"] == ("1" if "versions/1" in path else "2")
        assert np.array_equal(np.array(out["outputs"][0]["data"]).reshape(3, 16), a + b)

    # A configured max_batch_size is a hard limit, as in Triton.
    _, _, body = rows(9)
    r = requests.post(srv.url + "/v2/models/simple/infer", data=json.dumps(body))
    assert_error_response(r, 400)
    assert "max_batch_size 8" in r.json()["error"]
    assert "model_configuration" in requests.get(srv.url + "/v2").json()["extensions"]
    # The ignored Triton field is named in a warning.
    assert "'optimization' is not used" in srv.stderr()


def test_config_version_policy_latest_and_specific(server_factory, tmp_path):
    cfg = SIMPLE_CONFIG.replace("version_policy: { all { } }",
                                "version_policy: { specific { versions: [1, 3] } }")
    srv = server_factory.start(repository=make_repo(tmp_path, cfg, versions=(1, 2, 3)))
    assert requests.get(srv.url + "/v2/models/simple").json()["versions"] == ["1", "3"]
    assert requests.get(srv.url + "/v2/models/simple/versions/2/ready").status_code == 404
    assert requests.get(srv.url + "/v2/models/simple/versions/3/ready").status_code == 200


def test_config_syntax_error_names_line_and_column(server_factory, tmp_path):
    bad = "name: \"simple\"\nmax_batch_size: 8\ninput [ { name: \"INPUT0\" data_type: TYPE_INT32 dims: [ 16 }\n"
    srv = server_factory.start(repository=make_repo(tmp_path, bad, versions=(1,)), wait=False)
    assert get_when_listening(srv.url + "/v2/health/ready").status_code == 503
    r = requests.get(srv.url + "/v2/models/simple")
    assert_error_response(r, 404)
    assert "config.pbtxt:3:" in r.json()["error"]


def test_config_contradicting_the_onnx_file_fails_that_model(server_factory, tmp_path):
    cfg = SIMPLE_CONFIG.replace('{ name: "INPUT0" data_type: TYPE_INT32',
                                '{ name: "INPUT0" data_type: TYPE_FP32')
    srv = server_factory.start(repository=make_repo(tmp_path, cfg, versions=(1,)), wait=False)
    r = get_when_listening(srv.url + "/v2/models/simple")
    assert_error_response(r, 404)
    assert "INPUT0" in r.json()["error"] and "TYPE_FP32" in r.json()["error"]


def test_metadata_names_the_model_file_sha256(server_factory, tmp_path):
    import hashlib
    srv = server_factory.start(repository=make_repo(tmp_path, SIMPLE_CONFIG))
    meta = requests.get(srv.url + "/v2/models/simple").json()
    want = hashlib.sha256(SIMPLE_ONNX.read_bytes()).hexdigest()
    assert meta["parameters"]["sha256"] == want
    assert ("sha256 %s" % want[:12]) in srv.stderr()


WARMUP = """
model_warmup [
  { name: "zeros" batch_size: 2 count: 3
    inputs { key: "INPUT0" value: { data_type: TYPE_INT32 dims: [ 16 ] zero_data: true } }
    inputs { key: "INPUT1" value: { data_type: TYPE_INT32 dims: [ 16 ] random_data: true } } }
]
"""


def test_model_warmup_runs_before_ready(server_factory, tmp_path):
    srv = server_factory.start(repository=make_repo(tmp_path, SIMPLE_CONFIG + WARMUP))
    assert "warmed up in" in srv.stderr()
    assert requests.get(srv.url + "/v2/models/simple/ready").status_code == 200


def test_failing_warmup_keeps_the_model_unavailable(server_factory, tmp_path):
    bad = WARMUP.replace('random_data: true', 'input_data_file: "missing.bin"')
    srv = server_factory.start(repository=make_repo(tmp_path, SIMPLE_CONFIG + bad), wait=False)
    r = get_when_listening(srv.url + "/v2/models/simple")
    assert_error_response(r, 404)
    assert "warm-up 'zeros' failed" in r.json()["error"]
