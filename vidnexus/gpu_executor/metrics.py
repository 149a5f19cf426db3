"""Per-session serving metrics, kept in the I/O layer (policies never record metrics).

Plain counters and bounded samples for the stats topic and benchmarks, mirrored to a Prometheus
registry when one is given.
"""

from __future__ import annotations

import threading
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prometheus_client import Counter as PCounter
    from prometheus_client import Gauge, Histogram

__all__ = ["SessionMetrics", "ExecutorMetrics", "percentile", "recent_quantile", "RecentTimes"]


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by nearest rank; NaN for no values."""
    if not values:
        return float("nan")
    s = sorted(values)
    k = min(len(s) - 1, max(0, int(round(q * (len(s) - 1)))))
    return s[k]


def recent_quantile(values: "deque[float] | list[float]", q: float = 0.9, min_samples: int = 20) -> float:
    """Pure: the ``q``-quantile of ``values`` (a recent window of measured seconds), 0 until
    ``min_samples`` were measured (a reserve taken from a handful of samples would be noise).

    Example:
        >>> recent_quantile([0.002] * 15 + [0.010] * 5)
        0.01
        >>> recent_quantile([0.002] * 5)
        0.0
    """
    if len(values) < min_samples:
        return 0.0
    return max(0.0, percentile(list(values), q))


class RecentTimes:
    """The newest ``window`` durations (seconds) per key, and their quantile: how the worker keeps
    what it measures fresh. Not thread-safe: one owner records and reads.

    Example:
        >>> t = RecentTimes(window=4)
        >>> for s in (0.9, 0.1, 0.2, 0.3, 0.4):
        ...     t.add("map", s)
        >>> t.quantile("map", q=1.0, min_samples=4), t.quantile("other")
        (0.4, 0.0)
    """

    def __init__(self, window: int = 256) -> None:
        self.window = window
        self._times: dict[str, deque[float]] = {}

    def add(self, key: str, seconds: float) -> None:
        d = self._times.get(key)
        if d is None:
            d = self._times[key] = deque(maxlen=self.window)
        d.append(seconds)

    def quantile(self, key: str, q: float = 0.9, min_samples: int = 20) -> float:
        """:func:`recent_quantile` of ``key``'s window (0 for a key never measured)."""
        d = self._times.get(key)
        return recent_quantile(d, q, min_samples) if d is not None else 0.0

    def keys(self) -> list[str]:
        return list(self._times)


@dataclass
class SessionMetrics:
    session_id: str
    arrivals: int = 0
    replies: int = 0
    within_slo: int = 0
    drops: Counter[str] = field(default_factory=Counter)
    batches: Counter[int] = field(default_factory=Counter)
    latency_s: deque[float] = field(default_factory=lambda: deque(maxlen=20_000))
    queue_s: deque[float] = field(default_factory=lambda: deque(maxlen=20_000))
    first_arrival: float | None = None
    last_arrival: float | None = None

    def copy(self) -> "SessionMetrics":
        """A copy to summarize without holding the executor's lock (the device thread records every
        reply under it)."""
        return SessionMetrics(self.session_id, self.arrivals, self.replies, self.within_slo, Counter(self.drops),
                              Counter(self.batches), deque(self.latency_s), deque(self.queue_s), self.first_arrival,
                              self.last_arrival)

    def snapshot(self, busy_s: float, elapsed_s: float) -> dict[str, Any]:
        lat = sorted(self.latency_s)  # sorted once: percentile() of a sorted list sorts in linear time
        q = sorted(self.queue_s)
        span = (
            (self.last_arrival - self.first_arrival)
            if self.first_arrival is not None and self.last_arrival is not None
            else 0.0
        )
        nb = sum(self.batches.values())
        return {
            "session": self.session_id,
            "arrivals": self.arrivals,
            "arrival_rate": (self.arrivals - 1) / span if span > 0 else 0.0,
            "replies": self.replies,
            "within_slo": self.within_slo,
            "drops": dict(self.drops),
            "batch_sizes": {str(k): v for k, v in sorted(self.batches.items())},
            "mean_batch": (sum(k * v for k, v in self.batches.items()) / nb) if nb else 0.0,
            "queue_p50_ms": percentile(q, 0.5) * 1000,
            "latency_p50_ms": percentile(lat, 0.5) * 1000,
            "latency_p99_ms": percentile(lat, 0.99) * 1000,
            "device_busy_fraction": busy_s / elapsed_s if elapsed_s > 0 else 0.0,
        }


@dataclass(frozen=True)
class _Prometheus:
    """The Prometheus mirror of :class:`ExecutorMetrics`."""

    arrivals: PCounter
    drops: PCounter
    batch: Histogram
    latency: Histogram
    busy: Gauge
    replies: PCounter
    within_slo: PCounter


class ExecutorMetrics:
    """All sessions of one executor, thread-safe; optional Prometheus mirror."""

    def __init__(self, prometheus_registry: Any = None) -> None:
        self._lock = threading.Lock()
        self.sessions: dict[str, SessionMetrics] = {}
        self.busy_s = 0.0
        self._prom: _Prometheus | None = None
        if prometheus_registry is not None:
            from prometheus_client import Counter as PCounter
            from prometheus_client import Gauge, Histogram

            self._prom = _Prometheus(
                arrivals=PCounter("vnx_requests", "Requests received", ["session"], registry=prometheus_registry),
                drops=PCounter("vnx_drops", "Requests dropped", ["session", "reason"], registry=prometheus_registry),
                batch=Histogram("vnx_batch_size", "Batch size", ["session"],
                                buckets=(1, 2, 4, 8, 16, 32, 64, 128), registry=prometheus_registry),
                latency=Histogram("vnx_latency_seconds", "Request latency", ["session"],
                                  buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.4, 0.8, 1.6),
                                  registry=prometheus_registry),
                busy=Gauge("vnx_device_busy_seconds", "Device busy time", registry=prometheus_registry),
                replies=PCounter("vnx_replies", "Requests answered", ["session"], registry=prometheus_registry),
                within_slo=PCounter("vnx_replies_within_slo", "Requests answered within their deadline (SLO "
                                    "attainment: this over vnx_requests_total)", ["session"],
                                    registry=prometheus_registry),
            )

    def _s(self, sid: str) -> SessionMetrics:
        m = self.sessions.get(sid)
        if m is None:
            m = self.sessions[sid] = SessionMetrics(sid)
        return m

    def arrival(self, sid: str, now: float) -> None:
        with self._lock:
            m = self._s(sid)
            m.arrivals += 1
            if m.first_arrival is None:
                m.first_arrival = now
            m.last_arrival = now
        if self._prom is not None:
            self._prom.arrivals.labels(sid).inc()

    def drop(self, sid: str, reason: str) -> None:
        with self._lock:
            self._s(sid).drops[reason] += 1
        if self._prom is not None:
            self._prom.drops.labels(sid, reason).inc()

    def batch(self, sid: str, size: int, seconds: float) -> None:
        with self._lock:
            self._s(sid).batches[size] += 1
            self.busy_s += seconds
        if self._prom is not None:
            self._prom.batch.labels(sid).observe(size)
            self._prom.busy.inc(seconds)

    def reply(self, sid: str, latency_s: float, queue_s: float, within_slo: bool) -> None:
        with self._lock:
            m = self._s(sid)
            m.replies += 1
            m.within_slo += int(within_slo)
            m.latency_s.append(latency_s)
            m.queue_s.append(queue_s)
        if self._prom is not None:
            self._prom.latency.labels(sid).observe(latency_s)
            self._prom.replies.labels(sid).inc()
            self._prom.within_slo.labels(sid).inc(1 if within_slo else 0)  # 0: the series exists at 0% too

    def snapshot(self, elapsed_s: float) -> list[dict[str, Any]]:
        """Every session's counters and latency percentiles. Only the copy is made under the lock:
        sorting 20,000 latencies per session while holding it stalled the device thread (~40 ms
        every stats report at 300 req/s)."""
        with self._lock:
            copies, busy = [m.copy() for m in self.sessions.values()], self.busy_s
        return [m.snapshot(busy, elapsed_s) for m in copies]
