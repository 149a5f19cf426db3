"""A many-class classification task the project owns end to end, for specialization (WEG).

**Data**: 120 classes of rendered 32×32 icons. Each class is a seeded composition of 2–4 coloured
primitives (discs, rings, boxes, triangles, bars, crosses) on a coloured background; every sample
is drawn with random rotation (±25°), scale (0.8–1.2), shift (±3 px), lighting (brightness,
contrast, per-channel gain), blur, an occluding patch and pixel noise. Classes that share
primitives and colours make it hard: the oracle beats the compact models clearly.

**Models** (trained by the project, cached under ``<data_dir>/models/``, :mod:`vidnexus.training.fit`):

- ``oracle``: a 6-conv CNN (32-64-128 channels, BatchNorm) — the accurate, expensive model;
- ``compact_a``: 2 strided convs (6-12 channels) + a 48-unit layer;
- ``compact_b``: 3 strided convs (16-32-32 channels) + a 96-unit layer.

Compact models expose ``features(x)`` (the input of their last layer), so specialization retrains
only the last layer on cached features (:mod:`vidnexus.specialization.training`).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from vidnexus.training.fit import WeightsCache, fit_minibatches, load_or_train_parts

__all__ = ["N_CLASSES", "render_dataset", "render_icon", "GlyphModels", "load_or_train", "build_model", "ARCHS"]

logger = logging.getLogger(__name__)

N_CLASSES = 120
SIZE = 32
_VERSION = "glyphs-v1"


_PALETTE = [(40, 40, 40), (200, 200, 200), (40, 40, 200), (40, 200, 40), (200, 60, 40), (40, 200, 220)]


VARIANTS = 4
"""Classes come in families of 4 that share their shapes and differ in one small mark: the fine
detail a large model resolves and a compact one, which downsamples early, mostly does not."""


def _class_spec(c: int) -> dict[str, Any]:
    # Colours come from a small palette shared by all classes: a class is its arrangement of shapes.
    family, variant = divmod(c, VARIANTS)
    rng = np.random.default_rng(10_000 + family)
    bg = _PALETTE[int(rng.integers(0, len(_PALETTE)))]
    prims = []
    for _ in range(int(rng.integers(2, 5))):
        prims.append({
            "kind": str(rng.choice(["disc", "ring", "box", "tri", "bar", "cross"])),
            "x": float(rng.uniform(8, 24)), "y": float(rng.uniform(8, 24)),
            "r": float(rng.uniform(3, 9)), "angle": float(rng.uniform(0, 180)),
            "color": _PALETTE[int(rng.integers(0, len(_PALETTE)))],
        })
    mark_color = next(col for col in _PALETTE[::-1] if col != bg)
    mx, my = [(6, 6), (26, 6), (6, 26), (26, 26)][variant]
    prims.append({"kind": "box", "x": float(mx), "y": float(my), "r": 2.6, "angle": 45.0, "color": mark_color})
    return {"bg": bg, "prims": prims}


_SPECS = [_class_spec(c) for c in range(N_CLASSES)]


def _draw(spec: dict[str, Any], scale: int = 4) -> np.ndarray:
    """The class prototype at 4× resolution (anti-aliased after the downscale)."""
    s = SIZE * scale
    img = np.zeros((s, s, 3), np.uint8)
    img[:] = spec["bg"]
    for p in spec["prims"]:
        x, y, r = p["x"] * scale, p["y"] * scale, p["r"] * scale
        col = tuple(int(v) for v in p["color"])
        k, a = p["kind"], math.radians(p["angle"])
        if k == "disc":
            cv2.circle(img, (int(x), int(y)), int(r), col, -1, cv2.LINE_AA)
        elif k == "ring":
            cv2.circle(img, (int(x), int(y)), int(r), col, max(2, int(r / 3)), cv2.LINE_AA)
        elif k in ("box", "tri"):
            n = 4 if k == "box" else 3
            pts = np.array([[x + r * math.cos(a + 2 * math.pi * i / n), y + r * math.sin(a + 2 * math.pi * i / n)]
                            for i in range(n)], np.int32)
            cv2.fillPoly(img, [pts], col, cv2.LINE_AA)
        else:
            for da in ((0.0,) if k == "bar" else (0.0, math.pi / 2)):
                dx, dy = r * math.cos(a + da), r * math.sin(a + da)
                cv2.line(img, (int(x - dx), int(y - dy)), (int(x + dx), int(y + dy)), col,
                         max(3, int(r / 2.5)), cv2.LINE_AA)
    return img


_PROTOS = [_draw(s) for s in _SPECS]


def _sample(c: int, rng: np.random.Generator) -> np.ndarray:
    proto = _PROTOS[c]
    s = proto.shape[0]
    m = cv2.getRotationMatrix2D((s / 2, s / 2), float(rng.uniform(-25, 25)), float(rng.uniform(0.8, 1.2)))
    m[:, 2] += rng.uniform(-3, 3, 2) * (s / SIZE)
    img = cv2.warpAffine(proto, m, (s, s), borderMode=cv2.BORDER_REFLECT)
    img = cv2.resize(img, (SIZE, SIZE), interpolation=cv2.INTER_AREA).astype(np.float32)
    img = img * rng.uniform(0.6, 1.3) * rng.uniform(0.8, 1.2, 3) + rng.uniform(-40, 40)
    if rng.random() < 0.3:
        img = cv2.GaussianBlur(img, (3, 3), float(rng.uniform(0.5, 1.2)))
    if rng.random() < 0.5:
        x, y = rng.integers(0, SIZE - 8, 2)
        w, h = rng.integers(4, 11, 2)
        img[y : y + h, x : x + w] = rng.uniform(0, 255, 3)
    img += rng.normal(0, rng.uniform(5, 20), img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def render_icon(c: int, rng: np.random.Generator) -> np.ndarray:
    """One 32×32 BGR sample of class ``c`` (random pose, lighting, blur, occlusion and noise)."""
    if not 0 <= c < N_CLASSES:
        raise ValueError(f"glyph class {c} is outside 0..{N_CLASSES - 1}")
    return _sample(c, rng)


def render_dataset(per_class: int, seed: int, classes: int | Any = N_CLASSES) -> tuple[np.ndarray, np.ndarray]:
    """(images as float32 N×3×32×32 in [0, 1], labels) with ``per_class`` samples of each class
    (``classes``: the first that many classes, or a sequence of class ids)."""
    rng = np.random.default_rng(seed)
    ids = np.arange(classes) if isinstance(classes, int) else np.asarray(classes, np.int64)
    xs = np.empty((len(ids) * per_class, 3, SIZE, SIZE), np.float32)
    ys = np.repeat(ids, per_class)
    for i, c in enumerate(ys):
        xs[i] = _sample(int(c), rng).transpose(2, 0, 1) / 255.0
    return xs, ys.astype(np.int64)


ARCHS = ("oracle", "compact_a", "compact_b")


def build_model(arch: str) -> Any:
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self, body: nn.Module, dim: int) -> None:
            super().__init__()
            self.body, self.head = body, nn.Linear(dim, N_CLASSES)

        def features(self, x: torch.Tensor) -> torch.Tensor:
            f: torch.Tensor = self.body(x)
            return f

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y: torch.Tensor = self.head(self.body(x))
            return y

    def block(i: int, o: int, stride: int = 1, bn: bool = True) -> list[nn.Module]:
        layers: list[nn.Module] = [nn.Conv2d(i, o, 3, stride, 1, bias=not bn)]
        if bn:
            layers.append(nn.BatchNorm2d(o))
        return layers + [nn.ReLU(inplace=True)]

    if arch == "oracle":
        body = nn.Sequential(*block(3, 32), *block(32, 32), nn.MaxPool2d(2), *block(32, 64), *block(64, 64),
                             nn.MaxPool2d(2), *block(64, 128), *block(128, 128), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(128 * 4 * 4, 256), nn.ReLU(inplace=True))
        return Net(body, 256)
    if arch == "compact_a":
        body = nn.Sequential(*block(3, 6, 2, False), *block(6, 12, 2, False), nn.MaxPool2d(2), nn.Flatten(),
                             nn.Linear(12 * 4 * 4, 48), nn.ReLU(inplace=True))
        return Net(body, 48)
    if arch == "compact_b":
        body = nn.Sequential(*block(3, 16, 2, False), *block(16, 32, 2, False), *block(32, 32, 2, False),
                             nn.Flatten(), nn.Linear(32 * 4 * 4, 96), nn.ReLU(inplace=True))
        return Net(body, 96)
    raise ValueError(f"unknown architecture {arch!r}; choose one of {ARCHS}")


def _train(model: Any, xs: np.ndarray, ys: np.ndarray, epochs: int, lr: float, seed: int) -> float:
    import torch
    import torch.nn.functional as F

    torch.manual_seed(seed)
    torch.set_flush_denormal(True)  # denormal weights make CPU convolutions 100× slower
    x, y = torch.from_numpy(xs), torch.from_numpy(ys)
    bs = 128
    steps = epochs * ((len(x) + bs - 1) // bs)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps)
    t0 = time.perf_counter()
    fit_minibatches(model, x, y, F.cross_entropy, opt, epochs=epochs, batch_size=bs, scheduler=sched)
    return time.perf_counter() - t0


def predict(model: Any, xs: np.ndarray, batch: int = 512) -> np.ndarray:
    import torch

    out = []
    with torch.inference_mode():
        for k in range(0, len(xs), batch):
            out.append(model(torch.from_numpy(xs[k : k + batch])).argmax(1).numpy())
    return np.concatenate(out)


def features(model: Any, xs: np.ndarray, batch: int = 512) -> np.ndarray:
    import torch

    out = []
    with torch.inference_mode():
        for k in range(0, len(xs), batch):
            out.append(model.features(torch.from_numpy(xs[k : k + batch])).numpy())
    return np.concatenate(out)


def cost_per_input_ms(model: Any, batch: int, repeats: int = 30) -> float:
    """Median wall time per input of a batch of ``batch`` inputs (one thread)."""
    import torch

    torch.set_flush_denormal(True)
    x = torch.rand(batch, 3, SIZE, SIZE)
    times = []
    with torch.inference_mode():
        for _ in range(3):
            model(x)
        for _ in range(repeats):
            t0 = time.perf_counter()
            model(x)
            times.append(time.perf_counter() - t0)
    return float(np.median(times)) * 1000 / batch


@dataclass
class GlyphModels:
    models: dict[str, Any]
    report: dict[str, Any]


_RECIPE = {"oracle": (4, 3e-3), "compact_a": (6, 1e-2), "compact_b": (6, 6e-3)}
TRAIN_PER_CLASS, VAL_PER_CLASS = 150, 40


def load_or_train(model_dir: Path, *, quick: bool = False) -> GlyphModels:
    """The three models (trained once, cached with their report: accuracy, training time, cost)."""
    tag = f"{_VERSION}-opencv{cv2.__version__}" + ("-quick2" if quick else "")
    cache = WeightsCache(model_dir / f"{tag}.json", {a: model_dir / f"{tag}-{a}.pt" for a in ARCHS})
    models, report = load_or_train_parts(cache, build_model, lambda: _train_all(quick))
    return GlyphModels(models, report)


def _train_all(quick: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """Render the data once and train every architecture on it; the models and the report."""
    import torch

    per_class = TRAIN_PER_CLASS // 2 if quick else TRAIN_PER_CLASS
    t0 = time.perf_counter()
    xs, ys = render_dataset(per_class, seed=1)
    vx, vy = render_dataset(VAL_PER_CLASS, seed=2)
    render_s = time.perf_counter() - t0
    report: dict[str, Any] = {"classes": N_CLASSES, "train_per_class": per_class, "val_per_class": VAL_PER_CLASS,
                              "render_seconds": round(render_s, 1), "torch_threads": torch.get_num_threads(),
                              "models": {}}
    models = {}
    for a in ARCHS:
        epochs, lr = _RECIPE[a]
        if quick and a == "oracle":  # quick mode halves the oracle's epochs; the compacts train in seconds
            epochs = max(2, epochs // 2)
        m = build_model(a)
        secs = _train(m, xs, ys, epochs, lr, seed=3)
        acc = float((predict(m, vx) == vy).mean())
        report["models"][a] = {"val_accuracy": round(acc, 4), "train_seconds": round(secs, 1), "epochs": epochs,
                               "params": int(sum(p.numel() for p in m.parameters()))}
        logger.info("glyphs: %s trained in %.0f s, validation accuracy %.3f", a, secs, acc)
        models[a] = m
    return models, report
