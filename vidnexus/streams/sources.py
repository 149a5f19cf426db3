"""Video sources through PyAV: files (mp4/mkv/avi/…), RTSP (TCP), HTTP(S) incl. HLS, plus
``synthetic://``. Frames that sampling does not keep are decoded (the codec needs them) but never
converted to pixels; keyframes-only mode asks the decoder to skip everything else.

Example:
    >>> info = probe("synthetic://hud?fps=5&seconds=2")
    >>> (info.width, info.height, info.fps, info.frames)
    (320, 180, 5.0, 10)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.parse import urlparse

from vidnexus.errors import StreamError
from vidnexus.streams.synthetic import RawFrame, synthetic_source

__all__ = ["ProbeInfo", "probe", "open_source", "AvSource", "SCHEMES", "is_live"]

logger = logging.getLogger(__name__)

SCHEMES = ("file", "rtsp", "rtsps", "http", "https", "synthetic")
Keep = Callable[[float, int], bool]


@dataclass(frozen=True)
class ProbeInfo:
    codec: str
    width: int
    height: int
    fps: float
    duration_s: float | None
    frames: int | None


def _scheme(url: str) -> str:
    u = urlparse(url)
    if u.scheme in ("", "file") or (len(u.scheme) == 1 and url[1:3] == ":\\"):
        return "file"
    if u.scheme not in SCHEMES:
        raise StreamError(f"unsupported URL scheme {u.scheme!r} in {url!r}; use one of {', '.join(SCHEMES)}")
    return u.scheme


def is_live(url: str) -> bool:
    """RTSP and HTTP sources are live: they reconnect on failure and follow the wall clock."""
    return _scheme(url) in ("rtsp", "rtsps", "http", "https")


def _path(url: str) -> str:
    return urlparse(url).path if url.startswith("file://") else url


def _open(url: str, timeout_s: float) -> Any:
    import av

    options = {}
    if _scheme(url) in ("rtsp", "rtsps"):
        options = {"rtsp_transport": "tcp"}
    try:
        return av.open(_path(url), options=options, timeout=(timeout_s, timeout_s))
    except FileNotFoundError:
        raise StreamError(f"{url}: no such file") from None
    except Exception as e:  # PyAV raises av.error.* subclasses of OSError/ValueError
        raise StreamError(f"{url}: cannot open ({type(e).__name__}: {e})") from None


def probe(url: str, timeout_s: float = 10.0) -> ProbeInfo:
    """Codec, resolution, frame rate and length, or a StreamError saying why not."""
    scheme = _scheme(url)
    if scheme == "synthetic":
        src = synthetic_source(url)
        return ProbeInfo("synthetic", src.width, src.height, src.fps, src.seconds, int(round(src.seconds * src.fps)))
    if scheme == "file" and not Path(_path(url)).exists():
        raise StreamError(f"{url}: no such file")
    c = _open(url, timeout_s)
    try:
        if not c.streams.video:
            raise StreamError(f"{url}: no video stream")
        s = c.streams.video[0]
        fps = float(s.average_rate or s.guessed_rate or 0) or 0.0
        dur = float(c.duration / 1e6) if c.duration else None
        if not s.codec_context.name or not s.width:
            raise StreamError(f"{url}: unreadable video stream")
        return ProbeInfo(s.codec_context.name, s.width, s.height, fps, dur, s.frames or None)
    finally:
        c.close()


class AvSource:
    """Decoded frames of one URL. ``decoded`` and ``errors`` count what happened."""

    def __init__(self, url: str, *, keyframes_only: bool = False, timeout_s: float = 10.0) -> None:
        self.url, self.keyframes_only, self.timeout_s = url, keyframes_only, timeout_s
        self.decoded = 0
        self.errors = 0

    def frames(self, keep: Keep = lambda pts, i: True) -> Iterator[RawFrame]:
        import av

        c = _open(self.url, self.timeout_s)
        try:
            if not c.streams.video:
                raise StreamError(f"{self.url}: no video stream")
            stream = c.streams.video[0]
            stream.thread_type = "AUTO"
            if self.keyframes_only:
                stream.codec_context.skip_frame = "NONKEY"
            index = 0
            declared = 0 if self.keyframes_only else int(stream.frames or 0)
            t0: float | None = None
            try:
                for frame in c.decode(stream):
                    self.decoded += 1
                    pts = float(frame.time) if frame.time is not None else index / float(stream.average_rate or 25)
                    if t0 is None:
                        t0 = pts
                    rel = pts - t0
                    if keep(rel, index):
                        yield RawFrame(index, rel, frame.to_ndarray(format="bgr24"), {}, bool(frame.key_frame))
                    index += 1
            except av.error.EOFError:
                pass
            except (av.error.FFmpegError, OSError, ValueError) as e:
                self.errors += 1
                if self.decoded == 0:
                    raise StreamError(f"{self.url}: not a decodable video ({e})") from None
                raise StreamError(f"{self.url}: decoding failed after {self.decoded} frames ({e})") from None
            # A file cut short still decodes up to the cut without any error: compare with the count
            # its header declares.
            if declared and self.decoded < declared * 0.98:
                self.errors += 1
                raise StreamError(f"{self.url}: file is truncated: decoded {self.decoded} of the "
                                  f"{declared} frames its header declares")
        finally:
            c.close()


class _SyntheticAdapter:
    def __init__(self, url: str) -> None:
        self.src = synthetic_source(url)
        self.decoded = 0
        self.errors = 0

    def frames(self, keep: Keep = lambda pts, i: True) -> Iterator[RawFrame]:
        for f in self.src.frames():
            self.decoded += 1
            if keep(f.pts, f.index):
                yield f


def open_source(url: str, *, keyframes_only: bool = False, timeout_s: float = 10.0) -> Any:
    """A source with ``frames(keep)``, ``decoded`` and ``errors``."""
    if _scheme(url) == "synthetic":
        return _SyntheticAdapter(url)
    return AvSource(url, keyframes_only=keyframes_only, timeout_s=timeout_s)
