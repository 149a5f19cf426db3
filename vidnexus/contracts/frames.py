"""The Frame record (DESIGN §4): one sampled frame on the frames topic.

Example:
    >>> f = Frame("cam-1", 7, pts=3.5, capture_ts=1.0, ingest_ts=1.1, width=4, height=2,
    ...           encoding="raw", data=bytes(24))
    >>> decode_frame(encode_frame(f)) == f
    True
"""

from __future__ import annotations

from dataclasses import dataclass, field

from typing import Any

from vidnexus.contracts.codec import pack_blob, unpack
from vidnexus.errors import CodecError

__all__ = ["Frame", "encode_frame", "decode_frame", "FRAME_VERSION"]

FRAME_VERSION = 2
"""2: ``[2, "frame", stream, frame_no, pts, capture_ts, ingest_ts, width, height, encoding, data, tags]``."""


@dataclass(frozen=True)
class Frame:
    """One sampled frame. ``data`` is by ``encoding``: ``jpeg`` (over Kafka), or uncompressed on the
    in-process bus (embedded mode, where a JPEG would be encoded and decoded for nothing): ``raw``
    (BGR, H×W×3), ``i420`` (a video decoder's YUV 4:2:0 planes, Y then U then V, video range) or
    ``j420`` (the same in full range); ``width`` and ``height`` are the image's (even for the planes);
    ``capture_ts`` and ``ingest_ts`` are wall-clock seconds; ``tags`` are the stream's tags, its
    apps (``apps``) and, for synthetic streams, the ground truth."""

    stream_id: str
    frame_no: int
    pts: float
    capture_ts: float
    ingest_ts: float
    width: int
    height: int
    encoding: str
    data: bytes | memoryview | tuple[Any, ...]
    """The image; a view or a tuple of buffers (a decoder's Y, U and V planes) only on its way into
    :func:`encode_frame`, which copies them once, into the message (ingest); decoded frames hold bytes."""
    tags: dict[str, str] = field(default_factory=dict)

    def __hash__(self) -> int:
        return hash((self.stream_id, self.frame_no))


def encode_frame(f: Frame) -> bytes:
    parts = f.data if isinstance(f.data, tuple) else (f.data,)
    return pack_blob("frame", FRAME_VERSION, [f.stream_id, f.frame_no, f.pts, f.capture_ts, f.ingest_ts, f.width,
                                              f.height, f.encoding], parts, [f.tags])


def decode_frame(raw: bytes) -> Frame:
    """Raises CodecError on an unknown version or a malformed message (send it to dead-letter)."""
    v = unpack(raw, "frame", FRAME_VERSION, 10)
    try:
        if not isinstance(v[8], bytes):
            raise TypeError(f"image is {type(v[8]).__name__}, not bytes")
        tags = {str(k): str(t) for k, t in dict(v[9]).items()}
        return Frame(str(v[0]), int(v[1]), float(v[2]), float(v[3]), float(v[4]), int(v[5]), int(v[6]),
                     str(v[7]), bytes(v[8]), tags)
    except Exception as e:  # any shape the record may have: the role must go on
        raise CodecError(f"malformed frame message: {e}") from None
