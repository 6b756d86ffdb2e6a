"""bench/report.py markdown: RESULTS.md gives, after the targets table, the
measured reason of every target the run missed, from bench/missed.md."""
import glob
import json
import os
import shutil
import subprocess
import sys

from conftest import REPO_ROOT

BENCH = REPO_ROOT / "bench"
sys.path.insert(0, str(BENCH))
import report_data  # noqa: E402
import report_tables  # noqa: E402


def newest_results():
    """The committed results file of the latest run (by its own date: a
    clone's file times say nothing)."""
    files = glob.glob(str(BENCH / "results" / "*.json"))
    return max(files, key=lambda f: json.loads(open(f).read())["date"])


def test_every_section_of_missed_md_names_a_target():
    reasons = report_tables.missed_reasons(str(BENCH / "missed.md"))
    assert reasons and set(reasons) <= set(report_data.TARGETS)
    assert all(len(text) > 40 for text in reasons.values())


def test_results_md_gives_each_missed_target_its_reason(tmp_path):
    src = newest_results()
    shutil.copy(src, tmp_path / os.path.basename(src))
    doc = report_data.rejudge_overload(json.loads(open(src).read()))
    # One target more is missed than in the real run, one without a section
    # in missed.md: it is listed, saying that.
    reasons = report_tables.missed_reasons(str(BENCH / "missed.md"))
    extra = next(t for t in doc["targets"] if t["met"] and t["name"] not in reasons)
    extra["met"] = False
    (tmp_path / os.path.basename(src)).write_text(json.dumps(doc))
    out = tmp_path / "RESULTS.md"
    subprocess.run([sys.executable, str(BENCH / "report.py"), "markdown", str(tmp_path), str(out)],
                   check=True, timeout=60)
    md = out.read_text()
    section = md.split("### Why the missed targets are missed", 1)[1].split("\n### ", 1)[0]
    missed = [t for t in doc["targets"] if t["met"] is False]
    assert len(missed) >= 2
    for t in missed:
        line = next(l for l in section.split("\n") if l.startswith("- **%s**" % t["what"]))
        assert reasons.get(t["name"], "no measured reason in bench/missed.md yet")[:60] in line
    assert sum("no measured reason" in l for l in section.split("\n")) == 1
