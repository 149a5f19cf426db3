"""The traffic app's car colour recognizer: a small CNN trained by the project on car crops rendered
like ``synthetic://traffic`` cars (random colour shade, length, direction, position in the crop,
background, lighting, blur and noise). Trained on first use in seconds; cached under
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
VERSION = "car-colours-v2"
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


def build() -> Any:
    from torch import nn

    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten(),
        nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, len(COLOUR_NAMES)),
    )


def train() -> tuple[Any, dict[str, Any]]:
    """Train the recognizer on rendered crops; the model and a report with held-out accuracy."""
    import torch
    import torch.nn.functional as F

    model = build()
    xs, ys = render_crops(3000, seed=1)
    vx, vy = render_crops(600, seed=2)
    torch.manual_seed(0)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    fit_minibatches(model, torch.from_numpy(xs), torch.from_numpy(ys), F.cross_entropy, opt, epochs=6, batch_size=64)
    with torch.inference_mode():
        acc = float((model(torch.from_numpy(vx)).argmax(1).numpy() == vy).mean())
    report = {"classes": list(COLOUR_NAMES), "train_examples": len(xs), "heldout_examples": len(vx),
              "heldout_accuracy": round(acc, 4)}
    return model, report


def load_or_train(model_dir: Path) -> tuple[Any, dict[str, Any]]:
    """The cached recognizer and its report, or a freshly trained one (saved)."""
    return _load_or_train(WeightsCache.single(model_dir, VERSION), build, train)


def car_colours(model_dir: Path) -> Any:
    """The catalogue entry's build: the trained recognizer (trained on first use)."""
    return load_or_train(model_dir)[0]


CAR_COLOURS = ModelEntry(
    "car_colours", car_colours, (3, SIZE, SIZE), "classify",
    "car colour recognizer trained by the project on rendered cars (6 colours; trained on first use, ~15 s)",
    crop_input,
    weights="trained by the project on first use on rendered cars, 6 colours (held-out accuracy ~97% on 600 "
            "rendered crops, its training report); on real cars it is weaker",
)

MODELS: tuple[ModelEntry, ...] = (CAR_COLOURS,)
"""The models this app declares (see :func:`vidnexus.apps.model_catalog`)."""
