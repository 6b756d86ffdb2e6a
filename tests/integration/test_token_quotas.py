"""Token budgets of generative models (issue 21; docs/generative.md, "Token
budgets" and "Usage metering") against the running server with the model
kjv, configured by the `token-quotas` section of a --config file:

  - reservation at admission: 50 concurrent completions against a daily
    budget that holds exactly 10 of them: 10 admitted, 40 refused 429
    insufficient_quota with x-should-retry false, and neither GET /v2/usage
    nor inferd_token_quota_remaining ever shows more spent than the budget;
  - a per-minute refusal: rate_limit_exceeded, Retry-After and
    retry-after-ms as the bucket (limit/60 a second) says, and a retry after
    that time succeeds;
  - refunds of what a call did not use (EOS, a stop sequence), exact on a
    daily counter, within the refill of the elapsed time on a per-minute one;
  - a cancelled stream (a disconnect with --stream-resume-secs 0, DELETE
    /v1/streams/{id}) is charged its generated tokens, a resumed stream
    (Last-Event-ID) once;
  - the x-ratelimit-* headers (requests and tokens) on successes and 429s of
    /v1/completions, /v1/chat/completions and KServe generate(_stream), in
    OpenAI's duration format, and none when no rule matches;
  - a reservation larger than the whole budget: 429, x-should-retry false,
    "lower max_tokens";
  - --usage-file: usage survives a restart, and the file parses whenever it
    is looked at (atomic replacement);
  - a per-tenant "*" rule: one tenant's exhausted budget leaves another's;
  - the official OpenAI Node SDK (tests/node/quota_sdk.mjs): RateLimitError
    with its type, code and headers; a retry after retry-after-ms that
    succeeds; no retry of insufficient_quota (one request, as the server's
    access log shows).

The budgets are computed from the prompt's token count, which a server
without rules reports (usage.prompt_tokens). The prompts are chosen for
their greedy generations (temperature 0): FULL runs to max_tokens (so a
call uses its whole reservation), SHORT ends by itself well before 200
tokens (so a call uses less than it reserved)."""
import json
import math
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from conftest import REPO_ROOT
from prom import scrape
from test_auth import auth_yaml, bearer, new_key
from test_generate_clients import NODE, NodeRunner
from test_openai_api import RawStream, assert_openai_error, event_id, event_json

KJV = REPO_ROOT / "models" / "kjv"
FULL = "And the LORD said unto Moses"  # greedy: runs to max_tokens (up to 200)
SHORT = "In the beginning"  # greedy: ends (EOS) after fewer than 150 tokens
WAIT = 30.0
TOKEN_HEADERS = ("x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens",
                 "x-ratelimit-reset-tokens")
REQUEST_HEADERS = ("x-ratelimit-limit-requests", "x-ratelimit-remaining-requests",
                   "x-ratelimit-reset-requests")


# --------------------------------------------------------------------------
# Helpers


def completion(srv, prompt, max_tokens, headers=None, path="/v1/completions", **extra):
    """A greedy completion (chat when path says so); the Response."""
    body = {"model": "kjv", "max_tokens": max_tokens, "temperature": 0, **extra}
    if path == "/v1/chat/completions":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    return requests.post(srv.url + path, json=body, headers=headers, timeout=WAIT)


def generate(srv, prompt, max_tokens, stream=False):
    """KServe's generate (or generate_stream) of kjv, greedy."""
    path = "/v2/models/kjv/generate" + ("_stream" if stream else "")
    return requests.post(srv.url + path, timeout=WAIT,
                         json={"text_input": prompt, "max_tokens": max_tokens,
                               "temperature": 0})


def usage_totals(srv, headers=None, **params):
    """GET /v2/usage (filtered by params): its totals."""
    r = requests.get(srv.url + "/v2/usage", params=params, headers=headers, timeout=WAIT)
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"rows", "totals"}, body
    return body["totals"]


def quota_metric(srv, name, **labels):
    return scrape(srv).get(name, **labels)


def wait_until(predicate, what, timeout=WAIT):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting for " + what
        time.sleep(0.02)


def start_quota_server(factory, tmp_path, rules, *flags, extra_yaml=""):
    """A server of kjv whose config file has `rules` (YAML list items,
    indented by two) under token-quotas, then extra_yaml."""
    cfg = tmp_path / ("inferd-%d.yaml" % len(list(tmp_path.glob("inferd-*.yaml"))))
    cfg.write_text("token-quotas:\n" + rules + extra_yaml)
    return factory.start("--config", str(cfg), *flags, models={"kjv": KJV})


def go_duration(ms):
    """OpenAI's (Go's) duration text of ms milliseconds: "0s", "250ms",
    "1.5s", "6m0s", "23h59m59.001s"."""
    if ms == 0:
        return "0s"
    if ms < 1000:
        return "%dms" % ms
    h, rest = divmod(ms, 3600000)
    m, rest = divmod(rest, 60000)
    s, frac = divmod(rest, 1000)
    out = ("%dh" % h if h else "") + ("%dm" % m if h or m else "") + str(s)
    if frac:
        out += "." + ("%03d" % frac).rstrip("0")
    return out + "s"


DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+)(?:\.(\d{1,3}))?s|(\d+)ms)$")


def duration_ms(text):
    """The milliseconds of a duration header, which must be in the canonical
    form go_duration() writes."""
    m = DURATION.match(text)
    assert m, "not a duration: %r" % text
    h, mi, s, frac, ms = m.groups()
    if ms is not None:
        value = int(ms) + 3600000 * int(h or 0) + 60000 * int(mi or 0)
    else:
        value = (3600000 * int(h or 0) + 60000 * int(mi or 0) + 1000 * int(s)
                 + int((frac or "0").ljust(3, "0")))
    assert go_duration(value) == text, "%r is not written as Go does (%r)" % (text, go_duration(value))
    return value


def seconds_to_utc_midnight():
    return 86400 - time.time() % 86400


def check_token_headers(r, limit):
    """The three x-ratelimit-*-tokens headers: (limit, remaining, reset ms)."""
    for h in TOKEN_HEADERS:
        assert h in r.headers, (h, dict(r.headers))
    assert int(r.headers["x-ratelimit-limit-tokens"]) == limit
    remaining = int(r.headers["x-ratelimit-remaining-tokens"])
    assert 0 <= remaining <= limit
    return limit, remaining, duration_ms(r.headers["x-ratelimit-reset-tokens"])


def check_retry_headers(r):
    """A 429's Retry-After (whole seconds, at least 1) agrees with its
    retry-after-ms; returns the milliseconds."""
    ms = int(r.headers["retry-after-ms"])
    assert ms >= 0
    assert int(r.headers["Retry-After"]) == max(1, math.ceil(ms / 1000)), dict(r.headers)
    return ms


def check_openai_429(r, type_, retry):
    """An OpenAI-shaped 429 of type_ (code the same); x-should-retry is
    "false" unless retry. Returns the error object."""
    err = assert_openai_error(r, 429, type_, type_)
    assert err["param"] is None
    if retry:
        assert r.headers.get("x-should-retry", "true") == "true", dict(r.headers)
    else:
        assert r.headers.get("x-should-retry") == "false", dict(r.headers)
    check_retry_headers(r)
    return err


@pytest.fixture(scope="module")
def plain(module_server_factory):
    """A server of kjv without rules; it reports the prompts' token counts
    and checks that the prompts generate as this module relies on."""
    if not (KJV / "1" / "model.onnx").exists():
        pytest.fail("model kjv missing: %s/1/model.onnx (models/build/make_kjv.py)" % KJV)
    srv = module_server_factory.start(models={"kjv": KJV})
    full = completion(srv, FULL, 200)
    short = completion(srv, SHORT, 200)
    assert full.status_code == 200 and short.status_code == 200, (full.text, short.text)
    f, s = full.json(), short.json()
    assert f["choices"][0]["finish_reason"] == "length" and f["usage"]["completion_tokens"] == 200
    assert s["choices"][0]["finish_reason"] == "stop" and s["usage"]["completion_tokens"] < 150
    srv.p_full = f["usage"]["prompt_tokens"]
    srv.p_short = s["usage"]["prompt_tokens"]
    srv.full_text = f["choices"][0]["text"]
    return srv


# --------------------------------------------------------------------------
# Reservation


def test_concurrent_calls_never_spend_more_than_the_daily_budget(plain, server_factory,
                                                                 tmp_path):
    max_tokens = 8
    per_call = plain.p_full + max_tokens
    limit = 10 * per_call
    srv = start_quota_server(server_factory, tmp_path,
                             "  - model: kjv\n    per-day: {total: %d}\n" % limit)
    violations, samples = [], []
    done = threading.Event()

    def watch():
        while not done.is_set():
            s = scrape(srv)
            for labels, v in s.series("inferd_token_quota_remaining"):
                samples.append(v)
                if not 0 <= v <= limit:
                    violations.append(("remaining", labels, v))
            spent = usage_totals(srv)["total_tokens"]
            if spent > limit:
                violations.append(("usage", spent))

    watcher = threading.Thread(target=watch)
    watcher.start()
    barrier = threading.Barrier(50)

    def one(_):
        barrier.wait()
        return completion(srv, FULL, max_tokens)

    try:
        with ThreadPoolExecutor(50) as pool:
            answers = list(pool.map(one, range(50)))
    finally:
        done.set()
        watcher.join()
    ok = [r for r in answers if r.status_code == 200]
    refused = [r for r in answers if r.status_code == 429]
    assert (len(ok), len(refused)) == (10, 40), [r.status_code for r in answers]
    for r in ok:
        u = r.json()["usage"]
        assert (u["prompt_tokens"], u["completion_tokens"]) == (plain.p_full, max_tokens)
        _, remaining, reset_ms = check_token_headers(r, limit)
        assert remaining % per_call == 0 and remaining <= limit - per_call
        assert abs(reset_ms / 1000 - seconds_to_utc_midnight()) < 5
    for r in refused:
        err = check_openai_429(r, "insufficient_quota", retry=False)
        assert "daily token quota" in err["message"], err
        assert abs(int(r.headers["retry-after-ms"]) / 1000 - seconds_to_utc_midnight()) < 5
        assert int(r.headers["x-ratelimit-remaining-tokens"]) < per_call
    assert samples and not violations, violations[:5]
    # Every call was settled and metered, the refused ones with no tokens.
    wait_until(lambda: usage_totals(srv)["requests"] == 50, "50 metered calls")
    assert usage_totals(srv) == {"requests": 50, "prompt_tokens": 10 * plain.p_full,
                                 "completion_tokens": 10 * max_tokens, "total_tokens": limit}
    s = scrape(srv)
    assert s.get("inferd_token_quota_remaining", window="day", kind="total") == 0
    assert s.get("inferd_token_quota_limit", window="day", kind="total") == limit
    assert s.get("inferd_token_quota_refusals_total", window="day", kind="total",
                 reason="exhausted") == 40
    assert s.get("inferd_usage_requests_total", model="kjv") == 50
    assert s.get("inferd_usage_tokens_total", model="kjv", kind="prompt") == 10 * plain.p_full
    assert s.get("inferd_usage_tokens_total", model="kjv", kind="completion") == 10 * max_tokens


def test_per_minute_refusal_says_when_to_retry(plain, server_factory, tmp_path):
    # A bucket of `limit` holds one reservation and not two: the second
    # misses `deficit` tokens, refilled at limit/60 a second (about 2 s).
    max_tokens = 56
    per_call = plain.p_full + max_tokens
    limit = per_call * 60 // 31
    deficit = 2 * per_call - limit
    srv = start_quota_server(server_factory, tmp_path,
                             "  - model: kjv\n    per-minute: {total: %d}\n" % limit)
    t0 = time.monotonic()
    first = completion(srv, FULL, max_tokens)
    assert first.status_code == 200, first.text
    assert first.json()["usage"]["completion_tokens"] == max_tokens
    _, remaining, reset_ms = check_token_headers(first, limit)
    assert remaining == limit - per_call
    assert abs(reset_ms - per_call * 60000 / limit) <= 2
    second = completion(srv, FULL, max_tokens)
    elapsed_ms = (time.monotonic() - t0) * 1000
    err = check_openai_429(second, "rate_limit_exceeded", retry=True)
    assert "per minute" in err["message"] and "retry in" in err["message"], err
    assert "max_tokens %d" % max_tokens in err["message"], err
    wait_ms = int(second.headers["retry-after-ms"])
    full_wait = deficit * 60000 / limit
    assert full_wait - elapsed_ms - 2 <= wait_ms <= full_wait + 2, (wait_ms, full_wait, elapsed_ms)
    assert int(second.headers["x-ratelimit-remaining-tokens"]) < per_call
    time.sleep(wait_ms / 1000 + 0.05)
    third = completion(srv, FULL, max_tokens)
    assert third.status_code == 200, third.text
    assert quota_metric(srv, "inferd_token_quota_refusals_total", window="minute",
                        reason="rate") == 1


def test_too_large_a_reservation_is_refused_for_good(plain, server_factory, tmp_path):
    limit = 100
    srv = start_quota_server(server_factory, tmp_path,
                             "  - model: kjv\n    per-minute: {total: %d}\n" % limit)
    r = completion(srv, FULL, 200)
    err = check_openai_429(r, "rate_limit_exceeded", retry=False)
    assert "lower max_tokens" in err["message"], err
    assert str(plain.p_full + 200) in err["message"] and str(limit) in err["message"], err
    g = generate(srv, FULL, 200)
    assert g.status_code == 429 and "lower max_tokens" in g.json()["error"], g.text
    assert g.headers["x-should-retry"] == "false"
    check_retry_headers(g)
    # Nothing was taken: a call that fits gets the whole bucket.
    ok = completion(srv, FULL, 10)
    assert ok.status_code == 200, ok.text
    assert check_token_headers(ok, limit)[1] == limit - plain.p_full - 10
    assert quota_metric(srv, "inferd_token_quota_refusals_total", reason="too_large") == 2


# --------------------------------------------------------------------------
# Settlement: refunds, cancellation, resumption


DAY_LIMIT = 100000


def day_remaining(srv):
    return quota_metric(srv, "inferd_token_quota_remaining", window="day", kind="total")


def settled(srv, requests_before):
    """Waits until the usage shows one more call than requests_before;
    returns the totals."""
    wait_until(lambda: usage_totals(srv)["requests"] == requests_before + 1, "the settlement")
    return usage_totals(srv)


def test_unused_tokens_are_given_back(plain, server_factory, tmp_path):
    minute = 3000  # 50 tokens a second: less than a call's refund in its time
    srv = start_quota_server(server_factory, tmp_path,
                             "  - model: kjv\n    per-minute: {total: %d}\n"
                             "    per-day: {total: %d}\n" % (minute, DAY_LIMIT))
    stop = plain.full_text.split(",")[2].strip()  # ends the text after a few tokens
    spent = 0
    for prompt, extra in ((SHORT, {}), (FULL, {"stop": [stop]})):
        before = usage_totals(srv)
        t0 = time.monotonic()
        r = completion(srv, prompt, 200, **extra)
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["choices"][0]["finish_reason"] == "stop"
        u = body["usage"]
        assert u["completion_tokens"] < 150, u
        # While it ran, the reservation was whole.
        assert int(r.headers["x-ratelimit-remaining-tokens"]) <= minute - u["prompt_tokens"] - 200
        after = settled(srv, before["requests"])
        assert after["prompt_tokens"] - before["prompt_tokens"] == u["prompt_tokens"]
        assert after["completion_tokens"] - before["completion_tokens"] == u["completion_tokens"]
        spent += u["total_tokens"]
        assert day_remaining(srv) == DAY_LIMIT - spent
        # The bucket: what the call used is gone, the rest came back; it has
        # refilled since the first spent token at most.
        left = quota_metric(srv, "inferd_token_quota_remaining", window="minute", kind="total")
        refill = (time.monotonic() - t0) * minute / 60
        used = u["total_tokens"]
        assert minute - used <= left <= min(minute, minute - used + refill + 1), (left, used, refill)
        if prompt == SHORT:
            time.sleep(used * 60 / minute + 0.2)  # full again


def test_a_disconnected_stream_is_charged_what_it_generated(plain, server_factory, tmp_path):
    srv = start_quota_server(server_factory, tmp_path,
                             "  - model: kjv\n    per-day: {total: %d}\n" % DAY_LIMIT,
                             "--stream-resume-secs", "0")
    s = RawStream(srv, "POST", "/v1/completions",
                  json.dumps({"model": "kjv", "prompt": FULL, "max_tokens": 240,
                              "temperature": 0, "stream": True}).encode())
    assert s.status == 200
    assert int(s.headers["x-ratelimit-remaining-tokens"]) == DAY_LIMIT - plain.p_full - 240
    s.next_event()
    s.close()
    totals = settled(srv, 0)
    wait_until(lambda: quota_metric(srv, "inferd_gen_requests_finished_total",
                                    reason="cancelled") == 1, "the cancellation")
    assert totals["prompt_tokens"] == plain.p_full
    assert 1 <= totals["completion_tokens"] < 240, totals
    assert day_remaining(srv) == DAY_LIMIT - totals["total_tokens"]


def read_stream(s):
    """The JSON chunks of the rest of a RawStream (ending with [DONE])."""
    events = s.rest()
    assert events and event_json(events[-1]) == "[DONE]", events[-3:]
    return [json.loads(event_json(e)) for e in events[:-1]]


def test_cancelled_and_resumed_streams_are_charged_once(plain, server_factory, tmp_path):
    srv = start_quota_server(server_factory, tmp_path,
                             "  - model: kjv\n    per-day: {total: %d}\n" % DAY_LIMIT,
                             "--stream-resume-secs", "5")
    body = {"model": "kjv", "prompt": FULL, "max_tokens": 240, "temperature": 0,
            "stream": True, "stream_options": {"include_usage": True}}
    # DELETE /v1/streams/{id} while it generates.
    s = RawStream(srv, "POST", "/v1/completions", json.dumps(body).encode())
    sid, _ = event_id(s.next_event())
    d = requests.delete(srv.url + "/v1/streams/" + sid, timeout=WAIT)
    assert d.status_code == 200, d.text
    chunks = read_stream(s)
    s.close()
    finish = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finish[-1] == ("cancelled" if d.json()["cancelled"] else "length")
    totals = settled(srv, 0)
    assert totals["prompt_tokens"] == plain.p_full
    c = totals["completion_tokens"]
    assert (c < 240) == d.json()["cancelled"], (c, d.json())
    usage = [ch["usage"] for ch in chunks if ch.get("usage")]
    if usage:
        assert usage[-1]["completion_tokens"] == c
    assert day_remaining(srv) == DAY_LIMIT - totals["total_tokens"]
    charged = totals["total_tokens"]
    # A stream broken after two events, resumed by a re-POST with
    # Last-Event-ID, then replayed whole by GET: one call, charged once.
    resumed = dict(body, max_tokens=40)
    s = RawStream(srv, "POST", "/v1/completions", json.dumps(resumed).encode())
    s.next_event()
    last = s.next_event().split(b"\n", 1)[0].decode()[4:]
    s.close()
    s = RawStream(srv, "POST", "/v1/completions", json.dumps(resumed).encode(),
                  headers={"Last-Event-ID": last})
    assert s.status == 200
    chunks = read_stream(s)
    s.close()
    usage = [ch["usage"] for ch in chunks if ch.get("usage")][-1]
    assert usage == {"prompt_tokens": plain.p_full, "completion_tokens": 40,
                     "total_tokens": plain.p_full + 40}
    replay = requests.get(srv.url + "/v1/streams/" + last.rsplit("-", 1)[0], timeout=WAIT)
    assert replay.status_code == 200 and replay.text.rstrip().endswith("data: [DONE]")
    totals = settled(srv, 1)
    time.sleep(0.3)  # a second settlement would show by now
    assert usage_totals(srv) == totals
    assert totals["total_tokens"] - charged == plain.p_full + 40
    assert day_remaining(srv) == DAY_LIMIT - totals["total_tokens"]


# --------------------------------------------------------------------------
# Headers


def test_ratelimit_headers_on_every_generative_route(plain, server_factory, tmp_path):
    max_tokens = 4
    per_call = plain.p_full + max_tokens
    limit = 4 * per_call + 2  # four calls fit, a fifth does not for a while
    srv = start_quota_server(
        server_factory, tmp_path, "  - model: kjv\n    per-minute: {total: %d}\n" % limit,
        extra_yaml="rate-limits:\n  - model: kjv\n    rate: 1\n    burst: 20\n")
    calls = {
        "completions": lambda: completion(srv, FULL, max_tokens),
        "chat": lambda: completion(srv, FULL, max_tokens, path="/v1/chat/completions"),
        "generate": lambda: generate(srv, FULL, max_tokens),
        "generate_stream": lambda: generate(srv, FULL, max_tokens, stream=True),
    }
    spent = 0
    for name, call in calls.items():
        r = call()
        assert r.status_code == 200, (name, r.text)
        spent += per_call
        _, remaining, reset_ms = check_token_headers(r, limit)
        # Refilled since the first call by at most a few tokens; the bucket
        # holds `remaining` and a fraction, which the reset counts.
        assert limit - spent <= remaining <= limit - spent + 5, (name, remaining)
        per_token = 60000 / limit
        assert (limit - remaining - 1) * per_token - 2 <= reset_ms \
            <= (limit - remaining + 1) * per_token + 2, (name, remaining, reset_ms)
        assert int(r.headers["x-ratelimit-limit-requests"]) == 20
        assert 0 <= int(r.headers["x-ratelimit-remaining-requests"]) < 20
        duration_ms(r.headers["x-ratelimit-reset-requests"])
        assert "Retry-After" not in r.headers and "retry-after-ms" not in r.headers
    for name, call in calls.items():
        if name == "generate_stream":
            continue
        r = call()
        assert r.status_code == 429, (name, r.text)
        if name == "generate":
            assert isinstance(r.json()["error"], str) and "per minute" in r.json()["error"]
            assert r.headers.get("x-should-retry", "true") == "true"
            wait_ms = check_retry_headers(r)
        else:
            check_openai_429(r, "rate_limit_exceeded", retry=True)
            wait_ms = int(r.headers["retry-after-ms"])
        _, remaining, reset_ms = check_token_headers(r, limit)
        assert remaining < per_call
        # The refusing bucket needs per_call - remaining more tokens (the
        # header's remaining is whole tokens, the bucket's may be more).
        full_wait = (per_call - remaining) * 60000 / limit
        assert full_wait - 60000 / limit - 2 <= wait_ms <= full_wait + 2, (name, wait_ms)
        for h in REQUEST_HEADERS:
            assert h in r.headers, (name, h)


def test_no_ratelimit_headers_without_a_rule(plain):
    answers = [completion(plain, FULL, 2),
               completion(plain, FULL, 2, path="/v1/chat/completions"),
               generate(plain, FULL, 2), generate(plain, FULL, 2, stream=True)]
    for r in answers:
        assert r.status_code == 200, r.text
        assert not [h for h in r.headers if h.lower().startswith("x-ratelimit-")], dict(r.headers)


def test_go_durations():
    for ms, text in ((0, "0s"), (250, "250ms"), (1000, "1s"), (1500, "1.5s"), (1250, "1.25s"),
                     (360000, "6m0s"), (86399000, "23h59m59s"), (3600001, "1h0m0.001s")):
        assert go_duration(ms) == text
        assert duration_ms(text) == ms
    for bad in ("1.500s", "60s0ms", "0ms", "1m", "1.5ms", "01s"):
        with pytest.raises(AssertionError):
            duration_ms(bad)


# --------------------------------------------------------------------------
# Metering across restarts


def test_usage_survives_a_restart_and_the_file_always_parses(plain, server_factory, tmp_path):
    path = tmp_path / "usage.json"
    looks, broken = [0], []
    stop = threading.Event()

    def look():
        while not stop.is_set():
            time.sleep(0.005)
            try:
                text = path.read_text()
            except FileNotFoundError:
                continue
            looks[0] += 1
            try:
                doc = json.loads(text)
                assert doc["format"] == "inferd-usage/1" and isinstance(doc["rows"], list)
            except (ValueError, KeyError, TypeError, AssertionError) as e:
                broken.append((repr(e), text[:200]))

    looker = threading.Thread(target=look)
    looker.start()
    try:
        srv = server_factory.start("--usage-file", str(path), models={"kjv": KJV})
        for n in (3, 5, 7):
            assert completion(srv, FULL, n).status_code == 200
        assert generate(srv, SHORT, 4).status_code == 200
        wait_until(lambda: usage_totals(srv)["requests"] == 4, "4 metered calls")
        before = requests.get(srv.url + "/v2/usage", timeout=WAIT).json()
        want = {"requests": 4, "prompt_tokens": 3 * plain.p_full + plain.p_short,
                "completion_tokens": 3 + 5 + 7 + 4}
        want["total_tokens"] = want["prompt_tokens"] + want["completion_tokens"]
        assert before["totals"] == want
        # The writer keeps the file (within its flush interval).
        wait_until(lambda: path.exists() and json.loads(path.read_text())["rows"], "the file",
                   timeout=15)
        assert not srv.stop()
        doc = json.loads(path.read_text())
        rows = [dict(r, total_tokens=r["prompt_tokens"] + r["completion_tokens"])
                for r in doc["rows"]]
        assert rows == before["rows"]
        assert rows[0]["tenant"] is None and rows[0]["model"] == "kjv"
        assert rows[0]["day"] == time.strftime("%Y-%m-%d", time.gmtime())
        again = server_factory.start("--usage-file", str(path), models={"kjv": KJV})
        assert requests.get(again.url + "/v2/usage", timeout=WAIT).json() == before
        assert completion(again, FULL, 2).status_code == 200
        wait_until(lambda: usage_totals(again)["requests"] == 5, "the new call")
        after = usage_totals(again)
        assert after["prompt_tokens"] == want["prompt_tokens"] + plain.p_full
        assert after["completion_tokens"] == want["completion_tokens"] + 2
        assert not again.stop()
        assert json.loads(path.read_text())["rows"][0]["requests"] == 5
    finally:
        stop.set()
        looker.join()
    assert looks[0] > 10 and not broken, (looks[0], broken[:3])


def test_usage_queries_and_errors(plain, server_factory, tmp_path):
    srv = server_factory.start(models={"kjv": KJV})
    assert completion(srv, FULL, 3).status_code == 200
    wait_until(lambda: usage_totals(srv)["requests"] == 1, "the call")
    today = time.strftime("%Y-%m-%d", time.gmtime())
    assert usage_totals(srv, model="kjv", **{"from": today, "to": today})["requests"] == 1
    assert usage_totals(srv, model="nope")["requests"] == 0
    assert usage_totals(srv, **{"from": "2000-01-01", "to": "2000-01-02"})["requests"] == 0
    for bad in ({"from": "yesterday"}, {"to": "2026-13-01"}, {"from": "2026-1-1"},
                {"to": "2026-02-30"}, {"from": "2026-02-02", "to": "2026-02-01"}, {"day": today}):
        r = requests.get(srv.url + "/v2/usage", params=bad, timeout=WAIT)
        assert r.status_code == 400 and r.json()["error"], (bad, r.text)
    r = requests.post(srv.url + "/v2/usage", timeout=WAIT)
    assert r.status_code == 405 and r.json()["error"]


# --------------------------------------------------------------------------
# Tenants


def test_each_tenant_has_its_own_budget(plain, server_factory, tmp_path):
    keys = {n: new_key() for n in ("team-a", "team-b", "ops")}
    max_tokens = 8
    per_call = plain.p_full + max_tokens
    auth = auth_yaml([("team-a", [keys["team-a"][1]], ["infer"]),
                      ("team-b", [keys["team-b"][1]], ["infer"]),
                      ("ops", [keys["ops"][1]], ["admin", "read"])])
    srv = start_quota_server(server_factory, tmp_path,
                             '  - tenant: "*"\n    model: kjv\n    per-day: {total: %d}\n'
                             % (2 * per_call), extra_yaml=auth)
    a, b, ops = (bearer(keys[n][0]) for n in ("team-a", "team-b", "ops"))
    for _ in range(2):
        assert completion(srv, FULL, max_tokens, headers=a).status_code == 200
    err = check_openai_429(completion(srv, FULL, max_tokens, headers=a), "insufficient_quota",
                           retry=False)
    assert "team-a" in err["message"], err
    # team-b's budget is whole.
    r = completion(srv, FULL, max_tokens, headers=b)
    assert r.status_code == 200, r.text
    assert check_token_headers(r, 2 * per_call)[1] == per_call
    assert completion(srv, FULL, max_tokens, headers=b).status_code == 200
    check_openai_429(completion(srv, FULL, max_tokens, headers=b), "insufficient_quota",
                     retry=False)
    # Metered per tenant; /v2/usage is for the admin scope.
    wait_until(lambda: usage_totals(srv, headers=ops)["requests"] == 6, "6 metered calls")
    for t in ("team-a", "team-b"):
        assert usage_totals(srv, headers=ops, tenant=t) == {
            "requests": 3, "prompt_tokens": 2 * plain.p_full,
            "completion_tokens": 2 * max_tokens, "total_tokens": 2 * per_call}
    assert requests.get(srv.url + "/v2/usage", timeout=WAIT).status_code == 401
    assert requests.get(srv.url + "/v2/usage", headers=a, timeout=WAIT).status_code == 403
    s = scrape(srv)
    for t in ("team-a", "team-b"):
        assert s.get("inferd_token_quota_remaining", tenant=t, window="day") == 0
        assert s.get("inferd_usage_tokens_total", tenant=t, kind="completion") == 2 * max_tokens


# --------------------------------------------------------------------------
# The official OpenAI Node SDK


@pytest.mark.skipif(NODE is None, reason="node (Node.js) is not on PATH")
def test_openai_node_sdk_obeys_the_retry_headers(plain, server_factory, tmp_path):
    keys = {n: new_key() for n in ("minute", "daily")}
    max_tokens = 56
    per_call = plain.p_full + max_tokens
    minute_limit = per_call * 60 // 31  # one call, then a wait of about 2 s
    log = tmp_path / "access.log"
    auth = auth_yaml([("minute", [keys["minute"][1]], ["infer"]),
                      ("daily", [keys["daily"][1]], ["infer"])])
    srv = start_quota_server(
        server_factory, tmp_path,
        "  - tenant: minute\n    per-minute: {total: %d}\n"
        "  - tenant: daily\n    per-day: {total: %d}\n" % (minute_limit, per_call),
        extra_yaml=auth + "access-log: %s\n" % log)
    (tmp_path / "node").mkdir()
    node = NodeRunner(tmp_path / "node")
    out = node("quota_sdk.mjs", ["--base-url", srv.url + "/v1", "--model", "kjv",
                                 "--prompt", FULL, "--max-tokens", str(max_tokens),
                                 "--minute-key", keys["minute"][0],
                                 "--daily-key", keys["daily"][0]])
    assert out["minute_fill"]["usage"]["total_tokens"] == per_call
    # (a) maxRetries 0: the SDK's RateLimitError, its type, code and headers.
    e = out["no_retry"]["error"]
    assert (e["class"], e["status"], e["type"], e["code"]) == (
        "RateLimitError", 429, "rate_limit_exceeded", "rate_limit_exceeded"), e
    h = e["headers"]
    assert int(h["x-ratelimit-limit-tokens"]) == minute_limit
    assert int(h["x-ratelimit-remaining-tokens"]) < per_call
    assert int(h["retry-after"]) == max(1, math.ceil(int(h["retry-after-ms"]) / 1000))
    assert h["x-should-retry"] in (None, "true")
    duration_ms(h["x-ratelimit-reset-tokens"])
    # (b) maxRetries 2: refused, slept retry-after-ms, then answered.
    tries = out["retry"]["requests"]
    assert [t["status"] for t in tries] == [429, 200], tries
    assert tries[1]["sent"] - tries[0]["received"] >= int(tries[0]["retry_after_ms"]) - 1, tries
    assert out["retry"]["result"]["usage"]["total_tokens"] == per_call
    # (c) insufficient_quota: x-should-retry false, so one request only.
    assert out["daily_fill"]["usage"]["total_tokens"] == per_call
    e = out["exhausted"]["error"]
    assert (e["class"], e["status"], e["type"], e["code"]) == (
        "RateLimitError", 429, "insufficient_quota", "insufficient_quota"), e
    assert e["headers"]["x-should-retry"] == "false"
    assert [t["status"] for t in out["exhausted"]["requests"]] == [429]
    # The server saw exactly that: the daily tenant's lines are the fill
    # and one refusal; the minute tenant's the fill, a refusal for (a) and
    # the two requests of (b). (A line is written when its call ends, which
    # can be after the answer let the next call start: counted, not ordered.)
    assert not srv.stop()
    lines = [json.loads(l) for l in log.read_text().splitlines()]
    by_tenant = {t: sorted(l["status"] for l in lines
                           if l.get("tenant") == t and l["endpoint"] == "/v1/completions")
                 for t in ("minute", "daily")}
    assert by_tenant == {"minute": [200, 200, 429, 429], "daily": [200, 429]}, by_tenant
    # The admitted calls' lines carry their reservation and what they used.
    for l in lines:
        if l.get("tenant") in ("minute", "daily") and l["status"] == 200:
            assert (l["tokens_reserved"], l["prompt_tokens"], l["completion_tokens"]) == (
                per_call, plain.p_full, max_tokens), l
