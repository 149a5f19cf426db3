"""What to ingest and how: :class:`StreamSpec`, validated in one place for the CLI, the API and the
apps, and the URL rules (schemes, ``file://`` decoding, absolute paths) the registry applies.

Every check here is pure: it reads no file and no clock. A spec that does not validate raises one
:class:`~vidnexus.errors.StreamError` line naming the stream, the option, what was given and what is
allowed.

Example:
    >>> StreamSpec("cam", "/v/a.mp4").fps                       # no sampling option: 1 fps
    1.0
    >>> StreamSpec("cam", "/v/a.mp4", every_n=5).fps is None
    True
    >>> StreamSpec("cam", "/v/a.mp4", fps=float("inf"))
    Traceback (most recent call last):
    ...
    vidnexus.errors.StreamError: stream cam: fps=inf is not allowed; use a finite number > 0 and <= 1000
    >>> normalize_url("file:///videos/my%20clip.mp4", cwd="/home/me")
    '/videos/my clip.mp4'
    >>> normalize_url("clips/a.mp4", cwd="/home/me")
    '/home/me/clips/a.mp4'
"""

from __future__ import annotations

import math
import os.path
import re
from dataclasses import InitVar, dataclass, field
from typing import Any
from urllib.parse import unquote, urlparse

from vidnexus.errors import StreamError

__all__ = ["StreamSpec", "spec_problem", "normalize_url", "local_path", "url_scheme", "SCHEMES", "MAX_FPS",
           "MAX_EVERY_N", "MAX_SIDE_RANGE", "DEFAULT_FPS", "MAX_SPEED", "parse_rate", "rate_text"]

SCHEMES = ("file", "rtsp", "rtsps", "http", "https", "synthetic")
DEFAULT_FPS = 1.0
"""Sampling when neither ``fps``, ``every_n`` nor ``keyframes_only`` is given."""
MAX_FPS = 1000.0
"""Sampling faster than any camera: above the source's rate every frame is kept anyway."""
MAX_EVERY_N = 2**32 - 1
"""The registry's ``every_n`` column is UInt32: a larger value would wrap (4294967297 -> 1)."""
MAX_SIDE_RANGE = (16, 16384)
"""Downscale target: below 16 px nothing is recognisable; JPEG stops at 65535, 16384 is plenty."""
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,200}")


def url_scheme(url: str) -> str:
    """``file`` for paths and ``file://`` URLs, else the URL's scheme if ingest reads it.

    Raises:
        StreamError: an unsupported scheme, naming the ones that are.
    """
    u = urlparse(url)
    if u.scheme in ("", "file") or (len(u.scheme) == 1 and url[1:3] == ":\\"):
        return "file"
    if u.scheme not in SCHEMES:
        raise StreamError(f"unsupported URL scheme {u.scheme!r} in {url!r}; use one of {', '.join(SCHEMES)}")
    return u.scheme


def local_path(url: str) -> str:
    """The file path of a path or ``file://`` URL; ``file://`` URLs are percent-decoded.

    Raises:
        StreamError: a ``file://`` URL naming another host.
    """
    if not url.startswith("file:"):
        return url
    u = urlparse(url)
    if u.netloc not in ("", "localhost"):
        raise StreamError(f"{url!r}: file URLs must name a local path (file:///path), not host {u.netloc!r}")
    return unquote(u.path)


def normalize_url(url: str, cwd: str) -> str:
    """The URL as the registry stores it: a local file as an absolute, percent-decoded path (so ingest
    started in another directory finds it); other URLs unchanged.

    Raises:
        StreamError: an empty URL, an unsupported scheme or a ``file://`` URL naming another host.
    """
    if not url.strip():
        raise StreamError("empty URL; give a file path, rtsp://, http(s):// or synthetic:// URL")
    if url_scheme(url) != "file":
        return url
    path = local_path(url)
    if not path:
        raise StreamError(f"{url!r}: the file URL names no path")
    return os.path.normpath(os.path.join(cwd, path))


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _integer(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


MAX_SPEED = 1000.0
"""The fastest pace, as a multiple of real time, that ``--rate`` accepts."""


def parse_rate(text: str) -> tuple[bool, float]:
    """``--rate`` as (realtime, speed): ``realtime`` (a camera's pace), ``max`` (as fast as the file
    decodes: backfill) or a factor of real time (``2``: twice as fast).

    Example:
        >>> parse_rate("realtime"), parse_rate("max"), parse_rate("2.5")
        ((True, 1.0), (False, 1.0), (True, 2.5))

    Raises:
        StreamError: anything else, with what is allowed.
    """
    t = str(text).strip().lower()
    if t in ("realtime", "real-time", "1", "1x"):
        return True, 1.0
    if t == "max":
        return False, 1.0
    try:
        factor = float(t[:-1] if t.endswith("x") else t)
    except ValueError:
        factor = math.nan
    if not (math.isfinite(factor) and 0 < factor <= MAX_SPEED):
        raise StreamError(f"--rate {text!r} is not allowed; use realtime, max, or a factor of real time "
                          f"> 0 and <= {MAX_SPEED:g} (2 = twice as fast)")
    return True, factor


def rate_text(spec: "StreamSpec") -> str:
    """How ``spec`` reads a file, as ``--rate`` takes it."""
    if not spec.realtime:
        return "max"
    return "realtime" if spec.speed == 1.0 else f"{spec.speed:g}x"


def spec_problem(spec: "StreamSpec") -> str | None:
    """The first thing wrong with ``spec`` as one line (stream, option, given, allowed), or None.

    Example:
        >>> spec_problem(StreamSpec("c", "x.mp4", check=False, fps=2.0, every_n=3))
        'stream c: fps=2.0 and every_n=3 are both given; sample by one of fps, every_n or keyframes_only'
    """
    def bad(option: str, value: Any, allowed: str) -> str:
        return f"stream {spec.name}: {option}={value!r} is not allowed; use {allowed}"

    if not isinstance(spec.name, str) or not _NAME.fullmatch(spec.name) or not spec.name.strip("."):
        return (f"stream name {spec.name!r} is not allowed; use 1-200 letters, digits, '-', '_' or '.'")
    if not isinstance(spec.url, str) or not spec.url.strip():
        return f"stream {spec.name}: empty URL; give a file path, rtsp://, http(s):// or synthetic:// URL"
    try:
        url_scheme(spec.url)
        local_path(spec.url)
    except StreamError as e:
        return f"stream {spec.name}: {e}"
    if spec.fps is not None and not (_number(spec.fps) and math.isfinite(spec.fps) and 0 < spec.fps <= MAX_FPS):
        return bad("fps", spec.fps, f"a finite number > 0 and <= {MAX_FPS:g}")
    if spec.every_n is not None and not (_integer(spec.every_n) and 1 <= spec.every_n <= MAX_EVERY_N):
        return bad("every_n", spec.every_n, f"a whole number from 1 to {MAX_EVERY_N}")
    if spec.fps is not None and spec.every_n is not None:
        return (f"stream {spec.name}: fps={spec.fps!r} and every_n={spec.every_n!r} are both given; "
                "sample by one of fps, every_n or keyframes_only")
    if spec.fps is not None and spec.keyframes_only:
        return (f"stream {spec.name}: fps={spec.fps!r} and keyframes_only are both given; "
                "sample by one of fps, every_n or keyframes_only (every_n with keyframes_only keeps every "
                "n-th keyframe)")
    if not _integer(spec.jpeg_quality) or not 1 <= spec.jpeg_quality <= 100:
        return bad("jpeg_quality", spec.jpeg_quality, "a whole number from 1 to 100")
    lo, hi = MAX_SIDE_RANGE
    if spec.max_side is not None and not (_integer(spec.max_side) and lo <= spec.max_side <= hi):
        return bad("max_side", spec.max_side, f"a whole number of pixels from {lo} to {hi}")
    if spec.until_s is not None and not (_number(spec.until_s) and math.isfinite(spec.until_s) and spec.until_s > 0):
        return bad("until_s", spec.until_s, "a finite number of seconds > 0")
    if not (_number(spec.speed) and math.isfinite(spec.speed) and 0 < spec.speed <= MAX_SPEED):
        return bad("speed", spec.speed, f"a finite factor of real time > 0 and <= {MAX_SPEED:g}")
    for option in ("keyframes_only", "realtime", "skip_corrupt", "backfill"):
        if not isinstance(getattr(spec, option), bool):
            return bad(option, getattr(spec, option), "True or False")
    if not all(isinstance(a, str) and a for a in spec.apps):
        return bad("apps", spec.apps, "app names")
    if not all(isinstance(k, str) and k and isinstance(v, str) for k, v in spec.tags.items()):
        return bad("tags", spec.tags, "non-empty string keys with string values")
    return None


@dataclass(frozen=True)
class StreamSpec:
    """What to ingest and how to sample it.

    Sampling is by one of ``fps`` (by presentation time), ``every_n`` frames or ``keyframes_only``
    (with ``every_n``: every n-th keyframe); with none of them, ``fps`` is 1. ``check=False`` builds
    a spec without validating it: only the registry does that, to show a stored row that no longer
    validates.
    """

    name: str
    url: str
    fps: float | None = None
    every_n: int | None = None
    keyframes_only: bool = False
    apps: tuple[str, ...] = ()
    tags: dict[str, str] = field(default_factory=dict)
    jpeg_quality: int = 85
    max_side: int | None = None
    realtime: bool = False
    """Pace a file at its own frame rate, as a camera would send it (else: as fast as it decodes)."""
    speed: float = 1.0
    """With ``realtime``, the pace as a multiple of real time (2.0: twice as fast as the video)."""
    until_s: float | None = None
    """Stop a file after this many seconds of video (its first part); it then ends ``done``."""
    skip_corrupt: bool = True
    """Skip packets the decoder rejects and count them (``corrupt``) instead of ending the stream;
    a file fails once more than 10% of its packets are corrupt."""
    backfill: bool = False
    """Delay-tolerant (re-processing stored video): its frames go to the backfill topic, where backfill
    workers send their requests with no deadline, to run in the slack the live sessions leave."""
    check: InitVar[bool] = True

    @property
    def key(self) -> int:
        """A stable 63-bit digest of what is ingested and how (not the apps or tags): a stream
        resumed after pause or an ingest restart with the same key continues where it was."""
        import hashlib

        what = repr((self.url, self.fps, self.every_n, self.keyframes_only, self.jpeg_quality, self.max_side,
                     self.until_s, self.skip_corrupt))
        return int.from_bytes(hashlib.sha256(what.encode()).digest()[:8], "big") >> 1

    def __post_init__(self, check: bool) -> None:
        if self.fps is None and self.every_n is None and not self.keyframes_only:
            object.__setattr__(self, "fps", DEFAULT_FPS)
        if check:
            problem = spec_problem(self)
            if problem:
                raise StreamError(problem)
