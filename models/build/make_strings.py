#!/usr/bin/env python3
"""Build models/strings/1/model.onnx: a BYTES (ONNX STRING) model.

TEXT: STRING [batch]
UPPER = StringNormalizer(TEXT, case_change_action="UPPER", is_case_sensitive=1,
                         locale="C.UTF-8")
ECHO  = Identity(TEXT)

Run from the repo root: /usr/bin/python3 models/build/make_strings.py
"""
import os

import onnx
from onnx import TensorProto, helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "models", "strings", "1", "model.onnx")

# ONNX Runtime's StringNormalizer builds a C++ std::locale from this name at
# session creation and fails if the locale is not installed. The ONNX default
# is "en_US.UTF-8", which minimal containers lack; "C.UTF-8" is built into
# glibc >= 2.35 (Debian 12+) and still upper-cases non-ASCII letters.
LOCALE = "C.UTF-8"


def main():
    shape = ["batch"]
    inputs = [helper.make_tensor_value_info("TEXT", TensorProto.STRING, shape)]
    outputs = [helper.make_tensor_value_info(n, TensorProto.STRING, shape)
               for n in ("UPPER", "ECHO")]
    nodes = [
        helper.make_node("StringNormalizer", ["TEXT"], ["UPPER"], name="upper",
                         case_change_action="UPPER", is_case_sensitive=1,
                         locale=LOCALE),
        helper.make_node("Identity", ["TEXT"], ["ECHO"], name="echo"),
    ]
    graph = helper.make_graph(nodes, "strings", inputs, outputs)
    model = helper.make_model(graph, producer_name="inferd-make_strings",
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    onnx.save(model, OUT)
    print("wrote %s" % os.path.relpath(OUT, ROOT))


if __name__ == "__main__":
    main()
