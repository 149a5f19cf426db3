"""Video sources through PyAV: files (mp4/mkv/avi/ts/…), RTSP (TCP), HTTP(S) incl. HLS, plus
``synthetic://``. Frames that sampling does not keep are decoded (the codec needs them) but never
converted to pixels; keyframes-only mode asks the decoder to skip everything else.

This is the thin I/O side: it opens, reads and gathers facts; what they mean (file, live or playlist;
truncated or complete; too corrupt; a timeout) is decided in :mod:`vidnexus.streams.media_verdicts`.

Example:
    >>> info = probe("synthetic://hud?fps=5&seconds=2")
    >>> (info.width, info.height, info.fps, info.frames, info.kind)
    (320, 180, 5.0, 10, 'file')
"""

from __future__ import annotations

import logging
import os
import re
import stat
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from vidnexus.clock import Clock, MonotonicClock
from vidnexus.errors import StreamError
from vidnexus.streams.images import planes_of_frame
from vidnexus.streams.media_verdicts import (
    EndEvidence,
    SourceKind,
    classify_source,
    corrupt_problem,
    ends_mid_packet,
    judge_end,
    open_failure_reason,
)
from vidnexus.streams.spec import SCHEMES, local_path, url_scheme
from vidnexus.streams.synthetic import RawFrame, synthetic_source

__all__ = ["ProbeInfo", "probe", "open_source", "AvSource", "SCHEMES", "is_live", "not_a_regular_file"]

logger = logging.getLogger(__name__)

Keep = Callable[[float, int], bool]


@dataclass(frozen=True)
class ProbeInfo:
    codec: str
    width: int
    height: int
    fps: float
    duration_s: float | None
    frames: int | None
    kind: SourceKind = "file"
    """``file`` or ``playlist`` (HLS VOD) play once; ``live`` reconnects (see ``classify_source``)."""


def is_live(url: str) -> bool:
    """Whether the URL's scheme may carry a live source (RTSP, HTTP). An opened HTTP(S) source is
    classified by what it holds: an ordinary video file over HTTP plays once."""
    return url_scheme(url) in ("rtsp", "rtsps", "http", "https")


def not_a_regular_file(path: str) -> str | None:
    """Why a local path cannot be opened without blocking or failing (missing, a named pipe, a device,
    a directory), or None for a regular file. Opening a FIFO blocks until a writer appears."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "no such file"
    except OSError as e:
        return f"cannot access it ({e.strerror or e})"
    if stat.S_ISREG(mode):
        return None
    what = ("a directory" if stat.S_ISDIR(mode) else "a named pipe" if stat.S_ISFIFO(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a special file")
    return f"{what}, not a regular file; ingest reads regular video files, rtsp:// and http(s)://"


def _open(url: str, timeout_s: float, clock: Clock) -> Any:
    import av

    scheme = url_scheme(url)
    if scheme == "file":
        problem = not_a_regular_file(local_path(url))
        if problem:
            raise StreamError(f"{url}: {problem}")
    options = {"rtsp_transport": "tcp"} if scheme in ("rtsp", "rtsps") else {}
    t0 = clock.now()
    try:
        return av.open(local_path(url), options=options, timeout=(timeout_s, timeout_s))
    except FileNotFoundError:
        raise StreamError(f"{url}: no such file") from None
    except Exception as e:  # PyAV raises av.error.* subclasses of OSError/ValueError
        why = open_failure_reason(type(e).__name__, _message(e), clock.now() - t0, timeout_s)
        raise StreamError(f"{url}: cannot open ({why})") from None


def _message(e: Exception) -> str:
    # "[Errno 1094995529] Invalid data found when processing input: 'rtsp://…'" -> the middle part
    text = str(e)
    text = re.sub(r"^\[Errno -?\d+\] ", "", text)
    return re.sub(r": '[^']*'$", "", text)


def _kind(url: str, c: Any) -> SourceKind:
    try:
        size = int(c.size)
    except Exception:  # no length: a stream
        size = None
    duration = c.duration / 1e6 if c.duration else None
    return classify_source(url_scheme(url), c.format.name, duration, size)


def probe(url: str, timeout_s: float = 10.0) -> ProbeInfo:
    """Codec, resolution, frame rate, length and kind, or a StreamError saying why not."""
    if url_scheme(url) == "synthetic":
        src = synthetic_source(url)
        return ProbeInfo("synthetic", src.width, src.height, src.fps, src.seconds, int(round(src.seconds * src.fps)))
    c = _open(url, timeout_s, MonotonicClock())
    try:
        if not c.streams.video:
            raise StreamError(f"{url}: no video stream")
        s = c.streams.video[0]
        fps = float(s.average_rate or s.guessed_rate or 0) or 0.0
        dur = float(c.duration / 1e6) if c.duration else None
        if not s.codec_context.name or not s.width:
            raise StreamError(f"{url}: unreadable video stream")
        return ProbeInfo(s.codec_context.name, s.width, s.height, fps, dur, s.frames or None, _kind(url, c))
    finally:
        c.close()


def _declared_end(c: Any, s: Any) -> float | None:
    """Where the header says the video stream ends, in seconds: the stream's own duration, Matroska's
    per-track DURATION tag, or the container's duration when the video is its only stream."""
    tb = float(s.time_base) if s.time_base else 0.0
    start = float(s.start_time * tb) if s.start_time is not None and tb else 0.0
    if s.duration and tb:
        return start + float(s.duration * tb)
    tag = s.metadata.get("DURATION") or s.metadata.get("duration")
    m = re.fullmatch(r"(\d+):(\d\d):(\d\d(?:\.\d+)?)", tag or "")
    if m:
        return start + int(m[1]) * 3600 + int(m[2]) * 60 + float(m[3])
    if c.duration and len(c.streams) == 1:
        return float((c.start_time or 0) / 1e6 + c.duration / 1e6)
    return None


class AvSource:
    """Decoded frames of one URL. ``decoded``, ``errors`` and ``corrupt`` (packets skipped) count what
    happened; ``kind`` is known once :meth:`open` succeeded."""

    def __init__(self, url: str, *, keyframes_only: bool = False, timeout_s: float = 10.0,
                 skip_corrupt: bool = True, clock: Clock | None = None) -> None:
        self.url, self.keyframes_only, self.timeout_s = url, keyframes_only, timeout_s
        self.skip_corrupt = skip_corrupt
        self.clock = clock or MonotonicClock()
        self.decoded = 0
        self.errors = 0
        self.corrupt = 0
        self.kind: SourceKind | None = None
        self._c: Any = None

    def open(self) -> SourceKind:
        """Open the source (StreamError if it cannot be) and say what kind it is."""
        if self._c is None:
            c = _open(self.url, self.timeout_s, self.clock)
            if not c.streams.video:
                c.close()
                raise StreamError(f"{self.url}: no video stream")
            self._c, self.kind = c, _kind(self.url, c)
        assert self.kind is not None
        return self.kind

    def close(self) -> None:
        if self._c is not None:
            self._c.close()
            self._c = None

    def frames(self, keep: Keep = lambda pts, i: True) -> Iterator[RawFrame]:
        """Decode to the end. A file that ends short of what it declares raises StreamError with
        the reason after its last frame was yielded."""
        self.open()
        try:
            yield from self._frames(keep)
        finally:
            self.close()

    def _frames(self, keep: Keep) -> Iterator[RawFrame]:
        import av

        c = self._c
        stream = c.streams.video[0]
        stream.thread_type = "AUTO"
        if self.keyframes_only:
            stream.codec_context.skip_frame = "NONKEY"
        rate = float(stream.average_rate or stream.guessed_rate or 25)
        tb = float(stream.time_base) if stream.time_base else 1.0 / rate
        packets = discarded = index = 0
        last_end: float | None = None
        t0: float | None = None
        demux_error: str | None = None
        last_corrupt = False
        demux = c.demux(stream)
        while True:
            try:
                packet = next(demux)
            except (StopIteration, av.error.EOFError):
                break
            except av.error.ExitError:
                raise StreamError(f"{self.url}: {open_failure_reason('ExitError', '', 0, self.timeout_s, reading=True)}"
                                  ) from None
            except (av.error.FFmpegError, OSError, ValueError) as e:
                if self.kind == "live":
                    raise StreamError(f"{self.url}: reading failed after {self.decoded} frames "
                                      f"({type(e).__name__}: {_message(e)})") from None
                demux_error = f"{type(e).__name__}: {_message(e)}"
                break
            at = packet.pts if packet.pts is not None else packet.dts
            if packet.is_discard:
                discarded += 1
            elif at is not None:  # not the flush packet at the end
                packets += 1
                end = (at + (packet.duration or 0)) * tb + (0.0 if packet.duration else 1.0 / rate)
                last_end = end if last_end is None else max(last_end, end)
            try:
                decoded = packet.decode()
            except av.error.EOFError:
                break
            except av.error.ExitError:
                raise StreamError(f"{self.url}: no data within {self.timeout_s:g} s") from None
            except (av.error.FFmpegError, ValueError) as e:
                self.corrupt += 1
                if not self.skip_corrupt:
                    self.errors += 1
                    if self.decoded == 0:
                        raise StreamError(f"{self.url}: not a decodable video ({_message(e)})") from None
                    raise StreamError(f"{self.url}: decoding failed after {self.decoded} frames ({_message(e)}); "
                                      "skip_corrupt skips such packets") from None
                problem = corrupt_problem(self.corrupt, packets, final=False)
                if problem:
                    self.errors += 1
                    raise StreamError(f"{self.url}: {problem}") from None
                logger.debug("%s: skipped a corrupt packet (%s)", self.url, e)
                continue
            for frame in decoded:
                self.decoded += 1
                last_corrupt = bool(frame.is_corrupt)
                pts = float(frame.time) if frame.time is not None else index / rate
                if t0 is None:
                    t0 = pts
                rel = pts - t0
                if keep(rel, index):
                    img = planes_of_frame(frame)  # the JPEG encoder takes the decoder's planes as they are
                    yield RawFrame(index, rel, img if img is not None else frame.to_ndarray(format="bgr24"), {},
                                   bool(frame.key_frame))
                index += 1
        if self.kind == "live":
            return
        try:
            size: int | None = int(c.size)
        except Exception:
            size = None
        ending = judge_end(EndEvidence(
            packets=packets, decoded=self.decoded, frame_s=1.0 / rate, last_end_s=last_end,
            declared_frames=int(stream.frames or 0) or None, discarded=discarded,
            declared_end_s=_declared_end(c, stream), demux_error=demux_error,
            partial_packet=ends_mid_packet(c.format.name, size), last_frame_corrupt=last_corrupt,
            corrupt=self.corrupt))
        if ending.state == "failed":
            self.errors += 1
            hint = ""
            if self.decoded == 0 and url_scheme(self.url) in ("http", "https") and c.format.name.startswith("mov"):
                hint = ("; an MP4 whose index is at its end needs a server with byte ranges "
                        "(or remux it with -movflags +faststart)")
            raise StreamError(f"{self.url}: {ending.reason}{hint}")


class _SyntheticAdapter:
    def __init__(self, url: str) -> None:
        self.src = synthetic_source(url)
        self.decoded = 0
        self.errors = 0
        self.corrupt = 0
        self.kind: SourceKind = "file"

    def open(self) -> SourceKind:
        return self.kind

    def close(self) -> None:
        pass

    def frames(self, keep: Keep = lambda pts, i: True) -> Iterator[RawFrame]:
        for f in self.src.frames():
            self.decoded += 1
            if keep(f.pts, f.index):
                yield f


def open_source(url: str, *, keyframes_only: bool = False, timeout_s: float = 10.0, skip_corrupt: bool = True,
                clock: Clock | None = None) -> Any:
    """A source with ``open() -> kind``, ``frames(keep)``, ``close()``, ``decoded``, ``errors`` and
    ``corrupt``."""
    if url_scheme(url) == "synthetic":
        return _SyntheticAdapter(url)
    return AvSource(url, keyframes_only=keyframes_only, timeout_s=timeout_s, skip_corrupt=skip_corrupt, clock=clock)
