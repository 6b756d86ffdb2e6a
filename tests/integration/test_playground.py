"""The playground: GET /playground (one self-contained page) driven by
headless Chromium against a server with simple, digits, spoken_digits,
langid and kjv: a digit picture and a spoken digit's WAV chosen through the
file pickers, and German typed into the text box, are classified with their
labels, simple
runs from the form made from its metadata, a chat reply streams and is
stopped (the server counts the cancellation), a stream whose connection a
TCP proxy between the browser and the server closes mid-reply resumes
through the proxy with Last-Event-ID to the same text, "Copy as" shows
code that, run, sends the same request, and a server with keys answers the
page's keyless requests with a readable 401. Screenshots go to
tests/integration/artifacts/playground_*.png (git-ignored)."""
import ast
import json
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import requests

from cdp import CHROMIUM, Browser
from conftest import (INFERD_BIN, MAIN_MODELS, REPO_ROOT,
                      check_self_contained_page, ok_json)
from prom import scrape

ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
KJV = REPO_ROOT / "models" / "kjv"
SEVEN = REPO_ROOT / "models" / "digits" / "sample_7.png"
SPOKEN = REPO_ROOT / "models" / "spoken_digits"
LANGID = REPO_ROOT / "models" / "langid"
GERMAN = "guten morgen, ich möchte schlafen"  # "guten morgen" alone: de at 0.63


@pytest.fixture(scope="module")
def psrv(module_server_factory):
    if not (KJV / "1" / "model.onnx").exists():
        pytest.fail("model kjv missing: %s/1/model.onnx (models/build/make_kjv.py)" % KJV)
    return module_server_factory.start(
        "--stream-resume-secs", "10",
        models={"simple": MAIN_MODELS["simple"], "digits": MAIN_MODELS["digits"], "kjv": KJV,
                "spoken_digits": SPOKEN, "langid": LANGID})


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail("chromium not installed: %s" % CHROMIUM)
    b = Browser(width=900, height=1000)
    yield b
    b.close()


def open_model(browser, srv, model):
    browser.navigate("about:blank")  # a new page, not just a new #fragment
    assert browser.wait_until("location.href === 'about:blank'")
    browser.navigate(srv.url + "/playground#" + model)
    assert browser.wait_until("document.body.dataset.loaded === '1'", timeout=30)
    assert browser.evaluate("document.getElementById('model').value") == model
    assert browser.evaluate("document.getElementById('notice').textContent") == ""


def shot(browser, name):
    ARTIFACTS.mkdir(exist_ok=True)
    browser.screenshot(str(ARTIFACTS / ("playground_%s.png" % name)))


def click(browser, selector):
    browser.evaluate("document.querySelector(%s).click()" % json.dumps(selector))


def set_value(browser, selector, value):
    browser.evaluate("document.querySelector(%s).value = %s" % (json.dumps(selector), json.dumps(value)))


def code_for(browser, lang):
    click(browser, "#tabs button[data-lang=%s]" % lang)
    return browser.evaluate("document.getElementById('code').textContent")


def run_form(browser):
    runs = browser.evaluate("Number(document.body.dataset.runs || 0)")
    click(browser, "#run")
    assert browser.wait_until("Number(document.body.dataset.runs || 0) > %d" % runs), \
        browser.evaluate("document.getElementById('notice').textContent")


def test_page_is_self_contained(psrv):
    before = scrape(psrv)
    page = check_self_contained_page(psrv.url, "/playground")
    assert 'name="viewport"' in page
    assert 'href="/playground"' in requests.get(psrv.url + "/dashboard").text
    # The page's responses have their own endpoint label.
    after = scrape(psrv)

    def delta(code):
        return (after.get("inferd_http_responses_total", endpoint="playground", code=code) -
                before.get("inferd_http_responses_total", endpoint="playground", code=code))
    assert delta("200") == 2 and delta("405") == 1 and delta("404") == 1


def choose_file(browser, raw_input, path):
    """Chooses path in the file picker of the raw input named raw_input."""
    picker = "document.querySelector('[data-input=%s] input[type=file]')" % raw_input
    assert browser.wait_until("!!" + picker)
    obj = browser.call("Runtime.evaluate", expression=picker)
    browser.call("DOM.enable")
    browser.call("DOM.setFileInputFiles", files=[str(path)], objectId=obj["result"]["objectId"])
    assert browser.wait_until("!!document.querySelector('[data-input=%s]').file" % raw_input)


def top_label(browser, output):
    return browser.evaluate(
        "document.querySelector('[data-output=%s] .top').dataset.top" % output)


def test_classify_digit_image(psrv, browser, tmp_path):
    open_model(browser, psrv, "digits")
    # The raw image input gets a file picker; choose the picture through it.
    choose_file(browser, "image", SEVEN)
    run_form(browser)
    assert top_label(browser, "probabilities") == "7"
    bars = browser.evaluate("document.querySelectorAll('[data-output=probabilities] .bar').length")
    assert bars == 10
    assert "total" in browser.evaluate("document.getElementById('timing').textContent")
    shot(browser, "digits")
    # Copy as curl: the binary extension built in the shell, run from the
    # picture's directory, gives the same answer.
    curl = code_for(browser, "curl")
    assert "--data-binary @-" in curl and "Inference-Header-Content-Length" in curl
    (tmp_path / SEVEN.name).write_bytes(SEVEN.read_bytes())
    out = subprocess.run(["bash", "-c", curl], cwd=tmp_path, capture_output=True, text=True,
                         timeout=30)
    answer = json.loads(out.stdout)
    assert answer["outputs"][0]["data"][0].endswith(":7:7"), answer


def test_classify_spoken_digit(psrv, browser):
    open_model(browser, psrv, "spoken_digits")
    # The raw audio input gets a file picker; the WAV goes as it is.
    choose_file(browser, "audio", SPOKEN / "sample_seven.wav")
    run_form(browser)
    assert top_label(browser, "probabilities") == "seven"
    assert browser.evaluate(
        "document.querySelectorAll('[data-output=probabilities] .bar').length") == 10
    shot(browser, "spoken_digits")


def test_identify_language_of_text(psrv, browser):
    open_model(browser, psrv, "langid")
    # The raw text input is a text box; the text goes as a BYTES element.
    assert browser.wait_until("!!document.querySelector('[data-input=text] textarea')")
    set_value(browser, "[data-input=text] textarea", GERMAN)
    run_form(browser)
    assert top_label(browser, "probabilities") == "de"
    scores = browser.evaluate(
        "Array.from(document.querySelectorAll('[data-output=probabilities] td'))"
        ".map(td => td.textContent)")
    assert scores[0].endswith(":de") and float(scores[0].split(":")[0]) > 0.9, scores
    assert json.loads(browser.evaluate("window.__playground.last.body"))["inputs"] == [
        {"name": "text", "shape": [1, 1], "datatype": "BYTES", "data": [GERMAN]}]
    shot(browser, "langid")


def test_simple_from_form(psrv, browser):
    open_model(browser, psrv, "simple")
    assert browser.wait_until("document.querySelectorAll('#form [data-input]').length === 2")
    a, b = list(range(16)), [3] * 16
    # A wrong number of values is refused in the page, before sending.
    set_value(browser, "[data-input=INPUT0] textarea", json.dumps(a[:15]))
    click(browser, "#run")
    assert browser.wait_until("document.querySelector('[data-input=INPUT0] .err').textContent !== ''")
    assert "needs 16 values, got 15" in browser.evaluate(
        "document.querySelector('[data-input=INPUT0] .err').textContent")
    set_value(browser, "[data-input=INPUT0] textarea", json.dumps(a))
    set_value(browser, "[data-input=INPUT1] textarea", json.dumps(b))
    run_form(browser)
    cells = browser.evaluate(
        "Object.fromEntries(Array.from(document.querySelectorAll('[data-output]')).map(d =>"
        " [d.dataset.output, Array.from(d.querySelectorAll('td')).map(td => Number(td.textContent))]))")
    assert cells["OUTPUT0"] == [x + y for x, y in zip(a, b)]
    assert cells["OUTPUT1"] == [x - y for x, y in zip(a, b)]
    timing = browser.evaluate("document.getElementById('timing').textContent")
    assert re.match(r"^total [0-9.]+ ms · queue [0-9.]+ ms · compute [0-9.]+ ms$", timing), timing
    shot(browser, "simple")
    # Copy as: the curl and Python snippets carry exactly the body sent.
    sent = browser.evaluate("window.__playground.last.body")
    assert json.loads(sent)["inputs"][0]["data"] == a
    curl = code_for(browser, "curl")
    assert curl.endswith(" \\\n  -d '%s'" % sent), curl
    out = subprocess.run(["bash", "-c", curl], capture_output=True, text=True, timeout=30)
    expected = requests.post(psrv.url + "/v2/models/simple/infer", data=sent).json()
    assert json.loads(out.stdout) == expected
    python = code_for(browser, "python")
    assert ("body = %s\n" % json.dumps(sent)) in python
    out = subprocess.run([sys.executable, "-c", python], capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, out.stderr
    assert ast.literal_eval(out.stdout) == expected
    trit = code_for(browser, "tritonclient")
    assert 'httpclient.InferInput("INPUT0", [1, 16], "INT32")' in trit
    assert "np.array(%s, dtype=np.int32)" % json.dumps(a) in trit


def send_chat(browser, text, max_tokens, seed, on_first=None, during=None):
    """Types text, sets the sampling fields, optionally arms a one-shot hook
    (JS run once the reply has started) and sends; during(), if given, runs
    after sending; returns the reply's text once the chat has finished."""
    set_value(browser, "#prompt", text)
    set_value(browser, "#temperature", "0")
    set_value(browser, "#max_tokens", str(max_tokens))
    set_value(browser, "#seed", str(seed))
    if on_first:
        browser.evaluate(
            "(() => { const o = new MutationObserver(() => {"
            " const m = document.querySelectorAll('#chat-log .msg.assistant');"
            " const last = m[m.length - 1];"
            " if (last && last.textContent.length > 0) { o.disconnect(); %s; } });"
            " o.observe(document.getElementById('chat-log'),"
            " {childList: true, subtree: true, characterData: true}); })()"
            % on_first)
    done = browser.evaluate("Number(document.body.dataset.chats || 0)")
    click(browser, "#send")
    if during:
        during()
    assert browser.wait_until("Number(document.body.dataset.chats || 0) > %d" % done, timeout=60)
    assert browser.evaluate("document.getElementById('notice').textContent") == ""
    return browser.evaluate(
        "Array.from(document.querySelectorAll('#chat-log .msg.assistant')).pop().textContent")


def test_chat_streams_and_stops(psrv, browser):
    # The stop races the server's generation (240 tokens take tens of ms):
    # each try must be consistent (the page's state and the metric agree),
    # and one of a few must land while the reply is still being made.
    for _ in range(5):
        open_model(browser, psrv, "kjv")
        assert browser.evaluate(
            "!document.getElementById('chat-panel').classList.contains('hidden')")
        before = scrape(psrv).get("inferd_gen_requests_finished_total", reason="cancelled")
        # A prompt whose greedy reply runs to max_tokens (no end token): the
        # longest generation the context allows, for the stop to land in.
        text = send_chat(browser, "Thus saith the LORD", 240, 7,
                         on_first="document.getElementById('stop').click()")
        assert text != ""
        state = browser.evaluate("document.getElementById('chat-state').textContent")
        assert state in ("finished: cancelled", "finished: length"), state
        after = scrape(psrv).get("inferd_gen_requests_finished_total", reason="cancelled")
        assert after == before + (state == "finished: cancelled")
        if state == "finished: cancelled":
            break
    assert state == "finished: cancelled"
    shot(browser, "chat_stopped")
    # Copy as OpenAI SDK: the sampling settings as sent.
    sdk = code_for(browser, "openai")
    assert 'base_url="%s/v1"' % psrv.url in sdk
    for field in ("stream=True", "temperature=0", "top_p=1", "max_tokens=240", "seed=7"):
        assert field in sdk, sdk


class CuttingProxy:
    """A TCP proxy in front of the server. Armed with hold_chat_after(n), the
    first connection that carries POST /v1/chat/completions passes its reply
    up to the n-th event and then no more; cut() then closes that
    connection both ways, as a network failure would."""

    def __init__(self, target):
        self.target = target
        self.lsock = socket.create_server(("127.0.0.1", 0))
        self.url = "http://127.0.0.1:%d" % self.lsock.getsockname()[1]
        self.lock = threading.Lock()
        self.armed = 0
        self.held = threading.Event()
        self.release = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def hold_chat_after(self, events):
        with self.lock:
            self.armed = events

    def cut(self):
        assert self.held.wait(30), "no chat reply reached the proxy"
        self.release.set()

    def close(self):
        self.release.set()
        self.lsock.close()

    def _accept(self):
        while True:
            try:
                client, _ = self.lsock.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            conn = {"client": client, "server": server, "events": 0}
            threading.Thread(target=self._up, args=(conn,), daemon=True).start()
            threading.Thread(target=self._down, args=(conn,), daemon=True).start()

    @staticmethod
    def _shut(conn):
        for s in (conn["client"], conn["server"]):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def _up(self, conn):  # browser to server
        try:
            while data := conn["client"].recv(1 << 16):
                if b"POST /v1/chat/completions " in data:
                    with self.lock:
                        conn["events"], self.armed = self.armed, 0
                conn["server"].sendall(data)
        except OSError:
            pass
        self._shut(conn)

    def _down(self, conn):  # server to browser
        try:
            while data := conn["server"].recv(1 << 16):
                at = 0
                while conn["events"] and (at := data.find(b"data: ", at)) >= 0:
                    conn["events"] -= 1
                    if conn["events"] == 0:
                        conn["client"].sendall(data[:at])
                        self.held.set()
                        self.release.wait()
                        self._shut(conn)
                        return
                    at += 1
                conn["client"].sendall(data)
        except OSError:
            pass
        self._shut(conn)


@pytest.fixture
def proxy(psrv):
    p = CuttingProxy(("127.0.0.1", int(psrv.url.rsplit(":", 1)[1])))
    yield p
    p.close()


def test_chat_resumes_after_a_cut(psrv, proxy, browser):
    # The page is loaded through the proxy, which drops the chat's connection
    # a few events into the reply; the page resumes through it with
    # Last-Event-ID.
    open_model(browser, proxy, "kjv")
    body = {"model": "kjv", "messages": [{"role": "user", "content": "And God said"}],
            "temperature": 0, "top_p": 1, "max_tokens": 120, "seed": 3}
    whole = ok_json(requests.post(psrv.url + "/v1/chat/completions", json=body))
    expected = whole["choices"][0]["message"]["content"]
    assert whole["choices"][0]["finish_reason"] == "length"
    proxy.hold_chat_after(6)

    def cut_once_shown():
        # The five events before the hold are on the page: cut there.
        assert browser.wait_until(
            "Array.from(document.querySelectorAll('#chat-log .msg.assistant')).pop()"
            ".textContent.length > 0")
        proxy.cut()
    text = send_chat(browser, "And God said", 120, 3, during=cut_once_shown)
    assert text == expected
    assert browser.evaluate("document.getElementById('chat-state').textContent") == \
        "finished: length"
    assert browser.evaluate("document.getElementById('resume-notice').dataset.resumes") == "1"
    notice = browser.evaluate("document.getElementById('resume-notice').textContent")
    assert re.match(r"^connection lost · resumed after event [0-9a-f]{32}-[0-4] \(1\)$",
                    notice), notice
    assert browser.evaluate(
        "getComputedStyle(document.getElementById('resume-notice')).display") != "none"
    shot(browser, "chat_resumed")


def new_key():
    out = subprocess.run([str(INFERD_BIN), "keys", "new"], check=True, capture_output=True,
                         text=True).stdout.splitlines()
    return out[0], out[1]


def test_keys_401_then_key(server_factory, tmp_path):
    if not Path(CHROMIUM).exists():
        pytest.fail("chromium not installed: %s" % CHROMIUM)
    key, digest = new_key()
    config = tmp_path / "inferd.yaml"
    config.write_text('auth:\n  tenants:\n    - name: t\n      keys:\n        - "%s"\n'
                      "      scopes: [read, infer]\n"
                      "rate-limits:\n  - model: simple\n    rate: 0.01\n    burst: 1\n" % digest)
    srv = server_factory.start("--config", str(config), models={"simple": MAIN_MODELS["simple"]})
    b = Browser(width=420, height=800)  # a phone-sized screen
    try:
        b.navigate(srv.url + "/playground")
        assert b.wait_until("document.getElementById('notice').textContent !== ''")
        msg = b.evaluate("document.getElementById('notice').textContent")
        assert msg.startswith("401 Unauthorized: enter a valid API key — "), msg
        shot(b, "unauthorized")
        set_value(b, "#key", key)
        click(b, "#reload")
        # A key without `admin`: the models come from the statistics.
        assert b.wait_until("document.body.dataset.loaded === '1'")
        assert b.evaluate("document.getElementById('model').value") == "simple"
        assert b.evaluate("document.getElementById('notice').textContent") == ""
        run_form(b)
        curl = code_for(b, "curl")
        assert '-H "Authorization: Bearer $INFERD_API_KEY"' in curl and key not in curl
        # The rate limit's burst is spent: a readable 429 with Retry-After.
        click(b, "#run")
        assert b.wait_until("document.getElementById('notice').textContent !== ''")
        msg = b.evaluate("document.getElementById('notice').textContent")
        assert re.match(r"^429 Too many requests — rate limit of model simple exceeded "
                        r"\(0\.01/s, burst 1\) \(retry after [0-9]+ s\)$", msg), msg
        shot(b, "rate_limited")
    finally:
        b.close()
