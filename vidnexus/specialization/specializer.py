"""A specialized classification step in a chain: WEG (:mod:`vidnexus.specialization.weg`) per stream,
driving a cascade of a compact template (served by the executor as an ordinary session that returns
features) and the oracle (another session).

The chain asks :meth:`Specializer.plan` what to run for an input, runs the compact session only
when the plan says ``cascade``, asks :meth:`Specializer.decide` whether the oracle must run (the
specialized head said "other", or the ε-audit picked this early exit), runs the oracle when so, and
reports with :meth:`Specializer.observe`. The specialized last layer for a dominant set is trained
here, in the worker, on the template's cached features of the training set (milliseconds); heads
are kept per (key, dominant set) and reused when a stream's favourites come back.

Everything a key (e.g. a game) needs — its classes, the template's training features, the Eq. 5.1
accuracy terms and the oracle's accuracy — comes from ``setup(key)``, run once per key in a
background thread: until it is ready the key's inputs go to the oracle (and still fill the window).

Example (a scripted setup; features are one-hot class indicators, so the head is exact):
    >>> import numpy as np
    >>> from vidnexus.specialization.weg import AccuracyModel, WegParams
    >>> from vidnexus.specialization.training import FeatureCache
    >>> labels = np.repeat(np.arange(6), 20)
    >>> cache = FeatureCache(np.eye(6, dtype=np.float32)[labels], labels)
    >>> setup = lambda key: KeySetup(tuple(range(6)), cache, AccuracyModel({1: (0.99, 0.0, 0.99)}), 0.9)
    >>> sp = Specializer(setup, WegParams(w_min=10, tau_a=-0.01), background=False)
    >>> for _ in range(10):
    ...     p = sp.plan("cam-1", "g0"); _ = sp.observe(p, None, 3)
    >>> p = sp.plan("cam-1", "g0"); p.kind, p.dominant
    ('cascade', (3,))
    >>> label, need_oracle = sp.decide(p, np.eye(6, dtype=np.float32)[3])
    >>> label, need_oracle or p.audit
    (3, False)
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from vidnexus.specialization.weg import OTHER, AccuracyModel, Weg, WegMetrics, WegParams
from vidnexus.specialization.training import FeatureCache, SpecializedHead, specialize

__all__ = ["KeySetup", "Plan", "Specializer"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class KeySetup:
    """What specializing inputs of one key needs."""

    classes: tuple[int, ...]
    train: FeatureCache
    accuracy: AccuracyModel
    oracle_accuracy: float


@dataclass(frozen=True)
class Plan:
    """What to run for one input: ``oracle`` only, or the ``cascade`` (compact first; ``audit``
    asks for the oracle on an early exit too)."""

    stream: str
    key: str
    kind: str
    audit: bool = False
    head: SpecializedHead | None = None
    dominant: tuple[int, ...] = ()

    @property
    def cascade(self) -> bool:
        return self.kind == "cascade"


class Specializer:
    """WEG state machines per stream for one classification step (see the module docstring)."""

    def __init__(self, setup: Callable[[str], KeySetup], params: WegParams = WegParams(), *,
                 template: str = "compact", background: bool = True, seed: int = 0) -> None:
        self.setup_fn, self.params, self.template, self.seed = setup, params, template, seed
        self._setups: dict[str, Future[KeySetup]] = {}
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="vnx-specialize") if background else None
        self._wegs: dict[str, Weg] = {}
        self._heads: dict[tuple[str, tuple[int, ...]], SpecializedHead] = {}
        self._lock = threading.Lock()
        self.retrain_seconds: list[float] = []

    # -- setup ---------------------------------------------------------------------------------
    def _setup(self, key: str) -> KeySetup | None:
        with self._lock:
            fut = self._setups.get(key)
            if fut is None:
                if self._pool is None:
                    fut = Future()
                    try:
                        fut.set_result(self.setup_fn(key))
                    except Exception as e:  # a broken setup leaves the key on the oracle, said once
                        fut.set_exception(e)
                else:
                    fut = self._pool.submit(self.setup_fn, key)
                self._setups[key] = fut
        if not fut.done():
            return None
        if fut.exception() is not None:
            if not getattr(fut, "_vnx_logged", False):
                logger.error("specialization setup for %s failed (oracle only): %s", key, fut.exception())
                fut._vnx_logged = True  # type: ignore[attr-defined]
            return None
        return fut.result()

    def _weg(self, stream: str, setup: KeySetup) -> Weg:
        w = self._wegs.get(stream)
        if w is None:
            w = Weg(self.params, [(self.template, setup.accuracy)], setup.oracle_accuracy,
                    seed=self.seed + len(self._wegs))
            self._wegs[stream] = w
        return w

    # -- the three calls -------------------------------------------------------------------------
    def plan(self, stream: str, key: str) -> Plan:
        setup = self._setup(key)
        if setup is None:
            return Plan(stream, key, "oracle")
        weg = self._weg(stream, setup)
        act = weg.next_action()
        if act.kind == "specialize":
            dom = tuple(sorted(int(c) for c in act.dominant))
            head = self._heads.get((key, dom))
            if head is None:
                head = specialize(setup.train, dom, seed=len(self.retrain_seconds))
                self.retrain_seconds.append(head.train_seconds)
                self._heads[(key, dom)] = head
            weg.specialized(act.dominant, act.template)
            act = weg.next_action()
        if act.kind != "cascade":
            return Plan(stream, key, "oracle")
        dom = tuple(sorted(int(c) for c in act.dominant))
        return Plan(stream, key, "cascade", act.audit, self._heads[(key, dom)], dom)

    @staticmethod
    def decide(plan: Plan, features: Any) -> tuple[int | None, bool]:
        """(the compact model's class, or None for "other"; whether the oracle must run)."""
        if not plan.cascade or plan.head is None:
            return None, True
        c = int(plan.head.predict(np.asarray(features, np.float32).reshape(1, -1))[0])
        label = c if c >= 0 else None
        return label, label is None or plan.audit

    def observe(self, plan: Plan, compact: int | None, oracle: int | None) -> int | None:
        """Report what ran; returns the step's answer (the early exit, else the oracle's label)."""
        weg = self._wegs.get(plan.stream)
        if plan.kind == "oracle":
            if weg is not None and weg.phase == "window" and oracle is not None:
                weg.observe_oracle(str(oracle))
            return oracle
        if weg is not None and weg.phase == "specialized" and weg.dominant:
            weg.observe_cascade(str(compact) if compact is not None else OTHER,
                                str(oracle) if oracle is not None else None)
        return compact if compact is not None else oracle

    # -- metrics ---------------------------------------------------------------------------------
    def metrics(self) -> dict[str, WegMetrics]:
        return {s: w.metrics for s, w in self._wegs.items()}

    def phase(self, stream: str) -> str:
        w = self._wegs.get(stream)
        return w.phase if w is not None else "window"

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)


def key_setup(classes: Sequence[int], template: Any, oracle: Any, *, train_per_class: int = 75,
              val_per_class: int = 40, sizes: Sequence[int] = (1, 2, 3, 4, 5, 6, 8, 10),
              trials: int = 10) -> KeySetup:
    """A :class:`KeySetup` for glyph classes ``classes``: renders training and validation icons of
    those classes, caches the template's features, measures the Eq. 5.1 terms per |D| (averaged
    over ``trials`` random dominant sets per size, 10 as in the dissertation) and the oracle's
    accuracy among the classes (its logits restricted to them)."""
    import torch

    from vidnexus.training.glyphs import features, render_dataset
    from vidnexus.specialization.training import accuracy_terms

    cls = tuple(int(c) for c in classes)
    xs, ys = render_dataset(train_per_class, seed=11, classes=cls)
    vx, vy = render_dataset(val_per_class, seed=12, classes=cls)
    train = FeatureCache(features(template, xs).astype(np.float32), ys)
    val = FeatureCache(features(template, vx).astype(np.float32), vy)
    # accuracy_terms draws D among class *indices*; index the labels by position in ``cls``.
    pos = {c: i for i, c in enumerate(cls)}
    tr_i = FeatureCache(train.feats, np.array([pos[int(c)] for c in train.labels]))
    va_i = FeatureCache(val.feats, np.array([pos[int(c)] for c in val.labels]))
    table = {n: accuracy_terms(tr_i, va_i, n, trials=trials, classes=len(cls)) for n in sizes if n < len(cls)}
    with torch.inference_mode():
        logits = oracle(torch.from_numpy(vx)).numpy()[:, list(cls)]
    a_star = float((np.array(cls)[logits.argmax(1)] == vy).mean())
    return KeySetup(cls, train, AccuracyModel(table), a_star)
