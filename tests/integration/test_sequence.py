"""Stateful models: Triton's sequence batcher (serve/seqbatch.h).

The models are the stand-ins for Triton's sequence examples that
tests/models/build/make_sequence.py builds (simple_sequence,
simple_dyna_sequence, simple_string_dyna_sequence): control inputs START,
READY, END, CORRID fed by the server, and a running sum kept as implicit
state (ACC_IN -> ACC_OUT, shown as output ACC).

The flows and expected values are those of Triton's client examples
simple_{http,grpc}_sequence_sync_infer_client.py and
simple_grpc_sequence_stream_infer_client.py, driven here with requests and
grpcio (independent clients: tritonclient itself is not packaged for
Debian). The unmodified examples themselves run in
test_triton_examples.py when Triton's client sources are given."""
import re
import threading
import time
import uuid

import grpc
import numpy as np
import pytest
import requests

from conftest import REPO_ROOT, assert_error_response
from grpc_client import Client, generate

MODELS = {name: REPO_ROOT / "tests" / "models" / name
          for name in ("simple_sequence", "simple_dyna_sequence", "simple_string_dyna_sequence")}
VALUES = [11, 7, 5, 3, 2, 0, 1]


@pytest.fixture(scope="module")
def srv(module_server_factory):
    repo = module_server_factory.repository(dict(MODELS))
    return module_server_factory.start("--model-repository", str(repo))


@pytest.fixture(scope="module")
def pbs(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("proto_py"))


@pytest.fixture
def gclient(srv, pbs):
    c = Client(*pbs, "127.0.0.1:%d" % srv.grpc_port)
    yield c
    c.close()


def rest(srv, model, value, sid, start=False, end=False, batch=1):
    params = {"sequence_id": sid}
    if start:
        params["sequence_start"] = True
    if end:
        params["sequence_end"] = True
    body = {"inputs": [{"name": "INPUT", "datatype": "INT32", "shape": [batch, 1],
                        "data": [value] * batch}], "parameters": params}
    return requests.post(srv.url + "/v2/models/%s/infer" % model, json=body, timeout=30)


def rest_outputs(r):
    assert r.status_code == 200, r.text
    outs = {o["name"]: o["data"][0] for o in r.json()["outputs"]}
    return outs["OUTPUT"], outs.get("ACC")


def grpc_request(pb, model, value, sid, start, end, request_id=""):
    req = pb.ModelInferRequest(model_name=model, id=request_id)
    t = req.inputs.add(name="INPUT", datatype="INT32", shape=[1, 1])
    req.raw_input_contents.append(np.array([value], dtype="<i4").tobytes())
    del t
    if isinstance(sid, str):
        req.parameters["sequence_id"].string_param = sid
    else:
        req.parameters["sequence_id"].int64_param = sid
    req.parameters["sequence_start"].bool_param = start
    req.parameters["sequence_end"].bool_param = end
    req.outputs.add(name="OUTPUT")
    return req


def output_of(resp):
    i = [o.name for o in resp.outputs].index("OUTPUT")
    return int(np.frombuffer(resp.raw_output_contents[i], dtype="<i4")[0])


def expected(dyna, int_ids, string_id, string_results):
    """The values Triton's sequence examples check, for the three sequences
    [0] + VALUES (int id 0), [100] - VALUES (int id 1), [20] - VALUES
    (string id), given the string sequence's own results (the dyna string
    model accumulates)."""
    rows = []
    for i in range(len(VALUES) + 1):
        s0 = 1 if i == 0 else VALUES[i - 1]
        s1 = 101 if i == 0 else -VALUES[i - 1]
        if i == 0:
            st = 20 if dyna else 21
        elif dyna:
            st = -VALUES[i - 1] + string_results[i - 1]
        else:
            st = -VALUES[i - 1]
        if dyna and i != 0 and VALUES[i - 1] == 1:
            s0 += int_ids[0]
            s1 += int_ids[1]
            st += int(string_id)
        rows.append((s0, s1, st))
    return rows


def sequences(dyna):
    int_model = "simple_dyna_sequence" if dyna else "simple_sequence"
    string_model = "simple_string_dyna_sequence" if dyna else "simple_sequence"
    string_id = "1002" if dyna else str(uuid.uuid4())
    return [(int_model, 1000, [0] + VALUES), (int_model, 1001, [100] + [-v for v in VALUES]),
            (string_model, string_id, [20] + [-v for v in VALUES])]


def check(results, dyna, seqs):
    string_id = seqs[2][1]
    want = expected(dyna, (1000, 1001), string_id, results[2])
    got = list(zip(*results))
    assert got == want, (got, want)


@pytest.mark.parametrize("dyna", [False, True], ids=["simple", "dyna"])
def test_rest_sync_as_tritons_http_sequence_client(srv, dyna):
    seqs = sequences(dyna)
    results = []
    for model, sid, values in seqs:
        out = []
        for i, v in enumerate(values):
            out.append(rest_outputs(rest(srv, model, v, sid, i == 0, i == len(values) - 1))[0])
        results.append(out)
    check(results, dyna, seqs)


@pytest.mark.parametrize("dyna", [False, True], ids=["simple", "dyna"])
def test_grpc_sync_as_tritons_grpc_sequence_client(srv, pbs, gclient, dyna):
    pb, _ = pbs
    seqs = sequences(dyna)
    results = []
    for model, sid, values in seqs:
        out = []
        for i, v in enumerate(values):
            resp = gclient.infer(grpc_request(pb, model, v, sid, i == 0, i == len(values) - 1))
            out.append(output_of(resp))
        results.append(out)
    check(results, dyna, seqs)


@pytest.mark.parametrize("dyna", [False, True], ids=["simple", "dyna"])
def test_grpc_stream_as_tritons_stream_client(srv, pbs, gclient, dyna):
    """Every request of the three sequences is sent at once on one
    ModelStreamInfer stream; the server keeps each sequence in order."""
    pb, _ = pbs
    seqs = sequences(dyna)
    reqs = []
    for model, sid, values in seqs:
        for i, v in enumerate(values):
            reqs.append(grpc_request(pb, model, v, sid, i == 0, i == len(values) - 1,
                                     request_id="%s_%d" % (sid, i)))
    got = {}
    for resp in gclient.stream_infer()(iter(reqs), timeout=60):
        assert not resp.error_message, resp.error_message
        sid, i = resp.infer_response.id.rsplit("_", 1)
        got[(sid, int(i))] = output_of(resp.infer_response)
    results = [[got[(str(sid), i)] for i in range(len(values))] for _, sid, values in seqs]
    check(results, dyna, seqs)


def test_state_is_kept_per_sequence_and_reset_by_start(srv):
    """ACC is the model's running sum, kept by the server between requests:
    interleaved sequences keep their own, a new START resets it, and a
    numeric and a string id of the same digits are different sequences."""
    m = "simple_sequence"
    assert rest_outputs(rest(srv, m, 5, 7, start=True))[1] == 5
    assert rest_outputs(rest(srv, m, 100, "7", start=True))[1] == 100
    assert rest_outputs(rest(srv, m, 2, 7))[1] == 7
    assert rest_outputs(rest(srv, m, 1, "7"))[1] == 101
    assert rest_outputs(rest(srv, m, 3, 7, start=True))[1] == 3  # a restart
    assert rest_outputs(rest(srv, m, 4, 7, end=True))[1] == 7
    assert rest_outputs(rest(srv, m, 0, "7", end=True))[1] == 101


def test_many_sequences_at_once_stay_in_order(srv):
    """Sixteen clients run a sequence each at the same time (requests of
    different sequences batch together): every running sum is right. The
    server's default queue budget may refuse a START when the burst
    queues too much (503 + Retry-After: the client starts again), never a
    request of a sequence in progress (docs/execution.md)."""
    errors = []

    def run(k):
        try:
            acc = 0
            with requests.Session() as s:
                for i in range(20):
                    body = {"inputs": [{"name": "INPUT", "datatype": "INT32", "shape": [1, 1],
                                        "data": [k + i]}],
                            "parameters": {"sequence_id": 5000 + k, "sequence_start": i == 0,
                                           "sequence_end": i == 19}}
                    url = srv.url + "/v2/models/simple_dyna_sequence/infer"
                    r = s.post(url, json=body, timeout=30)
                    while i == 0 and r.status_code == 503 and "is overloaded" in r.text:
                        time.sleep(int(r.headers["Retry-After"]))
                        r = s.post(url, json=body, timeout=30)
                    acc += k + i
                    out, got = rest_outputs(r)
                    if got != acc:
                        errors.append((k, i, got, acc))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append((k, repr(e)))
    threads = [threading.Thread(target=run, args=(k,)) for k in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:5]


def test_a_start_that_never_ran_starts_nothing(server_factory, tmp_path):
    """A START the scheduler does not run (here its timeout of 1 us passes
    in the queue) starts no sequence, as in Triton: the next request
    without START gets Triton's 400, also one already waiting behind the
    START; a START waiting behind it starts the sequence. The model's
    oldest strategy is given a preferred batch size of 8 so that a lone
    request always waits its max_queue_delay of 100 us (without one the
    server's learned batch size may send it at once)."""
    src = MODELS["simple_dyna_sequence"]
    model = tmp_path / "models" / "simple_dyna_sequence"
    (model / "1").mkdir(parents=True)
    (model / "1" / "model.onnx").symlink_to(src / "1" / "model.onnx")
    (model / "config.pbtxt").write_text((src / "config.pbtxt").read_text().replace(
        "max_queue_delay_microseconds: 100 }",
        "max_queue_delay_microseconds: 100 preferred_batch_size: [ 8 ] }"))
    s = server_factory.start("--model-repository", str(tmp_path / "models"))
    m = "simple_dyna_sequence"
    url = s.url + "/v2/models/%s/infer" % m

    def post(value, sid, **params):
        body = {"inputs": [{"name": "INPUT", "datatype": "INT32", "shape": [1, 1],
                            "data": [value]}],
                "parameters": dict(params, sequence_id=sid)}
        return requests.post(url, json=body, timeout=30)

    for _ in range(3):
        never = post(5, 4100, sequence_start=True, timeout=1)
        assert "timed out" in never.json()["error"], never.text
        assert "must specify the START flag" in assert_error_response(post(1, 4100), 400)

    # Sent together: the second waits behind the START, or comes after it.
    for sid, second, want in ((4101, {}, 400), (4102, {"sequence_start": True}, 200)):
        results = {}
        first = threading.Thread(target=lambda: results.__setitem__(
            "start", post(5, sid, sequence_start=True, timeout=1)))
        first.start()
        results["second"] = post(3, sid, **second)
        first.join()
        assert "timed out" in results["start"].json()["error"]
        if want == 400:
            assert "must specify the START flag" in assert_error_response(results["second"], 400)
        else:
            assert rest_outputs(results["second"])[1] == 3
            assert rest_outputs(rest(s, m, 4, sid, end=True))[1] == 7
    assert metric(s, "inferd_sequences_active", model=m, version="1") == 0


def test_errors_use_tritons_words(srv, pbs, gclient):
    pb, _ = pbs
    m = "simple_dyna_sequence"
    cases = [
        (rest(srv, m, 1, 0, start=True), 400,
         "inference request to model 'simple_dyna_sequence' must specify a non-zero or "
         "non-empty correlation ID"),
        (rest(srv, m, 1, 424242), 400,
         "inference request for sequence 424242 to model 'simple_dyna_sequence' must specify "
         "the START flag on the first request of the sequence"),
        (rest(srv, m, 1, 9, start=True, batch=2), 400,
         "inference request to model 'simple_dyna_sequence' must specify batch-size 1 due to "
         "requirements of sequence batcher"),
        (rest(srv, m, 1, "abc", start=True), 400,
         "sequence batching control 'CORRID' data-type is 'BYTES', but model "
         "'simple_dyna_sequence' expects 'UINT64'"),
        (rest(srv, "simple_string_dyna_sequence", 1, 12, start=True), 400,
         "sequence batching control 'CORRID' data-type is 'UINT64', but model "
         "'simple_string_dyna_sequence' expects 'BYTES'"),
    ]
    for r, status, msg in cases:
        assert assert_error_response(r, status) == msg
    # After its END request an id is free: the next request must START again.
    rest_outputs(rest(srv, m, 1, 31, start=True))
    rest_outputs(rest(srv, m, 1, 31, end=True))
    assert "must specify the START flag" in assert_error_response(rest(srv, m, 1, 31), 400)
    # The same over gRPC.
    with pytest.raises(grpc.RpcError) as e:
        gclient.infer(grpc_request(pb, m, 1, 0, True, False))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "must specify a non-zero or non-empty correlation ID" in e.value.details()
    with pytest.raises(grpc.RpcError) as e:
        gclient.infer(grpc_request(pb, m, 1, 777, False, False))
    assert e.value.details() == ("inference request for sequence 777 to model "
                                 "'simple_dyna_sequence' must specify the START flag on the "
                                 "first request of the sequence")
    # Bad parameter types.
    r = requests.post(srv.url + "/v2/models/%s/infer" % m, timeout=30, json={
        "inputs": [{"name": "INPUT", "datatype": "INT32", "shape": [1, 1], "data": [1]}],
        "parameters": {"sequence_id": 3, "sequence_start": "yes"}})
    assert "parameter 'sequence_start' must be true or false" in assert_error_response(r, 400)


def test_clients_see_no_control_or_state_tensor(srv, gclient):
    meta = requests.get(srv.url + "/v2/models/simple_dyna_sequence", timeout=30).json()
    assert [t["name"] for t in meta["inputs"]] == ["INPUT"]
    assert [t["name"] for t in meta["outputs"]] == ["OUTPUT", "ACC"]
    g = gclient.call("ModelMetadata", name="simple_dyna_sequence")
    assert [t.name for t in g.inputs] == ["INPUT"]
    cfg = requests.get(srv.url + "/v2/models/simple_dyna_sequence/config", timeout=30).json()
    assert [t["name"] for t in cfg["input"]] == ["INPUT"]
    sb = cfg["sequence_batching"]
    assert sb["max_sequence_idle_microseconds"] == 5000000
    assert [c["name"] for c in sb["control_input"]] == ["START", "READY", "END", "CORRID"]
    assert sb["control_input"][3]["control"][0] == {
        "kind": "CONTROL_SEQUENCE_CORRID", "int32_false_true": [], "fp32_false_true": [],
        "bool_false_true": [], "data_type": "TYPE_UINT64"}
    assert sb["state"][0]["input_name"] == "ACC_IN" and sb["state"][0]["dims"] == [1]
    assert sb["oldest"]["max_candidate_sequences"] == 4
    # A client cannot send a control input, nor ask for a state output.
    r = requests.post(srv.url + "/v2/models/simple_sequence/infer", timeout=30, json={
        "inputs": [{"name": "INPUT", "datatype": "INT32", "shape": [1, 1], "data": [1]},
                   {"name": "START", "datatype": "INT32", "shape": [1, 1], "data": [1]}],
        "parameters": {"sequence_id": 3, "sequence_start": True}})
    assert "unexpected inference input 'START'" in assert_error_response(r, 400)
    r = requests.post(srv.url + "/v2/models/simple_sequence/infer", timeout=30, json={
        "inputs": [{"name": "INPUT", "datatype": "INT32", "shape": [1, 1], "data": [1]}],
        "outputs": [{"name": "ACC_OUT"}],
        "parameters": {"sequence_id": 3, "sequence_start": True}})
    assert "unexpected inference output 'ACC_OUT'" in assert_error_response(r, 400)


def metric(srv, name, **labels):
    text = requests.get(srv.metrics_url, timeout=30).text
    want = ",".join('%s="%s"' % kv for kv in labels.items())
    for line in text.splitlines():
        if line.startswith(name + "{") and line.split("}")[0][len(name) + 1:] == want:
            return float(line.rsplit(" ", 1)[1])
    return None


def test_idle_sequences_end_and_metrics_count_them(server_factory, tmp_path):
    """A sequence idle for longer than max_sequence_idle_microseconds is
    ended: its next request must START again."""
    src = MODELS["simple_sequence"]
    model = tmp_path / "models" / "simple_sequence"
    (model / "1").mkdir(parents=True)
    (model / "1" / "model.onnx").symlink_to(src / "1" / "model.onnx")
    (model / "config.pbtxt").write_text((src / "config.pbtxt").read_text().replace(
        "max_sequence_idle_microseconds: 5000000", "max_sequence_idle_microseconds: 100000"))
    s = server_factory.start("--model-repository", str(tmp_path / "models"))
    m = "simple_sequence"
    rest_outputs(rest(s, m, 1, 1, start=True))
    rest_outputs(rest(s, m, 1, 2, start=True))
    rest_outputs(rest(s, m, 1, 2, end=True))
    assert metric(s, "inferd_sequences_active", model=m, version="1") == 1
    time.sleep(0.5)  # well past the 100 ms idle limit (and the 100 ms sweep period)
    r = rest(s, m, 1, 1)
    assert "must specify the START flag" in assert_error_response(r, 400)
    assert metric(s, "inferd_sequences_active", model=m, version="1") == 0
    for event, n in (("started", 2), ("ended", 1), ("idle_ended", 1)):
        assert metric(s, "inferd_sequences_total", model=m, version="1", event=event) == n


def test_a_reload_drains_running_sequences_to_the_old_version(server_factory, tmp_path):
    """A sequence started before a reload keeps its state: its requests go
    on to the version that holds it, while new sequences start on the new
    version; the old version unloads once its last sequence ends. (The
    string model's own warm-up gives every input, control inputs included,
    from model_warmup.)"""
    repo = tmp_path / "models"
    repo.mkdir()
    for name in ("simple_sequence", "simple_string_dyna_sequence"):
        (repo / name).symlink_to(MODELS[name])
    s = server_factory.start("--model-repository", str(repo), "--model-control-mode", "explicit",
                             "--load-model", "*")
    assert "simple_string_dyna_sequence version 1" in s.stderr() and \
        "warm-up failed" not in s.stderr()
    m = "simple_sequence"
    assert rest_outputs(rest(s, m, 4, 99, start=True))[1] == 4
    assert rest_outputs(rest(s, m, 1, 99))[1] == 5
    r = requests.post(s.url + "/v2/repository/models/%s/load" % m, timeout=60)
    assert r.status_code == 200, r.text
    assert rest_outputs(rest(s, m, 10, 55, start=True))[1] == 10  # on the new version
    assert rest_outputs(rest(s, m, 1, 99))[1] == 6  # on the old one, its state intact
    unloaded = re.compile(r"model simple_sequence version 1 sha256 \w+ unloaded")
    assert not unloaded.search(s.stderr())
    assert rest_outputs(rest(s, m, 1, 99, end=True))[1] == 7
    deadline = time.monotonic() + 30
    while not unloaded.search(s.stderr()):
        assert time.monotonic() < deadline, "the old version did not unload"
        time.sleep(0.05)
    assert rest_outputs(rest(s, m, 1, 55, end=True))[1] == 11


def test_sequences_under_reloads_lose_nothing(server_factory, tmp_path, pbs):
    """Eight clients run sequences of random lengths back to back (gRPC
    streams and REST), while the model is reloaded three times: every
    response arrives once, and every running sum is right, whichever
    version served it."""
    import random
    repo = tmp_path / "models"
    repo.mkdir()
    (repo / "simple_sequence").symlink_to(MODELS["simple_sequence"])
    s = server_factory.start("--model-repository", str(repo), "--model-control-mode", "explicit",
                             "--load-model", "*")
    pb, hpb = pbs
    errors = []
    stop = threading.Event()

    def over_rest(k, rnd):
        sid = 10000 + k * 1000
        with requests.Session() as sess:
            while not stop.is_set():
                sid += 1
                n, acc = rnd.randint(1, 12), 0
                for i in range(n):
                    v = rnd.randint(-50, 50)
                    acc += v
                    body = {"inputs": [{"name": "INPUT", "datatype": "INT32", "shape": [1, 1],
                                        "data": [v]}],
                            "parameters": {"sequence_id": sid, "sequence_start": i == 0,
                                           "sequence_end": i == n - 1}}
                    r = sess.post(s.url + "/v2/models/simple_sequence/infer", json=body,
                                  timeout=60)
                    if r.status_code != 200 or r.json()["outputs"][1]["data"][0] != acc:
                        errors.append(("rest", sid, i, r.status_code, r.text[:200], acc))
                        return

    def over_stream(k, rnd):
        c = Client(pb, hpb, "127.0.0.1:%d" % s.grpc_port)
        try:
            sid = 20000 + k * 1000
            while not stop.is_set():
                reqs, want = [], {}
                for _ in range(3):  # three sequences interleaved on one stream
                    sid += 1
                    n, acc = rnd.randint(1, 8), 0
                    for i in range(n):
                        v = rnd.randint(-50, 50)
                        acc += v
                        r = grpc_request(pb, "simple_sequence", v, sid, i == 0, i == n - 1,
                                         request_id="%d_%d" % (sid, i))
                        r.outputs.add(name="ACC")
                        reqs.append(r)
                        want["%d_%d" % (sid, i)] = acc
                # Interleaved: every sequence's first request, then every second...
                reqs.sort(key=lambda q: int(q.id.split("_")[1]))
                got = {}
                for resp in c.stream_infer()(iter(reqs), timeout=60):
                    if resp.error_message:
                        errors.append(("stream", resp.error_message))
                        return
                    r = resp.infer_response
                    i = [o.name for o in r.outputs].index("ACC")
                    assert r.id not in got, "duplicated response %s" % r.id
                    got[r.id] = int(np.frombuffer(r.raw_output_contents[i], dtype="<i4")[0])
                if got != want:
                    errors.append(("stream", sorted(set(want.items()) ^ set(got.items()))[:4]))
                    return
        finally:
            c.close()
    threads = [threading.Thread(target=over_rest if k % 2 else over_stream,
                                args=(k, random.Random(k))) for k in range(8)]
    for t in threads:
        t.start()
    for _ in range(3):
        time.sleep(0.3)
        r = requests.post(s.url + "/v2/repository/models/simple_sequence/load", timeout=60)
        assert r.status_code == 200, r.text
    time.sleep(0.3)
    stop.set()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    # Every sequence ended: the three replaced versions have all unloaded.
    unloaded = re.compile(r"model simple_sequence version 1 sha256 \w+ unloaded")
    deadline = time.monotonic() + 30
    while len(unloaded.findall(s.stderr())) < 3:
        assert time.monotonic() < deadline, s.stderr()[-2000:]
        time.sleep(0.05)
