"""docs/quickstart.md runs as written, with an inferd from `make install`.

The page marks the blocks to run with an HTML comment on the line before
the fence:

  <!-- quickstart: run -->          a shell block, run with bash in the
                                    work directory; its stdout is kept
  <!-- quickstart: output -->       what the previous run block printed
                                    ("..." matches any text, blanks any
                                    blanks: docblocks.output_matches)
  <!-- quickstart: file NAME -->    the block is saved as NAME
  <!-- quickstart: serve -->        an `inferd serve ...` line, started in
                                    the background (a server already
                                    started is stopped first)

The steps run in order in an empty directory, with PATH starting at the bin
directory of `make install PREFIX=<tmp>`. Only the ports (8000, 8001 and
8002 may be in use on a test machine) and the prefix (/usr/local) are
replaced.

A second test checks `make install` itself: DESTDIR staging, the files it
installs, and that the installed binary finds ONNX Runtime through its own
rpath, not through third_party/ of the source tree.
"""
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import requests

import docblocks
from conftest import INFERD_BIN, MAIN_MODELS, REPO_ROOT, SANITIZER_MARKERS, \
    free_port, make_repository

DOC = REPO_ROOT / "docs" / "quickstart.md"
MARK = re.compile(r"quickstart: (run|output|file|serve)(?: (\S+))?")
DEPS_STAMP = "third_party/.deps-done"  # the Makefile's; never remade here


def make_install(prefix, destdir=""):
    """`make install PREFIX=prefix DESTDIR=destdir` from the build directory
    of the binary under test. The dependency script is not re-run (-o) and
    the build is only brought up to date."""
    build_dir = INFERD_BIN.parent
    if not (build_dir / "CMakeCache.txt").exists():
        pytest.fail("%s is not in a CMake build directory: cannot make install" % INFERD_BIN)
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}
    cmd = ["make", "-C", str(REPO_ROOT), "install", "PREFIX=%s" % prefix,
           "DESTDIR=%s" % destdir, "BUILD_DIR=%s" % build_dir,
           "-o", DEPS_STAMP, "-o", "%s/Makefile" % build_dir]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, "%s\n%s\n%s" % (" ".join(cmd), p.stdout[-5000:], p.stderr[-5000:])
    return p.stdout


class Background:
    """A server started from a command line, stopped with SIGTERM."""

    def __init__(self, argv, cwd, env, http_port):
        self.workdir = Path(cwd)
        self.log = open(self.workdir / ("server-%d.log" % http_port), "wb")
        self.log_path = Path(self.log.name)
        env = dict(env)
        self.argv = argv
        self.url = "http://127.0.0.1:%d" % http_port
        self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                self.log.close()
                pytest.fail("%s exited with %d:\n%s" % (" ".join(argv), self.proc.returncode,
                                                        self.output()))
            try:
                if requests.get(self.url + "/v2/health/ready", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                self.proc.kill()
                self.proc.wait()
                self.log.close()
                pytest.fail("%s not ready in 60 s:\n%s" % (" ".join(argv), self.output()))
            time.sleep(0.05)

    def output(self):
        return self.log_path.read_text(errors="replace")

    def stop(self):
        """Stops the server; asserts a clean exit."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        out = self.output()
        assert self.proc.returncode == 0, "%s: exit %d\n%s" % (" ".join(self.argv),
                                                                self.proc.returncode, out)
        for marker in SANITIZER_MARKERS:
            assert marker not in out, out


def marked_steps():
    """(kind, argument, body) of each marked block of the page, in order,
    and the unmarked blocks."""
    steps, unmarked = [], []
    for block in docblocks.blocks(DOC):
        m = MARK.fullmatch(block.marker or "")
        if m:
            steps.append((m.group(1), m.group(2) or "", block.body))
        else:
            unmarked.append(block)
    return steps, unmarked


def expect(expected, got, step):
    """got matches expected (docblocks.output_matches: "..." matches any
    text, blanks any blanks)."""
    if not docblocks.output_matches(expected, got):
        pytest.fail("step %d printed:\n%s\nexpected (docs/quickstart.md):\n%s"
                    % (step, got, expected))


def test_doc_blocks_are_marked():
    """Every block that talks to the server or is Python carries a mark, so
    that none is silently left out of the run below. (Unmarked: the build
    and install commands, the repository sketch, the log excerpt.)"""
    steps, unmarked = marked_steps()
    kinds = {k for k, _, _ in steps}
    assert kinds == {"run", "output", "file", "serve"}, kinds
    for b in unmarked:
        assert b.lang != "python" and "localhost" not in b.body and "inferd serve" not in b.body, \
            b.where()


def test_quickstart_runs_as_written(tmp_path):
    prefix = tmp_path / "prefix"
    make_install(prefix)
    work = tmp_path / "work"
    work.mkdir()
    http, grpc_port, metrics = free_port(), free_port(), free_port()
    env = {"PATH": "%s:/usr/bin:/bin" % (prefix / "bin"), "HOME": str(tmp_path),
           "LANG": "C.UTF-8"}
    for key in ("ASAN_OPTIONS", "LSAN_OPTIONS", "UBSAN_OPTIONS"):
        if key in os.environ:
            env[key] = os.environ[key]
    assert shutil.which("inferd", path=env["PATH"]) == str(prefix / "bin" / "inferd")

    def adapt(text):
        return (text.replace("localhost:8000", "localhost:%d" % http)
                    .replace("localhost:8001", "localhost:%d" % grpc_port)
                    .replace("/usr/local/", "%s/" % prefix))

    server = None
    stdout = None
    try:
        for i, (kind, arg, body) in enumerate(marked_steps()[0], 1):
            if kind == "file":
                (work / arg).write_text(adapt(body))
            elif kind == "run":
                p = subprocess.run(["bash", "-eo", "pipefail", "-c", adapt(body)], cwd=work,
                                   env=env, capture_output=True, text=True, timeout=120)
                assert p.returncode == 0, "step %d:\n%s\nstdout:\n%s\nstderr:\n%s" % (
                    i, body, p.stdout, p.stderr)
                stdout = p.stdout
            elif kind == "output":
                assert stdout is not None, "step %d: an output with no command before it" % i
                expect(body, stdout, i)
                stdout = None
            else:  # serve
                argv = shlex.split(body.strip())
                assert argv[:2] == ["inferd", "serve"], body
                if server:
                    server.stop()
                    server = None
                argv = [shutil.which("inferd", path=env["PATH"])] + argv[1:] + [
                    "--host", "127.0.0.1", "--http-port", str(http),
                    "--grpc-port", str(grpc_port), "--metrics-port", str(metrics)]
                server = Background(argv, work, env, http)
    finally:
        if server:
            server.stop()


def test_make_install_destdir_runs_without_the_source_tree(tmp_path):
    """make install PREFIX=/opt/inferd DESTDIR=<stage>: the files land under
    the stage; the staged binary's only library path is $ORIGIN/../lib/inferd
    (nothing in third_party/), ldd finds ONNX Runtime there, and the binary,
    run from the stage (moved from where PREFIX says), serves a model."""
    stage = tmp_path / "stage"
    make_install("/opt/inferd", stage)
    root = stage / "opt" / "inferd"
    binary = root / "bin" / "inferd"
    for f in (binary, root / "include" / "inferd" / "backend.h",
              root / "lib" / "inferd" / "libonnxruntime.so.1",
              root / "share" / "inferd" / "proto" / "grpc_service.proto",
              root / "share" / "inferd" / "proto" / "health.proto",
              root / "share" / "inferd" / "proto" / "inferd_routing.proto"):
        assert f.is_file(), f
    assert os.access(binary, os.X_OK)
    assert (root / "include" / "inferd" / "backend.h").read_bytes() == \
        (REPO_ROOT / "include" / "inferd" / "backend.h").read_bytes()

    dyn = subprocess.run(["readelf", "-d", str(binary)], capture_output=True, text=True,
                         check=True).stdout
    paths = re.findall(r"\((?:RPATH|RUNPATH)\)\s+Library (?:rpath|runpath): \[(.*)\]", dyn)
    assert paths == ["$ORIGIN/../lib/inferd"], dyn
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    ldd = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, env=env,
                         check=True).stdout
    ort = [l for l in ldd.splitlines() if "libonnxruntime" in l]
    assert len(ort) == 1 and "%s/bin/../lib/inferd/libonnxruntime.so.1" % root in ort[0], ldd
    assert "third_party" not in ldd, ldd

    for key in ("ASAN_OPTIONS", "LSAN_OPTIONS", "UBSAN_OPTIONS"):
        if key in os.environ:
            env[key] = os.environ[key]
    repo = make_repository(tmp_path / "models", {"simple": MAIN_MODELS["simple"]})
    http = free_port()
    srv = Background([str(binary), "serve", "--model-repository", str(repo),
                      "--host", "127.0.0.1", "--http-port", str(http),
                      "--grpc-port", str(free_port()), "--metrics-port", str(free_port())],
                     tmp_path, env, http)
    try:
        a = list(range(16))
        r = requests.post(srv.url + "/v2/models/simple/infer", json={"inputs": [
            {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": a},
            {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [1] * 16}]},
            timeout=30)
        assert r.status_code == 200, r.text
        assert r.json()["outputs"][0]["data"] == [x + 1 for x in a]
    finally:
        srv.stop()
