"""The embedded end-to-end demo: synthetic HUD streams → sampling → the ``hud`` app's chain (crop the
digit cells on the CPU → the digit reader served by the in-process executor, batched across streams
under an SLO with early drop) → rows in the embedded ClickHouse (chdb) → SQL.

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
from vidnexus.connectors.store import QueryResult, open_store
from vidnexus.streams.frame import Frame, encode_frame, jpeg_encode
from vidnexus.streams.sampling import FpsSampler
from vidnexus.streams.synthetic import SyntheticSource

__all__ = ["DemoConfig", "DemoResult", "run_demo", "DEMO_QUERIES"]

logger = logging.getLogger(__name__)


def _queries() -> dict[str, str]:
    from vidnexus.apps.hud import QUERIES

    return QUERIES


DEMO_QUERIES = _queries()


@dataclass(frozen=True)
class DemoConfig:
    streams: int = 3
    seconds: float = 20.0
    source_fps: float = 10.0
    sample_fps: float = 5.0
    slo_ms: float = 100.0
    realtime: bool = True


@dataclass
class DemoResult:
    sampled: int = 0
    rows: int = 0
    tables: dict[str, QueryResult] = field(default_factory=dict)
    executor_stats: list[dict[str, Any]] = field(default_factory=list)
    status: dict[str, int] = field(default_factory=dict)
    model_report: dict[str, Any] = field(default_factory=dict)


def run_demo(
    settings: Settings, cfg: DemoConfig = DemoConfig(), progress: Callable[[str, int, int], None] | None = None
) -> DemoResult:
    """Run the pipeline and return the SQL results. ``progress(stage, done, total)`` is optional."""
    import torch

    from vidnexus.apps.hud import app
    from vidnexus.operators.infer import LocalBackend, build_local_executor
    from vidnexus.operators.local import LocalRuntime
    from vidnexus.training.digits import load_or_train

    clock = MonotonicClock()
    say = progress or (lambda *a: None)
    result = DemoResult()
    torch.set_num_threads(1)

    say("digit reader", 0, 1)
    _, report = load_or_train(settings.data_dir / "models")
    result.model_report = report
    say("digit reader", 1, 1)

    bus = MemoryBus()
    frames_topic = settings.topic("frames")
    bus.create_topic(frames_topic, partitions=4)
    store = open_store(settings)
    for t in ("hud_reads", "vnx_frames"):
        store.execute(f"DROP TABLE IF EXISTS {t}")
    app_run = _with_slo(app, cfg.slo_ms)
    executor, slos = build_local_executor(app_run, settings, clock=clock)
    runtime = LocalRuntime(app_run, store, LocalBackend(app_run, executor, slos), max_rows=200)

    sources = [SyntheticSource(seed=i + 1, fps=cfg.source_fps, seconds=cfg.seconds) for i in range(cfg.streams)]
    total = sum(int(round(cfg.seconds * cfg.sample_fps)) for _ in sources)

    def ingest(i: int, src: SyntheticSource) -> None:
        sampler = FpsSampler(cfg.sample_fps)
        t0 = clock.now()
        for raw in src.frames():
            if cfg.realtime:
                clock.sleep(t0 + raw.pts - clock.now())
            if not sampler.keep(raw.pts, raw.index):
                continue
            now = wall_time()
            frame = Frame(f"cam-{i + 1}", raw.index, raw.pts, now, now, raw.image.shape[1],
                          raw.image.shape[0], "jpeg", jpeg_encode(raw.image, quality=90),
                          {**{k: str(v) for k, v in raw.truth.items()}, "apps": "hud"})
            bus.publish(frames_topic, frame.stream_id.encode(), encode_frame(frame))
            result.sampled += 1

    stop = threading.Event()
    threads = [threading.Thread(target=ingest, args=(i, s), daemon=True) for i, s in enumerate(sources)]
    for t in threads:
        t.start()

    def watch() -> None:
        while not stop.is_set():
            say("frames", runtime.stats.frames, total)
            if runtime.stats.frames >= total or (not any(t.is_alive() for t in threads)
                                                  and runtime.stats.frames >= result.sampled):
                stop.set()
            clock.sleep(0.2)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    asyncio.run(runtime.consume(bus, frames_topic, stop))
    say("frames", runtime.stats.frames, total)
    executor.stop()
    runtime.close()
    result.rows = runtime.stats.frames
    result.status = dict(runtime.stats.status)
    result.executor_stats = executor.stats()
    for title, sql in DEMO_QUERIES.items():
        result.tables[title] = store.query(sql)
    store.close()
    return result


def _with_slo(app: Any, slo_ms: float) -> Any:
    """The app with another end-to-end SLO (the demo's --slo-ms)."""
    import copy

    other = copy.copy(app)
    other.slo_ms = float(slo_ms)
    return other
