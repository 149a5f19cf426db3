"""The dance app: score performances against a reference choreography.

Chain, per sampled frame: find the dancer (CPU: the bright figure's box, squared and cropped to
64×64) → ``dance_pose`` (a pose regressor the project trains on stick-figure dancers, 13
keypoints) → one row per frame in ``dance_frames``: the keypoints read, the beat and move of the
choreography at that time, the pose similarity of the read pose to the reference pose at the same
instant (``sim``: timing and pose errors both lower it) and to the move's key pose (``sim_move``),
and for synthetic streams the same two figures computed from the true keypoints.

Scores are SQL: per move, 100 × mean ``sim`` over its beat (a late dancer scores lower because its
pose at each instant differs from the reference's); per performance, the mean over moves; how
closely each move's key pose was reached, 100 × max ``sim_move`` over the beat (``QUERIES``).

Real people (``VNX_DANCE_POSE=blazepose``): the dancer is the largest moving person of the frame
(:class:`~vidnexus.operators.cv.MovingPeople`) and the pose BlazePose's (``pose_landmarks``, real
weights), its landmarks mapped to the same 13 keypoints (:data:`BLAZEPOSE_13`) and scored the same
way; a frame with nobody in it is a row with ``sim`` −1.

Optional compute-only keypoint model: with ``VNX_DANCE_KEYPOINTS=keypointrcnn`` every sampled
frame first goes through Keypoint R-CNN (random weights: compute only, output discarded, see
:mod:`vidnexus.apps.compute`). Off by default: it takes ~5.4 s per frame on this project's CPU, so
it is for GPU executors (or a CPU run at a very low sample rate and a long SLO).

    vidnexus demo dance               # embedded: performers of different skill
    vidnexus worker dance             # distributed: a faust worker over Kafka
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from vidnexus.apps.dance.models import figure_crop
from vidnexus.apps.dance.render import (
    BEAT_S,
    CHOREOGRAPHY,
    MOVES,
    parse_kp,
    pose_keypoints,
    pose_similarity,
    reference_angles,
)
from vidnexus.apps.compute import compute_stage_model, discard_output, frame_input, keep_element
from vidnexus.apps.people.models import PersonSquare, person_square
from vidnexus.apps.spec import DemoSpec, DemoSummary
from vidnexus.clock import wall_time
from vidnexus.config import load_settings
from vidnexus.operators.chain import App, Inferred, Stream
from vidnexus.contracts.frames import Frame
from vidnexus.operators.cv import MovingPeople
from vidnexus.streams.images import image_of

__all__ = ["app", "QUERIES", "DEMO", "score_pose"]

app = App("dance", slo_ms=300)
POSE_MODEL = "pose_landmarks" if load_settings().dance_pose == "blazepose" else "dance_pose"
pose = app.model(POSE_MODEL)
KEYPOINTS_MODEL = compute_stage_model(load_settings(), "dance_keypoints", ("pose",))
keypoints = app.model(KEYPOINTS_MODEL, decode=discard_output) if KEYPOINTS_MODEL else None
frames_table = app.table(
    "dance_frames",
    {
        "pts": "Float64",
        "beat": "UInt16",
        "move": "String",
        "kp_read": "Array(Float32)",
        "sim": "Float32",
        "sim_move": "Float32",
        "kp_error_px": "Float32",
        "sim_truth": "Float32",
        "sim_move_truth": "Float32",
        "latency_ms": "Float32",
    },
)

_KEY_POSES = {name: pose_keypoints(np.array(a, np.float64), 0.0, 0.0, 100.0) for name, a in MOVES.items()}


@dataclass(frozen=True)
class DanceFrame:
    frame: Frame
    crop: np.ndarray
    box: tuple[float, float, float]


def crop(f: Frame) -> DanceFrame:
    x, box = figure_crop(image_of(f))
    return DanceFrame(f, x, box)


def crop_of(d: DanceFrame) -> Any:
    return d.crop


def score_pose(kp: np.ndarray, t: float) -> tuple[int, str, float, float]:
    """(beat, move, similarity to the reference at time t, similarity to the move's key pose)."""
    angles, beat = reference_angles(t)
    move = CHOREOGRAPHY[beat]
    ref = pose_keypoints(angles, 0.0, 0.0, 100.0)
    return beat, move, pose_similarity(kp, ref), pose_similarity(kp, _KEY_POSES[move])


# -- real people (VNX_DANCE_POSE=blazepose) -----------------------------------------------------------

BLAZEPOSE_13 = (0, 11, 12, 13, 14, 15, 16, 23, 24, 25, 26, 27, 28)
"""BlazePose's landmarks for :data:`~vidnexus.apps.dance.render.KEYPOINTS`: the nose for the head,
then shoulders, elbows, wrists, hips, knees and ankles (left is the person's own, as here)."""


_stages: dict[str, MovingPeople] = {}


@dataclass(frozen=True)
class RealDanceFrame:
    frame: Frame
    square: PersonSquare | None
    landmarks: tuple[Any, ...] = ()


def find_dancer(f: Frame) -> RealDanceFrame:
    """The largest moving person of the frame (the dancer), or none."""
    people = _stages.get(f.stream_id) or _stages.setdefault(f.stream_id, MovingPeople())
    img = image_of(f)
    seen = [box for _, box in people.apply(img)]
    if not seen:
        return RealDanceFrame(f, None)
    return RealDanceFrame(f, person_square(img, max(seen, key=lambda b: (b[2] - b[0]) * (b[3] - b[1]))))


def dancer_inputs(d: RealDanceFrame) -> list[Any]:
    return [] if d.square is None else [d.square.image]


def with_landmarks(d: RealDanceFrame, out: list[Any]) -> RealDanceFrame:
    return replace(d, landmarks=tuple(out))


def real_row(d: RealDanceFrame) -> dict[str, Any]:
    """A real person's pose, scored like a rendered dancer's (a frame without a person: sim -1)."""
    t = d.frame.pts
    row: dict[str, Any] = {"pts": t, "kp_error_px": -1.0, "sim_truth": -1.0, "sim_move_truth": -1.0,
                           "latency_ms": (wall_time() - d.frame.ingest_ts) * 1000}
    if d.square is None or not d.landmarks:
        _, beat = reference_angles(t)
        return {**row, "beat": beat, "move": CHOREOGRAPHY[beat], "kp_read": [], "sim": -1.0, "sim_move": -1.0}
    points = d.square.to_frame(d.landmarks[0])
    kp = np.array([points[k][:2] for k in BLAZEPOSE_13], np.float64)
    beat, move, sim, sim_move = score_pose(kp, t)
    return {**row, "beat": beat, "move": move, "kp_read": kp.reshape(-1).round(1).tolist(), "sim": sim,
            "sim_move": sim_move}


def to_row(r: Inferred) -> dict[str, Any]:
    d: DanceFrame = r.value
    x0, y0, side = d.box
    kp = np.asarray(r.output, np.float64).reshape(-1, 2) * side + [x0, y0]
    t = d.frame.pts
    beat, move, sim, sim_move = score_pose(kp, t)
    row: dict[str, Any] = {"pts": t, "beat": beat, "move": move, "kp_read": kp.reshape(-1).round(1).tolist(),
                           "sim": sim, "sim_move": sim_move, "kp_error_px": -1.0, "sim_truth": -1.0,
                           "sim_move_truth": -1.0, "latency_ms": (wall_time() - d.frame.ingest_ts) * 1000}
    if "kp" in d.frame.tags:
        truth = parse_kp(d.frame.tags["kp"])
        _, _, st, smt = score_pose(truth, t)
        row.update(kp_error_px=float(np.linalg.norm(kp - truth, axis=1).mean()), sim_truth=st, sim_move_truth=smt)
    return row


@app.chain
def pipeline(frames: Stream) -> Stream:
    if keypoints is not None:  # compute only: the frame goes on unchanged
        frames = frames.infer(keypoints, input=frame_input(keypoints.name), merge=keep_element)
    if POSE_MODEL == "pose_landmarks":  # real people: BlazePose on the largest moving person
        return (frames.map(find_dancer).infer(pose, input=dancer_inputs, many=True, merge=with_landmarks)
                .map(real_row).sink(frames_table))
    return frames.map(crop).infer(pose, input=crop_of).map(to_row).sink(frames_table)


QUERIES = {
    "performance scores": """
SELECT stream, round(avg(move_score), 1) AS score, round(avg(move_score_truth), 1) AS score_from_truth,
       round(min(move_score), 1) AS worst_move, round(avg(key_pose), 1) AS key_pose_match, round(avg(err_px), 1) AS kp_error_px
FROM (SELECT stream, beat, 100 * avg(sim) AS move_score, 100 * avg(sim_truth) AS move_score_truth,
             100 * max(sim_move) AS key_pose, avg(kp_error_px) AS err_px
      FROM dance_frames FINAL GROUP BY stream, beat)
GROUP BY stream ORDER BY score DESC""",
    "per-move scores (all performers)": """
SELECT move, count() AS frames, round(100 * avg(sim), 1) AS score, round(100 * avg(sim_truth), 1) AS score_from_truth
FROM dance_frames FINAL GROUP BY move ORDER BY score""",
}


# -- demo ------------------------------------------------------------------------------------------

SKILLS = (0.95, 0.7, 0.4, 0.85, 0.55, 0.25)


def _streams(n: int, seconds: float, fps: float, sample_fps: float) -> list[Any]:
    from vidnexus.streams.spec import StreamSpec

    secs = min(seconds, len(CHOREOGRAPHY) * BEAT_S)
    out = []
    for i in range(n):
        skill = SKILLS[i % len(SKILLS)]
        url = f"synthetic://dance?seed={i + 1}&fps={fps:g}&seconds={secs:g}&skill={skill:g}"
        out.append(StreamSpec(f"dancer-{i + 1}-skill{int(100 * skill)}", url, fps=sample_fps))
    return out


def _prepare(settings: Any) -> dict[str, Any]:
    from vidnexus.apps.dance.models import load_or_train

    _, rep = load_or_train(settings.data_dir / "models")
    return {"pose regressor": f"CNN trained by vidnexus on {rep['train_examples']} stick-figure poses in "
                              f"{rep['train_seconds']} s; held-out mean keypoint error "
                              f"{100 * rep['heldout_mean_error_crop']:.1f}% of the crop side"}


def _summary(store: Any, executor: Any) -> DemoSummary:
    r = store.query("SELECT stream, 100 * avg(sim), 100 * avg(sim_truth), avg(kp_error_px) FROM dance_frames FINAL "
                    "GROUP BY stream ORDER BY stream")
    lines = tuple(f"{s}: score {a:.1f} from the keypoints read, {b:.1f} from the true keypoints "
                  f"(mean keypoint error {e:.1f} px)" for s, a, b, e in r.rows)
    scores = [{"stream": s, "score_read": round(float(a), 1), "score_truth": round(float(b), 1),
               "kp_error_px": round(float(e), 2)} for s, a, b, e in r.rows]
    return DemoSummary(lines, {"scores": scores})


DEMO = DemoSpec(streams=_streams, queries=QUERIES, tables=("dance_frames",), prepare=_prepare, summary=_summary)
