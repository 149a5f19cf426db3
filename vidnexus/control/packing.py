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
instances, keeps the best of a few item orders and empties bins once more trying every duty cycle
where some batch grows (:func:`empty_bins`; the few cycles of a merge miss a shared cycle that
only an intermediate batch boundary gives).

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
from math import ceil
from dataclasses import dataclass
from typing import Sequence

from vidnexus.contracts.profile import Profile, best_throughput_batch

__all__ = ["LatencyTable", "latency_table", "Item", "make_item", "Bin", "pack", "best_fit", "repack",
           "saturated_batch", "least_cycle", "empty_bins", "EPS"]

EPS = 1e-9
RATE_EPS = 1e-6
WINDOW = 4
"""Best fit looks for this many feasible bins (Nexus looks at all); 1 (the fullest that fits) above
``LARGE`` items, where more buys nothing measurable and costs time."""
LARGE = 2000
SCAN = 1 << 30
"""… among at most this many candidates."""
SMALL = 32
"""Up to this many residual loads, :func:`pack` also empties bins trying every duty cycle where some
batch grows (:func:`empty_bins`), as the exact solver does; above it the few cycles of
:meth:`Bin.try_add` are tried (the planner must stay fast at 10,000 sessions)."""


@dataclass(frozen=True)
class LatencyTable:
    """ℓ(b) for b = 1 … max_batch as planned: ``lat[b]`` (``lat[0]`` is 0)."""

    lat: tuple[float, ...]
    per_request: tuple[float, ...] = ()
    """``per_request[k]`` = min over j ≤ k of ℓ(j)/j: the least busy time per request up to batch k."""

    @property
    def max_batch(self) -> int:
        return len(self.lat) - 1


def latency_table(p: Profile, k_std: float = 1.0) -> LatencyTable:
    """The planning latencies of ``p``: mean + ``k_std`` × std at each batch size up to the largest
    measured, raised where needed so that they never fall as the batch grows (a noisy measure of a
    larger batch must not look cheaper than a smaller one; planning above the true mean is safe).

    Example:
        >>> latency_table(Profile((1, 2, 4), (0.010, 0.009, 0.020), (0.001, 0.001, 0.002))).lat
        (0.0, 0.011, 0.011, 0.016, 0.022)
    """
    out = [0.0]
    top = 0.0
    for b in range(1, p.max_batch + 1):
        mean = p.latency(b)
        v = mean + k_std * (p.planning_latency(b) - mean) if k_std else mean
        top = max(top, v)
        out.append(round(top, 12))
    per = [math.inf]
    for b in range(1, len(out)):
        per.append(min(per[-1], out[b] / b))
    return LatencyTable(tuple(out), tuple(per))


def saturated_batch(t: LatencyTable, slo_s: float) -> int:
    """The batch a whole device should run back to back: the highest throughput b/ℓ(b) among those
    with 2ℓ(b) ≤ SLO (a request that just misses a batch waits one), the smaller b on a tie; 0 if
    none. Nexus takes the largest such b, assuming throughput grows with b; measured profiles do not
    always oblige."""
    lat = t.lat  # non-decreasing in b: the sizes within the SLO are a prefix
    top = next((b - 1 for b in range(1, len(lat)) if 2 * lat[b] > slo_s + EPS), len(lat) - 1)
    return best_throughput_batch(lat.__getitem__, top)


class Item:
    """One residual load: its own batch ``b`` on its own duty cycle ``d`` (the cycle of least
    occupancy ``occ`` = ℓ(b)/d), ``w`` = ℓ(b), and ``cap``, the longest duty cycle its SLO allows
    (d + ℓ(⌈d·r⌉) ≤ L, which only tightens as d grows)."""

    __slots__ = ("sid", "model", "slo", "rate", "mem", "lat", "b", "d", "w", "occ", "cap", "min_occ")

    def __init__(self, sid: str, model: str, slo: float, rate: float, mem: int, lat: tuple[float, ...],
                 b: int, d: float, cap: float, min_occ: float = 0.0) -> None:
        self.sid, self.model, self.slo, self.rate, self.mem, self.lat = sid, model, slo, rate, mem, lat
        self.b, self.d, self.w, self.cap = b, d, lat[b], cap
        self.occ = self.w / d
        self.min_occ = min_occ
        """The least occupancy of this load on any duty cycle its SLO allows (a bound, for pruning)."""

    def batch_at(self, d: float) -> int:
        """The batch that serves the rate at duty cycle d."""
        b = ceil(d * self.rate - RATE_EPS)
        return b if b > 0 else 1

    def __repr__(self) -> str:
        return f"Item({self.sid!r}, b={self.b}, d={self.d:.4f}, cap={self.cap:.4f}, occ={self.occ:.3f})"


def busy_at(items: Sequence[Item], d: float, limit: float = math.inf) -> float:
    """Busy time of ``items`` sharing duty cycle d, each at :meth:`Item.batch_at` (inlined: the
    packer's innermost loop); stops counting past ``limit``."""
    busy = 0.0
    for y in items:
        b = ceil(d * y.rate - RATE_EPS)
        busy += y.lat[b if b > 0 else 1]
        if busy > limit:
            break
    return busy


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
    # At d = k/r the occupancy is r·ℓ(k)/k; between two such points it is higher.
    least = min(lat[lo] / cap, rate * t.per_request[lo - 1]) if lo > 1 and t.per_request else lat[lo] / cap
    return Item(sid, model, slo, rate, mem, lat, best_b, best_d, cap, min(least, best_occ))


class Bin:
    """One shared device: its items and their latencies ``ws`` at duty cycle ``d`` (≤ ``cap``, the
    longest cycle every item's SLO allows)."""

    __slots__ = ("d", "cap", "busy", "floor", "items", "ws", "mem", "mem_total", "tag")

    def __init__(self, item: Item, tag: str | None = None) -> None:
        self.tag = tag  # the device it runs on, when known
        self.d = item.d
        self.cap = item.cap
        self.busy = item.w
        self.floor = item.lat[1]  # Σ ℓ(1): no duty cycle makes the items less busy than this
        self.items = [item]
        self.ws = [item.w]
        self.mem = {item.model: item.mem}
        self.mem_total = item.mem

    @classmethod
    def at(cls, items: Sequence[Item], d: float, memory_capacity: float = math.inf, tag: str | None = None
           ) -> "Bin | None":
        """These items on duty cycle d, if they fit there (SLOs, busy time, memory); else None."""
        if not items or any(x.cap < d - EPS for x in items):
            return None
        bn = cls(items[0], tag)
        for x in items[1:]:
            bn.items.append(x)
            bn.floor += x.lat[1]
            bn.cap = min(bn.cap, x.cap)
            if x.model not in bn.mem:
                bn.mem[x.model] = x.mem
                bn.mem_total += x.mem
        bn.d = d
        bn.ws = [x.lat[x.batch_at(d)] for x in items]
        bn.busy = sum(bn.ws)
        return bn if bn.busy <= d + EPS and bn.mem_total <= memory_capacity else None

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
        return busy_at(self.items, d, limit)

    def try_add(self, x: Item, cap: float, stretch: bool = True) -> tuple[float, float] | None:
        """(duty cycle, busy time) of the best way to add ``x``, or None if it does not fit: on the
        shorter of the two own cycles (Nexus MERGENODES) or, with ``stretch``, on the longest cycle
        both allow when that is better."""
        if (self.mem_total if x.model in self.mem else self.mem_total + x.mem) > cap:
            return None
        # Every load runs at least one request a cycle: no cycle shorter than Σ ℓ(1) can hold them
        # (at 10,000 low-rate sessions, most of the bins looked at fail here, without a busy_at).
        floor = self.floor + x.lat[1]
        if floor > min(self.cap, x.cap) + EPS:
            return None
        best: tuple[float, float] | None = None
        if x.d >= self.d:  # x runs on this bin's cycle: only its own batch to look up
            b = ceil(self.d * x.rate - RATE_EPS)
            busy = self.busy + x.lat[b if b > 0 else 1]
            if busy <= self.d + EPS:
                best = (self.d, busy)
        elif floor <= x.d + EPS:
            d = x.d
            busy = x.w + self.busy_at(d, d + EPS)
            if busy <= d + EPS:
                best = (d, busy)
        d = min(self.cap, x.cap)
        if stretch and (best is None or d > best[0] + EPS):
            busy = x.lat[x.batch_at(d)] + self.busy_at(d, d + EPS)
            if busy <= d + EPS and (best is None or busy / d < best[1] / best[0]):
                best = (d, busy)
        return best

    def add(self, x: Item, d: float) -> None:
        self.items.append(x)
        self.floor += x.lat[1]
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
        self.floor -= x.lat[1]
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


class _Index:
    """Bins in order of idle time (d − busy), for best-fit candidate search."""

    def __init__(self, bins: Sequence[Bin]) -> None:
        self.order = sorted(bins, key=lambda b: b.d - b.busy)
        self.keys = [b.d - b.busy for b in self.order]

    def remove(self, bn: Bin) -> None:
        k = bisect.bisect_left(self.keys, bn.d - bn.busy)
        while self.order[k] is not bn:
            k += 1
        del self.order[k], self.keys[k]

    def insert(self, bn: Bin) -> None:
        key = bn.d - bn.busy
        k = bisect.bisect_left(self.keys, key)
        self.order.insert(k, bn)
        self.keys.insert(k, key)

    def best(self, x: Item, cap: float, window: int, scan: int, skip: Bin | None = None
             ) -> tuple[Bin, float] | None:
        """The bin x fills best, and the duty cycle: among bins with at least ℓ(1) of x idle (the
        least x can add), the fullest first, until ``window`` fit or ``scan`` were looked at; first
        on Nexus's merge rule, then (for up to ``window`` bins) stretching the cycle."""
        keys, order = self.keys, self.order
        start = bisect.bisect_left(keys, x.lat[1] - EPS)
        lat1, xcap = x.lat[1], x.cap
        for stretch in (False, True):
            best: Bin | None = None
            best_occ, best_d = -1.0, 0.0
            seen = 0
            i = start
            end = min(len(order), start + (scan if not stretch else window))
            while i < end:
                bn = order[i]
                i += 1
                if bn is skip or bn.floor + lat1 > (bn.cap if bn.cap < xcap else xcap) + EPS:
                    continue   # try_add's first test, inlined: most bins looked at fail it
                r = bn.try_add(x, cap, stretch)
                if r is None:
                    continue
                occ = r[1] / r[0]
                if occ > best_occ:
                    best, best_occ, best_d = bn, occ, r[0]
                seen += 1
                if seen >= window:
                    break
            if best is not None:
                return best, best_d
        return None


def best_fit(items: Sequence[Item], cap: float = math.inf, window: int = 8, bins: Sequence[Bin] = (),
             scan: int = 64) -> list[Bin]:
    """Place each item into the feasible bin of highest resulting occupancy (Nexus best fit, on the
    candidates of :meth:`_Index.best`), or a new bin; ``bins`` are already open (updated in place)."""
    bins = list(bins)
    index = _Index(bins)
    for x in items:
        found = index.best(x, cap, window, scan)
        if found is None:
            bn = Bin(x)
            bins.append(bn)
        else:
            bn, d = found
            index.remove(bn)
            bn.add(x, d)
        index.insert(bn)
    return bins


def repack(bins: Sequence[Bin], cap: float = math.inf, tries: int = 8, window: int = 8, scan: int = 256
           ) -> list[Bin]:
    """Local search: empty the emptiest bins into the others (best fit, largest item first) when
    every item of one finds a place; stop after ``tries`` bins in a row that would not empty."""
    bins = list(bins)
    index = _Index(bins)
    failed = 0
    for victim in sorted(bins, key=lambda b: b.busy / b.d):
        if failed >= tries or len(index.order) <= 1:
            break
        moved: list[tuple[Item, Bin]] = []
        index.remove(victim)
        for x in sorted(victim.items, key=lambda y: y.occ, reverse=True):
            found = index.best(x, cap, window, scan)
            if found is None:
                break
            bn, d = found
            index.remove(bn)
            bn.add(x, d)
            index.insert(bn)
            moved.append((x, bn))
        if len(moved) == len(victim.items):
            failed = 0
            continue
        for x, bn in moved:  # undo: the bins keep a feasible (maybe shorter) cycle, then relevel
            index.remove(bn)
            bn.remove(x)
            bn.relevel()
            index.insert(bn)
        index.insert(victim)
        failed += 1
    return index.order


def pack(items: Sequence[Item], memory_capacity: float = math.inf, *, restarts: int | None = None,
         seed: int = 0, window: int | None = None, scan: int | None = None) -> list[Bin]:
    """Residual items onto as few devices as this finds (see the module docstring). ``restarts``
    extra shuffled orders are tried (default: more for fewer items), the best result kept."""
    if not items:
        return []
    cap = memory_capacity
    window, scan = window or (WINDOW if len(items) <= LARGE else 1), scan or SCAN
    order = sorted(items, key=lambda x: x.occ, reverse=True)
    n = len(items)
    every_cycle = n <= SMALL
    best = _finish(best_fit(order, cap, window, scan=scan), cap, every_cycle)
    extra = restarts if restarts is not None else (24 if n <= 32 else 8 if n <= 128 else 0)
    rng = random.Random(seed)
    for _ in range(extra):
        jittered = sorted(items, key=lambda x: x.occ * rng.uniform(0.7, 1.3), reverse=True)
        cand = _finish(best_fit(jittered, cap, window, scan=scan), cap, every_cycle)
        if len(cand) < len(best):
            best = cand
    return best


def _finish(bins: list[Bin], cap: float, every_cycle: bool) -> list[Bin]:
    for bn in bins:
        bn.relevel()
    out = repack(bins, cap)
    return empty_bins(out, cap) if every_cycle else out


def least_cycle(items: Sequence[Item], cap: float = math.inf) -> tuple[float, float] | None:
    """(duty cycle, busy time) of least occupancy for ``items`` sharing one device, or None when they
    do not fit (busy time over the cycle at every cycle, or the models' memory over ``cap``). Only
    the points where some batch grows (d = k/r) and the longest cycle every SLO allows need trying:
    in between, the busy time is constant and the SLOs only tighten as d grows.

    Example (Nexus Table 2: A and B share a 125 ms cycle, A at batch 8 and B at 4):
        >>> ta = latency_table(Profile((4, 8, 16), (0.050, 0.075, 0.100)))
        >>> tb = latency_table(Profile((4, 8, 16), (0.050, 0.090, 0.125)))
        >>> d, busy = least_cycle([make_item("A", "A", 0.2, 64, ta), make_item("B", "B", 0.25, 32, tb)])
        >>> round(d, 3), round(busy, 3)
        (0.125, 0.125)
    """
    if not items or sum({x.model: x.mem for x in items}.values()) > cap:
        return None
    top = min(x.cap for x in items)
    cands = {top}
    for x in items:
        cands.update(k / x.rate for k in range(1, math.floor(top * x.rate + RATE_EPS) + 1))
    best: tuple[float, float] | None = None
    for d in cands:
        if d <= 0:
            continue
        busy = busy_at(items, d, d + EPS)
        if busy <= d + EPS and (best is None or busy / d < best[1] / best[0]):
            best = (d, busy)
    return best


def empty_bins(bins: Sequence[Bin], cap: float = math.inf) -> list[Bin]:
    """Local search over every duty cycle (for small instances: each check tries every batch
    boundary, :func:`least_cycle`): empty a bin, the emptiest first, when each of its items fits
    into some other bin on some cycle (the one it fills fullest, largest item first); repeat until
    no bin empties. The bins that take items move to their best cycle."""
    bins = list(bins)
    while len(bins) > 1:
        for victim in sorted(bins, key=lambda b: b.busy / b.d):
            others = [b for b in bins if b is not victim]
            groups: list[list[Item]] = [list(b.items) for b in others]
            cycles: dict[int, float] = {}  # group → the cycle it found when it last took an item
            for x in sorted(victim.items, key=lambda y: y.occ, reverse=True):
                best, best_occ, best_d = -1, -1.0, 0.0
                for k, g in enumerate(groups):
                    r = least_cycle([*g, x], cap)
                    if r is not None and r[1] / r[0] > best_occ:
                        best, best_occ, best_d = k, r[1] / r[0], r[0]
                if best < 0:
                    break
                groups[best].append(x)
                cycles[best] = best_d
            else:
                new = []
                for k, (b, g) in enumerate(zip(others, groups)):
                    if k not in cycles:
                        new.append(b)
                        continue
                    nb = Bin.at(g, cycles[k], cap, tag=b.tag)
                    assert nb is not None, "least_cycle found a cycle Bin.at refuses"
                    new.append(nb)
                bins = new
                break
        else:
            break
    return bins
