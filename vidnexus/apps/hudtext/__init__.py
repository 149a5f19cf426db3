"""The HUD-text app: read a game HUD's score and kills in any font, with a real text recogniser.

Chain, per sampled frame: crop the HUD's text fields (CPU; their boxes are fractions of the frame,
:data:`~vidnexus.apps.hudtext.render.FIELDS`, each cut to its line of text,
:func:`~vidnexus.operators.cv.text_line`) → ``hud_text`` (PP-OCRv4's recogniser, ONNX, served
by the executor: both fields of a frame requested at once and batched across streams) on each
field → the number after the field's label → one row per frame in ``hud_text_reads``, with the
text read, its confidence and, for ``synthetic://hudtext`` streams, the true values (-1 otherwise).

Unlike the ``hud`` app, whose digit reader the project trains on the Hershey fonts it renders, this
one reads text it never rendered: ``synthetic://hudtext`` draws the HUD over the shared real videos
in Pillow's TrueType font.

    vidnexus demo hudtext                    # embedded: in-process bus, executor and chdb
    vidnexus worker hudtext                  # distributed: a faust worker over Kafka
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from vidnexus.apps.hudtext.render import FIELDS, VIDEOS, field_boxes
from vidnexus.apps.spec import DemoSpec
from vidnexus.clock import wall_time
from vidnexus.contracts.frames import Frame
from vidnexus.operators.chain import App, Inferred, Stream
from vidnexus.operators.cv import text_line
from vidnexus.streams.images import image_of
from vidnexus.streams.spec import StreamSpec

__all__ = ["app", "TextFrame", "crop_fields", "number_in", "to_row"]

app = App("hudtext", slo_ms=300)
reader = app.model("hud_text")
reads = app.table(
    "hud_text_reads",
    {
        "pts": "Float64",
        "score_read": "Int64",
        "kills_read": "Int64",
        "score_truth": "Int64",
        "kills_truth": "Int64",
        "texts": "Array(String)",
        "confidence": "Float32",
        "latency_ms": "Float32",
        "ingest_ts": "Float64",
    },
)


@dataclass(frozen=True)
class TextFrame:
    frame: Frame
    crops: list[np.ndarray]  # one uint8 BGR crop per field, in FIELDS order


def crop_fields(f: Frame) -> TextFrame:
    """Each field's box, cut down to its line of text (the recogniser reads one tight line)."""
    img = image_of(f)
    h, w = img.shape[:2]
    return TextFrame(f, [np.ascontiguousarray(text_line(img[y : y + bh, x : x + bw]))
                         for x, y, bw, bh in field_boxes(w, h).values()])


def field_inputs(t: TextFrame) -> list[Any]:
    return list(t.crops)


_DIGITS = re.compile(r"\d+")
_LOOKALIKE = str.maketrans({"O": "0", "o": "0", "D": "0", "l": "1", "I": "1", "|": "1", "Z": "2", "S": "5",
                            "B": "8"})


def number_in(text: str, label: str) -> int:
    """The number a HUD field's text shows: the digits after its label (``SCORE 1 234`` → 1234;
    letters a recogniser confuses with digits, ``O`` for 0, count as those digits there), or -1
    when there are none.

    Example:
        >>> number_in("SCORE 12 345", "SCORE"), number_in("KILLS O7", "KILLS"), number_in("KILLS", "KILLS")
        (12345, 7, -1)
        >>> number_in("SC0RE 310", "SCORE"), number_in("SC0RE310", "SCORE")
        (310, 310)
    """
    at = text.upper().find(label)
    if at >= 0:
        rest = text[at + len(label):]
    else:  # the label misread ("SC0RE"): what follows its first space, else the trailing digits
        head, space, tail = text.strip().partition(" ")
        rest = tail if space else (_DIGITS.findall(head) or [""])[-1]
    digits = "".join(_DIGITS.findall(rest.translate(_LOOKALIKE)))
    return int(digits) if digits else -1


def to_row(r: Inferred) -> dict[str, Any]:
    t: TextFrame = r.value
    f = t.frame
    texts = [str(out[0]) for out in r.output]
    values = {name: number_in(text, name.upper()) for name, text in zip(FIELDS, texts)}
    return {
        "pts": f.pts,
        "score_read": values["score"],
        "kills_read": values["kills"],
        "score_truth": int(f.tags.get("score", -1)),
        "kills_truth": int(f.tags.get("kills", -1)),
        "texts": texts,
        "confidence": float(min((out[1] for out in r.output), default=0.0)),
        "latency_ms": (wall_time() - f.ingest_ts) * 1000,
        "ingest_ts": f.ingest_ts,
    }


@app.chain
def pipeline(frames: Stream) -> Stream:
    return frames.map(crop_fields).infer(reader, input=field_inputs, many=True).map(to_row).sink(reads)


QUERIES = {
    "per stream": """
SELECT f.stream AS stream,
       count() AS frames,
       countIf(f.status = 'ok') AS read,
       countIf(f.status != 'ok') AS dropped,
       any(r.score_exact_pct) AS score_exact_pct,
       any(r.kills_exact_pct) AS kills_exact_pct,
       any(r.p50_ms) AS p50_ms,
       any(r.p99_ms) AS p99_ms
FROM (SELECT stream, status FROM vnx_frames FINAL WHERE app = 'hudtext') AS f
LEFT JOIN (
    SELECT stream,
           round(100 * avg(score_read = score_truth), 2) AS score_exact_pct,
           round(100 * avg(kills_read = kills_truth), 2) AS kills_exact_pct,
           round(quantile(0.5)(latency_ms), 1) AS p50_ms,
           round(quantile(0.99)(latency_ms), 1) AS p99_ms
    FROM hud_text_reads FINAL GROUP BY stream
) AS r ON f.stream = r.stream
GROUP BY f.stream ORDER BY f.stream""",
    "misreads": """
SELECT stream, pts, texts, score_truth, kills_truth FROM hud_text_reads FINAL
WHERE score_read != score_truth OR kills_read != kills_truth ORDER BY stream, pts LIMIT 10""",
}


def _streams(n: int, seconds: float, fps: float, sample_fps: float) -> list[StreamSpec]:
    videos = sorted(VIDEOS)
    return [StreamSpec(f"cam-{i + 1}", f"synthetic://hudtext?seed={i + 1}&fps={fps:g}&seconds={seconds:g}"
                                       f"&video={videos[i % len(videos)]}", fps=sample_fps)
            for i in range(n)]


def _prepare(settings: Any) -> dict[str, Any]:
    from vidnexus.apps.hudtext.models import HUD_TEXT, rec_file

    rec_file()  # a clear error now when the package is missing
    return {"text recogniser": HUD_TEXT.weights}


DEMO = DemoSpec(streams=_streams, queries=QUERIES, tables=("hud_text_reads",), prepare=_prepare, sample_fps=5.0)
