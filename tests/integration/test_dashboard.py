"""The live dashboard: GET /dashboard (one self-contained page) and the JSON
it polls, rendered by headless Chromium under load. The screenshot goes to
tests/integration/artifacts/dashboard.png (git-ignored) for review."""
import re
import threading
import time
from pathlib import Path

import pytest
import requests

from cdp import CHROMIUM, Browser
from conftest import (MAIN_MODELS, check_self_contained_page,
                      infer_request, make_repository, ok_json)
from prom import scrape

ARTIFACTS = Path(__file__).resolve().parent / "artifacts"


def simple_inputs(rows):
    a = list(range(rows * 16))
    return [{"name": "INPUT0", "shape": [rows, 16], "datatype": "INT32", "data": a},
            {"name": "INPUT1", "shape": [rows, 16], "datatype": "INT32", "data": a}]


def digits_inputs():
    return [{"name": "pixels", "shape": [1, 64], "datatype": "FP32", "data": [0.5] * 64}]


@pytest.fixture(scope="module")
def dsrv(module_server_factory):
    return module_server_factory.start(
        "--io-threads", "2",
        models={"simple": MAIN_MODELS["simple"], "digits": MAIN_MODELS["digits"],
                "strings": MAIN_MODELS["strings"]})


def test_page_is_self_contained(dsrv):
    page = check_self_contained_page(dsrv.url, "/dashboard")
    assert "prefers-color-scheme: dark" in page


def test_data_shape(dsrv):
    doc = ok_json(requests.get(dsrv.url + "/dashboard/data"))
    s = doc["server"]
    assert s["name"] == "inferd" and s["ready"] is True
    assert s["now_ms"] >= s["start_ms"] > 0 and s["rss_bytes"] > 0
    assert s["open_connections"] >= 1
    bounds = doc["latency_bounds_seconds"]
    assert bounds == sorted(bounds) and bounds[0] == 0.0001
    assert [m["name"] for m in doc["models"]] == ["digits", "simple", "strings"]
    for m in doc["models"]:
        assert m["ready"] is True and m["reason"] == ""
        (v,) = m["versions"]
        assert v["version"] == "1" and len(v["sha256"]) == 64
        assert len(v["latency_buckets"]) == len(bounds) + 1
        for key in ("success", "fail", "inference_count", "execution_count", "queue_depth",
                    "queue_capacity", "last_inference", "max_batch_size", "memory_bytes"):
            assert isinstance(v[key], int), key
    # The memory a version took is the statistics' (test_model_memory.py).
    stats = ok_json(requests.get(dsrv.url + "/v2/models/stats"))["model_stats"]
    assert {(m["name"], m["versions"][0]["memory_bytes"]) for m in doc["models"]} == \
        {(s["name"], s["memory_usage"][0]["byte_size"]) for s in stats}
    meta = ok_json(requests.get(dsrv.url + "/v2/models/simple"))
    simple = [m for m in doc["models"] if m["name"] == "simple"][0]
    assert simple["versions"][0]["sha256"] == meta["parameters"]["sha256"]


def test_dashboard_renders_live_numbers(dsrv):
    if not Path(CHROMIUM).exists():
        pytest.fail("chromium not installed: %s" % CHROMIUM)
    stop = threading.Event()
    sent = {"simple": 0, "digits": 0, "errors": 0}

    def load():
        session = requests.Session()
        i = 0
        while not stop.is_set():
            i += 1
            if i % 3 == 0:
                r = infer_request(dsrv.url, "digits", digits_inputs())
                sent["digits"] += r.status_code == 200
            elif i % 25 == 0:
                # Some failures, so the error rate column shows something.
                r = session.post(dsrv.url + "/v2/models/simple/infer", data=b"{}")
                sent["errors"] += r.status_code == 400
            else:
                r = session.post(dsrv.url + "/v2/models/simple/infer",
                                 json={"inputs": simple_inputs(1 + i % 4)})
                sent["simple"] += r.status_code == 200

    loaders = [threading.Thread(target=load) for _ in range(2)]
    for t in loaders:
        t.start()
    browser = Browser(width=1280, height=900)
    try:
        browser.navigate(dsrv.url + "/dashboard")
        # Several polls under load: rates and percentiles are on screen.
        assert browser.wait_until("Number(document.body.dataset.polls) >= 6", timeout=60)
        assert browser.wait_until(
            "(document.querySelector('tr[data-model=simple] td[data-field=p99]') || {})"
            ".textContent !== '–'", timeout=30)
        ARTIFACTS.mkdir(exist_ok=True)
        browser.screenshot(str(ARTIFACTS / "dashboard.png"))
        live = browser.evaluate(
            "Array.from(document.querySelectorAll('tr[data-model]')).map(r => ({"
            "model: r.dataset.model, version: r.dataset.version || null,"
            "cells: Object.fromEntries(Array.from(r.querySelectorAll('td[data-field]'))"
            ".map(td => [td.dataset.field, td.textContent]))}))")
        assert [r["model"] for r in live] == ["digits", "simple", "strings"]
        simple = [r for r in live if r["model"] == "simple"][0]
        assert re.match(r"^[0-9,.]+/s", simple["cells"]["rate"]), simple
        assert simple["cells"]["rate"] != "0.00/s"
        assert re.match(r"^[0-9.]+ (µs|ms|s)$", simple["cells"]["p99"]), simple
        assert re.match(r"^[0-9.]+$", simple["cells"]["batch"]), simple
        assert re.match(r"^[0-9.]+ (B|KiB|MiB|GiB)$", simple["cells"]["memory"]), simple
        assert browser.evaluate("document.getElementById('state').textContent") == "ready"
    finally:
        stop.set()
        for t in loaders:
            t.join()
    try:
        # Load stopped: after the next poll the page shows exactly what
        # /metrics reports.
        expected = int(scrape(dsrv).get("nv_inference_request_success", model="simple",
                                         version="1"))
        assert expected >= sent["simple"] > 0
        polls = browser.evaluate("Number(document.body.dataset.polls)")
        assert browser.wait_until("Number(document.body.dataset.polls) >= %d" % (polls + 2))
        shown = browser.evaluate(
            "document.querySelector('tr[data-model=simple] td[data-field=success]')"
            ".dataset.value")
        assert int(shown) == expected
        text = browser.evaluate(
            "document.querySelector('tr[data-model=simple] td[data-field=success]').textContent")
        assert text == format(expected, ",")
        digits = browser.evaluate(
            "document.querySelector('tr[data-model=digits] td[data-field=success]')"
            ".dataset.value")
        assert int(digits) == int(scrape(dsrv).get("nv_inference_request_success",
                                                   model="digits", version="1"))
        # With no traffic the rate falls to zero.
        assert browser.wait_until(
            "document.querySelector('tr[data-model=simple] td[data-field=rate]')"
            ".textContent.startsWith('0.00/s')")
    finally:
        browser.close()


def test_dashboard_shows_canary_and_shadow(server_factory, tmp_path):
    """A model with a canary and a shadow copy gets a row in the Traffic
    panel whose numbers are the ones /metrics reports."""
    if not Path(CHROMIUM).exists():
        pytest.fail("chromium not installed: %s" % CHROMIUM)
    root = Path(__file__).resolve().parents[2]
    repo = tmp_path / "repo"
    make_repository(repo, {"digits": {1: root / "models/digits/1/model.onnx",
                                      2: root / "tests/models/digits_v2/2/model.onnx"}})
    (repo / "digits" / "config.pbtxt").write_text("version_policy: { all: {} }\n")
    srv = server_factory.start(repository=repo)
    table = {"canary": {"stable": 1, "version": 2, "weight": 20,
                        "guard": {"max_error_ratio": 0.5, "min_requests": 1000}},
             "shadow": {"version": 2, "percent": 100, "log_every": 0}}
    ok_json(requests.put(srv.url + "/v2/models/digits/routing", json=table))
    session = requests.Session()
    for i in range(40):
        r = session.post(srv.url + "/v2/models/digits/infer", json={"inputs": digits_inputs()},
                         headers={"x-request-id": "dash-%d" % i})
        assert r.status_code == 200
    m = scrape(srv)
    deadline = time.time() + 20
    while time.time() < deadline:
        m = scrape(srv)
        compared = m.get("inferd_shadow_requests_total", model="digits", version="1",
                         shadow_model="digits", shadow_version="2") or 0
        if compared + (m.get("inferd_shadow_dropped_total", model="digits", version="1",
                             shadow_model="digits", shadow_version="2", reason="queue_full")
                       or 0) >= 1:
            break
        time.sleep(0.1)
    browser = Browser(width=1280, height=900)
    try:
        browser.navigate(srv.url + "/dashboard")
        assert browser.wait_until("!!document.querySelector('tr[data-traffic=digits]')", timeout=30)
        # Copies still in flight finish, and the page shows the count within
        # a poll or two.
        deadline = time.time() + 30
        while True:
            cells = browser.evaluate(
                "Object.fromEntries(Array.from(document.querySelectorAll("
                "'tr[data-traffic=digits] td[data-field]'))"
                ".map(td => [td.dataset.field, td.textContent]))")
            m = scrape(srv)
            compared = int(m.get("inferd_shadow_requests_total", model="digits", version="1",
                                 shadow_model="digits", shadow_version="2"))
            if cells["compared"] == format(compared, ",") or time.time() > deadline:
                break
            time.sleep(0.1)
        assert compared > 0
        assert cells["compared"] == format(compared, ","), cells
        assert cells["canary"].startswith("v1 → v2"), cells
        assert cells["weight"] == "20%", cells
        assert cells["shadow"] == "digits v2 · 100%", cells
        assert cells["argmax"].endswith("%"), cells
        assert browser.evaluate("getComputedStyle(document.getElementById('traffic-panel')).display") != "none"
    finally:
        browser.close()
