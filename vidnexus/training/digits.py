"""The HUD digit reader: LeNet-5 trained on digit cells rendered like ``synthetic://hud`` frames.

Trained on first use in about ten seconds on two CPU cores and cached under the data directory
(:mod:`vidnexus.training.fit`). Held-out accuracy is measured on cells rendered with seeds the
training never saw. The architecture is the zoo's :func:`~vidnexus.gpu_executor.zoo.lenet5`; the
``hud_digits`` catalogue entry that serves it is the HUD app's (:mod:`vidnexus.apps.hud.models`).

Example (slow: trains the model)::

    model, report = load_or_train(Path(".vnx/data/models"))
    print(report["heldout_accuracy"])
"""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any

import numpy as np

from vidnexus.gpu_executor.zoo import lenet5
from vidnexus.streams.synthetic import CELL_H, CELL_W, FONTS, render_digit_cell
from vidnexus.training.fit import WeightsCache, fit_minibatches
from vidnexus.training.fit import load_or_train as _load_or_train

__all__ = ["render_cells", "cell_to_input", "train", "load_or_train", "evaluate", "WEIGHTS_NAME"]

logger = logging.getLogger(__name__)
WEIGHTS_NAME = "digits-lenet5-v1.pt"


def cell_to_input(cell_bgr: Any) -> np.ndarray:
    """A digit cell crop (uint8 BGR or gray) → the model's 1×28×28 float32 input, contrast-normalized
    (the ``hud_digits`` model's ``prepare``: the executor runs it on each cell a worker sends)."""
    import cv2

    g = cv2.cvtColor(cell_bgr, cv2.COLOR_BGR2GRAY) if cell_bgr.ndim == 3 else cell_bgr
    g = cv2.resize(g, (28, 28), interpolation=cv2.INTER_AREA).astype(np.float32)
    g -= g.min()
    m = g.max()
    if m > 0:
        g /= m
    if g.mean() > 0.5:  # dark digits on a light background: invert, so ink is always bright
        g = 1.0 - g
    x: np.ndarray = g[None, :, :]
    return x


def render_cells(n: int, seed: int, noise: float = 6.0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` labelled digit cells rendered with the HUD's fonts, colours, jitter and noise."""
    rng = random.Random(seed)
    np_rng = np.random.default_rng(seed)
    xs = np.empty((n, 1, 28, 28), np.float32)
    ys = np.empty(n, np.int64)
    canvas = np.zeros((CELL_H + 8, CELL_W + 8, 3), np.uint8)
    for i in range(n):
        d = rng.randrange(10)
        fg = (rng.randint(160, 255), rng.randint(160, 255), rng.randint(120, 255))
        bg = (rng.randint(0, 70), rng.randint(0, 70), rng.randint(0, 70))
        if rng.random() < 0.2:
            fg, bg = bg, fg
        canvas[:] = bg
        render_digit_cell(canvas, d, 4, 4, font=rng.choice(FONTS), fg=fg, bg=bg, rng=rng)
        img = canvas.astype(np.float32) + np_rng.normal(0, noise * rng.uniform(0.3, 1.7), canvas.shape)
        img = np.clip(img, 0, 255).astype(np.uint8)
        # Crop with the same ±1 px misalignment a HUD crop can have.
        ox, oy = 4 + rng.randint(-1, 1), 4 + rng.randint(-1, 1)
        xs[i] = cell_to_input(img[oy : oy + CELL_H, ox : ox + CELL_W])
        ys[i] = d
    return xs, ys


def _renderer() -> str:
    import cv2

    return f"opencv-{cv2.__version__}"


def train(n_train: int = 12_000, epochs: int = 4, seed: int = 0) -> tuple[Any, dict[str, Any]]:
    """Train LeNet-5 on rendered cells; returns the model and a report with held-out accuracy
    (:func:`load_or_train` adds the training time)."""
    import torch
    import torch.nn.functional as F

    torch.manual_seed(seed)
    xs, ys = render_cells(n_train, seed=seed)
    x, y = torch.from_numpy(xs), torch.from_numpy(ys)
    model = lenet5()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=4e-3, total_steps=epochs * ((n_train + 127) // 128))
    fit_minibatches(model, x, y, F.cross_entropy, opt, epochs=epochs, batch_size=128, scheduler=sched)
    acc = evaluate(model, seed=10_000 + seed)
    report = {"train_examples": n_train, "epochs": epochs,
              "heldout_accuracy": acc, "heldout_examples": 4000, "renderer": _renderer()}
    return model, report


def evaluate(model: Any, seed: int, n: int = 4000) -> float:
    """Accuracy on ``n`` freshly rendered cells (a seed disjoint from training)."""
    import torch

    xs, ys = render_cells(n, seed=seed)
    with torch.inference_mode():
        pred = model(torch.from_numpy(xs)).argmax(1).numpy()
    return float((pred == ys).mean())


def load_or_train(model_dir: Path, min_accuracy: float = 0.99) -> tuple[Any, dict[str, Any]]:
    """The cached digit reader, or a freshly trained one (saved with its report)."""

    def train_checked() -> tuple[Any, dict[str, Any]]:
        model, report = train()
        if report["heldout_accuracy"] < min_accuracy:
            logger.warning("digit reader reached only %.4f held-out accuracy", report["heldout_accuracy"])
        return model, report

    cache = WeightsCache.single(model_dir, WEIGHTS_NAME.removesuffix(".pt"), report_name=WEIGHTS_NAME + ".json")
    # Cells are rendered with OpenCV's fonts, which change between OpenCV versions: weights trained
    # under another renderer are retrained rather than trusted.
    return _load_or_train(cache, lenet5, train_checked, accept=lambda r: r.get("renderer") == _renderer())
