"""The dance app's pose regressor: a small CNN trained by the project on stick-figure dancers in
random poses (rendered like ``synthetic://dance``), regressing the 13 keypoints from a square crop
around the figure. Trained on first use (about 2 minutes on two cores), cached under
``<data_dir>/models`` with its held-out error (:mod:`vidnexus.training.fit`); ``figure_crop`` is the
CPU step that finds the figure. The executors know it as ``dance_pose`` (:data:`DANCE_POSE`).

Example:
    >>> import numpy as np
    >>> img = np.zeros((180, 320, 3), np.uint8); img[40:160, 100:140] = 255
    >>> x, (x0, y0, side) = figure_crop(img)
    >>> x.shape, x.dtype, side > 120, crop_input(x).shape
    ((64, 64, 3), dtype('uint8'), True, (3, 64, 64))
"""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from vidnexus.apps.dance.render import HEIGHT, KEYPOINTS, WIDTH, draw_dancer, pose_keypoints, random_angles, stage
from vidnexus.gpu_executor.catalog import ModelEntry
from vidnexus.gpu_executor.preprocess import ImageInput
from vidnexus.training.fit import WeightsCache, fit_minibatches
from vidnexus.training.fit import load_or_train as _load_or_train

__all__ = ["figure_crop", "crop_input", "render_examples", "build", "load_or_train", "dance_pose", "CROP", "DANCE_POSE", "MODELS"]

CROP = 64
crop_input = ImageInput((3, CROP, CROP), "bgr")
"""A figure crop (uint8 BGR) → the regressor's 3×64×64 float32 input (``DANCE_POSE.prepare``)."""
VERSION = "dance-pose-v2"


def figure_crop(img: np.ndarray, threshold: int = 130) -> tuple[np.ndarray, tuple[float, float, float]]:
    """The square crop around the bright figure (64×64 uint8 BGR: the executor makes the model's
    input with :data:`crop_input`) and its (x0, y0, side) in the frame. A frame without a figure
    gives the whole-frame crop."""
    import cv2

    mask = np.maximum(np.maximum(img[..., 0], img[..., 1]), img[..., 2]) > threshold  # img.max(axis=2), 15x faster
    ys, xs = np.nonzero(mask)
    if len(xs) < 20:
        x1, y1, x2, y2 = 0.0, 0.0, float(img.shape[1]), float(img.shape[0])
    else:
        x1, x2, y1, y2 = float(xs.min()), float(xs.max() + 1), float(ys.min()), float(ys.max() + 1)
    side = max(x2 - x1, y2 - y1) * 1.15 + 4
    cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
    x0, y0 = cx - side / 2, cy - side / 2
    m = np.array([[CROP / side, 0, -x0 * CROP / side], [0, CROP / side, -y0 * CROP / side]], np.float32)
    crop = cv2.warpAffine(img, m, (CROP, CROP), flags=cv2.INTER_AREA, borderValue=(0, 0, 0))
    return crop, (x0, y0, side)


def render_examples(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` (crop, keypoints in crop units) pairs of random poses, sizes, places and stages."""
    rng = random.Random(seed)
    np_rng = np.random.default_rng(seed)
    xs = np.empty((n, 3, CROP, CROP), np.float32)
    ys = np.empty((n, len(KEYPOINTS) * 2), np.float32)
    for i in range(n):
        img = stage(rng)
        height = rng.uniform(100, 150)
        kp = pose_keypoints(random_angles(np_rng), rng.uniform(90, WIDTH - 90), HEIGHT - rng.uniform(6, 16), height)
        draw_dancer(img, kp, height)
        noise = np_rng.normal(0, rng.uniform(1, 6), img.shape)  # float64, in place below (as fast as it goes)
        noise += img
        img = np.clip(noise, 0, 255, out=noise).astype(np.uint8)
        crop, (x0, y0, side) = figure_crop(img)
        xs[i] = crop_input(crop)
        ys[i] = ((kp - [x0, y0]) / side).reshape(-1)
    return xs, ys


def build() -> Any:
    from torch import nn

    def block(i: int, o: int) -> list[Any]:
        return [nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU(), nn.MaxPool2d(2)]

    return nn.Sequential(*block(3, 16), *block(16, 32), *block(32, 64), *block(64, 64), nn.Flatten(),
                         nn.Linear(64 * 4 * 4, 256), nn.ReLU(), nn.Linear(256, len(KEYPOINTS) * 2))


def train() -> tuple[Any, dict[str, Any]]:
    """Train the regressor on rendered dancers; the model and a report with its held-out error
    (mean keypoint distance, in crop units)."""
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)  # before build(): its initial weights are drawn too
    model = build()
    with ThreadPoolExecutor(1) as pool:  # numpy and OpenCV release the GIL: the held-out set renders alongside
        heldout = pool.submit(render_examples, 1_000, seed=2)
        xs, ys = render_examples(6_000, seed=1)
        vx, vy = heldout.result()
    epochs, bs = 8, 64
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=2e-3, total_steps=epochs * ((len(xs) + bs - 1) // bs))
    fit_minibatches(model, torch.from_numpy(xs), torch.from_numpy(ys), lambda p, t: F.smooth_l1_loss(p, t, beta=0.02),
                    opt, epochs=epochs, batch_size=bs, scheduler=sched)
    with torch.inference_mode():
        pred = model(torch.from_numpy(vx)).numpy()
    err = np.linalg.norm((pred - vy).reshape(len(vy), -1, 2), axis=2).mean()
    report = {"keypoints": len(KEYPOINTS), "train_examples": len(xs), "heldout_examples": len(vx),
              "heldout_mean_error_crop": round(float(err), 4)}
    return model, report


def load_or_train(model_dir: Path) -> tuple[Any, dict[str, Any]]:
    """The cached regressor and its report, or a freshly trained one (saved)."""
    return _load_or_train(WeightsCache.single(model_dir, VERSION), build, train)


def dance_pose(model_dir: Path) -> Any:
    """The catalogue entry's build: the trained regressor (trained on first use)."""
    return load_or_train(model_dir)[0]


DANCE_POSE = ModelEntry(
    "dance_pose", dance_pose, (3, CROP, CROP), "embed",
    "pose regressor trained by the project on stick-figure dancers (13 keypoints; trained on first use, about 2 min)",
    crop_input,
    weights="trained by the project on first use on rendered stick-figure dancers; recognises those, not real "
            "people (its held-out error on rendered figures is in its training report)",
)

MODELS: tuple[ModelEntry, ...] = (DANCE_POSE,)
"""The models this app declares (see :func:`vidnexus.apps.model_catalog`)."""
