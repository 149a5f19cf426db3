"""Pure decisions about media that may lie about itself: what kind of source a URL is, whether a file
ended where it says it ends, when corrupt packets are too many, whether to retry a failed source, and
how to word an open that timed out. The I/O layer (:mod:`vidnexus.streams.sources`,
:mod:`vidnexus.streams.ingest`) gathers the facts; these functions only judge them.

Example:
    >>> judge_end(EndEvidence(packets=63, decoded=63, frame_s=0.08, last_end_s=5.04, declared_frames=78,
    ...                       discarded=15, declared_end_s=5.04)).state     # edit-list pre-roll: complete
    'done'
    >>> judge_end(EndEvidence(packets=35, decoded=35, frame_s=0.04, last_end_s=1.4,
    ...                       declared_end_s=5.0)).reason                   # a cut MKV
    'file is truncated: its video ends at 1.40 s of the 5.00 s its header declares'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["SourceKind", "classify_source", "EndEvidence", "Ending", "judge_end", "corrupt_problem",
           "AfterFailure", "after_failure", "open_failure_reason", "ends_mid_packet", "MAX_CORRUPT_FRACTION",
           "CORRUPT_GRACE",
           "MAX_TRIES_WITHOUT_FRAME", "TRUNCATION_TOLERANCE"]

SourceKind = Literal["file", "live", "playlist"]
"""``file`` and ``playlist`` (HLS VOD) play once and end; ``live`` follows the wall clock and
reconnects."""

MAX_CORRUPT_FRACTION = 0.1
"""A stream that skips corrupt packets fails once more than this fraction of its packets were corrupt:
past that the video is damaged, not unlucky."""
CORRUPT_GRACE = 25
"""Corrupt packets tolerated before the fraction is judged mid-stream (at the end it always is), so
that a bad first packet does not fail a file at 1 of 1."""
MAX_TRIES_WITHOUT_FRAME = 5
"""Attempts an HTTP(S) source gets to produce its first frame (≈15 s with the default backoff)."""
TRUNCATION_TOLERANCE = 0.02
"""Shortfall (of frames or of duration) accepted before a file counts as truncated; at least two
frames."""


def classify_source(scheme: str, format_name: str, duration_s: float | None, size_bytes: int | None) -> SourceKind:
    """What an opened source is, from its scheme and what the demuxer found.

    RTSP is live. HLS is a playlist when the demuxer knows its duration (``#EXT-X-ENDLIST``: VOD) and
    live otherwise. Any other HTTP(S) resource with a known duration or length is an ordinary file
    served over HTTP; one with neither (an MJPEG camera, a chunked live TS) is live.

    Example:
        >>> [classify_source("https", "mov,mp4,m4a,3gp,3g2,mj2", 5.0, 42337), classify_source("http", "hls", None, 310),
        ...  classify_source("http", "hls", 12.0, 310), classify_source("http", "mpjpeg", None, None)]
        ['file', 'live', 'playlist', 'live']
    """
    if scheme in ("rtsp", "rtsps"):
        return "live"
    if scheme not in ("http", "https"):
        return "file"
    finite = duration_s is not None and duration_s > 0
    if format_name.split(",")[0] in ("hls", "applehttp"):
        return "playlist" if finite else "live"
    return "file" if finite or (size_bytes is not None and size_bytes > 0) else "live"


TS_PACKET_SIZES = (188, 192, 204)
"""MPEG-TS packet sizes: plain, M2TS (timecode prefix), and with Reed-Solomon parity."""


def ends_mid_packet(format_name: str, size_bytes: int | None) -> bool:
    """Whether an MPEG-TS file of ``size_bytes`` ends inside a packet, i.e. was cut: a TS file is a
    whole number of fixed-size packets, and it declares no length or frame count to compare with.

    Example:
        >>> ends_mid_packet("mpegts", 188 * 400), ends_mid_packet("mpegts", 188 * 400 - 19)
        (False, True)
    """
    if format_name != "mpegts" or not size_bytes or size_bytes < 0:
        return False
    return all(size_bytes % n for n in TS_PACKET_SIZES)


@dataclass(frozen=True)
class EndEvidence:
    """What the container and the decoder said about a file that stopped giving packets."""

    packets: int
    """Video packets read that are meant to be shown (pre-roll the container discards not counted)."""
    decoded: int
    """Frames the decoder returned."""
    frame_s: float
    """One frame's duration (1/fps), the unit of the tolerances."""
    last_end_s: float | None
    """Where the last shown packet ends (its pts plus duration), in seconds."""
    declared_frames: int | None = None
    """The frame count in the header (MP4, AVI), pre-roll included; None where the container has none."""
    discarded: int = 0
    """Packets the container marks as never shown (edit-list pre-roll of a clip cut with ``-c copy``)."""
    declared_end_s: float | None = None
    """Where the header says the video ends (its start plus its duration); None where it does not say."""
    demux_error: str | None = None
    """The error that stopped the demuxer before a clean end of file."""
    partial_packet: bool = False
    """The file ends inside a container packet (an MPEG-TS cut mid-packet)."""
    last_frame_corrupt: bool = False
    """The decoder flagged the last frame as incomplete."""
    corrupt: int = 0
    """Packets the decoder rejected and that were skipped."""


@dataclass(frozen=True)
class Ending:
    """How a file that stopped giving packets ends: ``done``, or ``failed`` with the reason."""

    state: Literal["done", "failed"]
    reason: str = ""


def _short(have: float, want: float, unit: float) -> bool:
    return have < want - max(2 * unit, TRUNCATION_TOLERANCE * want)


def judge_end(ev: EndEvidence) -> Ending:
    """Whether a file really ended, judged by every statement the container and the decoder make: the
    declared frame count less the pre-roll the container itself discards, the declared duration, an
    error from the demuxer, a last container packet or frame cut in half, and the share of corrupt
    packets. Any one of them short is a truncated (or damaged) file.

    A file that declares nothing and was cut exactly between two packets ends ``done``: nothing in it
    says it was longer.
    """
    if ev.decoded == 0:
        why = f"; the demuxer said: {ev.demux_error}" if ev.demux_error else ""
        what = f"{ev.corrupt} of {ev.packets} packets corrupt" if ev.corrupt else f"{ev.packets} packets read"
        return Ending("failed", f"not a decodable video: no frame decoded ({what}){why}")
    if ev.demux_error:
        return Ending("failed", f"file is truncated or damaged: the demuxer stopped after {ev.decoded} frames "
                                f"({ev.demux_error})")
    if ev.declared_frames:
        shown = ev.declared_frames - ev.discarded
        if _short(ev.packets, shown, 1):
            pre = f" ({ev.discarded} of them pre-roll never shown)" if ev.discarded else ""
            return Ending("failed", f"file is truncated: decoded {ev.packets} of the {ev.declared_frames} frames "
                                    f"its header declares{pre}")
    if ev.declared_end_s is not None and ev.last_end_s is not None and _short(ev.last_end_s, ev.declared_end_s,
                                                                                 ev.frame_s):
        return Ending("failed", f"file is truncated: its video ends at {ev.last_end_s:.2f} s of the "
                                f"{ev.declared_end_s:.2f} s its header declares")
    if ev.partial_packet:
        return Ending("failed", f"file is truncated: it ends inside a container packet after {ev.decoded} frames")
    if ev.last_frame_corrupt:
        return Ending("failed", f"file is truncated: its last frame (the {ev.decoded}th) is incomplete")
    problem = corrupt_problem(ev.corrupt, ev.packets, final=True)
    if problem:
        return Ending("failed", problem)
    return Ending("done")


def corrupt_problem(corrupt: int, packets: int, *, final: bool) -> str | None:
    """Why a stream skipping corrupt packets should fail, or None to go on.

    Mid-stream the fraction is judged once :data:`CORRUPT_GRACE` packets were corrupt; at the end
    (``final``) always.

    Example:
        >>> corrupt_problem(1, 250, final=True) is None, corrupt_problem(30, 100, final=False)
        (True, '30 of 100 packets are corrupt (more than 10%)')
    """
    if corrupt == 0 or (not final and corrupt < CORRUPT_GRACE):
        return None
    if corrupt > MAX_CORRUPT_FRACTION * max(packets, 1):
        return f"{corrupt} of {packets} packets are corrupt (more than {MAX_CORRUPT_FRACTION:.0%})"
    return None


@dataclass(frozen=True)
class AfterFailure:
    """What to do after a source failed: ``retry`` (reconnect with backoff) or ``fail`` for good."""

    action: Literal["retry", "fail"]
    reason: str


def after_failure(scheme: str, kind: SourceKind | None, tries_without_frame: int, error: str) -> AfterFailure:
    """Retry or fail a source that just failed with ``error``.

    Files and playlists fail: they were read to their end or cannot be read. An RTSP camera is retried
    for as long as it takes (cameras reboot). Any other source (HTTP(S): live or not, ``kind`` None when
    it never opened) that has not produced a frame in :data:`MAX_TRIES_WITHOUT_FRAME` attempts fails,
    saying so; once it has produced frames it is retried like a camera.

    Example:
        >>> after_failure("http", None, 5, "http://h/a.mp4: cannot open (HTTPNotFoundError)").reason
        'http://h/a.mp4: cannot open (HTTPNotFoundError) (gave up after 5 attempts without a frame)'
    """
    if kind in ("file", "playlist") or (kind is None and scheme in ("file", "synthetic")):
        return AfterFailure("fail", error)
    if scheme in ("rtsp", "rtsps") or tries_without_frame < MAX_TRIES_WITHOUT_FRAME:
        return AfterFailure("retry", error)
    return AfterFailure("fail", f"{error} (gave up after {tries_without_frame} attempts without a frame)")


def open_failure_reason(error_type: str, message: str, elapsed_s: float, timeout_s: float, *,
                        reading: bool = False) -> str:
    """The reason to show for a failed open or read: a timeout as a timeout.

    FFmpeg reports its own interrupt (PyAV's timeout) as "Immediate exit requested" (``ExitError``),
    or, for RTSP, as "Invalid data found"; an error that arrives when the time is up is the timeout.

    Example:
        >>> open_failure_reason("InvalidDataError", "Invalid data found when processing input", 5.01, 5.0)
        'no answer within 5 s'
    """
    if error_type == "ExitError" or elapsed_s >= 0.95 * timeout_s:
        return f"no data within {timeout_s:g} s" if reading else f"no answer within {timeout_s:g} s"
    return f"{error_type}: {message}"
