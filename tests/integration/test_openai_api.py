"""The OpenAI-compatible API (docs/openai.md) over the shipped generative
model `kjv`: GET /v1/models, POST /v1/completions and /v1/chat/completions
(not streamed, and streamed as Server-Sent Events with `id: <stream>-<n>`,
the usage chunk and `data: [DONE]`), resumable streams (Last-Event-ID on a
re-POST or GET /v1/streams/{id}, 404/409/410/400, DELETE, the grace period
of --stream-resume-secs and 0), OpenAI's error shape for every refusal
(auth's 401/403, rate limits' 429), HTTP/2, the access log's fields and the
stream metrics.

Clients: requests, raw sockets (to break a connection at a chosen event),
and curl for HTTP/2. The official SDK's tests are elsewhere."""
import json
import re
import socket
import subprocess
import threading
import time

import pytest
import requests

from conftest import MAIN_MODELS, REPO_ROOT

from test_auth import auth_yaml, bearer, new_key

KJV = REPO_ROOT / "models" / "kjv"
MODELS = {"kjv": KJV, "simple": MAIN_MODELS["simple"]}
EVENT_ID = re.compile(r"^([0-9a-f]{32})-(\d+)$")
WAIT = 20.0

# A completion long enough to be interrupted: greedy, no stop sequence.
LONG = {"model": "kjv", "prompt": "And the LORD said unto Moses", "max_tokens": 200,
        "temperature": 0}


@pytest.fixture(scope="module")
def srv(module_server_factory, tmp_path_factory):
    d = tmp_path_factory.mktemp("openai")
    srv = module_server_factory.start("--stream-resume-secs", "2", "--access-log",
                                      str(d / "access.log"), models=MODELS)
    srv.access_log = d / "access.log"
    return srv


def post(srv, path, body, headers=None, **kw):
    data = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return requests.post(srv.url + path, data=data, headers=headers, timeout=WAIT, **kw)


def parse_sse(text):
    """Events of an SSE body as [(id, data)], per the WHATWG grammar's parts
    we use (id and data fields, comments, blank-line dispatch)."""
    events, eid, data = [], None, []
    for line in text.split("\n"):
        if line == "":
            if data:
                events.append((eid, "\n".join(data)))
            eid, data = None, []
        elif line.startswith(":"):
            continue
        else:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "id":
                eid = value
            elif field == "data":
                data.append(value)
    return events


def stream(srv, path, body, headers=None):
    r = post(srv, path, body, headers)
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"] == "text/event-stream; charset=utf-8"
    return r, parse_sse(r.text)


def chunks(events):
    """The JSON chunks of a stream (without [DONE])."""
    return [json.loads(d) for _, d in events if d != "[DONE]"]


def text_of(events, chat=False):
    out = []
    for c in chunks(events):
        for ch in c.get("choices", []):
            out.append(ch["delta"].get("content", "") if chat else ch["text"])
    return "".join(out)


def finish_of(events):
    return [ch["finish_reason"] for c in chunks(events) for ch in c.get("choices", [])
            if ch["finish_reason"]]


def assert_openai_error(r, status, type_, code=None):
    assert r.status_code == status, r.text
    assert r.headers["Content-Type"] == "application/json"
    body = r.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["type"] == type_
    assert body["error"]["message"]
    if code is not None:
        assert body["error"]["code"] == code
    return body["error"]


def metric(srv, series):
    text = requests.get(srv.metrics_url, timeout=10).text
    m = re.search("^" + re.escape(series) + r" (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


# --------------------------------------------------------------------------
# Raw sockets: a stream read event by event, then dropped


class RawStream:
    """An HTTP/1.1 request whose chunked SSE response is read event by
    event (bytes as sent), so that the connection can be cut at any one."""

    def __init__(self, srv, method, path, body=b"", headers=None):
        self.sock = socket.create_connection(("127.0.0.1", srv.port), timeout=WAIT)
        head = "%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n" % (method, path, len(body))
        for k, v in (headers or {}).items():
            head += "%s: %s\r\n" % (k, v)
        self.sock.sendall(head.encode() + b"\r\n" + body)
        self.buf = b""
        self.body = b""
        self.ended = False
        while b"\r\n\r\n" not in self.buf:
            self._recv()
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        self.status = int(lines[0].split()[1])
        self.headers = {l.split(":", 1)[0].lower(): l.split(":", 1)[1].strip() for l in lines[1:]}

    def _recv(self):
        data = self.sock.recv(65536)
        if not data:
            raise EOFError("connection closed")
        self.buf += data

    def _chunk(self):
        """The next chunk's bytes of the chunked body (b"" at its end)."""
        while b"\r\n" not in self.buf:
            self._recv()
        size_line, _, self.buf = self.buf.partition(b"\r\n")
        size = int(size_line, 16)
        while len(self.buf) < size + 2:
            self._recv()
        data, self.buf = self.buf[:size], self.buf[size + 2:]
        return data

    def next_event(self):
        """The next event's bytes (through its blank line), skipping
        comments; None at the end of the body."""
        while True:
            end = self.body.find(b"\n\n")
            if end >= 0:
                ev, self.body = self.body[:end + 2], self.body[end + 2:]
                if ev.startswith(b":"):
                    continue
                return ev
            if self.ended:
                return None
            data = self._chunk()
            if not data:
                self.ended = True
            self.body += data

    def rest(self):
        out = []
        while True:
            ev = self.next_event()
            if ev is None:
                return out
            out.append(ev)

    def close(self):
        self.sock.close()


def event_id(ev):
    line = ev.split(b"\n", 1)[0].decode()
    assert line.startswith("id: "), ev
    m = EVENT_ID.match(line[4:])
    assert m, line
    return m.group(1), int(m.group(2))


def event_json(ev):
    data = ev.split(b"\n")[1].decode()
    assert data.startswith("data: "), ev
    return data[6:]


# --------------------------------------------------------------------------
# Models


def test_models_lists_only_generative_models(srv):
    r = requests.get(srv.url + "/v1/models", timeout=WAIT)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["object"] == "list"
    assert [m["id"] for m in body["data"]] == ["kjv"]
    m = body["data"][0]
    assert m["object"] == "model" and m["owned_by"] == "inferd"
    assert abs(m["created"] - time.time()) < 3600
    r = requests.get(srv.url + "/v1/models/kjv", timeout=WAIT)
    assert r.status_code == 200 and r.json() == m
    # simple is served (v2) but not generative: unknown here.
    for name in ("simple", "nope"):
        e = assert_openai_error(requests.get(srv.url + "/v1/models/" + name, timeout=WAIT), 404,
                                "invalid_request_error", "model_not_found")
        assert name in e["message"]
    assert_openai_error(requests.delete(srv.url + "/v1/models", timeout=WAIT), 405,
                        "invalid_request_error")


# --------------------------------------------------------------------------
# Completions, not streamed


def test_completion_and_chat_not_streamed(srv):
    body = dict(LONG, max_tokens=12)
    r = post(srv, "/v1/completions", body)
    assert r.status_code == 200, r.text
    c = r.json()
    assert re.match(r"^cmpl-[0-9a-f]{32}$", c["id"])
    assert c["object"] == "text_completion" and c["model"] == "kjv"
    assert abs(c["created"] - time.time()) < 60
    (choice,) = c["choices"]
    assert choice["index"] == 0 and choice["logprobs"] is None
    assert choice["finish_reason"] in ("length", "stop")
    u = c["usage"]
    assert u["prompt_tokens"] > 0 and 0 < u["completion_tokens"] <= 12
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]
    if choice["finish_reason"] == "length":
        assert u["completion_tokens"] == 12
    # Greedy: the same text again.
    assert post(srv, "/v1/completions", body).json()["choices"][0]["text"] == choice["text"]

    chat = {"model": "kjv", "messages": [{"role": "system", "content": "KJV"},
                                          {"role": "user", "content": "In the beginning"}],
            "max_tokens": 6, "temperature": 0}
    r = post(srv, "/v1/chat/completions", chat)
    assert r.status_code == 200, r.text
    c = r.json()
    assert re.match(r"^chatcmpl-[0-9a-f]{32}$", c["id"])
    assert c["object"] == "chat.completion"
    assert c["choices"][0]["message"]["role"] == "assistant"
    assert isinstance(c["choices"][0]["message"]["content"], str)
    # The chat prompt is the contents joined by "\n": the same as this completion.
    same = post(srv, "/v1/completions", {"model": "kjv", "prompt": "KJV\nIn the beginning",
                                         "max_tokens": 6, "temperature": 0}).json()
    assert same["choices"][0]["text"] == c["choices"][0]["message"]["content"]
    assert same["usage"] == c["usage"]


def test_seed_makes_sampling_reproducible(srv):
    body = {"model": "kjv", "prompt": "And", "max_tokens": 16, "temperature": 1.0, "seed": 42}
    a = post(srv, "/v1/completions", body).json()["choices"][0]["text"]
    b = post(srv, "/v1/completions", body).json()["choices"][0]["text"]
    assert a == b


def test_stop_sequence_is_not_in_the_text(srv):
    text = post(srv, "/v1/completions", LONG).json()["choices"][0]["text"]
    stop = text[4:7]
    assert len(stop) == 3
    r = post(srv, "/v1/completions", dict(LONG, stop=[stop])).json()
    assert r["choices"][0]["finish_reason"] == "stop"
    assert r["choices"][0]["text"] == text[:text.index(stop)]


def test_request_errors_have_openai_shape(srv):
    e = assert_openai_error(post(srv, "/v1/completions", "{"), 400, "invalid_request_error")
    e = assert_openai_error(post(srv, "/v1/completions", dict(LONG, n=2)), 400,
                            "invalid_request_error")
    assert e["param"] == "n"
    e = assert_openai_error(post(srv, "/v1/chat/completions", {"model": "kjv"}), 400,
                            "invalid_request_error")
    assert e["param"] == "messages"
    for model in ("nope", "simple"):
        e = assert_openai_error(post(srv, "/v1/completions", dict(LONG, model=model)), 404,
                                "invalid_request_error", "model_not_found")
        assert model in e["message"]
    # A near miss names the generative model it most likely meant.
    for path, send in (("/v1/completions", lambda p: post(srv, p, dict(LONG, model="kvj"))),
                       ("/v1/models/kvj", lambda p: requests.get(srv.url + p, timeout=WAIT))):
        e = assert_openai_error(send(path), 404, "invalid_request_error", "model_not_found")
        assert e["message"].endswith("did you mean 'kjv'?"), e["message"]
    # The engine's own refusal (a prompt past the context) keeps the shape too.
    r = post(srv, "/v1/completions", dict(LONG, prompt="word " * 400))
    assert_openai_error(r, 400, "invalid_request_error")
    r = requests.get(srv.url + "/v1/completions", timeout=WAIT)
    assert_openai_error(r, 405, "invalid_request_error")
    assert r.headers["Allow"] == "POST"
    assert_openai_error(requests.get(srv.url + "/v1/nope", timeout=WAIT), 404,
                        "invalid_request_error")


# --------------------------------------------------------------------------
# Streams


def test_stream_shape_ids_usage_and_done(srv):
    body = dict(LONG, max_tokens=20, stream=True, stream_options={"include_usage": True})
    r, events = stream(srv, "/v1/completions", body)
    sid = r.headers["x-inferd-stream-id"]
    assert re.match(r"^[0-9a-f]{32}$", sid)
    assert [e[0] for e in events] == ["%s-%d" % (sid, i) for i in range(len(events))]
    assert events[-1][1] == "[DONE]"
    cs = chunks(events)
    assert all(c["id"] == "cmpl-" + sid and c["object"] == "text_completion" for c in cs)
    content, finish, usage = cs[:-2], cs[-2], cs[-1]
    assert content and all(c["choices"][0]["text"] and c["usage"] is None for c in content)
    assert all(c["choices"][0]["finish_reason"] is None for c in content)
    assert finish["choices"][0]["finish_reason"] in ("length", "stop")
    assert finish["choices"][0]["text"] == "" and finish["usage"] is None
    assert usage["choices"] == []
    # The same text and counts as the request not streamed.
    whole = post(srv, "/v1/completions", dict(LONG, max_tokens=20)).json()
    assert text_of(events) == whole["choices"][0]["text"]
    assert usage["usage"] == whole["usage"]
    assert finish["choices"][0]["finish_reason"] == whole["choices"][0]["finish_reason"]


def test_chat_stream_first_delta_has_the_role(srv):
    body = {"model": "kjv", "messages": [{"role": "user", "content": "And God"}],
            "max_tokens": 8, "temperature": 0, "stream": True}
    r, events = stream(srv, "/v1/chat/completions", body)
    cs = chunks(events)
    assert all(c["object"] == "chat.completion.chunk" and "usage" not in c for c in cs)
    assert cs[0]["choices"][0]["delta"]["role"] == "assistant"
    assert all("role" not in c["choices"][0]["delta"] for c in cs[1:])
    assert cs[-1]["choices"][0]["delta"] == {}
    assert events[-1][1] == "[DONE]"
    whole = post(srv, "/v1/chat/completions", dict(body, stream=False)).json()
    assert text_of(events, chat=True) == whole["choices"][0]["message"]["content"]


def test_resume_by_get_and_by_post_replays_exactly(srv):
    body = dict(LONG, max_tokens=30, stream=True)
    raw = json.dumps(body)
    r, events = stream(srv, "/v1/completions", raw)
    sid = r.headers["x-inferd-stream-id"]
    original = r.content
    n = len(events)
    # GET without Last-Event-ID: every event again, byte for byte.
    g = requests.get(srv.url + "/v1/streams/" + sid, timeout=WAIT)
    assert g.status_code == 200 and g.headers["Content-Type"].startswith("text/event-stream")
    assert g.content == original
    # After event k: exactly the events after it (by GET and by re-POST).
    for k in (0, n // 2, n - 2):
        tail = b"".join(e + b"\n\n" for e in original.split(b"\n\n")[k + 1:-1])
        h = {"Last-Event-ID": "%s-%d" % (sid, k)}
        g = requests.get(srv.url + "/v1/streams/" + sid, headers=h, timeout=WAIT)
        assert g.content == tail, k
        p = post(srv, "/v1/completions", raw, headers=h)
        assert p.status_code == 200 and p.content == tail, k
    # The last event seen: an empty stream that ends at once.
    h = {"Last-Event-ID": "%s-%d" % (sid, n - 1)}
    assert requests.get(srv.url + "/v1/streams/" + sid, headers=h, timeout=WAIT).content == b""
    # Another body (or path) is not this stream's request: 409.
    e = assert_openai_error(post(srv, "/v1/completions", dict(body, max_tokens=31), headers=h),
                            409, "invalid_request_error")
    assert sid in e["message"]
    assert_openai_error(post(srv, "/v1/chat/completions", raw, headers=h), 409,
                        "invalid_request_error")
    # An event the stream never sent, a malformed id, another stream's id: 400.
    for bad in ("%s-%d" % (sid, n), "nonsense", sid, "%s-1x" % sid,
                "%s-99999999999999999999" % sid):
        assert_openai_error(requests.get(srv.url + "/v1/streams/" + sid,
                                         headers={"Last-Event-ID": bad}, timeout=WAIT),
                            400, "invalid_request_error")
    other = "0" * 32
    assert_openai_error(requests.get(srv.url + "/v1/streams/" + sid,
                                     headers={"Last-Event-ID": other + "-0"}, timeout=WAIT),
                        400, "invalid_request_error")


def test_broken_connection_resumes_without_loss_or_repeat(srv):
    """Cut the connection after k events (raw socket), resume with the last
    id seen: the reassembled stream equals the uninterrupted one."""
    whole = post(srv, "/v1/completions", dict(LONG, stream=False)).json()["choices"][0]["text"]
    body = json.dumps(dict(LONG, stream=True)).encode()
    for k in (1, 3, 10):
        s = RawStream(srv, "POST", "/v1/completions", body)
        assert s.status == 200
        got = [s.next_event() for _ in range(k)]
        s.close()
        sid, seq = event_id(got[-1])
        assert seq == k - 1
        how = k % 2  # by GET, or by re-POST
        h = {"Last-Event-ID": "%s-%d" % (sid, seq)}
        r = (requests.get(srv.url + "/v1/streams/" + sid, headers=h, timeout=WAIT) if how
             else post(srv, "/v1/completions", body, headers=h))
        assert r.status_code == 200, r.text
        evs = [e + b"\n\n" for e in got] + [e.encode() + b"\n\n" for e in r.text.split("\n\n")[:-1]]
        assert [event_id(e)[1] for e in evs] == list(range(len(evs)))
        assert event_json(evs[-1]) == "[DONE]"
        text = "".join(json.loads(event_json(e))["choices"][0]["text"] for e in evs[:-1])
        assert text == whole, k


def test_new_subscriber_replaces_the_old_one(srv):
    body = json.dumps(dict(LONG, stream=True)).encode()
    a = RawStream(srv, "POST", "/v1/completions", body)
    first = a.next_event()
    sid, _ = event_id(first)
    b = RawStream(srv, "GET", "/v1/streams/" + sid)
    assert b.status == 200
    rest_b = b.rest()
    assert event_json(rest_b[-1]) == "[DONE]"
    assert rest_b[0] == first  # from the first event
    # The old response ended (its events are a prefix of the stream's).
    rest_a = a.rest()
    all_a = [first] + rest_a
    assert all_a == rest_b[:len(all_a)]
    a.close()
    b.close()


def test_unknown_stream_404_expired_410(srv):
    assert_openai_error(requests.get(srv.url + "/v1/streams/" + "f" * 32, timeout=WAIT), 404,
                        "invalid_request_error", "stream_not_found")
    assert_openai_error(requests.delete(srv.url + "/v1/streams/nope", timeout=WAIT), 404,
                        "invalid_request_error", "stream_not_found")
    r, _ = stream(srv, "/v1/completions", dict(LONG, max_tokens=4, stream=True))
    sid = r.headers["x-inferd-stream-id"]
    assert requests.get(srv.url + "/v1/streams/" + sid, timeout=WAIT).status_code == 200
    # Freed 2 s after the last subscriber left (at most a sweep later).
    # DELETE does not subscribe (a GET would restart the grace period).
    left = time.time()
    while time.time() < left + 10:
        d = requests.delete(srv.url + "/v1/streams/" + sid, timeout=WAIT)
        if d.status_code != 200:
            break
        assert d.json()["cancelled"] is False
        time.sleep(0.1)
    assert time.time() - left > 1.5
    assert_openai_error(d, 410, "invalid_request_error", "stream_expired")
    assert_openai_error(requests.get(srv.url + "/v1/streams/" + sid, timeout=WAIT), 410,
                        "invalid_request_error", "stream_expired")


def test_delete_cancels_the_sequence(srv):
    s = RawStream(srv, "POST", "/v1/completions",
                  json.dumps(dict(LONG, max_tokens=240, stream=True)).encode())
    sid, _ = event_id(s.next_event())
    r = requests.delete(srv.url + "/v1/streams/" + sid, timeout=WAIT)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["id"] == sid and body["object"] == "stream"
    finishes = [json.loads(event_json(e))["choices"][0]["finish_reason"]
                for e in s.rest()[:-1]]
    s.close()
    # The sequence was running (greedy, 240 tokens at a few ms each) unless
    # the model ended it first; either way the stream says what happened.
    assert finishes[-1] == ("cancelled" if body["cancelled"] else finishes[-1])
    assert body["cancelled"] == (finishes[-1] == "cancelled")
    # Cancelling again: it already ended.
    r = requests.delete(srv.url + "/v1/streams/" + sid, timeout=WAIT)
    assert r.status_code == 200 and r.json()["cancelled"] is False


def test_stream_metrics_and_access_log(srv):
    before = metric(srv, "inferd_gen_stream_resumes_total")
    r, events = stream(srv, "/v1/completions", dict(LONG, max_tokens=5, stream=True))
    sid = r.headers["x-inferd-stream-id"]
    requests.get(srv.url + "/v1/streams/" + sid, timeout=WAIT)
    assert metric(srv, "inferd_gen_stream_resumes_total") == before + 1
    assert metric(srv, "inferd_gen_streams_active") >= 1
    assert metric(srv, "inferd_gen_streams_expired_total") is not None
    plain = post(srv, "/v1/completions", dict(LONG, max_tokens=5))
    whole = plain.json()
    wanted = {"streamed": r.headers["x-request-id"], "plain": plain.headers["x-request-id"]}
    deadline = time.time() + WAIT
    found = {}
    while time.time() < deadline and len(found) < 3:
        for l in map(json.loads, srv.access_log.read_text().splitlines()):
            for what, rid in wanted.items():
                if l["request_id"] == rid:
                    found[what] = l
            if l["endpoint"] == "/v1/streams/" + sid:
                found["resumed"] = l
        time.sleep(0.1)
    assert set(found) == {"streamed", "plain", "resumed"}
    u = whole["usage"]
    for line in found.values():
        assert line["status"] == 200, line
        assert line["prompt_tokens"] == u["prompt_tokens"], line
        assert line["completion_tokens"] == u["completion_tokens"], line
        assert line["finish_reason"] == whole["choices"][0]["finish_reason"], line
    assert found["streamed"]["model"] == "kjv" and found["plain"]["model"] == "kjv"


def test_triton_generate_lines_carry_the_generation_fields(srv):
    body = {"text_input": "And", "max_tokens": 3, "temperature": 0}
    g = post(srv, "/v2/models/kjv/generate", body)
    st = post(srv, "/v2/models/kjv/generate_stream", body)
    assert g.status_code == 200 and st.status_code == 200
    out = g.json()
    ids = {g.headers["x-request-id"], st.headers["x-request-id"]}
    deadline = time.time() + WAIT
    lines = []
    while time.time() < deadline and len(lines) < 2:
        lines = [l for l in map(json.loads, srv.access_log.read_text().splitlines())
                 if l["request_id"] in ids]
        time.sleep(0.1)
    assert len(lines) == 2
    for line in lines:
        assert line["prompt_tokens"] == out["num_input_tokens"], line
        assert line["completion_tokens"] == out["num_output_tokens"], line
        assert line["finish_reason"] == out["finish_reason"], line
    # A refused call of the model: what it used (nothing), no finish reason.
    bad = post(srv, "/v2/models/kjv/generate", dict(body, max_tokens=0))
    assert bad.status_code == 400
    deadline = time.time() + WAIT
    line = None
    while time.time() < deadline and line is None:
        line = next((l for l in map(json.loads, srv.access_log.read_text().splitlines())
                     if l["request_id"] == bad.headers["x-request-id"]), None)
        time.sleep(0.1)
    assert line and line["status"] == 400, line
    assert (line["prompt_tokens"], line["completion_tokens"], line["finish_reason"]) == (0, 0, None)
    # An ordinary model's line has none of them.
    simple = {"inputs": [{"name": n, "datatype": "INT32", "shape": [1, 16], "data": [1] * 16}
                         for n in ("INPUT0", "INPUT1")]}
    r = post(srv, "/v2/models/simple/infer", simple)
    assert r.status_code == 200
    deadline = time.time() + WAIT
    line = None
    while time.time() < deadline and line is None:
        line = next((l for l in map(json.loads, srv.access_log.read_text().splitlines())
                     if l["request_id"] == r.headers["x-request-id"]), None)
        time.sleep(0.1)
    assert line and "finish_reason" not in line and "prompt_tokens" not in line


def test_http2_stream(srv):
    body = json.dumps(dict(LONG, max_tokens=10, stream=True))
    r = subprocess.run(["curl", "-s", "-S", "-N", "--http2-prior-knowledge", "--max-time", "20",
                        "-H", "content-type: application/json", "--data-binary", body,
                        srv.url + "/v1/completions", "-D", "-"], capture_output=True, timeout=30)
    assert r.returncode == 0, r.stderr
    head, _, text = r.stdout.decode().partition("\r\n\r\n")
    assert head.startswith("HTTP/2 200")
    events = parse_sse(text)
    sid = EVENT_ID.match(events[0][0]).group(1)
    assert [e[0] for e in events] == ["%s-%d" % (sid, i) for i in range(len(events))]
    assert events[-1][1] == "[DONE]"
    whole = post(srv, "/v1/completions", dict(LONG, max_tokens=10)).json()
    assert text_of(events) == whole["choices"][0]["text"]


# --------------------------------------------------------------------------
# The grace period


def test_grace_period_expiry_cancels_the_sequence(server_factory):
    """A stream nobody follows for --stream-resume-secs is cancelled: the
    engine ends it ("cancelled"), which a client resuming in time sees; the
    expiry is counted. The engine is kept busy for several seconds so that
    the stream is still generating when the grace period (1 s, applied by a
    sweep once a second) ends: 60 requests whose 243-token prompts are read
    one token per backend run (--prefill-chunk 1) make every step of the
    running set about 60 runs long."""
    srv = server_factory.start("--stream-resume-secs", "1", "--prefill-chunk", "1",
                               models={"kjv": KJV})
    load_body = json.dumps({"model": "kjv", "prompt": "And the LORD said unto Moses, " * 27,
                            "max_tokens": 1, "temperature": 0})
    stop = threading.Event()

    def load():
        # Only keeps the engine busy: a slow answer (a sanitizer build) is
        # not this test's concern.
        while not stop.is_set():
            try:
                post(srv, "/v1/completions", load_body)
            except requests.RequestException:
                pass

    threads = [threading.Thread(target=load) for _ in range(60)]
    for t in threads:
        t.start()
    try:
        time.sleep(1.0)
        s = RawStream(srv, "POST", "/v1/completions",
                      json.dumps(dict(LONG, max_tokens=240, stream=True)).encode())
        sid, _ = event_id(s.next_event())
        s.close()
        deadline = time.time() + WAIT
        while time.time() < deadline and not metric(srv, "inferd_gen_streams_expired_total"):
            time.sleep(0.05)
        assert metric(srv, "inferd_gen_streams_expired_total") == 1
        r = requests.get(srv.url + "/v1/streams/" + sid, timeout=WAIT)
        assert r.status_code == 200, r.text
        events = parse_sse(r.text)
        assert events[-1][1] == "[DONE]"
        assert finish_of(events) == ["cancelled"]
    finally:
        stop.set()
        for t in threads:
            t.join()


def test_resume_secs_zero_cancels_at_once_and_does_not_resume(server_factory):
    srv = server_factory.start("--stream-resume-secs", "0", models={"kjv": KJV})
    r, events = stream(srv, "/v1/completions", dict(LONG, max_tokens=5, stream=True))
    sid = r.headers["x-inferd-stream-id"]
    assert events[-1][1] == "[DONE]"
    e = assert_openai_error(requests.get(srv.url + "/v1/streams/" + sid, timeout=WAIT), 404,
                            "invalid_request_error")
    assert "--stream-resume-secs" in e["message"]
    series = 'inferd_gen_requests_finished_total{model="kjv",version="1",reason="cancelled"}'
    s = RawStream(srv, "POST", "/v1/completions",
                  json.dumps(dict(LONG, max_tokens=240, stream=True)).encode())
    s.next_event()
    s.close()
    deadline = time.time() + WAIT
    while time.time() < deadline and not metric(srv, series):
        time.sleep(0.05)
    assert metric(srv, series) == 1
    deadline = time.time() + WAIT
    while time.time() < deadline and metric(srv, "inferd_gen_streams_active"):
        time.sleep(0.05)
    assert metric(srv, "inferd_gen_streams_active") == 0


# --------------------------------------------------------------------------
# Keys and rate limits: OpenAI's shapes


def test_auth_errors_and_stream_ownership(server_factory, tmp_path):
    keys = {n: new_key() for n in ("a", "b", "reader")}
    cfg = tmp_path / "inferd.yaml"
    cfg.write_text(auth_yaml([("a", [keys["a"][1]], ["infer"]),
                              ("b", [keys["b"][1]], ["infer:kjv"]),
                              ("reader", [keys["reader"][1]], ["read"])]))
    srv = server_factory.start("--config", str(cfg), models={"kjv": KJV})
    ka, kb, kr = (bearer(keys[n][0]) for n in ("a", "b", "reader"))
    r = requests.get(srv.url + "/v1/models", timeout=WAIT)
    assert_openai_error(r, 401, "authentication_error", "invalid_api_key")
    assert r.headers["WWW-Authenticate"].startswith("Bearer")
    r = requests.get(srv.url + "/v1/models", headers=bearer("inferd_" + "x" * 43), timeout=WAIT)
    assert_openai_error(r, 401, "authentication_error", "invalid_api_key")
    assert requests.get(srv.url + "/v1/models", headers=kr, timeout=WAIT).status_code == 200
    body = dict(LONG, max_tokens=4)
    assert_openai_error(post(srv, "/v1/completions", body), 401, "authentication_error")
    assert_openai_error(post(srv, "/v1/completions", body, headers=kr), 403, "permission_error")
    assert post(srv, "/v1/completions", body, headers=kb).status_code == 200
    # A's stream: B (another tenant) cannot see, resume or cancel it.
    r, events = stream(srv, "/v1/completions", dict(body, stream=True), headers=ka)
    sid = r.headers["x-inferd-stream-id"]
    last = {"Last-Event-ID": events[0][0]}
    for h in (kb, dict(kb, **last)):
        assert_openai_error(requests.get(srv.url + "/v1/streams/" + sid, headers=h,
                                         timeout=WAIT), 404, "invalid_request_error")
    assert_openai_error(post(srv, "/v1/completions", dict(body, stream=True),
                             headers=dict(kb, **last)), 404, "invalid_request_error")
    assert_openai_error(requests.delete(srv.url + "/v1/streams/" + sid, headers=kb,
                                        timeout=WAIT), 404, "invalid_request_error")
    assert_openai_error(requests.get(srv.url + "/v1/streams/" + sid, headers=kr, timeout=WAIT),
                        403, "permission_error")
    assert_openai_error(requests.get(srv.url + "/v1/streams/" + sid, timeout=WAIT), 401,
                        "authentication_error")
    g = requests.get(srv.url + "/v1/streams/" + sid, headers=dict(ka, **last), timeout=WAIT)
    assert g.status_code == 200
    assert parse_sse(g.text) == events[1:]


def test_rate_limit_429_has_openai_shape(server_factory, tmp_path):
    cfg = tmp_path / "inferd.yaml"
    cfg.write_text("rate-limits:\n  - model: kjv\n    rate: 0.1\n    burst: 1\n")
    srv = server_factory.start("--config", str(cfg), models={"kjv": KJV})
    body = dict(LONG, max_tokens=2)
    ok = post(srv, "/v1/completions", body)
    assert ok.status_code == 200
    # OpenAI's names for the request-rate bucket; no token budget matched.
    assert ok.headers["x-ratelimit-limit-requests"] == "1"
    assert ok.headers["x-ratelimit-remaining-requests"] == "0"
    assert ok.headers["x-ratelimit-reset-requests"] == "10s"
    assert "x-ratelimit-limit-tokens" not in ok.headers
    r = post(srv, "/v1/completions", dict(body, stream=True))
    assert_openai_error(r, 429, "rate_limit_exceeded", "rate_limit_exceeded")
    retry = int(r.headers["Retry-After"])
    assert 1 <= retry <= 10
    assert r.headers["retry-after-ms"] == str(retry * 1000)
    assert "x-should-retry" not in r.headers  # a request-rate limit passes: retrying is right
    assert r.headers["x-ratelimit-limit-requests"] == "1"
    assert r.headers["x-ratelimit-remaining-requests"] == "0"


DURATION = re.compile(r"^(\d+h)?(\d+m)?\d+(\.\d{1,3})?s$|^\d{1,3}ms$")


def quota_server(server_factory, tmp_path, window):
    cfg = tmp_path / "inferd.yaml"
    cfg.write_text("token-quotas:\n  - model: kjv\n    %s: {total: %d}\n"
                   % (window, 100 if window == "per-minute" else 60))
    return server_factory.start("--config", str(cfg), models={"kjv": KJV})


def test_token_budget_headers_and_429_shapes(server_factory, tmp_path):
    srv = quota_server(server_factory, tmp_path, "per-minute")
    body = dict(LONG, max_tokens=20)
    r = post(srv, "/v1/completions", body)
    assert r.status_code == 200, r.text
    p = r.json()["usage"]["prompt_tokens"]
    assert r.headers["x-ratelimit-limit-tokens"] == "100"
    assert r.headers["x-ratelimit-remaining-tokens"] == str(100 - p - 20)
    assert DURATION.match(r.headers["x-ratelimit-reset-tokens"]), r.headers
    assert "x-ratelimit-limit-requests" not in r.headers  # no request-rate rule
    # Streamed: in the response head. KServe generate: the same headers.
    s, _ = stream(srv, "/v1/completions", dict(body, max_tokens=2, stream=True))
    assert s.headers["x-ratelimit-limit-tokens"] == "100"
    g = requests.post(srv.url + "/v2/models/kjv/generate",
                      json={"text_input": LONG["prompt"], "max_tokens": 2}, timeout=WAIT)
    assert g.status_code == 200 and g.headers["x-ratelimit-limit-tokens"] == "100"
    # Larger than the whole budget: never fits, the SDK must not retry.
    r = post(srv, "/v1/completions", dict(body, max_tokens=200))
    assert_openai_error(r, 429, "rate_limit_exceeded", "rate_limit_exceeded")
    assert r.headers["x-should-retry"] == "false"
    assert "lower max_tokens" in r.json()["error"]["message"]
    g = requests.post(srv.url + "/v2/models/kjv/generate",
                      json={"text_input": LONG["prompt"], "max_tokens": 200}, timeout=WAIT)
    assert g.status_code == 429 and g.headers["x-should-retry"] == "false"
    assert "lower max_tokens" in g.json()["error"]
    # Fits the budget but not what is left of it now: retry after the refill.
    r = post(srv, "/v1/completions", dict(body, max_tokens=99 - p))
    assert_openai_error(r, 429, "rate_limit_exceeded", "rate_limit_exceeded")
    assert "x-should-retry" not in r.headers
    ms = int(r.headers["retry-after-ms"])
    assert 0 < ms <= 60000
    assert int(r.headers["Retry-After"]) == max(1, -(-ms // 1000))
    assert r.headers["x-ratelimit-limit-tokens"] == "100"


def test_daily_token_budget_spent_is_insufficient_quota(server_factory, tmp_path):
    srv = quota_server(server_factory, tmp_path, "per-day")
    body = dict(LONG, max_tokens=20)
    first = post(srv, "/v1/completions", body)
    assert first.status_code == 200, first.text
    p = first.json()["usage"]["prompt_tokens"]
    # Fits the day's 60 tokens, but not after the first call's p + 1 at least.
    r = post(srv, "/v1/completions", dict(body, max_tokens=60 - p - 1))
    assert_openai_error(r, 429, "insufficient_quota", "insufficient_quota")
    assert r.headers["x-should-retry"] == "false"
    now = time.time()
    to_midnight = 86400 - int(now) % 86400
    assert abs(int(r.headers["Retry-After"]) - to_midnight) <= 2
    assert abs(int(r.headers["retry-after-ms"]) / 1000 - to_midnight) <= 2
    assert r.headers["x-ratelimit-limit-tokens"] == "60"
    assert DURATION.match(r.headers["x-ratelimit-reset-tokens"])
