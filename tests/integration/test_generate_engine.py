"""The generation engine (docs/generative.md) through Triton's generate
extension on the shipped model `kjv`: the text interface in metadata, the
options and their refusals, finish reasons, stop sequences, seeds, the KV
cache budget (a request waits for room; 400 when it can never fit; the
503s of a wait are timing-dependent here and tested in
tests/unit/test_engine.c), cancellation by a client that goes away, continuous batching (decode
steps carry several sequences) and the engine's metrics.

The OpenAI API, resumable streams and the independent clients (the OpenAI
SDK, a Node.js ONNX Runtime loop, grpcio) have their own files."""
import json
import threading
import time

import pytest
import requests

from conftest import REPO_ROOT
from test_openai_api import RawStream, metric

KJV = REPO_ROOT / "models" / "kjv"
WAIT = 30.0
# One KV block of kjv: 16 tokens x 4 layers x (key, value) x 4 heads x 32 floats.
BLOCK = 16 * 4 * 2 * 4 * 32 * 4
PROMPT = "And the LORD said unto Moses"  # 8 tokens
LABELS = '{model="kjv",version="1"}'


@pytest.fixture(scope="module")
def srv(module_server_factory):
    return module_server_factory.start(models={"kjv": KJV})


def generate(srv, body, stream=False, **kw):
    path = "/v2/models/kjv/generate_stream" if stream else "/v2/models/kjv/generate"
    return requests.post(srv.url + path, data=json.dumps(body), timeout=WAIT, **kw)


def events(r):
    return [json.loads(line[len("data: "):]) for line in r.text.split("\n")
            if line.startswith("data: ")]


def finished(srv, reason):
    return metric(srv, 'inferd_gen_requests_finished_total{model="kjv",version="1",reason="%s"}'
                  % reason) or 0


def test_metadata_is_the_text_interface(srv):
    m = requests.get(srv.url + "/v2/models/kjv", timeout=WAIT).json()
    assert [(i["name"], i["datatype"], i["shape"]) for i in m["inputs"]] == [
        ("text_input", "BYTES", [1]), ("max_tokens", "INT32", [1]),
        ("temperature", "FP32", [1]), ("top_k", "INT32", [1]), ("top_p", "FP32", [1]),
        ("random_seed", "UINT64", [1]), ("stop_words", "BYTES", [-1]), ("stream", "BOOL", [1])]
    assert [o["name"] for o in m["outputs"]] == [
        "text_output", "finish_reason", "num_input_tokens", "num_output_tokens"]
    cfg = requests.get(srv.url + "/v2/models/kjv/config", timeout=WAIT).json()
    assert cfg["model_transaction_policy"]["decoupled"] is True
    assert [i.get("optional", False) for i in cfg["input"]] == [False] + [True] * 7


def test_infer_is_refused_for_a_decoupled_model(srv):
    body = {"inputs": [{"name": "text_input", "datatype": "BYTES", "shape": [1],
                        "data": [PROMPT]}]}
    r = requests.post(srv.url + "/v2/models/kjv/infer", json=body, timeout=WAIT)
    assert r.status_code == 400
    assert "generate_stream" in r.json()["error"]


def test_greedy_is_deterministic_and_ends_at_length(srv):
    body = {"text_input": PROMPT, "max_tokens": 12, "temperature": 0}
    a, b = generate(srv, body).json(), generate(srv, body).json()
    assert a["text_output"] == b["text_output"] and a["text_output"]
    assert a["finish_reason"] == "length"
    assert a["num_input_tokens"] == 8 and a["num_output_tokens"] == 12


def test_streamed_text_is_the_whole_text(srv):
    body = {"text_input": PROMPT, "max_tokens": 20, "temperature": 0}
    whole = generate(srv, body).json()
    ev = events(generate(srv, body, stream=True))
    assert len(ev) == 20  # one response per token
    assert "".join(e["text_output"] for e in ev) == whole["text_output"]
    assert [e["finish_reason"] for e in ev] == [""] * 19 + ["length"]
    assert [e["num_output_tokens"] for e in ev] == list(range(1, 21))
    # stream: false on the streaming endpoint: one response.
    one = events(generate(srv, dict(body, stream=False), stream=True))
    assert len(one) == 1 and one[0]["text_output"] == whole["text_output"]


def test_seeds_reproduce_sampling(srv):
    body = {"text_input": PROMPT, "max_tokens": 24, "temperature": 0.9, "top_p": 0.95,
            "top_k": 40}
    a = generate(srv, dict(body, random_seed=11)).json()["text_output"]
    b = generate(srv, dict(body, random_seed=11)).json()["text_output"]
    texts = {generate(srv, dict(body, random_seed=s)).json()["text_output"] for s in range(12, 17)}
    assert a == b
    assert len(texts | {a}) > 1  # other seeds, other texts


def test_stop_words_end_the_text_before_them(srv):
    base = {"text_input": PROMPT, "max_tokens": 40, "temperature": 0}
    full = generate(srv, base).json()["text_output"]
    stop = full[10:14]
    assert stop.strip()
    r = generate(srv, dict(base, stop_words=[stop, "zzzz"])).json()
    assert r["finish_reason"] == "stop"
    assert r["text_output"] == full[:full.index(stop)]
    ev = events(generate(srv, dict(base, stop_words=[stop]), stream=True))
    assert "".join(e["text_output"] for e in ev) == full[:full.index(stop)]
    assert ev[-1]["finish_reason"] == "stop"


@pytest.mark.parametrize("body,needle", [
    ({"text_input": ""}, "empty"),
    ({"text_input": "x" * 600}, "context of 256 tokens"),
    ({"text_input": PROMPT, "max_tokens": 250}, "do not fit"),
    ({"text_input": PROMPT, "max_tokens": 0}, "at least 1"),
    ({"text_input": PROMPT, "top_p": 0}, "top_p"),
    ({"text_input": PROMPT, "temperature": -1}, "temperature"),
    ({"text_input": PROMPT, "top_k": -2}, "top_k"),
    ({"text_input": PROMPT, "stop_words": ["a", "b", "c", "d", "e"]}, "at most 4"),
    ({"text_input": PROMPT, "stop_words": ["x" * 65]}, "at most 64 bytes"),
    ({"max_tokens": 3}, "text_input"),
])
def test_bad_requests_are_400(srv, body, needle):
    r = generate(srv, body)
    assert r.status_code == 400, r.text
    assert needle in r.json()["error"]


def test_decode_steps_batch_concurrent_sequences(srv):
    before_steps = metric(srv, "inferd_gen_decode_steps_total" + LABELS)
    before_rows = metric(srv, "inferd_gen_decode_batch_size_sum" + LABELS)
    body = {"text_input": PROMPT, "max_tokens": 60, "temperature": 0}
    results = []
    threads = [threading.Thread(target=lambda: results.append(generate(srv, body).json()))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 8 and all(r["num_output_tokens"] == 60 for r in results)
    steps = metric(srv, "inferd_gen_decode_steps_total" + LABELS) - before_steps
    rows = metric(srv, "inferd_gen_decode_batch_size_sum" + LABELS) - before_rows
    # 8 x 59 decode rows; run one at a time they would take 472 steps.
    assert rows == 8 * 59
    assert steps < rows


def test_metrics(srv):
    generate(srv, {"text_input": PROMPT, "max_tokens": 3, "temperature": 0})
    text = requests.get(srv.metrics_url, timeout=WAIT).text
    for name in ["inferd_gen_prompt_tokens_total", "inferd_gen_generation_tokens_total",
                 "inferd_gen_sequences_running", "inferd_gen_sequences_waiting",
                 "inferd_gen_time_to_first_token_seconds_count",
                 "inferd_gen_time_per_output_token_seconds_count"]:
        assert name + LABELS in text, name
    assert "inferd_gen_kv_cache_usage_ratio 0" in text
    assert finished(srv, "length") >= 1


# --------------------------------------------------------------------------
# The KV cache budget and cancellation (their own servers)


def test_a_request_that_can_never_fit_is_400(server_factory):
    """8 blocks hold 128 tokens: 8 prompt tokens + 150 never fit."""
    srv = server_factory.start("--kv-cache-bytes", str(8 * BLOCK), models={"kjv": KJV})
    r = generate(srv, {"text_input": PROMPT, "max_tokens": 150})
    assert r.status_code == 400
    assert "--kv-cache-bytes" in r.json()["error"]


def test_a_full_cache_preempts_and_every_stream_completes_as_alone(server_factory):
    """The issue's acceptance: 16 blocks hold 256 tokens; 8 greedy streams of
    about 110 tokens each (7 blocks) are all admitted with their prompts'
    blocks, and as they grow the youngest are preempted and recomputed
    later. Every stream completes with the text and token counts of a run
    alone, each token sent once; preemptions are counted."""
    srv = server_factory.start("--kv-cache-bytes", str(16 * BLOCK), models={"kjv": KJV})
    prompts = ["And the LORD said unto Moses", "In the beginning God created",
               "Blessed are the meek", "Thou shalt not", "And God said, Let there be",
               "The LORD is my shepherd", "For God so loved the world", "And Jesus answered"]
    body = lambda p: {"text_input": p, "max_tokens": 100, "temperature": 0}

    def summary(r):
        assert r.status_code == 200, r.text
        ev = events(r)
        counts = [e["num_output_tokens"] for e in ev]
        return ("".join(e["text_output"] for e in ev), ev[-1]["finish_reason"], counts)

    alone = [summary(generate(srv, body(p), stream=True)) for p in prompts]
    assert (metric(srv, "inferd_gen_preemptions_total" + LABELS) or 0) == 0
    results = [None] * len(prompts)

    def run(i):
        results[i] = summary(generate(srv, body(prompts[i]), stream=True))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == alone
    assert metric(srv, "inferd_gen_preemptions_total" + LABELS) >= 1
    assert metric(srv, "inferd_gen_kv_cache_usage_ratio") == 0


def test_streams_sharing_a_prefix_equal_independent_runs(server_factory):
    """The prefix cache (docs/generative.md): requests whose prompts begin
    with the same 120-token text (a system prompt) attach its KV cache
    blocks instead of computing them. Two concurrent streams after a first
    request give the tokens two independent runs give on a server without
    the cache (greedy and seeded sampling), and the hit counter says the
    prefix was found."""
    system = ("You are a helpful assistant who answers in the words of the King James "
              "Bible. Be brief, and speak of the LORD with reverence. ") * 2
    suffixes = [" And the LORD said unto Moses", " In the beginning God", " Blessed are the"]
    shared = server_factory.start(models={"kjv": KJV})
    alone = server_factory.start("--no-prefix-cache", models={"kjv": KJV})

    def body(i, sampled):
        b = {"text_input": system + suffixes[i], "max_tokens": 40, "temperature": 0}
        if sampled:
            b.update(temperature=0.8, random_seed=7 + i)
        return b

    def text(srv, b):
        r = generate(srv, b, stream=True)
        assert r.status_code == 200, r.text
        ev = events(r)
        return "".join(e["text_output"] for e in ev), ev[-1]["num_input_tokens"]

    for sampled in (False, True):
        assert generate(shared, body(0, sampled)).status_code == 200  # publishes the prefix
        got = [None, None]

        def run(i):
            got[i - 1] = text(shared, body(i, sampled))

        threads = [threading.Thread(target=run, args=(i,)) for i in (1, 2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert got == [text(alone, body(i, sampled)) for i in (1, 2)], sampled
        assert all(n > 100 for _, n in got)
    hits = metric(shared, "inferd_gen_prefix_cache_hit_tokens_total" + LABELS)
    assert hits >= 4 * 96  # four requests found at least six whole blocks of the prefix
    assert metric(alone, "inferd_gen_prefix_cache_hit_tokens_total" + LABELS) == 0
    assert metric(shared, "inferd_gen_prefix_cache_blocks" + LABELS) > 0


def test_a_waiting_request_runs_when_room_is_freed(server_factory):
    """One sequence runs at a time (--max-running-sequences 1): the others
    wait, then run (the refusals of a wait are in tests/unit/test_engine.c)."""
    srv = server_factory.start("--kv-cache-bytes", str(8 * BLOCK), "--max-running-sequences",
                               "1", models={"kjv": KJV})
    body = {"text_input": PROMPT, "max_tokens": 100, "temperature": 0}
    results = []
    threads = [threading.Thread(target=lambda: results.append(generate(srv, body)))
               for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.status_code for r in results] == [200] * 3
    assert len({r.json()["text_output"] for r in results}) == 1
    assert metric(srv, "inferd_gen_kv_cache_usage_ratio") == 0


def test_a_client_that_goes_away_cancels_its_sequence(server_factory):
    srv = server_factory.start(models={"kjv": KJV})
    s = RawStream(srv, "POST", "/v2/models/kjv/generate_stream", json.dumps(
        {"text_input": PROMPT, "max_tokens": 240, "temperature": 0}).encode())
    assert s.next_event()
    s.close()
    deadline = time.time() + WAIT
    while time.time() < deadline and not finished(srv, "cancelled"):
        time.sleep(0.02)
    assert finished(srv, "cancelled") == 1
    assert finished(srv, "length") == 0
    assert metric(srv, "inferd_gen_sequences_running" + LABELS) == 0
    assert metric(srv, "inferd_gen_kv_cache_usage_ratio") == 0


def test_no_limit_headers_without_a_matching_rule(srv):
    body = {"text_input": PROMPT, "max_tokens": 2, "temperature": 0}
    for stream in (False, True):
        r = generate(srv, body, stream=stream)
        assert r.status_code == 200, r.text
        assert not [h for h in r.headers if h.lower().startswith(("x-ratelimit-", "ratelimit-"))]


def test_rate_limit_headers_in_the_stream_head_and_on_the_429(server_factory, tmp_path):
    cfg = tmp_path / "inferd.yaml"
    cfg.write_text("rate-limits:\n  - model: kjv\n    rate: 0.5\n    burst: 2\n")
    srv = server_factory.start("--config", str(cfg), models={"kjv": KJV})
    body = {"text_input": PROMPT, "max_tokens": 2, "temperature": 0}
    r = generate(srv, body, stream=True)
    assert r.status_code == 200 and events(r)
    assert r.headers["x-ratelimit-limit-requests"] == "2"
    assert r.headers["x-ratelimit-remaining-requests"] == "1"
    assert r.headers["x-ratelimit-reset-requests"] == "2s"
    assert r.headers["RateLimit-Limit"] == "2"
    assert generate(srv, body).headers["x-ratelimit-remaining-requests"] == "0"
    r = generate(srv, body, stream=True)
    assert r.status_code == 429, r.text
    assert r.json()["error"].startswith("rate limit of model kjv exceeded")
    retry = int(r.headers["Retry-After"])
    assert 1 <= retry <= 2 and r.headers["retry-after-ms"] == str(retry * 1000)
    assert r.headers["x-ratelimit-remaining-requests"] == "0"
    assert "x-ratelimit-limit-tokens" not in r.headers  # no token budget configured
