"""Health, server metadata and model metadata endpoints."""
import subprocess

import pytest
import requests

from conftest import (INFERD_BIN, MAIN_MODELS, IDENTITY_TYPES, assert_error_response, ok_json,
                      tensor, infer_request)

SIMPLE_META = {
    "name": "simple",
    "versions": ["1"],
    "platform": "onnxruntime_onnx",
    "inputs": [
        {"name": "INPUT0", "datatype": "INT32", "shape": [-1, 16]},
        {"name": "INPUT1", "datatype": "INT32", "shape": [-1, 16]},
    ],
    "outputs": [
        {"name": "OUTPUT0", "datatype": "INT32", "shape": [-1, 16]},
        {"name": "OUTPUT1", "datatype": "INT32", "shape": [-1, 16]},
    ],
}


def strip_io(meta):
    """Keep only name/datatype/shape of each input/output (extra keys allowed)."""
    return [{k: t[k] for k in ("name", "datatype", "shape")} for t in meta]


def test_live(base_url):
    r = requests.get(base_url + "/v2/health/live", timeout=10)
    assert r.status_code == 200
    assert r.content == b""


def test_ready(base_url):
    r = requests.get(base_url + "/v2/health/ready", timeout=10)
    assert r.status_code == 200
    assert r.content == b""


def test_server_metadata(base_url):
    doc = ok_json(requests.get(base_url + "/v2", timeout=10))
    assert doc["name"] == "inferd"
    assert isinstance(doc["extensions"], list)
    assert all(isinstance(e, str) and e for e in doc["extensions"])
    version = subprocess.run([str(INFERD_BIN), "--version"], capture_output=True,
                             text=True, timeout=30).stdout.strip()
    assert version == "inferd " + doc["version"]


@pytest.mark.parametrize("path", ["/v2/models/simple", "/v2/models/simple/versions/1"])
def test_simple_metadata(base_url, path):
    doc = ok_json(requests.get(base_url + path, timeout=10))
    assert doc["name"] == SIMPLE_META["name"]
    assert doc["versions"] == SIMPLE_META["versions"]
    assert doc["platform"] == SIMPLE_META["platform"]
    assert strip_io(doc["inputs"]) == SIMPLE_META["inputs"]
    assert strip_io(doc["outputs"]) == SIMPLE_META["outputs"]


def test_digits_metadata(base_url):
    doc = ok_json(requests.get(base_url + "/v2/models/digits", timeout=10))
    assert doc["name"] == "digits"
    assert doc["versions"] == ["1"]
    assert doc["platform"] == "onnxruntime_onnx"
    # pixels, or the picture they come from (models/digits/preprocess.json)
    assert strip_io(doc["inputs"]) == [{"name": "pixels", "datatype": "FP32", "shape": [-1, 64]},
                                       {"name": "image", "datatype": "BYTES", "shape": [-1, 1]}]
    assert strip_io(doc["outputs"]) == [
        {"name": "probabilities", "datatype": "FP32", "shape": [-1, 10]},
        {"name": "label", "datatype": "INT64", "shape": [-1]},
    ]


def test_strings_metadata(base_url):
    doc = ok_json(requests.get(base_url + "/v2/models/strings", timeout=10))
    assert doc["name"] == "strings"
    assert strip_io(doc["inputs"]) == [{"name": "TEXT", "datatype": "BYTES", "shape": [-1]}]
    assert strip_io(doc["outputs"]) == [
        {"name": "UPPER", "datatype": "BYTES", "shape": [-1]},
        {"name": "ECHO", "datatype": "BYTES", "shape": [-1]},
    ]


@pytest.mark.parametrize("t", IDENTITY_TYPES)
def test_identity_metadata(base_url, t):
    doc = ok_json(requests.get(base_url + "/v2/models/identity_" + t, timeout=10))
    assert doc["name"] == "identity_" + t
    assert doc["versions"] == ["1"]
    dt = t.upper()
    assert strip_io(doc["inputs"]) == [{"name": "INPUT0", "datatype": dt, "shape": [-1, -1]}]
    assert strip_io(doc["outputs"]) == [{"name": "OUTPUT0", "datatype": dt, "shape": [-1, -1]}]


@pytest.mark.parametrize("path", ["/v2/models/simple/ready", "/v2/models/simple/versions/1/ready",
                                  "/v2/models/digits/ready", "/v2/models/strings/ready",
                                  "/v2/models/identity_bytes/ready"])
def test_model_ready(base_url, path):
    r = requests.get(base_url + path, timeout=10)
    assert r.status_code == 200, r.text
    assert r.content == b""


def test_newest_version_is_served(server_factory):
    """Versions 2 and 10 on disk: 10 (numerically largest, not "2") is served."""
    onnx = MAIN_MODELS["simple"] / "1" / "model.onnx"
    srv = server_factory.start(models={"simple": {2: onnx, 10: onnx}})
    doc = ok_json(requests.get(srv.url + "/v2/models/simple", timeout=10))
    assert doc["versions"] == ["10"]
    assert requests.get(srv.url + "/v2/models/simple/versions/10/ready", timeout=10).status_code == 200
    inputs = [tensor("INPUT0", list(range(16)), "INT32", [1, 16]),
              tensor("INPUT1", [1] * 16, "INT32", [1, 16])]
    for version in (None, "10"):
        out = ok_json(infer_request(srv.url, "simple", inputs, version=version))
        assert out["model_name"] == "simple"
        assert out["model_version"] == "10"
        assert out["outputs"][0]["data"] == list(range(1, 17))


def test_not_ready_when_a_model_fails_to_load(server_factory, tmp_path):
    """A model that cannot load makes /v2/health/ready 503 (JSON error), its
    own ready endpoint an error, and leaves the other models serving."""
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"this is not an ONNX protobuf")
    srv = server_factory.start(models={"simple": MAIN_MODELS["simple"], "broken": {1: bad}},
                               wait=False)
    srv.wait_ready(path="/v2/health/live")
    # wait for the load attempts to finish ("ready" log line)
    srv.wait_ready(path="/v2/models/simple/ready")
    assert_error_response(requests.get(srv.url + "/v2/health/ready", timeout=10), 503)
    r = requests.get(srv.url + "/v2/models/broken/ready", timeout=10)
    assert r.status_code != 200
    assert_error_response(r, r.status_code)
    inputs = [tensor("INPUT0", list(range(16)), "INT32", [1, 16]),
              tensor("INPUT1", [1] * 16, "INT32", [1, 16])]
    out = ok_json(infer_request(srv.url, "simple", inputs))
    assert out["outputs"][0]["data"] == list(range(1, 17))
    assert requests.get(srv.url + "/v2/health/live", timeout=10).status_code == 200
