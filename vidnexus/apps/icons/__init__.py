"""The icons app: the held item of every game stream read by the glyph task's variants (MCDNN).

Chain, per sampled frame of a game stream (the game app's synthetic streams, ``game`` tag):

1. CPU: cut the item icon (its place from the game's HUD layout).
2. ``glyph120``: a *task*, not a model. Its four variants (``glyph120_oracle``,
   ``glyph120_oracle_int8``, ``glyph120_compact_b``, ``glyph120_compact_a``; held-out accuracy
   0.97 to 0.88, cost per request a factor 50 apart on a CPU) answer it alike; the scheduler picks
   the most accurate one that fits the task's budget at the current rate
   (``vidnexus scheduler --variant-budget glyph120=DEVICE_S_PER_S[,MEMORY_MB]``) and switches when
   the load changes. Until a plan names one, the cheapest serves.
3. One row per frame in ``icon_reads``: the item read, the truth (synthetic streams), latency.

    vidnexus demo icons                # embedded: the most accurate variant (no budget)
    vidnexus worker icons              # distributed, beside
    vidnexus scheduler --variant-budget glyph120=0.05
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from vidnexus.apps.game import game_of, streams
from vidnexus.apps.game.render import ICON_SIZE, style
from vidnexus.apps.icons.models import CATALOG_BATCH, TASK, VARIANT_MODELS
from vidnexus.apps.spec import DemoSpec
from vidnexus.clock import wall_time
from vidnexus.contracts.frames import Frame
from vidnexus.operators.chain import App, Stream
from vidnexus.streams.images import image_of

__all__ = ["app", "Icon", "parse", "QUERIES", "DEMO"]

app = App("icons", slo_ms=200)
glyphs = app.model(TASK, variants=VARIANT_MODELS, decode=lambda logits: int(np.argmax(logits)))
reads = app.table("icon_reads", {"pts": "Float64", "game": "UInt8", "item_read": "Int32", "item_truth": "Int32",
                                 "latency_ms": "Float32", "ingest_ts": "Float64"})


@dataclass(frozen=True)
class Icon:
    frame: Frame
    game: int
    icon: np.ndarray
    item: int = -1


def parse(f: Frame) -> Icon:
    game = game_of(f)
    x, y = style(game).icon_xy
    icon = image_of(f)[y: y + ICON_SIZE, x: x + ICON_SIZE]  # uint8 BGR: the executor makes the input
    return Icon(f, game, np.ascontiguousarray(icon))


def icon_input(i: Icon) -> Any:
    return i.icon


def with_item(i: Icon, item: int) -> Icon:
    return Icon(i.frame, i.game, i.icon, int(item))


def to_row(i: Icon) -> dict[str, Any]:
    f = i.frame
    return {"pts": f.pts, "game": i.game, "item_read": i.item, "item_truth": int(f.tags.get("item", -1)),
            "latency_ms": (wall_time() - f.ingest_ts) * 1000, "ingest_ts": f.ingest_ts}


@app.chain
def pipeline(frames: Stream) -> Stream:
    return frames.map(parse).infer(glyphs, input=icon_input, merge=with_item).map(to_row).sink(reads)


QUERIES = {
    "per stream": """
SELECT stream, any(game) AS game, count() AS frames, round(100 * avg(item_read = item_truth), 2) AS item_pct,
       round(quantile(0.99)(latency_ms), 1) AS p99_ms
FROM icon_reads FINAL GROUP BY stream ORDER BY stream""",
}


# -- demo ------------------------------------------------------------------------------------------


def _prepare(settings: Any) -> dict[str, Any]:
    from vidnexus.apps import task_catalog

    rows = task_catalog(TASK, settings.data_dir / "models")
    return {v.name: f"held-out accuracy {100 * v.accuracy:.2f}%, {1000 * v.cost_s(CATALOG_BATCH):.3f} ms per request "
                    f"on one CPU thread, {v.memory_bytes / 1e6:.2f} MB" for v in rows}


DEMO = DemoSpec(streams=streams, queries=QUERIES, tables=("icon_reads",), prepare=_prepare)
