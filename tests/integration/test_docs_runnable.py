"""Every shell command of README.md and docs/*.md runs as written.

docs/quickstart.md keeps its own test (test_quickstart.py). In the other
pages, every fenced block of shell command lines (```sh, ```bash,
```console, ```shell, or an unlabelled ``` block whose first line starts
with a command: curl, inferd, make, kubectl, python3, ...; see
docblocks.Block.is_shell) carries one of two markers, an HTML comment alone
on the line before the fence:

  <!-- run -->           the block is run with bash (-e, pipefail) and must
                         exit 0; ```python blocks may be marked too (run
                         with python3)
  <!-- run: OPTION, ... -->
                         the same, with options:
                         `numbers vary`: every number standing as a value
                         in the output it shows (counts, timings) matches
                         any number;
                         `new server`: this block and the next ones run
                         against a new server, in a new directory (a
                         section that starts from scratch, as a walkthrough
                         whose counts start at 0)
  <!-- skip: REASON -->  the test machine cannot run it (a cluster, root,
                         a load test, a placeholder for the reader's own
                         files...); reported as a skipped test with REASON

and a block that prints something may be followed (prose between allowed)
by one marked

  <!-- output -->        what the run block before it printed (stdout and
                         stderr, as a terminal shows them)

A block written as a terminal session (lines `$ command`, each followed by
what it prints) is run command by command, and each command's output must
be the lines the page shows after it. In what a page shows, "..." matches
any text and a run of blanks any blanks or none (a page may wrap a long
line).

How the blocks run: one test per block, named by page and line. A page's
blocks run in page order, against a server of its own (so that a block
that loads, unloads or routes does not disturb another page), in a
directory that mirrors the repository root (symlinks), where `models/` is
that server's model repository: a copy of the bundled models made of
symlinks (so that files the server writes, such as routing.json, stay in
the test's directory) plus what the page assumes (SETUPS). In the blocks:

- localhost:8000, 127.0.0.1:8000 (8001 gRPC, 8002 metrics) become the
  server's ports, ./build/inferd the binary under test (INFERD_BIN), /tmp/
  a directory of the test's own;
- `inferd` on the PATH is the binary under test, and INFERD_URL and
  INFERD_GRPC_PORT name the server, as the client's defaults
  (127.0.0.1:8000, gRPC 8001) would;
- curl answers an HTTP error with exit status 22 (it runs with
  --fail-with-body): a request that a page shows must succeed;
- $KEY, $ADMIN_KEY and $EXISTING_KEY hold an API key (`inferd keys new`)
  that the servers with API keys (SETUPS) accept; the others ignore it.

Under pytest-xdist a page runs once: the first worker that needs it runs
all of its blocks (holding a lock) and leaves the results for the others.

Each block may take at most BLOCK_TIMEOUT seconds. A self-test breaks
commands of a copy of a real page and checks that their blocks fail.
"""
import fcntl
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import docblocks
from conftest import INFERD_BIN, REPO_ROOT, ServerFactory

PAGES = [REPO_ROOT / "README.md"] + sorted(
    p for p in (REPO_ROOT / "docs").glob("*.md") if p.name != "quickstart.md")
BLOCK_TIMEOUT = 60  # seconds
DIGITS_V2 = REPO_ROOT / "tests" / "models" / "digits_v2" / "2" / "model.onnx"


@dataclass
class Setup:
    """What a page's server serves besides the bundled models."""
    keep: tuple = None        # only these bundled models (None: all of them)
    digits_v2: bool = False   # digits also at version 2 (tests/models/digits_v2), both served
    repeat: bool = False      # the example plugin's decoupled model `repeat`
    auth: bool = False        # API keys: $KEY is a key of tenant `docs` (infer, read, admin)
    flags: tuple = ()


SETUPS = {
    # generate_stream of `repeat`; the routing example PUTs a canary to version 2
    "docs/api.md": Setup(digits_v2=True, repeat=True),
    # the transcript lists a repository of digits and simple and loads one
    "docs/cli.md": Setup(keep=("digits", "simple"),
                         flags=("--model-control-mode", "explicit", "--load-model", "*")),
    # the routing example needs digits versions 1 and 2
    "docs/grpc.md": Setup(digits_v2=True),
    "docs/security.md": Setup(auth=True),
    # the canary walkthrough: digits 1 serving, 2 (a retrained model) new
    "docs/traffic.md": Setup(digits_v2=True),
}


def relative(page):
    try:
        return str(Path(page).relative_to(REPO_ROOT))
    except ValueError:
        return Path(page).name


# --------------------------------------------------------------------------
# Reading the pages


@dataclass
class Step:
    block: docblocks.Block
    kind: str                           # "run" or "skip"
    reason: str = ""                    # of a skip
    numbers_vary: bool = False
    new_server: bool = False
    expected: str = None                # the output block's text
    session: list = field(default_factory=list)  # [(command, shown output)] of a transcript

    @property
    def name(self):
        return "%s:%d" % (relative(self.block.page), self.block.line)


def session_steps(body):
    """A block written as a terminal session: [(command, shown output)], or
    [] when the block is plain commands. A command goes on over the next
    lines while it ends in a backslash or a quotation is open."""
    lines = body.rstrip("\n").split("\n")
    if not lines[0].startswith("$ "):
        return []
    out, i = [], 0
    while i < len(lines):
        command = lines[i][2:]
        while i + 1 < len(lines) and not complete(command):
            i += 1
            command += "\n" + lines[i]
        i += 1
        shown = []
        while i < len(lines) and not lines[i].startswith("$ "):
            shown.append(lines[i])
            i += 1
        out.append((command, "\n".join(shown)))
    return out


def complete(command):
    if command.rstrip().endswith(("\\", "|", "&&")):
        return False
    try:
        shlex.split(command, comments=True)
    except ValueError:  # a quotation still open
        return False
    return True


RUN = re.compile(r"^run(?::(.*))?$")
RUN_OPTIONS = {"numbers vary", "new server"}


def read_page(page):
    """(steps, problems): the run and skip steps of the page, and what is
    wrong with its markers (a shell block without one, an unknown one, an
    output block with no run block before it)."""
    steps, problems = [], []
    last_run = None
    for b in docblocks.blocks(page):
        where = "%s:%d" % (relative(page), b.line)
        marker = b.marker or ""
        shell = b.is_shell()
        run = RUN.match(marker)
        if run:
            options = {o.strip() for o in (run.group(1) or "").split(",") if o.strip()}
            if not shell and b.lang != "python" or options - RUN_OPTIONS:
                problems.append("%s: <!-- %s -->: only shell and python blocks run, with "
                                "options %s" % (where, marker, " or ".join(sorted(RUN_OPTIONS))))
                continue
            last_run = Step(b, "run", numbers_vary="numbers vary" in options,
                            new_server="new server" in options,
                            session=session_steps(b.body) if shell else [])
            steps.append(last_run)
        elif marker == "output":
            if last_run is None or last_run.expected is not None or last_run.session:
                problems.append("%s: <!-- output --> without a run block (not a terminal "
                                "session, not already followed by an output) before it" % where)
            else:
                last_run.expected = b.body
            last_run = None
        elif marker.startswith("skip:") and marker[5:].strip():
            steps.append(Step(b, "skip", reason=marker[5:].strip()))
            last_run = None
        elif shell:
            problems.append("%s: a shell block (```%s, first line %r) has neither "
                            "<!-- run --> nor <!-- skip: REASON --> on the line before it%s"
                            % (where, b.lang, b.body.split("\n")[0],
                               " (unknown marker <!-- %s -->)" % marker if marker else ""))
    return steps, problems


STEPS = [s for page in PAGES for s in read_page(page)[0]]


# --------------------------------------------------------------------------
# Where the blocks run


def link_tree(src, dst):
    """dst: the directories of src made anew, its files symlinked."""
    dst.mkdir(parents=True, exist_ok=True)
    for entry in sorted(src.iterdir()):
        if entry.is_dir() and not entry.is_symlink():
            link_tree(entry, dst / entry.name)
        else:
            (dst / entry.name).symlink_to(entry.resolve())


def make_models(dst, setup):
    """The page's model repository: the bundled models (linked, see
    link_tree) and what its Setup adds."""
    link_tree(REPO_ROOT / "models", dst)
    if setup.keep is not None:
        for d in dst.iterdir():
            if (d / "1").is_dir() and d.name not in setup.keep:
                shutil.rmtree(d)
    if setup.digits_v2:
        (dst / "digits" / "2").mkdir()
        (dst / "digits" / "2" / "model.onnx").symlink_to(DIGITS_V2)
        config = dst / "digits" / "config.pbtxt"
        text = config.read_text()
        config.unlink()
        config.write_text(text + "version_policy: { all: {} }\n")
    if setup.repeat:
        from test_decoupled import repeat_repo
        shutil.move(str(repeat_repo(dst.parent / "repeat") / "repeat"), str(dst / "repeat"))
    return dst


class Workplace:
    """A page's server, the directory its blocks run in and their
    environment."""

    def __init__(self, tmp_path_factory, setup):
        self.tmp = Path(tmp_path_factory.mktemp("docs"))
        self.work = self.tmp / "work"
        self.work.mkdir()
        for entry in REPO_ROOT.iterdir():
            if entry.name not in (".git", "build", "models"):
                (self.work / entry.name).symlink_to(entry)
        (self.work / "build").symlink_to(INFERD_BIN.parent)
        repo = make_models(self.work / "models", setup)
        bindir = self.tmp / "bin"
        bindir.mkdir()
        (bindir / "inferd").symlink_to(INFERD_BIN)
        (bindir / "curl").write_text('#!/bin/sh\nexec /usr/bin/curl --fail-with-body "$@"\n')
        (bindir / "curl").chmod(0o755)
        self.tmpdir = self.tmp / "tmp"
        self.tmpdir.mkdir()
        (self.tmp / "home").mkdir()
        key, key_hash = subprocess.run([str(INFERD_BIN), "keys", "new"], capture_output=True,
                                       text=True, check=True).stdout.split()
        flags = ["--model-repository", str(repo)] + list(setup.flags)
        if setup.auth:
            config = self.tmp / "auth.yaml"
            config.write_text("auth:\n  tenants:\n    - name: docs\n      keys: [\"%s\"]\n"
                              "      scopes: [infer, read, admin]\n" % key_hash)
            flags += ["--config", str(config)]
        self.factory = ServerFactory(tmp_path_factory)
        self.server = self.factory.start(*flags)
        self.env = {"PATH": "%s:/usr/bin:/bin" % bindir, "HOME": str(self.tmp / "home"),
                    "LANG": "C.UTF-8", "TMPDIR": str(self.tmpdir),
                    "INFERD_URL": self.server.url,
                    "INFERD_GRPC_PORT": str(self.server.grpc_port), "KEY": key, "ADMIN_KEY": key,
                    "EXISTING_KEY": key, "PYTHONDONTWRITEBYTECODE": "1"}
        for name in ("ASAN_OPTIONS", "LSAN_OPTIONS", "UBSAN_OPTIONS"):
            if name in os.environ:
                self.env[name] = os.environ[name]

    def adapt(self, text):
        """The block as it runs here (see the module's docstring)."""
        ports = {"8000": self.server.port, "8001": self.server.grpc_port,
                 "8002": self.server.metrics_port}
        text = re.sub(r"\b(localhost|127\.0\.0\.1):(800[012])\b",
                      lambda m: "%s:%d" % (m.group(1), ports[m.group(2)]), text)
        # /tmp/ first: the binary itself may live under /tmp (a CI clone).
        text = text.replace("/tmp/", "%s/" % self.tmpdir)
        return re.sub(r"(?<![\w./])\./build/inferd\b", lambda m: str(INFERD_BIN), text)

    def bash(self, script):
        """(exit status or None after the timeout, what it printed)."""
        p = subprocess.Popen(["bash", "-c", script], cwd=self.work, env=self.env,
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, start_new_session=True)
        try:
            out, _ = p.communicate(timeout=BLOCK_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, _ = p.communicate()
            return None, out.decode(errors="replace")
        return p.returncode, out.decode(errors="replace")

    def stop(self):
        return self.factory.stop_all()


def exit_problem(status, body, printed):
    why = ("did not end within %d s" % BLOCK_TIMEOUT if status is None
           else "exited with status %d" % status)
    hint = ("\n(22 is curl's exit status for an HTTP error answer)" if status == 22 else "")
    return "%s:\n%s\nprinted:\n%s%s" % (why, body, printed, hint)


def run_step(place, step):
    """None when the step ran as the page says, else what went wrong."""
    b = step.block
    if b.lang == "python":
        script = place.tmp / ("block-%d.py" % b.line)
        script.write_text(place.adapt(b.body))
        # from stdin, so that the modules of the work directory import
        status, printed = place.bash("python3 - < %s" % shlex.quote(str(script)))
        return None if status == 0 else exit_problem(status, place.adapt(b.body), printed)
    if not step.session:
        body = place.adapt(b.body)
        status, printed = place.bash("set -eo pipefail\n" + body)
        if status != 0:
            return exit_problem(status, body, printed)
        if step.expected is not None and not docblocks.output_matches(
                step.expected, printed, step.numbers_vary):
            return "printed:\n%s\nwhile the page shows:\n%s" % (printed, step.expected)
        return None
    # A terminal session: one bash, a separator line with the exit status
    # after each command.
    sep = "@@docs-%s@@" % uuid.uuid4().hex
    script = "set -o pipefail\n" + "".join(
        "%s\n__status=$?; printf '\\n%s %%d\\n' $__status; [ $__status = 0 ] || exit $__status\n"
        % (place.adapt(command), sep) for command, _ in step.session)
    status, printed = place.bash(script)
    parts = re.split(r"\n%s (\d+)\n" % sep, printed)
    for i, (command, shown) in enumerate(step.session):
        if 2 * i + 1 >= len(parts):
            return exit_problem(status, "$ " + place.adapt(command), parts[-1])
        got, code = parts[2 * i], int(parts[2 * i + 1])
        if code != 0:
            return exit_problem(code, "$ " + place.adapt(command), got)
        if not docblocks.output_matches(shown, got, step.numbers_vary):
            return "$ %s\nprinted:\n%s\nwhile the page shows:\n%s" % (
                place.adapt(command), got, shown)
    return None


def run_page(steps, tmp_path_factory, setup):
    """Runs the page's run steps in order: {line: None or the problem}."""
    runs = [s for s in steps if s.kind == "run"]
    if not runs:
        return {}
    results = {}
    place = None
    try:
        for step in runs:
            if place is None or step.new_server:
                stop_server(place, results, step)
                place = Workplace(tmp_path_factory, setup)
            results[step.block.line] = run_step(place, step)
    finally:
        stop_server(place, results, None)
    return results


def stop_server(place, results, next_step):
    """Stops the server of the blocks run so far; if it does not stop
    cleanly, the last of them fails saying so."""
    if place is None:
        return
    problems = place.stop()
    if problems and results:
        last = list(results)[-1]
        results[last] = ((results[last] or "") + "\n" + "\n".join(problems)).strip()


# --------------------------------------------------------------------------
# The tests


@pytest.fixture(scope="session")
def page_results(tmp_path_factory):
    """page -> {line: problem}; each page runs once in the session, by the
    first xdist worker that needs it (the others read its results)."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    cache = {}

    def results(page):
        name = relative(page)
        if name not in cache:
            slug = name.replace("/", "_")
            with open(shared / ("docs-runnable-%s.lock" % slug), "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                done = shared / ("docs-runnable-%s.json" % slug)
                if done.exists():
                    cache[name] = {int(k): v for k, v in json.loads(done.read_text()).items()}
                else:
                    steps = read_page(page)[0]
                    cache[name] = run_page(steps, tmp_path_factory,
                                           SETUPS.get(name, Setup()))
                    done.write_text(json.dumps(cache[name]))
        return cache[name]
    return results


@pytest.mark.parametrize("page", PAGES, ids=relative)
def test_shell_blocks_are_marked(page):
    """Every shell block of the page says whether it runs: a new one
    without a marker fails here, naming file and line."""
    problems = read_page(page)[1]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("step", STEPS, ids=lambda s: s.name)
def test_block(step, page_results):
    if step.kind == "skip":
        pytest.skip("%s: %s" % (step.name, step.reason))
    problem = page_results(step.block.page)[step.block.line]
    if problem:
        pytest.fail("%s: %s" % (step.name, problem), pytrace=False)


def test_unmarked_shell_blocks_are_found(tmp_path):
    """The marker check itself: unmarked shell blocks (a ```sh block, a
    terminal session in an unlabelled one), a skip without a reason, run on
    a config file and an output block with no run block before it are
    found; a JSON block and an error message in an unlabelled one are not
    shell."""
    page = tmp_path / "page.md"
    page.write_text("\n".join([
        "# A page", "", "```sh", "curl -s localhost:8000/v2", "```", "",         # 3
        "```", "$ inferd models list", "NAME  VERSION", "```", "",             # 7
        "```json", '{"a": 1}', "```", "",                                      # 12
        "```", "inferd: config.yaml: unknown key 'htp-port'", "```", "",       # 16
        "<!-- skip: -->", "```bash", "make test", "```", "",                   # 21
        "<!-- run -->", "```yaml", "a: 1", "```", "",                          # 26
        "<!-- output -->", "```", "x", "```", ""]))                            # 31
    problems = read_page(page)[1]
    assert [p.split(":")[1] for p in problems] == ["3", "7", "21", "26", "31"], problems
    assert "neither <!-- run --> nor <!-- skip: REASON -->" in problems[0]


# A real page, a change that breaks one command of it, and what its block
# says when it fails.
BREAKS = [
    ("README.md", "localhost:8000/v2/models/simple/infer", "localhost:8000/v2/models/simpel/infer",
     "exited with status 22:"),
    ("README.md", "--input 'INPUT1=", "--inptu 'INPUT1=", "exited with status 2:"),
    ("docs/logging-tracing.md", '"log_verbose_level":0,"log_format"',
     '"log_verbose_level":3,"log_format"', "while the page shows"),
]
# What the failure says besides, for each: the server's answer, the
# client's complaint, the page's output.
BROKEN_SAYS = ["'simpel' is not found", "--inptu", '"log_verbose_level":3']


@pytest.mark.parametrize("page,good,bad,failure", BREAKS,
                         ids=["README-model-name", "README-flag", "logging-output"])
def test_a_broken_command_fails(page, good, bad, failure, tmp_path_factory):
    """The checker can fail: a copy of a page with one command (or the
    output it shows) broken runs through the same code, and that block, only
    that one, fails."""
    copy = tmp_path_factory.mktemp("broken") / Path(page).name
    text = (REPO_ROOT / page).read_text()
    assert text.count(good) == 1, "%s: %r should occur once" % (page, good)
    copy.write_text(text.replace(good, bad))
    broken_line = text[:text.index(good)].count("\n") + 1
    steps = read_page(copy)[0]
    results = run_page(steps, tmp_path_factory, SETUPS.get(page, Setup()))
    runs = [s.block for s in steps if s.kind == "run"]
    broken = [b.line for b in runs if b.line < broken_line][-1]
    assert results[broken] and failure in results[broken], results[broken]
    assert BROKEN_SAYS[BREAKS.index((page, good, bad, failure))] in results[broken]
    assert [l for l, p in results.items() if p] == [broken], results
