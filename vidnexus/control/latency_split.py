"""Query analysis: split an app's end-to-end SLO across the DNN stages of its dataflow tree
(Nexus SOSP §4.2/§6.2). Pure.

Each stage v receives R_v requests/s (measured: γ, the fan-out per edge, enters through the rates)
and, given a latency budget t, can serve T_v(t) requests/s per device. The cost of a split is the
number of devices Σ_v R_v / T_v(t_v); the split must satisfy Σ t_v ≤ L along every root→leaf path.
Dynamic program, budgets discretized in ε steps (time quadratic in L/ε):

    f(u, t) = min_{k ≤ t} [ R_u / T_u(k) + Σ_{children v} f(v, t − k) ]

Example (Nexus Figure 4, γ = 1): X then Y within 100 ms → 50/50, 153.8 req/s per device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Mapping

from vidnexus.contracts.profile import Profile

__all__ = ["Stage", "Split", "split_latency", "even_split", "throughput_from_profile", "throughput_from_table"]

Throughput = Callable[[float], float]
"""Requests/s one device serves within a latency budget (s); 0 when the budget is too small."""


@dataclass(frozen=True)
class Stage:
    """A DNN stage of an app: its rate (req/s reaching it), throughput function and children."""

    name: str
    rate: float
    throughput: Throughput
    children: tuple["Stage", ...] = field(default=())


@dataclass(frozen=True)
class Split:
    budgets: dict[str, float]
    devices: float

    def per_device_throughput(self, root_rate: float) -> float:
        """Requests/s entering the app per device used (the Figure 4 metric)."""
        return root_rate / self.devices if self.devices > 0 else math.inf


def throughput_from_profile(p: Profile) -> Throughput:
    """T(t) = B/ℓ(B) for the largest B with 2ℓ(B) ≤ t (a saturated device, Nexus §6.1)."""

    def t(budget: float) -> float:
        b = p.max_batch_within(budget / 2 + 1e-12)
        return p.throughput(b) if b else 0.0

    return t


def throughput_from_table(table: Mapping[float, float]) -> Throughput:
    """Step function: the throughput of the largest tabulated budget ≤ t (0 below the smallest)."""
    keys = sorted(table)

    def t(budget: float) -> float:
        best = 0.0
        for k in keys:
            if k <= budget + 1e-12:
                best = table[k]
        return best

    return t


def _cost(stage: Stage, budget: float) -> float:
    if stage.rate <= 0:
        return 0.0
    t = stage.throughput(budget)
    return stage.rate / t if t > 0 else math.inf


def _depth(u: Stage) -> int:
    return 1 + max((_depth(v) for v in u.children), default=0)


def split_latency(root: Stage, slo_s: float, epsilon_s: float = 0.001) -> Split:
    """The budget split minimizing devices (Nexus's dynamic program). Raises ValueError when no split
    within ``slo_s`` serves every stage."""
    steps = int(round(slo_s / epsilon_s))
    memo: dict[tuple[str, int], tuple[float, int]] = {}

    def f(u: Stage, t: int) -> tuple[float, int]:
        key = (u.name, t)
        if key in memo:
            return memo[key]
        best = (math.inf, 0)
        even = t / _depth(u)  # among equal-cost splits, prefer the one closest to the even split
        for k in range(1, t + 1):
            own = _cost(u, k * epsilon_s)
            if own == math.inf:
                continue
            rest = sum(f(v, t - k)[0] for v in u.children) if u.children else 0.0
            total = own + rest
            if total < best[0] - 1e-12 or (abs(total - best[0]) <= 1e-12 and abs(k - even) < abs(best[1] - even)):
                best = (total, k)
            if not u.children:
                break  # a leaf takes the whole budget: throughput never drops with more time
        if not u.children and best[0] < math.inf:
            best = (_cost(u, t * epsilon_s), t)
        memo[key] = best
        return best

    total, _ = f(root, steps)
    if total == math.inf:
        raise ValueError(f"no split of {slo_s * 1000:.0f} ms lets every stage of {root.name} meet it")
    budgets: dict[str, float] = {}

    def recover(u: Stage, t: int) -> None:
        _, k = f(u, t)
        budgets[u.name] = k * epsilon_s
        for v in u.children:
            recover(v, t - k)

    recover(root, steps)
    return Split(budgets, total)


def even_split(root: Stage, slo_s: float) -> Split:
    """The baseline: every stage on a path gets SLO / (depth of the deepest path)."""

    def depth(u: Stage) -> int:
        return 1 + max((depth(v) for v in u.children), default=0)

    share = slo_s / depth(root)
    budgets: dict[str, float] = {}
    devices = 0.0

    def walk(u: Stage) -> None:
        nonlocal devices
        budgets[u.name] = share
        devices += _cost(u, share)
        for v in u.children:
            walk(v)

    walk(root)
    return Split(budgets, devices)
