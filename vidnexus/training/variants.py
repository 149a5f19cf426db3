"""The glyph task's variant catalog (MCDNN, dissertation ch. 4): the same 120-class icon task
served by models that trade accuracy for cost, each measured on a held-out set the project renders.

Variants (every one a real model trained by :mod:`vidnexus.training.glyphs`):

- ``oracle``: the 6-conv CNN, float32 — the most accurate and the most expensive;
- ``oracle_int8``: the same weights quantized to int8 (PyTorch's static post-training
  quantization for the x86 backend: convolutions and linear layers in int8, calibrated on training
  renders, never on the held-out set);
- ``compact_b`` and ``compact_a``: the compact architectures, float32.

Each variant's catalog row holds what it delivers and costs, measured once per machine (the
cache key has the CPU, the torch version and thread count): accuracy on the held-out set (seed
4, :data:`HELD_OUT_PER_CLASS` renders per class: rendered apart from the training and validation
sets), ℓ(b) at :data:`PROFILE_SIZES` on one thread, the bytes its saved weights take (its memory
while loaded) and the seconds loading it takes.
"""

from __future__ import annotations

import copy
import io
import json
import logging
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vidnexus.contracts.profile import Profile

__all__ = ["TASK", "VARIANTS", "MeasuredVariant", "variant_models", "load_or_measure", "held_out"]

logger = logging.getLogger(__name__)

TASK = "glyph120"
"""The task's name: the 120 glyph classes of :mod:`vidnexus.training.glyphs`."""
VARIANTS = ("oracle", "oracle_int8", "compact_b", "compact_a")
PROFILE_SIZES = (1, 4, 16, 32)
HELD_OUT_PER_CLASS = 20
CALIBRATION = 800
"""Training renders the int8 variant's activation ranges are calibrated on."""
_VERSION = "variants-v1"


@dataclass(frozen=True)
class MeasuredVariant:
    """One variant as measured: accuracy on the held-out set, ℓ(b) on one thread, memory, load time."""

    name: str
    task: str
    arch: str
    precision: str
    accuracy: float
    profile: Profile
    memory_bytes: int
    load_s: float

    def cost_s(self, batch: int = 16) -> float:
        """Device seconds per request at ``batch`` (ℓ(b)/b; within the profile)."""
        b = min(batch, self.profile.max_batch)
        return self.profile.latency(b) / b

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["profile"] = self.profile.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "MeasuredVariant":
        return cls(**{**d, "profile": Profile.from_dict(d["profile"])})


def held_out() -> tuple[np.ndarray, np.ndarray]:
    """The held-out set: renders of seed 4, apart from training (seed 1) and validation (seed 2)."""
    from vidnexus.training.glyphs import render_dataset

    return render_dataset(HELD_OUT_PER_CLASS, seed=4)


def _int8(model: Any, calibration: np.ndarray) -> Any:
    """``model`` quantized to int8 (static, FX graph mode, x86 backend), calibrated on ``calibration``."""
    import torch
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    torch.backends.quantized.engine = "x86"
    with warnings.catch_warnings():  # torch points these APIs to torchao; they work in the pinned torch
        warnings.simplefilter("ignore")
        prepared = prepare_fx(copy.deepcopy(model).eval(), get_default_qconfig_mapping("x86"),
                              (torch.from_numpy(calibration[:8]),))
        with torch.inference_mode():
            for k in range(0, len(calibration), 100):
                prepared(torch.from_numpy(calibration[k:k + 100]))
        return convert_fx(prepared)


def variant_models(model_dir: Path, quick: bool = True) -> dict[str, Any]:
    """Every variant's model (eval mode): the trained glyph models (trained and cached on first
    use, :func:`~vidnexus.training.glyphs.load_or_train`) and the int8 oracle built from them."""
    from vidnexus.training.glyphs import load_or_train, render_dataset

    g = load_or_train(model_dir, quick=quick)
    calib, _ = render_dataset(max(1, CALIBRATION // 120), seed=1)
    return {"oracle": g.models["oracle"].eval(), "oracle_int8": _int8(g.models["oracle"], calib),
            "compact_b": g.models["compact_b"].eval(), "compact_a": g.models["compact_a"].eval()}


def _weights(model: Any) -> tuple[int, float]:
    """(bytes of the saved weights, seconds to load them into a fresh copy): the variant's memory
    while loaded, and what switching to it costs."""
    import torch

    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    size = buf.tell()
    fresh = copy.deepcopy(model)
    t0 = time.perf_counter()
    buf.seek(0)
    with warnings.catch_warnings():  # a quantized state dict's packed weights use the old storage API
        warnings.simplefilter("ignore")
        fresh.load_state_dict(torch.load(buf, weights_only=False))
    return size, time.perf_counter() - t0


def _measure(models: dict[str, Any], xs: np.ndarray, ys: np.ndarray) -> list[MeasuredVariant]:
    import torch

    from vidnexus.gpu_executor.profiler import profile_runner, torch_threads
    from vidnexus.training.glyphs import predict

    with torch_threads(1):
        out = []
        for name in VARIANTS:
            m = models[name]
            acc = float((predict(m, xs) == ys).mean())

            def run(batch: list[Any], m: Any = m) -> Any:
                with torch.inference_mode():
                    return m(torch.from_numpy(np.stack(batch)))

            prof, _ = profile_runner(run, lambda: xs[0], list(PROFILE_SIZES), repeats=7, warmup=3)
            arch = "oracle" if name.startswith("oracle") else name
            size, load_s = _weights(m)
            out.append(MeasuredVariant(name, TASK, arch, "int8" if name.endswith("int8") else "float32",
                                       round(acc, 4), prof, size, round(load_s, 5)))
        return out


def _key(quick: bool) -> str:
    """What the catalog's figures depend on: the profile environment (CPU, torch) at one thread,
    OpenCV's version (it renders the held-out set) and this module's version."""
    import cv2

    from vidnexus.gpu_executor.profiler import profile_env

    return json.dumps({**profile_env("cpu"), "threads": 1, "version": _VERSION, "quick": quick,
                       "opencv": cv2.__version__}, sort_keys=True)


def load_or_measure(model_dir: Path, quick: bool = True) -> list[MeasuredVariant]:
    """The task's catalog, measured once per machine and cached in ``model_dir`` (the variants'
    models are trained first when they are not cached)."""
    path = model_dir / f"{_VERSION}-{TASK}{'-quick' if quick else ''}.json"
    key = _key(quick)
    try:
        saved = json.loads(path.read_text())
        if saved.get("key") == key:
            return [MeasuredVariant.from_dict(d) for d in saved["variants"]]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    models = variant_models(model_dir, quick)
    xs, ys = held_out()
    t0 = time.perf_counter()
    catalog = _measure(models, xs, ys)
    logger.info("measured the %s catalog in %.1f s", TASK, time.perf_counter() - t0)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"key": key, "held_out": len(ys), "variants": [v.to_dict() for v in catalog]}, indent=2))
    return catalog
