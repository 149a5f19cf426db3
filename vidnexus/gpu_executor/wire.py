"""InferRequest / InferReply on the bus: versioned msgpack records (DESIGN §4).

Example:
    >>> import numpy as np
    >>> req = InferRequest("r1", "lenet5-100ms", deadline_wall=1.5, reply_to="vnx.replies.c1",
    ...                    input=np.zeros((1, 28, 28), np.float32), stream="cam-1", frame_no=7)
    >>> back = decode_request(encode_request(req))
    >>> back.request_id, back.input.shape, back.frame_no
    ('r1', (1, 28, 28), 7)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgpack
import numpy as np

from vidnexus.errors import CodecError

__all__ = ["InferRequest", "WireReply", "encode_request", "decode_request", "encode_reply", "decode_reply",
           "WIRE_VERSION"]

WIRE_VERSION = 1


@dataclass(frozen=True)
class InferRequest:
    request_id: str
    session_id: str
    deadline_wall: float
    reply_to: str
    input: np.ndarray
    app: str = ""
    stream: str = ""
    frame_no: int = -1


@dataclass(frozen=True)
class WireReply:
    request_id: str
    session_id: str
    ok: bool
    output: Any = None
    reason: str | None = None
    latency_s: float = 0.0
    batch: int = 0
    executor_latency_s: float = 0.0


def _arr(a: np.ndarray) -> list[Any]:
    a = np.ascontiguousarray(a)
    return [a.dtype.str, list(a.shape), a.tobytes()]


def _unarr(v: Any) -> np.ndarray:
    dtype, shape, raw = v
    return np.frombuffer(raw, dtype=np.dtype(dtype)).reshape(shape)


def encode_request(r: InferRequest) -> bytes:
    return msgpack.packb([WIRE_VERSION, "req", r.request_id, r.session_id, r.deadline_wall, r.reply_to,
                          _arr(r.input), r.app, r.stream, r.frame_no], use_bin_type=True)


def _load(raw: bytes, kind: str, n: int) -> list[Any]:
    try:
        v = msgpack.unpackb(raw, raw=False)
    except Exception as e:
        raise CodecError(f"malformed {kind} message: {e}") from None
    if not isinstance(v, list) or len(v) < 2:
        raise CodecError(f"malformed {kind} message: not a versioned record")
    if v[0] != WIRE_VERSION:
        raise CodecError(f"unknown {kind} message version {v[0]!r} (this build reads {WIRE_VERSION})")
    if v[1] != kind or len(v) != n:
        raise CodecError(f"malformed {kind} message: kind {v[1]!r} with {len(v)} fields")
    return v


def decode_request(raw: bytes) -> InferRequest:
    v = _load(raw, "req", 10)
    try:
        return InferRequest(str(v[2]), str(v[3]), float(v[4]), str(v[5]), _unarr(v[6]), str(v[7]),
                            str(v[8]), int(v[9]))
    except (TypeError, ValueError) as e:
        raise CodecError(f"malformed req message: {e}") from None


def encode_reply(r: WireReply) -> bytes:
    return msgpack.packb([WIRE_VERSION, "rep", r.request_id, r.session_id, r.ok, r.output, r.reason,
                          r.latency_s, r.batch], use_bin_type=True)


def decode_reply(raw: bytes) -> WireReply:
    v = _load(raw, "rep", 9)
    return WireReply(str(v[2]), str(v[3]), bool(v[4]), v[5], v[6], float(v[7]), int(v[8]))
