"""Frame pixels: encode what ingest publishes, decode what a chain reads.

Over Kafka a frame travels as JPEG. A decoded video frame stays in its decoder's YUV 4:2:0 planes
(:class:`Planes`) up to the JPEG encoder, which takes them as they are (libjpeg-turbo through
``simplejpeg``): no conversion to BGR and back to YCbCr, no chroma subsampling again — on this box
that is about 1.6× the frames per CPU-second of BGR + ``cv2.imencode`` (docs/benchmarks.md,
ingest). Rendered (synthetic) frames are BGR arrays and go through OpenCV.

On the in-process bus (embedded mode) a JPEG would be encoded by ingest and decoded by the worker
for nothing: frames travel uncompressed (:func:`frame_payload` with ``uncompressed=True``) — a
decoder's planes as they came (``i420``/``j420``: no conversion at ingest at all), rendered frames
as BGR (``raw``) — and the worker's :func:`image_of` converts the planes to BGR once.

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

__all__ = ["jpeg_encode", "image_of", "Planes", "planes_of_frame", "encoded_size", "frame_payload", "payload_size"]


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
    """A frame as YCbCr 4:2:0 planes (``y``: H×W, ``u`` = Cb and ``v`` = Cr: H/2×W/2, uint8; even H
    and W), in full (JPEG) range or, ``full_range=False``, a video decoder's range (Y 16–235).

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
    full_range: bool = True

    @property
    def shape(self) -> tuple[int, int, int]:
        """(height, width, 3), as the BGR image would have."""
        return int(self.y.shape[0]), int(self.y.shape[1]), 3

    def to_bgr(self) -> Any:
        import cv2
        import numpy as np

        h, w = self.y.shape
        if not self.full_range:  # BT.601 video range, as swscale converts a decoder's frames
            return cv2.cvtColor(np.frombuffer(self.tobytes(), np.uint8).reshape(h * 3 // 2, w),
                                cv2.COLOR_YUV2BGR_I420)
        cr, cb = (cv2.resize(p, (w, h), interpolation=cv2.INTER_LINEAR) for p in (self.v, self.u))
        return cv2.cvtColor(cv2.merge([self.y, cr, cb]), cv2.COLOR_YCrCb2BGR)

    def tobytes(self) -> bytes:
        """Y, then U, then V (the ``i420``/``j420`` frame encodings)."""
        return b"".join((self.y.tobytes(), self.u.tobytes(), self.v.tobytes()))

    @classmethod
    def frombuffer(cls, data: bytes | memoryview, width: int, height: int, full_range: bool) -> "Planes":
        import numpy as np

        if width % 2 or height % 2 or len(data) != width * height * 3 // 2:
            raise ValueError(f"{len(data)} bytes are not {width}x{height} YUV 4:2:0 planes")
        a = np.frombuffer(data, np.uint8)
        q = (height // 2) * (width // 2)
        y = a[: width * height].reshape(height, width)
        return cls(y, a[width * height : width * height + q].reshape(height // 2, width // 2),
                   a[width * height + q :].reshape(height // 2, width // 2), full_range)

    def full(self) -> "Planes":
        """In full range (video-range samples stretched with lookup tables, as swscale does)."""
        if self.full_range:
            return self
        import cv2

        ly, lc = _to_full_range_luts()
        return Planes(cv2.LUT(self.y, ly), cv2.LUT(self.u, lc), cv2.LUT(self.v, lc), True)

    def resized(self, w: int, h: int) -> "Planes":
        """Scaled to ``w``×``h`` (both even), plane by plane."""
        import cv2

        def r(p: Any, size: tuple[int, int]) -> Any:
            return cv2.resize(p, size, interpolation=cv2.INTER_AREA)

        return Planes(r(self.y, (w, h)), r(self.u, (w // 2, h // 2)), r(self.v, (w // 2, h // 2)), self.full_range)


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
    """The planes of a decoded ``av.VideoFrame`` in yuv420p or yuvj420p with even sides, as they
    are (video or full range: nothing converted here, nothing copied: views of the decoder's
    buffers), else None (the caller converts the frame to BGR)."""
    if frame.format.name not in ("yuv420p", "yuvj420p") or frame.width % 2 or frame.height % 2:
        return None
    import numpy as np

    h, w = frame.height, frame.width
    full = frame.format.name == "yuvj420p" or getattr(frame, "color_range", 0) == _FULL_RANGE

    def view(plane: Any, rows: int, cols: int) -> Any:
        a = np.frombuffer(plane, np.uint8, count=rows * plane.line_size).reshape(rows, plane.line_size)
        return a[:, :cols]  # the decoder's rows may be padded: a strided view then

    y, u, v = frame.planes
    return Planes(view(y, h, w), view(u, h // 2, w // 2), view(v, h // 2, w // 2), full)


def payload_size(data: Any) -> int:
    """Bytes of a :func:`frame_payload` ``data`` (one buffer or a tuple of them)."""
    parts = data if isinstance(data, tuple) else (data,)
    return sum(memoryview(p).nbytes for p in parts)


def jpeg_encode(img: Any, quality: int = 85, max_side: int | None = None) -> bytes:
    """JPEG-encode a BGR image (numpy HxWx3) or :class:`Planes`, downscaling so the longer side ≤
    ``max_side``."""
    import cv2

    w, h = encoded_size(img, max_side)
    if isinstance(img, Planes):
        import simplejpeg

        if (h, w) != img.y.shape:
            img = img.resized(w, h)
        img = img.full()  # JPEG's YCbCr is full range
        return bytes(simplejpeg.encode_jpeg_yuv_planes(img.y, img.u, img.v, quality=int(quality)))

    if (h, w) != img.shape[:2]:
        img = cv2.resize(img, (w, h), interpolation=cv2.INTER_AREA)
    ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, int(quality)])
    if not ok:
        raise CodecError("JPEG encoding failed")
    return buf.tobytes()


def frame_payload(img: Any, quality: int = 85, max_side: int | None = None,
                  uncompressed: bool = False) -> tuple[str, bytes | memoryview | tuple[Any, ...], int, int]:
    """(encoding, data, width, height) of a frame for the bus: JPEG, or with ``uncompressed`` the
    pixels as they are (planes: ``i420``/``j420``, a BGR array: ``raw``), downscaled the same way.
    Uncompressed planes that need no resizing come as the decoder's three planes (a tuple of views,
    which the frame's encoder copies once, into the message: :func:`payload_size` is their size).

    Example:
        >>> import numpy as np
        >>> p = Planes(np.full((4, 8), 16, np.uint8), np.full((2, 4), 128, np.uint8),
        ...            np.full((2, 4), 128, np.uint8), full_range=False)
        >>> enc, data, w, h = frame_payload(p, uncompressed=True); enc, payload_size(data), w, h
        ('i420', 48, 8, 4)
        >>> from vidnexus.contracts.frames import decode_frame, encode_frame
        >>> f = decode_frame(encode_frame(Frame("cam", 0, 0.0, 0.0, 0.0, w, h, enc, data)))
        >>> image_of(f)[0, 0].tolist()   # video black
        [0, 0, 0]
    """
    import cv2

    w, h = encoded_size(img, max_side)
    if not uncompressed:
        return "jpeg", jpeg_encode(img, quality, max_side), w, h
    if isinstance(img, Planes):
        enc = "j420" if img.full_range else "i420"
        if (h, w) != img.y.shape:
            return enc, img.resized(w, h).tobytes(), w, h
        import numpy as np

        return enc, tuple(np.ascontiguousarray(p) for p in (img.y, img.u, img.v)), w, h
    if (h, w) != img.shape[:2]:
        img = cv2.resize(img, (w, h), interpolation=cv2.INTER_AREA)
    return "raw", (img.data.cast("B") if img.flags.c_contiguous else img.tobytes()), w, h


def image_of(f: Frame) -> Any:
    """The frame's pixels as a BGR numpy array."""
    import cv2
    import numpy as np

    data = f.data if not isinstance(f.data, tuple) else b"".join(f.data)  # parts: a frame not yet encoded
    if f.encoding == "raw":
        if len(data) != f.width * f.height * 3:
            raise CodecError(f"frame {f.stream_id}#{f.frame_no}: {len(data)} bytes are not a "
                             f"{f.width}x{f.height} BGR image")
        return np.frombuffer(data, np.uint8).reshape(f.height, f.width, 3)
    if f.encoding in ("i420", "j420"):
        try:
            return Planes.frombuffer(data, f.width, f.height, f.encoding == "j420").to_bgr()
        except ValueError as e:
            raise CodecError(f"frame {f.stream_id}#{f.frame_no}: {e}") from None
    if f.encoding == "jpeg":
        img = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
        if img is None:
            raise CodecError(f"frame {f.stream_id}#{f.frame_no}: undecodable JPEG")
        return img
    raise CodecError(f"frame {f.stream_id}#{f.frame_no}: unknown encoding {f.encoding!r}")
