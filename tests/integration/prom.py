"""A strict reader of the Prometheus text format 0.0.4, for the metrics tests.

parse(text) checks the structure the format requires (HELP and TYPE before a
family's samples, a family's samples contiguous, well-formed label sets,
numeric values, the trailing newline) and returns a Scrape."""
import re
import time

import requests

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)')
SUFFIXES = ("_bucket", "_sum", "_count")


def _labels(text):
    out, pos = {}, 0
    while pos < len(text):
        m = LABEL.match(text, pos)
        assert m, "bad label set: {%s}" % text
        value = m.group(2).replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
        assert m.group(1) not in out, "duplicate label in {%s}" % text
        out[m.group(1)] = value
        pos = m.end()
    return out


class Scrape:
    def __init__(self, types, helps, samples):
        self.types = types        # family -> type
        self.helps = helps        # family -> help text
        self.samples = samples    # list of (name, labels dict, float)

    def get(self, name, **labels):
        """The value of the one sample `name` whose labels include `labels`
        (0 when there is none; several matches are summed)."""
        total, found = 0.0, False
        for n, l, v in self.samples:
            if n == name and all(l.get(k) == str(val) for k, val in labels.items()):
                total += v
                found = True
        return total if found else 0.0

    def has(self, name, **labels):
        return any(n == name and all(l.get(k) == str(v) for k, v in labels.items())
                   for n, l, _ in self.samples)

    def series(self, name):
        return [(l, v) for n, l, v in self.samples if n == name]

    def buckets(self, name, **labels):
        """[(le, cumulative count)] of a histogram, in exposition order."""
        return [(l["le"], v) for n, l, v in self.samples
                if n == name + "_bucket" and all(l.get(k) == str(x) for k, x in labels.items())]


def parse(text):
    assert text.endswith("\n"), "the exposition must end with a newline"
    types, helps, samples, seen_done = {}, {}, [], set()
    current = None
    for line in text.split("\n")[:-1]:
        assert line, "empty line in the exposition"
        if line.startswith("# HELP "):
            name, _, help_text = line[7:].partition(" ")
            assert name not in helps, "second HELP for %s" % name
            helps[name] = help_text
            continue
        if line.startswith("# TYPE "):
            name, _, typ = line[7:].partition(" ")
            assert typ in ("counter", "gauge", "histogram", "summary", "untyped"), line
            assert name in helps, "TYPE before HELP for %s" % name
            assert name not in types, "second TYPE for %s" % name
            if current:
                seen_done.add(current)
            types[name] = typ
            current = name
            continue
        assert not line.startswith("#"), line
        m = SAMPLE.match(line)
        assert m, "malformed sample line: %r" % line
        name = m.group(1)
        family = name
        if name not in types:
            for suffix in SUFFIXES:
                if name.endswith(suffix) and name[:-len(suffix)] in types:
                    family = name[:-len(suffix)]
        assert family in types, "sample %s without TYPE" % name
        assert family == current, "samples of %s are not contiguous" % family
        assert family not in seen_done
        value = m.group(4)
        v = float("inf") if value == "+Inf" else float(value)
        samples.append((name, _labels(m.group(3) or ""), v))
    return Scrape(types, helps, samples)


def scrape(server):
    r = requests.get(server.metrics_url, timeout=10)
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    return parse(r.text)


def wait_for(server, predicate, timeout=20.0):
    """Scrape until predicate(scrape) is true; returns the last scrape."""
    deadline = time.monotonic() + timeout
    while True:
        s = scrape(server)
        if predicate(s) or time.monotonic() > deadline:
            return s
        time.sleep(0.05)
