"""DNN requests and their replies on the bus (DESIGN §4).

A request message names its session, carries one or more inputs (all of a frame's inputs for that
session travel together) and an absolute wall-clock deadline, and says where to reply; the reply
message carries one :class:`~vidnexus.contracts.replies.Reply` per input, in order, with the
request's id. An executor that answers several requests to one reply topic at once (a batch's
replies) sends them as one message (:func:`encode_replies`, version 4: one produce and one fetch
instead of one per request); :func:`decode_replies` reads both forms.

Inputs travel as the app's step made them, never as float tensors built in the worker: a uint8 image
(a crop, a cell, a whole frame: ``[dtype, shape, bytes]``) or a frame's JPEG bytes as they came from
ingest (:class:`Jpeg`, ``["jpeg", [], bytes]``). The executor turns them into the model's tensor on its
CPU pool, overlapped with the device (:mod:`vidnexus.gpu_executor.preprocess`). Float arrays still
travel (a client that builds tensors itself, user models without an input conversion).

Example:
    >>> import numpy as np
    >>> req = InferRequest("r1", "lenet5-100ms", deadline_wall=1.5, reply_to="vnx.replies.c1",
    ...                    inputs=(np.zeros((1, 28, 28), np.float32),) * 3, stream="cam-1", frame_no=7)
    >>> back = decode_request(encode_request(req))
    >>> back.request_id, len(back.inputs), back.inputs[0].shape, back.frame_no
    ('r1', 3, (1, 28, 28), 7)
    >>> decode_request(encode_request(InferRequest("r2", "ssdlite-100ms", 1.5, "vnx.replies.c1",
    ...                                                (Jpeg(b"\\xff\\xd8..."),)))).inputs
    (Jpeg(data=b'\\xff\\xd8...'),)
    >>> decode_reply(encode_reply("r1", "lenet5-100ms", [Reply.dropped("deadline")]))
    ('r1', 'lenet5-100ms', [Reply(ok=False, output=None, reason='deadline', latency_s=0.0, batch=0)])
    >>> [(rid, len(reps)) for rid, _, reps in decode_replies(encode_replies(
    ...     [("r1", "lenet5-100ms", [Reply.dropped("deadline")]), ("r2", "lenet5-100ms", [Reply.dropped("error")] * 2)]))]
    [('r1', 1), ('r2', 2)]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from vidnexus.contracts.codec import pack, unpack_versions
from vidnexus.contracts.replies import Reply
from vidnexus.errors import CodecError

__all__ = ["InferRequest", "Jpeg", "encode_request", "decode_request", "encode_reply", "decode_reply",
           "encode_replies", "decode_replies", "WIRE_VERSION", "REPLIES_VERSION"]

WIRE_VERSION = 3
"""3: requests ``[3, "req", id, session, deadline_wall, reply_to, [[dtype, shape, bytes], …], app,
stream, frame_no]`` (several inputs); replies ``[3, "rep", id, session, [[ok, output, reason,
latency_s, batch], …]]`` (one per input, in order). Version 2 messages (one input, one reply) are
still read, so that executors and workers can be upgraded one at a time. An input is
``[dtype, shape, bytes]`` or ``["jpeg", [], bytes]`` (:class:`Jpeg`; an executor older than
2026-11-24 dead-letters a request that carries one)."""

REPLIES_VERSION = 4
"""Replies to several requests in one message: ``[4, "rep", [[id, session, [[ok, output, reason,
latency_s, batch], …]], …]]``. A client older than 2026-12-01 reads version 3 only and dead-letters
these ("unknown rep message version 4"): upgrade clients (workers) before executors."""

JPEG_TAG = "jpeg"


@dataclass(frozen=True)
class Jpeg:
    """An input as JPEG bytes (a frame as ingest encoded it): the executor decodes it (BGR) before
    the model's input conversion. Sent as is, so a worker never decodes a frame only to forward it."""

    data: bytes


@dataclass(frozen=True)
class InferRequest:
    request_id: str
    session_id: str
    deadline_wall: float
    reply_to: str
    inputs: Sequence[Any]
    app: str = ""
    stream: str = ""
    frame_no: int = -1


def _arr(a: Any) -> list[Any]:
    if isinstance(a, Jpeg):
        return [JPEG_TAG, [], a.data]
    a = np.ascontiguousarray(a)
    return [a.dtype.str, list(a.shape), a.tobytes()]


def _unarr(v: Any) -> Any:
    dtype, shape, raw = v
    if dtype == JPEG_TAG:
        if not isinstance(raw, bytes):
            raise ValueError(f"a jpeg input carries {type(raw).__name__}, not bytes")
        return Jpeg(raw)
    return np.frombuffer(raw, dtype=np.dtype(dtype)).reshape(shape)


def encode_request(r: InferRequest) -> bytes:
    return pack("req", WIRE_VERSION, [r.request_id, r.session_id, r.deadline_wall, r.reply_to,
                                      [_arr(x) for x in r.inputs], r.app, r.stream, r.frame_no])


def decode_request(raw: bytes) -> InferRequest:
    """Raises CodecError on an unknown version or a malformed message (or one without inputs)."""
    version, v = unpack_versions(raw, "req", {3: 8, 2: 8})
    try:
        inputs = tuple(_unarr(x) for x in v[4]) if version == 3 else (_unarr(v[4]),)
        if not inputs:
            raise ValueError("no inputs")
        return InferRequest(str(v[0]), str(v[1]), float(v[2]), str(v[3]), inputs, str(v[5]), str(v[6]), int(v[7]))
    except Exception as e:  # any shape the record may have: the role must go on
        raise CodecError(f"malformed req message: {e}") from None


def encode_reply(request_id: str, session_id: str, replies: Sequence[Reply]) -> bytes:
    return pack("rep", WIRE_VERSION, [request_id, session_id, [_row(r) for r in replies]])


def _row(r: Reply) -> list[Any]:
    return [r.ok, r.output, r.reason, r.latency_s, r.batch]


def encode_replies(groups: Sequence[tuple[str, str, Sequence[Reply]]]) -> bytes:
    """Several requests' replies as one message: (request id, session id, one reply per input) each."""
    return pack("rep", REPLIES_VERSION, [[[rid, sid, [_row(r) for r in reps]] for rid, sid, reps in groups]])


def decode_replies(raw: bytes) -> list[tuple[str, str, list[Reply]]]:
    """(request id, session id, one reply per input) for each request a reply message answers (one
    for versions 2 and 3, any number for 4). Raises CodecError on a malformed message."""
    version, v = unpack_versions(raw, "rep", {REPLIES_VERSION: 1, 3: 3, 2: 7})
    try:
        if version == REPLIES_VERSION:
            return [(str(g[0]), str(g[1]), [_reply(r) for r in g[2]]) for g in v[0]]
        rows = v[2] if version == 3 else [v[2:]]
        return [(str(v[0]), str(v[1]), [_reply(r) for r in rows])]
    except Exception as e:  # any shape the record may have: the role must go on
        raise CodecError(f"malformed rep message: {e}") from None


def _reply(r: Sequence[Any]) -> Reply:
    return Reply(bool(r[0]), r[1], r[2], float(r[3]), int(r[4]))


def decode_reply(raw: bytes) -> tuple[str, str, list[Reply]]:
    """(request id, session id, one reply per input) of a message answering one request. Raises
    CodecError on a malformed message or one that answers several (:func:`decode_replies` reads those)."""
    groups = decode_replies(raw)
    if len(groups) != 1:
        raise CodecError(f"malformed rep message: it answers {len(groups)} requests, expected one")
    return groups[0]
