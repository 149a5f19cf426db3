"""The traffic app's car colour recognizer: a small CNN trained by the project on car crops rendered
like ``synthetic://traffic`` cars (random colour shade, length, direction, position in the crop,
background, lighting, blur and noise) and on the real cars of ``car-detection.mp4``, labelled by
hand (:func:`real_crops`; crops of even seconds train, odd seconds are held out). Trained on first use in seconds; cached under
``<data_dir>/models`` with its held-out accuracy (:mod:`vidnexus.training.fit`). The executors know it
as ``car_colours`` (:data:`CAR_COLOURS`)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np

from vidnexus.apps.traffic.render import COLOURS, background, draw_car
from vidnexus.gpu_executor.catalog import ModelEntry
from vidnexus.gpu_executor.preprocess import ImageInput
from vidnexus.training.fit import WeightsCache, fit_minibatches
from vidnexus.training.fit import load_or_train as _load_or_train

__all__ = ["COLOUR_NAMES", "crop_input", "render_crops", "build", "load_or_train", "car_colours", "CAR_COLOURS",
           "MODELS"]

COLOUR_NAMES = tuple(COLOURS)
VERSION = "car-colours-v3"
SIZE = 32


crop_input = ImageInput((3, SIZE, SIZE), "bgr")
"""A car crop (uint8 BGR, any size) → the model's 3×32×32 float32 input: what the executor runs on
its CPU pool for each crop a worker sends (``CAR_COLOURS.prepare``), and what training runs."""


def render_crops(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    import cv2

    rng = random.Random(seed)
    np_rng = np.random.default_rng(seed)
    bgs = [background(random.Random(k)) for k in range(8)]
    xs = np.empty((n, 3, SIZE, SIZE), np.float32)
    ys = np.empty(n, np.int64)
    for i in range(n):
        c = rng.randrange(len(COLOUR_NAMES))
        img = bgs[rng.randrange(len(bgs))].copy()
        length = rng.randint(52, 72)
        cx, cy = rng.uniform(100, 220), rng.choice((68, 122))
        draw_car(img, cx, cy, length, COLOURS[COLOUR_NAMES[c]], rng.choice((1, -1)), rng.uniform(0.75, 1.15))
        pad = rng.uniform(0, 8)
        x1, x2 = int(cx - length / 2 - pad + rng.uniform(-6, 6)), int(cx + length / 2 + pad + rng.uniform(-6, 6))
        y1, y2 = int(cy - 14 - pad + rng.uniform(-4, 4)), int(cy + 14 + pad + rng.uniform(-4, 4))
        crop: np.ndarray = img[max(0, y1) : y2, max(0, x1) : x2].astype(np.float32)
        crop = crop * rng.uniform(0.8, 1.2) + rng.uniform(-15, 15)
        if rng.random() < 0.3:
            crop = cv2.GaussianBlur(crop, (3, 3), 0.8)
        crop += np_rng.normal(0, rng.uniform(2, 10), crop.shape)
        xs[i] = crop_input(np.clip(crop, 0, 255).astype(np.uint8))
        ys[i] = c
    return xs, ys


REAL_VIDEO = "car-detection.mp4"
LABELS_FILE = "tests/data/hand_counts.json"
REAL_FPS = 5.0


def real_crops(fps: float = REAL_FPS) -> list[tuple[float, np.ndarray, int, str]]:
    """Crops of the real cars in ``car-detection.mp4``, labelled by hand: ``(pts, crop, colour
    index, car)`` for every sighting of a moving car the traffic app's tracker makes at ``fps``
    sampled frames per second (the app's own motion tracking), labelled with the hand label
    (``tests/data/hand_counts.json``, ``colours``) whose time span it overlaps most among those
    moving the same way up or down the image. Empty when the video or the labels are not beside
    the checkout."""
    import json

    import cv2

    from vidnexus.apps.spec import beside_checkout, real_video
    from vidnexus.operators.cv import MotionCounter
    from vidnexus.operators.tracking import moving_tracks

    video, labels_path = real_video(REAL_VIDEO), beside_checkout(LABELS_FILE)
    if video is None or labels_path is None:
        return []
    labels = json.loads(labels_path.read_text())[REAL_VIDEO]["colours"]["cars"]
    cap = cv2.VideoCapture(str(video))
    src_fps = cap.get(cv2.CAP_PROP_FPS) or 25.0
    counter = MotionCounter(max_center_distance=40)
    seen: dict[int, list[tuple[float, np.ndarray]]] = {}
    tracks: dict[int, Any] = {}
    i, next_t = 0, 0.0
    try:
        while True:
            ok, img = cap.read()
            if not ok:
                break
            pts = i / src_fps
            i += 1
            if pts + 1e-6 < next_t:
                continue
            next_t += 1.0 / fps
            for t, (x1, y1, x2, y2) in counter.frame_tracks(img):
                if x2 - x1 >= 4 and y2 - y1 >= 4:
                    seen.setdefault(t.track_id, []).append((pts, img[y1:y2, x1:x2].copy()))
                    tracks[t.track_id] = t
    finally:
        cap.release()
    out = []
    for t in moving_tracks(list(tracks.values()), counter.min_hits, counter.min_displacement):
        shots = seen[t.track_id]
        a, z = shots[0][0], shots[-1][0]
        moving = "down" if t.history[-1][1].center[1] > t.history[0][1].center[1] else "up"
        overlap = [(min(z, lab["to"]) - max(a, lab["from"]), lab) for lab in labels if lab["moving"] == moving]
        best = max(overlap, key=lambda o: o[0], default=None)
        if best is None or best[0] <= 0:
            continue
        lab = best[1]
        out += [(pts, crop, COLOUR_NAMES.index(lab["colour"]), lab["car"]) for pts, crop in shots
                if lab["from"] - 0.5 <= pts <= lab["to"] + 0.5]
    return out


def build() -> Any:
    from torch import nn

    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten(),
        nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, len(COLOUR_NAMES)),
    )


def augment(crop: np.ndarray, rng: random.Random, np_rng: np.random.Generator) -> np.ndarray:
    """A real crop as another frame could show it: the box a little off, flipped (cars drive both
    ways), the exposure and contrast changed (the camera's auto-exposure), blur and noise."""
    import cv2

    h, w = crop.shape[:2]
    dx1, dx2 = (int(rng.uniform(-0.08, 0.08) * w) for _ in range(2))
    dy1, dy2 = (int(rng.uniform(-0.08, 0.08) * h) for _ in range(2))
    c = crop[max(0, dy1):h - max(0, dy2) or h, max(0, dx1):w - max(0, dx2) or w]
    if rng.random() < 0.5:
        c = c[:, ::-1]
    if rng.random() < 0.5:
        c = c[::-1]
    out: Any = c.astype(np.float32) * rng.uniform(0.85, 1.15) + rng.uniform(-12, 12)
    if rng.random() < 0.3:
        out = cv2.GaussianBlur(out, (3, 3), 0.8)
    out += np_rng.normal(0, rng.uniform(1, 6), out.shape)
    result: np.ndarray = np.clip(out, 0, 255).astype(np.uint8)
    return result


def split_real(crops: list[tuple[float, np.ndarray, int, str]]) -> tuple[list[Any], list[Any]]:
    """Real crops for training (sampled in an even second of the video) and held out (an odd one):
    every car is in both, no frame in both."""
    train = [c for c in crops if int(c[0]) % 2 == 0]
    return train, [c for c in crops if int(c[0]) % 2 == 1]


REAL_COPIES = 25
"""Augmented copies of each real training crop (about 900 beside the 3,000 rendered ones)."""


def train() -> tuple[Any, dict[str, Any]]:
    """Train the recognizer on rendered crops and on the hand-labelled real crops of even seconds
    of ``car-detection.mp4`` (augmented); the model and a report with its accuracy on held-out
    rendered crops and on the real crops of odd seconds (per car)."""
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)  # before build(): its initial weights are drawn too
    model = build()
    xs, ys = render_crops(3000, seed=1)
    vx, vy = render_crops(600, seed=2)
    real_train, real_test = split_real(real_crops())
    rng, np_rng = random.Random(3), np.random.default_rng(3)
    if real_train:
        rx = np.stack([crop_input(augment(c, rng, np_rng)) for _, c, _, _ in real_train for _ in range(REAL_COPIES)])
        ry = np.array([y for _, _, y, _ in real_train for _ in range(REAL_COPIES)], np.int64)
        xs, ys = np.concatenate([xs, rx]), np.concatenate([ys, ry])
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    fit_minibatches(model, torch.from_numpy(xs), torch.from_numpy(ys), F.cross_entropy, opt, epochs=10 if real_train else 6, batch_size=64)
    with torch.inference_mode():
        acc = float((model(torch.from_numpy(vx)).argmax(1).numpy() == vy).mean())
        per_car: dict[str, list[int]] = {}
        for _, c, y, car in real_test:
            got = int(model(torch.from_numpy(crop_input(c))[None]).argmax(1)[0])
            per_car.setdefault(car, []).append(int(got == y))
    report: dict[str, Any] = {"classes": list(COLOUR_NAMES), "train_examples": len(xs), "heldout_examples": len(vx),
                              "heldout_accuracy": round(acc, 4), "real_video": REAL_VIDEO,
                              "real_train_crops": len(real_train), "real_copies": REAL_COPIES,
                              "real_heldout_crops": len(real_test)}
    if real_test:
        report["real_heldout_accuracy"] = round(sum(sum(v) for v in per_car.values()) / len(real_test), 4)
        report["real_heldout_per_car"] = {car: round(sum(v) / len(v), 3) for car, v in per_car.items()}
    return model, report


def load_or_train(model_dir: Path) -> tuple[Any, dict[str, Any]]:
    """The cached recognizer and its report, or a freshly trained one (saved)."""
    return _load_or_train(WeightsCache.single(model_dir, VERSION), build, train)


def car_colours(model_dir: Path) -> Any:
    """The catalogue entry's build: the trained recognizer (trained on first use)."""
    return load_or_train(model_dir)[0]


CAR_COLOURS = ModelEntry(
    "car_colours", car_colours, (3, SIZE, SIZE), "classify",
    "car colour recognizer, 6 colours (trained on first use, ~12 s)",
    crop_input,
    weights="trained by the project on first use on rendered cars and the hand-labelled real cars of "
            "car-detection.mp4 (held-out: ~99% of rendered crops, 35 of 36 real crops of other frames of "
            "the same 4 cars; its training report)",
)

MODELS: tuple[ModelEntry, ...] = (CAR_COLOURS,)
"""The models this app declares (see :func:`vidnexus.apps.model_catalog`)."""
