#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets (corpus/frame, corpus/handshake).

The seeds are committed; rerun this only when the wire format changes. Each
seed is a whole frame as a peer sends it: header (transport/wire/frame.hpp
layout, little-endian) then payload.
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
MAGIC, VERSION = 0x4C43434D, 2
HELLO, HELLO_ACK, REFUSE, DATA, ABORT, HEARTBEAT, BYE = range(1, 8)


def frame(kind, payload=b"", flags=0, comm=7, aux=0, seq=0, step=0, chunk=0, crc=0,
          op_count=0, op_desc=0, op_arg=0):
    head = struct.pack("<IBBHIIQIIIIQII", MAGIC, VERSION, kind, flags, comm, aux, seq, step,
                       chunk, len(payload), crc, op_count, op_desc, op_arg)
    assert len(head) == 56
    return head + payload


def hello(src, dst, world, token):
    t = token.encode()
    return struct.pack("<IIIH", src, dst, world, len(t)) + t


SEEDS = {
    "frame": {
        "hello": frame(HELLO, hello(2, 1, 4, "fuzz-job-token")),
        "hello_ack": frame(HELLO_ACK, hello(1, 2, 4, "fuzz-job-token")),
        "refuse": frame(REFUSE, b"wrong job token"),
        "data": frame(DATA, bytes(range(64)), seq=3, step=1, chunk=2, op_count=64,
                      op_desc=1 | (0 << 8) | (0 << 16)),
        "data_crc": frame(DATA, b"\x01\x02\x03\x04", flags=1, crc=0xDEADBEEF, op_count=4),
        "p2p": frame(DATA, b"\x00" * 16, flags=2, aux=9, op_count=16),
        "abort": frame(ABORT, "rank 2 called abort: \u00e9t\u00e9".encode(), aux=2, step=9),
        "heartbeat": frame(HEARTBEAT),
        "bye": frame(BYE, seq=42),
    },
    "handshake": {
        "good": frame(HELLO, hello(2, 1, 4, "fuzz-job-token")),
        "wrong_token": frame(HELLO, hello(2, 1, 4, "another-token")),
        "duplicate": frame(HELLO, hello(3, 1, 4, "fuzz-job-token")),
        "outside": frame(HELLO, struct.pack("<IIIH", 9, 1, 4, 0)),
        "wrong_comm": frame(HELLO, hello(2, 1, 4, "fuzz-job-token"), comm=8),
        "bad_version": frame(HELLO, hello(2, 1, 4, "fuzz-job-token"))[:4] + b"\x03"
                       + frame(HELLO, hello(2, 1, 4, "fuzz-job-token"))[5:],
    },
}

for target, seeds in SEEDS.items():
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
