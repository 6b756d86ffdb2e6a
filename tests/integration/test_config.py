"""The configuration file: `inferd serve --config FILE` (every flag is a key,
flags override the file), `--check-config FILE`, and SIGHUP reloads (a
reloadable setting applies, a bad file keeps the old configuration, a
changed port needs a restart)."""
import os
import shutil
import signal
import socket
import subprocess
import time

import pytest
import requests

from conftest import (INFERD_BIN, SANITIZER_MARKERS, MAIN_MODELS, Server, free_port,
                      make_repository)
from test_tls import pki  # noqa: F401  (the certificates fixture)


def run(*args, timeout=15, **kw):
    env = dict(os.environ)
    p = subprocess.run([str(INFERD_BIN)] + list(args), capture_output=True, text=True,
                       timeout=timeout, stdin=subprocess.DEVNULL, env=env, **kw)
    for marker in SANITIZER_MARKERS:
        assert marker not in p.stderr, "sanitizer report from %s:\n%s" % (args, p.stderr)
    return p


class FileServer(Server):
    """A server whose listening settings come from its configuration file
    only (conftest's Server puts them on the command line)."""

    def __init__(self, config, workdir, extra=()):
        super().__init__(["--config", str(config)] + list(extra), workdir)

    def start(self, port=None, grpc_port=None, metrics_port=None):
        self.port, self.grpc_port, self.metrics_port = port, grpc_port, metrics_port
        env = dict(os.environ)
        self._out = open(self.stdout_path, "wb")
        self._err = open(self.stderr_path, "wb")
        self.cmd = [str(INFERD_BIN), "serve"] + self.args
        self.proc = subprocess.Popen(self.cmd, stdout=self._out, stderr=self._err,
                                     stdin=subprocess.DEVNULL, env=env)
        return self


@pytest.fixture
def repo(tmp_path):
    return make_repository(tmp_path / "models", {"simple": MAIN_MODELS["simple"]})


@pytest.fixture
def file_servers():
    servers = []
    yield servers
    problems = []
    for srv in servers:
        if srv.returncode is None:
            problems += srv.stop()
    assert not problems, "\n".join(problems)


def listening(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return True
    except OSError:
        return False


def wait_for_log(srv, text, count=1, timeout=10):
    deadline = time.time() + timeout
    while srv.stderr().count(text) < count and time.time() < deadline:
        time.sleep(0.05)
    assert srv.stderr().count(text) >= count, "no %r in the log:\n%s" % (text, srv.stderr())


def start_from_file(tmp_path, file_servers, text, extra=()):
    """Writes text (a format string given port, grpc, metrics and repo) and
    starts a server from it; returns (server, config path)."""
    ports = dict(port=free_port(), grpc=free_port(), metrics=free_port())
    config = tmp_path / "inferd.yaml"
    config.write_text(text.format(**ports, repo=tmp_path / "models"))
    srv = FileServer(config, tmp_path, extra)
    file_servers.append(srv)
    srv.start(ports["port"], ports["grpc"], ports["metrics"])
    srv.wait_ready()
    return srv, config


BASE = """\
# inferd settings
model-repository: {repo}
host: 127.0.0.1
http-port: {port}
grpc-port: {grpc}
metrics-port: {metrics}
"""


def test_file_settings_take_effect(tmp_path, repo, file_servers):
    srv, _ = start_from_file(tmp_path, file_servers, BASE + "max-headers: 6\n")
    assert requests.get(srv.url + "/v2/models/simple/ready", timeout=5).status_code == 200
    assert listening(srv.grpc_port)
    assert requests.get(srv.metrics_url, timeout=5).status_code == 200
    # max-headers: 6 from the file: a request with more header fields gets 431.
    headers = {"x-h%d" % i: "v" for i in range(8)}
    assert requests.get(srv.url + "/v2/health/live", headers=headers, timeout=5).status_code == 431


def test_sequence_and_switch_keys(tmp_path, repo, file_servers):
    srv, _ = start_from_file(tmp_path, file_servers,
                             BASE + "model-control-mode: explicit\nload-model: [simple]\n"
                                    "no-metrics: true\n")
    assert requests.get(srv.url + "/v2/models/simple/ready", timeout=5).status_code == 200
    assert not listening(srv.metrics_port)


def test_command_line_overrides_file(tmp_path, repo, server_factory):
    file_port = free_port()
    config = tmp_path / "inferd.yaml"
    config.write_text("http-port: %d\nlog-level: debug\n" % file_port)
    # server_factory puts --http-port (another port) on the command line.
    srv = server_factory.start("--config", str(config), repository=repo)
    assert srv.port != file_port
    assert requests.get(srv.url + "/v2/health/ready", timeout=5).status_code == 200
    assert not listening(file_port)
    # The file's other keys still apply.
    assert requests.get(srv.url + "/v2/logging", timeout=5).json()["log_verbose_level"] == 1


def test_unknown_key_exits_2(tmp_path):
    config = tmp_path / "inferd.yaml"
    config.write_text("http-port: 8000\nhtp-port: 8001\n")
    p = run("serve", "--config", str(config))
    assert p.returncode == 2, p
    assert p.stderr == "inferd: %s: unknown key 'htp-port'\n" % config


@pytest.mark.parametrize("text,message", [
    ("http-port: 70000\n", "http-port: expected a number from 0 to 65535, got '70000'"),
    ("http-port: [1, 2]\n", "http-port: expected one value, not a sequence"),
    ("no-metrics: maybe\n", "no-metrics: expected true or false"),
    ("log-level: loud\n", "log-level: expected error, warn, info or debug"),
    ("a: 1\na: 2\n", "line 2, column 1: duplicate mapping key (first at line 1)"),
    ("a: &x 1\n", "line 1, column 4: anchors (&name) are not supported"),
    ("- http-port\n", "expected a mapping of settings (key: value) at the top level"),
])
def test_check_config_bad(tmp_path, text, message):
    config = tmp_path / "inferd.yaml"
    config.write_text(text)
    p = run("serve", "--check-config", str(config))
    assert p.returncode == 2, p
    assert p.stderr == "inferd: %s: %s\n" % (config, message)
    assert p.stdout == ""


def test_check_config_ok_starts_nothing(tmp_path):
    port = free_port()
    config = tmp_path / "inferd.yaml"
    # A repository that does not exist and a port: nothing is loaded or opened.
    config.write_text("model-repository: %s\nhttp-port: %d\nmodel-control-mode: explicit\n"
                      "load-model:\n  - a\n  - b\n" % (tmp_path / "none", port))
    p = run("serve", "--check-config", str(config), timeout=10)
    assert p.returncode == 0, p
    assert p.stdout == "%s: ok\n" % config
    assert p.stderr == ""


def test_check_config_token_quotas_ok(tmp_path):
    config = tmp_path / "inferd.yaml"
    config.write_text("token-quotas:\n"
                      "  - model: kjv\n"
                      "    per-minute: {prompt: 20000, completion: 40000, total: 50000}\n"
                      "    per-day: {total: 2000000}\n"
                      "  - per-day:\n      completion: 1000000000000\n")
    p = run("serve", "--check-config", str(config))
    assert p.returncode == 0, p
    assert p.stdout == "%s: ok\n" % config


@pytest.mark.parametrize("rules,message", [
    ("  - per-minute: {total: 0}\n",
     "token-quotas[0].per-minute.total: expected an integer from 1 to 1000000000, got 0"),
    ("  - per-day: {total: 1000000000001}\n",
     "token-quotas[0].per-day.total: expected an integer from 1 to 1000000000000, "
     "got 1000000000001"),
    ("  - per-minute: {total: 1.5}\n",
     "token-quotas[0].per-minute.total: expected an integer from 1 to 1000000000, got 1.5"),
    ("  - per-hour: {total: 10}\n", "token-quotas[0].per-hour: unknown key"),
    ("  - per-minute: {tokens: 10}\n", "token-quotas[0].per-minute.tokens: unknown key"),
    ("  - model: kjv\n",
     "token-quotas[0]: no limit (give per-minute or per-day, with prompt, completion or total)"),
    ("  - model: kjv\n    per-day: {total: 5}\n  - model: kjv\n    per-minute: {total: 5}\n",
     "token-quotas[1]: the same tenant and model as token-quotas[0]"),
    ('  - tenant: "*"\n    per-day: {total: 5}\n',
     'token-quotas[0].tenant: "*" needs tenants, and the auth section has none'),
    ("  - tenant: team-a\n    per-day: {total: 5}\n",
     "token-quotas[0].tenant: 'team-a' is not a tenant of the auth section"),
    ("  per-day: 5\n", "token-quotas: expected a list, got a mapping"),
])
def test_check_config_token_quotas_bad(tmp_path, rules, message):
    config = tmp_path / "inferd.yaml"
    config.write_text("token-quotas:\n" + rules)
    p = run("serve", "--check-config", str(config))
    assert p.returncode == 2, p
    assert message in p.stderr, p.stderr
    assert p.stdout == ""


def test_check_config_checks_flags_and_rules(tmp_path):
    config = tmp_path / "inferd.yaml"
    config.write_text("tls-cert: cert.pem\n")
    p = run("serve", "--check-config", str(config))
    assert p.returncode == 2, p
    assert "--tls-cert and --tls-key go together" in p.stderr
    p = run("serve", "--check-config", str(config), "--tls-key", "key.pem")
    assert p.returncode == 0, p
    p = run("serve", "--check-config", str(config), "--http-port", "abc")
    assert p.returncode == 2, p
    assert p.stderr == "inferd: --http-port: expected a number from 0 to 65535, got 'abc'\n"
    p = run("serve", "--check-config", str(tmp_path / "missing.yaml"))
    assert p.returncode == 2, p
    assert "missing.yaml: cannot open: No such file or directory" in p.stderr


def test_errors_never_echo_values(tmp_path):
    config = tmp_path / "inferd.yaml"
    for text in ('tls-key: "TOPSECRET\n', "tls-key: [TOPSECRET\n", "tls-key: !x TOPSECRET\n",
                 "TOPSECRET: &TOPSECRET 1\n"):
        config.write_text(text)
        p = run("serve", "--check-config", str(config))
        assert p.returncode == 2, p
        assert "TOPSECRET" not in p.stderr, p.stderr


def test_help_documents_config():
    p = run("serve", "--help")
    assert p.returncode == 0
    assert "--config FILE" in p.stdout and "--check-config FILE" in p.stdout


def trace_rate(srv):
    """The global trace rate as Triton reports it: "N" is one of every N."""
    return requests.get(srv.url + "/v2/trace/setting", timeout=5).json()["trace_rate"]


def logging_settings(srv):
    return requests.get(srv.url + "/v2/logging", timeout=5).json()


def test_sighup_applies_log_level(tmp_path, repo, file_servers):
    srv, config = start_from_file(tmp_path, file_servers, BASE + "log-level: info\n")
    assert logging_settings(srv)["log_verbose_level"] == 0
    config.write_text(config.read_text().replace("log-level: info", "log-level: debug"))
    srv.proc.send_signal(signal.SIGHUP)
    wait_for_log(srv, "config: reloaded %s" % config)
    assert "config: log-level is now debug" in srv.stderr()
    assert logging_settings(srv)["log_verbose_level"] == 1
    assert "restart to apply" not in srv.stderr()


def test_sighup_broken_file_keeps_configuration(tmp_path, repo, file_servers):
    srv, config = start_from_file(tmp_path, file_servers, BASE + "log-level: info\n")
    good = config.read_text()
    config.write_text(good.replace("log-level: info", "log-level: debug") + "bogus-key: 1\n")
    srv.proc.send_signal(signal.SIGHUP)
    wait_for_log(srv, "config: reload of %s failed, keeping the current configuration: "
                      "%s: unknown key 'bogus-key'" % (config, config))
    assert requests.get(srv.url + "/v2/models/simple/ready", timeout=5).status_code == 200
    assert logging_settings(srv)["log_verbose_level"] == 0
    # A syntax error too, then the file fixed again.
    config.write_text(good + "log-level: [\n")
    srv.proc.send_signal(signal.SIGHUP)
    wait_for_log(srv, "config: reload of %s failed" % config, count=2)
    config.write_text(good)
    srv.proc.send_signal(signal.SIGHUP)
    wait_for_log(srv, "config: reloaded %s" % config)
    assert requests.get(srv.url + "/v2/health/ready", timeout=5).status_code == 200


def test_sighup_port_change_needs_restart(tmp_path, repo, file_servers):
    srv, config = start_from_file(tmp_path, file_servers, BASE)
    new_port = free_port()
    config.write_text(config.read_text().replace("http-port: %d" % srv.port,
                                                 "http-port: %d" % new_port))
    srv.proc.send_signal(signal.SIGHUP)
    wait_for_log(srv, "config: reloaded %s" % config)
    assert "config: http-port changed, restart to apply" in srv.stderr()
    assert requests.get(srv.url + "/v2/health/ready", timeout=5).status_code == 200
    assert not listening(new_port)


def test_sighup_flag_on_command_line_wins(tmp_path, repo, file_servers):
    srv, config = start_from_file(tmp_path, file_servers, BASE + "trace-rate: 0.25\n",
                                  extra=["--trace-rate", "0.5"])
    assert trace_rate(srv) == "2"
    config.write_text(config.read_text().replace("trace-rate: 0.25", "trace-rate: 1"))
    srv.proc.send_signal(signal.SIGHUP)
    wait_for_log(srv, "config: reloaded %s" % config)
    assert trace_rate(srv) == "2"
    assert "trace-rate" not in srv.stderr()


def test_sighup_applies_trace_rate(tmp_path, repo, file_servers):
    srv, config = start_from_file(tmp_path, file_servers, BASE + "trace-rate: 0.25\n")
    assert trace_rate(srv) == "4"
    config.write_text(config.read_text().replace("trace-rate: 0.25", "trace-rate: 0.5"))
    srv.proc.send_signal(signal.SIGHUP)
    wait_for_log(srv, "config: reloaded %s" % config)
    assert "config: trace-rate is now 0.5" in srv.stderr()
    assert trace_rate(srv) == "2"


def test_sighup_reloads_file_and_tls_certificate(server_factory, pki, tmp_path, repo):
    """TLS files named in the file: one SIGHUP rereads the file and reloads the
    certificate (its paths need a restart to change, its content does not)."""
    shutil.copy(pki / "server.pem", tmp_path / "cert.pem")
    shutil.copy(pki / "server.key", tmp_path / "key.pem")
    config = tmp_path / "inferd.yaml"
    config.write_text("tls-cert: %s\ntls-key: %s\nlog-level: info\n"
                      % (tmp_path / "cert.pem", tmp_path / "key.pem"))
    srv = server_factory.start("--config", str(config), repository=repo, wait=False)
    wait_for_log(srv, "ready:", timeout=60)
    assert "TLS enabled" in srv.stderr()
    shutil.copy(pki / "server2.pem", tmp_path / "cert.pem")
    shutil.copy(pki / "server2.key", tmp_path / "key.pem")
    config.write_text(config.read_text().replace("log-level: info", "log-level: debug"))
    srv.proc.send_signal(signal.SIGHUP)
    wait_for_log(srv, "TLS certificate reloaded (subject /CN=inferd server two")
    assert "config: reloaded %s" % config in srv.stderr()
    assert "config: log-level is now debug" in srv.stderr()
    r = requests.get("https://127.0.0.1:%d/v2/health/live" % srv.port,
                     verify=str(pki / "ca.pem"), timeout=10)
    assert r.status_code == 200
