"""Squishy bin packing (Nexus SOSP §6.1, Algorithm 1): place sessions on devices so each meets its
SLO at the fewest devices, with device memory as a second capacity. Pure.

A session S = ⟨model, SLO L, rate R⟩ with a planning profile ℓ(b) (mean + k·std, never falling as b
grows: :func:`~vidnexus.control.packing.latency_table`):

1. *Saturate*: B = the batch of highest throughput b/ℓ(b) with 2ℓ(B) ≤ L (Nexus takes the largest,
   assuming throughput grows with b); T = B/ℓ(B); ⌊R/T⌋ whole devices run S at batch B.
2. *Residue*: the rest r runs on a duty cycle d ≤ its SLO's limit (d + ℓ(⌈d·r⌉) ≤ L) at batch ⌈d·r⌉.
3. Residual loads, by occupancy descending, merge best-fit into existing nodes: on the shorter duty
   cycle (Nexus MERGENODES) or the longest both allow, every batch ⌈d·r⌉; feasible iff Σℓ ≤ d and
   memory fits; then the emptiest nodes are emptied into the others where that works
   (:mod:`vidnexus.control.packing`, which also says how it stays fast at 10,000 sessions).

Example (Nexus Table 2): A at b=8 and B at b=4 share one device with a 125 ms duty cycle; C gets its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

from vidnexus.contracts.profile import Profile
from vidnexus.control.packing import EPS, RATE_EPS, Bin, Item, LatencyTable, latency_table, make_item, pack, saturated_batch

__all__ = ["SessionLoad", "Allocation", "Node", "Plan", "plan", "saturate", "residue", "merge_nodes", "one_more_saturated",
           "lower_bound", "split_lower_bound", "split", "Split", "bin_node", "EPS"]


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

    @property
    def busy_s(self) -> float:
        return sum(a.latency_s for a in self.allocations)

    @property
    def occupancy(self) -> float:
        return self.busy_s / self.duty_cycle_s if self.duty_cycle_s > 0 else 0.0

    @property
    def memory_bytes(self) -> int:
        return sum({a.model: a.memory_bytes for a in self.allocations}.values())

    def sessions(self) -> set[str]:
        return {a.session_id for a in self.allocations}


CHECK_TOL_S = 1e-6
""":meth:`Plan.check` allows a worst case 1 µs over the SLO: the packer compares sums of float
latencies with a 1 ns slack at each step, and a microsecond is far below any latency measured."""


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
                if worst > a.slo_s + CHECK_TOL_S:
                    bad.append(f"node {i}: {a.session_id} worst case {worst:.6f} s > SLO {a.slo_s:.6f} s")
                if a.batch < a.rate * n.duty_cycle_s - RATE_EPS - EPS:  # the packer's own rounding
                    bad.append(f"node {i}: {a.session_id} serves {a.batch / n.duty_cycle_s:.2f} < {a.rate:.2f} req/s")
        return bad


def _table(p: Profile, k_std: float) -> LatencyTable:
    return latency_table(p, k_std)


def saturate(s: SessionLoad, p: Profile, k_std: float = 1.0) -> tuple[int, float]:
    """(B, T): the batch a whole device runs back to back within the SLO (2ℓ(B) ≤ SLO) at the highest
    throughput, and that throughput; (0, 0) if none. ℓ is the planning latency (mean + ``k_std`` ×
    std, see :func:`~vidnexus.control.packing.latency_table`)."""
    t = _table(p, k_std)
    b = saturated_batch(t, s.slo_s)
    return (b, b / t.lat[b]) if b else (0, 0.0)


def _node(x: Item, d: float, b: int) -> Node:
    return Node(d, (Allocation(x.sid, x.model, b, x.rate, x.lat[b], x.slo, x.mem),))


def residue(s: SessionLoad, rate: float, p: Profile, k_std: float = 1.0) -> Node | None:
    """The residual node of ``rate`` req/s: the largest b with ℓ(b) + b/r ≤ SLO, duty cycle d = b/r.

    A rate so low that even one request takes longer than the SLO to arrive (ℓ(1) + 1/r > SLO) runs
    at b = 1 on the longest duty cycle the SLO allows, d = SLO − ℓ(1), which serves 1/d ≥ r.
    None when no batch fits (ℓ(1) > SLO/2 at this rate, or the device could not keep up).
    """
    x = make_item(s.session_id, s.model, s.slo_s, rate, _table(p, k_std), s.memory_bytes)
    return None if x is None else _node(x, x.d, x.b)


def one_more_saturated(s: SessionLoad, rest: float, p: Profile, k_std: float = 1.0) -> Node | None:
    """A residual just under the saturated throughput may fit no shared duty cycle but still fits a
    whole device running batch B back to back (worst case 2ℓ(B) ≤ SLO)."""
    t = _table(p, k_std)
    b = saturated_batch(t, s.slo_s)
    if not b or rest > b / t.lat[b] + 1e-9:
        return None
    return Node(t.lat[b], (Allocation(s.session_id, s.model, b, rest, t.lat[b], s.slo_s, s.memory_bytes),),
                saturated=True)


def merge_nodes(n1: Node, n2: Node, profiles: Mapping[str, Profile], memory_capacity: float = math.inf,
                k_std: float = 1.0) -> Node | None:
    """Merge two residual nodes on the shorter duty cycle (Nexus MERGENODES), or None if infeasible."""
    d = min(n1.duty_cycle_s, n2.duty_cycle_s)
    allocs = []
    tables: dict[str, LatencyTable] = {}
    for a in n1.allocations + n2.allocations:
        t = tables.setdefault(a.model, _table(profiles[a.model], k_std))
        b = max(1, math.ceil(d * a.rate - 1e-6))  # integer batch that still meets the rate
        lat = t.lat[min(b, t.max_batch)]
        if b > t.max_batch or d + lat > a.slo_s + EPS:
            return None
        allocs.append(replace(a, batch=b, latency_s=lat))
    node = Node(d, tuple(allocs))
    if node.busy_s > d + EPS or node.memory_bytes > memory_capacity:
        return None
    return node


def lower_bound(sessions: Sequence[SessionLoad], profiles: Mapping[str, Profile], k_std: float = 1.0) -> float:
    """Σ R_i / T_i with T_i the highest throughput a device can give session i within its SLO
    (:func:`saturate`): no plan uses fewer devices."""
    total = 0.0
    for s in sessions:
        _, t = saturate(s, profiles[s.model], k_std)
        if t > 0:
            total += s.rate / t
    return total


def split_lower_bound(sessions: Sequence[SessionLoad], profiles: Mapping[str, Profile], memory_capacity: float = math.inf,
                      k_std: float = 1.0) -> int:
    """The fewest devices of any plan that runs each session's ⌊R/T⌋ saturated devices first (Nexus's
    SCHEDULESATURATE: the plans of :func:`plan` and of the exact solver, ``control.milp``): those
    devices, plus what the residual loads need at the least, whatever shares their devices —
    ⌈Σ least occupancy⌉ (a residual of rate r costs at least min ℓ(⌈d·r⌉)/d over every duty cycle d
    its SLO allows, ``Item.min_occ``, not r/T: a small batch does not amortize ℓ's fixed part), and
    at least one device per residual whose least occupancy passes 1/2 (no two of them share one),
    plus one per residual that fits no shared cycle. At least ⌈:func:`lower_bound`⌉.

    Example (Nexus Table 2: Σ r/T says one device; the residuals' batches are too small to amortize
    ℓ's fixed part, so two are needed, and the plan uses two):
        >>> from vidnexus.contracts.profile import Profile
        >>> profs = {"A": Profile((4, 8, 16), (0.050, 0.075, 0.100)),
        ...          "B": Profile((4, 8, 16), (0.050, 0.090, 0.125)),
        ...          "C": Profile((4, 8, 16), (0.060, 0.095, 0.125))}
        >>> load = [SessionLoad("A", "A", 0.200, 64), SessionLoad("B", "B", 0.250, 32), SessionLoad("C", "C", 0.250, 32)]
        >>> split_lower_bound(load, profs, k_std=0), math.ceil(lower_bound(load, profs, k_std=0))
        (2, 1)
        >>> plan(load, profs, k_std=0).devices
        2
    """
    sp = split(sessions, profiles, memory_capacity, k_std)
    least = [x.min_occ for x in sp.items]
    shared = max(math.ceil(sum(least) - 1e-9), sum(1 for m in least if m > 0.5 + 1e-9))
    return len(sp.saturated) + shared


@dataclass(frozen=True)
class Split:
    """Saturate, then residue, for a list of sessions: what :func:`plan` and its baselines share."""

    saturated: tuple[Node, ...]
    items: tuple[Item, ...]
    infeasible: tuple[tuple[str, str], ...]


def split(sessions: Sequence[SessionLoad], profiles: Mapping[str, Profile], memory_capacity: float = math.inf,
          k_std: float = 1.0) -> Split:
    """Nexus SCHEDULESATURATE and the residual loads: ⌊R/T⌋ whole devices per session, the rest as
    a residual :class:`~vidnexus.control.packing.Item` (or one more whole device when the rest fits no
    shared cycle), and the sessions no batch size can serve within their SLO, with the reason."""
    tables = {m: _table(profiles[m], k_std) for m in {s.model for s in sessions}}
    nodes: list[Node] = []
    items: list[Item] = []
    infeasible: list[tuple[str, str]] = []
    for s in sessions:
        if s.rate <= 0:
            continue
        if s.memory_bytes > memory_capacity:
            infeasible.append((s.session_id, f"model {s.model} needs {s.memory_bytes} bytes, devices hold {memory_capacity:.0f}"))
            continue
        t = tables[s.model]
        b_sat = saturated_batch(t, s.slo_s)
        rest = s.rate
        if b_sat:
            t_sat = b_sat / t.lat[b_sat]
            whole = int(s.rate // t_sat)
            if whole:
                node = Node(t.lat[b_sat], (Allocation(s.session_id, s.model, b_sat, t_sat, t.lat[b_sat], s.slo_s,
                                                      s.memory_bytes),), saturated=True)
                nodes.extend([node] * whole)
            rest = s.rate - whole * t_sat
        if rest <= 1e-9:
            continue
        x = make_item(s.session_id, s.model, s.slo_s, rest, t, s.memory_bytes)
        if x is not None:
            items.append(x)
            continue
        if b_sat and rest <= b_sat / t.lat[b_sat] + 1e-9:
            nodes.append(Node(t.lat[b_sat], (Allocation(s.session_id, s.model, b_sat, rest, t.lat[b_sat], s.slo_s,
                                                        s.memory_bytes),), saturated=True))
            continue
        infeasible.append((s.session_id, f"no batch size of {s.model} meets the {s.slo_s * 1000:.0f} ms SLO "
                                         f"at {rest:.1f} req/s (ℓ(1) = {t.lat[1] * 1000:.1f} ms)"))
    return Split(tuple(nodes), tuple(items), tuple(infeasible))


def bin_node(bn: Bin, device_id: str | None = None) -> Node:
    """The :class:`Node` of a packed bin."""
    allocs = tuple(Allocation(x.sid, x.model, b, x.rate, x.lat[b], x.slo, x.mem)
                   for x, b in zip(bn.items, bn.batches()))
    return Node(bn.d, allocs, device_id=device_id)


def plan(
    sessions: Sequence[SessionLoad],
    profiles: Mapping[str, Profile],
    memory_capacity: float = math.inf,
    *,
    k_std: float = 1.0,
) -> Plan:
    """Nexus Algorithm 1, with the planning latency mean + ``k_std`` × std. Sessions that no batch
    size can serve within their SLO are reported in ``infeasible`` with the reason; everything else
    is placed. The residual loads are packed by :func:`~vidnexus.control.packing.pack`."""
    sp = split(sessions, profiles, memory_capacity, k_std)
    bins = pack(sp.items, memory_capacity)
    return Plan(sp.saturated + tuple(bin_node(bn) for bn in bins), sp.infeasible)
