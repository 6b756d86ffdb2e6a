"""deploy/container/Containerfile, checked offline: no image can be built
here (no registry), and hadolint is not packaged in Debian 12. What can be
checked is: it parses into known instructions, starts from Debian 12,
installs with scripts/deps.sh, copies only paths that exist, runs as a
non-root user with a health check on the readiness endpoint, serves the
three ports, and its runtime stage installs the Debian package of every
shared library the built inferd links directly."""
import re
import subprocess

from conftest import INFERD_BIN, REPO_ROOT

CONTAINERFILE = REPO_ROOT / "deploy" / "container" / "Containerfile"
INSTRUCTIONS = {"FROM", "RUN", "COPY", "ENV", "WORKDIR", "USER", "EXPOSE", "HEALTHCHECK",
                "STOPSIGNAL", "ENTRYPOINT", "CMD", "ARG", "LABEL"}
# In every Debian base image (the toolchain's runtime and zlib).
BASE = {"libc6", "libgcc-s1", "zlib1g"}


def instructions():
    text = CONTAINERFILE.read_text().replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word, rest.strip()))
    return out


def stages():
    result = []
    for word, rest in instructions():
        if word == "FROM":
            result.append([])
        result[-1].append((word, rest))
    return result


def test_instructions_are_known_and_stages_are_debian_12():
    ins = instructions()
    assert {w for w, _ in ins} <= INSTRUCTIONS, ins
    froms = [r for w, r in ins if w == "FROM"]
    assert froms == ["docker.io/library/debian:12 AS build", "docker.io/library/debian:12"]


def test_build_stage_uses_deps_sh_and_copies_existing_paths():
    build, runtime = stages()
    runs = " ".join(r for w, r in build if w == "RUN")
    assert "scripts/deps.sh" in runs and "make install PREFIX=/opt/inferd" in runs
    assert (REPO_ROOT / "scripts" / "deps.sh").exists()
    for word, rest in build + runtime:
        if word == "COPY" and not rest.startswith("--from"):
            src = rest.split()[0]
            assert (REPO_ROOT / src).exists(), src
    copies = [r for w, r in runtime if w == "COPY"]
    assert "--from=build /src/models /models" in copies
    assert (REPO_ROOT / "models" / "digits").is_dir()


def test_runtime_stage_runs_unprivileged_with_a_health_check():
    _, runtime = stages()
    d = dict(runtime)
    assert d["USER"] == "10001:10001"
    assert "useradd --system --uid 10001" in " ".join(r for w, r in runtime if w == "RUN")
    assert d["EXPOSE"].split() == ["8000", "8001", "8002"]
    assert "curl -fsS http://127.0.0.1:8000/v2/health/ready" in d["HEALTHCHECK"]
    assert d["STOPSIGNAL"] == "SIGTERM"
    assert d["ENTRYPOINT"] == '["/opt/inferd/bin/inferd"]'
    assert '"--exit-timeout-secs=30"' in d["CMD"]


SANITIZER_RUNTIMES = ("libasan.", "libubsan.", "liblsan.", "libtsan.")


def test_runtime_stage_installs_every_linked_library():
    _, runtime = stages()
    install = " ".join(r for w, r in runtime if w == "RUN")
    m = re.search(r"apt-get install -y --no-install-recommends (.*?)&&", install)
    packages = set(m.group(1).split())
    dump = subprocess.run(["objdump", "-p", str(INFERD_BIN)], capture_output=True, text=True,
                          check=True).stdout
    needed = re.findall(r"NEEDED\s+(\S+)", dump)
    assert "libnghttp2.so.14" in needed
    missing = []
    for lib in needed:
        if lib.startswith("libonnxruntime"):
            continue  # installed by make install into /opt/inferd/lib/inferd
        if lib.startswith(SANITIZER_RUNTIMES):
            continue  # a sanitizer build's (make test runs one); the image's build has none
        owner = subprocess.run(["dpkg", "-S", "*/x86_64-linux-gnu/" + lib],
                               capture_output=True, text=True)
        assert owner.returncode == 0, lib
        pkg = owner.stdout.splitlines()[0].split(":")[0]
        if pkg not in packages and pkg not in BASE:
            missing.append((lib, pkg))
    assert missing == []
