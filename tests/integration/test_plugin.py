"""Backend plugins: a model whose config.pbtxt says `backend: "identity_stall"`
is served by the example plugin (examples/backends/identity_stall), loaded
with dlopen from the model's directory."""
import json
import shutil
import threading
import time

import pytest
import requests

from conftest import INFERD_BIN, assert_error_response, infer_request, ok_json

PLUGIN = INFERD_BIN.parent / "libinferd_identity_stall.so"

ECHO_CONFIG = """
backend: "identity_stall"
max_batch_size: 8
input [ { name: "IN" data_type: TYPE_INT32 dims: [ 4 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 4 ] } ]
"""


def param(key, value):
    return 'parameters { key: "%s" value: { string_value: "%s" } }\n' % (key, value)


def plugin_repo(tmp_path, config, name="echo", copy_plugin=True):
    """A repository with one plugin model; its version directory holds the
    placeholder model.onnx that makes it a version."""
    if not PLUGIN.exists():
        pytest.fail("example plugin not built: %s" % PLUGIN)
    root = tmp_path / "models"
    mdir = root / name
    (mdir / "1").mkdir(parents=True)
    (mdir / "1" / "model.onnx").write_bytes(b"")
    (mdir / "config.pbtxt").write_text(config)
    if copy_plugin:
        shutil.copy(PLUGIN, mdir / PLUGIN.name)
    return root


def echo(url, data, timeout=30):
    return infer_request(url, "echo", [{"name": "IN", "shape": [len(data) // 4, 4],
                                        "datatype": "INT32", "data": data}], timeout=timeout)


def get_when_listening(url, timeout=30.0):
    deadline = time.time() + timeout
    while True:
        try:
            return requests.get(url, timeout=5)
        except requests.ConnectionError:
            if time.time() > deadline:
                raise
            time.sleep(0.05)


def test_plugin_echoes_and_reports_its_backend(server_factory, tmp_path):
    srv = server_factory.start(repository=plugin_repo(tmp_path, ECHO_CONFIG))
    data = list(range(-4, 4))
    out = ok_json(echo(srv.url, data))
    assert out["model_name"] == "echo"
    assert out["outputs"][0]["name"] == "OUT"
    assert out["outputs"][0]["datatype"] == "INT32"
    assert out["outputs"][0]["shape"] == [2, 4]
    assert out["outputs"][0]["data"] == data

    cfg = ok_json(requests.get(srv.url + "/v2/models/echo/config"))
    assert cfg["backend"] == "identity_stall"
    assert cfg["platform"] == ""
    assert cfg["input"][0]["dims"] == [4] and cfg["output"][0]["data_type"] == "TYPE_INT32"
    meta = ok_json(requests.get(srv.url + "/v2/models/echo"))
    assert meta["platform"] == "identity_stall"
    assert meta["inputs"][0]["shape"] == [-1, 4]

    # Wrong input dims are refused before the plugin runs.
    r = infer_request(srv.url, "echo", [{"name": "IN", "shape": [1, 3], "datatype": "INT32",
                                         "data": [1, 2, 3]}])
    assert_error_response(r, 400)


def test_plugin_bytes_binary_output(server_factory, tmp_path):
    cfg = ECHO_CONFIG.replace("TYPE_INT32", "TYPE_STRING").replace("max_batch_size: 8", "")
    cfg = cfg.replace("dims: [ 4 ]", "dims: [ -1 ]")
    srv = server_factory.start(repository=plugin_repo(tmp_path, cfg))
    words = ["alpha", "", "gamma"]
    r = infer_request(srv.url, "echo", [{"name": "IN", "shape": [3], "datatype": "BYTES",
                                         "data": words}])
    assert ok_json(r)["outputs"][0]["data"] == words


def test_plugin_fail_every_n_alternates(server_factory, tmp_path):
    # fail_skip spares the warm-up execution inferd runs before serving
    # (a failed default warm-up would count as one of the executions).
    cfg = ECHO_CONFIG + param("fail_every_n", "2") + param("fail_skip", "1")
    srv = server_factory.start(repository=plugin_repo(tmp_path, cfg))
    statuses = []
    for i in range(6):
        r = echo(srv.url, [i] * 4)
        statuses.append(r.status_code)
        if r.status_code == 500:
            assert "injected failure" in assert_error_response(r, 500)
        else:
            assert ok_json(r)["outputs"][0]["data"] == [i] * 4
    assert sorted(statuses) == [200] * 3 + [500] * 3, statuses
    assert all(a != b for a, b in zip(statuses, statuses[1:])), statuses
    # Failures do not make the model unready.
    assert requests.get(srv.url + "/v2/models/echo/ready").status_code == 200


def test_plugin_fails_while_a_file_exists(server_factory, tmp_path):
    """fail_while_exists PATH: every execution fails with 500 while PATH
    exists, and succeeds again once it is removed."""
    flag = tmp_path / "failing"
    srv = server_factory.start(
        repository=plugin_repo(tmp_path, ECHO_CONFIG + param("fail_while_exists", flag)))
    assert ok_json(echo(srv.url, [1, 2, 3, 4]))["outputs"][0]["data"] == [1, 2, 3, 4]
    flag.write_text("")
    for _ in range(3):
        msg = assert_error_response(echo(srv.url, [1, 2, 3, 4]), 500)
        assert msg == "injected failure (%s exists)" % flag, msg
    flag.unlink()
    assert ok_json(echo(srv.url, [1, 2, 3, 4]))["outputs"][0]["data"] == [1, 2, 3, 4]


def test_plugin_stall_still_answers(server_factory, tmp_path):
    srv = server_factory.start(
        repository=plugin_repo(tmp_path, ECHO_CONFIG + param("delay_us", "2000000")))
    t0 = time.monotonic()
    out = ok_json(echo(srv.url, [5, 6, 7, 8]))
    assert time.monotonic() - t0 >= 2.0  # the stall happened (a lower bound)
    assert out["outputs"][0]["data"] == [5, 6, 7, 8]
    # Health stays responsive while a request stalls in the plugin: it is
    # answered before the stalled request is.
    order = []
    slow = threading.Thread(target=lambda: order.append(("slow", echo(srv.url, [1] * 4))))
    slow.start()
    time.sleep(0.2)  # the slow request is in the plugin (nothing breaks if it is not yet)
    order.append(("health", requests.get(srv.url + "/v2/health/live", timeout=30)))
    slow.join()
    assert [name for name, _ in order] == ["health", "slow"], order
    assert all(r.status_code == 200 for _, r in order), order


def test_plugin_missing_library_fails_the_model(server_factory, tmp_path):
    repo = plugin_repo(tmp_path, ECHO_CONFIG, copy_plugin=False)
    srv = server_factory.start(repository=repo, wait=False)
    r = get_when_listening(srv.url + "/v2/models/echo")
    msg = assert_error_response(r, 404)
    assert "libinferd_identity_stall.so" in msg and str(repo / "echo") in msg


def test_plugin_bad_parameter_fails_the_model(server_factory, tmp_path):
    repo = plugin_repo(tmp_path, ECHO_CONFIG + param("delay_us", "soon"))
    srv = server_factory.start(repository=repo, wait=False)
    r = get_when_listening(srv.url + "/v2/models/echo")
    msg = assert_error_response(r, 404)
    assert "parameter delay_us: 'soon'" in msg


def test_plugin_unknown_parameter_fails_but_server_parameters_pass(server_factory, tmp_path):
    """A misspelt parameter fails the load; padding_budget does not: it is
    the server's own (variable-length batching), kept from the backend."""
    srv = server_factory.start(repository=plugin_repo(tmp_path / "a", ECHO_CONFIG +
                                                      param("delay_usec", "5")), wait=False)
    r = get_when_listening(srv.url + "/v2/models/echo")
    assert "unknown parameter 'delay_usec'" in assert_error_response(r, 404)
    srv = server_factory.start(repository=plugin_repo(tmp_path / "b", ECHO_CONFIG +
                                                      "dynamic_batching { }\n" +
                                                      param("padding_budget", "0.1")))
    assert ok_json(echo(srv.url, [1, 2, 3, 4]))["outputs"][0]["data"] == [1, 2, 3, 4]


@pytest.mark.parametrize("extra, message", [
    ("dynamic_batching { }\n" + param("padding_budget", "abc"),
     "padding_budget 'abc' must be a fraction in [0, 1)"),
    ("dynamic_batching { }\n" + param("padding_budget", "1.5"),
     "padding_budget '1.5' must be a fraction in [0, 1)"),
    (param("padding_budget", "15%"), "padding_budget needs dynamic_batching"),
])
def test_bad_padding_budget_fails_the_load(server_factory, tmp_path, extra, message):
    srv = server_factory.start(repository=plugin_repo(tmp_path, ECHO_CONFIG + extra), wait=False)
    r = get_when_listening(srv.url + "/v2/models/echo")
    assert message in assert_error_response(r, 404)


def test_plugin_takes_parameters_from_a_config_override(server_factory, tmp_path):
    """The repository load API's JSON config replaces config.pbtxt, for the
    plugin's parameters too: an override with a parameter the plugin does
    not know fails the reload (the loaded version keeps serving)."""
    srv = server_factory.start("--model-control-mode", "explicit", "--load-model", "echo",
                               repository=plugin_repo(tmp_path, ECHO_CONFIG))
    assert echo(srv.url, [1, 2, 3, 4]).status_code == 200
    config = {"backend": "identity_stall", "max_batch_size": 8,
              "input": [{"name": "IN", "data_type": "TYPE_INT32", "dims": [4]}],
              "output": [{"name": "OUT", "data_type": "TYPE_INT32", "dims": [4]}],
              "parameters": {"from_override": {"string_value": "yes"}}}
    r = requests.post(srv.url + "/v2/repository/models/echo/load", timeout=60,
                      data=json.dumps({"parameters": {"config": json.dumps(config)}}))
    assert "unknown parameter 'from_override'" in assert_error_response(r, 400)
    assert ok_json(echo(srv.url, [1, 2, 3, 4]))["outputs"][0]["data"] == [1, 2, 3, 4]
    del config["parameters"]
    r = requests.post(srv.url + "/v2/repository/models/echo/load", timeout=60,
                      data=json.dumps({"parameters": {"config": json.dumps(config)}}))
    assert r.status_code == 200, r.text
    assert echo(srv.url, [1, 2, 3, 4]).status_code == 200


def test_plugin_version_parameters_file_overrides_the_config(server_factory, tmp_path):
    """<version>/parameters overrides config.pbtxt's parameters for that
    version only: version 2 fails every execution after its warm-up,
    version 1 (the config's fail_every_n 0) never does."""
    repo = plugin_repo(tmp_path, ECHO_CONFIG + "version_policy: { all: {} }\n" +
                       param("fail_every_n", "0"))
    (repo / "echo" / "2").mkdir()
    (repo / "echo" / "2" / "model.onnx").write_bytes(b"")
    (repo / "echo" / "2" / "parameters").write_text("fail_every_n 1\n\nfail_skip   1\n")
    srv = server_factory.start(repository=repo)
    for _ in range(3):
        r = infer_request(srv.url, "echo", [{"name": "IN", "shape": [1, 4], "datatype": "INT32",
                                             "data": [1, 2, 3, 4]}], version=2)
        assert "injected failure" in assert_error_response(r, 500)
        r = infer_request(srv.url, "echo", [{"name": "IN", "shape": [1, 4], "datatype": "INT32",
                                             "data": [1, 2, 3, 4]}], version=1)
        assert ok_json(r)["outputs"][0]["data"] == [1, 2, 3, 4]


@pytest.mark.parametrize("text, message", [
    ("delay_usec 5\n", "unknown parameter 'delay_usec'"),
    ("delay_us soon\n", "parameter delay_us: 'soon'"),
    ("shadow_fail 2\n", "parameter shadow_fail: '2'"),
    ("delay_us\n", "expected `key value`"),
])
def test_plugin_bad_version_parameters_file_fails_the_load(server_factory, tmp_path, text,
                                                           message):
    repo = plugin_repo(tmp_path, ECHO_CONFIG)
    (repo / "echo" / "1" / "parameters").write_text(text)
    srv = server_factory.start(repository=repo, wait=False)
    msg = assert_error_response(get_when_listening(srv.url + "/v2/models/echo"), 404)
    assert "echo/1/parameters" in msg and message in msg, msg
