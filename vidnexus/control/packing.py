"""The residual packing of squishy bin packing (Nexus SOSP §6.1, Algorithm 1, SCHEDULERESIDUE), fast
and tight. Pure.

Each residual load is an :class:`Item`: a session's rate r, SLO L and a *planning* latency table
ℓ(b) (mean + k·std, made non-decreasing in b, see :func:`latency_table`), with its own duty cycle
D = b/r (the largest b with ℓ(b) + b/r ≤ L). A device (:class:`Bin`) runs its items once per duty
cycle d ≤ every item's D, each at batch ⌈d·r⌉; it is feasible iff Σℓ(⌈d·r⌉) ≤ d and memory fits.
Because every table is non-decreasing, shrinking d never breaks an item's SLO (d + ℓ(⌈d·r⌉) only
falls), so a merge only has to check the busy time and memory.

:func:`pack` places items by occupancy descending, each into the feasible bin it fills best (Nexus's
best fit on the resulting occupancy), looking only at bins with enough idle time, and then repacks:
it empties the emptiest bins into the others while that works (local search), and, for small
instances, keeps the best of a few item orders.

Example (Nexus Table 2, A at 64 req/s and B at 32 req/s share a 125 ms duty cycle):
    >>> from vidnexus.contracts.profile import Profile
    >>> ta = latency_table(Profile((4, 8, 16), (0.050, 0.075, 0.100)))
    >>> tb = latency_table(Profile((4, 8, 16), (0.050, 0.090, 0.125)))
    >>> a, b = make_item("A", "A", 0.2, 64, ta), make_item("B", "B", 0.25, 32, tb)
    >>> [sorted(x.sid for x in bn.items) for bn in pack([a, b])]
    [['A', 'B']]
"""

from __future__ import annotations

import bisect
import math
import random
from dataclasses import dataclass
from typing import Sequence

from vidnexus.contracts.profile import Profile

__all__ = ["LatencyTable", "latency_table", "Item", "make_item", "Bin", "pack", "saturated_batch", "EPS"]

EPS = 1e-9
RATE_EPS = 1e-6


@dataclass(frozen=True)
class LatencyTable:
    """ℓ(b) for b = 1 … max_batch as planned: ``lat[b]`` (``lat[0]`` is 0)."""

    lat: tuple[float, ...]

    @property
    def max_batch(self) -> int:
        return len(self.lat) - 1


def latency_table(p: Profile, k_std: float = 1.0) -> LatencyTable:
    """The planning latencies of ``p``: mean + ``k_std`` × std at each batch size up to the largest
    measured, raised where needed so that they never fall as the batch grows (a noisy measure of a
    larger batch must not look cheaper than a smaller one; planning above the true mean is safe).

    Example:
        >>> latency_table(Profile((1, 2, 4), (0.010, 0.009, 0.020), (0.001, 0.001, 0.002))).lat
        (0.0, 0.011, 0.011, 0.0165, 0.022)
    """
    out = [0.0]
    top = 0.0
    for b in range(1, p.max_batch + 1):
        mean = p.latency(b)
        v = mean + k_std * (p.planning_latency(b) - mean) if k_std else mean
        top = max(top, v)
        out.append(round(top, 12))
    return LatencyTable(tuple(out))


def saturated_batch(t: LatencyTable, slo_s: float) -> int:
    """The batch a whole device should run back to back: the highest throughput b/ℓ(b) among those
    with 2ℓ(b) ≤ SLO (a request that just misses a batch waits one), the smaller b on a tie; 0 if
    none. Nexus takes the largest such b, assuming throughput grows with b; measured profiles do not
    always oblige."""
    best, best_t = 0, 0.0
    lat = t.lat
    for b in range(1, len(lat)):
        if 2 * lat[b] > slo_s + EPS:
            break
        if b / lat[b] > best_t * (1 + 1e-12):
            best, best_t = b, b / lat[b]
    return best


class Item:
    """One residual load: ``b`` and ``d`` are its own batch and duty cycle, ``w`` = ℓ(b)."""

    __slots__ = ("sid", "model", "slo", "rate", "mem", "lat", "b", "d", "w", "occ")

    def __init__(self, sid: str, model: str, slo: float, rate: float, mem: int, lat: tuple[float, ...],
                 b: int, d: float) -> None:
        self.sid, self.model, self.slo, self.rate, self.mem, self.lat = sid, model, slo, rate, mem, lat
        self.b, self.d, self.w = b, d, lat[b]
        self.occ = self.w / d

    def batch_at(self, d: float) -> int:
        """The batch that serves the rate at duty cycle d ≤ own d."""
        return max(1, math.ceil(d * self.rate - RATE_EPS))

    def __repr__(self) -> str:
        return f"Item({self.sid!r}, b={self.b}, d={self.d:.4f}, occ={self.occ:.3f})"


def make_item(sid: str, model: str, slo: float, rate: float, t: LatencyTable, mem: int = 0) -> Item | None:
    """The residual load of ``rate`` req/s (Nexus SCHEDULERESIDUE): the largest b with
    ℓ(b) + b/r ≤ SLO and ℓ(b) ≤ b/r, on duty cycle d = b/r. A rate so low that even one request takes
    longer than the SLO to arrive runs at b = 1 on the longest cycle the SLO allows, d = SLO − ℓ(1).
    None when no batch fits."""
    lat = t.lat
    lo, hi = 0, t.max_batch  # largest b with ℓ(b) + b/r ≤ SLO (non-decreasing in b)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if lat[mid] + mid / rate <= slo + EPS:
            lo = mid
        else:
            hi = mid - 1
    b = lo
    while b and lat[b] > b / rate + EPS:  # the device could not keep up at this batch
        b -= 1
    if b:
        return Item(sid, model, slo, rate, mem, lat, b, b / rate)
    d = slo - lat[1]
    if d < lat[1] - EPS or 1 / d < rate:
        return None
    return Item(sid, model, slo, rate, mem, lat, 1, d)


class Bin:
    """One shared device: its items, their batches and latencies at duty cycle ``d``."""

    __slots__ = ("d", "busy", "items", "ws", "mem", "mem_total", "key")

    def __init__(self, item: Item) -> None:
        self.d = item.d
        self.busy = item.w
        self.items = [item]
        self.ws = [item.w]
        self.mem = {item.model: item.mem}
        self.mem_total = item.mem
        self.key = 0.0

    @property
    def free(self) -> float:
        return self.d - self.busy

    @property
    def occupancy(self) -> float:
        return self.busy / self.d

    def batches(self) -> list[int]:
        return [x.batch_at(self.d) for x in self.items]

    def mem_with(self, x: Item) -> int:
        return self.mem_total if x.model in self.mem else self.mem_total + x.mem

    def try_add(self, x: Item, cap: float) -> tuple[float, float] | None:
        """(duty cycle, busy time) of this bin with ``x`` added, or None if it does not fit."""
        if self.mem_with(x) > cap:
            return None
        if x.d >= self.d:
            w = x.lat[x.batch_at(self.d)]
            busy = self.busy + w
            return (self.d, busy) if busy <= self.d + EPS else None
        d = x.d  # the bin shrinks to x's cycle: every batch shrinks with it
        busy = x.w
        for y in self.items:
            busy += y.lat[y.batch_at(d)]
            if busy > d + EPS:
                return None
        return d, busy

    def add(self, x: Item, d: float) -> None:
        self.items.append(x)
        if d != self.d:
            self.d = d
            self.ws = [y.lat[y.batch_at(d)] for y in self.items]
            self.busy = sum(self.ws)
        else:
            w = x.lat[x.batch_at(d)]
            self.ws.append(w)
            self.busy += w
        if x.model not in self.mem:
            self.mem[x.model] = x.mem
            self.mem_total += x.mem

    def remove(self, x: Item) -> None:
        """Take ``x`` out; the others keep the duty cycle (still feasible: less to run)."""
        i = self.items.index(x)
        del self.items[i]
        del self.ws[i]
        self.busy = sum(self.ws)
        if all(y.model != x.model for y in self.items):
            self.mem_total -= self.mem.pop(x.model)

    def relevel(self) -> None:
        """Lengthen the duty cycle to the longest every item allows (its own d) when the batches
        that come with it still fit: larger batches, less busy time per request."""
        d = min(x.d for x in self.items)
        if d > self.d + EPS:
            ws = [x.lat[x.batch_at(d)] for x in self.items]
            if sum(ws) <= d + EPS:
                self.d, self.ws, self.busy = d, ws, sum(ws)


def _best_fit(items: Sequence[Item], cap: float, window: int) -> list[Bin]:
    """Place each item into the feasible bin of highest resulting occupancy (Nexus best fit),
    looking at the ``window`` fullest bins that have at least the idle time x needs at the
    shortest duty cycle anywhere (ℓ(1))."""
    bins: list[Bin] = []
    frees: list[float] = []  # bins sorted by idle time, ascending
    order: list[Bin] = []
    for x in items:
        best: Bin | None = None
        best_occ, best_d = -1.0, 0.0
        i = bisect.bisect_left(frees, x.lat[1] - EPS)
        seen = 0
        while i < len(order) and seen < window:
            bn = order[i]
            i += 1
            r = bn.try_add(x, cap)
            if r is None:
                continue
            seen += 1
            occ = r[1] / r[0]
            if occ > best_occ:
                best, best_occ, best_d = bn, occ, r[0]
        if best is None:
            bn = Bin(x)
            bins.append(bn)
        else:
            k = _index(order, frees, best)
            del order[k], frees[k]
            best.add(x, best_d)
            bn = best
        k = bisect.bisect_left(frees, bn.free)
        order.insert(k, bn)
        frees.insert(k, bn.free)
    return bins


def _index(order: list[Bin], frees: list[float], bn: Bin) -> int:
    k = bisect.bisect_left(frees, bn.free)
    while order[k] is not bn:
        k += 1
    return k


def _repack(bins: list[Bin], cap: float, tries: int) -> list[Bin]:
    """Local search: empty the emptiest bin into the others (best fit, largest item first) when
    every item finds a place; stop after ``tries`` bins in a row that would not empty."""
    bins = sorted(bins, key=lambda b: b.occupancy)
    failed = 0
    i = 0
    while i < len(bins) and failed < tries and len(bins) > 1:
        victim = bins[i]
        others = bins[:i] + bins[i + 1:]
        moves: list[tuple[Item, Bin, float]] = []
        ok = True
        trial: dict[int, tuple[float, float, list[Item]]] = {}
        for x in sorted(victim.items, key=lambda y: y.occ, reverse=True):
            best: Bin | None = None
            best_occ, best_d = -1.0, 0.0
            for bn in others:
                r = _try_with(bn, trial, x, cap)
                if r is not None and r[1] / r[0] > best_occ:
                    best, best_occ, best_d = bn, r[1] / r[0], r[0]
            if best is None:
                ok = False
                break
            moves.append((x, best, best_d))
            extra = trial.get(id(best), (best.d, best.busy, []))[2] + [x]
            trial[id(best)] = (best_d, best_occ * best_d, extra)
        if ok:
            for x, bn, d in moves:
                bn.add(x, min(d, bn.d))
            bins = sorted(others, key=lambda b: b.occupancy)
            failed = 0
            i = 0
        else:
            failed += 1
            i += 1
    return bins


def _try_with(bn: Bin, trial: dict[int, tuple[float, float, list[Item]]], x: Item, cap: float
              ) -> tuple[float, float] | None:
    """``bn.try_add(x)`` after the items this repack already sent to ``bn``."""
    pending = trial.get(id(bn))
    if pending is None:
        return bn.try_add(x, cap)
    d0, _, extra = pending
    mem = bn.mem_total + sum({y.model: y.mem for y in extra + [x] if y.model not in bn.mem}.values())
    if mem > cap:
        return None
    d = min(d0, x.d)
    busy = sum(y.lat[y.batch_at(d)] for y in bn.items + extra + [x])
    return (d, busy) if busy <= d + EPS else None


def pack(items: Sequence[Item], memory_capacity: float = math.inf, *, window: int = 16, restarts: int | None = None,
         seed: int = 0) -> list[Bin]:
    """Residual items onto as few devices as this finds (see the module docstring). ``restarts``
    extra shuffled orders are tried (default: more for fewer items), the best result kept."""
    if not items:
        return []
    cap = memory_capacity
    order = sorted(items, key=lambda x: x.occ, reverse=True)
    best = _finish(_best_fit(order, cap, window), cap)
    n = len(items)
    extra = restarts if restarts is not None else (24 if n <= 32 else 8 if n <= 128 else 0)
    rng = random.Random(seed)
    for _ in range(extra):
        jittered = sorted(items, key=lambda x: x.occ * rng.uniform(0.7, 1.3), reverse=True)
        cand = _finish(_best_fit(jittered, cap, window), cap)
        if len(cand) < len(best):
            best = cand
    return best


def _finish(bins: list[Bin], cap: float) -> list[Bin]:
    for bn in bins:
        bn.relevel()
    return _repack(bins, cap, tries=3)
