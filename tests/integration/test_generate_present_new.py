"""generation.json's "present": "new" (docs/generative.md): a graph that
returns only the new tokens' keys and values and reads the past where it
lies, so that the engine keeps its decode rows' past in a buffer of its
own and writes only the new tokens into it (no copy of the past per step).

The model is the shipped kjv's weights written again with that graph
(models/build/make_kjv.py --present new): it must give kjv's tokens, alone
and batched with rows joining and leaving (the buffer's slots move), under
preemption (rows gathered again from their blocks) and with the prefix
cache; a graph whose outputs do not match its declaration, or an unknown
value, fails to load saying why."""
import json
import shutil
import subprocess
import sys
import threading
import time

import pytest
import requests

from conftest import REPO_ROOT
from test_generate_engine import BLOCK, KJV, events
from test_openai_api import metric

WAIT = 30.0
PROMPTS = ["And the LORD said unto Moses", "In the beginning God created",
           "Blessed are the meek", "Thou shalt not", "And God said, Let there be",
           "The LORD is my shepherd", "For God so loved the world", "And Jesus answered"]


@pytest.fixture(scope="module")
def kjv_new(tmp_path_factory):
    out = tmp_path_factory.mktemp("present_new") / "kjv_new"
    subprocess.run([sys.executable, str(REPO_ROOT / "models" / "build" / "make_kjv.py"),
                    "--present", "new", "--out", str(out / "1")], check=True, cwd=REPO_ROOT,
                   timeout=120)
    assert json.loads((out / "1" / "generation.json").read_text())["present"] == "new"
    return out


def stream(srv, model, body):
    r = requests.post(srv.url + "/v2/models/%s/generate_stream" % model, data=json.dumps(body),
                      timeout=WAIT)
    assert r.status_code == 200, r.text
    ev = events(r)
    return "".join(e["text_output"] for e in ev), ev[-1]["finish_reason"], \
        [e["num_output_tokens"] for e in ev]


def concurrently(fn, args):
    out = [None] * len(args)

    def run(i):
        out[i] = fn(args[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(args))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_the_same_tokens_as_the_usual_graph_alone_and_batched(server_factory, kjv_new):
    """Greedy and seeded streams of different lengths at once (rows join
    and leave the decode steps, the buffer's room grows and shrinks) give
    what kjv gives alone."""
    srv = server_factory.start(models={"kjv": KJV, "kjv_new": kjv_new})
    bodies = [{"text_input": p, "max_tokens": 20 + 13 * i, "temperature": 0}
              for i, p in enumerate(PROMPTS)]
    bodies += [dict(b, temperature=0.8, random_seed=100 + i) for i, b in enumerate(bodies)]
    alone = [stream(srv, "kjv", b) for b in bodies]
    assert [stream(srv, "kjv_new", b) for b in bodies[:2]] == alone[:2]
    assert concurrently(lambda b: stream(srv, "kjv_new", b), bodies) == alone
    # Freed when the engine goes idle, just after the last stream's end.
    deadline = time.monotonic() + 30
    while metric(srv, 'inferd_gen_decode_buffer_bytes{model="kjv_new",version="1"}') != 0:
        assert time.monotonic() < deadline, "the decode buffer was not freed when idle"
        time.sleep(0.05)
    steps = metric(srv, 'inferd_gen_decode_steps_total{model="kjv_new",version="1"}')
    rows = metric(srv, 'inferd_gen_decode_batch_size_sum{model="kjv_new",version="1"}')
    assert rows > 2 * steps  # the streams were batched


def test_preemption_and_the_prefix_cache(server_factory, kjv_new):
    """8 greedy streams over 16 blocks (as test_generate_engine's
    acceptance test): preempted rows come back gathered from their blocks
    and every stream completes as alone; then two streams sharing a long
    prefix attach its blocks and still give kjv's tokens."""
    srv = server_factory.start("--kv-cache-bytes", str(16 * BLOCK),
                               models={"kjv": KJV, "kjv_new": kjv_new})
    bodies = [{"text_input": p, "max_tokens": 100, "temperature": 0} for p in PROMPTS]
    alone = [stream(srv, "kjv", b) for b in bodies]
    assert concurrently(lambda b: stream(srv, "kjv_new", b), bodies) == alone
    assert metric(srv, 'inferd_gen_preemptions_total{model="kjv_new",version="1"}') >= 1

    system = "Be brief, and speak of the LORD with reverence. " * 2
    shared = [{"text_input": system + s, "max_tokens": 30, "temperature": 0}
              for s in (" And Moses said", " In the beginning", " Blessed are")]
    alone = [stream(srv, "kjv", b) for b in shared]
    assert stream(srv, "kjv_new", shared[0]) == alone[0]
    assert concurrently(lambda b: stream(srv, "kjv_new", b), shared[1:]) == alone[1:]
    assert metric(srv, 'inferd_gen_prefix_cache_hit_tokens_total{model="kjv_new",version="1"}') \
        >= 2 * 32


def test_the_buffer_is_working_memory_freed_when_idle(server_factory, kjv_new):
    """inferd_gen_decode_buffer_bytes: the buffer while a stream decodes (2
    layers of keys and values of at least one row of 32 tokens: 4 layers x
    2 x 4 heads x 32 x 32 floats), none when the engine is idle, and never
    for the usual graph."""
    srv = server_factory.start(models={"kjv": KJV, "kjv_new": kjv_new})
    seen = []
    done = threading.Event()

    def watch():
        while not done.is_set():
            seen.append(metric(srv, 'inferd_gen_decode_buffer_bytes{model="kjv_new",version="1"}'))

    t = threading.Thread(target=watch)
    t.start()
    try:
        for _ in range(3):
            stream(srv, "kjv_new", {"text_input": PROMPTS[0], "max_tokens": 200,
                                    "temperature": 0})
    finally:
        done.set()
        t.join()
    assert max(seen) >= 4 * 2 * 4 * 32 * 32 * 4
    stream(srv, "kjv", {"text_input": PROMPTS[0], "max_tokens": 20, "temperature": 0})
    assert metric(srv, 'inferd_gen_decode_buffer_bytes{model="kjv",version="1"}') == 0
    # The engine frees it when it finds nothing to run, just after the last answer.
    deadline = time.monotonic() + WAIT
    while metric(srv, 'inferd_gen_decode_buffer_bytes{model="kjv_new",version="1"}') != 0:
        assert time.monotonic() < deadline, "the buffer was not freed when idle"
        time.sleep(0.05)


@pytest.mark.parametrize("present,needle", [
    ("new", "present.0.key has shape [2, 4, 33, 32] where [2, 4, 1, 32] was expected "
            "(generation.json's \"present\": \"new\")"),
    ("both", "'present' must be \"all\""),
])
def test_a_wrong_declaration_fails_the_load(server_factory, tmp_path, present, needle):
    """kjv's graph returns the past and the new tokens: declared "new", the
    warm-up's decode step (two rows with a room of 32 tokens) finds
    present.* 33 tokens long where 1 was declared."""
    repo = tmp_path / "models"
    shutil.copytree(KJV, repo / "kjv")
    gen = repo / "kjv" / "1" / "generation.json"
    gen.write_text(json.dumps(dict(json.loads(gen.read_text()), present=present)))
    srv = server_factory.start("--model-control-mode", "explicit", repository=repo)
    r = requests.post(srv.url + "/v2/repository/models/kjv/load", timeout=WAIT)
    assert r.status_code == 400, r.text
    assert needle in r.json()["error"], r.json()["error"]
