"""Baselines for squishy bin packing, in the same plan types so the gap is measurable. Pure.

- :func:`batch_oblivious` — Nexus's evaluation baseline: every session runs at the batch size it would
  use on a whole device (its saturated batch B), no matter how its load is shared. A device can only
  be shared when every session still meets its SLO with those fixed batches, which at tight SLOs is
  almost never, so low-rate sessions each hold a device.
- :func:`exact_plan` — the optimum for small instances: the same saturated devices as squishy, and the
  fewest residual devices over every partition of the residual loads (branch and bound), where a set
  of loads fits one device if some duty cycle d gives integer batches b_i = ⌈d·r_i⌉ with
  Σℓ(b_i) ≤ d, d + ℓ(b_i) ≤ L_i and memory within capacity.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

from vidnexus.contracts.profile import Profile
from vidnexus.control.packing import EPS, Item, latency_table, least_cycle, saturated_batch
from vidnexus.control.squishy import Allocation, Node, Plan, SessionLoad, split

__all__ = ["batch_oblivious", "exact_plan", "best_duty_cycle"]


def batch_oblivious(sessions: Sequence[SessionLoad], profiles: Mapping[str, Profile],
                    memory_capacity: float = math.inf, *, k_std: float = 1.0) -> Plan:
    nodes: list[Node] = []
    infeasible: list[tuple[str, str]] = []
    open_nodes: list[Node] = []
    tables = {m: latency_table(profiles[m], k_std) for m in {s.model for s in sessions}}
    for s in sorted(sessions, key=lambda s: s.rate, reverse=True):
        lat = tables[s.model].lat
        b = saturated_batch(tables[s.model], s.slo_s)
        if not b or s.rate <= 0:
            if s.rate > 0:
                infeasible.append((s.session_id, f"2ℓ(1) of {s.model} exceeds the SLO"))
            continue
        t = b / lat[b]
        whole = int(s.rate // t)
        a = Allocation(s.session_id, s.model, b, t, lat[b], s.slo_s, s.memory_bytes)
        nodes.extend(Node(lat[b], (a,), saturated=True) for _ in range(whole))
        rest = s.rate - whole * t
        if rest <= 1e-9:
            continue
        share = Allocation(s.session_id, s.model, b, rest, lat[b], s.slo_s, s.memory_bytes)
        for i, n in enumerate(open_nodes):  # first fit with the batches left as they are
            allocs = n.allocations + (share,)
            d = sum(x.latency_s for x in allocs)
            mem = sum({x.model: x.memory_bytes for x in allocs}.values())
            if mem <= memory_capacity and all(d + x.latency_s <= x.slo_s + EPS and x.batch / d >= x.rate - 1e-9
                                              for x in allocs):
                open_nodes[i] = Node(d, allocs)
                break
        else:
            open_nodes.append(Node(share.latency_s, (share,), saturated=True))
    return Plan(tuple(nodes + open_nodes), tuple(infeasible))


def best_duty_cycle(items: Sequence[Item], memory_capacity: float = math.inf) -> Node | None:
    """The node of least occupancy for these residual items on one device, or None if they do not
    fit (:func:`~vidnexus.control.packing.least_cycle`)."""
    found = least_cycle(items, memory_capacity)
    if found is None:
        return None
    d = found[0]
    return Node(d, tuple(Allocation(x.sid, x.model, x.batch_at(d), x.rate, x.lat[x.batch_at(d)], x.slo, x.mem)
                         for x in items))


def exact_plan(sessions: Sequence[SessionLoad], profiles: Mapping[str, Profile],
               memory_capacity: float = math.inf, max_residuals: int = 12, *, k_std: float = 1.0) -> Plan:
    """The fewest devices for small instances (see module docstring; the MILP of
    :mod:`vidnexus.control.milp` solves larger ones)."""
    sp = split(sessions, profiles, memory_capacity, k_std)
    residual = sorted(sp.items, key=lambda x: x.occ, reverse=True)
    if len(residual) > max_residuals:
        raise ValueError(f"{len(residual)} residual loads: too many for the exact solver (max {max_residuals})")
    best: list[list[Item]] = [[x] for x in residual]
    fit_cache: dict[frozenset[str], Node | None] = {}

    def fits(block: list[Item]) -> Node | None:
        key = frozenset(x.sid for x in block)
        if key not in fit_cache:
            fit_cache[key] = best_duty_cycle(block, memory_capacity)
        return fit_cache[key]

    def search(i: int, blocks: list[list[Item]]) -> None:
        nonlocal best
        if len(blocks) >= len(best):
            return
        if i == len(residual):
            best = [list(b) for b in blocks]
            return
        x = residual[i]
        for blk in blocks:
            blk.append(x)
            if fits(blk) is not None:
                search(i + 1, blocks)
            blk.pop()
        blocks.append([x])
        search(i + 1, blocks)
        blocks.pop()

    search(0, [])
    nodes = [fits(b) or Node(b[0].d, (Allocation(b[0].sid, b[0].model, b[0].b, b[0].rate, b[0].w, b[0].slo,
                                                 b[0].mem),)) for b in best]
    return Plan(sp.saturated + tuple(nodes), sp.infeasible)
