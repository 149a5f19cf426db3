"""Query analysis: split an app's end-to-end SLO across the DNN stages of its dataflow tree
(Nexus SOSP §4.2/§6.2). Pure.

Each stage v receives R_v requests/s (measured: γ, the fan-out per edge, enters through the rates)
and, given a latency budget t, can serve T_v(t) requests/s per device. The cost of a split is the
number of devices Σ_v R_v / T_v(t_v); the split must satisfy Σ t_v ≤ L along every root→leaf path.
Dynamic program, budgets discretized in ε steps (time quadratic in L/ε):

    f(u, t) = min_{k ≤ t} [ R_u / T_u(k) + Σ_{children v} f(v, t − k) ]

Example (Nexus Figure 4, γ = 1): X then Y within 100 ms → 50/50, 153.8 req/s per device.

Time outside the executor is reserved before the SLO is divided: each stage's ``reserve_s`` (its
bus round trip and the CPU steps after its replies until the next stage or the sink) on every
path through it, and the app's own ``reserve_s`` (CPU steps before the first stage, the rows'
encoding) on every path. So the constraint is per path, Σ (t_v + r_v) ≤ L − r_app, and a path
with more reserved gets less to divide than its sibling: the dynamic program charges each stage
its reserve before its children share what is left. Budgets stay on the ε grid (a leaf takes
the whole steps left: less than ε of a path's time can go unused), so stage SLOs, and their
sessions, move only when a reserve crosses a step.

    >>> from vidnexus.contracts.profile import Profile
    >>> t = throughput_from_profile(Profile.linear(0.002, 0.004, 32))
    >>> app = Stage("det", 1.0, t, (Stage("cls", 4.0, t, reserve_s=0.012),), reserve_s=0.010)
    >>> s = split_latency(app, 0.300, epsilon_s=0.001, reserve_s=0.008)
    >>> round(sum(s.budgets.values()), 3)  # 300 ms less the 30 ms reserved along the path
    0.27
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
    reserve_s: float = 0.0
    """Time its requests spend outside the executor on every path through it: the bus round trip
    and the CPU steps after its replies until the next stage (or the sink)."""


@dataclass(frozen=True)
class Split:
    budgets: dict[str, float]
    devices: float

    def per_device_throughput(self, root_rate: float) -> float:
        """Requests/s entering the app per device used (the Figure 4 metric)."""
        return root_rate / self.devices if self.devices > 0 else math.inf


def throughput_from_profile(p: Profile) -> Throughput:
    """T(t) = B/ℓ(B) for the B with 2ℓ(B) ≤ t that serves most (a saturated device, Nexus §6.1: the
    largest such B where throughput grows with B; see ``Profile.efficient_batch_within``)."""

    def t(budget: float) -> float:
        b = p.efficient_batch_within(budget / 2 + 1e-12)
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


def _path_reserve(u: Stage) -> float:
    """The most reserved along any path from ``u`` down to a leaf."""
    return u.reserve_s + max((_path_reserve(v) for v in u.children), default=0.0)


def _steps_in(seconds: float, epsilon_s: float) -> int:
    """Whole ε steps in ``seconds`` (none when it is not positive)."""
    return int(math.floor(seconds / epsilon_s + 1e-6)) if seconds > 0 else 0


def split_latency(root: Stage, slo_s: float, epsilon_s: float = 0.001, reserve_s: float = 0.0) -> Split:
    """The budget split minimizing devices (Nexus's dynamic program), after reserving each stage's
    ``reserve_s`` on the paths through it and ``reserve_s`` (the app's) on every path (see the
    module docstring). Raises ValueError when no split within ``slo_s`` serves every stage."""
    memo: dict[tuple[str, int], tuple[float, int]] = {}

    def f(u: Stage, left: float) -> tuple[float, int]:
        """(devices, u's budget in ε steps) of the best split of ``left`` seconds over u's subtree,
        reserves included."""
        key = (u.name, round(left * 1e9))
        if key in memo:
            return memo[key]
        avail = left - u.reserve_s
        n = _steps_in(avail, epsilon_s)
        if not u.children:  # a leaf takes the whole budget: throughput never drops with more time
            best = (_cost(u, n * epsilon_s) if n > 0 else math.inf, n)
        else:
            best = (math.inf, 0)
            even = n / _depth(u)  # among equal-cost splits, prefer the one closest to the even split
            for k in range(1, n + 1):
                own = _cost(u, k * epsilon_s)
                if own == math.inf:
                    continue
                total = own + sum(f(v, avail - k * epsilon_s)[0] for v in u.children)
                if total < best[0] - 1e-12 or (abs(total - best[0]) <= 1e-12 and abs(k - even) < abs(best[1] - even)):
                    best = (total, k)
        memo[key] = best
        return best

    total, _ = f(root, slo_s - reserve_s)
    if total == math.inf:
        held = reserve_s + _path_reserve(root)
        why = f" with up to {held * 1000:.0f} ms reserved outside the executor" if held > 0 else ""
        raise ValueError(f"no split of {slo_s * 1000:.0f} ms lets every stage of {root.name} meet it{why}")
    budgets: dict[str, float] = {}

    def recover(u: Stage, left: float) -> None:
        _, k = f(u, left)
        budgets[u.name] = k * epsilon_s
        for v in u.children:
            recover(v, left - u.reserve_s - k * epsilon_s)

    recover(root, slo_s - reserve_s)
    return Split(budgets, total)


def even_split(root: Stage, slo_s: float, reserve_s: float = 0.0) -> Split:
    """The baseline: every stage gets what is left of the SLO after the largest reserve along a
    path (the app's ``reserve_s`` included), divided by the depth of the deepest path."""
    share = max(0.0, slo_s - reserve_s - _path_reserve(root)) / _depth(root)
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
