"""Ingest: decode → sample → JPEG → Frame on the frames topic (keyed by stream, so per-stream order
holds within a partition).

One :class:`StreamWorker` per stream. Files (local, or an ordinary video file over HTTP, or an HLS
VOD playlist) run as fast as possible (or paced at real time) and end; live sources (RTSP, live HLS,
HTTP streams without a length) sample by the wall clock, drop frames that arrive stale instead of
falling behind, and reconnect with exponential backoff when they fail, with the state visible in
:class:`StreamStatus`. A file that cannot be decoded fails that stream only, with the reason.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

from vidnexus.clock import Clock, MonotonicClock
from vidnexus.connectors.bus import Bus
from vidnexus.connectors.outage import Backoff
from vidnexus.errors import ConnectorError, StreamError
from vidnexus.contracts.frames import Frame, encode_frame
from vidnexus.streams.images import frame_payload, payload_size
from vidnexus.streams.media_verdicts import SourceKind, after_failure
from vidnexus.streams.sampling import EveryNth, FpsSampler
from vidnexus.streams.sources import open_source
from vidnexus.streams.spec import StreamSpec, url_scheme

__all__ = ["StreamSpec", "StreamStatus", "StreamWorker", "Backoff"]  # StreamSpec lives in streams/spec.py

logger = logging.getLogger(__name__)


@dataclass
class StreamStatus:
    name: str
    state: str = "starting"
    reason: str = ""
    decoded: int = 0
    sampled: int = 0
    published: int = 0
    rejected: int = 0
    stale: int = 0
    errors: int = 0
    corrupt: int = 0
    """Packets the decoder rejected and that were skipped (``StreamSpec.skip_corrupt``)."""
    undelivered: int = 0
    """Sampled frames of a live source dropped because the bus was not taking frames (an outage)."""
    reconnects: int = 0
    last_pts: float = 0.0
    max_gap_s: float = 0.0
    started: float = 0.0
    last_publish: float | None = None
    spec_key: int = 0
    """:attr:`StreamSpec.key` of the registration these counters belong to."""
    last_frame_no: int = -1
    """The number of the last frame published: a restarted ingest continues after it."""
    origin_wall: float = 0.0
    """Wall-clock time the stream was first ingested (a live stream's pts counts from it)."""

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)




class StreamWorker:
    """Ingests one stream until it ends, fails (files) or ``stop`` is set."""

    def __init__(self, spec: StreamSpec, bus: Bus, topic: str, *, clock: Clock | None = None,
                 backoff: Backoff | None = None, stale_s: float = 2.0, open_timeout_s: float = 10.0,
                 resume: StreamStatus | None = None, uncompressed: bool | None = None) -> None:
        self.spec, self.bus, self.topic = spec, bus, topic
        # Uncompressed frames where the bus is in this process (embedded mode): a JPEG would be
        # encoded here and decoded by the worker for nothing. Over Kafka, JPEG.
        self.uncompressed = bool(getattr(bus, "in_process", False)) if uncompressed is None else uncompressed
        self._max_bytes = int(getattr(bus, "max_message_bytes", 0) or 0)
        self.clock = clock or MonotonicClock()
        self.backoff = backoff or Backoff()
        self.stale_s = stale_s
        self.open_timeout_s = open_timeout_s
        self.status = StreamStatus(spec.name, spec_key=spec.key, origin_wall=self.clock.wall())
        if resume is not None and resume.spec_key == spec.key:
            # The same registration, ingested before by a process that stopped or crashed: its
            # counters continue, and its frames keep their numbers (identity in every table).
            for f in ("sampled", "published", "rejected", "undelivered", "stale", "errors", "corrupt", "reconnects",
                      "last_pts", "max_gap_s", "last_frame_no", "origin_wall"):
                setattr(self.status, f, getattr(resume, f))
            self.status.decoded = resume.decoded
        self._resumed_last = self.status.last_frame_no
        self._bus_down = False
        self._bus_backoff = Backoff(initial_s=0.2, max_s=5.0)
        self.stop = threading.Event()
        self.scheme = url_scheme(spec.url)
        self.kind: SourceKind | None = None
        """What the source turned out to be when it was opened (None until then)."""

    @property
    def live(self) -> bool:
        return self.kind == "live"

    def _sampler(self) -> Any:
        if self.spec.every_n:
            return EveryNth(self.spec.every_n)
        if self.spec.keyframes_only:
            return EveryNth(1)
        return FpsSampler(self.spec.fps or 1.0)

    def run(self) -> StreamStatus:
        st = self.status
        st.started = self.clock.now()
        live_sampler = self._sampler()  # live: one sampler on the wall clock across reconnects
        tries_without_frame = 0
        while not self.stop.is_set():
            base, base_corrupt = st.decoded, st.corrupt
            src: Any = None
            try:
                st.state = "running"
                src = open_source(self.spec.url, keyframes_only=self.spec.keyframes_only,
                                  timeout_s=self.open_timeout_s, skip_corrupt=self.spec.skip_corrupt, clock=self.clock)
                self.kind = src.open()
                if not self.live and self._resumed_last >= 0:
                    base, base_corrupt = 0, 0  # a file is decoded from its start again: its counts are these
                self._ingest(src, live_sampler if self.live else self._sampler(), base, base_corrupt)
                if not self.live:
                    self._end_file()
                    return st
                raise StreamError(f"{self.spec.url}: live source ended")
            except _Stopped:
                break
            except Exception as e:  # any failure of this stream stays with this stream
                if not isinstance(e, StreamError):
                    e = StreamError(f"{self.spec.url}: {type(e).__name__}: {e}")
                st.errors += 1
                st.reason = str(e)
                ever_decoded = base + (src.decoded if src is not None else 0) > 0
                tries_without_frame = 0 if ever_decoded else tries_without_frame + 1
                decision = after_failure(self.scheme, self.kind, tries_without_frame, str(e))
                if decision.action == "fail":
                    st.state, st.reason = "failed", decision.reason
                    logger.error("stream %s failed: %s", self.spec.name, decision.reason)
                    return st
                st.state = "reconnecting"
                st.reconnects += 1
                wait = self.backoff.next()
                logger.warning("stream %s: %s; reconnecting in %.1f s", self.spec.name, e, wait)
                self.stop.wait(wait)
            finally:
                if src is not None:
                    st.decoded, st.corrupt = base + src.decoded, base_corrupt + src.corrupt
                    src.close()
        st.state = "stopped"
        return st

    def _ingest(self, src: Any, sampler: Any, base: int, base_corrupt: int) -> None:
        """Decode, sample and publish until the source ends (or raises)."""
        st = self.status
        opened = self.clock.now()
        first_pts: list[float] = []
        paced_from: list[float] = []  # a file's real-time pacing: the clock reading of pts 0

        def keep(pts: float, index: int) -> bool:
            if self.stop.is_set():
                raise _Stopped
            if not self.live and self.spec.until_s is not None and pts > self.spec.until_s:
                raise _UntilReached
            if not self.live:
                if index <= self._resumed_last:
                    sampler.keep(pts, index)  # sampled as before (the sampler's state), published before
                    return False
                if self.spec.realtime:  # at ``speed`` × the video's own pace
                    at = pts / self.spec.speed
                    if not paced_from:  # from the start, or where a resumed ingest continues
                        paced_from.append(opened if self._resumed_last < 0 else self.clock.now() - at)
                    self.clock.sleep(paced_from[0] + at - self.clock.now())
                return bool(sampler.keep(pts, index))
            if not first_pts:
                first_pts.append(pts)
            lag = (self.clock.now() - opened) - (pts - first_pts[0])
            if lag > self.stale_s:
                st.stale += 1
                return False
            return bool(sampler.keep(self.clock.now() - st.started, index))

        try:
            for raw in src.frames(keep):
                st.decoded, st.corrupt = base + src.decoded, base_corrupt + src.corrupt
                self._publish(raw)
                self.backoff.reset()
        except _UntilReached:  # the part of the file asked for has been read: it ends done
            st.decoded, st.corrupt = base + src.decoded, base_corrupt + src.corrupt

    def _end_file(self) -> None:
        """A file read to its end is done, unless nothing it sampled could be published."""
        st = self.status
        if st.sampled and not st.published:
            st.state = "failed"
            st.reason = (f"{self.spec.url}: all {st.sampled} sampled frames were rejected as oversized; "
                         "lower max_side or jpeg_quality")
            logger.error("stream %s failed: %s", self.spec.name, st.reason)
        else:
            st.state = "done"

    def _publish(self, raw: Any) -> None:
        st = self.status
        if self._already_published(raw.index):
            return
        st.sampled += 1
        encoding, data, w, h = frame_payload(raw.image, self.spec.jpeg_quality, self.spec.max_side, self.uncompressed)
        if self._max_bytes and payload_size(data) > self._max_bytes - 4096 and encoding != "jpeg":
            encoding, data, w, h = frame_payload(raw.image, self.spec.jpeg_quality, self.spec.max_side)
        now = self.clock.wall()
        tags = {**self.spec.tags, **{k: str(v) for k, v in raw.truth.items()}}
        if self.spec.apps:
            tags["apps"] = ",".join(self.spec.apps)
        # Frame numbers are identities in every table: the same frame must get the same number after
        # a replay, and a different frame never an old one. A file's is its index in the source
        # (a restarted ingest skips what it had published); a live source's is the capture time in
        # µs (it never repeats; strictly increasing). Live sources restart their timestamps on
        # every reconnect: their pts is wall-clock time since the stream was first ingested.
        frame_no = self._frame_no(raw.index, now)
        pts = raw.pts if not self.live else now - st.origin_wall
        frame = Frame(self.spec.name, frame_no, pts, now, now, w, h, encoding, data, tags)
        value = encode_frame(frame)
        while True:
            try:
                self.bus.publish(self.topic, self.spec.name.encode(), value)
                break
            except ConnectorError as e:
                if "exceeds" in str(e):
                    st.rejected += 1
                    logger.error("stream %s: source frame %d (pts %.3f s) rejected: %s (lower max_side or "
                                 "jpeg_quality)", self.spec.name, raw.index, raw.pts, e)
                    st.last_frame_no = max(st.last_frame_no, frame_no)
                    return
                if not e.retryable:
                    raise
                if self.live:
                    # A camera does not wait: the frame is dropped, counted, and sampling goes on.
                    if not self._bus_down:
                        logger.warning("stream %s: the bus is not taking frames (%s); dropping them (counted as "
                                       "undelivered) until it does", self.spec.name, e)
                    self._bus_down = True
                    st.undelivered += 1
                    st.last_frame_no = max(st.last_frame_no, frame_no)
                    return
                # A file waits for the bus (back-pressure): the same frame is published when it is back.
                if not self._bus_down:
                    logger.warning("stream %s: the bus is not taking frames (%s); waiting", self.spec.name, e)
                self._bus_down = True
                st.state = "waiting"
                if self.clock.wait(self.stop, self._bus_backoff.next()):
                    st.sampled -= 1  # not published, and read again after a restart
                    raise _Stopped from None
        if self._bus_down:
            logger.warning("stream %s: the bus takes frames again", self.spec.name)
            self._bus_down = False
            self._bus_backoff.reset()
            st.state = "running"
        t = self.clock.now()
        if st.last_publish is not None:
            st.max_gap_s = max(st.max_gap_s, t - st.last_publish)
        st.last_publish = t
        st.published += 1
        st.last_pts = pts
        st.last_frame_no = frame_no

    def _frame_no(self, index: int, wall: float) -> int:
        if not self.live:
            return index
        return max(self.status.last_frame_no + 1, int(wall * 1_000_000))

    def _already_published(self, index: int) -> bool:
        """A file's frame the previous process had published (a restart continues after it)."""
        return not self.live and index <= self._resumed_last


class _UntilReached(Exception):
    pass


class _Stopped(Exception):
    pass
