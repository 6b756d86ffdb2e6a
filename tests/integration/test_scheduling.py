"""The model scheduler's order and admission: priority levels (Triton's
`priority_levels` / `default_priority_level` and the request parameter
`priority`), earliest deadline first inside a level, deadline-aware
admission (503 + Retry-After when a request's `timeout` cannot be met),
`timeout_action: DELAY`, and variable-length batching with inferd's
`padding_budget` (requests of different lengths padded with zeros into one
batch, outputs cut back to each request's length).

Timing: no test asserts a duration. Order is observed as the order in which
answers arrive, with margins of several 300 ms model runs: a slow model
(the example plugin identity_stall, `delay_us` 300000, one instance) keeps
its instance busy while the requests under test queue up behind it, sent
GAP apart so they arrive in a known order. Two occupants that outrank the
requests under test come first, so that those requests all wait for at
least one whole run (300 ms) after the last of them is sent: an order is
never decided by a few milliseconds of arrival.
"""
import threading
import time

import grpc
import numpy as np
import pytest
import requests

from conftest import (add_stall_model, assert_error_response, infer_request, ok_json,
                      stall_config)
from grpc_client import Client, generate
from prom import scrape, wait_for

STALL_US = 300000  # one run of a stall model (stall_config's default)
GAP = 0.05         # seconds between sends meant to arrive in that order


# --------------------------------------------------------------------------
# model repositories


def write_vlen_onnx(path):
    """x FP32 [batch, L] -> sum = ReduceSum(x, axis 1, keepdims) [batch, 1],
    y = 2 * x [batch, L]. Zeros added at the end of a row change neither
    that row's sum nor the first L elements of its y."""
    import onnx
    from onnx import TensorProto, helper
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [1])
    two = helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])
    graph = helper.make_graph(
        [helper.make_node("ReduceSum", ["x", "axes"], ["sum"], keepdims=1),
         helper.make_node("Mul", ["x", "two"], ["y"])],
        "vlen",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "L"])],
        [helper.make_tensor_value_info("sum", TensorProto.FLOAT, ["batch", 1]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "L"])],
        [axes, two])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))


PADDING_BUDGET = 'parameters { key: "padding_budget" value: { string_value: "0.15" } }\n'


def vlen_config(padding):
    return ('max_batch_size: 8\n'
            'input [ { name: "x" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
            'output [ { name: "sum" data_type: TYPE_FP32 dims: [ 1 ] },\n'
            '         { name: "y" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
            'instance_group [ { count: 1 kind: KIND_CPU } ]\n'
            'dynamic_batching { max_queue_delay_microseconds: 300000 }\n'
            + (PADDING_BUDGET if padding else ""))


def add_vlen_model(root, name, padding):
    write_vlen_onnx(root / name / "1" / "model.onnx")
    (root / name / "config.pbtxt").write_text(vlen_config(padding))


# Priorities: level 1 is the highest; 0 and levels above 2 mean level 2.
PRIO = "dynamic_batching { priority_levels: 2 default_priority_level: 2 }"
# Earliest deadline first: every request has a deadline (60 s by default).
EDF = ("dynamic_batching { default_queue_policy { allow_timeout_override: true "
       "default_timeout_microseconds: 60000000 } }")
# Earliest deadline first with no default: a request without `timeout` has none.
EDF_NO_DEFAULT = "dynamic_batching { default_queue_policy { allow_timeout_override: true } }"


@pytest.fixture(scope="module")
def srv(module_server_factory, tmp_path_factory):
    root = tmp_path_factory.mktemp("sched") / "models"
    root.mkdir()
    add_stall_model(root, "prio0", stall_config(0, PRIO))
    add_stall_model(root, "prio1", stall_config(1, PRIO))
    add_stall_model(root, "edf", stall_config(1, EDF))
    add_stall_model(root, "edf_nodefault", stall_config(1, EDF_NO_DEFAULT))
    add_stall_model(root, "admit", stall_config(0, EDF_NO_DEFAULT))
    add_vlen_model(root, "vlen", padding=True)
    add_vlen_model(root, "vlen_nopad", padding=False)
    add_stall_model(root, "vlen_stall", stall_config(
        8, "dynamic_batching { max_queue_delay_microseconds: 500000 }", delay_us=0,
        dtype="TYPE_FP32", dims="-1", extra=PADDING_BUDGET))
    # The tests queue several 300 ms runs on purpose, to watch their order:
    # more than the default queue budget (two runs) admits.
    return module_server_factory.start("--queue-budget-ms", "off", repository=root)


@pytest.fixture(scope="module")
def pbs(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("proto_py"))


# --------------------------------------------------------------------------
# requests and the order of their answers


def echo_inputs(model_batched, n):
    shape = [1, 4] if model_batched else [4]
    return [{"name": "IN", "shape": shape, "datatype": "INT32", "data": [n] * 4}]


def echo(url, model, n, batched=True, parameters=None):
    """POST one stall request whose data is [n]*4; returns the Response."""
    return infer_request(url, model, echo_inputs(batched, n), parameters=parameters, timeout=60)


def echoed(r, n):
    """Asserts a 200 whose OUT is the request's own [n]*4."""
    out = ok_json(r)["outputs"][0]
    assert out["name"] == "OUT" and out["data"] == [n] * 4, out
    return True


class Arrivals:
    """Runs calls on threads and records the order in which they return."""

    def __init__(self):
        self.order = []
        self.results = {}
        self._lock = threading.Lock()
        self._threads = []

    def start(self, name, fn, *args, **kw):
        def run():
            try:
                result = fn(*args, **kw)
            except Exception as e:  # the test reads it from results
                result = e
            with self._lock:
                self.order.append(name)
                self.results[name] = result

        t = threading.Thread(target=run, name=name, daemon=True)
        t.start()
        self._threads.append(t)

    def done(self, name):
        with self._lock:
            return name in self.results

    def join(self, timeout=60):
        for t in self._threads:
            t.join(timeout)
            assert not t.is_alive(), "request %s did not return" % t.name
        return self.order

    def before(self, a, b):
        return self.order.index(a) < self.order.index(b)


def send_in_order(arrivals, sends):
    """sends: [(name, fn, args...)], started GAP apart so they arrive in
    this order."""
    for i, (name, fn, *args) in enumerate(sends):
        if i:
            time.sleep(GAP)
        arrivals.start(name, fn, *args)


def model_stats(srv, model):
    doc = ok_json(requests.get("%s/v2/models/%s/stats" % (srv.url, model), timeout=30))
    assert len(doc["model_stats"]) == 1, doc
    return doc["model_stats"][0]


def pending(s, model):
    return s.get("nv_inference_pending_request_count", model=model, version="1")


# --------------------------------------------------------------------------
# a) priority levels


@pytest.mark.parametrize("model,batched", [("prio0", False), ("prio1", True)],
                         ids=["max_batch_size-0", "max_batch_size-1"])
def test_priority_level_1_is_taken_first(srv, model, batched):
    """A and Q (both level 1) take the instance for two runs, whichever
    arrives first, so no level-2 request can start before both are done.
    Then B (priority 2), B0 (priority 0 = the default level 2), B9
    (priority 9 > priority_levels = the default level 2) and last C
    (priority 1): C overtakes all three."""
    url = srv.url
    a = Arrivals()
    send_in_order(a, [
        ("A", echo, url, model, 1, batched, {"priority": 1}),
        ("Q", echo, url, model, 2, batched, {"priority": 1}),
        ("B", echo, url, model, 3, batched, {"priority": 2}),
        ("B0", echo, url, model, 4, batched, {"priority": 0}),
        ("B9", echo, url, model, 5, batched, {"priority": 9}),
        ("C", echo, url, model, 6, batched, {"priority": 1}),
    ])
    order = a.join()
    for name, n in (("A", 1), ("Q", 2), ("B", 3), ("B0", 4), ("B9", 5), ("C", 6)):
        echoed(a.results[name], n)
    for low in ("B", "B0", "B9"):
        assert a.before("C", low), "level 1 (C) must run before level 2 (%s): %s" % (low, order)
        assert a.before("A", low) and a.before("Q", low), order


def test_priority_over_grpc(srv, pbs):
    """The same through gRPC: parameters["priority"].int64_param."""
    pb, hpb = pbs
    c = Client(pb, hpb, "127.0.0.1:%d" % srv.grpc_port)
    infer = c.unary("ModelInfer")

    def grpc_echo(n, priority=None):
        req = pb.ModelInferRequest(model_name="prio1", id=str(n))
        req.inputs.add(name="IN", datatype="INT32", shape=[1, 4]).contents.int_contents.extend(
            [n] * 4)
        if priority is not None:
            req.parameters["priority"].int64_param = priority
        return infer(req, timeout=60)

    a = Arrivals()
    send_in_order(a, [("A", grpc_echo, 1, 1), ("Q", grpc_echo, 2, 1), ("B", grpc_echo, 3, 2),
                      ("C", grpc_echo, 4, 1)])
    order = a.join()
    c.close()
    for name, n in (("A", 1), ("Q", 2), ("B", 3), ("C", 4)):
        r = a.results[name]
        assert not isinstance(r, Exception), (name, r)
        assert r.id == str(n) and np.frombuffer(r.raw_output_contents[0], "<i4").tolist() == [n] * 4
    assert a.before("C", "B"), order
    assert a.before("Q", "B"), order


# --------------------------------------------------------------------------
# b) earliest deadline first


def test_earliest_deadline_first_within_a_level(srv):
    """A and Q (timeout 5 s: the earliest deadlines) take the instance for
    two runs; then D (timeout 20 s) and E (timeout 10 s) queue: E runs
    before D although it arrived later. The model's default deadline is
    60 s."""
    url = srv.url
    a = Arrivals()
    send_in_order(a, [
        ("A", echo, url, "edf", 1, True, {"timeout": 5000000}),
        ("Q", echo, url, "edf", 2, True, {"timeout": 5000000}),
        ("D", echo, url, "edf", 3, True, {"timeout": 20000000}),
        ("E", echo, url, "edf", 4, True, {"timeout": 10000000}),
    ])
    order = a.join()
    for name, n in (("A", 1), ("Q", 2), ("D", 3), ("E", 4)):
        echoed(a.results[name], n)
    assert a.before("E", "D"), "the earlier deadline (E) must run first: %s" % order
    assert all(a.before(x, y) for x in "AQ" for y in "DE"), order


def test_request_with_a_deadline_before_one_without(srv):
    """No default timeout: after A and Q (timeout 5 s), N (no timeout, so
    no deadline) queues before T (timeout 30 s); T runs first."""
    url = srv.url
    a = Arrivals()
    send_in_order(a, [
        ("A", echo, url, "edf_nodefault", 1, True, {"timeout": 5000000}),
        ("Q", echo, url, "edf_nodefault", 2, True, {"timeout": 5000000}),
        ("N", echo, url, "edf_nodefault", 3),
        ("T", echo, url, "edf_nodefault", 4, True, {"timeout": 30000000}),
    ])
    order = a.join()
    for name, n in (("A", 1), ("Q", 2), ("N", 3), ("T", 4)):
        echoed(a.results[name], n)
    assert a.before("T", "N"), "a request with a deadline must run first: %s" % order
    assert all(a.before(x, y) for x in "AQ" for y in "NT"), order


# --------------------------------------------------------------------------
# c) deadline-aware admission


def queue_three(srv, model):
    """Learns the model's run time from one real request, then starts three
    concurrent ones and waits until at least two of them are queued (one
    runs). Returns their Arrivals."""
    echoed(echo(srv.url, model, 0, batched=False), 0)
    a = Arrivals()
    for n in (1, 2, 3):
        a.start("R%d" % n, echo, srv.url, model, n, False)
    s = wait_for(srv, lambda s: pending(s, model) >= 2)
    assert pending(s, model) >= 2, "the three requests never queued"
    return a


def check_three_served(a):
    a.join()
    for n in (1, 2, 3):
        echoed(a.results["R%d" % n], n)


def test_admission_refuses_a_deadline_that_cannot_be_met(srv):
    """About 0.6 s of queued work is ahead; a request that may wait 100 ms
    is refused at once: 503, Retry-After, "cannot be met", while the queued
    requests are still waiting."""
    a = queue_three(srv, "admit")
    r = echo(srv.url, "admit", 9, batched=False, parameters={"timeout": 100000})
    finished = sum(a.done("R%d" % n) for n in (1, 2, 3))
    msg = assert_error_response(r, 503)
    assert "cannot be met" in msg, msg
    retry = r.headers.get("Retry-After")
    assert retry is not None and retry.isdigit() and int(retry) >= 1, r.headers
    assert finished <= 1, "the refusal came only after %d of the 3 queued requests" % finished
    check_three_served(a)
    # Without a timeout, the same request waits its turn.
    echoed(echo(srv.url, "admit", 10, batched=False), 10)


def test_admission_refusal_over_grpc_is_unavailable(srv, pbs):
    pb, hpb = pbs
    a = queue_three(srv, "admit")
    c = Client(pb, hpb, "127.0.0.1:%d" % srv.grpc_port)
    req = pb.ModelInferRequest(model_name="admit")
    req.inputs.add(name="IN", datatype="INT32", shape=[4]).contents.int_contents.extend([9] * 4)
    req.parameters["timeout"].int64_param = 100000
    with pytest.raises(grpc.RpcError) as e:
        c.infer(req, timeout=60)
    finished = sum(a.done("R%d" % n) for n in (1, 2, 3))
    c.close()
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE, (e.value.code(), e.value.details())
    assert "cannot be met" in e.value.details()
    assert finished <= 1, finished
    check_three_served(a)


# --------------------------------------------------------------------------
# d) timeout_action


def timeout_repo(tmp_path, action):
    root = tmp_path / "models"
    root.mkdir()
    add_stall_model(root, "echo", stall_config(1, (
        "dynamic_batching { default_queue_policy { timeout_action: %s "
        "default_timeout_microseconds: 50000 } }" % action)))
    return root


def first_two_requests(srv):
    """A and B are the server's first two requests (no run time is known
    yet): A runs, B waits behind it for most of a 300 ms run."""
    a = Arrivals()
    send_in_order(a, [("A", echo, srv.url, "echo", 1), ("B", echo, srv.url, "echo", 2)])
    a.join()
    echoed(a.results["A"], 1)
    return a


def test_timeout_action_delay_serves_late_requests(server_factory, tmp_path):
    srv = server_factory.start(repository=timeout_repo(tmp_path, "DELAY"))
    a = first_two_requests(srv)
    echoed(a.results["B"], 2)  # 200 although it waited past its 50 ms timeout
    assert a.before("A", "B"), a.order
    stat = model_stats(srv, "echo")
    assert (stat["execution_count"], stat["inference_count"]) == (2, 2)
    assert stat["inference_stats"]["fail"]["count"] == 0


def test_timeout_action_reject_gives_504(server_factory, tmp_path):
    srv = server_factory.start(repository=timeout_repo(tmp_path, "REJECT"))
    a = first_two_requests(srv)
    msg = assert_error_response(a.results["B"], 504)
    assert "timed out" in msg, msg
    assert model_stats(srv, "echo")["execution_count"] == 1  # B never ran


def test_full_queue_sheds_a_lower_priority_request(server_factory, tmp_path):
    """--queue-limit 2: while A (level 1) runs, B and C (level 2) fill the
    queue. D (level 1) arrives: C, the last of the lower level, is shed with
    429 and D takes its place, running before B. E (level 2) finds nothing
    lower to shed: 429."""
    root = tmp_path / "models"
    root.mkdir()
    add_stall_model(root, "prio", stall_config(0, PRIO))
    srv = server_factory.start("--queue-limit", "2", "--queue-budget-ms", "off",
                               repository=root)
    url = srv.url
    a = Arrivals()
    send_in_order(a, [
        ("A", echo, url, "prio", 1, False, {"priority": 1}),
        ("B", echo, url, "prio", 2, False, {"priority": 2}),
        ("C", echo, url, "prio", 3, False, {"priority": 2}),
        ("D", echo, url, "prio", 4, False, {"priority": 1}),
        ("E", echo, url, "prio", 5, False, {"priority": 2}),
    ])
    order = a.join()
    for name, n in (("A", 1), ("B", 2), ("D", 4)):
        echoed(a.results[name], n)
    msg = assert_error_response(a.results["C"], 429)
    assert "higher priority level took this one's place" in msg, msg
    assert "Retry-After" in a.results["C"].headers
    msg = assert_error_response(a.results["E"], 429)
    assert "queue is full" in msg, msg
    assert a.before("D", "B"), order
    assert model_stats(srv, "prio")["execution_count"] == 3  # C and E never ran


# --------------------------------------------------------------------------
# e) variable-length batching with a padding budget


def vlen_request(url, model, x):
    return infer_request(url, model, [{"name": "x", "shape": [1, len(x)], "datatype": "FP32",
                                       "data": x.tolist()}], timeout=60)


def check_vlen(r, x):
    outs = {o["name"]: o for o in ok_json(r)["outputs"]}
    assert outs["sum"]["shape"] == [1, 1], outs["sum"]
    assert outs["y"]["shape"] == [1, len(x)], outs["y"]["shape"]
    assert np.allclose(outs["sum"]["data"], [x.sum(dtype=np.float32)], rtol=1e-5, atol=1e-4)
    assert np.array_equal(np.array(outs["y"]["data"], dtype=np.float32), 2 * x)


def run_together(url, model, xs, send, check):
    """Sends one request per array in xs at once; checks each answer."""
    a = Arrivals()
    for i, x in enumerate(xs):
        a.start("x%d" % i, send, url, model, x)
    a.join()
    for i, x in enumerate(xs):
        check(a.results["x%d" % i], x)


def batch_counts(stat):
    return {b["batch_size"]: b["compute_infer"]["count"] for b in stat["batch_stats"]}


def delta(after, before):
    d = {k: v - before.get(k, 0) for k, v in after.items()}
    return {k: v for k, v in d.items() if v}


class Round:
    """Statistics and padding counters of one model around a round of requests."""

    def __init__(self, srv, model):
        self.srv, self.model = srv, model
        self.stat0 = model_stats(srv, model)
        self.metrics0 = self.counters(scrape(srv))

    def counters(self, s):
        labels = dict(model=self.model, version="1")
        return (s.get("inferd_batch_padding_elements_total", **labels),
                s.get("inferd_batch_input_elements_total", **labels))

    def finish(self, inferences):
        """Reads the round's executions and batch sizes from the statistics."""
        stat = model_stats(self.srv, self.model)
        self.executions = stat["execution_count"] - self.stat0["execution_count"]
        assert stat["inference_count"] - self.stat0["inference_count"] == inferences
        self.batches = delta(batch_counts(stat), batch_counts(self.stat0))
        assert sum(self.batches.values()) == self.executions, self.batches
        assert sum(k * v for k, v in self.batches.items()) == inferences, self.batches

    def read_counters(self, real_elements):
        """Reads the round's padding and input elements from /metrics, once
        they count at least the requests' own elements."""
        s = wait_for(self.srv,
                     lambda s: self.counters(s)[1] - self.metrics0[1] >= real_elements)
        pad, inp = self.counters(s)
        self.padding = pad - self.metrics0[0]
        self.input_elements = inp - self.metrics0[1]


def test_variable_lengths_are_padded_into_one_batch(srv):
    rng = np.random.default_rng(12)
    xs = [rng.standard_normal(n).astype(np.float32) for n in (20, 21, 22, 23)]
    r = Round(srv, "vlen")
    run_together(srv.url, "vlen", xs, vlen_request, check_vlen)
    r.finish(4)
    assert r.executions < 4, "lengths 20..23 (waste 6/92) must share batches: %s" % r.batches
    r.read_counters(86)
    print("lengths 20..23: batches %s, padding %d of %d input elements (%.1f %%)"
          % (r.batches, r.padding, r.input_elements, 100.0 * r.padding / r.input_elements))
    # Zeros added and elements run, padding included: every padded batch's
    # rows are as long as its longest one (86 real elements in all).
    assert r.input_elements == 86 + r.padding, (r.input_elements, r.padding)
    if r.batches == {4: 1}:
        assert (r.padding, r.input_elements) == (6, 92)
    else:
        assert 0 < r.padding <= 0.15 * r.input_elements, (r.batches, r.padding)
    s = scrape(srv)
    for family in ("inferd_batch_padding_elements_total", "inferd_batch_input_elements_total"):
        assert s.types.get(family) == "counter", family


def test_lengths_too_different_are_not_batched(srv):
    """10 and 100: padding would be 90 of 200 elements (45 % > 15 %)."""
    rng = np.random.default_rng(13)
    xs = [rng.standard_normal(n).astype(np.float32) for n in (10, 100)]
    r = Round(srv, "vlen")
    run_together(srv.url, "vlen", xs, vlen_request, check_vlen)
    r.finish(2)
    assert r.batches == {1: 2}, r.batches
    r.read_counters(110)
    assert (r.padding, r.input_elements) == (0, 110)


def test_without_padding_budget_lengths_never_share_a_batch(srv):
    """As in Triton: without the opt-in, different shapes are not batched."""
    rng = np.random.default_rng(14)
    xs = [rng.standard_normal(n).astype(np.float32) for n in (20, 21, 22, 23)]
    r = Round(srv, "vlen_nopad")
    run_together(srv.url, "vlen_nopad", xs, vlen_request, check_vlen)
    r.finish(4)
    assert r.batches == {1: 4}, r.batches
    r.read_counters(0)
    assert r.padding == 0


def stall_fp32(url, model, x):
    return infer_request(url, model, [{"name": "IN", "shape": [1, len(x)], "datatype": "FP32",
                                       "data": x.tolist()}], timeout=60)


def check_stall_fp32(r, x):
    out = ok_json(r)["outputs"][0]
    assert out["name"] == "OUT" and out["shape"] == [1, len(x)], out
    assert np.array_equal(np.array(out["data"], dtype=np.float32), x)


def test_padded_plugin_outputs_are_cut_back(srv):
    """identity_stall returns its padded input: each request gets back only
    its own row, at its own length ([1,5], [1,5], [1,4]: 1 zero of 15)."""
    xs = [np.array([1, 2, 3, 4, 5], np.float32), np.array([6, 7, 8, 9, 10], np.float32),
          np.array([11, 12, 13, 14], np.float32)]
    r = Round(srv, "vlen_stall")
    run_together(srv.url, "vlen_stall", xs, stall_fp32, check_stall_fp32)
    r.finish(3)
    assert r.batches == {3: 1}, r.batches
    r.read_counters(14)
    assert (r.padding, r.input_elements) == (1, 15)
