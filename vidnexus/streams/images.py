"""Frame pixels: JPEG-encode what ingest publishes, decode what a chain reads.

A decoded video frame stays in its decoder's YUV 4:2:0 planes (:class:`Planes`) up to the JPEG
encoder, which takes them as they are (libjpeg-turbo through ``simplejpeg``): no conversion to BGR
and back to YCbCr, no chroma subsampling again — on this box that is about 1.6× the frames per
CPU-second of BGR + ``cv2.imencode`` (docs/benchmarks.md, ingest). Rendered (synthetic) frames are
BGR arrays and go through OpenCV.

Example:
    >>> import numpy as np
    >>> from vidnexus.contracts.frames import Frame
    >>> img = np.zeros((8, 16, 3), np.uint8)
    >>> f = Frame("cam", 0, 0.0, 0.0, 0.0, 16, 8, "jpeg", jpeg_encode(img))
    >>> image_of(f).shape
    (8, 16, 3)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vidnexus.contracts.frames import Frame
from vidnexus.errors import CodecError

__all__ = ["jpeg_encode", "image_of", "Planes", "planes_of_frame", "encoded_size"]


def encoded_size(img: Any, max_side: int | None) -> tuple[int, int]:
    """(width, height) of ``img``'s JPEG from :func:`jpeg_encode` (the longer side ≤ ``max_side``;
    planes stay even-sized)."""
    h, w = img.shape[:2]
    if not max_side or max(h, w) <= max_side:
        return w, h
    s = max_side / max(h, w)
    if isinstance(img, Planes):
        return max(2, int(w * s) & ~1), max(2, int(h * s) & ~1)
    return max(1, int(w * s)), max(1, int(h * s))


@dataclass(frozen=True)
class Planes:
    """A frame as full-range (JPEG) YCbCr 4:2:0 planes (``y``: H×W, ``u`` = Cb and ``v`` = Cr:
    H/2×W/2, uint8; even H and W).

    Example:
        >>> import numpy as np
        >>> p = Planes(np.full((8, 16), 128, np.uint8), np.full((4, 8), 128, np.uint8),
        ...            np.full((4, 8), 128, np.uint8))
        >>> p.shape, p.to_bgr()[0, 0].tolist()
        ((8, 16, 3), [128, 128, 128])
        >>> import cv2
        >>> cv2.imdecode(np.frombuffer(jpeg_encode(p), np.uint8), cv2.IMREAD_COLOR).shape
        (8, 16, 3)
    """

    y: Any
    u: Any
    v: Any

    @property
    def shape(self) -> tuple[int, int, int]:
        """(height, width, 3), as the BGR image would have."""
        return int(self.y.shape[0]), int(self.y.shape[1]), 3

    def to_bgr(self) -> Any:
        import cv2

        h, w = self.y.shape
        cr, cb = (cv2.resize(p, (w, h), interpolation=cv2.INTER_LINEAR) for p in (self.v, self.u))
        return cv2.cvtColor(cv2.merge([self.y, cr, cb]), cv2.COLOR_YCrCb2BGR)

    def resized(self, w: int, h: int) -> "Planes":
        """Scaled to ``w``×``h`` (both even), plane by plane."""
        import cv2

        def r(p: Any, size: tuple[int, int]) -> Any:
            return cv2.resize(p, size, interpolation=cv2.INTER_AREA)

        return Planes(r(self.y, (w, h)), r(self.u, (w // 2, h // 2)), r(self.v, (w // 2, h // 2)))


_FULL_RANGE = 2
"""``AVCOL_RANGE_JPEG``: a frame whose samples use 0–255 (otherwise video range, Y 16–235, C 16–240)."""
_LUTS: dict[str, Any] = {}


def _to_full_range_luts() -> tuple[Any, Any]:
    """Lookup tables from video-range luma and chroma to full range (BT.601, as swscale does)."""
    if not _LUTS:
        import numpy as np

        x = np.arange(256, dtype=np.float64)
        _LUTS["y"] = np.clip(np.round((x - 16) * 255 / 219), 0, 255).astype(np.uint8)
        _LUTS["c"] = np.clip(np.round((x - 128) * 255 / 224 + 128), 0, 255).astype(np.uint8)
    return _LUTS["y"], _LUTS["c"]


def planes_of_frame(frame: Any) -> "Planes | None":
    """The planes of a decoded ``av.VideoFrame`` in yuv420p or yuvj420p with even sides, in full
    range (video-range samples are stretched with a lookup table), else None (the caller converts
    the frame to BGR)."""
    import cv2

    if frame.format.name not in ("yuv420p", "yuvj420p") or frame.width % 2 or frame.height % 2:
        return None
    a = frame.to_ndarray()  # (H·3/2, W): Y, then U and V, strides removed
    h, w = frame.height, frame.width
    y, c = a[:h], a[h:]
    if frame.format.name == "yuv420p" and getattr(frame, "color_range", 0) != _FULL_RANGE:
        ly, lc = _to_full_range_luts()
        y, c = cv2.LUT(y, ly), cv2.LUT(c, lc)  # two passes over contiguous memory
    c = c.reshape(-1)
    q = (h // 2) * (w // 2)
    return Planes(y, c[:q].reshape(h // 2, w // 2), c[q:].reshape(h // 2, w // 2))


def jpeg_encode(img: Any, quality: int = 85, max_side: int | None = None) -> bytes:
    """JPEG-encode a BGR image (numpy HxWx3) or :class:`Planes`, downscaling so the longer side ≤
    ``max_side``."""
    import cv2

    w, h = encoded_size(img, max_side)
    if isinstance(img, Planes):
        import simplejpeg

        if (h, w) != img.y.shape:
            img = img.resized(w, h)
        return bytes(simplejpeg.encode_jpeg_yuv_planes(img.y, img.u, img.v, quality=int(quality)))

    if (h, w) != img.shape[:2]:
        img = cv2.resize(img, (w, h), interpolation=cv2.INTER_AREA)
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
