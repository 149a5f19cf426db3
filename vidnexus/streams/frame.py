"""The Frame envelope (DESIGN §4) and its versioned msgpack codec.

Example:
    >>> f = Frame("cam-1", 7, pts=3.5, capture_ts=1.0, ingest_ts=1.1, width=4, height=2,
    ...           encoding="raw", data=bytes(24))
    >>> decode_frame(encode_frame(f)) == f
    True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgpack

from vidnexus.errors import CodecError

__all__ = ["Frame", "encode_frame", "decode_frame", "FRAME_VERSION", "jpeg_encode", "image_of"]

FRAME_VERSION = 1


@dataclass(frozen=True)
class Frame:
    """One sampled frame. ``data`` is JPEG (default) or raw BGR bytes (``encoding='raw'``)."""

    stream_id: str
    frame_no: int
    pts: float
    capture_ts: float
    ingest_ts: float
    width: int
    height: int
    encoding: str
    data: bytes
    tags: dict[str, str] = field(default_factory=dict)

    def __hash__(self) -> int:
        return hash((self.stream_id, self.frame_no))


def encode_frame(f: Frame) -> bytes:
    return msgpack.packb(
        [FRAME_VERSION, f.stream_id, f.frame_no, f.pts, f.capture_ts, f.ingest_ts, f.width,
         f.height, f.encoding, f.data, f.tags],
        use_bin_type=True,
    )


def decode_frame(raw: bytes) -> Frame:
    """Raises CodecError on an unknown version or a malformed message (send it to dead-letter)."""
    try:
        v: Any = msgpack.unpackb(raw, raw=False)
    except Exception as e:
        raise CodecError(f"malformed frame message: {e}") from None
    if not isinstance(v, list) or not v:
        raise CodecError("malformed frame message: not a versioned record")
    if v[0] != FRAME_VERSION:
        raise CodecError(f"unknown frame message version {v[0]!r} (this build reads {FRAME_VERSION})")
    if len(v) != 11:
        raise CodecError(f"malformed frame message: {len(v)} fields, expected 11")
    try:
        return Frame(str(v[1]), int(v[2]), float(v[3]), float(v[4]), float(v[5]), int(v[6]),
                     int(v[7]), str(v[8]), bytes(v[9]), dict(v[10]))
    except (TypeError, ValueError) as e:
        raise CodecError(f"malformed frame message: {e}") from None


def jpeg_encode(img: Any, quality: int = 85, max_side: int | None = None) -> bytes:
    """JPEG-encode a BGR image (numpy HxWx3), downscaling so the longer side ≤ ``max_side``."""
    import cv2

    if max_side and max(img.shape[:2]) > max_side:
        s = max_side / max(img.shape[:2])
        img = cv2.resize(img, (max(1, int(img.shape[1] * s)), max(1, int(img.shape[0] * s))),
                         interpolation=cv2.INTER_AREA)
    ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, int(quality)])
    if not ok:
        raise CodecError("JPEG encoding failed")
    return buf.tobytes()


def image_of(f: Frame) -> Any:
    """The frame's pixels as a BGR numpy array."""
    import cv2
    import numpy as np

    if f.encoding == "raw":
        return np.frombuffer(f.data, np.uint8).reshape(f.height, f.width, 3)
    if f.encoding == "jpeg":
        img = cv2.imdecode(np.frombuffer(f.data, np.uint8), cv2.IMREAD_COLOR)
        if img is None:
            raise CodecError(f"frame {f.stream_id}#{f.frame_no}: undecodable JPEG")
        return img
    raise CodecError(f"frame {f.stream_id}#{f.frame_no}: unknown encoding {f.encoding!r}")
