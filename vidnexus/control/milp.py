"""The exact optimum of small squishy bin packing instances, as a set-cover MILP (HiGHS through
``scipy.optimize.milp``): the yardstick of :func:`~vidnexus.control.squishy.plan`.

Not a decision the system runs (and so, unlike the planner, it uses numpy and scipy, the ``bench``
extra): the benchmark and the tests measure the heuristic against it.

The saturated devices are those of :func:`~vidnexus.control.squishy.split`, as in the heuristic; the
residual loads are then placed optimally. A set S of residual loads fits one device if some duty
cycle d gives every load i its batch b_i = ⌈d·r_i⌉ (≤ its largest profiled batch) with
d + ℓ_i(b_i) ≤ L_i, Σℓ_i(b_i) ≤ d, and the models' memory within capacity. Between two consecutive
points where some b_i changes, the busy time is constant and only the SLOs tighten as d grows, so
only those points (d = k/r_i) and the SLO limits (d = L_i − ℓ_i(k)) need trying. Fitting is closed
under taking subsets, so every fitting set is enumerated depth first, and the MILP chooses the fewest
sets that cover every load (min Σx_S, Σ_{S∋i} x_S ≥ 1, x binary); a load covered twice keeps one
place. Exact over the ways to partition the residual loads (a residual is not split further).

Example:
    >>> from vidnexus.contracts.profile import Profile
    >>> from vidnexus.control.squishy import SessionLoad
    >>> prof = {"A": Profile((4, 8, 16), (0.050, 0.075, 0.100)), "B": Profile((4, 8, 16), (0.050, 0.090, 0.125)),
    ...         "C": Profile((4, 8, 16), (0.060, 0.095, 0.125))}
    >>> s = [SessionLoad("A", "A", 0.2, 64), SessionLoad("B", "B", 0.25, 32), SessionLoad("C", "C", 0.25, 32)]
    >>> exact_milp(s, prof).plan.devices   # doctest: +SKIP
    2
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from vidnexus.contracts.profile import Profile
from vidnexus.control.packing import EPS, Item
from vidnexus.control.squishy import Allocation, Node, Plan, SessionLoad, split

__all__ = ["ExactResult", "exact_milp", "fitting_sets"]


@dataclass(frozen=True)
class ExactResult:
    """The plan, whether HiGHS proved it optimal, how many fitting sets it chose from, and its time."""

    plan: Plan
    optimal: bool
    sets: int
    status: str


def _levels(items: Sequence[Item]) -> np.ndarray:
    pts = set()
    for x in items:
        top = len(x.lat) - 1
        for k in range(1, top + 1):
            pts.add(k / x.rate)
            pts.add(x.slo - x.lat[k])
    hi = max(x.slo for x in items)
    lo = min(x.lat[1] for x in items)
    return np.array(sorted(p for p in pts if lo - EPS <= p <= hi + EPS))


def _costs(x: Item, levels: np.ndarray) -> np.ndarray:
    """ℓ(⌈d·r⌉) at every level d, +inf where the load cannot run at d."""
    top = len(x.lat) - 1
    b = np.maximum(1, np.ceil(levels * x.rate - 1e-6)).astype(np.int64)
    ok = b <= top
    lat = np.asarray(x.lat)[np.minimum(b, top)]
    ok &= levels + lat <= x.slo + EPS
    return np.where(ok, lat, np.inf)


def fitting_sets(items: Sequence[Item], memory_capacity: float = math.inf, limit: int = 500_000
                 ) -> tuple[list[tuple[int, ...]], np.ndarray, np.ndarray]:
    """Every set of ``items`` (as index tuples) that fits one device; also the levels and the cost
    matrix (items × levels). Raises ``ValueError`` past ``limit`` sets."""
    levels = _levels(items)
    cost = np.stack([_costs(x, levels) for x in items]) if items else np.zeros((0, 0))
    n = len(items)
    out: list[tuple[int, ...]] = []

    def dfs(start: int, chosen: list[int], acc: np.ndarray, models: dict[str, int]) -> None:
        for j in range(start, n):
            x = items[j]
            new_acc = acc + cost[j]
            if not (new_acc <= levels + EPS).any():
                continue
            mem = sum(models.values()) + (0 if x.model in models else x.mem)
            if mem > memory_capacity:
                continue
            chosen.append(j)
            out.append(tuple(chosen))
            if len(out) > limit:
                raise ValueError(f"more than {limit} fitting sets: too large for the exact solver")
            added = x.model not in models
            if added:
                models[x.model] = x.mem
            dfs(j + 1, chosen, new_acc, models)
            if added:
                del models[x.model]
            chosen.pop()

    dfs(0, [], np.zeros(len(levels)), {})
    return out, levels, cost


def _node(items: Sequence[Item], idx: Sequence[int], levels: np.ndarray, cost: np.ndarray) -> Node:
    total = cost[list(idx)].sum(axis=0)
    ok = total <= levels + EPS
    occ = np.where(ok, total / levels, np.inf)
    c = int(np.argmin(occ))
    d = float(levels[c])
    allocs = []
    for i in idx:
        x = items[i]
        b = x.batch_at(d)
        allocs.append(Allocation(x.sid, x.model, b, x.rate, x.lat[b], x.slo, x.mem))
    return Node(d, tuple(allocs))


def exact_milp(sessions: Sequence[SessionLoad], profiles: Mapping[str, Profile], memory_capacity: float = math.inf,
               *, k_std: float = 1.0, time_limit_s: float = 60.0, limit: int = 500_000) -> ExactResult:
    """The fewest devices (see the module docstring). Raises ``ValueError`` when the instance has
    too many fitting sets, ``ImportError`` without scipy."""
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import csc_array

    sp = split(sessions, profiles, memory_capacity, k_std)
    items = list(sp.items)
    if not items:
        return ExactResult(Plan(sp.saturated, sp.infeasible), True, 0, "no residual loads")
    sets, levels, cost = fitting_sets(items, memory_capacity, limit)
    rows = [i for s in sets for i in s]
    cols = [j for j, s in enumerate(sets) for _ in s]
    a = csc_array((np.ones(len(rows)), (rows, cols)), shape=(len(items), len(sets)))
    res: Any = milp(np.ones(len(sets)), constraints=LinearConstraint(a, lb=np.ones(len(items)), ub=np.inf),
                    integrality=np.ones(len(sets)), bounds=Bounds(0, 1),
                    options={"time_limit": time_limit_s, "disp": False})
    if res.x is None:
        raise ValueError(f"the MILP found no solution: {res.message}")
    chosen = [sets[j] for j in np.flatnonzero(res.x > 0.5)]
    placed: set[int] = set()
    nodes = []
    for s in sorted(chosen, key=len, reverse=True):
        idx = [i for i in s if i not in placed]
        if idx:
            placed.update(idx)
            nodes.append(_node(items, idx, levels, cost))
    return ExactResult(Plan(sp.saturated + tuple(nodes), sp.infeasible), res.status == 0, len(sets),
                       str(res.message))
