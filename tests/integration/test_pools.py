"""The front ends' pools of request objects follow recent traffic: a burst
of concurrent requests leaves its objects (each with a 64 KiB arena chunk)
pooled for a period or two, then they are freed (base/pool_use.h)."""
import threading
import time

import pytest
import requests

from conftest import sanitized_binary, stall_repo, usr1_stats
from grpc_client import Client, generate

BURST = 96


def heap_in_use(srv):
    return int(usr1_stats(srv)["heap_in_use_bytes"])


def rest_burst(srv):
    body = {"inputs": [{"name": "IN", "shape": [1, 4], "datatype": "INT32",
                        "data": [1, 2, 3, 4]}]}
    codes = []

    def one():
        codes.append(requests.post(srv.url + "/v2/models/echo/infer", json=body,
                                   timeout=60).status_code)

    threads = [threading.Thread(target=one) for _ in range(BURST)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert codes == [200] * BURST


def grpc_burst(srv, tmp_path):
    out = tmp_path / "proto_py"
    out.mkdir()
    pb, hpb = generate(out)
    client = Client(pb, hpb, "127.0.0.1:%d" % srv.grpc_port)
    try:
        req = pb.ModelInferRequest(model_name="echo", inputs=[pb.ModelInferRequest.InferInputTensor(
            name="IN", datatype="INT32", shape=[1, 4],
            contents=pb.InferTensorContents(int_contents=[1, 2, 3, 4]))])
        calls = [client.unary("ModelInfer").future(req, timeout=60) for _ in range(BURST)]
        for c in calls:
            assert list(c.result().outputs[0].shape) == [1, 4]
    finally:
        client.close()


@pytest.mark.parametrize("protocol", ["rest", "grpc"])
def test_pool_shrinks_after_a_burst(server_factory, tmp_path, protocol):
    if sanitized_binary():
        pytest.skip("AddressSanitizer serves malloc: glibc's heap figures are meaningless")
    # The burst must be held at once (96 requests of 20 ms, one at a time):
    # far more than the default queue budget (two runs) admits.
    srv = server_factory.start("--io-threads", "1", "--queue-budget-ms", "off",
                               repository=stall_repo(tmp_path, 20000))
    idle = heap_in_use(srv)
    if protocol == "rest":
        rest_burst(srv)
    else:
        grpc_burst(srv, tmp_path)
    # Every request held a pooled object with its 64 KiB chunk at once; they
    # stay pooled until a period passes without such a peak.
    after = heap_in_use(srv)
    grown = after - idle
    assert grown > BURST * 64 * 1024 // 2, "the burst grew the heap by only %d bytes" % grown
    deadline = time.time() + 40  # two 10 s periods and the tick, with room
    now = after
    while time.time() < deadline:
        time.sleep(1)
        now = heap_in_use(srv)
        if now - idle < grown // 4:
            break
    assert now - idle < grown // 4, "heap %d -> %d -> %d bytes" % (idle, after, now)
