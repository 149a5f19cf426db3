"""``vidnexus ingest``: keep one StreamWorker per enabled stream of this shard, following registry
changes (add, pause, resume, remove) without a restart, and report each stream's status to the
``stream_status`` table."""

from __future__ import annotations

import logging
import socket
import threading
import zlib
from typing import Callable

from vidnexus.clock import Clock, MonotonicClock
from vidnexus.connectors.bus import Bus
from vidnexus.connectors.outage import DEFAULT_GIVE_UP_S, Outage
from vidnexus.errors import ConnectorError
from vidnexus.streams.ingest import StreamSpec, StreamStatus, StreamWorker
from vidnexus.streams.registry import StreamRegistry

__all__ = ["IngestSupervisor", "in_shard"]

logger = logging.getLogger(__name__)


def in_shard(name: str, shard: int, shards: int) -> bool:
    """Stable assignment of streams to ingest processes."""
    return zlib.crc32(name.encode()) % shards == shard


class IngestSupervisor:
    def __init__(self, registry: StreamRegistry, bus: Bus, topic: str, *, shard: int = 0, shards: int = 1,
                 poll_s: float = 2.0, clock: Clock | None = None,
                 worker_factory: Callable[[StreamSpec, StreamStatus | None], StreamWorker] | None = None,
                 only: Callable[[StreamSpec], bool] | None = None, give_up_s: float = DEFAULT_GIVE_UP_S,
                 uncompressed: bool | None = None, backfill_topic: str | None = None) -> None:
        """Frames go to ``topic``, those of backfill streams to ``backfill_topic`` (when given)."""
        if not 0 <= shard < shards:
            raise ValueError(f"shard {shard} is not in 0..{shards - 1}")
        self.registry, self.bus, self.topic = registry, bus, topic
        self.only = only
        self.shard, self.shards, self.poll_s = shard, shards, poll_s
        self.clock = clock or MonotonicClock()

        def make_worker(spec: StreamSpec, resume: StreamStatus | None = None) -> StreamWorker:
            to = backfill_topic if spec.backfill and backfill_topic is not None else topic
            return StreamWorker(spec, bus, to, clock=self.clock, resume=resume, uncompressed=uncompressed)

        self.make = worker_factory or make_worker
        self.workers: dict[str, tuple[StreamWorker, threading.Thread]] = {}
        self.ended: dict[str, tuple[StreamSpec, StreamStatus]] = {}
        self.stop = threading.Event()
        self.name = f"{socket.gethostname()}:{shard}/{shards}"
        self._persisted: dict[str, StreamStatus] | None = None  # the last statuses of an earlier process
        self.outage = Outage(f"ingest {self.name}", self.clock, give_up_s=give_up_s)

    def sync(self) -> None:
        """Start, stop or restart workers to match the registry. A row that no longer validates is
        skipped: it is logged once and reported as failed with its problem.

        Raises:
            ConnectorError: the store cannot be read (the workers keep running as they were).
        """
        rows = [r for r in self.registry.list() if in_shard(r.spec.name, self.shard, self.shards)
                and (self.only is None or self.only(r.spec))]
        if self._persisted is None:
            # An ingest restarted (a crash, a supervisor's restart) continues each registration: a
            # file that was done stays done, one that was cut short continues after its last
            # published frame, a live stream's counters and frame numbers go on.
            self._persisted = self.registry.statuses()
            for r in rows:
                st = self._persisted.get(r.spec.name)
                if st is not None and st.spec_key == r.spec.key and st.state in ("done", "failed"):
                    self.ended[r.spec.name] = (r.spec, st)
        wanted = {r.spec.name: r.spec for r in rows if r.state == "enabled"}
        for name, (w, t) in list(self.workers.items()):
            if not t.is_alive():  # ended by itself: a file that is done, or a stream that failed
                self.ended[name] = (w.spec, w.status)
                del self.workers[name]
            elif name not in wanted or wanted[name] != w.spec:  # paused, removed or changed
                w.stop.set()
                t.join(timeout=15)
                self.ended[name] = (w.spec, w.status)
                del self.workers[name]
        for r in rows:
            ended = self.ended.get(r.spec.name)
            if r.state == "invalid" and (ended is None or ended[1].reason != r.problem):
                logger.warning("stream %s skipped: %s", r.spec.name, r.problem)
                self.ended[r.spec.name] = (r.spec, StreamStatus(r.spec.name, state="failed", reason=r.problem))
        for name, spec in wanted.items():
            ended = self.ended.get(name)
            if name in self.workers or (ended is not None and ended[0] == spec
                                        and ended[1].state in ("done", "failed")):
                continue  # running, or already ran to its end with this very registration
            # Continue from what this process saw last (a pause), else from what the last process reported.
            prev = ended[1] if ended is not None else (self._persisted or {}).get(name)
            w = self.make(spec, prev if prev is not None and prev.spec_key == spec.key else None)
            t = threading.Thread(target=w.run, name=f"vnx-ingest-{name}", daemon=True)
            self.workers[name] = (w, t)
            t.start()

    def statuses(self) -> list[StreamStatus]:
        running = [w.status for w, _ in self.workers.values()]
        return running + [st for name, (_, st) in self.ended.items() if name not in self.workers]

    def report(self) -> None:
        """Write every stream's status to the store (raises ConnectorError when it cannot)."""
        self.registry.report(self.statuses(), self.name)

    def tick(self) -> None:
        """One round: follow the registry, flush the bus, report statuses. A store or bus that
        fails leaves the workers running as they are (the store's last registry is kept; live
        streams drop what the bus cannot take, files wait for it) and the supervisor degraded;
        it gives up only after ``give_up_s`` of uninterrupted failure."""
        failed: ConnectorError | None = None
        steps: tuple[Callable[[], None], ...] = (self.sync, lambda: self.bus.flush(timeout_s=5.0), self.report)
        for what in steps:
            try:
                what()
            except ConnectorError as e:
                failed = failed or e
        if failed is not None:
            self.outage.failed(failed)
        else:
            self.outage.ok()

    def run(self, *, once: bool = False, on_tick: Callable[[list[StreamStatus]], None] | None = None) -> None:
        """Follow the registry until stopped; with ``once``, return when no worker is left running."""
        try:
            while not self.stop.is_set():
                self.tick()
                if on_tick:
                    on_tick(self.statuses())
                if once and not self.workers and not self.outage.degraded:
                    break
                self.stop.wait(self.poll_s)
        finally:
            for w, t in self.workers.values():
                w.stop.set()
            for w, t in self.workers.values():
                t.join(timeout=15)
            final: tuple[Callable[[], None], ...] = (lambda: self.bus.flush(timeout_s=10.0), self.report)
            for what in final:
                try:
                    what()
                except ConnectorError as e:
                    logger.warning("ingest %s stopping: %s", self.name, e)
