"""A REST client that goes away while its request waits in the queue cancels
it: the scheduler drops the request instead of running it, and it is
counted as CANCELED."""
import json
import socket
import time

import requests

from conftest import connect, stall_repo, stall_started, wait_queued, wait_stall_started


def infer_bytes(n):
    body = json.dumps({"inputs": [{"name": "IN", "datatype": "INT32", "shape": [1, 4],
                                   "data": [n] * 4}]}).encode()
    return (b"POST /v2/models/echo/infer HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)) + body


def stats(srv):
    r = requests.get(srv.url + "/v2/models/echo/stats", timeout=10)
    assert r.status_code == 200, r.text
    s = r.json()["model_stats"][0]
    return s["execution_count"], s["inference_count"]


def test_regress_disconnected_client_request_is_not_run(server_factory, tmp_path):
    srv = server_factory.start(repository=stall_repo(tmp_path, 1500000))
    started = stall_started(tmp_path)
    first = connect(srv.port)
    first.sendall(infer_bytes(1))        # runs for 1.5 s
    wait_stall_started(tmp_path, started + 1)
    second = connect(srv.port)
    second.sendall(infer_bytes(2))       # waits behind the first
    wait_queued(srv, "echo", 1)
    second.shutdown(socket.SHUT_RDWR)    # the client gives up
    second.close()
    first.settimeout(30)
    head = first.recv(4096)
    assert head.startswith(b"HTTP/1.1 200"), head
    first.close()
    r = requests.post(srv.url + "/v2/models/echo/infer", timeout=30, json={
        "inputs": [{"name": "IN", "datatype": "INT32", "shape": [1, 4], "data": [3] * 4}]})
    assert r.status_code == 200 and r.json()["outputs"][0]["data"] == [3] * 4
    # Two executions (first and third); the second was dropped from the queue.
    assert stats(srv) == (2, 2)
    metrics = requests.get("http://127.0.0.1:%d/metrics" % srv.metrics_port, timeout=10).text
    line = [l for l in metrics.splitlines()
            if l.startswith("nv_inference_request_failure{") and 'model="echo"' in l
            and 'reason="CANCELED"' in l]
    assert len(line) == 1 and line[0].rsplit(" ", 1)[1] == "1", line
