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
from vidnexus.control.squishy import (EPS, Allocation, Node, Plan, SessionLoad, best_duty_cycle, one_more_saturated,
                                      residue, saturate)

__all__ = ["batch_oblivious", "exact_plan", "best_duty_cycle"]


def batch_oblivious(sessions: Sequence[SessionLoad], profiles: Mapping[str, Profile],
                    memory_capacity: float = math.inf) -> Plan:
    nodes: list[Node] = []
    infeasible: list[tuple[str, str]] = []
    open_nodes: list[Node] = []
    for s in sorted(sessions, key=lambda s: s.rate, reverse=True):
        p = profiles[s.model]
        b, t = saturate(s, p)
        if not b or s.rate <= 0:
            if s.rate > 0:
                infeasible.append((s.session_id, f"2ℓ(1) of {s.model} exceeds the SLO"))
            continue
        whole = int(s.rate // t)
        a = Allocation(s.session_id, s.model, b, t, p.latency(b), s.slo_s, s.memory_bytes)
        nodes.extend(Node(p.latency(b), (a,), saturated=True) for _ in range(whole))
        rest = s.rate - whole * t
        if rest <= 1e-9:
            continue
        share = Allocation(s.session_id, s.model, b, rest, p.latency(b), s.slo_s, s.memory_bytes)
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


def exact_plan(sessions: Sequence[SessionLoad], profiles: Mapping[str, Profile],
               memory_capacity: float = math.inf, max_residuals: int = 12) -> Plan:
    """The fewest devices for small instances (see module docstring)."""
    nodes: list[Node] = []
    infeasible: list[tuple[str, str]] = []
    residual_loads: list[Allocation] = []
    for s in sessions:
        if s.rate <= 0:
            continue
        p = profiles[s.model]
        b, t = saturate(s, p)
        whole = int(s.rate // t) if b else 0
        a = Allocation(s.session_id, s.model, b, t, p.latency(b), s.slo_s, s.memory_bytes) if b else None
        nodes.extend(Node(p.latency(b), (a,), saturated=True) for _ in range(whole) if a)
        rest = s.rate - whole * t
        if rest <= 1e-9:
            continue
        own = residue(s, rest, p)
        if own is not None:
            residual_loads.append(own.allocations[0])
            continue
        more = one_more_saturated(s, rest, p)
        if more is None:
            infeasible.append((s.session_id, f"no batch size of {s.model} meets its SLO"))
        else:
            nodes.append(more)
    if len(residual_loads) > max_residuals:
        raise ValueError(f"{len(residual_loads)} residual loads: too many for the exact solver (max {max_residuals})")
    residual_loads.sort(key=lambda a: a.latency_s, reverse=True)
    best: list[list[Allocation]] = [[a] for a in residual_loads]
    fit_cache: dict[frozenset[str], Node | None] = {}

    def fits(block: list[Allocation]) -> Node | None:
        key = frozenset(a.session_id for a in block)
        if key not in fit_cache:
            fit_cache[key] = best_duty_cycle(block, profiles, memory_capacity)
        return fit_cache[key]

    def search(i: int, blocks: list[list[Allocation]]) -> None:
        nonlocal best
        if len(blocks) >= len(best):
            return
        if i == len(residual_loads):
            best = [list(b) for b in blocks]
            return
        a = residual_loads[i]
        for blk in blocks:
            blk.append(a)
            if fits(blk) is not None:
                search(i + 1, blocks)
            blk.pop()
        blocks.append([a])
        search(i + 1, blocks)
        blocks.pop()

    search(0, [])
    residual_nodes = [fits(b) or Node(b[0].batch / b[0].rate, tuple(b)) for b in best]
    return Plan(tuple(nodes + residual_nodes), tuple(infeasible))
