"""The HUD app: read the score and kills counters of game streams.

Chain: crop the digit cells of the HUD (CPU) → the project's digit reader on every cell (one DNN
request per cell, all cells of a frame requested at once and batched across streams by the executor)
→ one row per frame in ``hud_reads``. Synthetic streams (``synthetic://hud``) carry the true values
in the frame tags, so accuracy is a SQL query away; other streams get -1 there.

    vidnexus demo hud                        # embedded: in-process bus, executor and chdb
    vidnexus worker hud                      # distributed: a faust worker over Kafka
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from vidnexus.apps.spec import DemoSpec
from vidnexus.streams.spec import StreamSpec
from vidnexus.clock import wall_time
from vidnexus.operators.chain import App, Inferred, Stream
from vidnexus.apps.hud.cells import DigitCell, HudCells, assemble
from vidnexus.contracts.frames import Frame
from vidnexus.streams.images import image_of

__all__ = ["app", "HudFrame", "crop_cells", "to_row"]

app = App("hud", slo_ms=200)
reader = app.model("hud_digits", decode=lambda logits: int(np.argmax(logits)))
reads = app.table(
    "hud_reads",
    {
        "pts": "Float64",
        "score_read": "Int32",
        "kills_read": "Int32",
        "score_truth": "Int32",
        "kills_truth": "Int32",
        "digits": "Array(UInt8)",
        "latency_ms": "Float32",
        "ingest_ts": "Float64",
    },
)

_cells = HudCells()


@dataclass(frozen=True)
class HudFrame:
    frame: Frame
    cells: list[DigitCell]


def crop_cells(f: Frame) -> HudFrame:
    return HudFrame(f, _cells.apply(image_of(f)))


def cell_inputs(h: HudFrame) -> list[Any]:
    return [c.input for c in h.cells]


def to_row(r: Inferred) -> dict[str, Any]:
    h: HudFrame = r.value
    f = h.frame
    digits = [int(d) for d in r.output]
    read = assemble(h.cells, digits)
    return {
        "pts": f.pts,
        "score_read": read["score"],
        "kills_read": read["kills"],
        "score_truth": int(f.tags.get("score", -1)),
        "kills_truth": int(f.tags.get("kills", -1)),
        "digits": digits,
        "latency_ms": (wall_time() - f.ingest_ts) * 1000,
        "ingest_ts": f.ingest_ts,
    }


@app.chain
def pipeline(frames: Stream) -> Stream:
    return frames.map(crop_cells).infer(reader, input=cell_inputs, many=True).map(to_row).sink(reads)


QUERIES = {
    "per stream": """
SELECT f.stream AS stream,
       count() AS frames,
       countIf(f.status = 'ok') AS read,
       countIf(f.status != 'ok') AS dropped,
       any(r.exact_pct) AS exact_pct,
       any(r.p50_ms) AS p50_ms,
       any(r.p99_ms) AS p99_ms,
       any(r.top_score) AS top_score
FROM (SELECT stream, status FROM vnx_frames FINAL WHERE app = 'hud') AS f
LEFT JOIN (
    SELECT stream,
           round(100 * avg(score_read = score_truth AND kills_read = kills_truth), 2) AS exact_pct,
           round(quantile(0.5)(latency_ms), 1) AS p50_ms,
           round(quantile(0.99)(latency_ms), 1) AS p99_ms,
           max(score_read) AS top_score
    FROM hud_reads FINAL GROUP BY stream
) AS r ON f.stream = r.stream
GROUP BY f.stream ORDER BY f.stream""",
    "score over time (first stream)": """
SELECT toUInt32(floor(pts / 5) * 5) AS second, min(score_read) AS score_from, max(score_read) AS score_to,
       max(kills_read) AS kills
FROM hud_reads FINAL
WHERE stream = (SELECT min(stream) FROM hud_reads)
GROUP BY second ORDER BY second""",
}


def _streams(n: int, seconds: float, fps: float, sample_fps: float) -> list[StreamSpec]:
    return [StreamSpec(f"cam-{i + 1}", f"synthetic://hud?seed={i + 1}&fps={fps:g}&seconds={seconds:g}", fps=sample_fps)
            for i in range(n)]


def _prepare(settings: Any) -> dict[str, Any]:
    from vidnexus.training.digits import load_or_train

    _, rep = load_or_train(settings.data_dir / "models")
    return {"digit reader": f"LeNet-5 trained by vidnexus on rendered HUD digits in {rep.get('train_seconds', '?')} s, "
                            f"held-out accuracy {100 * rep.get('heldout_accuracy', 0):.2f}% on "
                            f"{rep.get('heldout_examples', '?')} cells"}


DEMO = DemoSpec(streams=_streams, queries=QUERIES, tables=("hud_reads",), prepare=_prepare)
