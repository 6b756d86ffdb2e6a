"""Triton's statistics extension: GET /v2/models[/{m}[/versions/{v}]]/stats."""
import time

import pytest
import requests

from conftest import MAIN_MODELS, assert_error_response, infer_request, ok_json
from prom import scrape

DURATIONS = ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output",
             "cache_hit", "cache_miss")


def simple_inputs(rows):
    a = list(range(rows * 16))
    return [{"name": "INPUT0", "shape": [rows, 16], "datatype": "INT32", "data": a},
            {"name": "INPUT1", "shape": [rows, 16], "datatype": "INT32", "data": a}]


def check_shape(stat):
    assert set(stat) == {"name", "version", "last_inference", "inference_count",
                         "execution_count", "inference_stats", "response_stats", "batch_stats",
                         "memory_usage"}
    assert isinstance(stat["name"], str) and isinstance(stat["version"], str)
    for key in ("last_inference", "inference_count", "execution_count"):
        assert isinstance(stat[key], int) and stat[key] >= 0
    assert set(stat["inference_stats"]) == set(DURATIONS)
    for d in stat["inference_stats"].values():
        assert set(d) == {"count", "ns"} and all(isinstance(v, int) for v in d.values())
    for b in stat["batch_stats"]:
        assert set(b) == {"batch_size", "compute_input", "compute_infer", "compute_output"}
        assert b["batch_size"] >= 1
    sizes = [b["batch_size"] for b in stat["batch_stats"]]
    assert sizes == sorted(set(sizes))
    # Only decoupled models have response statistics (test_decoupled.py);
    # memory_usage is one host-memory entry (test_model_memory.py).
    assert stat["response_stats"] == {}
    (mem,) = stat["memory_usage"]
    assert set(mem) == {"type", "id", "byte_size"}
    assert mem["type"] == "CPU" and mem["id"] == 0
    assert isinstance(mem["byte_size"], int) and mem["byte_size"] > 0


@pytest.fixture(scope="module")
def ssrv(module_server_factory):
    return module_server_factory.start(
        models={"simple": MAIN_MODELS["simple"], "digits": MAIN_MODELS["digits"],
                "strings": MAIN_MODELS["strings"]})


def test_stats_of_every_model(ssrv):
    doc = ok_json(requests.get(ssrv.url + "/v2/models/stats"))
    assert set(doc) == {"model_stats"}
    names = [(s["name"], s["version"]) for s in doc["model_stats"]]
    assert names == [("digits", "1"), ("simple", "1"), ("strings", "1")]
    for stat in doc["model_stats"]:
        check_shape(stat)


def test_counts_after_requests(ssrv):
    t0 = int(time.time() * 1000)
    rows = [1, 3, 2, 1]
    for n in rows:
        ok_json(infer_request(ssrv.url, "simple", simple_inputs(n)))
    assert infer_request(ssrv.url, "simple", [], body="{}").status_code == 400
    t1 = int(time.time() * 1000)
    doc = ok_json(requests.get(ssrv.url + "/v2/models/simple/stats"))
    assert len(doc["model_stats"]) == 1
    stat = doc["model_stats"][0]
    check_shape(stat)
    inf = stat["inference_stats"]
    assert stat["name"] == "simple" and stat["version"] == "1"
    assert inf["success"]["count"] == len(rows)
    assert inf["fail"]["count"] == 1
    assert stat["inference_count"] == sum(rows)
    assert stat["execution_count"] == len(rows)  # one request at a time: each ran alone
    for key in ("queue", "compute_input", "compute_infer", "compute_output"):
        assert inf[key]["count"] == len(rows), key
    for key in ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output"):
        assert inf[key]["ns"] > 0, key
    assert inf["success"]["ns"] >= inf["queue"]["ns"] + inf["compute_infer"]["ns"]
    assert t0 - 1000 <= stat["last_inference"] <= t1 + 1000
    # The batch statistics account for every execution and every sample.
    batches = stat["batch_stats"]
    assert sum(b["compute_infer"]["count"] for b in batches) == stat["execution_count"]
    assert sum(b["batch_size"] * b["compute_infer"]["count"] for b in batches) == sum(rows)
    for b in batches:
        assert b["compute_input"]["count"] == b["compute_infer"]["count"] == \
            b["compute_output"]["count"]
    # The same numbers as the metrics.
    m = scrape(ssrv)
    assert m.get("nv_inference_request_success", model="simple", version="1") == len(rows)
    assert m.get("nv_inference_exec_count", model="simple", version="1") == \
        stat["execution_count"]


def test_version_path_and_untouched_model(ssrv):
    doc = ok_json(requests.get(ssrv.url + "/v2/models/strings/versions/1/stats"))
    assert [s["name"] for s in doc["model_stats"]] == ["strings"]
    stat = doc["model_stats"][0]
    check_shape(stat)
    assert stat["last_inference"] == 0 and stat["inference_count"] == 0
    assert stat["batch_stats"] == []
    assert all(v == {"count": 0, "ns": 0} for v in stat["inference_stats"].values())
    assert stat["inference_stats"]["cache_hit"] == {"count": 0, "ns": 0}


def test_unknown_model_or_version_is_404(ssrv):
    assert_error_response(requests.get(ssrv.url + "/v2/models/nope/stats"), 404)
    assert_error_response(requests.get(ssrv.url + "/v2/models/simple/versions/9/stats"), 404)
    assert_error_response(requests.get(ssrv.url + "/v2/models/simple/versions/stats"), 404)
    assert_error_response(requests.get(ssrv.url + "/v2/models/simple/x/stats"), 404)
    r = requests.post(ssrv.url + "/v2/models/stats")
    assert_error_response(r, 405)
    assert r.headers["Allow"] == "GET, HEAD"


def test_server_metadata_lists_statistics(ssrv):
    assert "statistics" in ok_json(requests.get(ssrv.url + "/v2"))["extensions"]


def test_unavailable_model_stats_is_404(server_factory):
    repo = server_factory.repository({"simple": MAIN_MODELS["simple"]})
    (repo / "broken" / "1").mkdir(parents=True)
    (repo / "broken" / "1" / "model.onnx").write_bytes(b"not onnx")
    srv = server_factory.start(repository=repo, wait=False)
    srv.wait_ready(path="/v2/health/live")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        r = requests.get(srv.url + "/v2/models/broken/stats")
        if r.status_code == 404 and "has no available versions" in r.text:
            break
        time.sleep(0.05)
    assert assert_error_response(r, 404).startswith(
        "Request for unknown model: 'broken' has no available versions: version 1: ")
    # The list holds only what is loaded.
    doc = ok_json(requests.get(srv.url + "/v2/models/stats"))
    assert [s["name"] for s in doc["model_stats"]] == ["simple"]
