"""docs/architecture.md stays true to the code: every path and function it
names exists, and its layer lists are the ones scripts/check_layers.py
enforces. The page's convention: `src/<path>:<function>()`, and a function
named without a path is in the file named just before it."""

import importlib.util
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = os.path.join(ROOT, "docs", "architecture.md")

# A backticked reference: a path (with an optional :function()), or a
# function alone.
REF = re.compile(r"`((?:src|scripts|include|tests|docs)/[\w./-]+)(?::(\w+)\(\))?`|`(\w+)\(\)`")


def load_check_layers():
    spec = importlib.util.spec_from_file_location(
        "check_layers", os.path.join(ROOT, "scripts", "check_layers.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def doc_text():
    with open(DOC, encoding="utf-8") as f:
        return f.read()


def references(text):
    """[(line, path, function or None)] in reading order; a bare function
    takes the path named last before it."""
    out, last = [], None
    for lineno, line in enumerate(text.splitlines(), 1):
        for m in REF.finditer(line):
            path, fn, bare = m.group(1), m.group(2), m.group(3)
            if path:
                last = path
                out.append((lineno, path, fn))
            else:
                out.append((lineno, last, bare))
    return out


def defines(path, name):
    """Whether a file defines or declares `name` at top level."""
    pattern = re.compile(r"^[A-Za-z_].*\b%s\s*\(" % re.escape(name), re.M)
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return bool(pattern.search(f.read()))


def fenced_after(text, marker):
    """The first fenced block after the line holding marker."""
    i = text.index(marker)
    m = re.search(r"```\n(.*?)\n```", text[i:], re.S)
    return m.group(1).strip()


def test_every_named_path_exists():
    missing = [(line, path) for line, path, _ in references(doc_text())
               if path and not os.path.exists(os.path.join(ROOT, path))]
    assert missing == []


def test_every_named_function_is_in_its_file():
    refs = [(line, path, fn) for line, path, fn in references(doc_text()) if fn]
    assert len(refs) > 80  # the four request paths name most of them
    unplaced = [(line, fn) for line, path, fn in refs if path is None]
    assert unplaced == []
    wrong = [(line, path, fn) for line, path, fn in refs
             if path.endswith((".c", ".h")) and not defines(path, fn)]
    assert wrong == []


def test_layer_order_is_the_scripts():
    order = [x.strip() for x in fenced_after(doc_text(), "<!-- layers:").split("<")]
    assert order == load_check_layers().LAYERS


def test_api_sublayers_are_the_scripts():
    levels = [{g.strip() for g in level.split(",")}
              for level in fenced_after(doc_text(), "<!-- sublayers api:").split("<")]
    assert levels == load_check_layers().SUBLAYERS["api"]


def test_every_layer_and_front_end_has_a_row():
    text = doc_text()
    for layer in load_check_layers().LAYERS:
        assert re.search(r"^\| `%s` \|" % layer, text, re.M), layer
    for folder in sorted(os.listdir(os.path.join(ROOT, "src", "api"))):
        if os.path.isdir(os.path.join(ROOT, "src", "api", folder)):
            assert "`src/api/%s/`" % folder in text, folder


@pytest.mark.parametrize("broken, expect", [
    ("`src/http/tcp_server.c:accept_all()`", "`src/http/tcp_server.c:accept_everything()`"),
    ("`src/api/http_path.c`", "`src/api/http_paths.c`"),
])
def test_a_wrong_name_is_caught(broken, expect):
    """The checks above fail on a misspelt function or file."""
    text = doc_text()
    assert broken in text
    refs = references(text.replace(broken, expect, 1))
    bad_paths = [p for _, p, _ in refs if p and not os.path.exists(os.path.join(ROOT, p))]
    bad_fns = [fn for _, p, fn in refs
               if fn and p and p.endswith((".c", ".h")) and os.path.exists(os.path.join(ROOT, p))
               and not defines(p, fn)]
    assert bad_paths or bad_fns
