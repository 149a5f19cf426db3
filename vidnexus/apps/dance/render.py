"""Synthetic dance performances with ground truth: ``synthetic://dance?seed=1&fps=10&seconds=32&skill=0.8``.

A stick-figure dancer (13 keypoints, :data:`KEYPOINTS`) performs the reference choreography
(:data:`CHOREOGRAPHY`: one move per beat, :data:`BEAT_S` seconds each, poses blended between beats)
on a dark stage. ``skill`` in [0, 1] sets how well: a less skilled dancer is late by up to 0.35 s
and holds its limbs up to 25° off, with slowly varying errors. Each frame's ``truth`` has the 13
true keypoints (``kp`` = ``x,y`` pairs in pixels, ``;``-separated) and the move index.

The pose and scoring functions here are shared by the generator, the training data of the pose
regressor and the app's scoring, so the truth and the app's reads are scored the same way.

Example:
    >>> src = DanceSource.from_url("synthetic://dance?seed=2&fps=5&seconds=4&skill=0.9")
    >>> f = next(iter(src.frames()))
    >>> f.image.shape, len(parse_kp(f.truth["kp"])), f.truth["move"]
    ((180, 320, 3), 13, 0)
"""

from __future__ import annotations

import math
import random
from typing import Iterator
from urllib.parse import parse_qs, urlparse

import numpy as np

from vidnexus.errors import StreamError
from vidnexus.streams.synthetic import RawFrame

__all__ = ["KEYPOINTS", "MOVES", "CHOREOGRAPHY", "BEAT_S", "DanceSource", "pose_keypoints", "reference_angles",
           "draw_dancer", "pose_similarity", "parse_kp", "format_kp", "random_angles", "WIDTH", "HEIGHT"]

WIDTH, HEIGHT = 320, 180
BEAT_S = 1.0
KEYPOINTS = ("head", "l_shoulder", "r_shoulder", "l_elbow", "r_elbow", "l_wrist", "r_wrist", "l_hip", "r_hip",
             "l_knee", "r_knee", "l_ankle", "r_ankle")
# Joint angles in degrees, 0 = pointing down, positive = towards the figure's left (image right):
# (l_upper_arm, l_forearm, r_upper_arm, r_forearm, l_thigh, l_shin, r_thigh, r_shin, squat 0..1)
MOVES: dict[str, tuple[float, ...]] = {
    "stand": (15, 10, -15, -10, 5, 0, -5, 0, 0.0),
    "arms_up": (160, 170, -160, -170, 8, 0, -8, 0, 0.0),
    "t_pose": (90, 90, -90, -90, 10, 0, -10, 0, 0.0),
    "left_kick": (60, 90, -40, -20, 80, 60, -5, 0, 0.0),
    "right_kick": (40, 20, -60, -90, 5, 0, -80, -60, 0.0),
    "squat": (70, 90, -70, -90, 50, -40, -50, 40, 0.6),
    "wave_left": (130, 60, -20, -10, 10, 0, -10, 0, 0.0),
    "wave_right": (20, 10, -130, -60, 10, 0, -10, 0, 0.0),
}
CHOREOGRAPHY = ("stand", "arms_up", "t_pose", "left_kick", "t_pose", "right_kick", "squat", "arms_up",
                "wave_left", "wave_right", "squat", "t_pose", "left_kick", "right_kick", "arms_up", "stand")


def reference_angles(t: float) -> tuple[np.ndarray, int]:
    """The choreography's joint angles at time ``t`` (s) and the index of the move being danced:
    each move is reached at the middle of its beat and held; the way there blends smoothly."""
    n = len(CHOREOGRAPHY)
    k = int(np.clip(math.floor(t / BEAT_S), 0, n - 1))
    phase = t / BEAT_S - k
    cur = np.array(MOVES[CHOREOGRAPHY[k]], np.float64)
    prev = np.array(MOVES[CHOREOGRAPHY[max(0, k - 1)]], np.float64)
    a = min(1.0, max(0.0, phase / 0.5))
    w = 0.5 - 0.5 * math.cos(math.pi * a)
    return prev + (cur - prev) * w, k


def random_angles(rng: np.random.Generator) -> np.ndarray:
    """Any plausible pose (training data for the pose regressor)."""
    arms = rng.uniform([-30, -40, -180, -180], [180, 180, 30, 40])
    legs = rng.uniform([-15, -60, -90, -90], [90, 90, 15, 60])
    return np.concatenate([arms, legs, [rng.uniform(0, 0.7) if rng.random() < 0.3 else 0.0]])


def pose_keypoints(angles: np.ndarray, cx: float, ground: float, height: float) -> np.ndarray:
    """13×2 keypoints (pixels) of the figure with these joint angles, standing on ``ground``."""
    u = height / 7.0
    la1, la2, ra1, ra2, lt, ls, rt, rs, squat = angles

    def vec(deg: float, length: float) -> np.ndarray:
        r = math.radians(deg)
        return np.array([math.sin(r) * length, math.cos(r) * length])

    hip_y = ground - 3.4 * u * (1 - 0.45 * squat)
    lhip, rhip = np.array([cx + 0.5 * u, hip_y]), np.array([cx - 0.5 * u, hip_y])
    lknee = lhip + vec(lt, 1.7 * u)
    rknee = rhip + vec(rt, 1.7 * u)
    lankle = lknee + vec(lt + ls, 1.7 * u)
    rankle = rknee + vec(rt + rs, 1.7 * u)
    neck_y = hip_y - 2.6 * u
    lsh, rsh = np.array([cx + 0.8 * u, neck_y]), np.array([cx - 0.8 * u, neck_y])
    lel = lsh + vec(la1, 1.3 * u)
    rel = rsh + vec(ra1, 1.3 * u)
    lwr = lel + vec(la2, 1.2 * u)
    rwr = rel + vec(ra2, 1.2 * u)
    head = np.array([cx, neck_y - 0.9 * u])
    return np.stack([head, lsh, rsh, lel, rel, lwr, rwr, lhip, rhip, lknee, rknee, lankle, rankle])


_LIMBS = [(1, 3, "l"), (3, 5, "l"), (2, 4, "r"), (4, 6, "r"), (7, 9, "l"), (9, 11, "l"), (8, 10, "r"),
          (10, 12, "r"), (1, 2, "c"), (7, 8, "c"), (1, 7, "c"), (2, 8, "c")]
_COLOURS = {"l": (255, 220, 90), "r": (90, 220, 255), "c": (235, 235, 235)}


def draw_dancer(img: np.ndarray, kp: np.ndarray, height: float, colours: dict[str, tuple[int, int, int]] | None = None) -> None:
    """Draw the stick figure (left limbs bluish, right limbs yellowish, body white)."""
    import cv2

    col = colours or _COLOURS
    t = max(2, int(round(height / 28)))
    for a, b, side in _LIMBS:
        cv2.line(img, tuple(int(v) for v in kp[a]), tuple(int(v) for v in kp[b]), col[side], t, cv2.LINE_AA)
    cv2.circle(img, (int(kp[0][0]), int(kp[0][1])), max(3, int(height / 14)), col["c"], -1, cv2.LINE_AA)


def stage(rng: random.Random) -> np.ndarray:
    img = np.empty((HEIGHT, WIDTH, 3), np.uint8)
    top = np.array([rng.randint(20, 50), rng.randint(10, 40), rng.randint(30, 60)], np.float32)
    ramp = np.linspace(0.6, 1.2, HEIGHT, dtype=np.float32)[:, None, None]
    img[:] = np.clip(top[None, None, :] * ramp, 0, 255).astype(np.uint8)
    return img


def pose_similarity(kp: np.ndarray, ref: np.ndarray) -> float:
    """Similarity in [0, 1] of two poses after removing position and scale (each normalized by its
    hip centre and its neck–hip length): exp(−mean keypoint distance / half a torso)."""
    def norm(p: np.ndarray) -> np.ndarray:
        p = np.asarray(p, np.float64).reshape(-1, 2)
        hip = (p[7] + p[8]) / 2
        neck = (p[1] + p[2]) / 2
        s = max(1e-6, float(np.linalg.norm(neck - hip)))
        normed: np.ndarray = (p - hip) / s
        return normed

    d = float(np.linalg.norm(norm(kp) - norm(ref), axis=1).mean())
    return math.exp(-d / 0.5)


def parse_kp(text: str) -> np.ndarray:
    return np.array([[float(v) for v in part.split(",")] for part in text.split(";")], np.float64)


def format_kp(kp: np.ndarray) -> str:
    return ";".join(f"{x:.1f},{y:.1f}" for x, y in kp)


class DanceSource:
    """One performance; frames are deterministic for (seed, skill)."""

    def __init__(self, seed: int = 0, fps: float = 10.0, seconds: float | None = None, *, skill: float = 0.8,
                 noise: float = 3.0) -> None:
        seconds = seconds if seconds is not None else len(CHOREOGRAPHY) * BEAT_S
        if fps <= 0 or seconds <= 0:
            raise StreamError(f"dance source: fps and seconds must be > 0 (got {fps}, {seconds})")
        if not 0 <= skill <= 1:
            raise StreamError(f"dance source: skill must be in [0, 1], got {skill}")
        self.seed, self.fps, self.seconds, self.skill, self.noise = seed, fps, seconds, skill, noise
        self.width, self.height = WIDTH, HEIGHT

    @classmethod
    def from_url(cls, url: str) -> "DanceSource":
        u = urlparse(url)
        if u.scheme != "synthetic" or u.netloc != "dance":
            raise StreamError(f"not a dance URL: {url!r}; use synthetic://dance?seed=&fps=&seconds=&skill=")
        q = {k: v[-1] for k, v in parse_qs(u.query).items()}
        unknown = set(q) - {"seed", "fps", "seconds", "skill", "noise"}
        if unknown:
            raise StreamError(f"synthetic URL {url!r}: unknown parameter(s) {sorted(unknown)}")
        try:
            return cls(int(q.get("seed", 0)), float(q.get("fps", 10)),
                       float(q["seconds"]) if "seconds" in q else None, skill=float(q.get("skill", 0.8)),
                       noise=float(q.get("noise", 3)))
        except ValueError as e:
            raise StreamError(f"synthetic URL {url!r}: {e}") from None

    def frames(self) -> Iterator[RawFrame]:
        rng = random.Random(self.seed)
        np_rng = np.random.default_rng(self.seed)
        bg = stage(rng)
        lag = (1 - self.skill) * 0.35
        err = (1 - self.skill) * 25.0
        # Slowly varying per-joint errors: a random walk low-passed over ~1 s.
        drift = np.zeros(9)
        height = rng.uniform(110, 140)
        cx0 = rng.uniform(120, 200)
        for i in range(int(round(self.seconds * self.fps))):
            t = i / self.fps
            drift = 0.9 * drift + 0.1 * np_rng.normal(0, 1, 9)
            angles, _ = reference_angles(max(0.0, t - lag))
            _, move = reference_angles(t)
            angles = angles + np.concatenate([drift[:8] * err * 3, [0.0]])
            cx = cx0 + 25 * math.sin(2 * math.pi * t / 8)
            kp = pose_keypoints(angles, cx, HEIGHT - 12, height)
            img = bg.copy()
            draw_dancer(img, kp, height)
            if self.noise > 0:
                img = np.clip(img.astype(np.float32) + np_rng.normal(0, self.noise, img.shape), 0, 255).astype(np.uint8)
            yield RawFrame(i, t, img, {"kp": format_kp(kp), "move": move}, keyframe=True)
