"""The embedded end-to-end demo: synthetic HUD streams → sampling → a CPU operator (crop the digit
cells) → the digit reader served by the in-process executor (batched across streams under an SLO,
early drop) → rows in the embedded ClickHouse (chdb) → SQL.

Everything goes through the same pieces distributed mode uses: frames are published to the bus's
frames topic keyed by stream and consumed by a worker in a consumer group; results are written by a
batching table sink; the SQL at the end reads what the pipeline wrote.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from vidnexus.clock import MonotonicClock, wall_time
from vidnexus.config import Settings
from vidnexus.connectors.memory_bus import MemoryBus
from vidnexus.connectors.sink import TableSink
from vidnexus.connectors.store import Column, QueryResult, TableSchema, open_store
from vidnexus.gpu_executor.backend import SessionSpec
from vidnexus.gpu_executor.executor import Executor, InferReply
from vidnexus.gpu_executor.profile import Profile
from vidnexus.operators.hud import HudCells, assemble
from vidnexus.streams.frame import Frame, decode_frame, encode_frame, image_of, jpeg_encode
from vidnexus.streams.sampling import FpsSampler
from vidnexus.streams.synthetic import SyntheticSource

__all__ = ["DemoConfig", "DemoResult", "run_demo", "HUD_TABLE", "DEMO_QUERIES"]

logger = logging.getLogger(__name__)

HUD_TABLE = TableSchema(
    "demo_hud_reads",
    (
        Column("stream", "LowCardinality(String)"),
        Column("frame_no", "UInt32"),
        Column("pts", "Float64"),
        Column("status", "LowCardinality(String)"),
        Column("drop_reason", "String"),
        Column("score_read", "Int32"),
        Column("kills_read", "Int32"),
        Column("score_truth", "Int32"),
        Column("kills_truth", "Int32"),
        Column("latency_ms", "Float32"),
        Column("digits", "Array(UInt8)"),
        Column("ingest_ts", "Float64"),
    ),
    order_by=("stream", "frame_no"),
    engine="ReplacingMergeTree()",
)

DEMO_QUERIES = {
    "per stream": """
SELECT stream,
       count() AS frames,
       countIf(status = 'ok') AS read,
       countIf(status = 'dropped') AS dropped,
       round(100 * avgIf(score_read = score_truth AND kills_read = kills_truth, status = 'ok'), 2)
           AS exact_pct,
       round(quantileIf(0.5)(latency_ms, status = 'ok'), 1) AS p50_ms,
       round(quantileIf(0.99)(latency_ms, status = 'ok'), 1) AS p99_ms,
       max(score_read) AS top_score
FROM demo_hud_reads FINAL
GROUP BY stream ORDER BY stream""",
    "score over time (first stream)": """
SELECT toUInt32(floor(pts / 5) * 5) AS second, min(score_read) AS score_from, max(score_read) AS score_to,
       max(kills_read) AS kills
FROM demo_hud_reads FINAL
WHERE stream = (SELECT min(stream) FROM demo_hud_reads) AND status = 'ok'
GROUP BY second ORDER BY second""",
}


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
    model_report: dict[str, Any] = field(default_factory=dict)


class _FrameJob:
    """Collects the digit replies of one frame and emits its row when the last one arrives."""

    def __init__(self, frame: Frame, cells: list[Any], emit: Callable[[tuple[Any, ...]], None]) -> None:
        self.frame, self.cells, self.emit = frame, cells, emit
        self.replies: list[InferReply | None] = [None] * len(cells)
        self.left = len(cells)
        self.lock = threading.Lock()

    def done(self, k: int, reply: InferReply) -> None:
        with self.lock:
            self.replies[k] = reply
            self.left -= 1
            if self.left:
                return
        f = self.frame
        replies = [r for r in self.replies if r is not None]
        truth = (int(f.tags["score"]), int(f.tags["kills"]))
        lat = max(r.latency_s for r in replies) * 1000
        failed = [r for r in replies if not r.ok]
        if failed:
            self.emit((f.stream_id, f.frame_no, f.pts, "dropped", failed[0].reason or "error",
                       -1, -1, *truth, lat, [], f.ingest_ts))
            return
        digits = [int(r.output) for r in replies]
        read = assemble(self.cells, digits)
        self.emit((f.stream_id, f.frame_no, f.pts, "ok", "", read["score"], read["kills"],
                   *truth, lat, digits, f.ingest_ts))


def run_demo(
    settings: Settings, cfg: DemoConfig = DemoConfig(), progress: Callable[[str, int, int], None] | None = None
) -> DemoResult:
    """Run the pipeline and return the SQL results. ``progress(stage, done, total)`` is optional."""
    import torch

    from vidnexus.gpu_executor.runner import TorchRunner
    from vidnexus.training.digits import load_or_train

    clock = MonotonicClock()
    say = progress or (lambda *a: None)
    result = DemoResult()
    torch.set_num_threads(1)

    say("digit reader", 0, 1)
    model, report = load_or_train(settings.data_dir / "models")
    result.model_report = report
    say("digit reader", 1, 1)

    bus = MemoryBus()
    frames_topic = settings.topic("frames")
    bus.create_topic(frames_topic, partitions=4)
    store = open_store(settings)
    store.execute(f"DROP TABLE IF EXISTS {HUD_TABLE.name}")
    store.create_table(HUD_TABLE)
    sink = TableSink(store, HUD_TABLE.name, HUD_TABLE.column_names, max_rows=200, max_delay_s=0.5)

    runner = TorchRunner("lenet5", model, postprocess=lambda t: int(t.argmax()))
    profile = Profile.linear(0.00005, 0.0005, 64)  # a starting guess; refreshed from every batch
    executor = Executor([SessionSpec("digits", "lenet5", cfg.slo_ms / 1000)], {"lenet5": runner},
                        {"lenet5": profile}, clock=clock, workers=2)
    executor.start()

    sources = [SyntheticSource(seed=i + 1, fps=cfg.source_fps, seconds=cfg.seconds) for i in range(cfg.streams)]
    total = sum(int(round(cfg.seconds * cfg.sample_fps)) for _ in sources)
    rows_done = threading.Semaphore(0)
    counted = {"rows": 0}

    def emit(row: tuple[Any, ...]) -> None:
        sink.write(row)
        counted["rows"] += 1
        rows_done.release()

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
                          {k: str(v) for k, v in raw.truth.items()})
            bus.publish(frames_topic, frame.stream_id.encode(), encode_frame(frame))
            result.sampled += 1

    hud = HudCells()
    stop = threading.Event()

    def worker() -> None:
        consumer = bus.subscribe([frames_topic], group="demo-worker")
        while not stop.is_set():
            for msg in consumer.poll(timeout_s=0.1):
                frame = decode_frame(msg.value)
                cells = hud.apply(image_of(frame))
                job = _FrameJob(frame, cells, emit)
                for k, cell in enumerate(cells):
                    executor.submit("digits", cell.input).add_done_callback(
                        lambda fut, k=k, job=job: job.done(k, fut.result())
                    )
            consumer.commit()
        consumer.close()

    threads = [threading.Thread(target=ingest, args=(i, s), daemon=True) for i, s in enumerate(sources)]
    wt = threading.Thread(target=worker, daemon=True)
    wt.start()
    for t in threads:
        t.start()
    done = 0
    while done < total:
        if rows_done.acquire(timeout=30):
            done += 1
            say("frames", done, total)
        elif not any(t.is_alive() for t in threads) and done >= result.sampled:
            break
    stop.set()
    wt.join(timeout=10)
    executor.stop()
    sink.close()
    result.rows = counted["rows"]
    result.executor_stats = executor.stats()
    for title, sql in DEMO_QUERIES.items():
        result.tables[title] = store.query(sql)
    store.close()
    return result
