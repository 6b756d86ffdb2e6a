"""inferd's routing extension over gRPC (proto/inferd_routing.proto,
inferd.RoutingService) and the routing metadata of ModelInfer answers
(x-inferd-model-version, x-inferd-route), with Debian's python3-grpcio and
message classes protoc generates from the repository's .proto files.

The repository is a copy (routing.json is written into it) of digits
versions 1 (models/digits/1) and 2 (tests/models/digits_v2/2), both served
(version_policy all)."""
import json
import re
import shutil
import subprocess

import grpc
import numpy as np
import pytest
import requests

from conftest import REPO_ROOT
from grpc_client import Client, generate, generate_routing

DIGITS_CONFIG = 'name: "digits"\nversion_policy: { all: {} }\n'


@pytest.fixture(scope="module")
def pbs(tmp_path_factory):
    """(grpc_service_pb2, health_pb2, inferd_routing_pb2)."""
    out = tmp_path_factory.mktemp("proto_py")
    pb, hpb = generate(out)
    return pb, hpb, generate_routing(out)


def digits_repo(root):
    """A repository (copied files, not links) with digits versions 1 and 2."""
    mdir = root / "models" / "digits"
    shutil.copytree(REPO_ROOT / "models" / "digits" / "1", mdir / "1")
    shutil.copytree(REPO_ROOT / "tests" / "models" / "digits_v2" / "2", mdir / "2")
    (mdir / "config.pbtxt").write_text(DIGITS_CONFIG)
    return root / "models"


@pytest.fixture
def srv(server_factory, tmp_path):
    return server_factory.start(repository=digits_repo(tmp_path))


@pytest.fixture
def client(srv, pbs):
    pb, hpb, _ = pbs
    c = Client(pb, hpb, "127.0.0.1:%d" % srv.grpc_port)
    yield c
    c.close()


def rpc_error(fn, *args, **kw):
    with pytest.raises(grpc.RpcError) as e:
        fn(*args, **kw)
    return e.value


def get(client, rpb, name="digits"):
    return json.loads(client.routing(rpb, "ModelRoutingGet", name=name).routing_json)


def put(client, rpb, table, name="digits"):
    text = table if isinstance(table, str) else json.dumps(table)
    return json.loads(client.routing(rpb, "ModelRoutingSet", name=name,
                                     routing_json=text).routing_json)


def digits_request(pb, version=""):
    sample = json.loads((REPO_ROOT / "models" / "digits" / "sample.json").read_text())
    inp = sample["inputs"][0]
    req = pb.ModelInferRequest(model_name="digits", model_version=version)
    req.inputs.add(name=inp["name"], datatype=inp["datatype"], shape=inp["shape"])
    req.raw_input_contents.append(np.array(inp["data"], dtype="<f4").tobytes())
    return req


def infer_with_metadata(client, req, metadata=None):
    """(response, {initial metadata key: value})."""
    resp, call = client.unary("ModelInfer").with_call(req, timeout=30, metadata=metadata)
    return resp, dict(call.initial_metadata())


CANARY = {"canary": {"stable": 1, "version": 2, "weight": 100}}


def test_server_metadata_lists_the_extension(client):
    assert "inferd_routing" in client.call("ServerMetadata").extensions


def test_get_set_and_errors(client, srv, pbs):
    _, _, rpb = pbs
    # No table yet: the model and generation 0.
    assert get(client, rpb) == {"model": "digits", "generation": 0}

    # Set a canary, then Get answers the same table.
    t = put(client, rpb, {"canary": {"stable": 1, "version": 2, "weight": 10}})
    assert t["model"] == "digits" and t["generation"] == 1
    assert t["canary"]["stable"] == 1 and t["canary"]["version"] == 2
    assert t["canary"]["weight"] == 10
    assert get(client, rpb) == t
    # One form for every front end: REST answers the same table, and the
    # file holds it.
    r = requests.get(srv.url + "/v2/models/digits/routing", timeout=10)
    assert r.status_code == 200 and r.json() == t

    # An invalid body: INVALID_ARGUMENT naming the field; nothing changed.
    e = rpc_error(put, client, rpb, {"canary": {"stable": 1, "version": 2, "weight": 250}})
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "weight" in e.details()
    e = rpc_error(put, client, rpb, {"canary": {"stable": 1, "version": 7, "weight": 5}})
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "canary" in e.details()
    e = rpc_error(put, client, rpb, "{not json")
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert get(client, rpb) == t

    # Unknown model: NOT_FOUND, for Get and Set.
    e = rpc_error(get, client, rpb, name="no_such_model")
    assert e.code() == grpc.StatusCode.NOT_FOUND
    e = rpc_error(put, client, rpb, CANARY, name="no_such_model")
    assert e.code() == grpc.StatusCode.NOT_FOUND

    # Optimistic concurrency: a Set over the current generation applies; one
    # over a stale generation is FAILED_PRECONDITION (REST's 409) and
    # changes nothing.
    t2 = put(client, rpb, dict(CANARY, generation=1))
    assert t2["generation"] == 2 and t2["canary"]["weight"] == 100
    e = rpc_error(put, client, rpb, {"generation": 1})
    assert e.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "generation" in e.details()
    assert get(client, rpb) == t2

    # {} removes every rule.
    t3 = put(client, rpb, {})
    assert t3["generation"] == 3 and "canary" not in t3


def test_model_infer_route_metadata(client, srv, pbs):
    pb, _, rpb = pbs
    # Without a table: the newest version, route default.
    resp, md = infer_with_metadata(client, digits_request(pb))
    assert resp.model_version == "2"
    assert md["x-inferd-model-version"] == "2" and md["x-inferd-route"] == "default"
    # A version the client names: route url.
    resp, md = infer_with_metadata(client, digits_request(pb, version="1"))
    assert resp.model_version == "1"
    assert md["x-inferd-model-version"] == "1" and md["x-inferd-route"] == "url"

    # The pin header travels as gRPC metadata (the infer call's header
    # accessor reads it); x-model-version works without a table too.
    resp, md = infer_with_metadata(client, digits_request(pb), [("x-model-version", "1")])
    assert resp.model_version == "1" and md["x-inferd-route"] == "pin"
    put(client, rpb, {"pin_header": "x-model-version", "default_version": 1})
    resp, md = infer_with_metadata(client, digits_request(pb), [("x-model-version", "2")])
    assert resp.model_version == "2"
    assert md["x-inferd-model-version"] == "2" and md["x-inferd-route"] == "pin"
    resp, md = infer_with_metadata(client, digits_request(pb), [("x-model-version", "1")])
    assert resp.model_version == "1" and md["x-inferd-route"] == "pin"
    resp, md = infer_with_metadata(client, digits_request(pb))
    assert resp.model_version == "1" and md["x-inferd-route"] == "default"
    # A pin naming a version that is not loaded: NOT_FOUND; no version
    # served it, so neither the error answer (trailers-only: grpcio shows
    # it as trailing metadata) nor REST's names one.
    e = rpc_error(infer_with_metadata, client, digits_request(pb), [("x-model-version", "9")])
    assert e.code() == grpc.StatusCode.NOT_FOUND and "pin header" in e.details()
    md = dict(e.trailing_metadata())
    sample = (REPO_ROOT / "models" / "digits" / "sample.json").read_bytes()
    r = requests.post(srv.url + "/v2/models/digits/infer", data=sample, timeout=10,
                      headers={"x-model-version": "9"})
    assert r.status_code == 404
    assert "x-inferd-model-version" not in md and "x-inferd-route" not in md
    assert "x-inferd-model-version" not in r.headers and "x-inferd-route" not in r.headers

    # A canary at weight 100: requests without a pin go to the canary.
    put(client, rpb, {"canary": {"stable": 1, "version": 2, "weight": 100}})
    for _ in range(5):
        resp, md = infer_with_metadata(client, digits_request(pb))
        assert resp.model_version == "2"
        assert md["x-inferd-model-version"] == "2" and md["x-inferd-route"] == "canary"
    # ... and the pin still wins over the canary.
    resp, md = infer_with_metadata(client, digits_request(pb), [("x-model-version", "1")])
    assert resp.model_version == "1" and md["x-inferd-route"] == "pin"


def test_stream_infer_keeps_its_metadata(client, pbs):
    """ModelStreamInfer: no routing metadata (the stream's metadata goes out
    before any request is routed); each response's model_version tells."""
    pb, _, rpb = pbs
    put(client, rpb, CANARY)
    call = client.stream_infer()(iter([digits_request(pb), digits_request(pb)]), timeout=30)
    versions = [r.infer_response.model_version for r in call]
    assert versions == ["2", "2"]
    md = dict(call.initial_metadata())
    assert "x-inferd-route" not in md and "x-inferd-model-version" not in md


def test_docs_routing_example_runs(srv, tmp_path):
    """The routing example of docs/grpc.md runs as written."""
    text = (REPO_ROOT / "docs" / "grpc.md").read_text()
    blocks = [b for b in re.findall(r"```python\n(.*?)```", text, re.S)
              if "inferd.RoutingService" in b]
    assert len(blocks) == 1, "docs/grpc.md: one python example of the routing extension"
    subprocess.run(["protoc", "--python_out=%s" % tmp_path, "-I", str(REPO_ROOT / "proto")] +
                   [str(p) for p in sorted((REPO_ROOT / "proto").glob("*.proto"))], check=True)
    (tmp_path / "example.py").write_text(blocks[0])
    env = {"INFERD_GRPC": "127.0.0.1:%d" % srv.grpc_port, "PATH": "/usr/bin:/bin"}
    p = subprocess.run(["/usr/bin/python3", "example.py"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "{'model': 'digits', 'generation': 0}", p.stdout
    assert lines[1].startswith("generation 1 canary"), p.stdout
    assert lines[2].startswith("StatusCode.INVALID_ARGUMENT canary.weight"), p.stdout
    assert lines[3] == "2 2 pin", p.stdout
