"""Malformed records of every kind a role reads (issue 19 item 3): valid records mutated — cut
short, bytes flipped, each field replaced by a value of another type, wrong kinds and versions —
and random bytes. Used by the decoder tests (tests/unit/contracts/test_malformed.py) and by the
``malformed`` fault run (tests/reliability/faults.py), which publishes them on every topic."""

from __future__ import annotations

import json
import random
from typing import Any, Callable

import msgpack
import numpy as np

from vidnexus.contracts.frames import decode_frame, encode_frame
from vidnexus.contracts.plans import EpochPlan, decode_plan, encode_plan
from vidnexus.contracts.profile import Profile
from vidnexus.contracts.replies import Reply
from vidnexus.contracts.reports import AppReport, FanOut, decode_report, encode_report
from vidnexus.contracts.requests import InferRequest, decode_reply, decode_request, encode_reply, encode_request
from vidnexus.contracts.rows import decode_rows, encode_rows
from vidnexus.contracts.schema import Column, TableSchema
from vidnexus.contracts.stats import ExecutorStats, SessionStats, decode_stats, encode_stats
from vidnexus.errors import CodecError
from vidnexus.testing import frame_factory

ODD = [None, True, -1, 2**64 - 1, 1e308, float("nan"), "x", "", b"\xff\x00", [], [[1, 2]], {}, {"a": [1]}]


def valid() -> dict[str, tuple[bytes, Callable[[bytes], Any]]]:
    """Source → (a valid record, its decoder)."""
    schema = TableSchema("t", (Column("a", "UInt32"), Column("b", "String")), ("a",))
    stats = ExecutorStats("e1", "cpu", 1.0, {"s": 2}, ("s",), {"m": Profile.linear(0.001, 0.002, 8)},
                          (SessionStats("s", "m", 100.0, "plan", 3, 2, 1, {"deadline": 1}, {"4": 2}, 2.0, 5.0),), 1.0)
    return {
        "frames": (encode_frame(frame_factory("cam", 3)), decode_frame),
        "requests": (encode_request(InferRequest("r1", "s", 5.0, "vnx.replies.c", (np.zeros((2, 3), np.uint8),),
                                                 "app", "cam", 3)), decode_request),
        "replies": (encode_reply("r1", "s", [Reply(True, [0.5, 1.0], None, 0.01, 4)]), decode_reply),
        "rows": (encode_rows({"t": [(1, "x"), (2, "y")]}, {"t": schema}), decode_rows),
        "control": (encode_plan(EpochPlan(1, 2, 3.0, {"e1": {"s": 2}}, {"s": {"e1": 1.0}})), decode_plan),
        "stats": (encode_stats(stats), decode_stats),
        "apps": (encode_report(AppReport("app", "w", 100.0, ("a", "b"), (("a", "b"),),
                                         FanOut(3, {"a": 3}, {"a": 3}, {("a", "b"): 6}), 1.0)), decode_report),
    }


def mutations(raw: bytes, rng: random.Random) -> list[bytes]:
    """Records made from ``raw`` that may or may not decode."""
    out = [b"", b"\x00", raw[:1], raw[: len(raw) // 2], raw[:-1], raw + b"\x00", bytes(rng.randrange(256) for _ in range(64))]
    for _ in range(40):
        b = bytearray(raw)
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        out.append(bytes(b))
    try:  # JSON documents: every field replaced by odd values
        doc = json.loads(raw)
        for k in list(doc):
            for odd in ODD:
                if isinstance(odd, bytes):
                    continue
                out.append(json.dumps({**doc, k: odd}).encode())
            out.append(json.dumps({kk: vv for kk, vv in doc.items() if kk != k}).encode())
        out += [b"[]", b"null", b'"plan"', json.dumps({**doc, "v": 99}).encode()]
    except ValueError:  # msgpack records: every field (and one level inside lists) replaced
        rec = msgpack.unpackb(raw, raw=False)
        for i in range(len(rec)):
            for odd in ODD:
                out.append(msgpack.packb([*rec[:i], odd, *rec[i + 1:]], use_bin_type=True))
            if isinstance(rec[i], list):
                for j in range(len(rec[i])):
                    for odd in ODD:
                        inner = [*rec[i][:j], odd, *rec[i][j + 1:]]
                        out.append(msgpack.packb([*rec[:i], inner, *rec[i + 1:]], use_bin_type=True))
            if isinstance(rec[i], dict):
                for k in rec[i]:
                    for odd in ODD:
                        out.append(msgpack.packb([*rec[:i], {**rec[i], k: odd}, *rec[i + 1:]], use_bin_type=True))
        out += [msgpack.packb(rec[:-1], use_bin_type=True), msgpack.packb([*rec, 1], use_bin_type=True),
                msgpack.packb({"v": 1}, use_bin_type=True)]
    return out


def undecodable(source: str, n: int, seed: int = 0) -> list[bytes]:
    """``n`` records of ``source`` that its decoder refuses (CodecError)."""
    raw, decode = valid()[source]
    out = []
    for bad in mutations(raw, random.Random(f"{source}{seed}")):
        try:
            decode(bad)
        except CodecError:
            out.append(bad)
            if len(out) == n:
                break
    return out
