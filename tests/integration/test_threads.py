"""Thread counts and thread names (docs/configuration.md, "Threads").

The default number of I/O threads is the number of CPUs the process may use:
its affinity mask, or fewer when a cgroup CPU quota is lower. Each thread
inferd starts has a name, read here from /proc/<pid>/task/*/comm: io-0,
io-1, ... for the I/O threads, worker-0, worker-1, ... for the worker pool
that every model shares, repo, metrics, accesslog, otlp-export. The main
thread, which only waits for signals, keeps the process name "inferd".
ONNX Runtime's own threads are not checked here.
"""
import os
import re
from pathlib import Path

import pytest

from conftest import free_port

STARTUP = re.compile(r"starting: .*, (\d+) I/O threads? \((--io-threads; |at most (\d+) by default; )?"
                     r"(\d+) usable CPUs?: affinity (\d+), cgroup quota (none|\d+)\)")


def thread_names(pid):
    """{tid: name} of every thread of process pid."""
    names = {}
    for task in Path("/proc/%d/task" % pid).iterdir():
        try:
            names[int(task.name)] = (task / "comm").read_text().rstrip("\n")
        except FileNotFoundError:
            pass  # a thread that ended meanwhile
    return names


def io_names(names):
    return sorted((n for n in names.values() if n.startswith("io-")), key=lambda n: int(n[3:]))


def startup(srv):
    """(io_threads, why, usable, affinity, quota or None) from the startup line."""
    m = STARTUP.search(srv.stderr())
    assert m, "no startup line with the I/O thread count:\n" + srv.stderr()[-4000:]
    quota = None if m.group(6) == "none" else int(m.group(6))
    return int(m.group(1)), m.group(2) or "", int(m.group(4)), int(m.group(5)), quota


def _ceil_quota(quota, period):
    return -(-quota // period) if quota > 0 and period > 0 else None


def _read(path):
    try:
        return Path(path).read_text().split()
    except OSError:
        return None


def cgroup_quota_cpus():
    """The smallest cgroup CPU quota over this process's cgroup and its
    ancestors, in whole CPUs rounded up, or None: the rule of base/cpus.h,
    computed independently of it (the server inherits this cgroup)."""
    limits = []
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        hid, controllers, path = line.split(":", 2)
        if hid == "0" and controllers == "":
            mount, files = Path("/sys/fs/cgroup"), ("cpu.max",)
        elif "cpu" in controllers.split(","):
            mount = Path("/sys/fs/cgroup") / controllers
            if not mount.exists():
                mount = Path("/sys/fs/cgroup/cpu")
            files = ("cpu.cfs_quota_us", "cpu.cfs_period_us")
        else:
            continue
        parts = [p for p in path.split("/") if p]
        for depth in range(len(parts), -1, -1):
            d = mount.joinpath(*parts[:depth])
            if len(files) == 1:
                words = _read(d / files[0])
                if words and len(words) == 2 and words[0] != "max":
                    limits.append(_ceil_quota(int(words[0]), int(words[1])))
            else:
                q, p = _read(d / files[0]), _read(d / files[1])
                if q and p:
                    limits.append(_ceil_quota(int(q[0]), int(p[0])))
    limits = [l for l in limits if l]
    return min(limits) if limits else None


@pytest.mark.parametrize("ncpus", [1, 2])
def test_affinity_sets_the_io_thread_count(server_factory, ncpus):
    """Started as `taskset -c <ncpus CPUs>` without --io-threads: exactly
    ncpus I/O threads, io-0 .. io-<ncpus-1>, and the startup line says why."""
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < ncpus:
        pytest.skip("this process may use %d CPU(s)" % len(allowed))
    srv = server_factory.start(cpus=set(allowed[:ncpus]))
    assert os.sched_getaffinity(srv.proc.pid) == set(allowed[:ncpus])
    want = min(ncpus, cgroup_quota_cpus() or ncpus)
    assert io_names(thread_names(srv.proc.pid)) == ["io-%d" % i for i in range(want)]
    n, why, usable, affinity, quota = startup(srv)
    assert (n, why, usable, affinity, quota) == (want, "", want, ncpus, cgroup_quota_cpus())
    expected = "%d I/O thread%s (%d usable CPU%s: affinity %d, cgroup quota " % (
        want, "" if want == 1 else "s", want, "" if want == 1 else "s", ncpus)
    assert expected in srv.stderr()


def test_default_io_threads_follow_usable_cpus(server_factory):
    """Without taskset: the affinity mask this test runs with, bounded by
    the cgroup quota this test reads itself."""
    srv = server_factory.start()
    affinity = len(os.sched_getaffinity(0))
    quota = cgroup_quota_cpus()
    usable = min(affinity, quota) if quota else affinity
    n, why, logged_usable, logged_affinity, logged_quota = startup(srv)
    assert (logged_usable, logged_affinity, logged_quota) == (usable, affinity, quota)
    assert n == min(usable, 64)
    assert why == ("" if usable <= 64 else "at most 64 by default; ")
    assert io_names(thread_names(srv.proc.pid)) == ["io-%d" % i for i in range(n)]


def test_io_threads_flag_wins(server_factory):
    srv = server_factory.start("--io-threads", "3", cpus={min(os.sched_getaffinity(0))})
    assert io_names(thread_names(srv.proc.pid)) == ["io-0", "io-1", "io-2"]
    n, why, usable, affinity, _ = startup(srv)
    assert (n, why, usable, affinity) == (3, "--io-threads; ", 1, 1)


def test_threads_have_names(server_factory, tmp_path):
    """Each thread inferd starts for itself has its name; the main thread
    keeps the process name. (Model workers: named by src/sched/.)"""
    unused = free_port()  # nothing listens there: the exporter only retries
    srv = server_factory.start("--io-threads", "2", "--access-log", str(tmp_path / "access.log"),
                               "--otlp-endpoint", "http://127.0.0.1:%d/v1/traces" % unused)
    names = thread_names(srv.proc.pid)
    assert names[srv.proc.pid] == "inferd"  # the main thread
    counts = {}
    for name in names.values():
        counts[name] = counts.get(name, 0) + 1
    for name in ("io-0", "io-1", "repo", "metrics", "accesslog", "otlp-export"):
        assert counts.get(name) == 1, "%s: %r" % (name, sorted(names.values()))
    assert "io-2" not in counts


def test_no_metrics_no_metrics_thread(server_factory):
    srv = server_factory.start("--io-threads", "1", "--no-metrics")
    names = sorted(thread_names(srv.proc.pid).values())
    assert "metrics" not in names and "accesslog" not in names and "otlp-export" not in names
    assert names.count("io-0") == 1 and names.count("repo") == 1, names


def test_worker_pool_is_shared_by_every_model(server_factory, tmp_path):
    """Worker threads are one pool sized to the usable CPUs (or
    --worker-threads), not one per model instance: a repository of 60
    models with 2 instances each starts no more threads than one model."""
    src = Path(__file__).resolve().parents[1] / "models" / "identity_fp32"
    one = tmp_path / "one"
    many = tmp_path / "many"
    one.mkdir()
    many.mkdir()
    (one / "m0").symlink_to(src)
    for i in range(60):
        d = many / ("m%d" % i)
        (d / "1").mkdir(parents=True)
        (d / "1" / "model.onnx").symlink_to(src / "1" / "model.onnx")
        (d / "config.pbtxt").write_text('instance_group [{ count: 2 kind: KIND_CPU }]\n')
    counts = {}
    for name, repo in (("one", one), ("many", many)):
        srv = server_factory.start("--model-repository", str(repo), "--io-threads", "2",
                                   "--worker-threads", "3")
        names = thread_names(srv.proc.pid).values()
        workers = sorted(n for n in names if n.startswith("worker-"))
        assert workers == ["worker-0", "worker-1", "worker-2"], sorted(names)
        counts[name] = len(names)
        srv.stop()
    assert counts["many"] == counts["one"], counts
