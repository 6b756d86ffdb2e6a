"""The default queue budget (docs/execution.md, "The queue budget"): with no
configuration, a model's queue is bounded by time. A request without a
timeout whose estimated wait exceeds the budget (by default two runs of a
full batch, at least 5 ms) gets 503 + Retry-After at once instead of
queueing; `--queue-budget-ms off` queues it as before; a config with a
queue policy, or a request with its own `timeout`, is never held to it.

The model is the example plugin identity_stall, one instance, no batching,
200 ms per run: requests are sent together (a barrier), and what the
server did is read from its own counters (refusals by reason, the queue
duration histogram), never from the client's clock. The bounds are wide:
an admitted request has at most one request ahead of it besides the one
running, so it waits at most about two runs (0.4 s, the budget), where a
flood of 20 without the budget makes the last ones wait 19 runs (3.8 s at
least: a run never takes less than its 200 ms sleep)."""
import re

import pytest
import requests

from conftest import (add_stall_model, assert_error_response, burst, infer_request, ok_json,
                      stall_config)
from prom import scrape

RUN_US = 200000
FLOOD = 20


def repo(root):
    """`slow`: no queue policy (the budget applies); `own`: a config with a
    queue policy of its own (max_queue_size only: no timeout either)."""
    root.mkdir()
    add_stall_model(root, "slow", stall_config(0, delay_us=RUN_US))
    add_stall_model(root, "own", stall_config(
        0, "dynamic_batching { default_queue_policy { max_queue_size: 100 } }", delay_us=RUN_US))
    return root


def echo(srv, model, n=1, parameters=None):
    return infer_request(srv.url, model, [{"name": "IN", "shape": [4], "datatype": "INT32",
                                           "data": [n] * 4}], parameters=parameters, timeout=120)


def echoed(r, n):
    assert ok_json(r)["outputs"][0]["data"] == [n] * 4


def learn_run_time(srv, model):
    """One request, so that the scheduler knows the model's run time (a
    model's first requests are never refused)."""
    echoed(echo(srv, model, 7), 7)


def refusals(srv, model, reason="budget"):
    return scrape(srv).get("inferd_queue_refusals_total", model=model, version="1", reason=reason)


def waited_over(srv, model, seconds):
    """Successful requests of `model` that waited more than `seconds` in
    the queue (the server's histogram; `seconds` is one of its bounds)."""
    s = scrape(srv)
    total = s.get("inferd_queue_duration_seconds_count", model=model, version="1")
    within = dict(s.buckets("inferd_queue_duration_seconds", model=model, version="1"))
    return total - within[str(seconds)]


@pytest.fixture
def srv(server_factory, tmp_path):
    return server_factory.start(repository=repo(tmp_path / "models"))


def test_flood_beyond_the_budget_is_refused_at_once(srv):
    learn_run_time(srv, "slow")
    budget = scrape(srv).get("inferd_queue_budget_seconds", model="slow", version="1")
    # Two runs of the model, each at least its 200 ms sleep.
    assert budget >= 2 * RUN_US / 1e6, budget
    results = burst(FLOOD, lambda: echo(srv, "slow"))
    codes = sorted(r.status_code for r in results)
    assert set(codes) == {200, 503}, codes
    refused = [r for r in results if r.status_code == 503]
    for r in refused:
        msg = assert_error_response(r, 503)
        m = re.search(r"about (\d+) us of work is queued ahead of this request, more than its "
                      r"queue budget of (\d+) us", msg)
        assert m and int(m.group(1)) > int(m.group(2)), msg
        assert "model 'slow' is overloaded" in msg, msg
        assert int(r.headers["Retry-After"]) >= 1, r.headers
    # The server counted each refusal, and no admitted request waited
    # anywhere near the queue a flood without the budget builds.
    assert refusals(srv, "slow") == len(refused)
    assert waited_over(srv, "slow", 1) == 0
    # The refused requests never ran: one execution per admitted request.
    stat = ok_json(requests.get(srv.url + "/v2/models/slow/stats", timeout=30))["model_stats"][0]
    assert stat["execution_count"] == 1 + codes.count(200), stat


def test_budget_off_queues_the_same_flood(server_factory, tmp_path):
    srv = server_factory.start("--queue-budget-ms", "off", repository=repo(tmp_path / "models"))
    learn_run_time(srv, "slow")
    assert not scrape(srv).has("inferd_queue_budget_seconds", model="slow")
    results = burst(FLOOD, lambda: echo(srv, "slow"))
    assert [r.status_code for r in results] == [200] * FLOOD, [r.text for r in results]
    assert refusals(srv, "slow") == 0
    assert waited_over(srv, "slow", 1) > 0


def test_light_load_is_never_refused(srv):
    """Three clients in a closed loop: one request runs, at most two wait,
    and an estimated wait of at most two runs is within the budget of two
    runs. Then one client alone."""
    learn_run_time(srv, "slow")

    def client():
        return [echo(srv, "slow", n) for n in range(4)]

    for answers in burst(3, client):
        for n, r in enumerate(answers):
            echoed(r, n)
    for n in range(3):
        echoed(echo(srv, "slow", n), n)
    assert refusals(srv, "slow") == 0


def test_own_queue_policy_or_timeout_is_never_held_to_the_budget(srv):
    """A config with a queue policy has no budget; a request with its own
    `timeout` is admitted by that deadline (60 s is enough) instead."""
    learn_run_time(srv, "own")
    learn_run_time(srv, "slow")
    s = scrape(srv)
    assert not s.has("inferd_queue_budget_seconds", model="own")
    assert s.has("inferd_queue_budget_seconds", model="slow")
    flood = 8  # 1.6 s of work each: the budget would refuse most
    results = burst(flood, lambda: echo(srv, "own"))
    assert [r.status_code for r in results] == [200] * flood, [r.text for r in results]
    results = burst(flood, lambda: echo(srv, "slow", parameters={"timeout": 60000000}))
    assert [r.status_code for r in results] == [200] * flood, [r.text for r in results]
    assert refusals(srv, "own") == 0 and refusals(srv, "slow") == 0
    assert refusals(srv, "slow", "deadline") == 0


def test_fixed_budget(server_factory, tmp_path):
    """--queue-budget-ms 50: the budget is 50 ms whatever the run time, so
    even one request queued behind a 200 ms run is refused."""
    srv = server_factory.start("--queue-budget-ms", "50", repository=repo(tmp_path / "models"))
    assert scrape(srv).get("inferd_queue_budget_seconds", model="slow", version="1") == 0.05
    learn_run_time(srv, "slow")
    results = burst(4, lambda: echo(srv, "slow"))
    assert 503 in [r.status_code for r in results], [r.text for r in results]
    assert refusals(srv, "slow") == sum(r.status_code == 503 for r in results)
