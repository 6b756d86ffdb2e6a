#!/usr/bin/env python3
"""Build models/digits/1/model.onnx: a real 8x8 handwritten-digit classifier.

Trains sklearn's MLPClassifier on the bundled load_digits() data (no
download), then writes the learned weights by hand into an ONNX graph:

  pixels FP32 [batch, 64]  raw pixel values 0..16, as in load_digits
    -> Mul(1/16)           scaling done inside the graph
    -> MatMul W1 + b1 -> Relu          (64 hidden units)
    -> MatMul W2 + b2 -> logits [batch, 10]
    -> Softmax(axis=1)     => probabilities FP32 [batch, 10]
    -> ArgMax(axis=1, keepdims=0) => label INT64 [batch]

Also writes models/digits/sample.json (a KServe v2 infer request with one
held-out test image) and checks the ONNX math against predict_proba.

Run from the repo root: /usr/bin/python3 models/build/make_digits.py
"""
import json
import os
import warnings

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "models", "digits", "1", "model.onnx")
SAMPLE = os.path.join(ROOT, "models", "digits", "sample.json")
SAMPLE_INDEX = 0  # which held-out test image goes into sample.json

SCALE = 1.0 / 16.0


def split():
    """load_digits() split 75/25 (stratified, random_state=0): the split every
    digits version is trained and evaluated on. Pixels are raw 0..16."""
    digits = load_digits()
    X = digits.data.astype(np.float64)  # values 0..16
    y = digits.target
    return train_test_split(X, y, test_size=0.25, stratify=y, random_state=0)


def train(clf=None):
    """Fit `clf` (default: version 1's classifier) on the training split."""
    X_train, X_test, y_train, y_test = split()
    if clf is None:
        clf = MLPClassifier(hidden_layer_sizes=(64,), activation="relu",
                            solver="adam", alpha=1e-4, max_iter=1000,
                            random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # fail loudly if it does not converge
        clf.fit(X_train * SCALE, y_train)
    return clf, X_test, y_test


def build_graph(clf, producer_name="inferd-make_digits", doc_string=None):
    """The ONNX graph for a fitted one-hidden-layer relu MLPClassifier (any
    hidden size); same input/output names, dtypes and shapes for every size."""
    assert len(clf.coefs_) == 2
    assert list(clf.classes_) == list(range(10))
    assert clf.out_activation_ == "softmax" and clf.activation == "relu"
    W1, W2 = (w.astype(np.float32) for w in clf.coefs_)
    b1, b2 = (b.astype(np.float32) for b in clf.intercepts_)
    inits = [
        numpy_helper.from_array(np.array(SCALE, dtype=np.float32), "scale"),
        numpy_helper.from_array(W1, "W1"),
        numpy_helper.from_array(b1, "b1"),
        numpy_helper.from_array(W2, "W2"),
        numpy_helper.from_array(b2, "b2"),
    ]
    nodes = [
        helper.make_node("Mul", ["pixels", "scale"], ["x"], name="scale"),
        helper.make_node("MatMul", ["x", "W1"], ["h_mm"], name="fc1"),
        helper.make_node("Add", ["h_mm", "b1"], ["h_pre"], name="fc1_bias"),
        helper.make_node("Relu", ["h_pre"], ["h"], name="relu"),
        helper.make_node("MatMul", ["h", "W2"], ["o_mm"], name="fc2"),
        helper.make_node("Add", ["o_mm", "b2"], ["logits"], name="fc2_bias"),
        helper.make_node("Softmax", ["logits"], ["probabilities"], name="softmax",
                         axis=1),
        helper.make_node("ArgMax", ["logits"], ["label"], name="argmax",
                         axis=1, keepdims=0),
    ]
    inputs = [helper.make_tensor_value_info("pixels", TensorProto.FLOAT, ["batch", 64])]
    outputs = [
        helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["batch", 10]),
        helper.make_tensor_value_info("label", TensorProto.INT64, ["batch"]),
    ]
    graph = helper.make_graph(nodes, "digits", inputs, outputs, initializer=inits)
    model = helper.make_model(graph, producer_name=producer_name,
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    if doc_string is None:
        doc_string = ("MLPClassifier(%d relu) trained on sklearn load_digits; "
                      "input raw 8x8 pixels 0..16" % W1.shape[1])
    model.doc_string = doc_string
    onnx.checker.check_model(model)
    return model, (W1, b1, W2, b2)


def onnx_math(X, params):
    """The graph's formula evaluated in numpy float32."""
    W1, b1, W2, b2 = params
    x = X.astype(np.float32) * np.float32(SCALE)
    h = np.maximum(x @ W1 + b1, 0)
    logits = h @ W2 + b2
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True), logits.argmax(axis=1)


def main():
    clf, X_test, y_test = train()
    acc = clf.score(X_test * SCALE, y_test)
    print("held-out accuracy: %.4f (%d/%d), iterations: %d"
          % (acc, int(round(acc * len(y_test))), len(y_test), clf.n_iter_))

    model, params = build_graph(clf)
    proba, label = onnx_math(X_test, params)
    ref = clf.predict_proba(X_test * SCALE)
    diff = float(np.abs(proba - ref).max())
    print("max |onnx math - predict_proba|: %.3g" % diff)
    assert diff < 1e-5, diff
    assert (label == clf.predict(X_test * SCALE)).all()

    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    onnx.save(model, OUT)
    print("wrote %s" % os.path.relpath(OUT, ROOT))

    img = X_test[SAMPLE_INDEX]
    body = {"inputs": [{"name": "pixels", "shape": [1, 64], "datatype": "FP32",
                        "data": [float(v) for v in img]}]}
    with open(SAMPLE, "w") as f:
        json.dump(body, f)
        f.write("\n")
    print("wrote %s: true label %d, predicted %d (p=%.4f)"
          % (os.path.relpath(SAMPLE, ROOT), y_test[SAMPLE_INDEX],
             label[SAMPLE_INDEX], proba[SAMPLE_INDEX].max()))


if __name__ == "__main__":
    main()
