"""The ingest role (``vidnexus ingest``): one stream worker per enabled stream of this shard,
following the registry (add, pause, resume, remove) without a restart, publishing sampled frames
to the frames topic and each stream's status to the ``stream_status`` table."""

from __future__ import annotations

import threading
from typing import Callable, Collection, Mapping

from vidnexus.clock import Clock, MonotonicClock
from vidnexus.config import Settings
from vidnexus.connectors.bus import Bus
from vidnexus.connectors.outage import Health
from vidnexus.connectors.store import Store, quote
from vidnexus.contracts.topics import Topics
from vidnexus.streams.ingest import StreamSpec, StreamStatus
from vidnexus.streams.registry import StreamRegistry
from vidnexus.streams.supervisor import IngestSupervisor

__all__ = ["IngestRole", "feeds", "accounted"]


def feeds(spec: StreamSpec, apps: Collection[str]) -> bool:
    """Whether ``spec``'s frames go to one of ``apps``: the stream names one of them (``streams add
    --app``), or names no app, and then every app's workers take its frames."""
    return not spec.apps or any(a in apps for a in spec.apps)


def accounted(store: Store, app: str, since: Mapping[str, float]) -> dict[str, dict[str, int]]:
    """Frames of each stream of ``since`` ingested at or after its time there (wall seconds: the
    registration's first ingest, :attr:`StreamStatus.origin_wall`) that have their ``vnx_frames``
    row for ``app``, by stream and status ({} while the sink has not created ``vnx_frames`` yet)."""
    if not since:
        return {}
    if not int(store.query("SELECT count() FROM system.tables WHERE database = currentDatabase() "
                           "AND name = 'vnx_frames'").scalar() or 0):
        return {}
    which = " OR ".join(f"(stream = {quote(name)} AND ingest_ts >= {float(t)!r})" for name, t in sorted(since.items()))
    # Each frame's best outcome among this registration's rows (a re-added file reuses frame
    # numbers, and FINAL would keep an earlier registration's row, filtered out below).
    rows = store.query(f"SELECT stream, s, count() FROM (SELECT stream, frame_no, argMax(status, version) AS s "
                       f"FROM vnx_frames WHERE app = {quote(app)} AND ({which}) GROUP BY stream, frame_no) "
                       "GROUP BY stream, s").rows
    out: dict[str, dict[str, int]] = {}
    for stream, status, n in rows:
        out.setdefault(str(stream), {})[str(status)] = int(n)
    return out


class IngestRole:
    """Ingest every enabled stream of shard ``shard`` of ``shards`` (and, with ``only``, those it accepts).

    ``step`` syncs the stream workers with the registry, flushes what they published and reports
    their status; it returns whether a stream is still being ingested.
    """

    def __init__(self, settings: Settings, *, bus: Bus, store: Store, clock: Clock | None = None,
                 shard: int = 0, shards: int = 1, poll_s: float = 2.0, partitions: int = 8,
                 only: Callable[[StreamSpec], bool] | None = None) -> None:
        self.clock = clock or MonotonicClock()
        self.bus = bus
        topics = Topics(settings.topic_prefix)
        self.topic = topics.frames
        for t in (topics.frames, topics.backfill):
            bus.create_topic(t, partitions)
        self.registry = StreamRegistry(store)
        self.supervisor = IngestSupervisor(self.registry, bus, self.topic, shard=shard, shards=shards,
                                           poll_s=poll_s, clock=self.clock, only=only, give_up_s=settings.give_up_s,
                                           uncompressed=None if settings.frame_encoding == "auto" else False,
                                           backfill_topic=topics.backfill)

    def step(self) -> bool:
        """One round (see :meth:`IngestSupervisor.tick`); whether a stream is still being ingested."""
        self.supervisor.tick()
        return bool(self.supervisor.workers)

    def health(self) -> Health:
        return self.supervisor.outage.health()

    def statuses(self) -> list[StreamStatus]:
        return self.supervisor.statuses()

    def run(self, stop: threading.Event | None = None, *, once: bool = False,
            on_tick: Callable[[list[StreamStatus]], None] | None = None) -> None:
        """Follow the registry until ``stop``; with ``once``, return when every stream has ended."""
        if stop is not None:
            self.supervisor.stop = stop
        self.supervisor.run(once=once, on_tick=on_tick)

    def stop(self) -> None:
        self.supervisor.stop.set()
