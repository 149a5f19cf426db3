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

__all__ = ["LatencyTable", "latency_table", "Item", "make_item", "Bin", "pack", "best_fit", "repack",
           "saturated_batch", "EPS"]

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
    """One residual load: its own batch ``b`` on its own duty cycle ``d`` (the cycle of least
    occupancy ``occ`` = ℓ(b)/d), ``w`` = ℓ(b), and ``cap``, the longest duty cycle its SLO allows
    (d + ℓ(⌈d·r⌉) ≤ L, which only tightens as d grows)."""

    __slots__ = ("sid", "model", "slo", "rate", "mem", "lat", "b", "d", "w", "occ", "cap")

    def __init__(self, sid: str, model: str, slo: float, rate: float, mem: int, lat: tuple[float, ...],
                 b: int, d: float, cap: float) -> None:
        self.sid, self.model, self.slo, self.rate, self.mem, self.lat = sid, model, slo, rate, mem, lat
        self.b, self.d, self.w, self.cap = b, d, lat[b], cap
        self.occ = self.w / d

    def batch_at(self, d: float) -> int:
        """The batch that serves the rate at duty cycle d."""
        return max(1, math.ceil(d * self.rate - RATE_EPS))

    def __repr__(self) -> str:
        return f"Item({self.sid!r}, b={self.b}, d={self.d:.4f}, cap={self.cap:.4f}, occ={self.occ:.3f})"


def make_item(sid: str, model: str, slo: float, rate: float, t: LatencyTable, mem: int = 0) -> Item | None:
    """The residual load of ``rate`` req/s (Nexus SCHEDULERESIDUE, generalised): the longest duty
    cycle the SLO allows, cap = max d with d + ℓ(⌈d·r⌉) ≤ L, and on it or the batch boundaries
    just below it (d = b/r), the cycle of least occupancy ℓ(⌈d·r⌉)/d ≤ 1. Nexus's rule (the largest b
    with ℓ(b) + b/r ≤ L) is one of those boundaries; a rate so low that even one request takes
    longer than the SLO to arrive runs at b = 1 on d = SLO − ℓ(1). None when nothing fits."""
    lat = t.lat
    top = t.max_batch
    lo, hi = 0, top  # largest b whose interval ((b−1)/r, b/r] holds a feasible d
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if (mid - 1) / rate + lat[mid] < slo - EPS:
            lo = mid
        else:
            hi = mid - 1
    if lo == 0:
        return None
    cap = min(lo / rate, slo - lat[lo])
    best_b, best_d, best_occ = 0, 0.0, math.inf
    for k in (lo, lo - 1, lo - 2):
        if k < 1:
            break
        d = cap if k == lo else k / rate
        if lat[k] <= d + EPS and lat[k] / d < best_occ - 1e-12:
            best_b, best_d, best_occ = k, d, lat[k] / d
    if not best_b:
        return None
    return Item(sid, model, slo, rate, mem, lat, best_b, best_d, cap)


class Bin:
    """One shared device: its items and their latencies ``ws`` at duty cycle ``d`` (≤ ``cap``, the
    longest cycle every item's SLO allows)."""

    __slots__ = ("d", "cap", "busy", "items", "ws", "mem", "mem_total", "tag")

    def __init__(self, item: Item, tag: str | None = None) -> None:
        self.tag = tag  # the device it runs on, when known
        self.d = item.d
        self.cap = item.cap
        self.busy = item.w
        self.items = [item]
        self.ws = [item.w]
        self.mem = {item.model: item.mem}
        self.mem_total = item.mem

    @property
    def free(self) -> float:
        return self.d - self.busy

    @property
    def occupancy(self) -> float:
        return self.busy / self.d

    def batches(self) -> list[int]:
        return [x.batch_at(self.d) for x in self.items]

    def busy_at(self, d: float, limit: float = math.inf) -> float:
        """Busy time of the items on duty cycle d (stops counting past ``limit``)."""
        busy = 0.0
        for y in self.items:
            busy += y.lat[y.batch_at(d)]
            if busy > limit:
                break
        return busy

    def try_add(self, x: Item, cap: float) -> tuple[float, float] | None:
        """(duty cycle, busy time) of the best way to add ``x``, or None if it does not fit: on the
        shorter of the two own cycles (Nexus MERGENODES) or stretched to the longest both allow."""
        if (self.mem_total if x.model in self.mem else self.mem_total + x.mem) > cap:
            return None
        best: tuple[float, float] | None = None
        if x.d >= self.d:  # x runs on this bin's cycle: only its own batch to look up
            busy = self.busy + x.lat[x.batch_at(self.d)]
            if busy <= self.d + EPS:
                best = (self.d, busy)
        else:
            d = x.d
            busy = x.w + self.busy_at(d, d + EPS)
            if busy <= d + EPS:
                best = (d, busy)
        d = min(self.cap, x.cap)
        if best is None or d > best[0] + EPS:
            busy = x.lat[x.batch_at(d)] + self.busy_at(d, d + EPS)
            if busy <= d + EPS and (best is None or busy / d < best[1] / best[0]):
                best = (d, busy)
        return best

    def add(self, x: Item, d: float) -> None:
        self.items.append(x)
        self.cap = min(self.cap, x.cap)
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
        self.cap = min(y.cap for y in self.items) if self.items else math.inf
        if all(y.model != x.model for y in self.items):
            self.mem_total -= self.mem.pop(x.model)

    def relevel(self) -> None:
        """Move to the duty cycle of least occupancy among the longest allowed (``cap``) and, for
        each item, the last batch boundary below it (larger batches: less busy time per request)."""
        cands = {self.cap}
        for y in self.items:
            k = math.floor(self.cap * y.rate + RATE_EPS)
            if k >= 1:
                cands.add(k / y.rate)
        best_d, best_occ = self.d, self.busy / self.d
        for d in cands:
            if d <= 0:
                continue
            busy = self.busy_at(d, d + EPS)
            if busy <= d + EPS and busy / d < best_occ - 1e-12:
                best_d, best_occ = d, busy / d
        if best_d != self.d:
            self.d = best_d
            self.ws = [y.lat[y.batch_at(best_d)] for y in self.items]
            self.busy = sum(self.ws)


def best_fit(items: Sequence[Item], cap: float = math.inf, window: int = 16, bins: Sequence[Bin] = ()) -> list[Bin]:
    """Place each item into the feasible bin of highest resulting occupancy (Nexus best fit),
    looking at the ``window`` fullest bins that have at least the idle time x needs at the
    shortest duty cycle anywhere (ℓ(1)); ``bins`` are already open (they are updated in place)."""
    bins = list(bins)
    order = sorted(bins, key=lambda b: b.free)  # bins by idle time, ascending
    frees = [b.free for b in order]
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


def repack(bins: Sequence[Bin], cap: float = math.inf, tries: int = 3) -> list[Bin]:
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
                bn.add(x, d)
            bins = sorted(others, key=lambda b: b.occupancy)
            failed = 0
            i = 0
        else:
            failed += 1
            i += 1
    return bins


def _try_with(bn: Bin, trial: dict[int, tuple[float, float, list[Item]]], x: Item, cap: float
              ) -> tuple[float, float] | None:
    """``bn.try_add(x)`` after the items this repack already sent to ``bn`` (on their cycle)."""
    pending = trial.get(id(bn))
    if pending is None:
        return bn.try_add(x, cap)
    d0, _, extra = pending
    mem = bn.mem_total + sum({y.model: y.mem for y in extra + [x] if y.model not in bn.mem}.values())
    if mem > cap:
        return None
    group = bn.items + extra + [x]
    best: tuple[float, float] | None = None
    for d in {min(d0, x.d), min(min(y.cap for y in group), d0 if x.d >= d0 else x.cap)}:
        busy = sum(y.lat[y.batch_at(d)] for y in group)
        if busy <= d + EPS and (best is None or busy / d < best[1] / best[0]):
            best = (d, busy)
    return best


def pack(items: Sequence[Item], memory_capacity: float = math.inf, *, window: int = 16, restarts: int | None = None,
         seed: int = 0) -> list[Bin]:
    """Residual items onto as few devices as this finds (see the module docstring). ``restarts``
    extra shuffled orders are tried (default: more for fewer items), the best result kept."""
    if not items:
        return []
    cap = memory_capacity
    order = sorted(items, key=lambda x: x.occ, reverse=True)
    best = _finish(best_fit(order, cap, window), cap)
    n = len(items)
    extra = restarts if restarts is not None else (24 if n <= 32 else 8 if n <= 128 else 0)
    rng = random.Random(seed)
    for _ in range(extra):
        jittered = sorted(items, key=lambda x: x.occ * rng.uniform(0.7, 1.3), reverse=True)
        cand = _finish(best_fit(jittered, cap, window), cap)
        if len(cand) < len(best):
            best = cand
    return best


def _finish(bins: list[Bin], cap: float) -> list[Bin]:
    for bn in bins:
        bn.relevel()
    return repack(bins, cap, tries=3)
