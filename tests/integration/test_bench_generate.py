"""`inferd bench`'s generation modes: --generate-floor (the in-process greedy
loop over models/kjv) against the server's greedy completions, and --openai
(streamed /v1/completions) against the live server and against a small Python
server that streams in odd pieces or breaks its streams.

Short runs only (a few tokens, about a second of load): the measurements
themselves belong to `make bench` (experiment 12), not to `make test`.
"""
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

from conftest import REPO_ROOT, run_bench, run_bench_json

KJV = REPO_ROOT / "models" / "kjv"
KJV_DIR = KJV / "1"
SHORT = ["--duration", "1", "--warmup", "0.2"]


def bench(*args, timeout=120):
    return run_bench(*args, timeout=timeout)


def bench_json(*args, timeout=120):
    return run_bench_json(*args, timeout=timeout)


def floor(prompt, max_tokens, repeat=1):
    return bench_json("--generate-floor", "--model-dir", KJV_DIR, "--prompt", prompt,
                      "--max-tokens", max_tokens, "--repeat", repeat)


@pytest.fixture(scope="module")
def srv(module_server_factory):
    return module_server_factory.start(models={"kjv": KJV})


def completion(srv, prompt, max_tokens):
    """Greedy; max_tokens None: the server's default, what the context has room for."""
    body = {"model": "kjv", "prompt": prompt, "temperature": 0}
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    r = requests.post(srv.url + "/v1/completions", timeout=60, json=body)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.parametrize("prompt,max_tokens", [("And God said", 24),
                                               ("In the beginning", 12),
                                               ("And the LORD spake unto Moses, saying,", 40)])
def test_floor_greedy_text_equals_server(srv, prompt, max_tokens):
    """The C-side check of the issue's acceptance: the in-process loop (no
    server, no KV block pool, no batching) and the server's engine produce
    the same greedy completion."""
    f = floor(prompt, max_tokens)
    s = completion(srv, prompt, max_tokens)
    assert f["text"] == s["choices"][0]["text"]
    assert f["completion_tokens"] == s["usage"]["completion_tokens"]
    assert f["prompt_tokens"] == s["usage"]["prompt_tokens"]
    assert f["finish_reason"] == s["choices"][0]["finish_reason"]
    assert f["text"], "an empty completion compares nothing"


def test_floor_report(srv):
    d = floor("And God said", 8, repeat=3)
    assert len(d["runs"]) == 3
    assert all(r["tokens"] == d["completion_tokens"] for r in d["runs"])
    rates = sorted(r["tokens_per_s"] for r in d["runs"])
    assert d["tokens_per_s"] == rates[1]  # the median of three
    assert d["tokens_per_s_best"] == rates[-1]
    assert 0 < d["ttft_us"] and 0 < d["tpot_us"]
    assert d["config"]["max_context"] == json.loads((KJV_DIR / "generation.json").read_text())[
        "max_context"]
    text = bench("--generate-floor", "--model-dir", KJV_DIR, "--max-tokens", "4", "--repeat", "1")
    assert text.returncode == 0, text.stderr
    assert "tokens/s" in text.stdout and "TTFT" in text.stdout and "text" in text.stdout


def test_floor_batch_rows_decode_alike():
    """--batch 4: four copies of the prompt in one batch decode the same text
    as one row (padding-free rows are independent), and the rate counts every
    row's tokens."""
    one = floor("And God said", 10)
    four = bench_json("--generate-floor", "--model-dir", KJV_DIR, "--prompt", "And God said",
                      "--max-tokens", 10, "--repeat", 1, "--batch", 4)
    assert four["text"] == one["text"] and four["completion_tokens"] == one["completion_tokens"]
    assert four["config"]["batch"] == 4
    run = four["runs"][0]
    assert run["tokens_per_s"] == pytest.approx(4 * run["tokens"] / run["total_us"] * 1e6,
                                                rel=0.01)


def test_floor_context_full(srv):
    """A prompt that leaves room for a few tokens only: the loop stops when
    prompt + generated fills the context ("length") whatever max_tokens says.
    The server refuses a max_tokens past the context; without one it
    generates what fits, and the two agree."""
    ctx = json.loads((KJV_DIR / "generation.json").read_text())["max_context"]
    unit = "And God said "
    p1, p2 = (floor(unit * k, 1)["prompt_tokens"] for k in (1, 2))
    per = p2 - p1  # every repetition after the first: the same pieces
    k = 1 + (ctx - 3 - p1) // per
    prompt = unit * k
    d = floor(prompt, 50)
    room = ctx - d["prompt_tokens"]
    assert 3 <= room < 50
    assert d["completion_tokens"] <= room
    if d["finish_reason"] == "length":
        assert d["completion_tokens"] == room
    s = completion(srv, prompt, None)
    assert d["text"] == s["choices"][0]["text"]
    assert d["finish_reason"] == s["choices"][0]["finish_reason"]


def test_floor_usage_errors(tmp_path):
    p = bench("--generate-floor")
    assert p.returncode == 2 and "--model-dir DIR is required" in p.stderr
    p = bench("--generate-floor", "--model-dir", KJV_DIR, "--max-tokens", "0")
    assert p.returncode == 2 and "--max-tokens" in p.stderr
    p = bench("--generate-floor", "--model-dir", tmp_path)
    assert p.returncode == 1 and "generation.json" in p.stderr
    (tmp_path / "generation.json").write_text('{"tokenizer": "../x.json"}')
    p = bench("--generate-floor", "--model-dir", tmp_path)
    assert p.returncode == 1 and '"tokenizer" must name a file of the directory' in p.stderr
    p = bench("--generate-floor", "--model-dir", KJV_DIR, "--prompt", "")
    assert p.returncode == 1 and "no token" in p.stderr
    p = bench("--generate-floor", "--help")
    assert p.returncode == 0 and "--model-dir" in p.stdout and "--repeat" in p.stdout


def test_openai_usage_errors():
    p = bench("--openai", "kjv", "--model", "simple")
    assert p.returncode == 2 and "--openai excludes" in p.stderr
    p = bench("--path", "/x", "--max-tokens", "5")
    assert p.returncode == 2 and "need --openai" in p.stderr
    p = bench("--openai", "kjv", "--temperature", "3")
    assert p.returncode == 2 and "--temperature" in p.stderr
    p = bench("--openai", "kjv", "--seed", "-1")
    assert p.returncode == 2 and "--seed" in p.stderr
    p = bench("--openai", "kjv", "--connections", "4097")
    assert p.returncode == 2 and "at most 4096 --connections" in p.stderr
    p = bench("--help")
    assert p.returncode == 0 and "--openai MODEL" in p.stdout and "--generate-floor" in p.stdout


def test_openai_mode_against_server(srv):
    usage = completion(srv, "And God said", 6)["usage"]
    expected = usage["completion_tokens"]
    d = bench_json("--url", srv.url, "--openai", "kjv", "--max-tokens", 6, "--connections", 2,
                   "--concurrency", 2, "--timeout-ms", 30000, *SHORT)
    g = d["generation"]
    assert d["errors"] == {"connect": 0, "reset": 0, "timeout": 0, "parse": 0}
    assert g["requests_ok"] == d["requests"] == d["status"]["200"] > 0
    assert g["requests_failed"] == 0
    assert g["completion_tokens"] == expected * g["requests_ok"]
    assert g["tokens_per_request"] == round(expected, 1)
    assert g["prompt_tokens"] == usage["prompt_tokens"] * g["requests_ok"]
    finish = completion(srv, "And God said", 6)["choices"][0]["finish_reason"]
    assert g["finish"][finish] == g["requests_ok"]
    assert g["ttft_us"]["p50"] > 0 and g["tpot_us"]["p50"] > 0
    assert g["ttft_us"]["p50"] <= d["latency_us_ok"]["max"]
    assert 0 < g["tokens"] and g["tokens_per_s"] == round(g["tokens"] / d["duration_s"], 1)
    assert d["config"]["openai"] == "kjv" and d["config"]["max_tokens"] == 6
    assert d["config"]["target"] == "/v1/completions"


def test_openai_mode_unknown_model(srv):
    d = bench_json("--url", srv.url, "--openai", "nope", *SHORT)
    g = d["generation"]
    assert d["status"].get("404", 0) == d["requests"] > 0
    assert g["requests_ok"] == 0 and g["requests_failed"] == d["requests"]
    assert g["tokens"] == 0


# ---- against a Python server ---------------------------------------------------------

def chunk(text, finish=None):
    return {"choices": [{"index": 0, "text": text, "finish_reason": finish}], "usage": None}


STREAMS = {
    # three text events, usage says 5 tokens; written in 3-byte pieces
    "/pieces/v1/completions": ([chunk("In"), chunk(" the"), chunk(" be"), chunk("", "stop"),
                                {"choices": [], "usage": {"prompt_tokens": 2,
                                                          "completion_tokens": 5}}], True, 3),
    # no [DONE]: the stream just ends
    "/cut/v1/completions": ([chunk("a"), chunk("b")], False, 0),
}


class SseHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        events, done, piece = STREAMS[self.path]
        body = "".join("id: s-%d\ndata: %s\n\n" % (i, json.dumps(e)) for i, e in enumerate(events))
        if done:
            body += "data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        raw = body.encode()
        step = piece or len(raw)
        for off in range(0, len(raw), step):
            part = raw[off:off + step]
            self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


@pytest.fixture(scope="module")
def sse_server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), SseHandler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield "http://127.0.0.1:%d" % httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


def test_openai_mode_pieces_and_usage(sse_server):
    d = bench_json("--url", sse_server + "/pieces", "--openai", "m", "--connections", 1, *SHORT)
    g = d["generation"]
    assert g["requests_ok"] == d["requests"] > 0 and g["requests_failed"] == 0
    assert g["completion_tokens"] == 5 * g["requests_ok"]
    assert g["prompt_tokens"] == 2 * g["requests_ok"]
    assert g["finish"] == {"stop": g["requests_ok"], "length": 0, "other": 0}
    assert g["tpot_us"]["p50"] > 0


def test_openai_mode_cut_streams(sse_server):
    d = bench_json("--url", sse_server + "/cut", "--openai", "m", "--connections", 1, *SHORT)
    g = d["generation"]
    assert d["status"]["200"] == d["requests"] > 0
    assert g["requests_ok"] == 0 and g["requests_failed"] == d["requests"]
    assert g["tokens"] > 0  # received, in the window, even if the streams broke


def test_floor_with_the_present_new_graph(tmp_path):
    """A model whose graph returns only the new keys and values
    (generation.json's "present": "new", tests/integration/
    test_generate_present_new.py): the loop keeps the past in its own room,
    grown every 32 tokens, and decodes kjv's text, one row and four."""
    import subprocess
    import sys
    out = tmp_path / "1"
    subprocess.run([sys.executable, str(REPO_ROOT / "models" / "build" / "make_kjv.py"),
                    "--present", "new", "--out", str(out)], check=True, cwd=REPO_ROOT, timeout=120)
    want = floor("And God said", 70)
    for batch in (1, 4):
        got = bench_json("--generate-floor", "--model-dir", out, "--prompt", "And God said",
                         "--max-tokens", 70, "--repeat", 1, "--batch", batch)
        assert (got["text"], got["completion_tokens"]) == (want["text"], want["completion_tokens"])
    assert want["completion_tokens"] > 64  # the room grew twice
