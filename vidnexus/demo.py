"""The embedded end-to-end demos, ``vidnexus demo <app>`` (hud, game, traffic, dance): the app's
synthetic streams → sampling → the app's chain (CPU steps, DNN requests served by the in-process
executor, batched across streams under the SLO with early drop) → rows in the embedded ClickHouse
(chdb) → SQL. What each app shows is its ``DEMO`` (:class:`vidnexus.apps.spec.DemoSpec`).

Everything goes through the pieces distributed mode uses: frames are published to the bus's frames
topic keyed by stream and consumed by the app's runtime in a consumer group; the chain is the same
object ``vidnexus worker hud`` runs on faust; rows are written by batching table sinks; every frame
also gets its accounting row in ``vnx_frames``; the SQL at the end reads what the pipeline wrote.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from vidnexus.clock import MonotonicClock, wall_time
from vidnexus.config import Settings
from vidnexus.connectors.memory_bus import MemoryBus
from vidnexus.connectors.factory import open_store
from vidnexus.connectors.store import QueryResult
from vidnexus.streams.frame import Frame, encode_frame, jpeg_encode
from vidnexus.streams.sampling import FpsSampler

__all__ = ["DemoConfig", "DemoResult", "run_demo", "demo_spec", "DEMO_QUERIES"]

logger = logging.getLogger(__name__)


def demo_spec(name: str) -> Any:
    """The app's :class:`~vidnexus.apps.spec.DemoSpec` (``DEMO`` in its module)."""
    import importlib

    from vidnexus.apps import APP_REFS
    from vidnexus.errors import ConfigError

    if name not in APP_REFS:
        raise ConfigError(f"unknown demo {name!r}; available: {', '.join(APP_REFS)}")
    mod = importlib.import_module(APP_REFS[name].partition(":")[0])
    return mod.DEMO, mod.app


def _hud_queries() -> dict[str, str]:
    from vidnexus.apps.hud import QUERIES

    return QUERIES


DEMO_QUERIES = _hud_queries()


@dataclass(frozen=True)
class DemoConfig:
    streams: int = 3
    seconds: float = 20.0
    source_fps: float | None = None
    sample_fps: float | None = None
    slo_ms: float | None = None
    realtime: bool = True


@dataclass
class DemoResult:
    app: str = "hud"
    sampled: int = 0
    rows: int = 0
    tables: dict[str, QueryResult] = field(default_factory=dict)
    queries: dict[str, str] = field(default_factory=dict)
    executor_stats: list[dict[str, Any]] = field(default_factory=list)
    status: dict[str, int] = field(default_factory=dict)
    model_report: dict[str, Any] = field(default_factory=dict)
    summary: list[str] = field(default_factory=list)
    slo_ms: float = 0.0


def run_demo(
    settings: Settings, cfg: DemoConfig = DemoConfig(), progress: Callable[[str, int, int], None] | None = None,
    app_name: str = "hud",
) -> DemoResult:
    """Run the pipeline and return the SQL results. ``progress(stage, done, total)`` is optional."""
    import torch

    from vidnexus.operators.infer import LocalBackend, build_local_executor
    from vidnexus.operators.local import LocalRuntime

    spec, app = demo_spec(app_name)
    clock = MonotonicClock()
    say = progress or (lambda *a: None)
    result = DemoResult(app=app_name, queries=dict(spec.queries))
    torch.set_num_threads(1)
    source_fps = cfg.source_fps or spec.source_fps
    sample_fps = cfg.sample_fps or spec.sample_fps
    slo_ms = cfg.slo_ms or spec.slo_ms or app.slo_ms
    result.slo_ms = slo_ms

    say("models", 0, 1)
    result.model_report = spec.prepare(settings)
    say("models", 1, 1)

    bus = MemoryBus()
    frames_topic = settings.topic("frames")
    bus.create_topic(frames_topic, partitions=4)
    store = open_store(settings)
    for t in (*spec.tables, "vnx_frames"):
        store.execute(f"DROP TABLE IF EXISTS {t}")
    app_run = _with_slo(app, slo_ms)
    executor, slos = build_local_executor(app_run, settings, clock=clock)
    runtime = LocalRuntime(app_run, store, LocalBackend(app_run, executor, slos), max_rows=200)

    sources = spec.sources(cfg.streams, cfg.seconds, source_fps)
    total = sum(int(round(cfg.seconds * sample_fps)) for _ in sources)

    def ingest(stream_id: str, src: Any) -> None:
        sampler = FpsSampler(sample_fps)
        t0 = clock.now()
        for raw in src.frames():
            if cfg.realtime:
                clock.sleep(t0 + raw.pts - clock.now())
            if not sampler.keep(raw.pts, raw.index):
                continue
            now = wall_time()
            frame = Frame(stream_id, raw.index, raw.pts, now, now, raw.image.shape[1],
                          raw.image.shape[0], "jpeg", jpeg_encode(raw.image, quality=90),
                          {**{k: str(v) for k, v in raw.truth.items()}, "apps": app_name})
            bus.publish(frames_topic, frame.stream_id.encode(), encode_frame(frame))
            result.sampled += 1

    stop = threading.Event()
    threads = [threading.Thread(target=ingest, args=(sid, s), daemon=True) for sid, s in sources]
    for t in threads:
        t.start()

    def watch() -> None:
        while not stop.is_set():
            # total is the expected count (seconds × fps per source); a source may yield a frame
            # more or fewer, so the run ends when every source is done and every frame sampled
            # is accounted for, never at the estimate.
            say("frames", runtime.stats.frames, max(total, result.sampled))
            if not any(t.is_alive() for t in threads) and runtime.stats.frames >= result.sampled:
                stop.set()
            clock.sleep(0.2)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    asyncio.run(runtime.consume(bus, frames_topic, stop))
    say("frames", runtime.stats.frames, max(total, result.sampled))
    executor.stop()
    runtime.close()
    result.rows = runtime.stats.frames
    result.status = dict(runtime.stats.status)
    result.executor_stats = executor.stats()
    for title, sql in spec.queries.items():
        result.tables[title] = store.query(sql)
    if spec.summary is not None:
        result.summary = spec.summary(store, executor)
    store.close()
    return result


def _with_slo(app: Any, slo_ms: float) -> Any:
    """The app with another end-to-end SLO (the demo's --slo-ms)."""
    import copy

    other = copy.copy(app)
    other.slo_ms = float(slo_ms)
    return other
