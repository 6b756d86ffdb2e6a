"""The preprocessing stage itself (src/preprocess/prep_*.c), whatever the
modality: preprocess.json and the model's interface, raw input or tensors
(never both, never neither), batches of raw elements, the raw request body,
the worker pool's waiting line, metrics, and reloads in poll mode. The
modalities' own results are checked against independent references in
test_prep_image.py, test_prep_audio.py and test_prep_text.py."""
import io
import json
import re
import shutil
import threading
import time

import numpy as np
import pytest
import requests
from PIL import Image

from conftest import (REPO_ROOT, assert_error_response, bytes_infer_request, infer_request,
                      ok_json, tensor)

IDENTITY = REPO_ROOT / "tests" / "models" / "identity_fp32" / "1" / "model.onnx"

# A 2x4 gray picture of each 8x4 image (Pillow's BOX filter, in float).
GRAY_2X4 = {"color": "gray", "resize": {"width": 4, "height": 2, "method": "area"},
            "layout": "HWC"}


def png(arr):
    out = io.BytesIO()
    Image.fromarray(arr).save(out, format="PNG")
    return out.getvalue()


def picture(seed, h=4, w=8):
    return np.random.default_rng(seed).integers(0, 256, (h, w), dtype=np.uint8)


def box_2x4(arr):
    """Area (box) downsampling of an 4x8 image to 2x4, in float."""
    return arr.astype(np.float64).reshape(2, 2, 4, 2).mean(axis=(1, 3)).reshape(-1)


def identity_repo(tmp_path, prep, name="img"):
    root = tmp_path / "repo"
    (root / name / "1").mkdir(parents=True)
    shutil.copy(IDENTITY, root / name / "1" / "model.onnx")
    if prep is not None:
        (root / name / "preprocess.json").write_text(json.dumps(prep))
    return root


def image_prep(image=None):
    return {"inputs": [{"name": "image", "feeds": "INPUT0", "image": image or GRAY_2X4}]}


@pytest.fixture
def img_server(server_factory, tmp_path):
    return server_factory.start("--model-repository", str(identity_repo(tmp_path, image_prep())))


def output(doc, name="OUTPUT0"):
    out = [o for o in doc["outputs"] if o["name"] == name][0]
    return np.array(out["data"], dtype=np.float64).reshape(out["shape"])


def test_metadata_lists_the_raw_input(img_server):
    meta = ok_json(requests.get(img_server.url + "/v2/models/img"))
    inputs = {i["name"]: i for i in meta["inputs"]}
    assert inputs["image"] == {"name": "image", "datatype": "BYTES", "shape": [-1, 1],
                               "parameters": {"preprocess": "image", "feeds": ["INPUT0"],
                                              "content_types": ["image/jpeg", "image/png"]}}
    assert "parameters" not in inputs["INPUT0"]
    assert inputs["INPUT0"]["datatype"] == "FP32"


def test_a_batch_of_images_in_one_request(img_server):
    pics = [picture(i) for i in range(3)]
    r = bytes_infer_request(img_server.url, "img", "image", [png(p) for p in pics])
    got = output(ok_json(r))
    assert got.shape == (3, 8)
    for row, pic in zip(got, pics):
        np.testing.assert_allclose(row, box_2x4(pic), atol=1e-3)


def test_the_tensor_path_still_works(img_server):
    x = np.arange(8, dtype=np.float32).reshape(1, 8)
    doc = ok_json(infer_request(img_server.url, "img", [tensor("INPUT0", x, "FP32")]))
    np.testing.assert_array_equal(output(doc), x)


def test_raw_and_tensor_together_is_refused(img_server):
    body = {"inputs": [tensor("INPUT0", np.zeros((1, 8), np.float32), "FP32"),
                       {"name": "image", "shape": [1, 1], "datatype": "BYTES", "data": ["x"]}]}
    r = infer_request(img_server.url, "img", None, body=json.dumps(body))
    msg = assert_error_response(r, 400)
    assert "'image'" in msg and "'INPUT0'" in msg and "one of them" in msg


def test_neither_raw_nor_tensor_is_refused(img_server):
    r = infer_request(img_server.url, "img", None, body=json.dumps({"inputs": []}))
    msg = assert_error_response(r, 400)
    assert "INPUT0" in msg and "image" in msg


def test_raw_body(img_server):
    pic = picture(7)
    r = requests.post(img_server.url + "/v2/models/img/infer", data=png(pic),
                      headers={"Content-Type": "image/png"})
    np.testing.assert_allclose(output(ok_json(r))[0], box_2x4(pic), atol=1e-3)


def test_raw_body_of_a_modality_the_model_lacks(img_server):
    r = requests.post(img_server.url + "/v2/models/img/infer", data=b"hello",
                      headers={"Content-Type": "text/plain; charset=utf-8"})
    msg = assert_error_response(r, 415)
    assert "image/png" in msg


def test_raw_body_on_a_model_without_preprocessing(server_factory):
    srv = server_factory.start()  # simple only
    r = requests.post(srv.url + "/v2/models/simple/infer", data=png(picture(1)),
                      headers={"Content-Type": "image/png"})
    msg = assert_error_response(r, 415)
    assert "no preprocessing" in msg


def test_a_bad_element_names_its_index(img_server):
    r = bytes_infer_request(img_server.url, "img", "image", [png(picture(1)), b"not an image"])
    msg = assert_error_response(r, 400)
    assert msg.startswith("input 'image': element 1: ")


def metric_values(url, name):
    text = requests.get(url).text
    out = {}
    for line in text.splitlines():
        m = re.match(r'^%s\{([^}]*)\} (\S+)$' % re.escape(name), line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def test_metrics_per_step(img_server):
    for i in range(3):
        ok_json(bytes_infer_request(img_server.url, "img", "image", [png(picture(i))]))
    bytes_infer_request(img_server.url, "img", "image", [b"junk"])
    counts = metric_values(img_server.metrics_url,
                           "inferd_preprocess_duration_seconds_count")
    stages = {re.search(r'stage="([^"]+)"', k).group(1): v for k, v in counts.items()}
    assert stages["queue"] == 4
    assert stages["decode"] >= 3 and stages["resize"] == 3
    errors = metric_values(img_server.metrics_url, "inferd_preprocess_errors_total")
    assert errors['model="img",version="1",status="400"'] == 1


def test_a_full_waiting_line_answers_503(server_factory, tmp_path):
    big = {"color": "rgb", "resize": {"width": 64, "height": 64, "method": "bilinear"}}
    srv = server_factory.start("--model-repository", str(identity_repo(tmp_path, image_prep(big))),
                               "--preprocess-threads", "1", "--preprocess-queue", "1")
    rng = np.random.default_rng(0)
    image = png(rng.integers(0, 256, (1500, 1500, 3), dtype=np.uint8))
    statuses, retry_after = [], []
    lock = threading.Lock()

    def send():
        r = requests.post(srv.url + "/v2/models/img/infer", data=image,
                          headers={"Content-Type": "image/png"}, timeout=60)
        with lock:
            statuses.append(r.status_code)
            if r.status_code == 503:
                retry_after.append(r.headers.get("Retry-After"))
                assert "preprocess-queue" in r.json()["error"]

    threads = [threading.Thread(target=send) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(statuses) <= {200, 503} and statuses.count(200) >= 2, statuses
    assert statuses.count(503) >= 1, statuses
    assert retry_after and all(v == "1" for v in retry_after)
    errors = metric_values(srv.metrics_url, "inferd_preprocess_errors_total")
    assert errors['model="img",version="1",status="503"'] == statuses.count(503)


@pytest.mark.parametrize("prep, reason", [
    ({"inputs": [{"name": "image", "feeds": "nope", "image": GRAY_2X4}]},
     "feeds 'nope', which the model does not have"),
    ({"inputs": [{"name": "INPUT0", "feeds": "INPUT0", "image": GRAY_2X4}]},
     "already a model input"),
    ({"inputs": [{"name": "image", "feeds": "INPUT0", "video": {}}]}, "unknown key 'video'"),
    ({"inputs": [{"name": "a", "feeds": "INPUT0", "image": GRAY_2X4},
                 {"name": "b", "feeds": "INPUT0", "image": GRAY_2X4}]},
     "'INPUT0' is fed by both 'a' and 'b'"),
    ({"inputs": []}, "array of 1 to"),
])
def test_a_bad_preprocess_json_fails_the_load(server_factory, tmp_path, prep, reason):
    srv = server_factory.start("--model-repository", str(identity_repo(tmp_path, prep)),
                               wait=False)
    srv.wait_ready(path="/v2/health/live")
    index = requests.post(srv.url + "/v2/repository/index", json={}, timeout=10).json()
    entry = [e for e in index if e["name"] == "img"][0]
    assert entry["state"] == "UNAVAILABLE"
    assert "preprocess.json" in entry["reason"] and reason in entry["reason"], entry


def test_poll_mode_reloads_when_preprocess_json_changes(server_factory, tmp_path):
    root = identity_repo(tmp_path, image_prep())
    srv = server_factory.start("--model-repository", str(root), "--model-control-mode", "poll",
                               "--repository-poll-secs", "1")
    pic = picture(3)
    assert output(ok_json(bytes_infer_request(srv.url, "img", "image", [png(pic)]))).shape == (1, 8)
    wider = dict(GRAY_2X4, resize={"width": 8, "height": 4, "method": "area"})
    (root / "img" / "preprocess.json").write_text(json.dumps(image_prep(wider)))
    deadline = time.time() + 30
    while time.time() < deadline:
        doc = ok_json(bytes_infer_request(srv.url, "img", "image", [png(pic)]))
        if output(doc).shape == (1, 32):
            np.testing.assert_allclose(output(doc)[0], pic.reshape(-1), atol=1e-3)
            return
        time.sleep(0.3)
    pytest.fail("the model did not reload after preprocess.json changed")
