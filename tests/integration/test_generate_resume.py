"""Resumable streams (issue 15's resume test): 100 streamed /v1/completions of
the generative model kjv (models/kjv), each sampled (temperature 0.9) with its
own seed. For each, the uninterrupted stream's text first; then the same
request whose TCP connection the client really closes after a random number
of received events (anything already received of the next event is
dropped), 1 to 3 times, each time reconnecting with Last-Event-ID, by turns
a re-POST of the same body and GET /v1/streams/{stream-id}. The text
reassembled from the events must equal the uninterrupted text byte for
byte, the event ids <stream-id>-<seq> must run 0, 1, 2, ... with none
missing or repeated, up to `data: [DONE]`, and a replay of the whole stream
(GET /v1/streams/{stream-id} without Last-Event-ID) must give the same
events.

These 100 streams run one after another: each sequence is then alone in
the engine, so the same seed gives the same logits to the last bit (batched
with others, a sequence's logits may differ in their last bits and two
tokens within rounding can swap: docs/generative.md). A second test runs
streams concurrently (many streams in the registry at once, reconnects on
other I/O threads, sequences batched together) and checks each against its
own replay.

The client is a raw socket with its own chunked and SSE parsing, so what is
read is exactly what arrived."""
import json
import random
import re
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import REPO_ROOT

KJV = REPO_ROOT / "models" / "kjv"
STREAMS = 100
CONCURRENT_STREAMS = 32
CONCURRENT_THREADS = 8
SEED = 20240615
PROMPTS = ["In the beginning", "And God said", "And it came to pass", "Blessed are they",
           "The LORD is my shepherd", "And Jesus answered and said unto them,"]
IO_TIMEOUT = 30.0
MAX_EVENTS = 4096  # more events than this from one stream is a failure


@pytest.fixture(scope="module")
def srv(module_server_factory):
    if not (KJV / "1" / "model.onnx").exists():
        pytest.fail("model kjv missing: %s/1/model.onnx (models/build/make_kjv.py)" % KJV)
    return module_server_factory.start("--stream-resume-secs", "10", models={"kjv": KJV})


class Broken(Exception):
    """The server closed the connection before the stream's end."""


class EventStream:
    """One HTTP/1.1 request on its own connection whose response is read as
    Server-Sent Events: next_event() returns (id, data) or None after the
    stream's last chunk. Only ids and data lines matter here; a comment
    (keep-alive) is skipped."""

    def __init__(self, port, method, path, body=None, last_event_id=None):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT)
        head = ["%s %s HTTP/1.1" % (method, path), "Host: 127.0.0.1", "Accept: text/event-stream"]
        data = b""
        if body is not None:
            data = json.dumps(body).encode()
            head += ["Content-Type: application/json", "Content-Length: %d" % len(data)]
        if last_event_id is not None:
            head.append("Last-Event-ID: " + last_event_id)
        self.sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + data)
        self.raw = b""      # bytes received and not parsed yet
        self.text = b""     # de-chunked body bytes not parsed into events yet
        self.done = False   # the last chunk arrived
        self.status, self.headers = self._read_head()
        self.chunked = self.headers.get("transfer-encoding", "").lower() == "chunked"

    def close(self):
        """Closes the connection as a client that goes away does (unread
        bytes make the kernel send a reset)."""
        self.sock.close()

    def _recv(self):
        b = self.sock.recv(65536)
        if not b:
            raise Broken("connection closed by the server")
        self.raw += b

    def _read_head(self):
        while b"\r\n\r\n" not in self.raw:
            self._recv()
        head, self.raw = self.raw.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        return status, headers

    def read_body(self):
        """The whole body of a response that is not an event stream."""
        n = int(self.headers.get("content-length", "0"))
        while len(self.raw) < n:
            self._recv()
        return self.raw[:n]

    def _more_text(self):
        """Moves the next de-chunked bytes from raw to text (reading the
        socket when needed); False after the last chunk."""
        if not self.chunked:
            try:
                self._recv()
            except Broken:
                self.done = True
                return False
            self.text += self.raw
            self.raw = b""
            return True
        while True:
            i = self.raw.find(b"\r\n")
            if i >= 0:
                size = int(self.raw[:i].split(b";")[0], 16)
                if len(self.raw) >= i + 2 + size + 2:
                    self.text += self.raw[i + 2:i + 2 + size]
                    self.raw = self.raw[i + 2 + size + 2:]
                    if size == 0:
                        self.done = True
                        return False
                    return True
            self._recv()

    def next_event(self):
        while True:
            i = self.text.find(b"\n\n")
            if i >= 0:
                block, self.text = self.text[:i].decode("utf-8"), self.text[i + 2:]
                ev_id, data = None, []
                for line in block.split("\n"):
                    if line.startswith(":"):
                        continue
                    name, _, value = line.partition(":")
                    value = value[1:] if value.startswith(" ") else value
                    if name == "id":
                        ev_id = value
                    elif name == "data":
                        data.append(value)
                if data:
                    return ev_id, "\n".join(data)
                continue
            if self.done or not self._more_text():
                return None


def body_of(spec):
    return {"model": "kjv", "prompt": spec["prompt"], "max_tokens": spec["max_tokens"],
            "temperature": 0.9, "seed": spec["seed"], "stream": True}


def read_all(stream, events):
    """Appends every (id, data) of stream to events until its end."""
    while (ev := stream.next_event()) is not None:
        events.append(ev)
        if len(events) > MAX_EVENTS:
            raise AssertionError("more than %d events" % MAX_EVENTS)


def text_of(events):
    """The completion text, the finish reason and whether [DONE] ended it."""
    text, finish = "", None
    for _, data in events:
        if data == "[DONE]":
            continue
        chunk = json.loads(data)
        assert "error" not in chunk, chunk
        for choice in chunk["choices"]:
            text += choice["text"]
            finish = choice["finish_reason"] or finish
    return text, finish, bool(events) and events[-1][1] == "[DONE]"


def whole_stream(port, method, path, body=None):
    """Every event of a stream read without a break."""
    s = EventStream(port, method, path, body)
    try:
        assert s.status == 200, s.read_body()
        events = []
        read_all(s, events)
    finally:
        s.close()
    return events


def interrupted(port, spec, rng, total_events):
    """The stream of spec, broken after random numbers of events; returns
    (events, log of what was done)."""
    breaks = rng.randint(1, 3)
    events, log = [], []
    s = EventStream(port, "POST", "/v1/completions", body_of(spec))
    assert s.status == 200, s.read_body()
    resume_by_get = rng.random() < 0.5
    for k in range(breaks):
        # Break after at least one more event (the first gives the stream id),
        # sometimes after the stream's end was already sent.
        n = rng.randint(1, max(1, total_events - len(events) + 1))
        for _ in range(n):
            ev = s.next_event()
            if ev is None:
                break
            events.append(ev)
        s.close()
        last = events[-1][0]
        stream_id = last.rsplit("-", 1)[0]
        log.append("break %d after %s" % (k, last))
        if rng.random() < 0.3:
            time.sleep(rng.uniform(0, 0.3))  # the server keeps generating meanwhile
        if resume_by_get:
            s = EventStream(port, "GET", "/v1/streams/" + stream_id, last_event_id=last)
        else:
            s = EventStream(port, "POST", "/v1/completions", body_of(spec), last_event_id=last)
        log.append(("GET" if resume_by_get else "POST") + " from " + last)
        assert s.status == 200, (log, s.status, s.read_body())
        resume_by_get = not resume_by_get
    try:
        read_all(s, events)
    finally:
        s.close()
    return events, log


def check_ids(events):
    """None when the ids are <one stream-id>-0, -1, -2, ...; else what is wrong."""
    ids = [i for i, _ in events]
    if any(i is None for i in ids):
        return "an event without an id"
    stream_id = ids[0].rsplit("-", 1)[0]
    if not re.fullmatch(r"[0-9a-f]{32}", stream_id):
        return "stream id %r" % stream_id
    want = ["%s-%d" % (stream_id, k) for k in range(len(ids))]
    if ids != want:
        bad = next(k for k in range(len(ids)) if ids[k] != want[k])
        return "event %d has id %s, expected %s" % (bad, ids[bad], want[bad])
    return None


def run_one(port, spec, uninterrupted):
    """None when the stream of spec, broken and resumed, gives the events of
    its own replay and (when `uninterrupted`) the text of an uninterrupted
    stream of the same request; else what differs."""
    rng = random.Random(spec["seed"])
    if uninterrupted:
        whole = whole_stream(port, "POST", "/v1/completions", body_of(spec))
        want_text, want_finish, want_done = text_of(whole)
        if not want_done or check_ids(whole) or want_finish not in ("stop", "length"):
            return "uninterrupted stream: %s (ids: %s, finish %s)" % (spec, check_ids(whole),
                                                                     want_finish)
        total = len(whole)
    else:
        total = spec["max_tokens"] + 2
    events, log = interrupted(port, spec, rng, total)
    problem = check_ids(events)
    if problem:
        return "%s: %s; %s" % (spec, problem, log)
    text, finish, done = text_of(events)
    if not done:
        return "%s: no [DONE] at the end; %s" % (spec, log)
    if uninterrupted and (text, finish) != (want_text, want_finish):
        return "%s: text %r finish %s, expected %r finish %s; %s" % (
            spec, text, finish, want_text, want_finish, log)
    stream_id = events[0][0].rsplit("-", 1)[0]
    replay = whole_stream(port, "GET", "/v1/streams/" + stream_id)
    if replay != events:
        return "%s: the replay differs: %r, resumed %r; %s" % (spec, replay, events, log)
    return None


def specs_of(rng, n):
    return [{"prompt": rng.choice(PROMPTS), "max_tokens": rng.randint(50, 70),
             "seed": rng.randrange(1 << 63)} for _ in range(n)]


def test_resumed_streams_equal_uninterrupted_streams(srv):
    results = [run_one(srv.port, s, True) for s in specs_of(random.Random(SEED), STREAMS)]
    failures = [r for r in results if r is not None]
    assert not failures, "%d of %d streams differ:\n%s" % (len(failures), STREAMS,
                                                           "\n".join(failures[:5]))


def test_concurrent_resumed_streams_equal_their_replay(srv):
    specs = specs_of(random.Random(SEED + 1), CONCURRENT_STREAMS)
    with ThreadPoolExecutor(CONCURRENT_THREADS) as pool:
        results = list(pool.map(lambda s: run_one(srv.port, s, False), specs))
    failures = [r for r in results if r is not None]
    assert not failures, "%d of %d streams differ:\n%s" % (len(failures), CONCURRENT_STREAMS,
                                                           "\n".join(failures[:5]))
