"""GET /v2/usage, the token metering of generative models (obs/usage.h,
docs/api.md): its answer without calls, its query parameters and their
400s, 405 for other methods, the admin scope with API keys, the usage file
(written at start, set by flag or config key) and a malformed usage file,
which stops the start and is left as it was.
"""
import datetime
import json
import os
import signal
import subprocess
import time

import pytest
import requests

from conftest import INFERD_BIN, REPO_ROOT, assert_error_response, ok_json, parse_responses, raw_http
from test_auth import auth_yaml, bearer, new_key

KJV = REPO_ROOT / "models" / "kjv"
EMPTY = {"rows": [], "totals": {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0,
                                "total_tokens": 0}}


@pytest.fixture(scope="module")
def srv(module_server_factory, tmp_path_factory):
    path = tmp_path_factory.mktemp("usage") / "usage.json"
    s = module_server_factory.start("--usage-file", str(path), "--usage-retention-days", "30")
    s.usage_file = path
    return s


def test_empty(srv):
    assert ok_json(requests.get(srv.url + "/v2/usage")) == EMPTY
    r = requests.get(srv.url + "/v2/usage?tenant=team-a&model=kjv&from=2026-01-01&to=2026-01-31")
    assert ok_json(r) == EMPTY
    r = requests.head(srv.url + "/v2/usage")
    assert r.status_code == 200 and r.content == b""
    # Escapes are decoded, empty pairs skipped, a trailing slash is the same path.
    assert ok_json(requests.get(srv.url + "/v2/usage/?tenant=team%2Da&&from=2026-01-01")) == EMPTY


def test_file_written_at_start(srv):
    assert json.loads(srv.usage_file.read_text()) == {"format": "inferd-usage/1", "rows": []}
    assert not srv.usage_file.with_name("usage.json.tmp").exists()


@pytest.mark.parametrize("query, message", [
    ("from=2026-02-30", "query parameter 'from': expected a date YYYY-MM-DD, got '2026-02-30'"),
    ("to=yesterday", "query parameter 'to': expected a date YYYY-MM-DD, got 'yesterday'"),
    ("from=2026-01-01T00:00", "query parameter 'from': expected a date YYYY-MM-DD, got "
                              "'2026-01-01T00:00'"),
    ("to=" + "2" * 40, "query parameter 'to': expected a date YYYY-MM-DD"),
    ("from=2026-03-01&to=2026-02-01", "query parameter 'from' (2026-03-01) is after 'to' "
                                      "(2026-02-01)"),
    ("tenant=", "query parameter 'tenant': expected a name of 1 to 255 bytes"),
    ("model=" + "m" * 256, "query parameter 'model': expected a name of 1 to 255 bytes"),
    ("model=a%00b", "query parameter 'model': expected a name of 1 to 255 bytes"),
    ("day=2026-01-01", "unknown query parameter 'day'; use tenant, model, from and to"),
    ("model=kjv&model=simple", "query parameter 'model' given twice"),
])
def test_bad_parameters(srv, query, message):
    r = requests.get(srv.url + "/v2/usage?" + query)
    assert assert_error_response(r, 400) == message


@pytest.mark.parametrize("query", ["tenant=%zz", "tenant=ab%4", "model=%"])
def test_bad_escapes(srv, query):
    # Sent as is: requests would escape the '%'.
    data = raw_http(srv.port, b"GET /v2/usage?%s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                    % query.encode())
    (r,) = parse_responses(data)
    assert assert_error_response(r, 400).endswith("expected a name of 1 to 255 bytes")


def test_methods(srv):
    for method in ("POST", "PUT", "DELETE"):
        r = requests.request(method, srv.url + "/v2/usage")
        assert_error_response(r, 405)
        assert r.headers["Allow"] == "GET, HEAD"
    assert_error_response(requests.get(srv.url + "/v2/usage/daily"), 404)


def test_metrics(srv):
    text = requests.get(srv.metrics_url).text
    assert "# TYPE inferd_usage_requests_total counter\n" in text
    assert "# TYPE inferd_usage_tokens_total counter\n" in text
    assert "\ninferd_usage_rows_dropped_total 0\n" in text


def test_admin_scope(server_factory, tmp_path):
    admin, reader = new_key(), new_key()
    config = tmp_path / "inferd.yaml"
    usage = tmp_path / "metered.json"
    config.write_text(auth_yaml([("admin", [admin[1]], ["admin"]),
                                 ("reader", [reader[1]], ["read", "infer"])])
                      + "usage-file: %s\n" % usage)
    s = server_factory.start("--config", str(config))
    assert ok_json(requests.get(s.url + "/v2/usage", headers=bearer(admin[0]))) == EMPTY
    r = requests.get(s.url + "/v2/usage", headers=bearer(reader[0]))
    assert "admin" in assert_error_response(r, 403)
    r = requests.get(s.url + "/v2/usage")
    assert_error_response(r, 401)
    assert "WWW-Authenticate" in r.headers
    # The config key names the file as the flag does.
    assert json.loads(usage.read_text())["format"] == "inferd-usage/1"


def test_malformed_file_stops_the_start(server_factory, tmp_path):
    usage = tmp_path / "usage.json"
    text = '{"format": "inferd-usage/1", "rows": [{"day": "2026-01-01"'
    usage.write_text(text)
    s = server_factory.start("--usage-file", str(usage), wait=False)
    rc = s.proc.wait(timeout=30)
    s.returncode = rc
    assert rc == 1, s.stderr()
    assert "usage file %s: malformed JSON at byte" % usage in s.stderr()
    assert usage.read_text() == text
    assert not usage.with_name("usage.json.tmp").exists()


def test_unwritable_place_stops_the_start(server_factory, tmp_path):
    usage = tmp_path / "missing-dir" / "usage.json"
    s = server_factory.start("--usage-file", str(usage), wait=False)
    rc = s.proc.wait(timeout=30)
    s.returncode = rc
    assert rc == 1, s.stderr()
    assert "usage file %s: cannot write %s.tmp" % (usage, usage) in s.stderr()


@pytest.mark.parametrize("value", ["0", "36501", "ten"])
def test_retention_flag_range(value):
    p = subprocess.run([str(INFERD_BIN), "serve", "--usage-retention-days", value],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2
    assert "usage-retention-days" in p.stderr and "expected a number from 1 to 36500" in p.stderr


def test_calls_are_metered_and_survive_a_restart(server_factory, tmp_path):
    usage = tmp_path / "usage.json"
    flags = ("--usage-file", str(usage))
    s = server_factory.start(*flags, models={"kjv": KJV})
    body = {"model": "kjv", "prompt": "In the beginning God", "max_tokens": 5, "temperature": 0}
    used = [ok_json(requests.post(s.url + "/v1/completions", json=body, timeout=60))["usage"]
            for _ in range(2)]
    r = requests.post(s.url + "/v2/models/kjv/generate", timeout=60,
                      json={"text_input": "And God said", "max_tokens": 3, "temperature": 0})
    assert r.status_code == 200, r.text
    prompt = sum(u["prompt_tokens"] for u in used)
    completion = sum(u["completion_tokens"] for u in used)
    day = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    # A call is metered when it ends, just after its response was written
    # (docs/api.md, Usage): the last one may still be settling.
    deadline = time.monotonic() + 10
    while True:
        doc = ok_json(requests.get(s.url + "/v2/usage"))
        if doc["totals"]["requests"] == 3 or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    (row,) = doc["rows"]
    assert row["day"] == day and row["tenant"] is None and row["model"] == "kjv", row
    assert row["requests"] == 3 and row["prompt_tokens"] > prompt, row
    assert row["completion_tokens"] == completion + 3, row  # greedy: no end of text so soon
    assert row["total_tokens"] == row["prompt_tokens"] + row["completion_tokens"]
    assert doc["totals"] == {k: v for k, v in row.items() if k not in ("day", "tenant", "model")}
    text = requests.get(s.metrics_url).text
    assert '\ninferd_usage_requests_total{tenant="",model="kjv"} 3\n' in text
    assert ('\ninferd_usage_tokens_total{tenant="",model="kjv",kind="completion"} %d\n'
            % row["completion_tokens"]) in text

    assert s.stop() == []
    saved = json.loads(usage.read_text())
    assert saved == {"format": "inferd-usage/1", "rows": [
        {k: v for k, v in row.items() if k != "total_tokens"}]}
    s = server_factory.start(*flags, models={"kjv": KJV})
    assert ok_json(requests.get(s.url + "/v2/usage?model=kjv&from=" + day)) == doc
    # The metrics count since the start.
    assert "inferd_usage_requests_total{" not in requests.get(s.metrics_url).text


def test_every_thread_leaves_sigterm_to_the_main_thread(server_factory, tmp_path):
    """SIGTERM drains the server only when the main thread takes it: every
    other thread blocks it, the usage file's writer (started before the I/O
    threads) included. A thread that did not would die of the signal
    whenever the main thread is between two waits, with nothing drained."""
    s = server_factory.start("--usage-file", str(tmp_path / "usage.json"))
    pid = s.proc.pid
    term, intr = 1 << (signal.SIGTERM - 1), 1 << (signal.SIGINT - 1)
    others = [t for t in os.listdir("/proc/%d/task" % pid) if int(t) != pid]
    assert others
    for tid in others:
        status = open("/proc/%d/task/%s/status" % (pid, tid)).read()
        name = open("/proc/%d/task/%s/comm" % (pid, tid)).read().strip()
        blocked = int(next(l.split()[1] for l in status.splitlines()
                           if l.startswith("SigBlk:")), 16)
        assert blocked & term and blocked & intr, (name, hex(blocked))
    assert s.stop() == []
