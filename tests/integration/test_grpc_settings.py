"""Triton's TraceSetting and LogSettings RPCs, with Debian's python3-grpcio.
They share their logic with REST's /v2/logging and /v2[/models/{m}]/trace/
setting (obs/settings.h): a change made over gRPC is what REST reads, and
the same requests are refused with INVALID_ARGUMENT (REST: 400). Each test
has a server of its own: these settings are process-wide."""
import grpc
import pytest
import requests

from conftest import MAIN_MODELS, ok_json
from grpc_client import Client, generate


@pytest.fixture(scope="module")
def pbs(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("proto_py"))


@pytest.fixture
def srv(server_factory):
    return server_factory.start(models={"simple": MAIN_MODELS["simple"]})


@pytest.fixture
def client(srv, pbs):
    c = Client(*pbs, "127.0.0.1:%d" % srv.grpc_port)
    yield c
    c.close()


def trace_map(resp):
    return {k: list(v.value) for k, v in resp.settings.items()}


def log_map(resp):
    return {k: getattr(v, v.WhichOneof("parameter_choice")) for k, v in resp.settings.items()}


def trace_request(pb, model="", **settings):
    req = pb.TraceSettingRequest(model_name=model)
    for k, values in settings.items():
        req.settings[k].value.extend(values)
    return req


def call_trace(client, req):
    return client.unary("TraceSetting")(req, timeout=30)


def rpc_error(fn, *args, **kw):
    with pytest.raises(grpc.RpcError) as e:
        fn(*args, **kw)
    return e.value


def test_trace_setting_read_change_read_back(srv, client):
    pb = client.pb
    first = trace_map(call_trace(client, trace_request(pb)))
    rest = ok_json(requests.get(srv.url + "/v2/trace/setting", timeout=10))
    # The same values REST reports, each as a list of strings.
    assert first == {k: v if isinstance(v, list) else [v] for k, v in rest.items()}
    assert first["trace_mode"] == ["opentelemetry"]

    # Level OFF: no call is sampled, so nothing takes from trace_count.
    changed = trace_map(call_trace(client, trace_request(
        pb, trace_rate=["4"], trace_level=["OFF"], trace_count=["7"])))
    assert changed["trace_rate"] == ["4"] and changed["trace_count"] == ["7"]
    assert changed["trace_level"] == ["OFF"]
    assert trace_map(call_trace(client, trace_request(pb))) == changed
    rest = ok_json(requests.get(srv.url + "/v2/trace/setting", timeout=10))
    assert rest["trace_rate"] == "4" and rest["trace_count"] == "7"
    assert rest["trace_level"] == ["OFF"]


def test_trace_setting_of_a_model_and_clearing_it(srv, client):
    pb = client.pb
    call_trace(client, trace_request(pb, trace_rate=["10"]))
    own = trace_map(call_trace(client, trace_request(pb, "simple", trace_rate=["2"])))
    assert own["trace_rate"] == ["2"]
    rest = ok_json(requests.get(srv.url + "/v2/models/simple/trace/setting", timeout=10))
    assert rest["trace_rate"] == "2"
    assert trace_map(call_trace(client, trace_request(pb)))["trace_rate"] == ["10"]
    # A setting with no value clears the model's own: the global one applies.
    cleared = trace_map(call_trace(client, trace_request(pb, "simple", trace_rate=[])))
    assert cleared["trace_rate"] == ["10"]


@pytest.mark.parametrize("settings", [
    {"trace_rate": ["x"]},
    {"trace_rate": ["1", "2"]},
    {"trace_level": ["LOUD"]},
    {"trace_level": ["OFF", "TIMESTAMPS"]},
    {"trace_count": ["-2"]},
    {"trace_mode": ["triton"]},
    {"no_such_setting": ["1"]},
])
def test_trace_setting_rejects_like_rest(srv, client, settings):
    pb = client.pb
    before = trace_map(call_trace(client, trace_request(pb)))
    e = rpc_error(call_trace, client, trace_request(pb, **settings))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT
    r = requests.post(srv.url + "/v2/trace/setting",
                      json={k: v if len(v) != 1 or k == "trace_level" else v[0]
                            for k, v in settings.items()}, timeout=10)
    assert r.status_code == 400
    assert r.json()["error"] == e.details()
    assert trace_map(call_trace(client, trace_request(pb))) == before


def test_trace_setting_unknown_model_is_not_found(client):
    e = rpc_error(call_trace, client, trace_request(client.pb, "nope", trace_rate=["1"]))
    assert e.code() == grpc.StatusCode.NOT_FOUND
    assert "nope" in e.details()


def log_request(pb, **settings):
    req = pb.LogSettingsRequest()
    for k, v in settings.items():
        if isinstance(v, bool):
            req.settings[k].bool_param = v
        elif isinstance(v, int):
            req.settings[k].uint32_param = v
        else:
            req.settings[k].string_param = v
    return req


def call_log(client, req):
    return client.unary("LogSettings")(req, timeout=30)


def test_log_settings_read_change_read_back(srv, client):
    pb = client.pb
    first = log_map(call_log(client, log_request(pb)))
    assert first == ok_json(requests.get(srv.url + "/v2/logging", timeout=10))
    assert set(first) == {"log_file", "log_info", "log_warning", "log_error",
                          "log_verbose_level", "log_format"}

    changed = log_map(call_log(client, log_request(pb, log_info=False, log_verbose_level=1,
                                                   log_format="json")))
    assert changed["log_info"] is False
    assert changed["log_verbose_level"] == 1
    assert changed["log_format"] == "json"
    assert log_map(call_log(client, log_request(pb))) == changed
    # REST sees the change made over gRPC.
    rest = ok_json(requests.get(srv.url + "/v2/logging", timeout=10))
    assert rest == changed
    # And gRPC sees one made over REST.
    requests.post(srv.url + "/v2/logging", json={"log_format": "ISO8601"}, timeout=10)
    assert log_map(call_log(client, log_request(pb)))["log_format"] == "ISO8601"


@pytest.mark.parametrize("settings", [
    {"log_info": "yes"},
    {"log_verbose_level": True},
    {"log_format": "xml"},
    {"log_file": "/tmp/inferd.log"},
    {"log_colour": True},
])
def test_log_settings_rejects_like_rest(srv, client, settings):
    pb = client.pb
    before = log_map(call_log(client, log_request(pb)))
    e = rpc_error(call_log, client, log_request(pb, **settings))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT
    r = requests.post(srv.url + "/v2/logging", json=settings, timeout=10)
    assert r.status_code == 400
    assert r.json()["error"] == e.details()
    assert log_map(call_log(client, log_request(pb))) == before


def test_log_settings_value_with_nothing_set_is_refused(client):
    req = client.pb.LogSettingsRequest()
    req.settings["log_info"].SetInParent()
    e = rpc_error(call_log, client, req)
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "log_info" in e.details()


def test_server_metadata_lists_logging_and_trace(client):
    meta = client.call("ServerMetadata")
    assert {"logging", "trace"} <= set(meta.extensions)
