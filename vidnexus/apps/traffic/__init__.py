"""The traffic app: count and describe the vehicles passing fixed cameras.

Chain, per sampled frame (a stream's frames run in order: the tracker keeps per-camera state):

1. CPU: background subtraction → moving blobs → IoU/centre-distance (≤ 40 px) tracking
   (:class:`vidnexus.operators.cv.MotionCounter`); a track *counts* once it has been seen in 5
   sampled frames and moved 40 px (parked cars, flicker and exposure jumps do not).
2. One element per tracked object in the frame, cropped from the full-resolution frame.
3. ``car_colours`` on every crop (one request per object, batched across cameras): the colour
   recognizer the project trains on rendered cars. More objects per frame (rush hour) → more
   requests per frame: the app's fan-out.
4. One row per (frame, object) in ``traffic_objects``: track id, box, colour read, whether the track
   counts so far, and for synthetic streams the true car (nearest in the frame's truth) and colour.

Counts per camera and per minute, dwell times and colours are SQL over ``traffic_objects``
(see ``QUERIES``). Runs on real footage too: ``file://…/car-detection.mp4``.

Optional compute-only detector: with ``VNX_TRAFFIC_DETECTOR=ssdlite`` every sampled frame first
goes through SSDlite320 (random weights: compute only, its boxes discarded, see
:mod:`vidnexus.apps.compute`), so the query is Nexus's two-stage traffic query — detector, then
one recognizer request per object — with the SLO split over both stages. Off by default: on this
project's 2-core CPU it costs ~110 ms per frame, more than the rest of the chain.

    vidnexus demo traffic             # embedded: 3 synthetic cameras + the real parking-lot video
    vidnexus worker traffic           # distributed: a faust worker over Kafka
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np

from vidnexus.apps.compute import compute_stage_model, discard_output, frame_input, keep_element
from vidnexus.apps.spec import DemoSpec, DemoSummary, beside_checkout
from vidnexus.apps.traffic.models import COLOUR_NAMES
from vidnexus.apps.traffic.render import parse_cars
from vidnexus.clock import wall_time
from vidnexus.config import load_settings
from vidnexus.operators.chain import App, Inferred, Stream
from vidnexus.operators.cv import MotionCounter
from vidnexus.operators.tracking import Track, moving_tracks
from vidnexus.operators.zones import LineCounter, Zone, parse_lines, parse_zones, zones_at
from vidnexus.contracts.frames import Frame
from vidnexus.streams.images import image_of

__all__ = ["app", "Sighting", "QUERIES", "DEMO"]

app = App("traffic", slo_ms=400, ordered=True)
colours = app.model("car_colours", decode=lambda logits: COLOUR_NAMES[int(np.argmax(logits))])
DETECTOR = compute_stage_model(load_settings(), "traffic_detector", ("detect",))
detector = app.model(DETECTOR, decode=discard_output) if DETECTOR else None
objects = app.table(
    "traffic_objects",
    {
        "pts": "Float64",
        "track_id": "UInt32",
        "x1": "Float32", "y1": "Float32", "x2": "Float32", "y2": "Float32",
        "counts": "UInt8",
        "colour": "String",
        "truth_car": "Int32",
        "truth_colour": "String",
        "truth_entered": "Int32",
        "latency_ms": "Float32",
        "crossings": "Array(String)",
        "zones": "Array(String)",
    },
)

_counters: dict[str, MotionCounter] = {}
_lines: dict[str, tuple[tuple[tuple[str, str], ...], LineCounter]] = {}


def _line_counter(f: Frame) -> LineCounter | None:
    """The stream's counting lines (``line.NAME`` tags), kept while its tags stay the same."""
    declared = tuple(sorted((k, v) for k, v in f.tags.items() if k.startswith("line.")))
    if not declared:
        return None
    have = _lines.get(f.stream_id)
    if have is None or have[0] != declared:
        have = _lines[f.stream_id] = (declared, LineCounter(parse_lines(dict(declared))))
    return have[1]


_zones: dict[str, tuple[tuple[tuple[str, str], ...], list[Zone]]] = {}


def _stream_zones(f: Frame) -> list[Zone]:
    """The stream's zones (``zone.NAME`` tags), kept while its tags stay the same."""
    declared = tuple(sorted((k, v) for k, v in f.tags.items() if k.startswith("zone.")))
    if not declared:
        return []
    have = _zones.get(f.stream_id)
    if have is None or have[0] != declared:
        have = _zones[f.stream_id] = (declared, parse_zones(dict(declared)))
    return have[1]


@dataclass(frozen=True)
class Sighting:
    frame: Frame
    track: Track
    box: tuple[float, float, float, float]  # on the full-resolution frame
    counts: bool
    crop: np.ndarray  # uint8 BGR, as cut from the frame: the executor makes the model's input
    crossings: tuple[str, ...] = ()  # "LINE:in" / "LINE:out" completed at this sighting
    zones: tuple[str, ...] = ()  # the zones its box's centre is in


def track(f: Frame) -> list[Sighting]:
    counter = _counters.get(f.stream_id) or _counters.setdefault(f.stream_id, MotionCounter(max_center_distance=40))
    img = image_of(f)
    tracks = counter.frame_tracks(img)
    seen = [t for t, _ in tracks]
    counting = {t.track_id for t in moving_tracks(seen, counter.min_hits, counter.min_displacement)}
    lines = _line_counter(f)
    zones = _stream_zones(f)
    out = []
    for t, (x1, y1, x2, y2) in tracks:
        if x2 - x1 < 4 or y2 - y1 < 4:
            continue
        crossed: tuple[str, ...] = ()
        if lines is not None:  # the box's centre, in the frame's pixels, against each line
            crossed = tuple(f"{c.line}:{c.direction}" for c in lines.update(
                t.track_id, ((x1 + x2) / 2, (y1 + y2) / 2), counts=t.track_id in counting))
        out.append(Sighting(f, t, (x1, y1, x2, y2), t.track_id in counting, np.ascontiguousarray(img[y1:y2, x1:x2]),
                            crossed, zones_at(zones, ((x1 + x2) / 2, (y1 + y2) / 2))))
    if lines is not None:
        lines.bound({t.track_id for t in seen})
    return out


def sightings(s: list[Sighting]) -> Iterable[Sighting]:
    return s


def crop_of(s: Sighting) -> Any:
    return s.crop


def _truth(s: Sighting) -> tuple[int, str]:
    cars = parse_cars(s.frame.tags.get("cars", ""))
    if not cars:
        return -1, ""
    cx, cy = (s.box[0] + s.box[2]) / 2, (s.box[1] + s.box[3]) / 2
    cid, colour, _, _ = min(cars, key=lambda c: (c[2] - cx) ** 2 + (c[3] - cy) ** 2)
    return cid, colour


def to_row(r: Inferred) -> dict[str, Any]:
    s: Sighting = r.value
    truth_car, truth_colour = _truth(s)
    x1, y1, x2, y2 = s.box
    return {"pts": s.frame.pts, "track_id": s.track.track_id, "x1": x1, "y1": y1, "x2": x2, "y2": y2,
            "counts": int(s.counts), "colour": r.output, "truth_car": truth_car, "truth_colour": truth_colour,
            "truth_entered": int(s.frame.tags.get("entered", -1)), "latency_ms": (wall_time() - s.frame.ingest_ts) * 1000,
            "crossings": list(s.crossings), "zones": list(s.zones)}


@app.chain
def pipeline(frames: Stream) -> Stream:
    if detector is not None:  # compute only: the frame goes on unchanged
        frames = frames.infer(detector, input=frame_input(detector.name), merge=keep_element)
    return frames.map(track).flat_map(sightings).infer(colours, input=crop_of).map(to_row).sink(objects)


QUERIES = {
    "vehicles per camera": """
SELECT stream, uniqExact(track_id) AS vehicles,
       round(avg(dwell), 1) AS mean_dwell_s, topK(1)(colour)[1] AS commonest_colour
FROM (SELECT stream, track_id, max(pts) - min(pts) AS dwell, topK(1)(colour)[1] AS colour
      FROM traffic_objects FINAL WHERE counts = 1 GROUP BY stream, track_id)
GROUP BY stream ORDER BY stream""",
    "vehicles per minute": """
SELECT stream, toUInt32(floor(first_seen / 60)) AS minute, count() AS vehicles
FROM (SELECT stream, track_id, min(pts) AS first_seen FROM traffic_objects FINAL WHERE counts = 1
      GROUP BY stream, track_id)
GROUP BY stream, minute ORDER BY stream, minute""",
    "dwell per zone": """
SELECT stream, zone, count() AS vehicles, round(avg(dwell), 1) AS mean_dwell_s, round(max(dwell), 1) AS max_dwell_s
FROM (SELECT stream, track_id, arrayJoin(zones) AS zone, max(pts) - min(pts) AS dwell
      FROM traffic_objects FINAL
      WHERE (stream, track_id) IN (SELECT stream, track_id FROM traffic_objects FINAL WHERE counts = 1)
      GROUP BY stream, track_id, zone)
GROUP BY stream, zone ORDER BY stream, zone""",
    "line crossings": """
SELECT stream, splitByChar(':', c)[1] AS line, splitByChar(':', c)[2] AS direction, count() AS vehicles
FROM (SELECT stream, arrayJoin(crossings) AS c FROM traffic_objects FINAL)
GROUP BY stream, line, direction ORDER BY stream, line, direction""",
    "colour reads on synthetic cameras": """
SELECT truth_colour, count() AS sightings, round(100 * avg(colour = truth_colour), 1) AS correct_pct
FROM traffic_objects FINAL WHERE truth_car >= 0 AND counts = 1 GROUP BY truth_colour ORDER BY truth_colour""",
}


# -- demo ------------------------------------------------------------------------------------------

REAL_VIDEO = "car-detection.mp4"


def _streams(n: int, seconds: float, fps: float, sample_fps: float) -> list[Any]:
    """The synthetic cameras, and the real parking-lot video (its first ``seconds``) when it is there."""
    from vidnexus.streams.spec import StreamSpec

    out = [StreamSpec(f"cam-{i + 1}{'-rush' if i % 2 else ''}",
                      f"synthetic://traffic?seed={i + 1}&fps={fps:g}&seconds={seconds:g}&rush={i % 2}", fps=sample_fps)
           for i in range(n)]
    real = _real_video()
    if real is not None:
        out.append(StreamSpec("parking-lot", str(real), fps=sample_fps, until_s=seconds))
    return out



def _real_video() -> Any:
    """The shared real footage (``../shared/data/real`` next to the checkout), or None."""
    return beside_checkout(f"../shared/data/real/{REAL_VIDEO}")


def _hand_events(video: Any) -> list[tuple[float, float, str]]:
    """The hand-counted passages of the real video (``tests/data/hand_counts.json`` in the checkout
    beside it), or [] when that file is not there."""
    import json

    p = beside_checkout("tests/data/hand_counts.json")
    return [] if p is None else [tuple(e) for e in json.loads(p.read_text()).get(video.name, {}).get("events", [])]


def _prepare(settings: Any) -> dict[str, Any]:
    from vidnexus.apps.traffic.models import load_or_train

    _, rep = load_or_train(settings.data_dir / "models")
    real = (f"; {rep['real_heldout_accuracy'] * 100:.1f}% on {rep['real_heldout_crops']} held-out crops of the real cars"
            if "real_heldout_accuracy" in rep else "; no real cars (the real video or its labels are not here)")
    out = {"car colour recognizer": f"small CNN trained by vidnexus on rendered and real cars in {rep['train_seconds']} s, "
                                    f"held-out accuracy {100 * rep['heldout_accuracy']:.1f}% over {len(COLOUR_NAMES)} colours "
                                    f"on rendered crops{real}"}
    if _real_video() is None:
        out["real video"] = f"{REAL_VIDEO} not found under shared/data/real: synthetic cameras only"
    return out


def _summary(store: Any, executor: Any) -> DemoSummary:
    """Counted vehicles per camera next to the truth: the generator's for synthetic cameras (cars
    that entered the view), the hand count for the real video (cars a person saw enter by then)."""
    lines, vehicles = [], []
    r = store.query("SELECT stream, uniqExactIf(track_id, counts = 1), max(truth_entered), max(pts) "
                    "FROM traffic_objects FINAL GROUP BY stream ORDER BY stream")
    real = _real_video()
    for stream, counted, entered, last_pts in r.rows:
        row: dict[str, Any] = {"stream": stream, "counted": int(counted), "truth": None, "truth_from": None,
                               "up_to_s": round(float(last_pts), 1)}
        if stream == "parking-lot" and real is not None and _hand_events(real):
            seen = sum(1 for start, _, _ in _hand_events(real) if start <= last_pts)
            row.update(truth=seen, truth_from="tests/data/hand_counts.json")
            lines.append(f"{stream}: counted {counted} vehicles; a person counted {seen} entering in the part of "
                         f"{REAL_VIDEO} played, up to {last_pts:.0f} s (tests/data/hand_counts.json)")
        elif entered < 0:
            lines.append(f"{stream}: counted {counted} vehicles")
        else:
            row.update(truth=int(entered), truth_from="generator")
            lines.append(f"{stream}: counted {counted} vehicles; the generator sent {entered} into view")
        vehicles.append(row)
    return DemoSummary(tuple(lines), {"vehicles": vehicles})


DEMO = DemoSpec(streams=_streams, queries=QUERIES, tables=("traffic_objects",), prepare=_prepare,
                summary=_summary)
