"""People: count the people who come into a fixed camera's view and when each was in it.

Per stream (one state per camera): a background learned only where nothing is in the foreground,
each frame scaled to the background's brightness first (:class:`~vidnexus.operators.cv.HeldBackground`:
a person who stands still for half a minute stays in the foreground, and the camera's auto-exposure
is not a person) → blob tracking that joins a person's head, body and legs into one track
(:class:`~vidnexus.operators.tracking.BlobTracker`) → each person's square crop → ``pose_landmarks``
(BlazePose GHUM, real weights, served by the executor: :mod:`vidnexus.apps.people.models`) → one
row per (frame, person) in ``people_sightings`` with the 33 landmarks in frame pixels. A track
counts as a person once it was seen in ``MIN_HITS`` sampled frames; how many people came, when each
was in view and how well their pose was seen are SQL (``QUERIES``). People are found classically
(motion, no detector DNN: the zoo's detectors have random weights); the DNN gives each their pose.

    vidnexus demo people              # the real one-by-one-person video, with the hand count beside
    vidnexus run people --stream room=../shared/data/real/one-by-one-person-detection.mp4 --fps 5

Checked against hand labels (``tests/data/hand_counts.json``: 6 people and when each was in view)
by ``tests/unit/apps/test_people.py``, which also checks the poses (landmarks inside each person's
box, the body the right way up).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Iterable

from vidnexus.apps.people.models import PersonSquare, person_square
from vidnexus.apps.spec import DemoSpec, DemoSummary, beside_checkout
from vidnexus.clock import wall_time
from vidnexus.contracts.frames import Frame
from vidnexus.operators.chain import App, Stream
from vidnexus.operators.cv import MovingPeople
from vidnexus.streams.images import image_of
from vidnexus.streams.spec import StreamSpec

__all__ = ["app", "QUERIES", "DEMO"]

MIN_HITS = 5
"""Sampled frames a track needs to count as a person (1 s at 5 fps: a flicker or a shadow does not)."""

app = App("people", slo_ms=1000, ordered=True)
pose = app.model("pose_landmarks")
sightings = app.table(
    "people_sightings",
    {"pts": "Float64", "track_id": "UInt64", "x1": "Float32", "y1": "Float32", "x2": "Float32", "y2": "Float32",
     "counts": "UInt8", "keypoints": "Array(Float32)", "visible_keypoints": "UInt8", "keypoints_in_box": "UInt8",
     "latency_ms": "Float32"},
)


class _Camera:
    def __init__(self) -> None:
        self.people = MovingPeople()
        self.first: dict[int, int] = {}  # track → the frame number it began at


_cameras: dict[str, _Camera] = {}


@dataclass(frozen=True)
class PeopleFrame:
    """A frame's sightings (rows without their pose yet), each person's square crop, and the poses
    once ``pose_landmarks`` has answered (one per crop, in order)."""

    rows: list[dict[str, Any]]
    squares: list[PersonSquare]
    ingest_ts: float
    poses: tuple[Any, ...] = ()


def track(f: Frame) -> PeopleFrame:
    cam = _cameras.get(f.stream_id) or _cameras.setdefault(f.stream_id, _Camera())
    img = image_of(f)
    seen = cam.people.apply(img)
    live = {t.track_id for t in cam.people.tracker.live}
    if len(cam.first) > 4 * max(1, len(live)):
        cam.first = {k: v for k, v in cam.first.items() if k in live}
    rows, squares = [], []
    for t, box in seen:
        # Unique across restarts of the worker (its tracker numbers from 1 again): the frame number
        # the track began at, and its number then.
        first = cam.first.setdefault(t.track_id, f.frame_no)
        rows.append({"pts": f.pts, "track_id": first * 1000 + t.track_id % 1000, "x1": box[0], "y1": box[1],
                     "x2": box[2], "y2": box[3], "counts": int(t.hits >= MIN_HITS)})
        squares.append(person_square(img, box))
    return PeopleFrame(rows, squares, f.ingest_ts)


def person_inputs(p: PeopleFrame) -> list[Any]:
    return [s.image for s in p.squares]


def with_poses(p: PeopleFrame, poses: list[Any]) -> PeopleFrame:
    return replace(p, poses=tuple(poses))


def each(p: PeopleFrame) -> Iterable[dict[str, Any]]:
    """One row per person, with the pose put back in frame pixels: the 33 landmarks flattened
    (x, y, visibility each), how many are visible (≥ 0.5) and how many of those fall inside the
    person's box."""
    latency = (wall_time() - p.ingest_ts) * 1000
    for k, row in enumerate(p.rows):
        points = p.squares[k].to_frame(p.poses[k]) if k < len(p.poses) else []
        visible = [(x, y) for x, y, v in points if v >= 0.5]
        inside = sum(1 for x, y in visible if row["x1"] <= x <= row["x2"] and row["y1"] <= y <= row["y2"])
        yield {**row, "keypoints": [round(float(c), 1 if i % 3 < 2 else 3) for pt in points for i, c in enumerate(pt)],
               "visible_keypoints": len(visible), "keypoints_in_box": inside, "latency_ms": latency}


@app.chain
def pipeline(frames: Stream) -> Stream:
    return frames.map(track).infer(pose, input=person_inputs, many=True, merge=with_poses).flat_map(each).sink(sightings)


QUERIES = {
    "people per camera": """
SELECT stream, count() AS people, round(avg(stayed), 1) AS mean_stay_s
FROM (SELECT stream, track_id, max(pts) - min(pts) AS stayed FROM people_sightings FINAL
      GROUP BY stream, track_id HAVING max(counts) = 1)
GROUP BY stream ORDER BY stream""",
    "presence intervals": """
SELECT stream, track_id, round(min(pts), 1) AS entered_s, round(max(pts), 1) AS left_s,
       round(max(pts) - min(pts), 1) AS stayed_s
FROM people_sightings FINAL GROUP BY stream, track_id HAVING max(counts) = 1
ORDER BY stream, entered_s""",
    "pose per person": """
SELECT stream, track_id, count() AS frames, round(100 * avg(keypoints_in_box >= 12), 1) AS pose_in_box_pct,
       round(avg(visible_keypoints), 1) AS visible_of_33,
       round(100 * avg(keypoints[2] < least(keypoints[71], keypoints[74])), 1) AS upright_pct
FROM people_sightings FINAL WHERE counts = 1 AND length(keypoints) = 99
GROUP BY stream, track_id ORDER BY stream, min(pts)""",
}


# -- demo ------------------------------------------------------------------------------------------

REAL_VIDEO = "one-by-one-person-detection.mp4"



def _streams(n: int, seconds: float, fps: float, sample_fps: float) -> list[StreamSpec]:
    """The real one-by-one-person video (its first ``seconds``); nothing else (no synthetic people)."""
    from vidnexus.errors import ConfigError

    real = beside_checkout(f"../shared/data/real/{REAL_VIDEO}")
    if real is None:
        raise ConfigError(f"demo people: {REAL_VIDEO} not found under ../shared/data/real")
    return [StreamSpec("room", str(real), fps=sample_fps, until_s=seconds)]


def _summary(store: Any, executor: Any) -> DemoSummary:
    import json

    r = store.query("SELECT stream, round(min(pts), 1), round(max(pts), 1) FROM people_sightings FINAL "
                    "GROUP BY stream, track_id HAVING max(counts) = 1 ORDER BY stream, min(pts)")
    seen = [(str(s), float(a), float(b)) for s, a, b in r.rows]
    labels_path = beside_checkout("tests/data/hand_counts.json")
    labels = json.loads(labels_path.read_text()).get(REAL_VIDEO, {}) if labels_path else {}
    last = max((b for _, _, b in seen), default=0.0)
    truth = [iv for iv in labels.get("in_view", []) if iv[0] <= last + 1.0]
    lines = [f"room: {len(seen)} people, in view " + ", ".join(f"{a:g}-{b:g} s" for _, a, b in seen)]
    if truth:
        lines.append(f"a person counted {len(truth)} in that part of {REAL_VIDEO}: "
                     + ", ".join(f"{a:g}-{min(b, last):g} s" for a, b, _ in truth) + " (tests/data/hand_counts.json)")
    n, in_box, upright = store.query(
        "SELECT count(), avg(keypoints_in_box >= 12), avg(keypoints[2] < least(keypoints[71], keypoints[74])) "
        "FROM people_sightings FINAL WHERE counts = 1 AND length(keypoints) = 99").rows[0]
    pose = {"sightings": int(n), "in_box_pct": round(100 * float(in_box or 0), 1),
            "upright_pct": round(100 * float(upright or 0), 1)}
    lines.append(f"pose (BlazePose): {pose['in_box_pct']:g}% of {n} sightings of counted people have ≥ 12 of 33 "
                 f"landmarks visible inside the person's box; nose above the hips in {pose['upright_pct']:g}%")
    return DemoSummary(tuple(lines), {"people": [{"entered_s": a, "left_s": b} for _, a, b in seen],
                                      "hand_count": [{"entered_s": a, "left_s": min(b, last)} for a, b, _ in truth],
                                      "pose": pose})


def _load_streams(n: int, seconds: float, fps: float, sample_fps: float) -> list[StreamSpec]:
    """``n`` cameras playing the real video (``room-1`` …), for load tests."""
    (room,) = _streams(1, seconds, fps, sample_fps)
    return [StreamSpec(f"room-{i + 1}", room.url, fps=sample_fps, until_s=seconds) for i in range(n)]


DEMO = DemoSpec(streams=_streams, queries=QUERIES, tables=("people_sightings",), summary=_summary, source_fps=10.0,
                sample_fps=5.0, load_streams=_load_streams)
