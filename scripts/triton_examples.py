#!/usr/bin/env python3
"""Runs Triton's own Python client examples, unmodified, against inferd.

    /usr/bin/python3 scripts/triton_examples.py --client DIR --common DIR
                     [--inferd build/inferd] [--only NAME,...] [--keep]

--client is a checkout of github.com/triton-inference-server/client (or
its bare git directory), --common one of
github.com/triton-inference-server/common (the .proto files). Neither is
shipped with inferd: fetch them where the network allows. The Python
packages the client library needs come from Debian (scripts/deps.sh
installs them): python3-grpcio, python3-protobuf, python3-grpc-tools,
python3-geventhttpclient, python3-rapidjson, python3-aiohttp,
python3-numpy.

What it does, in a temporary directory:
  1. lays out the `tritonclient` package as the client's build_wheel.py
     does (the library's sources, and service_pb2 / model_config_pb2 /
     service_pb2_grpc generated from the common protos with grpc_tools);
  2. starts three inferd servers on free ports: one with the example
     models (models/simple and the stand-ins of tests/models:
     simple_sequence, simple_dyna_sequence, simple_string_dyna_sequence,
     simple_string, simple_int8, simple_identity) and --server-name triton
     (the health-metadata examples check the name), and two in explicit
     model-control mode over repositories of 7 and 8 models (the counts
     the HTTP and gRPC model-control examples check);
  3. runs every example whose models exist (the list below), each as
     `python3 <example> -u host:port [flags]`, and prints one line per run.

Examples left out: those of models Triton's QA repository has and inferd
does not ship (image_client, grpc_image_client and grpc_client: inception
or densenet; ensemble_image_client; simple_grpc_custom_repeat: Triton's
repeat backend with its WAIT input; memory_growth_test: a fixed URL), the
CUDA shared-memory examples (a GPU), and TLS variants (tests/integration
covers TLS with grpcio and requests).

Exit status 0 when every example passed.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = "/usr/bin/python3"

EXAMPLE_MODELS = {
    "simple": "models/simple",
    "simple_sequence": "tests/models/simple_sequence",
    "simple_dyna_sequence": "tests/models/simple_dyna_sequence",
    "simple_string_dyna_sequence": "tests/models/simple_string_dyna_sequence",
    "simple_string": "tests/models/simple_string",
    "simple_int8": "tests/models/simple_int8",
    "simple_identity": "tests/models/simple_identity",
}
# The model-control examples count the repository's models: 7 over HTTP, 8 over gRPC.
CONTROL_BASE = ["simple", "simple_string", "simple_int8", "simple_identity", "simple_sequence",
                "simple_dyna_sequence"]
CONTROL_MODELS = {
    "control7": {m: EXAMPLE_MODELS[m] for m in CONTROL_BASE} |
                {"identity_int32": "tests/models/identity_int32"},
    "control8": {m: EXAMPLE_MODELS[m] for m in CONTROL_BASE} |
                {"identity_int32": "tests/models/identity_int32",
                 "identity_fp32": "tests/models/identity_fp32"},
}

# (name, example, server, protocol, extra flags)
CASES = [
    ("grpc_sequence_sync", "simple_grpc_sequence_sync_infer_client.py", "main", "grpc", []),
    ("grpc_sequence_sync_d", "simple_grpc_sequence_sync_infer_client.py", "main", "grpc", ["-d"]),
    ("grpc_sequence_stream", "simple_grpc_sequence_stream_infer_client.py", "main", "grpc", []),
    ("grpc_sequence_stream_d", "simple_grpc_sequence_stream_infer_client.py", "main", "grpc",
     ["-d"]),
    ("http_sequence_sync", "simple_http_sequence_sync_infer_client.py", "main", "http", []),
    ("http_sequence_sync_d", "simple_http_sequence_sync_infer_client.py", "main", "http", ["-d"]),
    ("grpc_aio_sequence_stream", "simple_grpc_aio_sequence_stream_infer_client.py", "main",
     "grpc", []),
    ("grpc_aio_sequence_stream_d", "simple_grpc_aio_sequence_stream_infer_client.py", "main",
     "grpc", ["-d"]),
    ("http_infer", "simple_http_infer_client.py", "main", "http", []),
    ("http_infer_gzip_request", "simple_http_infer_client.py", "main", "http",
     ["--request-compression-algorithm", "gzip"]),
    ("http_infer_deflate_request", "simple_http_infer_client.py", "main", "http",
     ["--request-compression-algorithm", "deflate"]),
    ("http_infer_gzip_response", "simple_http_infer_client.py", "main", "http",
     ["--response-compression-algorithm", "gzip"]),
    ("http_aio_infer", "simple_http_aio_infer_client.py", "main", "http", []),
    ("http_aio_infer_gzip_request", "simple_http_aio_infer_client.py", "main", "http",
     ["--request-compression-algorithm", "gzip"]),
    ("http_async_infer", "simple_http_async_infer_client.py", "main", "http", []),
    ("grpc_infer", "simple_grpc_infer_client.py", "main", "grpc", []),
    ("grpc_infer_timeout", "simple_grpc_infer_client.py", "main", "grpc", ["-t", "10"]),
    ("grpc_infer_gzip", "simple_grpc_infer_client.py", "main", "grpc", ["-C", "gzip"]),
    ("grpc_infer_deflate", "simple_grpc_infer_client.py", "main", "grpc", ["-C", "deflate"]),
    ("grpc_aio_infer", "simple_grpc_aio_infer_client.py", "main", "grpc", []),
    ("grpc_aio_infer_gzip", "simple_grpc_aio_infer_client.py", "main", "grpc", ["-C", "gzip"]),
    ("grpc_async_infer", "simple_grpc_async_infer_client.py", "main", "grpc", []),
    ("http_health_metadata", "simple_http_health_metadata.py", "main", "http", []),
    ("grpc_health_metadata", "simple_grpc_health_metadata.py", "main", "grpc", []),
    ("http_shm", "simple_http_shm_client.py", "main", "http", []),
    ("grpc_shm", "simple_grpc_shm_client.py", "main", "grpc", []),
    ("http_string", "simple_http_string_infer_client.py", "main", "http", []),
    ("grpc_string", "simple_grpc_string_infer_client.py", "main", "grpc", []),
    ("http_shm_string", "simple_http_shm_string_client.py", "main", "http", []),
    ("grpc_shm_string", "simple_grpc_shm_string_client.py", "main", "grpc", []),
    ("grpc_keepalive", "simple_grpc_keepalive_client.py", "main", "grpc", []),
    ("grpc_custom_args", "simple_grpc_custom_args_client.py", "main", "grpc", []),
    ("grpc_explicit_int_content", "grpc_explicit_int_content_client.py", "main", "grpc", []),
    ("grpc_explicit_int8_content", "grpc_explicit_int8_content_client.py", "main", "grpc", []),
    ("grpc_explicit_byte_content", "grpc_explicit_byte_content_client.py", "main", "grpc", []),
    ("http_reuse_infer_objects", "reuse_infer_objects_client.py", "main", "http", ["-i", "http"]),
    ("grpc_reuse_infer_objects", "reuse_infer_objects_client.py", "main", "grpc", ["-i", "grpc"]),
    ("http_model_control", "simple_http_model_control.py", "control7", "http", []),
    ("grpc_model_control", "simple_grpc_model_control.py", "control8", "grpc", []),
]


def sources(repo, sub, dest):
    """repo's directory `sub` (a checkout or a bare git directory) under dest."""
    if os.path.isdir(os.path.join(repo, sub)):
        shutil.copytree(os.path.join(repo, sub), os.path.join(dest, sub))
        return
    git_dir = repo if os.path.isdir(os.path.join(repo, "objects")) else os.path.join(repo, ".git")
    archive = subprocess.run(["git", "--git-dir", git_dir, "archive", "HEAD", sub],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", dest], input=archive, check=True)


def build_client(client, common, work):
    """The tritonclient package under work/site, as build_wheel.py lays it out."""
    src, site, gen = (os.path.join(work, d) for d in ("src", "site", "protogen"))
    for d in (src, site, gen):
        os.makedirs(d)
    sources(client, "src/python", src)
    sources(common, "protobuf", src)
    shutil.copytree(os.path.join(src, "src/python/library/tritonclient"),
                    os.path.join(site, "tritonclient"))
    protos = os.path.join(src, "protobuf")
    subprocess.run([PY, "-m", "grpc_tools.protoc", "-I", protos, "--python_out", gen,
                    "--grpc_python_out", gen, os.path.join(protos, "grpc_service.proto"),
                    os.path.join(protos, "model_config.proto")], check=True)
    grpc_pkg = os.path.join(site, "tritonclient", "grpc")
    for generated, name in (("model_config_pb2.py", "model_config_pb2.py"),
                            ("grpc_service_pb2.py", "service_pb2.py"),
                            ("grpc_service_pb2_grpc.py", "service_pb2_grpc.py")):
        with open(os.path.join(gen, generated)) as f:
            text = f.read()
        text = re.sub(r"^import grpc_(\S*)_pb2 as (\S*)$",
                      r"from tritonclient.grpc import \1_pb2 as \2", text, flags=re.M)
        text = re.sub(r"^import (\S*)_pb2 as (\S*)$",
                      r"from tritonclient.grpc import \1_pb2 as \2", text, flags=re.M)
        with open(os.path.join(grpc_pkg, name), "w") as f:
            f.write(text)
    return site, os.path.join(src, "src/python/examples")


def repository(work, name, models):
    d = os.path.join(work, "repo_" + name)
    os.makedirs(d)
    for model, path in models.items():
        os.symlink(os.path.join(ROOT, path), os.path.join(d, model))
    return d


class Server:
    READY = re.compile(r"HTTP on [^ ]*:(\d+), gRPC on port (\d+)")

    def __init__(self, inferd, work, name, repo, flags):
        self.log = os.path.join(work, "server_%s.log" % name)
        self.proc = subprocess.Popen(
            [inferd, "serve", "--host", "127.0.0.1", "--model-repository", repo, "--http-port",
             "0", "--grpc-port", "0", "--metrics-port", "0"] + flags,
            stdout=open(self.log, "w"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            with open(self.log) as f:
                m = self.READY.search(f.read())
            if m:
                self.http, self.grpc = int(m.group(1)), int(m.group(2))
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("inferd (%s) did not start; see %s" % (name, self.log))
            time.sleep(0.05)
        url = "http://127.0.0.1:%d/v2/health/ready" % self.http
        while urllib.request.urlopen(url, timeout=5).status != 200:
            time.sleep(0.05)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=60)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--client", required=True, help="triton-inference-server/client checkout")
    ap.add_argument("--common", required=True, help="triton-inference-server/common checkout")
    ap.add_argument("--inferd", default=os.path.join(ROOT, "build", "inferd"))
    ap.add_argument("--only", help="comma-separated case names")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args()
    cases = CASES
    if args.only:
        wanted = set(args.only.split(","))
        cases = [c for c in CASES if c[0] in wanted]
        if len(cases) != len(wanted):
            sys.exit("unknown case in --only; cases: " + ", ".join(c[0] for c in CASES))
    work = tempfile.mkdtemp(prefix="triton_examples_")
    servers = {}
    failed = []
    try:
        site, examples = build_client(args.client, args.common, work)
        needed = {c[2] for c in cases}
        plan = {"main": (EXAMPLE_MODELS, ["--server-name", "triton"])}
        for name, models in CONTROL_MODELS.items():
            plan[name] = (models, ["--model-control-mode", "explicit"])
        for name in sorted(needed):
            models, flags = plan[name]
            servers[name] = Server(args.inferd, work, name, repository(work, name, models), flags)
        env = dict(os.environ, PYTHONPATH=site)
        for name, example, server, proto, extra in cases:
            s = servers[server]
            url = "127.0.0.1:%d" % (s.grpc if proto == "grpc" else s.http)
            t0 = time.monotonic()
            try:
                r = subprocess.run([PY, os.path.join(examples, example), "-u", url] + extra,
                                   cwd=work, env=env, capture_output=True, text=True, timeout=300)
                rc, out = r.returncode, r.stdout + r.stderr
            except subprocess.TimeoutExpired as e:
                rc, out = "timeout", (e.stdout or "") + (e.stderr or "")
                out = out.decode() if isinstance(out, bytes) else out
            ok = rc == 0
            print("%-4s %-30s %-50s %5.1f s" % ("ok" if ok else "FAIL", name,
                                                 " ".join([example] + extra),
                                                 time.monotonic() - t0), flush=True)
            if not ok:
                failed.append(name)
                print("     exit %s; its output ends:\n%s" % (
                    rc, "\n".join("     | " + l for l in out.splitlines()[-15:])), flush=True)
    finally:
        for s in servers.values():
            s.stop()
        if args.keep or failed:
            print("files (servers' logs): %s" % work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    print("%d of %d examples passed" % (len(cases) - len(failed), len(cases)))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
