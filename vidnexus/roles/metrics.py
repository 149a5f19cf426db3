"""Prometheus metrics of the roles (``VNX_METRICS_PORT``), read from each role's own counters when
scraped, so the hot paths record nothing twice. The executor's live in
:mod:`vidnexus.gpu_executor.metrics`; docs/metrics.md lists every name, and a test scrapes each
role for them.

Example:
    >>> from prometheus_client import CollectorRegistry, generate_latest
    >>> from vidnexus.roles.sink import SinkStats
    >>> reg = CollectorRegistry()
    >>> reg.register(SinkCollector(lambda: SinkStats(messages=3, rows=7, inserts=1)))
    >>> b"vnx_sink_rows_total 7.0" in generate_latest(reg)
    True
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from vidnexus.roles.sink import SinkStats
    from vidnexus.roles.worker import WorkerStats
    from vidnexus.streams.ingest import StreamStatus

__all__ = ["IngestCollector", "WorkerCollector", "SinkCollector", "SchedulerMetrics", "serve"]

INGEST_STAGES = ("decoded", "sampled", "published", "rejected", "stale", "corrupt", "undelivered")
"""The per-stream frame counters of :class:`~vidnexus.streams.ingest.StreamStatus`, as the
``stage`` label of ``vnx_ingest_frames_total``."""


class IngestCollector(Collector):
    """``vnx_ingest_frames_total{stream,stage}``, ``vnx_ingest_errors_total{stream}``,
    ``vnx_ingest_reconnects_total{stream}``, ``vnx_ingest_stream_state{stream,state}`` (1 for the
    stream's current state) and ``vnx_ingest_seconds_since_frame{stream}``."""

    def __init__(self, statuses: Callable[[], Sequence["StreamStatus"]], now: Callable[[], float]) -> None:
        self.statuses, self.now = statuses, now

    def collect(self) -> Iterator[Any]:
        frames = CounterMetricFamily("vnx_ingest_frames", "Frames of a stream by stage", labels=["stream", "stage"])
        errors = CounterMetricFamily("vnx_ingest_errors", "Decode or source errors of a stream", labels=["stream"])
        reconnects = CounterMetricFamily("vnx_ingest_reconnects", "Reconnections of a live stream", labels=["stream"])
        state = GaugeMetricFamily("vnx_ingest_stream_state", "1 for the stream's current state",
                                  labels=["stream", "state"])
        since = GaugeMetricFamily("vnx_ingest_seconds_since_frame", "Seconds since the stream last published a "
                                  "frame", labels=["stream"])
        now = self.now()
        for s in list(self.statuses()):  # read from the HTTP thread while ingest updates them
            for stage in INGEST_STAGES:
                frames.add_metric([s.name, stage], float(getattr(s, stage)))
            errors.add_metric([s.name], float(s.errors))
            reconnects.add_metric([s.name], float(s.reconnects))
            state.add_metric([s.name, s.state], 1.0)
            if s.last_publish is not None:
                since.add_metric([s.name], max(0.0, now - s.last_publish))
        yield from (frames, errors, reconnects, state, since)


class WorkerCollector(Collector):
    """``vnx_worker_frames_total{app,status}`` (every frame's outcome), ``vnx_worker_rows_total{app}``,
    ``vnx_worker_dead_letters_total{app}`` and ``vnx_worker_frames_in_flight{app}``."""

    def __init__(self, app: str, stats: Callable[[], "WorkerStats"], in_flight: Callable[[], int]) -> None:
        self.app, self.stats, self.in_flight = app, stats, in_flight

    def collect(self) -> Iterator[Any]:
        st = self.stats()
        frames = CounterMetricFamily("vnx_worker_frames", "Frames by outcome (ok, partial, dropped, error)",
                                     labels=["app", "status"])
        for status, n in sorted(dict(st.status).items()):  # a copy: the worker adds statuses meanwhile
            frames.add_metric([self.app, status], float(n))
        rows = CounterMetricFamily("vnx_worker_rows", "Rows published to the sink", labels=["app"])
        rows.add_metric([self.app], float(st.rows))
        dead = CounterMetricFamily("vnx_worker_dead_letters", "Frames that could not be read, dead-lettered",
                                   labels=["app"])
        dead.add_metric([self.app], float(st.dead))
        flight = GaugeMetricFamily("vnx_worker_frames_in_flight", "Frames being processed", labels=["app"])
        flight.add_metric([self.app], float(self.in_flight()))
        yield from (frames, rows, dead, flight)


class SinkCollector(Collector):
    """``vnx_sink_messages_total``, ``vnx_sink_rows_total``, ``vnx_sink_inserts_total``,
    ``vnx_sink_retries_total``, ``vnx_sink_dead_letters_total``."""

    def __init__(self, stats: Callable[[], "SinkStats"]) -> None:
        self.stats = stats

    def collect(self) -> Iterator[Any]:
        st = self.stats()
        for name, value, text in (("messages", st.messages, "Row messages consumed"),
                                  ("rows", st.rows, "Rows inserted"),
                                  ("inserts", st.inserts, "Inserts into the store"),
                                  ("retries", st.retries, "Inserts retried"),
                                  ("dead_letters", st.dead, "Messages the store rejected, dead-lettered")):
            m = CounterMetricFamily(f"vnx_sink_{name}", text)
            m.add_metric([], float(value))
            yield m


class SchedulerMetrics:
    """The scheduler's gauges and counters, set from each published plan: ``vnx_scheduler_devices``,
    ``vnx_scheduler_devices_wanted`` (what an executor autoscaler follows),
    ``vnx_scheduler_executors_alive``, ``vnx_scheduler_infeasible_sessions``,
    ``vnx_scheduler_epochs_total``, ``vnx_scheduler_sessions_moved_total``."""

    def __init__(self, registry: Any) -> None:
        from prometheus_client import Counter, Gauge

        self.devices = Gauge("vnx_scheduler_devices", "Executors the last plan uses", registry=registry)
        self.wanted = Gauge("vnx_scheduler_devices_wanted", "Devices the last packing needs (more than the live "
                            "executors when they are too few)", registry=registry)
        self.executors = Gauge("vnx_scheduler_executors_alive", "Executors whose stats are fresh", registry=registry)
        self.infeasible = Gauge("vnx_scheduler_infeasible_sessions", "Sessions the last plan could not place within "
                                "their SLO", registry=registry)
        self.epochs = Counter("vnx_scheduler_epochs", "Epochs planned", registry=registry)
        self.moved = Counter("vnx_scheduler_sessions_moved", "Sessions moved between executors", registry=registry)

    def planned(self, plan: Any, wanted: int) -> None:
        self.devices.set(plan.devices)
        self.wanted.set(wanted)
        self.executors.set(len(plan.executors))
        self.infeasible.set(len(plan.infeasible))
        self.epochs.inc()
        self.moved.inc(plan.moved)


def serve(port: int, host: str, *collectors: Collector) -> tuple[Any, int]:
    """A registry with ``collectors`` served over HTTP (``GET /metrics``) on ``host:port`` (0: a
    free port); returns the registry (for metrics defined on it afterwards, such as
    :class:`SchedulerMetrics`) and the port."""
    from prometheus_client import CollectorRegistry, start_http_server

    registry = CollectorRegistry()
    for c in collectors:
        registry.register(c)
    server, _ = start_http_server(port, addr=host, registry=registry)
    return registry, int(server.server_address[1])
