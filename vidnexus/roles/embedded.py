"""Embedded mode: every role of a deployment in one process, over the in-memory bus and the
embedded store (chdb) — the same classes distributed mode runs in separate processes over Kafka.

:class:`Embedded` registers an app's streams (or takes the registered streams that feed it), starts
the executor (the app's models loaded, one session per DNN stage), the scheduler (epochs, squishy
bin packing, the app's latency split from its measured fan-out), the sink, the worker running the
app's chain and ingest, optionally the read-only SQL endpoint (chdb holds its directory: other
processes query through it), and runs until every file stream has ended and every frame it
published is accounted in ``vnx_frames`` (or until stopped, for live streams).

Example (the ``hud`` app on one synthetic stream; ``vidnexus run hud --stream synthetic://hud``)::

    run = Embedded(load_settings(), load_app("hud"), streams=[StreamSpec("cam", "synthetic://hud", fps=5)])
    result = run.run()
"""

from __future__ import annotations

import logging
import math
import threading
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

from vidnexus.clock import Clock, MonotonicClock
from vidnexus.config import Settings
from vidnexus.connectors.factory import open_store
from vidnexus.connectors.memory_bus import MemoryBus
from vidnexus.connectors.store import QueryResult, Store, ensure_table, quote
from vidnexus.contracts.plans import EpochPlan
from vidnexus.contracts.profile import Profile
from vidnexus.contracts.sessions import SessionKey
from vidnexus.control.scheduler import SchedulerConfig
from vidnexus.errors import ConfigError
from vidnexus.operators.chain import App
from vidnexus.operators.engine import app_schemas, parse_reasons
from vidnexus.operators.infer import stage_slos
from vidnexus.roles.executor import ExecutorRole, LoadModels
from vidnexus.roles.ingest import IngestRole
from vidnexus.roles.scheduler import SchedulerRole
from vidnexus.roles.sink import SinkRole
from vidnexus.roles.worker import WorkerRole
from vidnexus.streams.ingest import StreamSpec, StreamStatus
from vidnexus.streams.registry import StreamRegistry

__all__ = ["Embedded", "RunResult", "StreamFrames", "app_loader", "EMBEDDED_SCHEDULER"]

logger = logging.getLogger(__name__)

EMBEDDED_SCHEDULER = SchedulerConfig(epoch_s=10.0, min_epoch_s=3.0)
"""Epochs in embedded mode: a run of a minute should see its latency split planned and applied."""


def app_loader(settings: Settings, app: App, device: str = "cpu") -> LoadModels:
    """Load ``app``'s models: its own loaders where it has them, else from the repository."""
    from vidnexus.gpu_executor.loading import prepare_models
    from vidnexus.roles.executor import repository

    loaders = {m.name: m.loader for m in app.models.values() if m.loader is not None}
    shapes = {n: app.models[n].input_shape for n in loaders}
    missing = [n for n, s in shapes.items() if s is None]
    if missing:
        raise ConfigError(f"app {app.name}: models {missing} have a loader but no input_shape")
    return lambda names: prepare_models(settings, names, device, loaders=loaders, shapes=shapes,  # type: ignore[arg-type]
                                        repo=repository(settings))


@dataclass(frozen=True)
class StreamFrames:
    """One stream's frames in ``vnx_frames``: how they ended, and the latency (ingest to the
    worker's outcome) of those that ended ``ok``."""

    stream: str
    status: dict[str, int]
    ok_within_slo: int
    """Frames ``ok`` with a latency within the app's end-to-end SLO."""
    ok_p50_ms: float | None
    ok_p99_ms: float | None
    """ClickHouse's ``quantile`` (as the apps' queries) over the ``ok`` frames; None without any."""

    @property
    def frames(self) -> int:
        return sum(self.status.values())


@dataclass
class RunResult:
    """What an embedded run did."""

    app: str
    streams: list[StreamStatus] = field(default_factory=list)
    published: int = 0
    """Frames ingest published for the run's streams."""
    processed: int = 0
    """Frames the worker ran the chain on."""
    status: dict[str, int] = field(default_factory=dict)
    """``vnx_frames`` rows of the run's streams by status (``ok``, ``partial``, ``dropped``, ``error``)."""
    executor_stats: list[dict[str, Any]] = field(default_factory=list)
    plans: list[EpochPlan] = field(default_factory=list)
    stage_slos_ms: dict[str, float] = field(default_factory=dict)
    """The stage SLOs the worker used at the end (the scheduler's split once adopted)."""
    specs: list[StreamSpec] = field(default_factory=list)
    """The streams the run ingested (URL and sampling)."""
    slo_ms: float = 0.0
    """The app's end-to-end SLO."""
    per_stream: list[StreamFrames] = field(default_factory=list)
    reasons: dict[str, int] = field(default_factory=dict)
    """Frames whose ``vnx_frames`` reasons name each drop reason (a frame with two counts under both)."""
    profiles: dict[str, Profile] = field(default_factory=dict)
    """The executor's ℓ(b) of each model at the end (measured, refreshed online)."""
    elapsed_s: float = 0.0
    """Seconds :meth:`Embedded.run` ran (models loaded before it started)."""

    @property
    def accounted(self) -> int:
        return sum(self.status.values())


class Embedded:
    """The roles of a deployment in one process (see the module docstring).

    Args:
        streams: streams to register for the app (replacing same-named ones) and ingest; None: the
            registered streams that feed the app (with a ``console``, the run follows the registry:
            streams registered for the app while it runs, through the console or the CLI, are
            ingested too, and :meth:`run` lasts until :meth:`stop` or its timeout).
        load: how the executor loads models (default: :func:`app_loader`).
        sql: (host, port, token) to serve the read-only SQL endpoint on while running.
        console: (host, port, tokens) to serve the console's HTTP API on while running
            (:mod:`vidnexus.roles.console`: streams, apps, models, this run's plans, drops, SQL).
        fresh: drop the app's tables and ``vnx_frames`` first (the demos do, to show one run).
        ingest: run the ingest role; False: no stream is ingested (``streams`` may be empty) and
            frames come from whoever publishes on :attr:`bus`'s frames topic (``vidnexus bench
            apps``); :meth:`run` then lasts until :meth:`stop` (or its timeout).
    """

    def __init__(self, settings: Settings, app: App, *, streams: Sequence[StreamSpec] | None = None,
                 clock: Clock | None = None, load: LoadModels | None = None, device: str = "cpu",
                 scheduler: SchedulerConfig = EMBEDDED_SCHEDULER, sql: tuple[str, int, str] | None = None,
                 console: tuple[str, int, Any] | None = None,
                 fresh: bool = False, report_every_s: float = 2.0, concurrency: int = 64,
                 ingest: bool = True) -> None:
        self.settings = settings.model_copy(update={"bus": "memory"})
        self.app, self.clock = app, clock or MonotonicClock()
        self.bus = MemoryBus(clock=self.clock)
        self.store: Store = open_store(self.settings)
        try:
            if fresh:
                for t in (*app.tables, "vnx_frames"):
                    self.store.execute(f"DROP TABLE IF EXISTS {t}")
            for schema in app_schemas(app).values():  # a run that writes no row still has them to query
                ensure_table(self.store, schema)
            registry = StreamRegistry(self.store)
            if streams is not None:
                for s in streams:
                    registry.add(replace(s, apps=(app.name,)), check=False, overwrite=True)
                names = {s.name for s in streams}
                self.specs = list(streams)
            else:
                rows = [r for r in registry.list() if r.state == "enabled" and app.name in r.spec.apps]
                names = {r.spec.name for r in rows}
                self.specs = [r.spec for r in rows]
            self.follow = streams is None and console is not None
            if not names and ingest and not self.follow:
                raise ConfigError(f"app {app.name}: no stream to run on; give --stream URL or register one with "
                                  f"`vidnexus streams add NAME URL --app {app.name}` (or serve the console with "
                                  "--console-port and add one there)")
            self.names = names
            sessions = [SessionKey(app.served_model(m), slo) for m, slo in stage_slos(app).items()]
            self.plans: list[EpochPlan] = []
            self.executor = ExecutorRole(self.settings, sessions, bus=self.bus, clock=self.clock, device=device,
                                         load=load or app_loader(self.settings, app, device), executor_id="embedded",
                                         stats_every_s=2.0, allow_empty=True)
            self.scheduler = SchedulerRole(self.settings, bus=self.bus, clock=self.clock, config=scheduler,
                                           on_plan=self.plans.append)
            self.sink = SinkRole(self.settings, bus=self.bus, store=self.store, clock=self.clock, max_delay_s=0.5)
            self.worker = WorkerRole(self.settings, app, bus=self.bus, clock=self.clock, concurrency=concurrency,
                                     report_every_s=report_every_s, worker_id="embedded")
            # Backfill streams' frames (no deadline, run in the live sessions' slack) have their own
            # worker, so that a backlog of them never holds up a live frame; started when some stream
            # may be one (the run's, or any the registry or the console adds).
            self.backfill: WorkerRole | None = None
            if any(s.backfill for s in self.specs) or streams is None:
                self.backfill = WorkerRole(self.settings, app, bus=self.bus, clock=self.clock,
                                           concurrency=concurrency, report_every_s=report_every_s,
                                           worker_id="embedded-backfill", backfill=True)
            self.ingesting = ingest
            self.ingest = IngestRole(self.settings, bus=self.bus, store=self.store, clock=self.clock, poll_s=0.5,
                                     only=self._feeds)
            self.endpoint = None
            if sql is not None:
                from vidnexus.sql_endpoint import SqlEndpoint

                host, port, token = sql
                self.endpoint = SqlEndpoint(self.store, token, host, port)
            self.console = None
            if console is not None:
                from vidnexus.contracts.topics import Topics
                from vidnexus.roles.console import ConsoleServer, ControlWatcher
                from vidnexus.roles.console_pages import FrameTap
                from vidnexus.roles.executor import repository

                chost, cport, tokens = console
                topics = Topics(self.settings.topic_prefix)
                self.console = ConsoleServer(self.store, tokens, chost, cport,
                                             control=ControlWatcher(self.bus, topics), tap=FrameTap(self.bus, topics),
                                             repository=lambda: repository(self.settings), apps={app.name: app},
                                             close_control=True)
        except BaseException:
            self.store.close()
            raise
        self._stop = threading.Event()
        self._elapsed_s = 0.0

    def _feeds(self, spec: StreamSpec) -> bool:
        """Whether ingest runs this stream: one of the run's, or (following the registry) any that
        feeds the app."""
        if self.follow and self.app.name in spec.apps:
            self.names.add(spec.name)
        return spec.name in self.names

    def stop(self) -> None:
        """End the run early (Ctrl-C, SIGTERM): what was read is still processed and accounted."""
        self._stop.set()

    def run(self, *, until_done: bool = True, timeout_s: float | None = None,
            progress: Callable[[int, int, bool], None] | None = None) -> RunResult:
        """Run until every file stream has ended and its frames are accounted (``until_done``), or
        until :meth:`stop`. ``progress(processed, published, ingesting)`` is called about twice a
        second."""
        stops = {name: threading.Event() for name in ("ingest", "worker", "backfill", "sink", "executor", "scheduler")}
        self.executor.start()  # models loaded before the first frame arrives
        if self.endpoint is not None:
            self.endpoint.start()
        if self.console is not None:
            self.console.start()
        threads: dict[str, threading.Thread] = {
            "executor": threading.Thread(target=self.executor.run, args=(stops["executor"],), name="vnx-executor"),
            "scheduler": threading.Thread(target=self.scheduler.run, args=(stops["scheduler"],), name="vnx-scheduler"),
            "sink": threading.Thread(target=self.sink.run, args=(stops["sink"],), name="vnx-sink"),
            "worker": threading.Thread(target=self.worker.run, args=(stops["worker"],), name="vnx-worker"),
            "ingest": threading.Thread(target=lambda: self.ingest.run(stops["ingest"], once=until_done),
                                       name="vnx-ingest"),
        }
        if self.backfill is not None:
            threads["backfill"] = threading.Thread(target=self.backfill.run, args=(stops["backfill"],),
                                                   name="vnx-backfill")
        if self.follow:
            until_done = False  # streams may come through the console at any time
        if not self.ingesting:
            until_done = False
            del threads["ingest"]
        for t in threads.values():
            t.daemon = True
            t.start()
        started = self.clock.now()
        deadline = None if timeout_s is None else started + timeout_s
        try:
            while not self._stop.is_set():
                ingesting = "ingest" in threads and threads["ingest"].is_alive()
                published = sum(s.published for s in self.ingest.statuses())
                if progress is not None:
                    progress(self.frames_processed, published, ingesting)
                if self.ingesting and not ingesting and self.frames_processed >= published:
                    break
                roles = [r for r in ("worker", "backfill", "sink", "executor") if r in threads]
                if any(not threads[r].is_alive() for r in roles):
                    dead = [r for r in roles if not threads[r].is_alive()]
                    raise ConfigError(f"embedded run of app {self.app.name}: the {', '.join(dead)} role stopped "
                                      "(see the log above)")
                if deadline is not None and self.clock.now() >= deadline:
                    logger.warning("embedded run of app %s: stopped after %g s", self.app.name, timeout_s)
                    break
                self._stop.wait(0.5)
        finally:
            # Upstream first, so that everything read is processed, written and accounted.
            for name in ("ingest", "worker", "backfill", "sink", "scheduler", "executor"):
                stops[name].set()
                if name == "ingest":
                    self.ingest.stop()
                if name in threads:
                    threads[name].join(timeout=60)
            if self.endpoint is not None:
                self.endpoint.stop()
            if self.console is not None:
                self.console.stop()
            self._elapsed_s = self.clock.now() - started
        return self.result()

    @property
    def frames_processed(self) -> int:
        """Frames the live and the backfill worker have processed."""
        return self.worker.stats.frames + (self.backfill.stats.frames if self.backfill is not None else 0)

    def result(self) -> RunResult:
        streams = self.ingest.statuses()
        core = self.executor.executor
        res = RunResult(self.app.name, streams, sum(s.published for s in streams), self.frames_processed,
                        executor_stats=core.stats() if core else [], plans=list(self.plans),
                        stage_slos_ms=dict(self.worker.backend.slos), specs=list(self.specs),
                        slo_ms=float(self.app.slo_ms), profiles=core.profiles() if core else {},
                        elapsed_s=self._elapsed_s)
        where = (f"app = {quote(self.app.name)} AND stream IN "
                 f"({', '.join(quote(n) for n in sorted(self.names)) or quote('')})")
        by_stream: dict[str, dict[str, int]] = {}
        for stream, status, n in self.store.query(f"SELECT stream, status, count() FROM vnx_frames FINAL "
                                                  f"WHERE {where} GROUP BY stream, status").rows:
            by_stream.setdefault(str(stream), {})[str(status)] = int(n)
            res.status[str(status)] = res.status.get(str(status), 0) + int(n)
        q = self.store.query(f"SELECT stream, countIf(status = 'ok' AND latency_ms <= {float(self.app.slo_ms)!r}), "
                             "quantileIf(0.5)(latency_ms, status = 'ok'), quantileIf(0.99)(latency_ms, status = 'ok') "
                             f"FROM vnx_frames FINAL WHERE {where} GROUP BY stream ORDER BY stream")
        res.per_stream = [StreamFrames(str(s), by_stream.get(str(s), {}), int(n), _ms(p50), _ms(p99))
                          for s, n, p50, p99 in q.rows]
        for reasons, n in self.store.query(f"SELECT reasons, count() FROM vnx_frames FINAL WHERE {where} "
                                           "AND reasons != '' GROUP BY reasons").rows:
            for kind in parse_reasons(str(reasons)):
                res.reasons[kind] = res.reasons.get(kind, 0) + int(n)
        return res

    def query(self, sql: str) -> QueryResult:
        return self.store.query(sql)

    def close(self) -> None:
        if self.console is not None:
            self.console.stop()  # idempotent: a run that failed before its end leaves it bound
        self.store.close()

    def __enter__(self) -> "Embedded":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _ms(value: Any) -> float | None:
    """A latency quantile from ClickHouse, rounded; None for null or nan (no frame to take it over)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return round(v, 1) if math.isfinite(v) else None
