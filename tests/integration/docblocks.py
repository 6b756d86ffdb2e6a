"""The fenced blocks of the Markdown pages, the markers before them, and the
comparison of what a command printed with what a page shows. Shared by
test_quickstart.py (docs/quickstart.md) and test_docs_runnable.py (README.md
and the other pages of docs/).

A marker is an HTML comment alone on the line before a fence (invisible
when the page renders), e.g. `<!-- run -->`; Block.marker is its text
between `<!--` and `-->`, stripped, or None.
"""
import re
from dataclasses import dataclass
from pathlib import Path

FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^`\s]*)")
MARKER = re.compile(r"^\s*<!--\s*(.*?)\s*-->\s*$")

# Fence languages whose blocks are shell command lines.
SHELL_LANGS = {"sh", "bash", "console", "shell", "shell-session", "zsh"}
# First words that make an unlabelled block (```) a shell block.
SHELL_COMMANDS = {
    "apt", "apt-get", "bash", "build/inferd", "cat", "cc", "cd", "chromium", "clang", "cmake",
    "cp", "ctest", "curl", "docker", "echo", "etcdctl", "export", "for", "gcc", "git", "grpcurl",
    "helm", "inferd", "install", "jq", "kill", "kubectl", "ln", "ls", "make", "mkdir", "mv",
    "node", "npm", "openssl", "pip", "pip3", "podman", "printf", "prometheus", "promtool",
    "protoc", "pytest", "python", "python3", "sh", "sudo", "systemctl", "touch", "until", "wget",
    "while", "xdg-open", "./build/inferd",
}
# `inferd` (or ./build/inferd) starts a command line when a subcommand
# follows it; "inferd: /etc/inferd.yaml: ..." and "inferd bench: POST ..."
# are messages, "inferd 0.1.0 starting" a log line.
INFERD_LINE = re.compile(r"^(?:\./)?(?:build/)?inferd(?:\s+[a-z][a-z-]*(?=\s|$)|\s*$)")
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=\S")


@dataclass
class Block:
    page: Path
    line: int              # of the opening fence, from 1
    lang: str              # the fence's info string, first word ("" for none)
    body: str              # the content, without the fence's indentation
    marker: str = None     # the comment on the line before, or None

    def where(self, root=None):
        page = self.page.relative_to(root) if root else self.page
        return "%s:%d" % (page, self.line)

    def is_shell(self):
        """A block of shell command lines: a shell language, or an unlabelled
        block whose first line (a `$ ` prompt aside) starts with a command
        (curl, inferd, make, kubectl, ...) or a variable assignment. Config
        files, code in other languages, output listings and log lines are
        not."""
        if self.lang.lower() in SHELL_LANGS:
            return True
        if self.lang:
            return False
        first = next((l.strip() for l in self.body.splitlines() if l.strip()), "")
        if first.startswith("$ "):
            return True
        word = first.split()[0] if first else ""
        if word in ("inferd", "./build/inferd", "build/inferd"):
            return bool(INFERD_LINE.match(first))
        return word in SHELL_COMMANDS or bool(ASSIGNMENT.match(first))


def blocks(page):
    """Every fenced block of the page, in order."""
    page = Path(page)
    lines = page.read_text().split("\n")
    out = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = len(m.group(1)), m.group(2), m.group(3)
        end = i + 1
        while end < len(lines) and not (lines[end].strip().startswith(fence[0] * len(fence))
                                        and not lines[end].strip().strip(fence[0])):
            end += 1
        body = "".join((l[indent:] if not l[:indent].strip() else l.lstrip()) + "\n"
                       for l in lines[i + 1:end])
        marker = MARKER.match(lines[i - 1]) if i > 0 else None
        out.append(Block(page, i + 1, lang, body, marker.group(1) if marker else None))
        i = end + 1
    return out


# A number standing as a value (after a space, ':', ',', '[', '(' or '=', or
# at the start): counts, timings, ratios. Not a digit inside a word
# (p99, sha256), a date or a quoted label value ("1").
NUMBER = re.compile(r"(?<![\w.\"'-])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])")


def output_pattern(expected, numbers_vary=False):
    """The regular expression for what a page shows as a command's output:
    "..." matches any text, a run of whitespace any whitespace (or none, so
    that a page may wrap a long line), and with numbers_vary every number
    standing as a value matches any number."""
    parts = []
    for i, chunk in enumerate(expected.strip().split("...")):
        if i:
            parts.append(".*?")
        for token in re.split(r"(\s+)", chunk):
            if not token:
                continue
            if token.isspace():
                parts.append(r"\s*")
            elif numbers_vary:
                pos = 0
                for m in NUMBER.finditer(token):
                    parts.append(re.escape(token[pos:m.start()]))
                    parts.append(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
                    pos = m.end()
                parts.append(re.escape(token[pos:]))
            else:
                parts.append(re.escape(token))
    return "".join(parts)


def output_matches(expected, got, numbers_vary=False):
    """got is what the page shows as expected (output_pattern); blanks at
    either end aside."""
    return re.fullmatch(output_pattern(expected, numbers_vary), got.strip(), re.S) is not None
