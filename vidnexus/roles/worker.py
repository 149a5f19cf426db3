"""The worker role: an app's operator chain on the frames topic.

Frames are consumed in the app's consumer group (``<prefix>-app-<name>``: more workers share the
partitions); each runs through :class:`~vidnexus.operators.engine.ChainEngine` (frames of one
stream in order when the chain has a window); DNN steps call the executors over the bus
(:class:`~vidnexus.operators.infer.RemoteBackend`); each frame's rows, with its ``vnx_frames``
accounting row and the tables' schemas, are published as one message on the rows topic for the
sink. A frame's offset is committed only after its rows message is on the bus (``flush``), so a
worker killed at any point loses no frame; frames in flight are processed again and the tables
count them once. A frame message that cannot be read goes to the frames dead-letter topic.

Every ``report_every_s`` the worker publishes an :class:`~vidnexus.contracts.reports.AppReport`
(the app's DNN graph, measured fan-out and overheads, for query analysis) and follows the
scheduler's latency split for the app, unless stage SLOs were pinned (``split``). The overheads are
the time its frames spend outside the executor, 90th percentiles over recent frames: each model's
bus round trip (its executor client's), the CPU steps after each DNN node (the engine's) and the
encoding of a frame's rows message (its own); the split reserves them before dividing the SLO.

The same class runs over Kafka (``vidnexus worker``) and over the in-memory bus (embedded mode).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
from dataclasses import dataclass, replace
from typing import Callable, Mapping, Sequence

from vidnexus.clock import Clock, MonotonicClock
from vidnexus.config import Settings
from vidnexus.connectors.bus import Bus, Consumer, Message
from vidnexus.connectors.dead_letter import DeadLetters, dead_letter_headers
from vidnexus.connectors.outage import Health, Outage
from vidnexus.connectors.watchdog import GroupWatchdog
from vidnexus.contracts.frames import Frame, decode_frame
from vidnexus.contracts.reports import AppReport, Overheads, encode_report
from vidnexus.contracts.rows import encode_rows
from vidnexus.contracts.topics import Topics
from vidnexus.errors import CodecError, ConnectorError
from vidnexus.gpu_executor.client import ExecutorClient
from vidnexus.gpu_executor.metrics import RecentTimes
from vidnexus.operators.chain import App, Step
from vidnexus.operators.engine import ChainEngine, FrameOutcome, KeyedDispatcher, app_schemas, wants
from vidnexus.operators.infer import RemoteBackend, stage_slos
from vidnexus.roles.summary import PeriodicSummary
from vidnexus.roles.follow import PlanFollower

__all__ = ["WorkerRole", "WorkerStats", "Out", "unknown_models"]

logger = logging.getLogger(__name__)

PLAN_EVERY_S = 0.5
"""How often a worker looks for a newer plan (a cheap poll): its requests follow a plan's routing
within this, before the executors retire what the plan moved (``retire_after_s``)."""

ROUTE_PLANS_FOR_S = 120.0
"""Requests are routed by a plan's weights only while the plan is younger than this when it arrives."""


@dataclass(frozen=True, slots=True)
class Out:
    """One message a frame becomes."""

    topic: str
    key: bytes | None
    value: bytes
    headers: Sequence[tuple[str, bytes]] = ()


class WorkerStats:
    """What a worker has done since it started."""

    def __init__(self) -> None:
        self.frames = 0
        self.rows = 0
        self.skipped = 0
        self.dead = 0
        self.status: dict[str, int] = {}

    def add(self, o: FrameOutcome) -> None:
        if o.frame_no >= 0:
            self.frames += 1
            self.status[o.status] = self.status.get(o.status, 0) + 1
        self.rows += o.row_count()


class _Offsets:
    """Per partition: offsets read and not finished, and the next offset to read (at-least-once:
    commit up to the first unfinished frame)."""

    def __init__(self) -> None:
        self.open: dict[tuple[str, int], set[int]] = {}
        self.next: dict[tuple[str, int], int] = {}
        self.committed: dict[tuple[str, int], int] = {}

    def read(self, m: Message) -> None:
        tp = (m.topic, m.partition)
        self.open.setdefault(tp, set()).add(m.offset)
        self.next[tp] = max(self.next.get(tp, 0), m.offset + 1)

    def done(self, m: Message) -> None:
        self.open.get((m.topic, m.partition), set()).discard(m.offset)

    def committable(self) -> dict[tuple[str, int], int]:
        out = {tp: (min(self.open[tp]) if self.open.get(tp) else nxt) for tp, nxt in self.next.items()}
        return {tp: o for tp, o in out.items() if self.committed.get(tp) != o}


class WorkerRole:
    """Run ``app``'s chain on the frames topic of ``bus``.

    Args:
        split: stage SLOs in ms to pin (model → ms); default: the app's SLO split evenly over its DNN
            depth, then the scheduler's latency split once it is planned.
        concurrency: frames in flight at once.
    """

    def __init__(self, settings: Settings, app: App, *, bus: Bus, clock: Clock | None = None,
                 split: Mapping[str, float] | None = None, concurrency: int = 32, partitions: int = 8,
                 worker_id: str | None = None, report_every_s: float = 5.0, commit_every_s: float = 0.5,
                 client: ExecutorClient | None = None, backfill: bool = False) -> None:
        self.settings, self.app, self.bus = settings, app, bus
        self.backfill = backfill
        self.clock = clock or MonotonicClock()
        self.topics = Topics(settings.topic_prefix)
        self.id = worker_id or f"{socket.gethostname()}-{os.getpid()}"
        self.concurrency = concurrency
        self.report_every_s, self.commit_every_s = report_every_s, commit_every_s
        self.pinned = split is not None
        self.frames_topic = self.topics.backfill if backfill else self.topics.frames
        for topic, n in ((self.frames_topic, partitions), (self.topics.rows, partitions), (self.topics.apps, 1)):
            bus.create_topic(topic, n)
        self.dead_letters = DeadLetters(bus, self.topics, f"worker {app.name}/{self.id}").expect("frames")
        self.client = client or ExecutorClient(bus, settings, clock=self.clock, dead_letters=self.dead_letters)
        self.backend = RemoteBackend(app, self.client, stage_slos(app, dict(split) if split else None))
        self.engine = ChainEngine(app, self.backend, clock=self.clock, deadlines=not backfill)
        self.schemas = app_schemas(app)
        self.group = worker_group(settings, app, backfill=backfill)
        self.stats = WorkerStats()
        self.dispatcher: KeyedDispatcher | None = None
        """The frames in flight of the running loop (``in_flight``), None before it starts."""
        self.encode_times = RecentTimes()
        """Seconds to encode each frame's rows message (key ``rows``)."""
        self._follower: PlanFollower | None = PlanFollower(bus, self.topics, self.dead_letters)
        self._consumer: Consumer | None = None
        self._offsets = _Offsets()
        self._next_report = self.clock.now() + report_every_s
        self._next_plan = self.clock.now()
        self._last_commit = self.clock.now()
        self._stop = threading.Event()
        self.summary = PeriodicSummary(f"worker {app.name}", "frames", start=self.clock.now())
        self.on_summary: Callable[[str, bool], None] | None = None
        """Called with each periodic summary line and whether it is a warning (the CLI prints it)."""
        self._stopping: threading.Event = self._stop
        self.outage = Outage(f"worker {app.name}/{self.id}", self.clock, give_up_s=settings.give_up_s)
        self.watchdog = GroupWatchdog(bus, self.group, lambda: [self.frames_topic], self.clock,
                                      stall_s=settings.watchdog_s, role=f"worker {app.name}")

    # -- one frame -----------------------------------------------------------------------------
    def outcome_message(self, o: FrameOutcome) -> bytes:
        """The rows message of one outcome."""
        return encode_rows(o.all_rows(self.app.name), self.schemas)

    async def handle(self, m: Message) -> Out | None:
        """What one frame message becomes: what to publish — its rows message, or the message
        itself to the dead-letter topic with the reason — or None for a frame of another app."""
        try:
            frame: Frame = decode_frame(m.value)
        except CodecError as e:
            self.stats.dead += 1
            self.dead_letters.count(m, str(e))
            return Out(self.dead_letters.topic_for(m), m.key, m.value,
                       dead_letter_headers(m, str(e), self.dead_letters.role))
        if not wants(self.app, frame):
            self.stats.skipped += 1
            return None
        outcome = await self.engine.run(frame)
        self.stats.add(outcome)
        t0 = self.clock.now()
        value = self.outcome_message(outcome)
        self.encode_times.add("rows", self.clock.now() - t0)
        return Out(self.topics.rows, frame.stream_id.encode(), value)

    def health(self) -> Health:
        """The role's health, with its dead letters by source."""
        return replace(self.outage.health(), dead_letters=self.dead_letters.snapshot())

    def order_key(self, m: Message) -> str:
        """Frames of a stream one after the other when the chain has a window, else all at once."""
        stream = (m.key or b"").decode("utf-8", "replace")
        return stream if self.engine.ordered else f"{stream}@{m.partition}:{m.offset}"

    # -- control plane -------------------------------------------------------------------------
    def overheads(self) -> Overheads:
        """What this worker measured outside the executor (see the module docstring), in ms."""
        models = self.app.graph().models

        def ms(values: Mapping[str, float]) -> dict[str, float]:
            return {k: round(v * 1000, 3) for k, v in values.items() if v > 0}

        slos = self.backend.slos
        hops = ms({m: self.client.round_trip_s(self.backend.session(m)) for m in models if m in slos})
        cpu = ms({n: self.engine.cpu_after_s(n) for n in ("frames", *models)})
        return Overheads(hops, cpu, round(self.encode_times.quantile("rows") * 1000, 3))

    def report(self) -> AppReport:
        g = self.app.graph()
        tasks = {m: self.app.models[m].variants for m in g.models if m in self.app.models and self.app.models[m].variants}
        return AppReport(self.app.name, self.id, self.app.slo_ms, tuple(g.models), tuple(g.edges),
                         self.engine.fanout.snapshot(), self.clock.wall(), self.overheads(), tasks)

    def publish_report(self) -> None:
        """The app's report for the scheduler's query analysis; none from a backfill worker, whose
        round trips include waiting for slack and would inflate the live split's reserved hops."""
        if self.backfill:
            return
        try:
            self.bus.publish(self.topics.apps, f"{self.app.name}/{self.id}".encode(), encode_report(self.report()))
        except Exception as e:  # advisory: the chain keeps running without query analysis
            logger.warning("cannot publish the app report: %s", e)

    def follow_plan(self) -> None:
        """Route requests by the newest plan's weights, and adopt the scheduler's latency split for
        this app once its sessions are served (unless this worker's stage SLOs are pinned: it
        routes its sessions by the plan all the same)."""
        if self._follower is None:
            return
        plan = self._follower.newest()
        if plan is not None:
            # A plan older than this (a scheduler gone, or a previous run's last plan on the
            # compacted topic) may name executors that are gone: the shared topics reach live ones.
            fresh = self.clock.wall() - plan.ts <= ROUTE_PLANS_FOR_S
            self.client.route(plan.routing if fresh else {})
        chosen = {**self.backend.variants, **plan.variants_to_adopt(self.app.name)} if plan is not None \
            else self.backend.variants
        if chosen != self.backend.variants:
            logger.info("app %s: task variants from the plan: %s", self.app.name, chosen)
            self.backend.variants = dict(chosen)
        budgets = plan.split_to_adopt(self.app.name) if plan is not None and not self.pinned else None
        if budgets is not None and budgets != self.backend.slos:
            logger.info("app %s: stage SLOs from the scheduler's split: %s ms", self.app.name, budgets)
            self.backend.slos = budgets

    def housekeeping(self) -> None:
        """Report when due; follow the plan every :data:`PLAN_EVERY_S`."""
        now = self.clock.now()
        if now >= self._next_plan:
            self._next_plan = now + PLAN_EVERY_S
            self.follow_plan()
        if now >= self._next_report:
            self._next_report = now + self.report_every_s
            self.publish_report()
            self.summarize()

    def summarize(self) -> None:
        """The periodic summary line, when due (:class:`~vidnexus.roles.summary.PeriodicSummary`)."""
        if self.on_summary is None:
            return
        out = self.summary.tick(self.clock.now(), {**self.stats.status, "dead-lettered": self.stats.dead})
        if out is not None:
            self.on_summary(*out)

    # -- the loop ------------------------------------------------------------------------------
    def _subscribe(self) -> Consumer:
        if self._consumer is None:
            self._consumer = self.bus.subscribe([self.frames_topic], group=self.group)
        return self._consumer

    async def _one(self, m: Message) -> None:
        try:
            out = await self.handle(m)
            if out is not None:
                await self._publish(out)
        except Exception as e:  # the engine accounts per-frame failures; this is the bus failing
            logger.error("app %s: frame at %s[%d]@%d not processed: %s", self.app.name, m.topic, m.partition,
                         m.offset, e)
            raise
        self._offsets.done(m)

    async def _publish(self, out: Out) -> None:
        """Publish, waiting out a bus that does not take messages (back-pressure: the frame stays
        uncommitted meanwhile, and is read again if the worker stops first)."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                self.bus.publish(out.topic, out.key, out.value, headers=out.headers)
                return
            except ConnectorError as e:
                if not e.retryable or self._stopping.is_set() or self._stop.is_set():
                    raise
                delay = self.outage.failed(e)
            await loop.run_in_executor(None, self.clock.wait, self._stopping, delay)

    def commit(self) -> None:
        """Make the published rows durable, then commit up to the first unfinished frame."""
        offsets = self._offsets.committable()
        if not offsets or self._consumer is None:
            return
        self.bus.flush()
        self._consumer.commit(offsets)
        self._offsets.committed.update(offsets)

    async def step(self, dispatcher: KeyedDispatcher, timeout_s: float = 0.1) -> int:
        """Poll once and start every frame read (waiting for a free slot as needed); commit and
        report when due. Returns the frames read."""
        consumer = self._subscribe()
        loop = asyncio.get_running_loop()
        msgs = await loop.run_in_executor(None, lambda: consumer.poll(timeout_s=timeout_s))
        if not msgs and not dispatcher.in_flight and self.watchdog.check(consumer):
            consumer.close()
            self._consumer = None
        for m in msgs:
            self._offsets.read(m)
            await dispatcher.submit(self.order_key(m), lambda m=m: self._one(m))
        if self.clock.now() - self._last_commit >= self.commit_every_s:
            self._last_commit = self.clock.now()
            await loop.run_in_executor(None, self.commit)
        self.housekeeping()
        return len(msgs)

    async def run_async(self, stop: threading.Event, *, until_idle_s: float | None = None) -> WorkerStats:
        """Process frames until ``stop`` is set (or no frame arrived for ``until_idle_s`` with none
        in flight); then finish the frames in flight, close open windows, commit."""
        disp = self.dispatcher = KeyedDispatcher(self.concurrency)
        idle = 0.0
        self._stopping = stop
        loop = asyncio.get_running_loop()
        try:
            while not stop.is_set() and not self._stop.is_set():
                t0 = self.clock.now()
                try:
                    n = await self.step(disp)
                except ConnectorError as e:  # the broker is away: ride it out
                    await loop.run_in_executor(None, self.clock.wait, stop, self.outage.failed(e))
                    continue
                self.outage.ok()
                idle = 0.0 if n or disp.in_flight else idle + (self.clock.now() - t0)
                if until_idle_s is not None and idle >= until_idle_s:
                    break
            await disp.drain()
            for o in await self.engine.flush():  # windows still open: their rows now
                self.stats.add(o)
                self.bus.publish(self.topics.rows, o.stream.encode(), self.outcome_message(o))
            self.commit()
        finally:
            self.close()
        return self.stats

    def run(self, stop: threading.Event | None = None) -> WorkerStats:
        return asyncio.run(self.run_async(stop or self._stop))

    def stop(self) -> None:
        self._stop.set()

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
        if self._follower is not None:
            self._follower.close()
            self._follower = None
        self.client.close()

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"WorkerRole({self.app.name!r}, id={self.id!r})"


def unknown_models(app: App, known: Callable[[str], bool]) -> list[str]:
    """One line per infer step (routes' branches included) that calls a model ``known`` does not
    know, naming the step: what a worker refuses to start with, since an executor could never
    serve it (its frames would only time out).

    Example:
        >>> app = App("a", slo_ms=100)
        >>> _ = app.model("det"), app.model("cls"), app.table("t", {"n": "UInt8"})
        >>> _ = app.chain(lambda s: s.infer("det").infer("cls").map(lambda e: {"n": 1}).sink("t"))
        >>> unknown_models(app, lambda name: name == "det")
        ["infer[1] cls calls model 'cls'"]
    """
    out: list[str] = []

    def walk(steps: Sequence[Step]) -> None:
        for st in steps:
            if st.kind == "infer":
                for m in st.models:
                    out.extend(f"{st.describe()} calls model {v!r}" + (f" (a variant of task {m.name!r})"
                                                                         if m.variants else "")
                               for v in (m.variants or (m.name,)) if not known(v))
            for _, sub in st.branches:
                walk(sub)

    walk(app.steps())
    return out


def worker_group(settings: Settings, app: App, *, backfill: bool = False) -> str:
    """The consumer group of ``app``'s workers (``…-backfill``: of its backfill workers)."""
    return Topics(settings.topic_prefix).group(f"app-{app.name}" + ("-backfill" if backfill else ""))
