"""Headless Chromium driven over the DevTools protocol with the standard
library only (a minimal WebSocket client), for the dashboard test: the page
runs in real time, so its per-second polling and rates behave as in a
browser."""
import base64
import json
import os
import re
import signal
import socket
import struct
import subprocess
import tempfile
import time
import urllib.request

CHROMIUM = "/usr/bin/chromium"


class WebSocket:
    def __init__(self, url, timeout=30.0):
        m = re.match(r"ws://([^/:]+):(\d+)(/.*)", url)
        self.sock = socket.create_connection((m.group(1), int(m.group(2))), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(("GET %s HTTP/1.1\r\nHost: %s:%s\r\nUpgrade: websocket\r\n"
                           "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n"
                           % (m.group(3), m.group(1), m.group(2), key)).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("websocket handshake failed")
            head += chunk
        assert head.startswith(b"HTTP/1.1 101"), head[:200]
        self.buf = head.split(b"\r\n\r\n", 1)[1]

    def send(self, text):
        data = text.encode()
        mask = os.urandom(4)
        n = len(data)
        header = bytes([0x81])
        if n < 126:
            header += bytes([0x80 | n])
        elif n < 65536:
            header += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", n)
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def _read(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("websocket closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv(self):
        message = b""
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            payload = self._read(n)
            message += payload
            if b0 & 0x80:
                return message.decode()

    def close(self):
        self.sock.close()


class Browser:
    """One headless Chromium with a fresh profile and one page."""

    def __init__(self, width=1280, height=900, extra_args=()):
        self.profile = tempfile.TemporaryDirectory()
        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--user-data-dir=" + self.profile.name, "--remote-debugging-port=0",
             "--window-size=%d,%d" % (width, height), *extra_args, "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            # Its own process group: Chromium forks zygote, renderer and
            # utility processes that outlive a killed parent and keep writing
            # into the profile directory.
            start_new_session=True)
        port = None
        deadline = time.monotonic() + 30
        path = os.path.join(self.profile.name, "DevToolsActivePort")
        while time.monotonic() < deadline and port is None:
            if os.path.exists(path):
                lines = open(path).read().split("\n")
                if lines and lines[0].strip():
                    port = int(lines[0])
            time.sleep(0.05)
        if port is None:
            self.close()
            raise RuntimeError("chromium did not open its DevTools port")
        pages = []
        while not pages and time.monotonic() < deadline:
            targets = json.load(urllib.request.urlopen("http://127.0.0.1:%d/json" % port))
            pages = [t for t in targets if t["type"] == "page"]
            time.sleep(0.05)
        self.ws = WebSocket(pages[0]["webSocketDebuggerUrl"])
        self.next_id = 0

    def call(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError("%s: %s" % (method, msg["error"]))
                return msg["result"]

    def navigate(self, url):
        self.call("Page.enable")
        self.call("Page.navigate", url=url)

    def evaluate(self, expression):
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return r["result"].get("value")

    def wait_until(self, expression, timeout=30.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.evaluate(expression):
                return True
            time.sleep(0.1)
        return False

    def screenshot(self, path):
        data = self.call("Page.captureScreenshot", format="png")["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def close(self):
        """Stop Chromium and every process it forked, then delete the profile.
        Asking the browser to quit lets it flush its profile; the group kill
        catches whatever did not exit in time."""
        if getattr(self, "ws", None):
            try:
                self.call("Browser.close")
            except (OSError, RuntimeError, ValueError):
                pass
            self.ws.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self.proc.stderr.close()
        deadline = time.monotonic() + 10
        while _live_members(self.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.profile.cleanup()


def _live_members(pgid):
    """Processes of group pgid that still run (zombies excluded: they no
    longer touch files, and PID 1 in a container may never reap them)."""
    live = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            live.append(int(entry))
    return live
