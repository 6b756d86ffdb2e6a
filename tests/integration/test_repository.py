"""Model lifecycle: control modes, the repository API, reload without a lost
request, poll mode, failed reloads, and memory across load/unload cycles."""
import json
import re
import shutil
import threading
import time

import numpy as np
import pytest
import requests

from conftest import MAIN_MODELS, REPO_ROOT, assert_error_response, sanitized_binary

SIMPLE_ONNX = REPO_ROOT / "models" / "simple" / "1" / "model.onnx"


def copy_models(tmp_path, names=("simple", "digits")):
    root = tmp_path / "models"
    for name in names:
        shutil.copytree(MAIN_MODELS[name], root / name)
    return root


def post(url, path, body=None):
    return requests.post(url + path, data=json.dumps(body) if body is not None else b"",
                         timeout=120)


def simple_body(seed):
    a = (np.arange(16, dtype=np.int32) + seed)
    return a, {"inputs": [
        {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": a.tolist()},
        {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [1] * 16}]}


def infer_simple(url, seed=0):
    a, body = simple_body(seed)
    r = requests.post(url + "/v2/models/simple/infer", data=json.dumps(body), timeout=60)
    return r, a


def unloaded(srv, model, version):
    """How many times the log says this version was unloaded."""
    return len(re.findall(r"model %s version %s sha256 [0-9a-f]{12} unloaded" % (model, version),
                          srv.stderr()))


def wait_for(predicate, timeout=30.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def test_explicit_mode_load_unload(server_factory, tmp_path):
    srv = server_factory.start("--model-control-mode", "explicit",
                               repository=copy_models(tmp_path))
    index = post(srv.url, "/v2/repository/index").json()
    assert {e["name"] for e in index} == {"simple", "digits"}
    assert all(e["state"] == "UNAVAILABLE" and e["reason"] == "unloaded" for e in index)
    assert post(srv.url, "/v2/repository/index", {"ready": True}).json() == []
    assert_error_response(infer_simple(srv.url)[0], 404)

    assert post(srv.url, "/v2/repository/models/simple/load").status_code == 200
    r, a = infer_simple(srv.url)
    assert r.status_code == 200 and r.json()["outputs"][0]["data"] == (a + 1).tolist()
    ready = post(srv.url, "/v2/repository/index", {"ready": True}).json()
    assert ready == [{"name": "simple", "version": "1", "state": "READY", "reason": ""}]

    assert post(srv.url, "/v2/repository/models/simple/unload").status_code == 200
    assert_error_response(infer_simple(srv.url)[0], 404)
    assert_error_response(post(srv.url, "/v2/repository/models/simple/unload"), 400)
    assert_error_response(post(srv.url, "/v2/repository/models/nope/load"), 404)
    assert wait_for(lambda: unloaded(srv, "simple", 1) == 1)


def test_load_model_flag_and_wildcard(server_factory, tmp_path):
    srv = server_factory.start("--model-control-mode", "explicit", "--load-model", "digits",
                               repository=copy_models(tmp_path))
    assert requests.get(srv.url + "/v2/models/digits/ready").status_code == 200
    assert requests.get(srv.url + "/v2/models/simple/ready").status_code == 404
    srv2 = server_factory.start("--model-control-mode", "explicit", "--load-model", "*",
                                repository=copy_models(tmp_path / "b"))
    assert requests.get(srv2.url + "/v2/models/simple/ready").status_code == 200


def test_repository_api_refused_outside_explicit_mode(server_factory, tmp_path):
    srv = server_factory.start(repository=copy_models(tmp_path, ("simple",)))
    r = post(srv.url, "/v2/repository/models/simple/load")
    assert_error_response(r, 400)
    assert "explicit" in r.json()["error"]
    assert post(srv.url, "/v2/repository/index").json()[0]["state"] == "READY"
    assert requests.get(srv.url + "/v2/repository/index").status_code == 405


def test_reload_under_load_loses_no_request(server_factory, tmp_path):
    """Clients hammer `simple` while it is reloaded five times: every request
    gets exactly one correct 200."""
    srv = server_factory.start("--model-control-mode", "explicit", "--load-model", "simple",
                               repository=copy_models(tmp_path, ("simple",)))
    stop = threading.Event()
    results = []
    lock = threading.Lock()

    def client(k):
        session = requests.Session()
        i = 0
        while not stop.is_set():
            a, body = simple_body(k * 100000 + i)
            r = session.post(srv.url + "/v2/models/simple/infer", data=json.dumps(body),
                             timeout=60)
            ok = r.status_code == 200 and r.json()["outputs"][0]["data"] == (a + 1).tolist()
            with lock:
                results.append((r.status_code, ok))
            i += 1

    threads = [threading.Thread(target=client, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    try:
        reloads = 0
        while reloads < 5 or len(results) < 200:
            assert post(srv.url, "/v2/repository/models/simple/load").status_code == 200
            reloads += 1
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert len(results) >= 200
    bad = [r for r in results if r != (200, True)]
    assert not bad, bad[:5]
    # The replaced versions were unloaded once drained.
    assert wait_for(lambda: unloaded(srv, "simple", 1) >= reloads)


def test_failed_reload_keeps_the_old_version(server_factory, tmp_path):
    repo = copy_models(tmp_path, ("simple",))
    srv = server_factory.start("--model-control-mode", "explicit", "--load-model", "simple",
                               repository=repo)
    (repo / "simple" / "config.pbtxt").write_text("max_batch_size: [oops\n")
    r = post(srv.url, "/v2/repository/models/simple/load")
    assert_error_response(r, 400)
    assert "previous versions keep serving" in r.json()["error"]
    assert infer_simple(srv.url)[0].status_code == 200
    assert requests.get(srv.url + "/v2/health/ready").status_code == 200


def test_load_with_json_config_override(server_factory, tmp_path):
    srv = server_factory.start("--model-control-mode", "explicit",
                               repository=copy_models(tmp_path, ("simple",)))
    config = {"name": "simple", "max_batch_size": 4,
              "input": [{"name": "INPUT0", "data_type": "TYPE_INT32", "dims": ["16"]},
                        {"name": "INPUT1", "data_type": "TYPE_INT32", "dims": [16]}],
              "dynamic_batching": {"max_queue_delay_microseconds": 200},
              "instance_group": [{"count": 2, "kind": "KIND_CPU"}],
              "parameters": {"note": {"string_value": "from the API"}}}
    r = post(srv.url, "/v2/repository/models/simple/load",
             {"parameters": {"config": json.dumps(config)}})
    assert r.status_code == 200, r.text
    cfg = requests.get(srv.url + "/v2/models/simple/config").json()
    assert cfg["max_batch_size"] == 4
    assert sum(g["count"] for g in cfg["instance_group"]) == 2
    assert infer_simple(srv.url)[0].status_code == 200
    bad = post(srv.url, "/v2/repository/models/simple/load",
               {"parameters": {"config": "{not json"}})
    assert_error_response(bad, 400)


def test_poll_mode_picks_up_new_versions_and_removals(server_factory, tmp_path):
    repo = copy_models(tmp_path, ("simple", "digits"))
    srv = server_factory.start("--model-control-mode", "poll", "--repository-poll-secs", "1",
                               repository=repo)
    assert requests.get(srv.url + "/v2/models/simple").json()["versions"] == ["1"]
    (repo / "simple" / "2").mkdir()
    shutil.copy(SIMPLE_ONNX, repo / "simple" / "2" / "model.onnx")
    assert wait_for(lambda: requests.get(srv.url + "/v2/models/simple").json()
                    .get("versions") == ["2"])
    assert infer_simple(srv.url)[0].json()["model_version"] == "2"
    shutil.rmtree(repo / "digits")
    assert wait_for(lambda: requests.get(srv.url + "/v2/models/digits").status_code == 404)


def rss_bytes(pid):
    with open("/proc/%d/statm" % pid) as f:
        return int(f.read().split()[1]) * 4096


def test_memory_returns_after_load_unload_cycles(server_factory, tmp_path):
    """50 load/unload cycles: RSS ends within 10% of its level after 5."""
    if sanitized_binary():
        pytest.skip("RSS is not meaningful under AddressSanitizer's quarantine")
    srv = server_factory.start("--model-control-mode", "explicit",
                               repository=copy_models(tmp_path, ("digits",)))
    pid = srv.proc.pid
    baseline = None
    for cycle in range(1, 51):
        assert post(srv.url, "/v2/repository/models/digits/load").status_code == 200
        assert post(srv.url, "/v2/repository/models/digits/unload").status_code == 200
        assert wait_for(lambda: unloaded(srv, "digits", 1) >= cycle)
        if cycle == 5:
            baseline = rss_bytes(pid)
    final = rss_bytes(pid)
    assert final <= baseline * 1.10, (baseline, final)


def write_addv(path, version, note=""):
    """A model whose output names its version: OUTPUT0 = INPUT0 + version."""
    import onnx
    from onnx import TensorProto, helper
    c = helper.make_tensor("C", TensorProto.INT32, [1], [version])
    graph = helper.make_graph(
        [helper.make_node("Add", ["INPUT0", "C"], ["OUTPUT0"])], "addv",
        [helper.make_tensor_value_info("INPUT0", TensorProto.INT32, ["batch", 16])],
        [helper.make_tensor_value_info("OUTPUT0", TensorProto.INT32, ["batch", 16])], [c],
        doc_string=note)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))


def test_twenty_reloads_under_constant_load(server_factory, tmp_path):
    """Constant load on several connections while the model is reloaded 20
    times (new version directories, changed files, plain load calls): no
    request fails or is lost, and each response's data proves the version it
    names produced it."""
    repo = tmp_path / "models"
    write_addv(repo / "addv" / "1" / "model.onnx", 1)
    srv = server_factory.start("--model-control-mode", "explicit", "--load-model", "addv",
                               repository=repo)
    stop = threading.Event()
    results, lock = [], threading.Lock()

    def client(k):
        session = requests.Session()
        i = 0
        while not stop.is_set():
            a = np.arange(16, dtype=np.int32) + k * 1000 + i
            body = {"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "INT32",
                                "data": a.tolist()}]}
            try:
                r = session.post(srv.url + "/v2/models/addv/infer", data=json.dumps(body),
                                 timeout=60)
                out = r.json()
                v = int(out.get("model_version", -1))
                ok = r.status_code == 200 and out["outputs"][0]["data"] == (a + v).tolist()
                outcome = (r.status_code, ok, v)
            except Exception as e:  # a lost response would surface here
                outcome = (repr(e), False, -1)
            with lock:
                results.append(outcome)
            i += 1

    threads = [threading.Thread(target=client, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    version = 1
    try:
        for i in range(20):
            if i % 3 == 0:
                version += 1
                write_addv(repo / "addv" / str(version) / "model.onnx", version)
            elif i % 3 == 1:
                write_addv(repo / "addv" / str(version) / "model.onnx", version, "rewrite %d" % i)
            r = post(srv.url, "/v2/repository/models/addv/load")
            assert r.status_code == 200, r.text
            time.sleep(0.05)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert len(results) >= 20
    bad = [r for r in results if not (r[0] == 200 and r[1])]
    assert not bad, bad[:5]
    seen = {r[2] for r in results}
    assert version in seen and len(seen) > 1, seen
    meta = requests.get(srv.url + "/v2/models/addv").json()
    assert meta["versions"] == [str(version)]


def test_readiness_turns_false_at_sigterm(server_factory, tmp_path):
    """A readiness request that completes during the drain gets 503 (new
    connections are refused: the listener closes at once)."""
    import signal
    import socket
    from conftest import HttpReader, connect
    from prom import wait_for as scrape_until
    srv = server_factory.start(repository=copy_models(tmp_path, ("simple",)))
    s = connect(srv.port)
    try:
        s.sendall(b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n")
        scrape_until(srv, lambda m: m.get("inferd_open_connections") >= 1)  # accepted
        srv.proc.send_signal(signal.SIGTERM)

        def refused():  # the drain has reached every loop: its listener is closed
            try:
                socket.create_connection(("127.0.0.1", srv.port), timeout=1).close()
                return False
            except ConnectionRefusedError:
                return True
            except ConnectionResetError:
                # Queued on a listener that closed before accepting it: the
                # next attempt is refused.
                return False
        assert wait_for(refused, 30), srv.stderr()
        s.sendall(b"\r\n")
        resp = HttpReader(s).read_response()
        assert resp.status == 503
        assert b"shutting down" in resp.body
    finally:
        s.close()
    srv.proc.wait(timeout=30)  # the drain ends by itself
    assert not srv.stop(signal.SIGTERM, require_running=False)


# ---- failed loads you can see, safe publishing (issue 22) --------------------

POLL = ("--model-control-mode", "poll", "--repository-poll-secs", "1")


@pytest.fixture(scope="module")
def pbs(tmp_path_factory):
    from grpc_client import generate
    return generate(tmp_path_factory.mktemp("proto_py"))


def index_rows(url):
    r = post(url, "/v2/repository/index")
    assert r.status_code == 200, r.text
    return r.json()


def index_row(rows, name, version=None):
    found = [r for r in rows if r["name"] == name and r.get("version") == version]
    assert len(found) <= 1, rows
    return found[0] if found else None


def infer_addv(url, seed=0):
    a = np.arange(16, dtype=np.int32) + seed
    body = {"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "INT32",
                        "data": a.tolist()}]}
    r = requests.post(url + "/v2/models/addv/infer", data=json.dumps(body), timeout=60)
    assert r.status_code == 200, r.text
    out = r.json()
    v = int(out["model_version"])
    assert out["outputs"][0]["data"] == (a + v).tolist()
    return v


def serves_version(url, version):
    return lambda: infer_addv(url) == version


def publish_version(repo, tmp_path, model, version, write):
    """Stage-then-mv: write the version directory next to the repository
    (same filesystem), then rename it into place in one step."""
    stage = tmp_path / "stage" / str(version)
    write(stage / "model.onnx")
    stage.rename(repo / model / str(version))


def load_metrics(srv):
    from prom import scrape
    return scrape(srv)


def warnings_about(srv, text):
    return [l for l in srv.stderr().splitlines() if " warn " in l and text in l]


def test_regress_broken_version_in_poll_mode_is_visible(server_factory, tmp_path, pbs):
    """A broken version pushed in poll mode: the index (REST and gRPC) lists it
    UNAVAILABLE with the reason next to the version still serving, readiness
    stays 200 and the metrics count the failure; the same broken files are
    not tried again at every poll, and a fixed version clears the gauge."""
    from grpc_client import Client
    repo = tmp_path / "models"
    write_addv(repo / "addv" / "1" / "model.onnx", 1)
    srv = server_factory.start(*POLL, repository=repo)
    publish_version(repo, tmp_path, "addv", 2,
                    lambda p: (p.parent.mkdir(parents=True), p.write_bytes(b"not a model")))
    assert wait_for(lambda: index_row(index_rows(srv.url), "addv", "2") is not None)
    rows = index_rows(srv.url)
    assert index_row(rows, "addv", "1") == {"name": "addv", "version": "1", "state": "READY",
                                            "reason": ""}
    broken = index_row(rows, "addv", "2")
    assert broken["state"] == "UNAVAILABLE"
    assert "addv/2/model.onnx" in broken["reason"], broken
    assert infer_addv(srv.url) == 1
    assert requests.get(srv.url + "/v2/health/ready").status_code == 200
    assert requests.get(srv.url + "/v2/models/addv/ready").status_code == 200
    assert post(srv.url, "/v2/repository/index", {"ready": True}).json() == [
        {"name": "addv", "version": "1", "state": "READY", "reason": ""}]

    c = Client(*pbs, "127.0.0.1:%d" % srv.grpc_port)
    try:
        grpc_rows = {(m.name, m.version, m.state, m.reason)
                     for m in c.call("RepositoryIndex").models}
    finally:
        c.close()
    assert grpc_rows == {("addv", "1", "READY", ""),
                         ("addv", "2", "UNAVAILABLE", broken["reason"])}

    s = load_metrics(srv)
    assert s.types["inferd_model_load_failures_total"] == "counter"
    assert s.get("inferd_model_load_failures_total", model="addv", reason="load") == 1
    for other in ("config", "layout", "io", "backend", "warmup", "memory"):
        assert s.get("inferd_model_load_failures_total", model="addv", reason=other) == 0
    assert s.has("inferd_model_last_load_success", model="addv")
    assert s.get("inferd_model_last_load_success", model="addv") == 0

    # A good version 3 takes at least two polls to settle and load: the
    # broken version 2 was not loaded again meanwhile.
    publish_version(repo, tmp_path, "addv", 3, lambda p: write_addv(p, 3))
    assert wait_for(serves_version(srv.url, 3), timeout=60)
    s = load_metrics(srv)
    assert s.get("inferd_model_load_failures_total", model="addv", reason="load") == 1
    assert s.get("inferd_model_last_load_success", model="addv") == 1
    assert len(re.findall(r"model addv version 2 failed to load", srv.stderr())) == 1
    assert index_row(index_rows(srv.url), "addv", "3")["state"] == "READY"


def test_regress_failed_explicit_load_is_counted_and_shown(server_factory, tmp_path):
    repo = copy_models(tmp_path, ("simple",))
    srv = server_factory.start("--model-control-mode", "explicit", "--load-model", "simple",
                               repository=repo)
    s = load_metrics(srv)
    assert s.get("inferd_model_last_load_success", model="simple") == 1
    assert s.get("inferd_model_load_failures_total", model="simple", reason="config") == 0
    (repo / "simple" / "config.pbtxt").write_text("max_batch_size: [oops\n")
    assert_error_response(post(srv.url, "/v2/repository/models/simple/load"), 400)
    rows = index_rows(srv.url)
    assert index_row(rows, "simple", "1")["state"] == "READY"
    whole = index_row(rows, "simple")
    assert whole["state"] == "UNAVAILABLE" and whole["reason"].startswith("config.pbtxt:"), rows
    s = load_metrics(srv)
    assert s.get("inferd_model_load_failures_total", model="simple", reason="config") == 1
    assert s.get("inferd_model_last_load_success", model="simple") == 0
    # Unloaded, the model has no last outcome any more; its counter stays.
    assert post(srv.url, "/v2/repository/models/simple/unload").status_code == 200
    s = load_metrics(srv)
    assert not s.has("inferd_model_last_load_success", model="simple")
    assert s.get("inferd_model_load_failures_total", model="simple", reason="config") == 1


def test_regress_unservable_directory_shows_and_warns_once(server_factory, tmp_path):
    """Model files without a version directory, and a version directory
    without model.onnx, show in the index with the reason and are logged
    once, however many polls pass; readiness does not depend on them."""
    repo = tmp_path / "models"
    write_addv(repo / "addv" / "1" / "model.onnx", 1)
    (repo / "flat").mkdir()
    shutil.copy(SIMPLE_ONNX, repo / "flat" / "model.onnx")
    write_addv(repo / "half" / "1" / "model.onnx", 1)
    (repo / "half" / "2").mkdir()
    (repo / "half" / "2" / "model.pt").write_bytes(b"misnamed")
    (repo / "scripts").mkdir()  # no model files: not a model, not reported
    (repo / "scripts" / "build.py").write_text("print('hi')\n")
    srv = server_factory.start(*POLL, repository=repo)

    rows = index_rows(srv.url)
    assert index_row(rows, "flat") == {
        "name": "flat", "state": "UNAVAILABLE",
        "reason": "no version directory: put the model in flat/1/model.onnx"}
    assert index_row(rows, "half", "1")["state"] == "READY"
    assert index_row(rows, "half", "2") == {
        "name": "half", "version": "2", "state": "UNAVAILABLE",
        "reason": "version directory 2 has no model.onnx: put the model in half/2/model.onnx"}
    assert not [r for r in rows if r["name"] == "scripts"]
    assert requests.get(srv.url + "/v2/health/ready").status_code == 200

    # One that appears while the server runs is reported too, once settled.
    (repo / "late").mkdir()
    (repo / "late" / "config.pbtxt").write_text("max_batch_size: 0\n")
    assert wait_for(lambda: warnings_about(srv, "model directory late cannot be served"))
    # Two new versions of addv, each settling over two polls: at least four
    # polls pass.
    for v in (2, 3):
        publish_version(repo, tmp_path, "addv", v, lambda p, v=v: write_addv(p, v))
        assert wait_for(serves_version(srv.url, v), timeout=60)
    assert len(warnings_about(srv, "model directory flat cannot be served")) == 1
    assert len(warnings_about(srv, "model directory late cannot be served")) == 1
    assert len(warnings_about(srv, "model half: version directory 2 has no model.onnx")) == 1
    assert not [l for l in srv.stderr().splitlines() if "scripts" in l]
    assert index_row(index_rows(srv.url), "late")["state"] == "UNAVAILABLE"

    s = load_metrics(srv)
    for model in ("flat", "late", "half"):
        assert s.get("inferd_model_load_failures_total", model=model, reason="layout") == 1
        assert s.get("inferd_model_last_load_success", model=model) == 0
    assert s.get("inferd_model_last_load_success", model="addv") == 1
    assert requests.get(srv.url + "/v2/health/ready").status_code == 200
    # A directory that goes away takes its outcome with it.
    shutil.rmtree(repo / "flat")
    assert wait_for(lambda: not load_metrics(srv).has("inferd_model_last_load_success",
                                                      model="flat"))
    assert index_row(index_rows(srv.url), "flat") is None


def test_regress_half_written_model_is_never_loaded(server_factory, tmp_path):
    """A model file written slowly in place (half, then past a poll the
    rest) is loaded only complete: no load error, version 2 serves."""
    repo = tmp_path / "models"
    write_addv(repo / "addv" / "1" / "model.onnx", 1)
    write_addv(tmp_path / "full" / "model.onnx", 2)
    data = (tmp_path / "full" / "model.onnx").read_bytes()
    srv = server_factory.start(*POLL, repository=repo)
    half = len(data) // 2
    # The version directory appears with the first half already in it, so
    # the first poll that sees anything sees the half-written file.
    stage = tmp_path / "stage" / "2"
    stage.mkdir(parents=True)
    f = open(stage / "model.onnx", "wb")
    try:
        f.write(data[:half])
        f.flush()
        stage.rename(repo / "addv" / "2")
        assert wait_for(lambda: "model addv: changed on disk; loading once unchanged"
                        in srv.stderr())
        f.write(data[half:])
        f.flush()
    finally:
        f.close()
    assert wait_for(serves_version(srv.url, 2), timeout=60)
    err = srv.stderr()
    assert "failed to load" not in err and "Protobuf parsing failed" not in err, err
    assert " error " not in err, err
    rows = index_rows(srv.url)
    assert [r["state"] for r in rows if r["name"] == "addv"] == ["READY"]


def test_regress_failed_load_uses_tritons_wording(server_factory, tmp_path):
    """Clients (Triton's own examples among them) match on "failed to load
    'm'": a bad configuration override, an unknown model and a bad name."""
    srv = server_factory.start("--model-control-mode", "explicit", "--load-model", "simple",
                               repository=copy_models(tmp_path, ("simple",)))
    r = post(srv.url, "/v2/repository/models/simple/load",
             {"parameters": {"config": "{not json"}})
    assert_error_response(r, 400)
    assert r.json()["error"].startswith("failed to load 'simple': ")
    r = post(srv.url, "/v2/repository/models/nosuch/load")
    assert r.status_code >= 400
    assert r.json()["error"].startswith("failed to load 'nosuch': ")
    r = post(srv.url, "/v2/repository/models/.hidden/unload")
    assert_error_response(r, 400)
    assert r.json()["error"].startswith("failed to unload '.hidden': invalid model name")
    # The model that was loaded still serves.
    assert requests.get(srv.url + "/v2/models/simple/ready").status_code == 200


def test_poll_mode_reloads_when_a_generative_models_files_change(server_factory, tmp_path):
    """generation.json and the tokenizer sit beside model.onnx: a change to
    them is a change of the version (a reload), as a change of the model
    file is. A broken generation.json fails the reload with its reason (the
    old version keeps serving); the fixed file loads again."""
    repo = tmp_path / "models"
    shutil.copytree(MAIN_MODELS["simple"].parent / "kjv", repo / "kjv")
    srv = server_factory.start(*POLL, repository=repo)
    body = {"text_input": "In the beginning", "max_tokens": 4, "temperature": 0}
    before = post(srv.url, "/v2/models/kjv/generate", body).json()["text_output"]
    gen = repo / "kjv" / "1" / "generation.json"
    good = gen.read_text()
    gen.write_text(good.replace('"vocab_size"', '"colour": 1, "vocab_size"'))
    assert wait_for(lambda: "unknown key 'colour'" in
                    (index_row(index_rows(srv.url), "kjv", "1") or {}).get("reason", ""))
    assert post(srv.url, "/v2/models/kjv/generate", body).json()["text_output"] == before
    gen.write_text(good)
    assert wait_for(lambda: index_row(index_rows(srv.url), "kjv", "1")["reason"] == "")
    assert post(srv.url, "/v2/models/kjv/generate", body).json()["text_output"] == before


def test_regress_load_parameters_other_than_config_fail_as_in_triton(server_factory, tmp_path,
                                                                     pbs):
    """Triton's simple_grpc_model_control.py loads with a file override
    whose one path component is longer than NAME_MAX and wants INTERNAL
    with "failed to poll from model repository", and a live server after.
    inferd loads from its repository only: every file override, and any
    parameter but "config", fails the load that way, saying why; the model
    already loaded keeps serving."""
    import base64

    import grpc
    from grpc_client import Client
    srv = server_factory.start("--model-control-mode", "explicit", "--load-model", "simple",
                               repository=copy_models(tmp_path, ("simple",)))
    prefix = "failed to load 'simple', failed to poll from model repository: "
    long_key = "file:" + "A" * 256
    cases = [
        (long_key, "file parameter 'file:AAAA"),
        ("file:1/model.onnx", "model file overrides ('file:1/model.onnx') are not supported"),
        ("colour", "Unrecognized load parameter 'colour'"),
    ]
    for key, why in cases:
        r = post(srv.url, "/v2/repository/models/simple/load",
                 {"parameters": {"config": "{}", key: base64.b64encode(b"a").decode()}})
        msg = assert_error_response(r, 500)
        assert msg.startswith(prefix + why), msg
    assert "has a path component of 256 bytes (at most 255)" in assert_error_response(
        post(srv.url, "/v2/repository/models/simple/load",
             {"parameters": {"config": "{}", long_key: "YQ=="}}), 500)
    pb, hpb = pbs
    c = Client(pb, hpb, "127.0.0.1:%d" % srv.grpc_port)
    try:
        for key, why in cases:
            req = pb.RepositoryModelLoadRequest(model_name="simple")
            req.parameters["config"].string_param = "{}"
            req.parameters[key].bytes_param = b"a"
            with pytest.raises(grpc.RpcError) as e:
                c.unary("RepositoryModelLoad")(req, timeout=30)
            assert e.value.code() == grpc.StatusCode.INTERNAL
            assert e.value.details().startswith(prefix + why), e.value.details()
        assert c.call("ServerLive").live
    finally:
        c.close()
    assert requests.get(srv.url + "/v2/models/simple/ready").status_code == 200
    assert infer_simple(srv.url)[0].status_code == 200
