"""DNN requests and their replies on the bus (DESIGN §4).

A request names its session, carries its input and an absolute wall-clock deadline, and says where
to reply; the reply is a :class:`~vidnexus.contracts.replies.Reply` with the request's id.

Example:
    >>> import numpy as np
    >>> req = InferRequest("r1", "lenet5-100ms", deadline_wall=1.5, reply_to="vnx.replies.c1",
    ...                    input=np.zeros((1, 28, 28), np.float32), stream="cam-1", frame_no=7)
    >>> back = decode_request(encode_request(req))
    >>> back.request_id, back.input.shape, back.frame_no
    ('r1', (1, 28, 28), 7)
    >>> decode_reply(encode_reply("r1", "lenet5-100ms", Reply.dropped("deadline")))
    ('r1', 'lenet5-100ms', Reply(ok=False, output=None, reason='deadline', latency_s=0.0, batch=0))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from vidnexus.contracts.codec import pack, unpack
from vidnexus.contracts.replies import Reply
from vidnexus.errors import CodecError

__all__ = ["InferRequest", "encode_request", "decode_request", "encode_reply", "decode_reply", "WIRE_VERSION"]

WIRE_VERSION = 2
"""2: requests ``[2, "req", id, session, deadline_wall, reply_to, [dtype, shape, bytes], app, stream,
frame_no]``; replies ``[2, "rep", id, session, ok, output, reason, latency_s, batch]``."""


@dataclass(frozen=True)
class InferRequest:
    request_id: str
    session_id: str
    deadline_wall: float
    reply_to: str
    input: Any
    app: str = ""
    stream: str = ""
    frame_no: int = -1


def _arr(a: Any) -> list[Any]:
    a = np.ascontiguousarray(a)
    return [a.dtype.str, list(a.shape), a.tobytes()]


def _unarr(v: Any) -> Any:
    dtype, shape, raw = v
    return np.frombuffer(raw, dtype=np.dtype(dtype)).reshape(shape)


def encode_request(r: InferRequest) -> bytes:
    return pack("req", WIRE_VERSION, [r.request_id, r.session_id, r.deadline_wall, r.reply_to, _arr(r.input),
                                      r.app, r.stream, r.frame_no])


def decode_request(raw: bytes) -> InferRequest:
    """Raises CodecError on an unknown version or a malformed message."""
    v = unpack(raw, "req", WIRE_VERSION, 8)
    try:
        return InferRequest(str(v[0]), str(v[1]), float(v[2]), str(v[3]), _unarr(v[4]), str(v[5]), str(v[6]),
                            int(v[7]))
    except (TypeError, ValueError) as e:
        raise CodecError(f"malformed req message: {e}") from None


def encode_reply(request_id: str, session_id: str, r: Reply) -> bytes:
    return pack("rep", WIRE_VERSION, [request_id, session_id, r.ok, r.output, r.reason, r.latency_s, r.batch])


def decode_reply(raw: bytes) -> tuple[str, str, Reply]:
    """(request id, session id, reply). Raises CodecError on a malformed message."""
    v = unpack(raw, "rep", WIRE_VERSION, 7)
    try:
        return str(v[0]), str(v[1]), Reply(bool(v[2]), v[3], v[4], float(v[5]), int(v[6]))
    except (TypeError, ValueError) as e:
        raise CodecError(f"malformed rep message: {e}") from None
