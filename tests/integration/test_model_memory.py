"""Memory per model (docs/model-lifecycle.md#memory): Triton's memory_usage
in the statistics (REST and gRPC), inferd_model_memory_bytes, and the
budget a load must fit in (--model-memory-budget).

The figure a version reports is the growth of the process's resident
memory over its load; these tests measure the same growth from outside
(/proc/<pid>/statm around the repository API's load call) and compare."""
import re
import subprocess
import time
from pathlib import Path

import pytest
import requests

from conftest import INFERD_BIN, REPO_ROOT, assert_error_response, ok_json, sanitized_binary
from grpc_client import Client, generate
from prom import scrape

BUNDLED = REPO_ROOT / "models"
# Every model the project ships, ONNX Runtime ones, a preprocessed image
# and sound model, a text model and the generative one.
BUNDLED_MODELS = ("simple", "strings", "digits", "langid", "spoken_digits", "kjv")
# What may differ between the two readings: 10 % of the growth, and for the
# smallest models a few pages (the load request's own buffers).
RELATIVE, PAGES = 0.10, 8 * 4096


@pytest.fixture(scope="module")
def pbs(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("proto_py"))


def rss(srv):
    fields = Path("/proc/%d/statm" % srv.proc.pid).read_text().split()
    return int(fields[1]) * 4096


def post(srv, path):
    return requests.post(srv.url + path, timeout=60)


def reported(srv, model):
    (stat,) = ok_json(requests.get(srv.url + "/v2/models/%s/stats" % model))["model_stats"]
    (mem,) = stat["memory_usage"]
    assert (mem["type"], mem["id"]) == ("CPU", 0)
    return mem["byte_size"]


def files_bytes(model, version="1"):
    return sum(p.stat().st_size for p in (BUNDLED / model / version).iterdir() if p.is_file())


def wait_unloaded(srv, model):
    """The version is freed (and its memory given back) by the repository's
    manager thread once its last request let go; the log line comes from
    that thread, which runs the next load only after it."""
    deadline = time.monotonic() + 30
    pattern = r"model %s version 1 sha256 [0-9a-f]{12} unloaded" % model
    while not re.search(pattern, srv.stderr()):
        assert time.monotonic() < deadline, "%s was not unloaded" % model
        time.sleep(0.05)


def test_memory_usage_is_the_resident_growth_of_each_load(server_factory, pbs):
    """Each bundled model loaded alone (explicit mode, one load at a time):
    memory_usage equals, within 10 %, the growth of the server's resident
    memory measured from outside around the load; gRPC and the metrics say
    the same."""
    srv = server_factory.start("--model-repository", str(BUNDLED),
                               "--model-control-mode", "explicit")
    # The load API's own first-use costs (its thread's buffers) are paid
    # before the first measured load, and so are those of a load that
    # succeeds: ONNX Runtime's first session and what a loaded version
    # adds after its window (about 0.5 MiB inside and 25-75 KiB after it,
    # which would all count against whichever model came first).
    assert_error_response(post(srv, "/v2/repository/models/nope/load"), 404)
    post(srv, "/v2/repository/index")
    assert post(srv, "/v2/repository/models/simple/load").status_code == 200
    assert post(srv, "/v2/repository/models/simple/unload").status_code == 200
    wait_unloaded(srv, "simple")
    grown = {}
    for model in BUNDLED_MODELS:
        before = rss(srv)
        r = post(srv, "/v2/repository/models/%s/load" % model)
        after = rss(srv)
        assert r.status_code == 200, r.text
        grown[model] = after - before
    for model in BUNDLED_MODELS:
        got = reported(srv, model)
        assert got > 0, model
        # Under AddressSanitizer freed memory waits in its quarantine and
        # every block has redzones: what the load request itself allocates
        # after the version's window weighs too much to compare (the rest
        # of the test holds there too).
        if not sanitized_binary():
            assert abs(got - grown[model]) <= max(RELATIVE * grown[model], PAGES), \
                (model, got, grown[model])
    metrics = scrape(srv)
    c = Client(*pbs, "127.0.0.1:%d" % srv.grpc_port)
    try:
        for model in BUNDLED_MODELS:
            (g,) = c.call("ModelStatistics", name=model).model_stats
            (mem,) = g.memory_usage
            assert (mem.type, mem.id, mem.byte_size) == ("CPU", 0, reported(srv, model))
            assert metrics.get("inferd_model_memory_bytes", model=model, version="1") == \
                mem.byte_size
    finally:
        c.close()
    # The load line says it too.
    assert "1 instances, %.1f MiB of memory" % (reported(srv, "kjv") / 1048576) in srv.stderr()


def test_a_load_over_the_memory_budget_is_refused_before_it_starts(server_factory):
    """The budget is just above kjv's files: with simple loaded kjv does not
    fit and is refused with the figures; once simple is unloaded its memory
    no longer counts and kjv loads."""
    kjv_files = files_bytes("kjv")
    slack = 16 * 1024
    srv = server_factory.start("--model-repository", str(BUNDLED),
                               "--model-control-mode", "explicit",
                               "--model-memory-budget", str(kjv_files + slack))
    assert post(srv, "/v2/repository/models/simple/load").status_code == 200
    simple = reported(srv, "simple")
    assert simple > slack  # what makes kjv not fit below

    r = post(srv, "/v2/repository/models/kjv/load")
    assert_error_response(r, 400)
    msg = r.json()["error"]
    assert msg.startswith("failed to load 'kjv': ")
    assert ("model 'kjv' version 1 was not loaded: its files take %.1f MiB and the loaded "
            "versions use %.1f MiB of the %.1f MiB --model-memory-budget; unload a model or "
            "raise the budget" % (kjv_files / 1048576, simple / 1048576,
                                  (kjv_files + slack) / 1048576)) in msg, msg
    assert requests.get(srv.url + "/v2/models/kjv/ready").status_code != 200
    index = ok_json(post(srv, "/v2/repository/index"))
    (row,) = [e for e in index if e["name"] == "kjv"]
    assert row["state"] == "UNAVAILABLE" and "--model-memory-budget" in row["reason"]
    m = scrape(srv)
    assert m.get("inferd_model_load_failures_total", model="kjv", reason="memory") == 1
    assert m.get("inferd_model_load_failures_total", model="kjv", reason="load") == 0
    assert " error model kjv version 1 failed to load: model 'kjv' version 1 was not loaded" \
        in srv.stderr()

    assert post(srv, "/v2/repository/models/simple/unload").status_code == 200
    wait_unloaded(srv, "simple")
    r = post(srv, "/v2/repository/models/kjv/load")
    assert r.status_code == 200, r.text
    assert requests.get(srv.url + "/v2/models/kjv/ready").status_code == 200


def test_the_budget_flag_is_checked():
    r = subprocess.run([str(INFERD_BIN), "serve", "--model-memory-budget", "-1"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert "--model-memory-budget: expected a number from 0 to 1125899906842624, got '-1'" \
        in r.stderr
