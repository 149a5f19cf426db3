"""Squishy bin packing (Nexus SOSP §6.1, Algorithm 1): place sessions on devices so each meets its
SLO at the fewest devices, with device memory as a second capacity. Pure.

A session S = ⟨model, SLO L, rate R⟩ with profile ℓ(b):

1. *Saturate*: B = max b with 2ℓ(B) ≤ L; T = B/ℓ(B); ⌊R/T⌋ whole devices run S at batch B.
2. *Residue*: for the rest r, b = max b with ℓ(b) + b/r ≤ L; duty cycle d = b/r; occupancy ℓ(b)/d.
3. Residual loads, by occupancy descending, merge best-fit into existing nodes: the merged duty cycle
   is the smaller one, the other sessions' batches shrink to ⌈d·r⌉ (integer, still meeting the rate),
   and the merge is feasible iff Σℓ(b) ≤ d, every session keeps d + ℓ(b) ≤ L, and memory fits.

Example (Nexus Table 2): A at b=8 and B at b=4 share one device with a 125 ms duty cycle; C gets its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache
from itertools import chain
from typing import Mapping, Sequence

import numpy as np

from vidnexus.contracts.profile import Profile

__all__ = ["SessionLoad", "Allocation", "Node", "Plan", "plan", "saturate", "residue", "merge_nodes", "one_more_saturated",
           "lower_bound", "best_duty_cycle", "repack"]

EPS = 1e-9
SCAN_MAX = 32
REPACK_EMPTIEST = 32
"""Nodes the local search after best fit tries to pair up (the emptiest ones)."""
"""Nodes a residual tries one by one at most, fullest first (the array test covers the rest)."""


@dataclass(frozen=True)
class SessionLoad:
    """A session to place: its model, latency SLO (s), request rate (req/s) and model memory."""

    session_id: str
    model: str
    slo_s: float
    rate: float
    memory_bytes: int = 0


@dataclass(frozen=True)
class Allocation:
    """One session's share of a node: batch size per duty cycle and the rate it serves there."""

    session_id: str
    model: str
    batch: int
    rate: float
    latency_s: float
    slo_s: float
    memory_bytes: int = 0


@dataclass(frozen=True)
class Node:
    """One device's schedule: sessions run round-robin once per duty cycle."""

    duty_cycle_s: float
    allocations: tuple[Allocation, ...]
    saturated: bool = False
    device_id: str | None = None

    @cached_property
    def busy_s(self) -> float:
        return sum(a.latency_s for a in self.allocations)

    @cached_property
    def occupancy(self) -> float:
        return self.busy_s / self.duty_cycle_s if self.duty_cycle_s > 0 else 0.0

    @cached_property
    def memory_bytes(self) -> int:
        return sum({a.model: a.memory_bytes for a in self.allocations}.values())

    def sessions(self) -> set[str]:
        return {a.session_id for a in self.allocations}


@dataclass(frozen=True)
class Plan:
    nodes: tuple[Node, ...]
    infeasible: tuple[tuple[str, str], ...] = ()
    moved: int = 0

    @property
    def devices(self) -> int:
        return len(self.nodes)

    def rate_of(self, session_id: str) -> float:
        return sum(a.rate for n in self.nodes for a in n.allocations if a.session_id == session_id)

    def check(self, memory_capacity: float = math.inf) -> list[str]:
        """Every violated constraint, as text (empty when the plan is valid)."""
        bad = []
        for i, n in enumerate(self.nodes):
            if n.busy_s > n.duty_cycle_s + EPS:
                bad.append(f"node {i}: busy {n.busy_s:.4f} s > duty cycle {n.duty_cycle_s:.4f} s")
            if n.memory_bytes > memory_capacity:
                bad.append(f"node {i}: memory {n.memory_bytes} > {memory_capacity}")
            for a in n.allocations:
                worst = (n.duty_cycle_s if not n.saturated else a.latency_s) + a.latency_s
                if worst > a.slo_s + EPS:
                    bad.append(f"node {i}: {a.session_id} worst case {worst:.4f} s > SLO {a.slo_s:.4f} s")
                if a.batch / n.duty_cycle_s < a.rate - 1e-6:
                    bad.append(f"node {i}: {a.session_id} serves {a.batch / n.duty_cycle_s:.2f} < {a.rate:.2f} req/s")
        return bad


def saturate(s: SessionLoad, p: Profile) -> tuple[int, float]:
    """(B, T): the largest batch with 2ℓ(B) ≤ SLO and its throughput; (0, 0) if none."""
    b = p.max_batch_within(s.slo_s / 2 + EPS)
    return (b, p.throughput(b)) if b else (0, 0.0)


def residue(s: SessionLoad, rate: float, p: Profile) -> Node | None:
    """The residual node of ``rate`` req/s: the largest b with ℓ(b) + b/r ≤ SLO, duty cycle d = b/r.

    A rate so low that even one request takes longer than the SLO to arrive (ℓ(1) + 1/r > SLO) runs
    at b = 1 on the longest duty cycle the SLO allows, d = SLO − ℓ(1), which serves 1/d ≥ r.
    None when no batch fits (ℓ(1) > SLO/2 at this rate, or the device could not keep up).
    """
    best = 0
    for b in range(1, p.max_batch + 1):
        d = b / rate
        if p.latency(b) + d <= s.slo_s + EPS and p.latency(b) <= d + EPS:
            best = b
        elif p.latency(b) + d > s.slo_s + EPS:
            break
    if best:
        d = best / rate
    else:
        d = s.slo_s - p.latency(1)
        if d < p.latency(1) - EPS or 1 / d < rate:
            return None
        best = 1
    return Node(d, (Allocation(s.session_id, s.model, best, rate, p.latency(best), s.slo_s, s.memory_bytes),))


def one_more_saturated(s: SessionLoad, rest: float, p: Profile) -> Node | None:
    """A residual just under the saturated throughput may fit no shared duty cycle but still fits a
    whole device running batch B back to back (worst case 2ℓ(B) ≤ SLO)."""
    b, t = saturate(s, p)
    if not b or rest > t + 1e-9:
        return None
    return Node(p.latency(b), (Allocation(s.session_id, s.model, b, rest, p.latency(b), s.slo_s, s.memory_bytes),),
                saturated=True)


def _merged(n1: Node, n2: Node, profiles: Mapping[str, Profile],
            memory_capacity: float) -> tuple[float, float, list[tuple[Allocation, int, float]]] | None:
    """(duty cycle, busy time, [(allocation, new batch, new latency)]) of merging two nodes, or None:
    the feasibility test of :func:`merge_nodes` without building the node (the planner tries many)."""
    d = min(n1.duty_cycle_s, n2.duty_cycle_s)
    busy = 0.0
    out = []
    # The second node first: the planner passes the residual there, whose test fails most often.
    for a in chain(n2.allocations, n1.allocations):
        b = max(1, math.ceil(d * a.rate - 1e-6))  # integer batch that still meets the rate
        lat = a.latency_s if b == a.batch else profiles[a.model].latency(b)
        busy += lat
        if d + lat > a.slo_s + EPS or busy > d + EPS:
            return None
        out.append((a, b, lat))
    k = len(n2.allocations)
    out = out[k:] + out[:k]  # in node order: the first node's allocations, then the second's
    if memory_capacity != math.inf and n1.memory_bytes + n2.memory_bytes > memory_capacity:
        if sum({a.model: a.memory_bytes for a, _, _ in out}.values()) > memory_capacity:
            return None
    return d, busy, out


def merge_nodes(n1: Node, n2: Node, profiles: Mapping[str, Profile], memory_capacity: float = math.inf) -> Node | None:
    """Merge two residual nodes on the shorter duty cycle (Nexus MERGENODES), or None if infeasible."""
    m = _merged(n1, n2, profiles, memory_capacity)
    if m is None:
        return None
    d, _, out = m
    return Node(d, tuple(a if b == a.batch and lat == a.latency_s else replace(a, batch=b, latency_s=lat)
                         for a, b, lat in out))


@lru_cache(maxsize=256)
def _latency_table(p: Profile) -> tuple[float, ...]:
    """ℓ(b) for b = 0…max_batch (index 0 unused)."""
    return (0.0, *(p.latency(b) for b in range(1, p.max_batch + 1)))


def best_duty_cycle(loads: Sequence[Allocation], profiles: Mapping[str, Profile],
                    memory_capacity: float = math.inf) -> Node | None:
    """A feasible node for these residual loads, trying every duty cycle where a batch size changes."""
    if sum({a.model: a.memory_bytes for a in loads}.values()) > memory_capacity:
        return None
    tables = [_latency_table(profiles[a.model]) for a in loads]
    d_max = min(a.slo_s - lat[1] for a, lat in zip(loads, tables))
    cands = {d_max}
    for a, lat in zip(loads, tables):
        cands.update(k / a.rate for k in range(1, len(lat)) if k / a.rate <= d_max + EPS)
    for d in sorted(cands, reverse=True):  # longer cycles first: larger, cheaper batches
        busy = 0.0
        batches = []
        for a, lat in zip(loads, tables):
            b = max(1, math.ceil(d * a.rate - 1e-6))
            if b >= len(lat) or d + lat[b] > a.slo_s + EPS:
                break
            busy += lat[b]
            if busy > d + EPS:
                break
            batches.append(b)
        else:
            return Node(d, tuple(Allocation(a.session_id, a.model, b, a.rate, lat[b], a.slo_s, a.memory_bytes)
                                 for a, b, lat in zip(loads, batches, tables)))
    return None


def lower_bound(sessions: Sequence[SessionLoad], profiles: Mapping[str, Profile]) -> float:
    """Σ R_i / T_i with T_i the saturated throughput: no plan uses fewer devices."""
    total = 0.0
    for s in sessions:
        _, t = saturate(s, profiles[s.model])
        if t > 0:
            total += s.rate / t
    return total


def plan(
    sessions: Sequence[SessionLoad],
    profiles: Mapping[str, Profile],
    memory_capacity: float = math.inf,
) -> Plan:
    """Nexus Algorithm 1. Sessions that no batch size can serve within their SLO are reported in
    ``infeasible`` with the reason; everything else is placed."""
    nodes: list[Node] = []
    infeasible: list[tuple[str, str]] = []
    residuals: list[Node] = []
    for s in sessions:
        p = profiles[s.model]
        if s.rate <= 0:
            continue
        if s.memory_bytes > memory_capacity:
            infeasible.append((s.session_id, f"model {s.model} needs {s.memory_bytes} bytes, devices hold {memory_capacity:.0f}"))
            continue
        b_sat, t_sat = saturate(s, p)
        rest = s.rate
        if b_sat:
            whole = int(s.rate // t_sat)
            alloc = Allocation(s.session_id, s.model, b_sat, t_sat, p.latency(b_sat), s.slo_s, s.memory_bytes)
            nodes.extend(Node(p.latency(b_sat), (alloc,), saturated=True) for _ in range(whole))
            rest = s.rate - whole * t_sat
        if rest <= 1e-9:
            continue
        node = residue(s, rest, p) or one_more_saturated(s, rest, p)
        if node is None:
            infeasible.append((s.session_id, f"no batch size of {s.model} meets the {s.slo_s * 1000:.0f} ms SLO "
                                             f"at {rest:.1f} req/s (ℓ(1) = {p.latency(1) * 1000:.1f} ms)"))
            continue
        residuals.append(node)
    residuals.sort(key=lambda n: n.occupancy, reverse=True)
    packed = repack(_pack(residuals, profiles, memory_capacity), profiles, memory_capacity, REPACK_EMPTIEST)
    return Plan(tuple(nodes + packed), tuple(infeasible))


def repack(nodes: list[Node], profiles: Mapping[str, Profile], memory_capacity: float = math.inf,
           emptiest: int = REPACK_EMPTIEST) -> list[Node]:
    """Local search after best fit: merge two of the ``emptiest`` nodes wherever some duty cycle —
    not only the shorter of theirs, as Algorithm 1's merge — lets one device run both
    (:func:`best_duty_cycle`); repeated while it frees a device."""
    shared = sorted((n for n in nodes if not n.saturated), key=lambda n: n.occupancy)[:emptiest]
    t_max: dict[str, float] = {}

    def floor(allocs: Sequence[Allocation]) -> float:  # the least occupancy at any duty cycle (see _pack)
        out = 0.0
        for a in allocs:
            if a.model not in t_max:
                p = profiles[a.model]
                t_max[a.model] = max(b / p.latency(b) for b in range(1, p.max_batch + 1))
            out += a.rate / t_max[a.model]
        return out

    keep = {id(n) for n in shared}
    others = [n for n in nodes if id(n) not in keep]
    merged_any = True
    while merged_any and len(shared) > 1:
        merged_any = False
        for i in range(len(shared)):
            for j in range(i + 1, len(shared)):
                n1, n2 = shared[i], shared[j]
                if floor(n1.allocations) + floor(n2.allocations) > 1 + 1e-6:
                    continue
                m = best_duty_cycle(n1.allocations + n2.allocations, profiles, memory_capacity)
                if m is not None:
                    shared[j] = m
                    del shared[i]
                    merged_any = True
                    break
            if merged_any:
                break
    # Then dissolve a node whose sessions all fit elsewhere, one by one (emptiest node first).
    for victim in sorted(shared, key=lambda n: n.occupancy):
        if victim not in shared:
            continue
        trial = [n for n in shared if n is not victim]
        for a in victim.allocations:
            need = floor((a,))
            for k, n in enumerate(trial):
                if floor(n.allocations) + need > 1 + 1e-6:
                    continue
                m = best_duty_cycle(n.allocations + (a,), profiles, memory_capacity)
                if m is not None:
                    trial[k] = m
                    break
            else:
                break
        else:
            shared = trial
    return others + shared


def _latencies(p: Profile, b: "np.ndarray") -> "np.ndarray":
    """``p.latency`` of every batch size in ``b`` (integers ≥ 1), vectorised the same way."""
    sizes, means = np.asarray(p.sizes, float), np.asarray(p.mean_s, float)
    out = np.interp(b, sizes, means)
    over = b > sizes[-1]
    if over.any():
        if len(sizes) == 1:
            out[over] = means[0] * b[over] / sizes[0]
        else:
            slope = (means[-1] - means[-2]) / (sizes[-1] - sizes[-2])
            out[over] = np.maximum(means[-1], means[-1] + slope * (b[over] - sizes[-1]))
    result: np.ndarray = out
    return result


def _pack(residuals: list[Node], profiles: Mapping[str, Profile], memory_capacity: float) -> list[Node]:
    """Best-fit merging of the residual nodes (by occupancy, descending) into as few nodes as it can.

    A node whose duty cycle is no longer than the residual's keeps its batches when merged (the
    residual's batch shrinks to the node's cycle): those merges are tested for every node at once
    with arrays. The others (the node's batches would shrink too, or a whole-device node) are tested
    one by one, fullest first, up to :data:`SCAN_MAX` of them. Same plans as testing every node one
    by one wherever the array test applies; the bench compares both (``plan_ms``, devices/LB).
    """
    placed: list[Node] = []
    n_max = len(residuals)
    duty, busy, occ = np.zeros(n_max), np.zeros(n_max), np.zeros(n_max)
    floor = np.zeros(n_max)  # occupancy no merge can bring a node under (see below)
    exact = np.zeros(n_max, bool)  # test one by one: a whole-device node, or memory to check
    t_max: dict[str, float] = {}

    def floor_of(n: Node) -> float:
        # A batch b' at any duty cycle d has b' ≥ d·rate, so its share of the cycle is
        # ℓ(b')/d ≥ rate·ℓ(b')/b' ≥ rate / (the model's best throughput): a bound that holds
        # for measured profiles too, where ℓ(b)/b need not fall as b grows.
        out = 0.0
        for a in n.allocations:
            if a.model not in t_max:
                p = profiles[a.model]
                t_max[a.model] = max(b / p.latency(b) for b in range(1, p.max_batch + 1))
            out += a.rate / t_max[a.model]
        return out

    for r in residuals:
        k = len(placed)
        d_r, r_floor = r.duty_cycle_s, floor_of(r)
        best_i, best_occ = -1, -1.0
        fits = floor[:k] + r_floor <= 1 + 1e-6
        if len(r.allocations) == 1 and memory_capacity == math.inf:
            a = r.allocations[0]
            arr = ~exact[:k] & (duty[:k] <= d_r)  # exact test, no bound needed
            idx = np.flatnonzero(arr)
            if len(idx):
                d = duty[idx]
                b = np.maximum(1, np.ceil(d * a.rate - 1e-6))
                lat = _latencies(profiles[a.model], b)
                new_busy = busy[idx] + lat
                ok = (d + lat <= a.slo_s + EPS) & (new_busy <= d + EPS)
                if ok.any():
                    m_occ = np.where(ok, new_busy / d, -1.0)
                    j = int(np.argmax(m_occ))
                    best_i, best_occ = int(idx[j]), float(m_occ[j])
            one_by_one = np.flatnonzero(fits & ~arr)
        else:
            one_by_one = np.flatnonzero(fits)
        if len(one_by_one) > SCAN_MAX:
            one_by_one = one_by_one[np.argpartition(-occ[one_by_one], SCAN_MAX)[:SCAN_MAX]]
        for i in one_by_one[np.argsort(-occ[one_by_one], kind="stable")]:
            m = _merged(placed[i], r, profiles, memory_capacity)
            if m is not None and m[1] / m[0] > best_occ:
                best_i, best_occ = int(i), m[1] / m[0]
        merged = merge_nodes(placed[best_i], r, profiles, memory_capacity) if best_i >= 0 else None
        if merged is None:  # (an array test at the float boundary the exact test refuses: a new node)
            best_i = k
            placed.append(r)
            merged = r
            floor[best_i] = r_floor
        else:
            placed[best_i] = merged
            floor[best_i] += r_floor
        duty[best_i], busy[best_i], occ[best_i] = merged.duty_cycle_s, merged.busy_s, merged.occupancy
        exact[best_i] = merged.saturated or memory_capacity != math.inf
    return placed

