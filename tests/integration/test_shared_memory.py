"""Triton's system shared-memory extension, checked with independent
clients: Python's multiprocessing.shared_memory creates the POSIX objects,
requests and grpcio register them and run `simple` (INT32 [1,16] INPUT0,
INPUT1 -> OUTPUT0 = sum, OUTPUT1 = difference) with inputs and outputs in
the regions."""
import threading
import time
from multiprocessing import shared_memory

import grpc
import numpy as np
import pytest
import requests

from conftest import (IDENTITY_MODELS, MAIN_MODELS, assert_error_response, make_repository,
                      ok_json, stall_repo, stall_started, wait_stall_started)
from grpc_client import Client, generate, join_bytes, split_bytes

SIZE = 64  # bytes of one INT32 [1,16] tensor
STALL_US = 1500000  # the echo model's run: long enough to unregister during it


@pytest.fixture(scope="module")
def srv(module_server_factory, tmp_path_factory):
    stall_dir = tmp_path_factory.mktemp("shm")
    root = stall_repo(stall_dir, STALL_US)
    make_repository(root, {"simple": MAIN_MODELS["simple"],
                           "identity_bytes": IDENTITY_MODELS["identity_bytes"]})
    s = module_server_factory.start("--model-repository", str(root))
    s.stall_dir = stall_dir  # where the echo model notes its executions
    return s


@pytest.fixture(scope="module")
def pbs(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("proto_py"))


@pytest.fixture
def gclient(srv, pbs):
    c = Client(*pbs, "127.0.0.1:%d" % srv.grpc_port)
    yield c
    c.close()


@pytest.fixture
def shm():
    """Creates shared-memory objects; unlinks them at the end."""
    made = []

    def _make(size):
        m = shared_memory.SharedMemory(create=True, size=size)
        made.append(m)
        return m
    yield _make
    for m in made:
        m.close()
        m.unlink()


@pytest.fixture(autouse=True)
def clean(srv):
    yield
    requests.post(srv.url + "/v2/systemsharedmemory/unregister", timeout=10)


def key_of(m):
    return "/" + m.name


def register(srv, name, key, byte_size, offset=None):
    body = {"key": key, "byte_size": byte_size}
    if offset is not None:
        body["offset"] = offset
    return requests.post(srv.url + "/v2/systemsharedmemory/region/%s/register" % name,
                         json=body, timeout=10)


def status(srv, name=None):
    path = "/v2/systemsharedmemory/status" if name is None else \
        "/v2/systemsharedmemory/region/%s/status" % name
    return requests.get(srv.url + path, timeout=10)


def shm_params(region, size, offset=0):
    p = {"shared_memory_region": region, "shared_memory_byte_size": size}
    if offset:
        p["shared_memory_offset"] = offset
    return p


def infer(srv, inputs, outputs=None, model="simple"):
    body = {"inputs": inputs}
    if outputs is not None:
        body["outputs"] = outputs
    return requests.post(srv.url + "/v2/models/%s/infer" % model, json=body, timeout=30)


def ints(m, offset, n=16):
    return np.frombuffer(m.buf[offset:offset + 4 * n], dtype="<i4").tolist()


def test_extension_listed(srv, gclient):
    assert "system_shared_memory" in ok_json(requests.get(srv.url + "/v2", timeout=10))["extensions"]
    assert "system_shared_memory" in gclient.call("ServerMetadata").extensions


def test_rest_register_infer_status_unregister(srv, shm):
    """Inputs and outputs in one object at four offsets; the response carries
    only the outputs' heads and where they were written."""
    m = shm(4 * SIZE)
    a = np.arange(16, dtype="<i4")
    b = np.full(16, 3, dtype="<i4")
    m.buf[0:SIZE] = a.tobytes()
    m.buf[SIZE:2 * SIZE] = b.tobytes()
    assert register(srv, "in", key_of(m), 2 * SIZE).status_code == 200
    assert register(srv, "out", key_of(m), 2 * SIZE, offset=2 * SIZE).status_code == 200
    assert ok_json(status(srv)) == [
        {"name": "in", "key": key_of(m), "offset": 0, "byte_size": 2 * SIZE},
        {"name": "out", "key": key_of(m), "offset": 2 * SIZE, "byte_size": 2 * SIZE}]
    assert ok_json(status(srv, "out")) == [
        {"name": "out", "key": key_of(m), "offset": 2 * SIZE, "byte_size": 2 * SIZE}]

    r = infer(srv, [
        {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16], "parameters": shm_params("in", SIZE)},
        {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16],
         "parameters": shm_params("in", SIZE, SIZE)}],
        outputs=[{"name": "OUTPUT0", "parameters": shm_params("out", SIZE)},
                 {"name": "OUTPUT1", "parameters": shm_params("out", SIZE, SIZE)}])
    doc = ok_json(r)
    assert doc["outputs"] == [
        {"name": "OUTPUT0", "datatype": "INT32", "shape": [1, 16],
         "parameters": {"shared_memory_region": "out", "shared_memory_byte_size": SIZE}},
        {"name": "OUTPUT1", "datatype": "INT32", "shape": [1, 16],
         "parameters": {"shared_memory_region": "out", "shared_memory_byte_size": SIZE,
                        "shared_memory_offset": SIZE}}]
    assert ints(m, 2 * SIZE) == (a + b).tolist()
    assert ints(m, 3 * SIZE) == (a - b).tolist()

    r = requests.post(srv.url + "/v2/systemsharedmemory/region/in/unregister", timeout=10)
    assert r.status_code == 200
    assert [s["name"] for s in ok_json(status(srv))] == ["out"]
    assert requests.post(srv.url + "/v2/systemsharedmemory/unregister",
                         timeout=10).status_code == 200
    assert ok_json(status(srv)) == []


def test_rest_mixed_shm_input_json_input_and_response_output(srv, shm):
    m = shm(SIZE)
    m.buf[0:SIZE] = np.full(16, 10, dtype="<i4").tobytes()
    assert register(srv, "a", key_of(m), SIZE).status_code == 200
    r = infer(srv, [
        {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16], "parameters": shm_params("a", SIZE)},
        {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16], "data": list(range(16))}])
    outs = {o["name"]: o for o in ok_json(r)["outputs"]}
    assert outs["OUTPUT0"]["data"] == [10 + i for i in range(16)]
    assert outs["OUTPUT1"]["data"] == [10 - i for i in range(16)]


def test_bytes_input_and_output_in_shared_memory(srv, shm):
    """BYTES elements are length-prefixed in the region, as in binary data."""
    items = [b"hello", b"", b"shared\x00memory", b"x" * 100]
    raw = join_bytes(items)
    m = shm(2 * len(raw))
    m.buf[0:len(raw)] = raw
    assert register(srv, "b", key_of(m), 2 * len(raw)).status_code == 200
    r = infer(srv, [{"name": "INPUT0", "datatype": "BYTES", "shape": [2, 2],
                     "parameters": shm_params("b", len(raw))}],
              outputs=[{"name": "OUTPUT0", "parameters": shm_params("b", len(raw), len(raw))}],
              model="identity_bytes")
    out = ok_json(r)["outputs"][0]
    assert out["parameters"]["shared_memory_byte_size"] == len(raw)
    assert "data" not in out
    assert split_bytes(bytes(m.buf[len(raw):2 * len(raw)])) == items


def test_rest_errors(srv, shm):
    m = shm(SIZE)
    url = srv.url + "/v2/systemsharedmemory"
    # Unknown key, window beyond the object, duplicate name, bad bodies.
    msg = assert_error_response(register(srv, "x", "/inferd-no-such-key", SIZE), 400)
    assert "cannot open shared-memory key '/inferd-no-such-key'" in msg
    msg = assert_error_response(register(srv, "x", key_of(m), SIZE, offset=8), 400)
    assert "offset 8 + byte_size 64 is beyond the 64 bytes" in msg
    assert "byte_size must be positive" in assert_error_response(register(srv, "x", key_of(m), 0), 400)
    assert register(srv, "x", key_of(m), SIZE).status_code == 200
    assert "already registered" in assert_error_response(register(srv, "x", key_of(m), SIZE), 400)
    r = requests.post(url + "/region/y/register", data=b"[1]", timeout=10)
    assert "must be a JSON object" in assert_error_response(r, 400)
    r = requests.post(url + "/region/y/register", json={"key": key_of(m)}, timeout=10)
    assert "needs 'byte_size'" in assert_error_response(r, 400)
    r = requests.post(url + "/region/y/register", json={"key": 3, "byte_size": 4}, timeout=10)
    assert "needs 'key'" in assert_error_response(r, 400)
    # Unknown regions in status and unregister.
    assert assert_error_response(status(srv, "nope"), 404) == \
        "Unable to find system shared memory region: 'nope'"
    # Unregistering a name that is not registered is nothing to do (Triton).
    assert requests.post(url + "/region/nope/unregister", timeout=10).status_code == 200
    # Methods and paths.
    assert requests.get(url + "/region/x/register", timeout=10).status_code == 405
    assert requests.post(url + "/status", timeout=10).status_code == 405
    assert requests.get(url + "/region/x/frobnicate", timeout=10).status_code == 404


def test_infer_errors(srv, shm):
    m = shm(SIZE)
    assert register(srv, "r", key_of(m), SIZE).status_code == 200
    ok_input = {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16], "data": [0] * 16}

    def in0(params):
        return [{"name": "INPUT0", "datatype": "INT32", "shape": [1, 16], "parameters": params},
                ok_input]
    msg = assert_error_response(infer(srv, in0(shm_params("nope", SIZE))), 400)
    assert "input 'INPUT0': unknown shared-memory region 'nope'" in msg
    msg = assert_error_response(infer(srv, in0(shm_params("r", SIZE, 4))), 400)
    assert "shared_memory_offset 4 + shared_memory_byte_size 64 is beyond the 64 bytes of region 'r'" in msg
    msg = assert_error_response(infer(srv, in0(shm_params("r", 32))), 400)
    assert "input 'INPUT0': shared_memory_byte_size is 32 bytes, shape [1,16] of INT32 needs 64" in msg
    msg = assert_error_response(infer(srv, in0({"shared_memory_region": "r"})), 400)
    assert "'shared_memory_byte_size' is required" in msg
    msg = assert_error_response(infer(srv, in0({"shared_memory_byte_size": 64})), 400)
    assert "need 'shared_memory_region'" in msg
    both = in0(shm_params("r", SIZE))
    both[0]["data"] = [0] * 16
    assert "Input must set only one of the following fields: 'data', 'binary_data_size' in " \
        "'parameters', 'shared_memory_region' in 'parameters'. But set 'data' " \
        "'shared_memory_region' (input 'INPUT0')" in assert_error_response(infer(srv, both), 400)
    # An output too large for its window: the request fails, naming the sizes.
    small = shm(32)
    assert register(srv, "small", key_of(small), 32).status_code == 200
    r = infer(srv, [dict(ok_input, name="INPUT0"), ok_input],
              outputs=[{"name": "OUTPUT0", "parameters": shm_params("small", 32)}])
    msg = assert_error_response(r, 400)
    assert "output 'OUTPUT0': 64 bytes do not fit its shared_memory_byte_size 32 (region 'small')" in msg


def test_region_limit(srv, shm):
    """At most 128 regions; the 129th is refused with a 400."""
    m = shm(SIZE)
    for i in range(128):
        assert register(srv, "r%d" % i, key_of(m), SIZE).status_code == 200
    msg = assert_error_response(register(srv, "r128", key_of(m), SIZE), 400)
    assert "the limit of 128 regions is reached" in msg
    assert len(ok_json(status(srv))) == 128


def test_region_size_limit(srv):
    msg = assert_error_response(register(srv, "huge", "/whatever", (4 << 30) + 1), 400)
    assert "exceeds the limit of 4294967296 bytes per region" in msg


def test_unregister_while_in_use(srv, shm):
    """A region unregistered during a request stays mapped until it ends:
    the request reads its input and writes its output there."""
    m = shm(2 * 16)
    m.buf[0:16] = np.array([1, 2, 3, 4], dtype="<i4").tobytes()
    assert register(srv, "busy", key_of(m), 32).status_code == 200
    result = {}

    def run():
        result["r"] = infer(srv, [{"name": "IN", "datatype": "INT32", "shape": [1, 4],
                                   "parameters": shm_params("busy", 16)}],
                            outputs=[{"name": "OUT", "parameters": shm_params("busy", 16, 16)}],
                            model="echo")
    started = stall_started(srv.stall_dir)
    t = threading.Thread(target=run)
    t.start()
    wait_stall_started(srv.stall_dir, started + 1)  # the request holds the region by now
    assert requests.post(srv.url + "/v2/systemsharedmemory/region/busy/unregister",
                         timeout=10).status_code == 200
    assert ok_json(status(srv)) == []
    t.join(30)
    out = ok_json(result["r"])["outputs"][0]
    assert out["parameters"] == {"shared_memory_region": "busy", "shared_memory_byte_size": 16,
                                 "shared_memory_offset": 16}
    assert ints(m, 16, 4) == [1, 2, 3, 4]
    # The name is free again.
    assert register(srv, "busy", key_of(m), 32).status_code == 200


# ---- gRPC ------------------------------------------------------------------


def test_grpc_register_infer_status_unregister(srv, gclient, pbs, shm):
    pb, _ = pbs
    m = shm(4 * SIZE)
    a = np.arange(16, dtype="<i4") * 7
    b = np.arange(16, dtype="<i4")
    m.buf[0:SIZE] = a.tobytes()
    m.buf[SIZE:2 * SIZE] = b.tobytes()
    gclient.call("SystemSharedMemoryRegister", name="gin", key=key_of(m), offset=0,
                 byte_size=2 * SIZE)
    gclient.call("SystemSharedMemoryRegister", name="gout", key=key_of(m), offset=2 * SIZE,
                 byte_size=2 * SIZE)
    st = gclient.call("SystemSharedMemoryStatus")
    assert sorted(st.regions) == ["gin", "gout"]
    assert (st.regions["gout"].name, st.regions["gout"].key, st.regions["gout"].offset,
            st.regions["gout"].byte_size) == ("gout", key_of(m), 2 * SIZE, 2 * SIZE)
    assert list(gclient.call("SystemSharedMemoryStatus", name="gin").regions) == ["gin"]

    req = pb.ModelInferRequest(model_name="simple")
    for name, off in (("INPUT0", 0), ("INPUT1", SIZE)):
        t = req.inputs.add(name=name, datatype="INT32", shape=[1, 16])
        t.parameters["shared_memory_region"].string_param = "gin"
        t.parameters["shared_memory_byte_size"].int64_param = SIZE
        t.parameters["shared_memory_offset"].int64_param = off
    for name, off in (("OUTPUT0", 0), ("OUTPUT1", SIZE)):
        o = req.outputs.add(name=name)
        o.parameters["shared_memory_region"].string_param = "gout"
        o.parameters["shared_memory_byte_size"].int64_param = SIZE
        o.parameters["shared_memory_offset"].int64_param = off
    r = gclient.infer(req)
    assert [o.name for o in r.outputs] == ["OUTPUT0", "OUTPUT1"]
    assert r.outputs[1].parameters["shared_memory_region"].string_param == "gout"
    assert r.outputs[1].parameters["shared_memory_byte_size"].int64_param == SIZE
    assert r.outputs[1].parameters["shared_memory_offset"].int64_param == SIZE
    assert all(len(c) == 0 for c in r.raw_output_contents)
    assert ints(m, 2 * SIZE) == (a + b).tolist()
    assert ints(m, 3 * SIZE) == (a - b).tolist()

    gclient.call("SystemSharedMemoryUnregister", name="gin")
    assert list(gclient.call("SystemSharedMemoryStatus").regions) == ["gout"]
    gclient.call("SystemSharedMemoryUnregister")
    assert len(gclient.call("SystemSharedMemoryStatus").regions) == 0


def test_grpc_shm_input_without_raw_entry(srv, gclient, pbs, shm):
    """Triton's clients send raw_input_contents only for the inputs that are
    not in shared memory."""
    pb, _ = pbs
    m = shm(SIZE)
    m.buf[0:SIZE] = np.full(16, 5, dtype="<i4").tobytes()
    gclient.call("SystemSharedMemoryRegister", name="one", key=key_of(m), byte_size=SIZE)
    req = pb.ModelInferRequest(model_name="simple")
    t = req.inputs.add(name="INPUT0", datatype="INT32", shape=[1, 16])
    t.parameters["shared_memory_region"].string_param = "one"
    t.parameters["shared_memory_byte_size"].uint64_param = SIZE
    req.inputs.add(name="INPUT1", datatype="INT32", shape=[1, 16])
    req.raw_input_contents.append(np.arange(16, dtype="<i4").tobytes())
    r = gclient.infer(req)
    assert np.frombuffer(r.raw_output_contents[0], dtype="<i4").tolist() == \
        [5 + i for i in range(16)]


def test_grpc_errors(srv, gclient, pbs, shm):
    pb, _ = pbs
    m = shm(SIZE)

    def err(fn, *a, **kw):
        with pytest.raises(grpc.RpcError) as e:
            fn(*a, **kw)
        return e.value
    e = err(gclient.call, "SystemSharedMemoryRegister", name="g", key=key_of(m), offset=1,
            byte_size=SIZE)
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "is beyond the 64 bytes" in e.details()
    gclient.call("SystemSharedMemoryRegister", name="g", key=key_of(m), byte_size=SIZE)
    e = err(gclient.call, "SystemSharedMemoryRegister", name="g", key=key_of(m), byte_size=SIZE)
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "already registered" in e.details()
    e = err(gclient.call, "SystemSharedMemoryStatus", name="nope")
    assert e.code() == grpc.StatusCode.NOT_FOUND
    assert e.details() == "Unable to find system shared memory region: 'nope'"
    gclient.call("SystemSharedMemoryUnregister", name="nope")
    req = pb.ModelInferRequest(model_name="simple")
    for name in ("INPUT0", "INPUT1"):
        t = req.inputs.add(name=name, datatype="INT32", shape=[1, 16])
        t.parameters["shared_memory_region"].string_param = "g"
        t.parameters["shared_memory_byte_size"].int64_param = 16
    e = err(gclient.infer, req)
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "input 'INPUT0': shared_memory_byte_size is 16 bytes, shape [1,16] of INT32 needs 64" \
        in e.details()


# CUDA shared memory, answered as Triton's CPU-only build answers it (its
# http_server.cc, grpc_server.cc and shared_memory_manager.cc): clients such
# as tritonclient's shared-memory examples unregister everything first.
CUDA = "/v2/cudasharedmemory"


def test_cuda_shared_memory_rest_as_a_cpu_build(srv, shm):
    m = shm(SIZE)
    assert register(srv, "sys", key_of(m), SIZE).status_code == 200
    r = requests.get(srv.url + CUDA + "/status", timeout=10)
    assert r.status_code == 200 and r.json() == []
    r = requests.get(srv.url + CUDA + "/region/c/status", timeout=10)
    assert assert_error_response(r, 404) == "Unable to find cuda shared memory region: 'c'"
    r = requests.get(srv.url + CUDA + "/region/sys/status", timeout=10)
    assert assert_error_response(r, 404) == ("The region named 'sys' is registered as system "
                                             "shared memory, not CUDA shared memory")
    r = requests.post(srv.url + CUDA + "/region/c/register", timeout=10,
                      json={"raw_handle": {"b64": "AAAA"}, "device_id": 0, "byte_size": 4})
    assert assert_error_response(r, 400) == \
        "failed to register CUDA shared memory region: 'c', GPUs not supported"
    for path in ("/unregister", "/region/c/unregister", "/region/sys/unregister"):
        assert requests.post(srv.url + CUDA + path, timeout=10).status_code == 200
    # The system region is untouched by the CUDA calls.
    assert [x["name"] for x in status(srv).json()] == ["sys"]
    assert requests.post(srv.url + CUDA + "/status", timeout=10).status_code == 405
    assert requests.get(srv.url + CUDA + "/unregister", timeout=10).status_code == 405


def test_cuda_shared_memory_grpc_as_a_cpu_build(srv, gclient, shm):
    m = shm(SIZE)
    gclient.call("SystemSharedMemoryRegister", name="sys", key=key_of(m), byte_size=SIZE)
    assert len(gclient.call("CudaSharedMemoryStatus").regions) == 0

    def err(method, **fields):
        with pytest.raises(grpc.RpcError) as e:
            gclient.call(method, **fields)
        return e.value.code(), e.value.details()
    assert err("CudaSharedMemoryStatus", name="c") == (
        grpc.StatusCode.NOT_FOUND, "Unable to find cuda shared memory region: 'c'")
    assert err("CudaSharedMemoryStatus", name="sys") == (
        grpc.StatusCode.NOT_FOUND, "The region named 'sys' is registered as system shared "
        "memory, not CUDA shared memory")
    assert err("CudaSharedMemoryRegister", name="c", raw_handle=b"\0" * 64, device_id=0,
               byte_size=4) == (grpc.StatusCode.INVALID_ARGUMENT, "failed to register CUDA "
                                "shared memory region: 'c', GPUs not supported")
    gclient.call("CudaSharedMemoryUnregister")
    gclient.call("CudaSharedMemoryUnregister", name="c")
    assert list(gclient.call("SystemSharedMemoryStatus").regions) == ["sys"]
