"""bench/distance.py's proxy counts round trips from the protocol as it passes: a request sent
while an answer is outstanding rides in the same trip, a prepared statement's Bind is named by
its Parse, and messages split across chunks are read whole."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from distance import Counts, Wire

APPEND = "WITH upd AS ( UPDATE runs SET last_seq = $1"


def msg(kind: bytes, body: bytes = b"") -> bytes:
    return kind + struct.pack("!i", 4 + len(body)) + body


def startup() -> bytes:
    body = struct.pack("!i", 196608) + b"user\0postgres\0\0"
    return struct.pack("!i", 4 + len(body)) + body


def parse(name: bytes, text: str) -> bytes:
    return msg(b"P", name + b"\0" + text.encode() + b"\0" + struct.pack("!h", 0))


def bind(statement: bytes) -> bytes:
    return msg(b"B", b"\0" + statement + b"\0" + b"\0" * 6)


READY = msg(b"Z", b"I")


def test_round_trips_are_counted_from_the_protocol() -> None:
    counts = Counts()
    wire = Wire(counts)
    wire.client(startup())
    wire.server(msg(b"R", struct.pack("!i", 0)) + READY)  # the start-up answered
    stream = parse(b"", "SET statement_timeout = 5000") + bind(b"") + msg(b"S")
    for i in range(0, len(stream), 7):  # messages split across chunks
        wire.client(stream[i : i + 7])
    assert (counts.connects, counts.trips) == (1, 1)
    reply = msg(b"1") + msg(b"2") + READY
    wire.server(reply[:3])
    wire.server(reply[3:])
    # A prepared append, then two executions of it pipelined: two trips in all.
    wire.client(parse(b"s1", APPEND) + msg(b"S"))
    wire.server(msg(b"1") + READY)
    wire.client(bind(b"s1") + msg(b"E", b"\0" + b"\0" * 4) + msg(b"S"))
    wire.client(bind(b"s1") + msg(b"S"))  # sent before the first answer: the same trip
    wire.server(READY)
    wire.server(READY)
    wire.client(msg(b"Q", b"LISTEN x\0"))
    wire.server(READY)
    assert counts.trips == 4
    assert dict(counts.by_trip) == {
        "a new connection's settings": 1,
        "append (one run)": 2,
        "LISTEN x": 1,
    }
    assert counts.statements["append (one run)"] == 3
