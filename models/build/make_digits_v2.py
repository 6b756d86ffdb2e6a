#!/usr/bin/env python3
"""Build tests/models/digits_v2/2/model.onnx: a deliberately different version 2
of the bundled `digits` classifier, for traffic-shadowing / A-B tests.

Same data, same split and the same graph as models/build/make_digits.py (its
split(), train(), build_graph() and onnx_math() are reused), so the file can be
served as version 2 of `digits` next to models/digits/1: input `pixels` FP32
[batch, 64], outputs `probabilities` FP32 [batch, 10] and `label` INT64 [batch].
Only the classifier differs: 32 hidden units, alpha=1e-2, random_state=1.
The two versions agree on most held-out labels but not all, and their
probabilities differ clearly; the script prints and checks both.

Not served by default: the directory is named "2" so that tests can put the
file next to models/digits/1 as version 2.

Run from the repo root: /usr/bin/python3 models/build/make_digits_v2.py
"""
import os

import numpy as np
import onnx
from sklearn.neural_network import MLPClassifier

import make_digits

ROOT = make_digits.ROOT
OUT = os.path.join(ROOT, "tests", "models", "digits_v2", "2", "model.onnx")

HIDDEN = 32
ALPHA = 1e-2
RANDOM_STATE = 1


def main():
    # Version 1, retrained exactly as make_digits.py does (deterministic).
    clf1, X_test, y_test = make_digits.train()
    _, params1 = make_digits.build_graph(clf1)
    proba1, label1 = make_digits.onnx_math(X_test, params1)

    clf2, X_test2, y_test2 = make_digits.train(MLPClassifier(
        hidden_layer_sizes=(HIDDEN,), activation="relu", solver="adam",
        alpha=ALPHA, max_iter=1000, random_state=RANDOM_STATE))
    assert (X_test2 == X_test).all() and (y_test2 == y_test).all()
    acc = clf2.score(X_test * make_digits.SCALE, y_test)
    print("v2 held-out accuracy: %.4f (%d/%d), iterations: %d"
          % (acc, int(round(acc * len(y_test))), len(y_test), clf2.n_iter_))

    model, params2 = make_digits.build_graph(
        clf2, producer_name="inferd-make_digits_v2",
        doc_string=("digits version 2: MLPClassifier(%d relu, alpha=%g, "
                    "random_state=%d) trained on sklearn load_digits; "
                    "input raw 8x8 pixels 0..16" % (HIDDEN, ALPHA, RANDOM_STATE)))
    proba2, label2 = make_digits.onnx_math(X_test, params2)
    ref = clf2.predict_proba(X_test * make_digits.SCALE)
    diff = float(np.abs(proba2 - ref).max())
    print("max |onnx math - predict_proba|: %.3g" % diff)
    assert diff < 1e-5, diff
    assert (label2 == clf2.predict(X_test * make_digits.SCALE)).all()

    agree = int((label1 == label2).sum())
    max_abs = float(np.abs(proba1 - proba2).max())
    print("v1/v2 labels agree on %d/%d held-out images (%.2f %%); "
          "max |p1 - p2| = %.4f" % (agree, len(y_test), 100.0 * agree / len(y_test),
                                   max_abs))
    # Shadowing tests need both agreement and disagreement.
    assert 0.90 * len(y_test) <= agree < len(y_test), agree
    assert max_abs > 1e-2, max_abs

    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    onnx.save(model, OUT)
    print("wrote %s" % os.path.relpath(OUT, ROOT))


if __name__ == "__main__":
    main()
