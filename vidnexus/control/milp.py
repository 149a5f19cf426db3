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
from vidnexus.control.squishy import Allocation, Node, Plan, SessionLoad, plan, split

__all__ = ["ExactResult", "exact_milp", "fitting_sets", "lp_lower_bound"]


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


def lp_lower_bound(sessions: Sequence[SessionLoad], profiles: Mapping[str, Profile], *, k_std: float = 1.0,
                   grid: int = 1000, max_iter: int = 200) -> float:
    """A lower bound on the devices of any plan that saturates first (the plans of
    :func:`~vidnexus.control.squishy.plan` and of :func:`exact_milp`): the saturated devices plus
    a bound on the LP relaxation of the set cover over the residual loads (fractional devices;
    memory is left out, which only lowers it). Not rounded up: the caller takes the ceiling.

    Column generation on a relaxation, with Farley's bound: the duty cycles ``[lo, hi]`` (the
    least ℓ(1) to the longest cycle any SLO allows) are cut into ``grid`` geometric intervals
    [g, g']; a set fitting at some d in one counts as a knapsack with each load's latency at g
    (ℓ only grows with d) against the capacity g', of the loads whose SLO allows g — every fitting
    set is one of those. Given duals y, z bounds every set's Σ y: the 0/1 knapsack's best with
    latencies rounded down (:func:`_knapsacks`) on the ``_EXACT_ROWS`` intervals whose fractional
    bound is highest, that fractional bound on the others (on every interval exactly once those
    offer no set above 1). Then y / max(1, z) is dual feasible, so Σ y / max(1, z) ≤ the LP ≤ the
    optimum, at every round. Duals: the restricted master LP's, smoothed towards those of the best
    bound so far (Wentges; the loads' least occupancies to begin, the split bound's duals); the
    sets above 1 join the master, which starts from singletons and the heuristic's devices. It
    stops when no set prices above 1 (the LP is solved), when the master's value and the bound
    round up alike, or after ``max_iter`` rounds. Needs scipy.

    Example (Nexus Table 2: Σ r/T says 1 device; two are needed, and the LP sees it):
        >>> prof = {"A": Profile((4, 8, 16), (0.050, 0.075, 0.100)), "B": Profile((4, 8, 16), (0.050, 0.090, 0.125)),
        ...         "C": Profile((4, 8, 16), (0.060, 0.095, 0.125))}
        >>> s = [SessionLoad("A", "A", 0.2, 64), SessionLoad("B", "B", 0.25, 32), SessionLoad("C", "C", 0.25, 32)]
        >>> round(lp_lower_bound(s, prof, k_std=0), 6)
        2.0
    """
    from scipy.optimize import linprog
    from scipy.sparse import csc_array

    sp = split(sessions, profiles, math.inf, k_std)
    items = list(sp.items)
    if not items:
        return float(len(sp.saturated))
    n = len(items)
    lo = min(x.lat[1] for x in items)
    hi = max(lo, max(x.cap for x in items))
    g = np.geomspace(lo, hi, grid + 1) if hi > lo else np.array([lo, lo])
    start, cap = g[:-1], g[1:] + EPS
    weight = np.stack([_costs(x, start) for x in items], axis=1)   # intervals × loads, inf: not at g
    usable = np.isfinite(weight)
    w = np.where(usable, weight, 1.0)   # finite, for ratios and knapsack units

    cols: list[tuple[int, ...]] = [(i,) for i in range(n)]
    index = {x.sid: i for i, x in enumerate(items)}
    for node in plan(sessions, profiles, math.inf, k_std=k_std).nodes:   # the heuristic's devices: a good start
        c = tuple(sorted(index[a.session_id] for a in node.allocations if a.session_id in index))
        if not node.saturated and len(c) > 1:
            cols.append(c)
    seen = set(cols)

    def price(y: np.ndarray) -> tuple[float, np.ndarray, list[tuple[int, ...]]]:
        """An upper bound on every set's Σ y, and the best sets of the intervals priced exactly."""
        ratio = np.where(usable, y / w, -1.0)
        order = np.argsort(-ratio, axis=1, kind="stable")
        ws = np.take_along_axis(weight, order, axis=1)
        vs = np.take_along_axis(np.where(usable, y[None, :], 0.0), order, axis=1)
        cum = np.cumsum(ws, axis=1)
        k = (cum <= cap[:, None]).sum(axis=1)   # the loads that fit whole, in ratio order
        whole = np.where(cum <= cap[:, None], vs, 0.0).sum(axis=1)
        room = cap - np.where(k > 0, np.take_along_axis(cum, np.maximum(k - 1, 0)[:, None], axis=1)[:, 0], 0.0)
        nxt = np.minimum(k, n - 1)[:, None]
        fw, fv = np.take_along_axis(ws, nxt, axis=1)[:, 0], np.take_along_axis(vs, nxt, axis=1)[:, 0]
        frac = whole + np.where((k < n) & np.isfinite(fw), fv * np.clip(room / np.where(np.isfinite(fw), fw, 1.0), 0, 1), 0.0)
        top = np.argsort(-frac)[:_EXACT_ROWS]
        exact, sets = _knapsacks(w[top], usable[top], y, cap[top])
        if exact.max() <= 1 + 1e-9:   # no column from the likeliest intervals: price every one exactly
            exact, sets = _knapsacks(w, usable, y, cap)
            return float(exact.max()), exact, sets
        return max(float(exact.max()), float(np.delete(frac, top).max(initial=0.0))), exact, sets

    best, center = 0.0, np.array([x.min_occ for x in items])
    for _ in range(max_iter):
        rows = [i for c in cols for i in c]
        at = [j for j, c in enumerate(cols) for _ in c]
        a = csc_array((-np.ones(len(rows)), (rows, at)), shape=(n, len(cols)))
        res: Any = linprog(np.ones(len(cols)), A_ub=a, b_ub=-np.ones(n), bounds=(0, None), method="highs")
        if res.status != 0:
            raise ValueError(f"the master LP failed: {res.message}")
        y = np.maximum(0.0, -np.asarray(res.ineqlin.marginals))
        new = 0
        # Wentges' smoothing: price halfway between the master's duals and the best bound's, which
        # moves the bound up in fewer rounds than the master's own (often extreme) duals; when that
        # finds no column, the master's own duals decide whether the LP is solved.
        for pi in (0.5 * center + 0.5 * y, y):
            z, exact, sets = price(pi)
            bound = float(pi.sum()) / max(1.0, z)
            if bound > best:
                best, center = bound, pi
            for r in np.argsort(-exact)[:_COLUMNS_PER_ROUND]:
                if exact[r] > 1 + 1e-9 and sets[r] not in seen:
                    seen.add(sets[r])
                    cols.append(sets[r])
                    new += 1
            if new:
                break
        # Only ⌈the LP⌉ matters: stop once the master's value (above the LP) rounds up to the bound's.
        if not new or math.ceil(float(res.fun) - 1e-6) <= math.ceil(best - 1e-6):
            break
    return len(sp.saturated) + best


_EXACT_ROWS = 400
"""Intervals priced exactly per round (those whose fractional bound is highest): with 24, and 64
columns a round, 256 sessions had not converged in 200 rounds; with 400 and 400 they do in 15-35 s."""

_COLUMNS_PER_ROUND = 400
"""Sets added to the master per round at most (the best-priced intervals')."""

_UNITS = 256
"""Knapsack capacity in units: latencies are rounded down to a unit (the bound stays valid)."""


def _knapsacks(w: np.ndarray, usable: np.ndarray, y: np.ndarray, cap: np.ndarray
               ) -> tuple[np.ndarray, list[tuple[int, ...]]]:
    """Per row (an interval): the 0/1 knapsack's best Σ y over the usable loads, weights ``w``
    rounded down to ``cap / _UNITS`` (never below the true best), and a set that reaches it."""
    if len(cap) > 128:   # in parts: the choice table is loads × rows × units
        parts = [_knapsacks(w[k:k + 128], usable[k:k + 128], y, cap[k:k + 128]) for k in range(0, len(cap), 128)]
        return np.concatenate([v for v, _ in parts]), [c for _, cs in parts for c in cs]
    rows = len(cap)
    unit = cap / _UNITS
    units = np.where(usable, np.floor(w / unit[:, None]), _UNITS + 1).astype(np.int64)
    dp = np.zeros((rows, _UNITS + 1))
    pos = np.flatnonzero(y > 1e-12)
    took = np.zeros((len(pos), rows, _UNITS + 1), dtype=bool)
    grid = np.arange(_UNITS + 1)[None, :]
    for k, i in enumerate(pos):
        src = grid - units[:, i][:, None]
        cand = np.where(src >= 0, np.take_along_axis(dp, np.maximum(src, 0), axis=1) + y[i], -np.inf)
        better = cand > dp + 1e-12
        took[k] = better
        dp = np.where(better, cand, dp)
    sets = []
    for r in range(rows):
        u, chosen = _UNITS, []
        for k in range(len(pos) - 1, -1, -1):
            if took[k, r, u]:
                chosen.append(int(pos[k]))
                u -= units[r, pos[k]]
        sets.append(tuple(sorted(chosen)))
    return dp[:, _UNITS], sets
