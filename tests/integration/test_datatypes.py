"""Round trip of every KServe v2 datatype through the identity_<type> models.

Expected values are computed with numpy: what the model sees is the JSON
value converted to the tensor's element type, and the response must encode
exactly that element back.
"""
import math

import numpy as np
import pytest

from conftest import ok_json

F32_NEEDS_9 = [  # float32 values whose shortest round-trip form has 9 digits
    1012.7109375,        # 1012.71094  (%.8g gives 1012.7109, a different float)
    15241.4794921875,    # 15241.4795
    1019.3348388671875,  # 1019.33484
    111485816.0,         # 1.11485816e8
    -118973464.0,
    1.00000011920928955078125,  # 1 + 2^-23
]

CASES = {
    "BOOL": (np.bool_, [True, False, False, True, True]),
    "UINT8": (np.uint8, [0, 1, 127, 128, 254, 255]),
    "UINT16": (np.uint16, [0, 1, 255, 256, 32768, 65535]),
    "UINT32": (np.uint32, [0, 1, 65536, 2147483648, 4294967295]),
    "UINT64": (np.uint64, [0, 1, 4294967296, 9007199254740993, 9223372036854775808,
                           18446744073709551615]),
    "INT8": (np.int8, [-128, -1, 0, 1, 127]),
    "INT16": (np.int16, [-32768, -1, 0, 1, 32767]),
    "INT32": (np.int32, [-2147483648, -1, 0, 1, 2147483647]),
    "INT64": (np.int64, [-9223372036854775808, -9007199254740993, -1, 0, 1,
                         9007199254740993, 9223372036854775807]),
    "FP16": (np.float16, [0.5, 65504.0, -2.0, 5.960464477539063e-08, 0.0, -0.0,
                          1.0009765625, 6.103515625e-05, -65504.0, 0.333251953125]),
    "FP32": (np.float32, [0.0, -0.0, 1.0, 0.1, -2.5, 3.4028234663852886e38,
                          -3.4028234663852886e38, 1.1754943508222875e-38,
                          1.401298464324817e-45, 16777216.0] + F32_NEEDS_9),
    "FP64": (np.float64, [0.0, -0.0, 1e308, -1e308, 1.7976931348623157e308, 5e-324,
                          2.2250738585072014e-308, 0.1, 1.0 / 3.0, -123456789.12345679,
                          9007199254740993.0]),
    "BYTES": (object, ["", "a", "hello world", "h\u00e9llo \u65e5\u672c \U0001F642",
                       "a\u0000b", "\"\\/\b\f\n\r\t", "x" * 1000]),
}


def expected_for(datatype, values):
    npt, _ = CASES[datatype]
    if datatype == "BYTES":
        return list(values)
    return np.array(values, dtype=np.float64 if npt in (np.float16, np.float32) else npt).astype(npt)


def check_data(datatype, got, expected):
    """Compare decoded JSON `got` (flat list) with the numpy `expected`."""
    npt, _ = CASES[datatype]
    if datatype == "BYTES":
        assert all(isinstance(v, str) for v in got), got
        assert got == expected
        return
    exp = np.asarray(expected).reshape(-1)
    assert len(got) == len(exp)
    if datatype == "BOOL":
        assert all(isinstance(v, bool) for v in got), got
        assert got == exp.tolist()
    elif npt in (np.float16, np.float32, np.float64):
        assert all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in got), got
        # The JSON number must denote exactly the element the model computed:
        # converting it to the element type gives back the same bits.
        g = np.array(got, dtype=np.float64).astype(npt)
        assert g.tobytes() == exp.astype(npt).tobytes(), (got, exp.tolist())
        # signed zeros survive
        assert [math.copysign(1, v) for v in got] == [math.copysign(1, float(v)) for v in exp]
    else:
        assert all(isinstance(v, int) and not isinstance(v, bool) for v in got), got
        assert got == [int(v) for v in exp]


def run_identity(infer, datatype, data, shape):
    model = "identity_" + datatype.lower()
    body = ok_json(infer(model, [{"name": "INPUT0", "datatype": datatype, "shape": shape,
                                  "data": data}]))
    assert body["model_name"] == model
    assert len(body["outputs"]) == 1
    out = body["outputs"][0]
    assert out["name"] == "OUTPUT0"
    assert out["datatype"] == datatype
    assert out["shape"] == shape
    return out["data"]


@pytest.mark.parametrize("datatype", list(CASES))
def test_round_trip_flat(infer, datatype):
    values = CASES[datatype][1]
    got = run_identity(infer, datatype, values, [1, len(values)])
    check_data(datatype, got, expected_for(datatype, values))


@pytest.mark.parametrize("datatype", list(CASES))
def test_round_trip_nested_column(infer, datatype):
    values = CASES[datatype][1]
    got = run_identity(infer, datatype, [[v] for v in values], [len(values), 1])
    check_data(datatype, got, expected_for(datatype, values))


@pytest.mark.parametrize("datatype", list(CASES))
def test_round_trip_2d_row_major(infer, datatype):
    values = (CASES[datatype][1] * 2)[:6]
    if len(values) < 6:
        values = (values * 6)[:6]
    nested = [values[0:3], values[3:6]]
    got = run_identity(infer, datatype, nested, [2, 3])
    check_data(datatype, got, expected_for(datatype, values))


def test_fp32_rounds_doubles_to_float32(infer):
    """Doubles that are not float32 values arrive as the nearest float32."""
    values = [0.1, 1.0 / 3.0, 2.0 ** -30 + 1.0, 1e-40, 123456789.0]
    got = run_identity(infer, "FP32", values, [1, len(values)])
    check_data("FP32", got, np.array(values, dtype=np.float64).astype(np.float32))


def test_fp16_rounds_doubles_to_half(infer):
    values = [0.1, 1.0 / 3.0, 1000.1, 3e-08, -7.77]
    got = run_identity(infer, "FP16", values, [1, len(values)])
    check_data("FP16", got, np.array(values, dtype=np.float64).astype(np.float16))


def test_fp16_all_exponents(infer):
    """Every power of two representable in half precision, subnormals included."""
    values = [2.0 ** e for e in range(-24, 16)] + [-(2.0 ** e) for e in range(-24, 16)]
    got = run_identity(infer, "FP16", values, [2, len(values) // 2])
    check_data("FP16", got, np.array(values, dtype=np.float16))


def test_int64_random(infer):
    """Large batch of random INT64 values survives exactly."""
    rng = np.random.default_rng(7)
    a = rng.integers(np.iinfo(np.int64).min, np.iinfo(np.int64).max, size=(8, 32),
                     dtype=np.int64, endpoint=True)
    got = run_identity(infer, "INT64", a.tolist(), [8, 32])
    assert got == a.reshape(-1).tolist()


def test_uint64_random(infer):
    rng = np.random.default_rng(8)
    a = rng.integers(0, np.iinfo(np.uint64).max, size=(4, 16), dtype=np.uint64, endpoint=True)
    got = run_identity(infer, "UINT64", a.tolist(), [4, 16])
    assert got == [int(v) for v in a.reshape(-1)]


def test_fp64_random_bits(infer):
    rng = np.random.default_rng(9)
    bits = rng.integers(0, 2 ** 63 - 1, size=64, dtype=np.int64)
    a = bits.view(np.float64)
    a = a[np.isfinite(a)]
    got = run_identity(infer, "FP64", a.tolist(), [1, len(a)])
    assert np.array(got, dtype=np.float64).tobytes() == a.tobytes()


def test_fp32_random_bits(infer):
    rng = np.random.default_rng(10)
    bits = rng.integers(0, 2 ** 31 - 1, size=64, dtype=np.int32)
    a = bits.view(np.float32)
    a = a[np.isfinite(a)]
    got = run_identity(infer, "FP32", [float(v) for v in a], [1, len(a)])
    check_data("FP32", got, a)
