"""Calling executor sessions over the Bus: one future per request, replies matched by request id.

A reply's ``latency_s`` is what the caller saw, from submit to reply, bus hops included (the
executor's own figure is in its stats). The difference between the two, per session, is the round
trip over the bus: :meth:`ExecutorClient.round_trip_s` is its 90th percentile over the session's
last 256 replies of the last 30 s (the model's, over all of its sessions on this client, until the
session has 20: a session the worker just moved to starts from what the model's requests measured),
never more than the session's SLO (computed again at most every ``ROUND_TRIP_REFRESH_S`` once
measured), and :meth:`ExecutorClient.reply_reserve_s` the time callers
take off their deadlines for the reply's trip back: half the round trip's median
(:data:`REPLY_RESERVE_Q`). Every reply the executor timed counts, its drops
too: were only answers measured, a reserve grown past what the SLO leaves (replies held through a
broker outage, a burst) would send every request out already late, get no answer back, and never
come down. Workers report the round trip per model for the latency split to reserve. A
request given ``expires_wall`` that has no reply by then ends as a drop with reason ``timeout``,
decided on the client's clock by its listener thread.

Where a plan routes a session (:meth:`ExecutorClient.route`, a plan's ``routing``: session →
executor → req/s), its requests go to the executors in proportion to those weights, each on its
own topic (``Topics.routed_requests``), by smooth weighted round-robin; a session no plan routes
goes to its shared request topic, which the executors serving it share in a consumer group."""

from __future__ import annotations

import functools
import heapq
import logging
import math
import threading
import uuid
from collections import deque
from concurrent.futures import Future, InvalidStateError
from dataclasses import replace
from typing import Any, Mapping, Sequence

import numpy as np

from vidnexus.clock import Clock, MonotonicClock
from vidnexus.config import Settings
from vidnexus.connectors.bus import Bus, Message
from vidnexus.connectors.dead_letter import DeadLetters
from vidnexus.contracts.replies import Reply
from vidnexus.contracts.requests import InferRequest, decode_replies, encode_request
from vidnexus.contracts.sessions import SessionKey
from vidnexus.contracts.topics import BACKGROUND_RETENTION_S, REPLY_RETENTION_S, Topics, request_retention_s
from vidnexus.errors import CodecError, ConfigError, ConnectorError, VidnexusError
from vidnexus.gpu_executor.metrics import recent_quantile
from vidnexus.gpu_executor.routing import Router

__all__ = ["ExecutorClient", "REPLY_RESERVE_Q", "hop_reserve"]

logger = logging.getLogger(__name__)

MAX_MESSAGE_INPUT_BYTES = 4 * 1024 * 1024
"""Inputs per request message, in bytes: a frame's inputs for a session travel in as few messages
as stay under this (the buses refuse messages over 8 MB)."""

HOP_SAMPLES = 256
"""Replies per session whose bus round trip is kept (the newest)."""


HOP_MIN_SAMPLES = 20
"""Replies measured before a round trip is trusted (0 is reserved until then)."""

HOP_WINDOW_S = 30.0
"""Seconds a measured round trip counts for: a session that got no reply for that long (its
executor or the broker away) starts measuring again from nothing."""

ROUND_TRIP_REFRESH_S = 0.1
"""How long a computed round-trip quantile is reused once measured (:meth:`ExecutorClient.round_trip_s`):
callers ask it for every request (a worker's stage budget, the bench's deadlines), and sorting the
session's window each time was a sixth of a request's submit in the client (py-spy, issue 18's note
of 2026-12-03). Before it is measured (0), every new reply recomputes it."""

REPLY_RESERVE_Q = 0.5
"""The quantile of the round trip whose half a request's deadline leaves for its reply's trip back.
The reserve is taken from every request's budget at the executor, so a larger one costs drops
whenever the executor is busy, while the replies it saves from lateness are few: the late ones are
mostly those whose trip stalled (15-30 ms on this VM) far past any reserve worth keeping. With
the 90th percentile (until 2026-11-30; a reserve of 3.2-4.1 ms here), alternating arms at 120
req/s with a 50 ms SLO behind the local broker missed 408 of 7,159 requests (323 drops, 85 late);
with the median (a reserve of 2.1-2.4 ms) 274 (186, 88), fewer in each of four rounds; with no
reserve 289 (145, 144).
The figures are in issue 18's note of 2026-11-30 (``.vnx/ab.py``, not a benchmark)."""

LISTEN_RETRY_S = 0.5
"""How often the reply listener tries again while reading replies fails (a broker restarting)."""

_UNTIMED = frozenset({"error", "timeout"})
"""Reasons of replies whose ``latency_s`` is not the executor's time with the request."""


def _retention(session_id: str) -> float | None:
    try:
        return request_retention_s(SessionKey.parse(session_id).slo_s)
    except ConfigError:
        return None


def hop_reserve(round_trips_s: "deque[float] | list[float]", q: float = REPLY_RESERVE_Q,
                min_samples: int = HOP_MIN_SAMPLES) -> float:
    """Pure: the time to reserve for a reply's trip back: half the ``q``-quantile (default
    :data:`REPLY_RESERVE_Q`) of the measured bus round trips (request and reply hops together), 0
    until ``min_samples`` were measured.

    Example:
        >>> hop_reserve([0.002] * 15 + [0.010] * 5, q=0.9)
        0.005
        >>> hop_reserve([0.002] * 15 + [0.010] * 5)   # the median's half
        0.001
        >>> hop_reserve([0.002] * 5)
        0.0
    """
    return recent_quantile(round_trips_s, q, min_samples) / 2


class ExecutorClient:
    """Send requests to sessions and receive replies on this client's own reply topic.

    Args:
        clock: time source for deadlines (wall), latencies (monotonic) and the listener's waits.
    """

    def __init__(self, bus: Bus, settings: Settings, name: str | None = None, *,
                 clock: Clock | None = None, dead_letters: DeadLetters | None = None) -> None:
        self.bus, self.settings = bus, settings
        self._clock = clock or MonotonicClock()
        self.topics = Topics(settings.topic_prefix)
        self.reply_topic = self.topics.replies(name or uuid.uuid4().hex[:12])
        bus.create_topic(self.reply_topic, 1, retention_s=REPLY_RETENTION_S)
        self.dead_letters = dead_letters or DeadLetters(bus, self.topics, f"client {self.reply_topic}")
        self.dead_letters.expect("replies")
        self._futures: dict[str, tuple[list[Future[Reply]], float]] = {}  # request id → (one per input, sent)
        self._expiry: list[tuple[float, str]] = []  # heap of (expires_wall, request id)
        self._hops: dict[str, deque[tuple[float, float]]] = {}  # session → (when, bus round trip) per reply
        self._model_hops: dict[str, deque[tuple[float, float]]] = {}  # model → the same, over all of its sessions
        self._hop_count = 0  # round trips measured so far (what a cached quantile was computed after)
        self._quantiles: dict[tuple[str, float], tuple[float, int, float]] = {}  # (session, q) → (when, count, value)
        self._lock = threading.Lock()
        self._routers: dict[str, Router[str]] = {}
        self._created_topics: set[str] = set()  # routed and background topics this client created already
        self._stop = threading.Event()
        self._consumer = bus.subscribe([self.reply_topic], group=None, from_beginning=True)
        self._thread = threading.Thread(target=self._listen, daemon=True, name="vnx-client")
        self._thread.start()

    def submit(self, session_id: SessionKey | str, x: np.ndarray, *, slo_s: float | None = None,
               deadline_wall: float | None = None, expires_wall: float | None = None,
               **meta: Any) -> Future[Reply]:
        """Send one request; its deadline is ``deadline_wall`` (default: now + ``slo_s``, 1 s). With
        ``expires_wall``, the future ends as a ``timeout`` drop if no reply came by then."""
        dl = deadline_wall if deadline_wall is not None else self._clock.wall() + (slo_s or 1.0)
        return self.submit_many(session_id, [x], deadline_wall=dl, expires_wall=expires_wall, **meta)[0]

    def submit_many(self, session_id: SessionKey | str, xs: Sequence[np.ndarray], *, deadline_wall: float,
                    expires_wall: float | None = None, max_bytes: int = MAX_MESSAGE_INPUT_BYTES,
                    **meta: Any) -> list[Future[Reply]]:
        """Send ``xs`` to one session as one message (several when their bytes pass ``max_bytes``),
        all with ``deadline_wall``; a future per input, in order."""
        out: list[Future[Reply]] = []
        for chunk in _chunks(xs, max_bytes):
            rid = uuid.uuid4().hex
            futs: list[Future[Reply]] = [Future() for _ in chunk]
            with self._lock:
                self._futures[rid] = (futs, self._clock.now())
                if expires_wall is not None:
                    heapq.heappush(self._expiry, (expires_wall, rid))

            def forget_if_cancelled(f: Future[Reply], rid: str = rid, futs: list[Future[Reply]] = futs) -> None:
                if f.cancelled() and all(g.cancelled() for g in futs):
                    self._forget(rid)

            for f in futs:
                f.add_done_callback(forget_if_cancelled)
            req = InferRequest(rid, str(session_id), deadline_wall, self.reply_topic, tuple(chunk), **meta)
            topic = (self._background_topic(str(session_id)) if deadline_wall == math.inf
                     else self._topic_of(str(session_id)))
            self.bus.publish(topic, rid.encode(), encode_request(req))
            out += futs
        return out

    def route(self, routing: Mapping[str, Mapping[str, float]]) -> None:
        """Route each session's requests to the executors a plan gives it, in proportion to the
        plan's weights (``EpochPlan.routing``: session → executor → req/s); sessions it does not
        name go to their shared request topic. A session whose weights did not change keeps its
        round-robin's position."""
        with self._lock:
            old = self._routers
            self._routers = {}
            for sid, per in routing.items():
                if not per:
                    continue
                r = Router(per)
                kept = old.get(sid)
                self._routers[sid] = kept if kept is not None and kept.weights == r.weights else r

    def _topic_of(self, session_id: str) -> str:
        with self._lock:
            r = self._routers.get(session_id)
            executor = r.next() if r is not None else None
        if executor is None:
            return self.topics.requests(session_id)
        topic = self.topics.routed_requests(session_id, executor)
        # The executor creates it too, when the plan reaches it; the shared topic reaches it meanwhile.
        if self._created(topic, 1, _retention(session_id)):
            return topic
        logger.warning("sending %s's request to its shared topic", session_id)
        return self.topics.requests(session_id)

    def _background_topic(self, session_id: str) -> str:
        """Where a request with no deadline goes: the session's background topic (not routed: any
        executor hosting the session serves it in its slack; it creates the topic too)."""
        topic = self.topics.background_requests(session_id)
        self._created(topic, 4, BACKGROUND_RETENTION_S)  # if the broker is away, the publish waits or fails
        return topic

    def _created(self, topic: str, partitions: int, retention_s: float | None) -> bool:
        """Create ``topic`` once per client; False when the broker refused it (logged)."""
        if topic in self._created_topics:
            return True
        try:
            self.bus.create_topic(topic, partitions, retention_s=retention_s)
        except ConnectorError as e:
            logger.warning("cannot create %s (%s)", topic, e)
            return False
        self._created_topics.add(topic)
        return True

    def flush(self) -> None:
        self.bus.flush()

    def wall(self) -> float:
        """Wall-clock time on this client's clock (what deadlines are set on)."""
        return self._clock.wall()

    def round_trip_s(self, session_id: SessionKey | str, q: float = 0.9) -> float:
        """The ``q``-quantile of the bus round trip (request and reply hops, less the executor's
        time) of ``session_id``'s recent requests, else of its model's (see the module
        docstring), at most the session's SLO; 0 until enough were measured."""
        sid = str(session_id)
        now = self._clock.now()
        since = now - HOP_WINDOW_S
        with self._lock:
            cached = self._quantiles.get((sid, q))
            if cached is not None and now - cached[0] < ROUND_TRIP_REFRESH_S and (cached[2] > 0 or cached[1] == self._hop_count):
                return cached[2]
            hops = [h for t, h in self._hops.get(sid, ()) if t >= since]
            if len(hops) < HOP_MIN_SAMPLES:
                hops = [h for t, h in self._model_hops.get(_model_of(sid), ()) if t >= since]
            count = self._hop_count
        value = min(recent_quantile(hops, q, HOP_MIN_SAMPLES), _slo_of(sid))
        with self._lock:
            self._quantiles[(sid, q)] = (now, count, value)
        return value

    def reply_reserve_s(self, session_id: SessionKey | str) -> float:
        """Seconds to take off a deadline for the reply's trip back from ``session_id``'s executor:
        half the :data:`REPLY_RESERVE_Q` quantile of its round trip (:meth:`round_trip_s`)."""
        return self.round_trip_s(session_id, REPLY_RESERVE_Q) / 2

    def _forget(self, rid: str) -> None:
        """A caller gave up on a request (timeout): a late reply is then ignored."""
        with self._lock:
            self._futures.pop(rid, None)

    @property
    def outstanding(self) -> int:
        """Requests (inputs) sent and not answered yet."""
        with self._lock:
            return sum(len(futs) for futs, _ in self._futures.values())

    def _poll_timeout(self) -> float:
        """Poll until the next expiry, at most 0.1 s (a request submitted meanwhile may expire sooner)."""
        with self._lock:
            while self._expiry and self._expiry[0][1] not in self._futures:
                heapq.heappop(self._expiry)  # answered or forgotten
            if not self._expiry:
                return 0.1
            return min(0.1, max(0.0, self._expiry[0][0] - self._clock.wall()))

    def _expire(self) -> None:
        now = self._clock.wall()
        expired = []
        with self._lock:
            while self._expiry and self._expiry[0][0] <= now:
                _, rid = heapq.heappop(self._expiry)
                entry = self._futures.pop(rid, None)
                if entry is not None:
                    expired.append(entry)
        for futs, sent in expired:
            for fut in futs:
                _resolve(fut, Reply.dropped("timeout", latency_s=self._clock.now() - sent))

    def _listen(self) -> None:
        failing_since: float | None = None  # when reading replies began to fail
        while not self._stop.is_set():
            self._expire()
            try:
                msgs = self._consumer.poll(timeout_s=self._poll_timeout())
            except Exception as e:  # noqa: BLE001 - the listener outlives a broker restart; requests meanwhile time out
                if failing_since is None:
                    failing_since = self._clock.now()
                    retryable = isinstance(e, ConnectorError) and e.retryable
                    logger.log(logging.WARNING if retryable else logging.ERROR,
                               "cannot read replies from %s (%s: %s): trying again every %g s",
                               self.reply_topic, type(e).__name__, e, LISTEN_RETRY_S)
                self._stop.wait(LISTEN_RETRY_S)
                continue
            if failing_since is not None:
                logger.warning("replies from %s read again after %.1f s", self.reply_topic,
                               self._clock.now() - failing_since)
                failing_since = None
            for m in msgs:
                try:
                    answered = decode_replies(m.value)
                except CodecError as e:
                    self._dead_letter(m, str(e))
                    continue
                now = self._clock.now()
                for rid, sid, reps in answered:
                    self._answer(rid, sid, reps, now)

    def _answer(self, rid: str, sid: str, reps: list[Reply], now: float) -> None:
        """Resolve request ``rid``'s futures with its replies (received at ``now``)."""
        with self._lock:
            entry = self._futures.pop(rid, None)
            timed = [r.latency_s for r in reps if r.ok or r.reason not in _UNTIMED]
            if entry is not None and timed:  # the bus's share: the round trip less the executor's time
                sample = (now, max(0.0, now - entry[1] - max(timed)))
                self._hops.setdefault(sid, deque(maxlen=HOP_SAMPLES)).append(sample)
                self._model_hops.setdefault(_model_of(sid), deque(maxlen=HOP_SAMPLES)).append(sample)
                self._hop_count += 1
        if entry is None:
            return
        futs, sent = entry
        if len(reps) != len(futs):
            reps = [Reply.dropped("error", latency_s=0.0)] * len(futs)  # not ours to guess which
        for fut, rep in zip(futs, reps):
            _resolve(fut, replace(rep, latency_s=now - sent))

    def _dead_letter(self, m: Message, reason: str) -> None:
        try:
            self.dead_letters.send(m, reason)
        except ConnectorError as e:  # the broker is away: the reply is unreadable anyway
            self.dead_letters.count(m, reason)
            logger.warning("a reply that cannot be read was not dead-lettered: %s", e)

    def close(self) -> None:
        """Stop the listener, close the reply consumer and delete this client's reply topic (a
        broker that cannot answer is logged: closing neither raises nor waits past the bus's
        timeout for it). A reply published after that creates the topic again on a broker that
        auto-creates topics."""
        self._stop.set()
        self._consumer.wakeup()
        self._thread.join(timeout=5)
        self._consumer.close()
        try:
            self.bus.delete_topic(self.reply_topic)
        except Exception as e:  # closing: the topic stays behind, nothing else is wrong
            logger.warning("reply topic %s was not deleted: %s", self.reply_topic, e,
                           extra={"topic": self.reply_topic})


def _chunks(xs: Sequence[np.ndarray], max_bytes: int) -> list[list[np.ndarray]]:
    """``xs`` in order, cut so that each part's input bytes stay within ``max_bytes`` (an input
    larger than that travels alone)."""
    parts: list[list[np.ndarray]] = [[]]
    size = 0
    for x in xs:
        n = int(np.asarray(x).nbytes)
        if parts[-1] and size + n > max_bytes:
            parts.append([])
            size = 0
        parts[-1].append(x)
        size += n
    return [p for p in parts if p]


@functools.lru_cache(maxsize=1024)
def _slo_of(session_id: str) -> float:
    """The SLO in seconds of a session's string form (inf when it is not one: nothing to bound by)."""
    try:
        return SessionKey.parse(session_id).slo_s
    except VidnexusError:
        return math.inf


@functools.lru_cache(maxsize=1024)
def _model_of(session_id: str) -> str:
    """The model of a session's string form (the string itself when it is not one)."""
    try:
        return SessionKey.parse(session_id).model
    except VidnexusError:
        return session_id


def _resolve(fut: Future[Reply], reply: Reply) -> None:
    """Set a future's reply unless its caller gave up (cancelled) meanwhile."""
    try:
        fut.set_result(reply)
    except InvalidStateError:
        pass
