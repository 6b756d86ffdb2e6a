#!/usr/bin/python3
"""Writes the seed corpus of fuzz_h2 (tests/fuzz/corpus/h2/): one control
byte (see fuzz_h2.c; bit 0 set: the target prepends the client preface)
followed by client frames built by hand, HPACK as literal fields."""
import struct
from pathlib import Path

OUT = Path(__file__).resolve().parent / "corpus" / "h2"
DATA, HEADERS, PRIORITY, RST, SETTINGS, PUSH, PING, GOAWAY, WINDOW, CONT = range(10)


def frame(t, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + struct.pack(">BBI", t, flags, sid) + payload


def lit(name, value, index=False):
    def s(x):
        x = x.encode()
        assert len(x) < 127
        return bytes([len(x)]) + x
    return (b"\x40" if index else b"\x00") + s(name) + s(value)


def req(method, path, *extra):
    return b"".join(lit(n, v) for n, v in ((":method", method), (":scheme", "http"),
                                           (":path", path), (":authority", "x")) + extra)


SET = frame(SETTINGS, 0, 0, struct.pack(">HI", 4, 1 << 20))
GRPC = (("content-type", "application/grpc"), ("te", "trailers"))
seeds = {
    "get": (0x41, SET + frame(HEADERS, 5, 1, req("GET", "/v2/health/live"))),
    "head": (0x41, SET + frame(HEADERS, 5, 1, req("HEAD", "/v2"))),
    "post": (0x51, SET + frame(HEADERS, 4, 1, req("POST", "/v2/models/m/infer",
                                                      ("content-length", "10"))) +
             frame(DATA, 0, 1, b"{\"in\":") + frame(DATA, 1, 1, b"[1]}")),
    "grpc": (0x61, SET + frame(HEADERS, 4, 1, req("POST", "/inference.GRPCInferenceService/ServerLive", *GRPC)) +
             frame(DATA, 1, 1, b"\x00\x00\x00\x00\x00")),
    "grpc_empty": (0x01, frame(HEADERS, 5, 1, req("POST", "/x.Y/Z", *GRPC))),
    "rst": (0x03, SET + frame(HEADERS, 4, 1, req("POST", "/v2/models/m/infer")) +
            frame(RST, 0, 1, struct.pack(">I", 8)) + frame(HEADERS, 5, 3, req("GET", "/v2"))),
    "ping_goaway": (0x01, SET + frame(PING, 0, 0, b"12345678") + frame(SETTINGS, 1, 0) +
                    frame(GOAWAY, 0, 0, struct.pack(">II", 0, 0))),
    "continuation": (0x21, frame(HEADERS, 1, 1, req("GET", "/v2")[:20]) +
                     frame(CONT, 4, 1, req("GET", "/v2")[20:])),
    "window_priority": (0x01, frame(WINDOW, 0, 0, struct.pack(">I", 1000)) +
                        frame(PRIORITY, 0, 1, struct.pack(">IB", 0, 16)) +
                        frame(HEADERS, 0x25, 1, struct.pack(">IB", 0, 16) + req("GET", "/v2")) +
                        frame(WINDOW, 0, 1, struct.pack(">I", 1000))),
    "indexed": (0x01, frame(HEADERS, 5, 1, req("GET", "/v2", ("x-a", "b")) + lit("x-i", "v" * 50, True)) +
                frame(HEADERS, 5, 3, req("GET", "/v2") + b"\xbe\xbe\xbe")),
    "tight": (0x05, frame(HEADERS, 5, 1, req("GET", "/v2", ("a", "1"), ("b", "2"), ("c", "3"),
                                              ("d", "4"), ("e", "5"))) +
              frame(HEADERS, 4, 3, req("POST", "/p")) + frame(DATA, 1, 3, b"x" * 64)),
    "detached": (0x0b, frame(HEADERS, 5, 1, req("GET", "/v2")) +
                 frame(HEADERS, 5, 3, req("GET", "/v2/models")) + frame(RST, 0, 3, struct.pack(">I", 8))),
    "no_preface": (0x00, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + SET + frame(HEADERS, 5, 1, req("GET", "/"))),
    "bad_preface": (0x00, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
}
OUT.mkdir(parents=True, exist_ok=True)
for name, (ctl, body) in seeds.items():
    (OUT / name).write_bytes(bytes([ctl]) + body)
