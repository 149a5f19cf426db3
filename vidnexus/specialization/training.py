"""Fast specialization of a compact template to a dominant set D (MCDNN/WEG "retarget the top"):
the template was pre-trained on all classes; its lower layers stay, and only a new last layer for
D + "other" is trained, on the template's features of the training set computed once and cached.
The training set has the fixed training skew: every example of D, plus enough examples of the other
classes, relabelled "other", that D makes up ``skew`` of it (60% for objects in the reference).

Also here: the per-|D| accuracy terms of Eq. 5.1 (a_in, e_in→out, a_out), measured on validation
features over random dominant sets, which feed :class:`vidnexus.specialization.weg.AccuracyModel`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

__all__ = ["FeatureCache", "SpecializedHead", "specialize", "accuracy_terms"]


@dataclass(frozen=True)
class FeatureCache:
    """A template's features of a labelled set (computed once per template)."""

    feats: np.ndarray
    labels: np.ndarray


@dataclass(frozen=True)
class SpecializedHead:
    """The retrained last layer: ``predict(features)`` gives a class of D, or -1 for "other"."""

    dominant: tuple[int, ...]
    weight: np.ndarray
    bias: np.ndarray
    train_seconds: float

    def predict(self, feats: np.ndarray) -> np.ndarray:
        logits = feats @ self.weight.T + self.bias
        k = logits.argmax(1)
        lut = np.array(list(self.dominant) + [-1])
        classes: np.ndarray = lut[k]
        return classes


def specialize(cache: FeatureCache, dominant: Sequence[int], *, skew: float = 0.6, steps: int = 200,
               seed: int = 0) -> SpecializedHead:
    """Train the last layer for ``dominant`` + other at the fixed training ``skew``."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    dom = tuple(int(d) for d in dominant)
    is_dom = np.isin(cache.labels, dom)
    dom_idx = np.flatnonzero(is_dom)
    other_idx = np.flatnonzero(~is_dom)
    n_other = min(len(other_idx), int(round(len(dom_idx) * (1 - skew) / skew)))
    idx = np.concatenate([dom_idx, rng.choice(other_idx, n_other, replace=False)])
    remap = {c: i for i, c in enumerate(dom)}
    y = np.array([remap.get(int(c), len(dom)) for c in cache.labels[idx]], np.int64)
    x = cache.feats[idx].astype(np.float32)
    # Softmax regression, full batch, Adam: a few milliseconds for a few thousand examples.
    k = len(dom) + 1
    scale = 1.0 / (x.std() + 1e-6)
    x = x * scale
    w = rng.normal(0, 0.01, (k, x.shape[1])).astype(np.float32)
    b = np.zeros(k, np.float32)
    onehot = np.eye(k, dtype=np.float32)[y]
    mw, vw, mb, vb = np.zeros_like(w), np.zeros_like(w), np.zeros_like(b), np.zeros_like(b)
    lr, b1, b2 = 0.05, 0.9, 0.999
    for t in range(1, steps + 1):
        z = x @ w.T + b
        z -= z.max()  # one constant is enough against overflow (row maxima cost more than the rest)
        p = np.exp(z)
        p /= p.sum(1, keepdims=True)
        g = (p - onehot) / len(x)
        gw, gb = g.T @ x + 1e-4 * w, g.sum(0)
        mw, vw = b1 * mw + (1 - b1) * gw, b2 * vw + (1 - b2) * gw * gw
        mb, vb = b1 * mb + (1 - b1) * gb, b2 * vb + (1 - b2) * gb * gb
        w -= lr * (mw / (1 - b1**t)) / (np.sqrt(vw / (1 - b2**t)) + 1e-8)
        b -= lr * (mb / (1 - b1**t)) / (np.sqrt(vb / (1 - b2**t)) + 1e-8)
    w = (w * scale).astype(np.float32)
    b = b.astype(np.float32)
    return SpecializedHead(dom, w, b, time.perf_counter() - t0)


def accuracy_terms(train: FeatureCache, val: FeatureCache, n: int, *, trials: int = 10, classes: int,
                   seed: int = 0) -> tuple[float, float, float]:
    """(a_in, e_in→out, a_out) for dominant sets of size ``n``, averaged over ``trials`` random D:
    accuracy of h_D on inputs of D, share of inputs of D it calls "other", share of inputs outside
    D it calls "other"."""
    rng = np.random.default_rng(seed + n)
    a_in = e_io = a_out = 0.0
    for t in range(trials):
        dom = tuple(int(c) for c in rng.choice(classes, n, replace=False))
        head = specialize(train, dom, seed=t)
        pred = head.predict(val.feats)
        inside = np.isin(val.labels, dom)
        a_in += float((pred[inside] == val.labels[inside]).mean())
        e_io += float((pred[inside] == -1).mean())
        a_out += float((pred[~inside] == -1).mean())
    return a_in / trials, e_io / trials, a_out / trials


def features_of(model: Any, xs: np.ndarray, ys: np.ndarray) -> FeatureCache:
    from vidnexus.training.glyphs import features

    return FeatureCache(features(model, xs).astype(np.float32), ys)
