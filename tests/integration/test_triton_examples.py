"""Triton's own Python client examples, unmodified, against inferd
(scripts/triton_examples.py: 39 runs of 30 examples, the sequence,
shared-memory, string, compression, health-metadata and model-control
ones among them, over the bundled models and the stand-ins of
tests/models).

The examples and the tritonclient library are not shipped with inferd and
are not packaged for Debian: the test runs when TRITON_CLIENT_REPO and
TRITON_COMMON_REPO name checkouts of github.com/triton-inference-server/
client and /common (docs/development.md), and skips saying so otherwise
(CI has no access to GitHub)."""
import os
import subprocess

import pytest

from conftest import INFERD_BIN, REPO_ROOT

CLIENT = os.environ.get("TRITON_CLIENT_REPO")
COMMON = os.environ.get("TRITON_COMMON_REPO")


@pytest.mark.skipif(not (CLIENT and COMMON and os.path.isdir(CLIENT) and os.path.isdir(COMMON)),
                    reason="TRITON_CLIENT_REPO and TRITON_COMMON_REPO do not name checkouts of "
                           "Triton's client and common repositories (not shipped, not in Debian; "
                           "see docs/development.md)")
def test_tritons_client_examples_pass_unmodified():
    r = subprocess.run(["/usr/bin/python3", str(REPO_ROOT / "scripts" / "triton_examples.py"),
                        "--client", CLIENT, "--common", COMMON, "--inferd", str(INFERD_BIN)],
                       capture_output=True, text=True, timeout=1200)
    print(r.stdout)
    assert r.returncode == 0, r.stdout + r.stderr
