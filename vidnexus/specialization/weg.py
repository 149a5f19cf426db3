"""Windowed ε-Greedy (WEG): sequential specialization of a classification step (Shen et al.,
Algorithm 5.1; ../shared/reference/specialization.md). Pure: no torch, no clock reads.

The two-call contract: ``action = weg.next_action()`` says what to run on the next input (the oracle
while a window fills; the cascade once specialized, with an ε-audit flag), the caller runs it and
reports with :meth:`Weg.observe_oracle` or :meth:`Weg.observe_cascade`. When the window shows a
dominant set worth specializing, ``next_action`` returns ``Specialize(D)``; the caller retrains the
compact template's top layer for D and calls :meth:`Weg.specialized`.

Example (an accuracy model that promises 95% for any small D, oracle at 70%):
    >>> est = AccuracyModel({3: (0.95, 0.02, 0.9)})
    >>> weg = Weg(WegParams(w_min=4), [("tiny", est)], oracle_accuracy=0.7, seed=0)
    >>> for y in ["a", "b", "a", "b"]:
    ...     assert weg.next_action().kind == "oracle"
    ...     weg.observe_oracle(y)
    >>> weg.next_action()
    Action(kind='specialize', dominant=('a', 'b'), audit=False, template='tiny')
"""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Literal, Mapping, Sequence

__all__ = [
    "WegParams",
    "AccuracyModel",
    "Action",
    "Weg",
    "WegMetrics",
    "dom_classes",
    "support_k",
    "appendix_c",
    "OTHER",
]

OTHER = "__other__"
"""The label a specialized model gives inputs outside its dominant set."""


@dataclass(frozen=True)
class WegParams:
    """Hyper-parameters (the reference's values by default)."""

    w_min: int = 30
    """Oracle-labelled inputs that open a window."""
    tau_r: int = 2
    """Dominant sets of consecutive windows within this symmetric difference continue the epoch."""
    tau_a: float = 0.05
    """Specialize when the estimated cascade accuracy ≥ oracle accuracy + τ_a (−0.05 for faces)."""
    epsilon: float = 0.01
    """Probability of auditing an early exit with the oracle."""
    tau_fp: float = 0.5
    """Leave when audited early exits disagree with the oracle at more than this rate."""
    max_window: int = 600
    """The largest w: a window continued from the previous epoch's (S_{j-1} ⊕ S_j) keeps at most this
    many of their labels (the reference does not bound it; memory does)."""
    min_audits: float = 1.0
    """Expected audits (n_c·ε) before the false-positive rule may fire."""


def support_k(w: int) -> int:
    """Minimum support of a dominant class in a window of ``w`` labels (Appendix C)."""
    return 2 if w < 90 else 3


def dom_classes(labels: Sequence[str], k: int | None = None) -> tuple[str, ...]:
    """Classes that appear at least ``k`` times in ``labels`` (by frequency, then name)."""
    k = support_k(len(labels)) if k is None else k
    c = Counter(labels)
    return tuple(sorted((y for y, n in c.items() if n >= k and y != OTHER), key=lambda y: (-c[y], y)))


def appendix_c(N: int, a_star: float, n: int, p: float | None, w: int, k: int) -> tuple[float | None, float]:
    """(p_in, p_out) of Appendix C: the probability that a given dominant class (non-dominant class)
    is output at least ``k`` times in a window of ``w`` oracle labels. ``n = 0`` is the uniform case."""

    def tail(q: float) -> float:
        return sum(math.comb(w, i) * q**i * (1 - q) ** (w - i) for i in range(k, w + 1))

    if n == 0 or p is None:
        return None, tail(1 / N)
    q_in = (p * a_star + p * (1 - a_star) * (n - 1) / (N - 1) + (1 - p) * (1 - a_star) * n / (N - 1)) / n
    q_out = ((1 - p) * a_star + (1 - p) * (1 - a_star) * (N - n - 1) / (N - 1)
             + p * (1 - a_star) * (N - n) / (N - 1)) / (N - n)
    return tail(q_in), tail(q_out)


@dataclass(frozen=True)
class AccuracyModel:
    """Eq. 5.1 with (a_in, e_in→out, a_out) measured per dominant-set size and interpolated linearly
    (held at the ends). ``table[n] = (a_in, e_in_out, a_out)``."""

    table: Mapping[int, tuple[float, float, float]]

    def terms(self, n: int) -> tuple[float, float, float]:
        keys = sorted(self.table)
        if not keys:
            raise ValueError("empty accuracy table")
        if n <= keys[0]:
            return self.table[keys[0]]
        if n >= keys[-1]:
            return self.table[keys[-1]]
        hi = next(k for k in keys if k >= n)
        lo = max(k for k in keys if k <= n)
        if hi == lo:
            return self.table[lo]
        f = (n - lo) / (hi - lo)
        a, b = self.table[lo], self.table[hi]
        return (a[0] + f * (b[0] - a[0]), a[1] + f * (b[1] - a[1]), a[2] + f * (b[2] - a[2]))

    def estimate(self, n: int, p: float, a_star: float) -> float:
        """â = p·a_in + p·e_in→out·a* + (1−p)·a_out·a*  (Eq. 5.1)."""
        a_in, e_io, a_out = self.terms(n)
        return p * a_in + p * e_io * a_star + (1 - p) * a_out * a_star


@dataclass(frozen=True)
class Action:
    kind: Literal["oracle", "specialize", "cascade"]
    dominant: tuple[str, ...] = ()
    audit: bool = False
    template: str = ""


@dataclass
class WegMetrics:
    inputs: int = 0
    oracle_only: int = 0
    early_exits: int = 0
    cascaded: int = 0
    audits: int = 0
    audit_disagreements: int = 0
    specializations: int = 0
    epochs: int = 1
    exits_accuracy: int = 0
    exits_fp: int = 0
    window_sizes: list[int] = field(default_factory=list)
    dominant_sizes: list[int] = field(default_factory=list)
    estimated: list[float] = field(default_factory=list)

    @property
    def special_rate(self) -> float:
        """Share of inputs answered by the compact model alone."""
        return self.early_exits / self.inputs if self.inputs else 0.0

    @property
    def cascade_rate(self) -> float:
        """Share of specialized-phase inputs that fell through to the oracle."""
        n = self.early_exits + self.cascaded
        return self.cascaded / n if n else 0.0

    @property
    def audited_accuracy(self) -> float | None:
        """Agreement of audited early exits with the oracle."""
        return 1 - self.audit_disagreements / self.audits if self.audits else None


class Weg:
    """The WEG state machine for one classification step of one stream (see module docstring).

    ``templates`` are the compact architectures with their accuracy models, cheapest first: template
    selection takes the first whose estimated cascade accuracy clears a* + τ_a."""

    def __init__(self, params: WegParams, templates: Sequence[tuple[str, AccuracyModel]], oracle_accuracy: float,
                 *, seed: int = 0) -> None:
        if not templates:
            raise ValueError("WEG needs at least one compact template")
        self.p, self.templates, self.a_star = params, list(templates), oracle_accuracy
        self._rng = random.Random(seed)
        self.phase: Literal["window", "specialized"] = "window"
        self.window: list[str] = []          # S_j: oracle labels of this epoch
        self.prev_window: list[str] = []     # S_{j-1}
        self._opened = False                 # the first w_min labels of this window arrived
        self.w = 0                           # w = |S_j| once the window opened; it then slides
        self.dominant: tuple[str, ...] = ()
        self.template = ""
        self.recent: list[str] = []          # labels output in the specialized phase (sliding)
        self.n_c = 0
        self.n_star = 0
        self.estimate = 0.0
        self._pending: tuple[tuple[str, ...], str] | None = None
        self.metrics = WegMetrics()

    # -- decisions ---------------------------------------------------------------------------

    def next_action(self) -> Action:
        if self._pending is not None:
            return Action("specialize", self._pending[0], template=self._pending[1])
        if self.phase == "window":
            return Action("oracle")
        return Action("cascade", self.dominant, audit=self._rng.random() < self.p.epsilon, template=self.template)

    def _select_template(self) -> None:
        """Template selection over the last w labels (Algorithm 5.1, lines 7–11)."""
        w = len(self.window)
        dom = dom_classes(self.window)
        if not dom:
            return
        share = sum(1 for y in self.window if y in dom) / w
        for name, model in self.templates:
            est = model.estimate(len(dom), share, self.a_star)
            self.estimate = est
            if est >= self.a_star + self.p.tau_a:
                self._pending = (dom, name)
                self.metrics.window_sizes.append(w)
                self.metrics.dominant_sizes.append(len(dom))
                self.metrics.estimated.append(round(est, 4))
                return

    # -- observations --------------------------------------------------------------------------

    def observe_oracle(self, label: str) -> None:
        """The oracle's label of an input run in the window phase."""
        self.metrics.inputs += 1
        self.metrics.oracle_only += 1
        self.window.append(label)
        if not self._opened:
            if len(self.window) < self.p.w_min:
                return
            self._opened = True
            # Window initialization: a dominant set close to the previous epoch's continues it.
            if self.prev_window:
                a, b = set(dom_classes(self.prev_window)), set(dom_classes(self.window))
                if len(a ^ b) <= self.p.tau_r:
                    self.window = (self.prev_window + self.window)[-self.p.max_window :]
            self.w = len(self.window)  # w ← |S_j|, fixed for this window
        else:
            del self.window[: -self.w]  # the window slides: labels older than the last w are gone
        self._select_template()

    def specialized(self, dominant: Sequence[str], template: str) -> None:
        """The caller trained h_D for ``dominant`` on ``template``: enter the specialized phase."""
        self._pending = None
        self.phase = "specialized"
        self.dominant = tuple(dominant)
        self.template = template
        self.recent = [y for y in self.window[-max(self.p.w_min, 1):]]
        self.n_c = self.n_star = 0
        self.metrics.specializations += 1

    def observe_cascade(self, compact: str, oracle: str | None) -> None:
        """One input of the specialized phase: the compact model's label, and the oracle's when it
        ran (fall-through, or an audit of an early exit)."""
        m = self.metrics
        m.inputs += 1
        if compact != OTHER and compact in self.dominant:
            self.n_c += 1
            m.early_exits += 1
            out = compact
            if oracle is not None:
                m.audits += 1
                if oracle != compact:
                    self.n_star += 1
                    m.audit_disagreements += 1
        else:
            m.cascaded += 1
            out = oracle if oracle is not None else OTHER
        self.recent.append(out)
        w = max(self.w, self.p.w_min)
        if len(self.recent) > w:
            del self.recent[0]
        share = sum(1 for y in self.recent if y in self.dominant) / len(self.recent)
        model = dict(self.templates)[self.template]
        self.estimate = model.estimate(len(self.dominant), share, self.a_star)
        audits_expected = self.n_c * self.p.epsilon
        fp = audits_expected >= self.p.min_audits and self.n_star / audits_expected > self.p.tau_fp
        if self.estimate < self.a_star + self.p.tau_a or fp:
            if fp:
                m.exits_fp += 1
            else:
                m.exits_accuracy += 1
            self._new_epoch()

    def _new_epoch(self) -> None:
        self.metrics.epochs += 1
        self.phase = "window"
        self.prev_window = self.window[-self.p.max_window :]
        self.window = []
        self._opened = False
        self.w = 0
        self.dominant = ()
        self.template = ""
        self.recent = []
