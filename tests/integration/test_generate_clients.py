"""The generative model kjv (models/kjv) served by inferd, checked by clients
written independently of the server:

  - tests/node/reference_generate.mjs, an in-process greedy generation loop
    over onnxruntime-node with its own BPE tokenizer: the server's greedy
    output (temperature 0) equals it byte for byte (text and finish reason)
    through /v1/completions, Triton's /v2/models/kjv/generate and
    generate_stream, and gRPC ModelStreamInfer (Debian's python3-grpcio,
    one response per token); its token counts equal the server's
    num_input_tokens / usage.prompt_tokens;
  - tests/node/openai_sdk.mjs, the official OpenAI Node.js SDK: completions
    and chat completions, streamed and not, include_usage, seeds, stop
    sequences, NotFoundError, BadRequestError, AuthenticationError;
  - curl -sN streaming /v1/chat/completions and generate_stream.

Node.js and the packages of tests/node come from scripts/deps.sh (into
third_party/node-tests); without a `node` on PATH the module is skipped.
"""
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import requests

from conftest import REPO_ROOT, ok_json
from grpc_client import Client, generate, split_bytes
from test_auth import auth_yaml, bearer, new_key
from test_decoupled import sse_post

NODE = shutil.which("node")
CURL = shutil.which("curl")
pytestmark = pytest.mark.skipif(NODE is None, reason="node (Node.js) is not on PATH")

KJV = REPO_ROOT / "models" / "kjv"
NODE_DIR = REPO_ROOT / "tests" / "node"
NODE_MODULES = Path(os.environ.get("INFERD_THIRD_PARTY", REPO_ROOT / "third_party")) \
    / "node-tests" / "node_modules"

# (prompt, max_tokens); None = up to the end of the context. The first two
# are the prompts of openai_sdk.mjs (PROMPT and CHAT_PROMPT, 24 tokens).
SDK_PROMPT = ("In the beginning", 24)
SDK_CHAT_PROMPT = ("And God said", 24)
CASES = [
    SDK_PROMPT,
    SDK_CHAT_PROMPT,
    ("And the LORD spake unto Moses, saying,", 60),
    ("Blessed are the", 5),
    ("Jesus", 1),
    ("For God so loved the world", None),
    ("Thou shalt", 120),
    ("\u00c9den, na\u00efve \u2014 and", 30),
]
# A prompt this long leaves only a few tokens of context: it ends with "length"
# at the context's end, not at a max_tokens.
LONG_PROMPT_TOKENS = 250


class NodeRunner:
    """Runs the scripts of tests/node with node from a copy next to a
    node_modules link to the packages scripts/deps.sh installed (ES modules
    resolve packages from the file's directory upwards, never through
    NODE_PATH)."""

    def __init__(self, workdir):
        if not NODE_MODULES.is_dir():
            pytest.fail("%s missing: run scripts/deps.sh" % NODE_MODULES)
        self.workdir = workdir
        (workdir / "node_modules").symlink_to(NODE_MODULES)
        for script in NODE_DIR.glob("*.mjs"):
            shutil.copy(script, workdir / script.name)

    def __call__(self, script, args, stdin=None, timeout=120):
        """Runs tests/node/<script>; returns its stdout parsed as JSON."""
        r = subprocess.run([NODE, str(self.workdir / script)] + list(args), input=stdin,
                           capture_output=True, text=True, timeout=timeout)
        assert r.returncode == 0, "node %s failed:\n%s" % (script, r.stderr)
        return json.loads(r.stdout)


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    return NodeRunner(tmp_path_factory.mktemp("node"))


@pytest.fixture(scope="module")
def kjv():
    if not (KJV / "1" / "model.onnx").exists():
        pytest.fail("model kjv missing: %s/1/model.onnx (models/build/make_kjv.py)" % KJV)
    return KJV


def reference(node, kjv, prompts, max_tokens, kv_cache=True):
    job = {"mode": "generate", "prompts": prompts, "max_tokens": max_tokens, "kv_cache": kv_cache}
    return node("reference_generate.mjs", [str(kjv / "1")], stdin=json.dumps(job))


def tokenize(node, kjv, texts):
    job = {"mode": "tokenize", "prompts": texts}
    return [r["ids"] for r in node("reference_generate.mjs", [str(kjv / "1")],
                                   stdin=json.dumps(job))]


@pytest.fixture(scope="module")
def long_prompt(node, kjv):
    """A prompt of LONG_PROMPT_TOKENS tokens or slightly fewer."""
    verse = "And the earth was without form, and void; and darkness was upon the face of the deep. "
    texts = [verse * n for n in range(1, 40)]
    counts = tokenize(node, kjv, texts)
    fits = [t for t, ids in zip(texts, counts) if len(ids) <= LONG_PROMPT_TOKENS]
    assert fits and len(fits) < len(texts)
    return fits[-1]


@pytest.fixture(scope="module")
def expected(node, kjv, long_prompt):
    """(prompt, max_tokens) -> the reference loop's result, for CASES and the
    long prompt."""
    cases = CASES + [(long_prompt, None)]
    out = {}
    for n in sorted({m for _, m in cases}, key=lambda m: -1 if m is None else m):
        prompts = [p for p, m in cases if m == n]
        for p, r in zip(prompts, reference(node, kjv, prompts, n)):
            out[(p, n)] = r
    return out


@pytest.fixture(scope="module")
def srv(module_server_factory, kjv):
    return module_server_factory.start(models={"kjv": kjv})


@pytest.fixture(scope="module")
def pbs(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("proto_py_gen"))


def only_last(n, last, others=None):
    """[others] * (n - 1) + [last]: a field set only on the last of n messages."""
    return [others] * (n - 1) + [last]


def completion_tokens_ok(got, ref):
    """usage.completion_tokens / num_output_tokens against the reference's
    count of text tokens: equal, or one more when the end-of-text token
    ended the sequence (a server may count it)."""
    n = ref["num_output_tokens"]
    return got == n or (ref["finish_reason"] == "stop" and got == n + 1)


# ---------------------------------------------------------------------------
# The reference loop itself


def test_reference_kv_cache_equals_full_recompute(node, kjv):
    """The reference's KV-cache loop and its loop without a cache (the whole
    sequence every step) agree: present -> past is wired right."""
    prompts = [p for p, _ in CASES[:4]]
    with_cache = reference(node, kjv, prompts, 40)
    without = reference(node, kjv, prompts, 40, kv_cache=False)
    assert [r["tokens"] for r in with_cache] == [r["tokens"] for r in without]
    assert all(r["num_output_tokens"] > 0 for r in with_cache)


def test_reference_tokenizer_round_trips_and_treats_eos_text_as_bytes(node, kjv):
    text = "In the beginning <|endoftext|> \u00e9\n\nAmen."
    ids = tokenize(node, kjv, [text])[0]
    doc = json.loads((kjv / "1" / "tokenizer.json").read_text())
    table = [bytes([i]) for i in range(256)]
    for a, b in doc["merges"]:
        table.append(table[a] + table[b])
    assert doc["eos_token_id"] not in ids
    assert b"".join(table[i] for i in ids) == text.encode()
    assert len(ids) < len(text.encode())  # merges were applied


# ---------------------------------------------------------------------------
# Greedy output of every front end == the reference, byte for byte


def test_prompt_token_counts_equal_the_reference(srv, node, kjv):
    texts = ["In", "In the beginning", "<|endoftext|>", "  two  spaces  ", "line\nbreak\n",
             "\u00e9\u00e8 \u4e2d\u6587", "LORD LORD LORD"]
    counts = [len(ids) for ids in tokenize(node, kjv, texts)]
    got = []
    for t in texts:
        doc = ok_json(requests.post(srv.url + "/v2/models/kjv/generate", timeout=60,
                                    json={"text_input": t, "max_tokens": 1, "temperature": 0}))
        got.append(doc["num_input_tokens"])
    assert got == counts


def test_completions_equal_the_reference(srv, expected):
    for (prompt, n), ref in expected.items():
        body = {"model": "kjv", "prompt": prompt, "temperature": 0}
        if n is not None:
            body["max_tokens"] = n
        doc = ok_json(requests.post(srv.url + "/v1/completions", json=body, timeout=120))
        choice = doc["choices"][0]
        assert (choice["text"], choice["finish_reason"]) == (ref["text"], ref["finish_reason"]), \
            (prompt, n)
        assert doc["usage"]["prompt_tokens"] == ref["num_input_tokens"], (prompt, n)
        assert completion_tokens_ok(doc["usage"]["completion_tokens"], ref), \
            (prompt, n, doc["usage"])


def test_long_prompt_ends_at_the_context(expected, long_prompt, kjv):
    ref = expected[(long_prompt, None)]
    context = json.loads((kjv / "1" / "generation.json").read_text())["max_context"]
    used = ref["num_input_tokens"] + ref["num_output_tokens"]
    assert used == context if ref["finish_reason"] == "length" else used < context


def generate_body(prompt, n):
    body = {"text_input": prompt, "temperature": 0}
    if n is not None:
        body["max_tokens"] = n
    return body


def test_triton_generate_equals_the_reference(srv, expected):
    for (prompt, n), ref in expected.items():
        doc = ok_json(requests.post(srv.url + "/v2/models/kjv/generate",
                                    json=generate_body(prompt, n), timeout=120))
        assert doc["model_name"] == "kjv"
        assert (doc["text_output"], doc["finish_reason"]) == (ref["text"], ref["finish_reason"]), \
            (prompt, n)
        assert doc["num_input_tokens"] == ref["num_input_tokens"]
        assert completion_tokens_ok(doc["num_output_tokens"], ref), (prompt, n, doc)


def test_triton_generate_stream_equals_the_reference(srv, expected):
    for (prompt, n), ref in expected.items():
        r, reader = sse_post(srv.url + "/v2/models/kjv/generate_stream", generate_body(prompt, n))
        assert r.status_code == 200, r.text
        events = []
        while (ev := reader.next_event()) is not None:
            events.append(json.loads(ev[1]))
        assert "".join(e["text_output"] for e in events) == ref["text"], (prompt, n)
        finishes = [e["finish_reason"] for e in events]
        assert finishes == only_last(len(events), ref["finish_reason"], "")


def stream_infer_request(pb, prompt, n, rid):
    req = pb.ModelInferRequest(model_name="kjv", id=rid)
    t = req.inputs.add(name="text_input", datatype="BYTES", shape=[1])
    t.contents.bytes_contents.append(prompt.encode())
    if n is not None:
        t = req.inputs.add(name="max_tokens", datatype="INT32", shape=[1])
        t.contents.int_contents.append(n)
    t = req.inputs.add(name="temperature", datatype="FP32", shape=[1])
    t.contents.fp32_contents.append(0.0)
    return req


def outputs_of(resp):
    """{output name: value} of a ModelStreamInferResponse (raw or typed contents)."""
    r = resp.infer_response
    out = {}
    for i, o in enumerate(r.outputs):
        if r.raw_output_contents:
            raw = r.raw_output_contents[i]
            out[o.name] = (split_bytes(raw)[0] if o.datatype == "BYTES"
                           else int.from_bytes(raw, "little"))
        elif o.datatype == "BYTES":
            out[o.name] = o.contents.bytes_contents[0]
        else:
            out[o.name] = o.contents.int_contents[0]
    return out


def test_grpc_stream_infer_one_response_per_token_equals_the_reference(srv, pbs, expected):
    pb, hpb = pbs
    c = Client(pb, hpb, "127.0.0.1:%d" % srv.grpc_port)
    try:
        for k, ((prompt, n), ref) in enumerate(expected.items()):
            rid = "g%d" % k
            call = c.stream_infer()(iter([stream_infer_request(pb, prompt, n, rid)]), timeout=120)
            responses = list(call)
            assert [r.error_message for r in responses] == [""] * len(responses)
            assert {r.infer_response.id for r in responses} == {rid}
            outs = [outputs_of(r) for r in responses]
            finals = [r.infer_response.parameters["triton_final_response"].bool_param
                      for r in responses]
            assert finals == only_last(len(responses), True, False), (prompt, n)
            text = b"".join(o["text_output"] for o in outs)
            assert text.decode() == ref["text"], (prompt, n)
            assert outs[-1]["finish_reason"] == ref["finish_reason"].encode(), (prompt, n)
            assert [o["finish_reason"] for o in outs[:-1]] == [b""] * (len(outs) - 1)
            # One response per token: the count of tokens grows by one each time.
            counts = [o["num_output_tokens"] for o in outs]
            tokens = ref["num_output_tokens"]
            assert counts[:tokens] == list(range(1, tokens + 1)), (prompt, n, counts)
            assert len(counts) <= tokens + 1, (prompt, n, counts)
            assert completion_tokens_ok(counts[-1], ref), (prompt, n, counts)
            assert {o["num_input_tokens"] for o in outs} == {ref["num_input_tokens"]}
    finally:
        c.close()


# ---------------------------------------------------------------------------
# The official OpenAI SDK


@pytest.fixture(scope="module")
def sdk(srv, node):
    return node("openai_sdk.mjs", ["--base-url", srv.url + "/v1", "--model", "kjv"])


def no_error(result):
    assert "error" not in result, result
    return result


def test_sdk_completion(sdk, expected):
    r, ref = no_error(sdk["completion"]), expected[SDK_PROMPT]
    assert (r["text"], r["finish_reason"]) == (ref["text"], ref["finish_reason"])
    assert r["object"] == "text_completion" and r["model"] == "kjv" and r["n_choices"] == 1
    assert re.fullmatch(r"cmpl-[0-9a-f]{32}", r["id"]), r["id"]
    u = r["usage"]
    assert u["prompt_tokens"] == ref["num_input_tokens"]
    assert completion_tokens_ok(u["completion_tokens"], ref)
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]


def test_sdk_completion_stream(sdk, expected):
    r, ref = no_error(sdk["completion_stream"]), expected[SDK_PROMPT]
    chunks = r["chunks"]
    assert r["text"] == ref["text"]
    assert len({c["id"] for c in chunks}) == 1 and chunks[0]["id"].startswith("cmpl-")
    assert {c["object"] for c in chunks} == {"text_completion"}
    assert [c["finish_reason"] for c in chunks] == only_last(len(chunks), ref["finish_reason"])
    assert all(c["usage"] is None for c in chunks)  # no include_usage


def test_sdk_chat(sdk, expected):
    r, ref = no_error(sdk["chat"]), expected[SDK_CHAT_PROMPT]
    assert (r["content"], r["finish_reason"]) == (ref["text"], ref["finish_reason"])
    assert r["role"] == "assistant" and r["object"] == "chat.completion" and r["n_choices"] == 1
    assert re.fullmatch(r"chatcmpl-[0-9a-f]{32}", r["id"]), r["id"]
    assert r["usage"]["prompt_tokens"] == ref["num_input_tokens"]


def test_sdk_chat_stream_with_usage(sdk, expected):
    r, ref = no_error(sdk["chat_stream"]), expected[SDK_CHAT_PROMPT]
    chunks = r["chunks"]
    assert r["content"] == ref["text"]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert len({c["id"] for c in chunks}) == 1 and chunks[0]["id"].startswith("chatcmpl-")
    assert chunks[0]["role"] == "assistant"
    # content chunks, the finish chunk, then the usage chunk with no choices
    *content, usage = chunks
    assert usage["n_choices"] == 0 and usage["content"] is None
    assert [c["finish_reason"] for c in content] == only_last(len(content), ref["finish_reason"])
    assert all(c["usage"] is None for c in content)
    u = usage["usage"]
    assert u["prompt_tokens"] == ref["num_input_tokens"]
    assert completion_tokens_ok(u["completion_tokens"], ref)
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]


def test_sdk_seed_reproduces_sampling(sdk):
    r = no_error(sdk["seed"])
    assert r["same"][0] == r["same"][1]
    assert r["other"] != r["same"][0]
    assert r["same"][0]  # sampled some text


def test_sdk_stop_sequence(sdk):
    r = no_error(sdk["stop"])
    assert r["stop"] and r["stop"] in r["greedy"]
    assert r["text"] == r["greedy"][:r["greedy"].index(r["stop"])]
    assert r["finish_reason"] == "stop"


def test_sdk_unknown_model_is_not_found(sdk):
    e = sdk["unknown_model"]["error"]
    assert (e["class"], e["status"]) == ("NotFoundError", 404), e
    assert e["type"] == "invalid_request_error" and e["code"] == "model_not_found"


def test_sdk_bad_request(sdk):
    e = sdk["bad_request"]["error"]
    assert (e["class"], e["status"]) == ("BadRequestError", 400), e
    assert e["type"] == "invalid_request_error" and e["param"] == "n"


def test_sdk_lists_the_model(sdk):
    assert {"id": "kjv", "object": "model", "owned_by": "inferd"} in no_error(sdk["models"])["data"]


def test_sdk_authentication(module_server_factory, node, kjv, tmp_path, expected):
    key, key_hash = new_key()
    config = tmp_path / "inferd.yaml"
    config.write_text(auth_yaml([("gen", [key_hash], ["infer", "read"])]))
    srv = module_server_factory.start("--config", str(config), models={"kjv": kjv})
    url = srv.url + "/v1"
    wrong_key = "inferd_" + "0" * 43
    wrong = node("openai_sdk.mjs", ["--base-url", url, "--model", "kjv", "--api-key", wrong_key,
                                    "--cases", "completion,models"])
    for case in ("completion", "models"):
        e = wrong[case]["error"]
        assert (e["class"], e["status"]) == ("AuthenticationError", 401), e
        assert e["type"] == "authentication_error" and e["code"] == "invalid_api_key"
    right = node("openai_sdk.mjs", ["--base-url", url, "--model", "kjv", "--api-key", key,
                                    "--cases", "completion,models"])
    assert no_error(right["completion"])["text"] == expected[SDK_PROMPT]["text"]
    assert no_error(right["models"])["data"][0]["id"] == "kjv"
    r = requests.get(url + "/models", headers=bearer(key), timeout=10)
    assert r.status_code == 200


# ---------------------------------------------------------------------------
# curl


def curl_stream(url, body):
    r = subprocess.run([CURL, "-sS", "-N", "-i", "-H", "Content-Type: application/json",
                        "-d", json.dumps(body), url],
                       capture_output=True, timeout=120, check=True)
    head, _, stream = r.stdout.decode().replace("\r\n", "\n").partition("\n\n")
    assert head.split("\n")[0].split()[1] == "200", head + stream
    assert "content-type: text/event-stream" in head.lower()
    events = []
    for block in stream.split("\n\n"):
        fields = {}
        for line in block.split("\n"):
            if line and not line.startswith(":"):
                name, _, value = line.partition(": ")
                fields[name] = value
        if "data" in fields:
            events.append(fields)
    return events


@pytest.mark.skipif(CURL is None, reason="curl not installed")
def test_curl_chat_completions_stream(srv, expected):
    prompt, n = SDK_CHAT_PROMPT
    events = curl_stream(srv.url + "/v1/chat/completions", {
        "model": "kjv", "messages": [{"role": "user", "content": prompt}], "max_tokens": n,
        "temperature": 0, "stream": True, "stream_options": {"include_usage": True}})
    assert events[-1]["data"] == "[DONE]"
    ids = [e["id"] for e in events]
    stream_id = ids[0].rsplit("-", 1)[0]
    assert re.fullmatch(r"[0-9a-f]{32}", stream_id), ids[0]
    assert ids == ["%s-%d" % (stream_id, i) for i in range(len(ids))]
    chunks = [json.loads(e["data"]) for e in events[:-1]]
    assert {c["id"] for c in chunks} == {"chatcmpl-" + stream_id}
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert content == expected[(prompt, n)]["text"]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["prompt_tokens"] > 0
    assert chunks[-2]["choices"][0]["finish_reason"] == expected[(prompt, n)]["finish_reason"]


@pytest.mark.skipif(CURL is None, reason="curl not installed")
def test_curl_generate_stream(srv, expected):
    prompt, n = CASES[2]
    events = curl_stream(srv.url + "/v2/models/kjv/generate_stream", generate_body(prompt, n))
    docs = [json.loads(e["data"]) for e in events]
    assert "".join(d["text_output"] for d in docs) == expected[(prompt, n)]["text"]
    assert docs[-1]["finish_reason"] == expected[(prompt, n)]["finish_reason"]
    assert {d["model_name"] for d in docs} == {"kjv"}
