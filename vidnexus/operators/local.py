"""The local runtime: an app's chain in one process (asyncio), DNN calls to an in-process executor
(or any :class:`~vidnexus.operators.engine.InferBackend`), rows to the configured store through
batching table sinks. It is what the demos use; the faust runtime runs the same engine.

Example (no DNN steps, store in memory):
    >>> import asyncio
    >>> from vidnexus.operators.chain import App
    >>> from vidnexus.testing import MemoryStore, frame_factory
    >>> app = App("sq", slo_ms=1000)
    >>> t = app.table("sq", {"y": "Int64"})
    >>> _ = app.chain(lambda s: s.map(lambda f: {"y": f.frame_no ** 2}).sink(t))
    >>> rt = LocalRuntime(app, MemoryStore(), backend=None)
    >>> stats = asyncio.run(rt.process([frame_factory("c", i) for i in range(3)]))
    >>> rt.close(); sorted(r[3] for r in rt.store.rows["sq"])
    [0, 1, 4]
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable

from vidnexus.connectors.bus import Bus
from vidnexus.connectors.sink import TableSink
from vidnexus.connectors.store import Store, ensure_table
from vidnexus.errors import CodecError
from vidnexus.operators.chain import App
from vidnexus.operators.engine import ChainEngine, FrameOutcome, InferBackend, KeyedDispatcher, app_schemas, wants
from vidnexus.streams.frame import Frame, decode_frame

__all__ = ["LocalRuntime", "RunStats"]

logger = logging.getLogger(__name__)


@dataclass
class RunStats:
    frames: int = 0
    rows: int = 0
    status: Counter[str] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)
    skipped: int = 0
    bad_messages: int = 0

    def add(self, o: FrameOutcome) -> None:
        if o.frame_no >= 0:
            self.frames += 1
            self.status[o.status] += 1
        self.rows += o.row_count()
        self.reasons.update(o.reasons)


class LocalRuntime:
    """Run ``app`` on frames. Rows go to ``store`` (tables created or migrated first).

    Args:
        backend: where ``infer`` steps go; ``None`` for an app without DNN steps.
        concurrency: frames in flight at once (frames of one stream are processed in order when the chain has a window).
    """

    def __init__(self, app: App, store: Store, backend: InferBackend | None, *, concurrency: int = 64,
                 max_rows: int = 2000, max_delay_s: float = 0.5) -> None:
        self.app, self.store, self.concurrency = app, store, concurrency
        self.engine = ChainEngine(app, backend if backend is not None else _NoBackend(app.name))
        self.stats = RunStats()
        self._lock = threading.Lock()
        self.sinks = {}
        for name, schema in app_schemas(app).items():
            ensure_table(store, schema)
            self.sinks[name] = TableSink(store, name, schema.column_names, max_rows=max_rows,
                                         max_delay_s=max_delay_s)

    def write(self, o: FrameOutcome) -> None:
        for table, rows in o.all_rows(self.app.name).items():
            for r in rows:
                self.sinks[table].write(r)
        with self._lock:
            self.stats.add(o)

    async def _one(self, frame: Frame) -> None:
        self.write(await self.engine.run(frame))

    async def process(self, frames: Iterable[Frame]) -> RunStats:
        """Process every frame (those for other apps are skipped), flush windows, return the stats."""
        disp = KeyedDispatcher(self.concurrency)
        for f in frames:
            if not wants(self.app, f):
                self.stats.skipped += 1
                continue
            await disp.submit(self.engine.order_key(f), lambda f=f: self._one(f))
        await disp.drain()
        for o in await self.engine.flush():
            self.write(o)
        return self.stats

    async def consume(self, bus: Bus, topic: str, stop: threading.Event, *, group: str | None = None,
                      idle_stop_s: float | None = None) -> RunStats:
        """Consume ``topic`` until ``stop`` is set (or nothing arrived for ``idle_stop_s``); offsets
        are committed after the frames of each poll are processed and their rows handed to the sinks."""
        consumer = bus.subscribe([topic], group=group or f"vnx-app-{self.app.name}")
        disp = KeyedDispatcher(self.concurrency)
        loop = asyncio.get_running_loop()
        idle = 0.0
        try:
            while not stop.is_set():
                msgs = await loop.run_in_executor(None, lambda: consumer.poll(timeout_s=0.1))
                idle = 0.0 if msgs else idle + 0.1
                if idle_stop_s is not None and idle >= idle_stop_s:
                    break
                for m in msgs:
                    try:
                        f = decode_frame(m.value)
                    except CodecError as e:
                        self.stats.bad_messages += 1
                        logger.warning("app %s: skipping a bad frame message: %s", self.app.name, e)
                        continue
                    if not wants(self.app, f):
                        self.stats.skipped += 1
                        continue
                    await disp.submit(self.engine.order_key(f), lambda f=f: self._one(f))
                if msgs:
                    await disp.drain()
                    consumer.commit()
        finally:
            await disp.drain()
            for o in await self.engine.flush():
                self.write(o)
            consumer.close()
        return self.stats

    def close(self) -> None:
        """Write everything buffered."""
        for s in self.sinks.values():
            s.close()


class _NoBackend:
    def __init__(self, app: str) -> None:
        self.app = app

    async def infer(self, model: Any, inputs: Any, deadline_wall: float) -> Any:
        raise RuntimeError(f"app {self.app}: infer step without an executor backend")
