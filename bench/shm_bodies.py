"""Experiment 8 of make bench (scripts/bench.sh): the same 1 MiB FP32 input
to `identity_fp32`, sent as Triton's binary tensor data vs placed in a
system shared-memory region.

  shm_bodies.py make RUN_DIR KEY
      creates the POSIX shared-memory object /KEY (/dev/shm/KEY, 2 MiB: the
      input at 0, room for the output at 1 MiB) and writes the two request
      bodies: RUN_DIR/shm_rest.bin (+ shm_rest.json_len, the value of
      Inference-Header-Content-Length) and RUN_DIR/shm_shm.json
  shm_bodies.py check RUN_DIR KEY URL
      registers the regions bench_in and bench_out on the server at URL and
      sends each body once: both must answer 200, the binary response must
      carry the input's bytes and the output region must hold them
  shm_bodies.py remove KEY
      unlinks the object (the server keeps its mapping until unregistered)

Standard library only, under /usr/bin/python3."""
import json
import os
import struct
import sys
import urllib.request

N = 1 << 18  # FP32 elements: 1 MiB
SIZE = 4 * N
PATH = "/v2/models/identity_fp32/infer"


def shm_path(key):
    return "/dev/shm/" + key


def make(run, key):
    data = struct.pack("<%df" % N, *((i % 1000) * 0.5 for i in range(N)))
    with open(shm_path(key), "wb") as f:
        f.write(data)
        f.write(b"\0" * SIZE)
    head = json.dumps({
        "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, N],
                    "parameters": {"binary_data_size": SIZE}}],
        "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]}).encode()
    with open(os.path.join(run, "shm_rest.bin"), "wb") as f:
        f.write(head + data)
    with open(os.path.join(run, "shm_rest.json_len"), "w") as f:
        f.write(str(len(head)))
    with open(os.path.join(run, "shm_shm.json"), "w") as f:
        json.dump({
            "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, N],
                        "parameters": {"shared_memory_region": "bench_in",
                                       "shared_memory_byte_size": SIZE}}],
            "outputs": [{"name": "OUTPUT0",
                         "parameters": {"shared_memory_region": "bench_out",
                                        "shared_memory_byte_size": SIZE}}]}, f)


def post(url, body, headers):
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.status, dict(r.headers), r.read()


def check(run, key, url):
    for name, offset in (("bench_in", 0), ("bench_out", SIZE)):
        body = json.dumps({"key": "/" + key, "offset": offset, "byte_size": SIZE}).encode()
        post(url + "/v2/systemsharedmemory/region/%s/register" % name, body,
             {"Content-Type": "application/json"})
    with open(shm_path(key), "rb") as f:
        data = f.read(SIZE)
    rest = open(os.path.join(run, "shm_rest.bin"), "rb").read()
    json_len = open(os.path.join(run, "shm_rest.json_len")).read()
    status, headers, out = post(url + PATH, rest, {
        "Content-Type": "application/octet-stream", "Inference-Header-Content-Length": json_len})
    head = int(headers["Inference-Header-Content-Length"])
    if status != 200 or out[head:] != data:
        sys.exit("binary request: HTTP %d, the output is not the input" % status)
    status, _, out = post(url + PATH, open(os.path.join(run, "shm_shm.json"), "rb").read(),
                          {"Content-Type": "application/json"})
    with open(shm_path(key), "rb") as f:
        f.seek(SIZE)
        written = f.read(SIZE)
    if status != 200 or written != data:
        sys.exit("shared-memory request: HTTP %d, the output region does not hold the input"
                 % status)


def main():
    cmd = sys.argv[1:2]
    if cmd == ["make"]:
        make(sys.argv[2], sys.argv[3])
    elif cmd == ["check"]:
        check(sys.argv[2], sys.argv[3], sys.argv[4])
    elif cmd == ["remove"]:
        os.unlink(shm_path(sys.argv[2]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
