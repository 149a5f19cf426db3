"""Frame pixels: JPEG-encode what ingest publishes, decode what a chain reads.

Example:
    >>> import numpy as np
    >>> from vidnexus.contracts.frames import Frame
    >>> img = np.zeros((8, 16, 3), np.uint8)
    >>> f = Frame("cam", 0, 0.0, 0.0, 0.0, 16, 8, "jpeg", jpeg_encode(img))
    >>> image_of(f).shape
    (8, 16, 3)
"""

from __future__ import annotations

from typing import Any

from vidnexus.contracts.frames import Frame
from vidnexus.errors import CodecError

__all__ = ["jpeg_encode", "image_of"]


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
