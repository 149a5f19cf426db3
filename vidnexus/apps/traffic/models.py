"""The traffic app's car colour recognizer: a small CNN trained by the project on car crops rendered
like ``synthetic://traffic`` cars (random colour shade, length, direction, position in the crop,
background, lighting, blur and noise). Trained on first use in seconds; cached under
``<data_dir>/models`` with its held-out accuracy."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

import numpy as np

from vidnexus.apps.traffic.render import COLOURS, background, draw_car

__all__ = ["COLOUR_NAMES", "crop_input", "render_crops", "build", "load_or_train", "car_colours"]

COLOUR_NAMES = tuple(COLOURS)
VERSION = "car-colours-v2"
SIZE = 32


def crop_input(crop_bgr: Any) -> np.ndarray:
    """A car crop (BGR, any size) → the model's 3×32×32 float32 input."""
    import cv2

    x = cv2.resize(crop_bgr, (SIZE, SIZE), interpolation=cv2.INTER_AREA).astype(np.float32) / 255.0
    return np.ascontiguousarray(x.transpose(2, 0, 1))


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
        crop = img[max(0, y1) : y2, max(0, x1) : x2].astype(np.float32)
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


def load_or_train(model_dir: Path) -> tuple[Any, dict[str, Any]]:
    import torch
    import torch.nn.functional as F

    path, meta = model_dir / f"{VERSION}.pt", model_dir / f"{VERSION}.json"
    model = build()
    if path.exists() and meta.exists():
        model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
        return model.eval(), json.loads(meta.read_text())
    t0 = time.perf_counter()
    xs, ys = render_crops(3000, seed=1)
    vx, vy = render_crops(600, seed=2)
    torch.manual_seed(0)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    x, y = torch.from_numpy(xs), torch.from_numpy(ys)
    model.train()
    for _ in range(6):
        perm = torch.randperm(len(x))
        for k in range(0, len(x), 64):
            idx = perm[k : k + 64]
            opt.zero_grad()
            F.cross_entropy(model(x[idx]), y[idx]).backward()
            opt.step()
    model.eval()
    with torch.inference_mode():
        acc = float((model(torch.from_numpy(vx)).argmax(1).numpy() == vy).mean())
    report = {"classes": list(COLOUR_NAMES), "train_examples": len(xs), "heldout_examples": len(vx),
              "heldout_accuracy": round(acc, 4), "train_seconds": round(time.perf_counter() - t0, 1)}
    model_dir.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), path)
    meta.write_text(json.dumps(report, indent=2))
    return model, report


def car_colours() -> Any:
    """The zoo factory: the trained recognizer (trained on first use)."""
    from vidnexus.config import load_settings

    return load_or_train(load_settings().data_dir / "models")[0]
