"""Incremental re-planning between epochs (Nexus §6.1, "incremental epochs"). Pure.

Given the previous plan and new rates: keep every session on the devices it had when they can still
carry it; on overload evict the cheapest sessions of the overloaded device and re-pack them; place
new load best-fit; on a load drop, empty the least-occupied device into the others when everything
fits, and release idle devices. The result says how many sessions moved.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from typing import Mapping, Sequence

from vidnexus.contracts.profile import Profile
from vidnexus.control.squishy import (Allocation, Node, Plan, SessionLoad, best_duty_cycle, one_more_saturated, merge_nodes,
                                      residue, saturate)

__all__ = ["replan", "assign_devices", "placement"]


def placement(p: Plan) -> dict[str, frozenset[str]]:
    """session → the device ids it runs on."""
    out: dict[str, set[str]] = {}
    for n in p.nodes:
        for a in n.allocations:
            out.setdefault(a.session_id, set()).add(n.device_id or "?")
    return {k: frozenset(v) for k, v in out.items()}


def assign_devices(p: Plan, prefix: str = "dev") -> Plan:
    """Give every node without a device id a fresh one."""
    used = {n.device_id for n in p.nodes if n.device_id}
    counter = itertools.count()
    nodes = []
    for n in p.nodes:
        if n.device_id is None:
            while (did := f"{prefix}-{next(counter)}") in used:
                pass
            used.add(did)
            n = replace(n, device_id=did)
        nodes.append(n)
    return replace(p, nodes=tuple(nodes))


def _fold(nodes: Sequence[Node], profiles: Mapping[str, Profile], cap: float) -> Node | None:
    acc: Node | None = None
    for n in nodes:
        acc = n if acc is None else merge_nodes(acc, n, profiles, cap)
        if acc is None:
            return None
    return acc


def replan(
    previous: Plan,
    sessions: Sequence[SessionLoad],
    profiles: Mapping[str, Profile],
    memory_capacity: float = math.inf,
) -> Plan:
    """The next epoch's plan, moving as few sessions as possible."""
    by_id = {s.session_id: s for s in sessions}
    infeasible: list[tuple[str, str]] = []
    # 1. Saturated devices: reuse the previous ones of each session, open or release the difference.
    prev_sat: dict[str, list[Node]] = {}
    for n in previous.nodes:
        if n.saturated:
            prev_sat.setdefault(n.allocations[0].session_id, []).append(n)
    nodes: list[Node] = []
    residual_rate: dict[str, float] = {}
    for s in sessions:
        p = profiles[s.model]
        b, t = saturate(s, p)
        whole = int(s.rate // t) if b else 0
        old = prev_sat.get(s.session_id, [])
        for i in range(whole):
            did = old[i].device_id if i < len(old) else None
            a = Allocation(s.session_id, s.model, b, t, p.latency(b), s.slo_s, s.memory_bytes)
            nodes.append(Node(p.latency(b), (a,), saturated=True, device_id=did))
        rest = s.rate - whole * t if b else s.rate
        if rest > 1e-9:
            residual_rate[s.session_id] = rest

    singles: dict[str, Node] = {}
    for sid in list(residual_rate):
        s = by_id[sid]
        node = residue(s, residual_rate[sid], profiles[s.model])
        if node is None:
            extra = one_more_saturated(s, residual_rate[sid], profiles[s.model])
            if extra is not None:
                old = prev_sat.get(sid, [])
                whole = sum(1 for n in nodes if n.saturated and n.allocations[0].session_id == sid)
                nodes.append(replace(extra, device_id=old[whole].device_id if whole < len(old) else None))
                continue
            s = by_id[sid]
            infeasible.append((sid, f"no batch size of {s.model} meets the {s.slo_s * 1000:.0f} ms SLO at "
                                    f"{residual_rate[sid]:.1f} req/s"))
        else:
            singles[sid] = node
    # 2. Keep residual devices with the sessions they had; evict the cheapest on overload.
    kept: list[Node] = []
    pool: list[str] = []
    placed: set[str] = set()

    def fit(ms: list[str]) -> Node | None:
        return (_fold([singles[m] for m in ms], profiles, memory_capacity)
                # a device the planner's local search filled at another duty cycle
                or best_duty_cycle([singles[m].allocations[0] for m in ms], profiles, memory_capacity))

    for n in previous.nodes:
        if n.saturated:
            continue
        members = [a.session_id for a in n.allocations if a.session_id in singles and a.session_id not in placed]
        fitted = fit(members) if members else None
        if members and fitted is None:
            # Overloaded: one session out, if one is enough (the one that grew, typically) ...
            for out in sorted(members, key=lambda x: singles[x].occupancy, reverse=True):
                others_in = [x for x in members if x != out]
                fitted = fit(others_in) if others_in else None
                if fitted is not None:
                    members = others_in
                    pool.append(out)
                    break
        while members and fitted is None:  # ... else the cheapest, one by one, until the rest fits
            cheapest = min(members, key=lambda x: singles[x].occupancy)
            members.remove(cheapest)
            pool.append(cheapest)
            fitted = fit(members) if members else None
        if fitted is not None:
            kept.append(replace(fitted, device_id=n.device_id))
            placed.update(members)
    pool.extend(sid for sid in singles if sid not in placed and sid not in pool)
    # 3. Best-fit the pool (new sessions, evicted ones) by occupancy, as Algorithm 1 does.
    for sid in sorted(pool, key=lambda m: singles[m].occupancy, reverse=True):
        best_i, best = -1, None
        for i, n in enumerate(kept):
            m = merge_nodes(n, singles[sid], profiles, memory_capacity)
            if m is not None and (best is None or m.occupancy > best.occupancy):
                best_i, best = i, replace(m, device_id=n.device_id)
        if best is None:
            kept.append(singles[sid])
        else:
            kept[best_i] = best
    # 4. Load drop: empty the least-occupied device into the others when all of it fits.
    while len(kept) > 1:
        kept.sort(key=lambda n: n.occupancy)
        victim, others = kept[0], list(kept[1:])
        ok = True
        for a in victim.allocations:
            best_i, best = -1, None
            for i, n in enumerate(others):
                m = merge_nodes(n, singles[a.session_id], profiles, memory_capacity)
                if m is not None and (best is None or m.occupancy > best.occupancy):
                    best_i, best = i, replace(m, device_id=n.device_id)
            if best is None:
                ok = False
                break
            others[best_i] = best
        if not ok:
            break
        kept = others
    plan = assign_devices(Plan(tuple(nodes + kept), tuple(infeasible)))
    before, after = placement(previous), placement(plan)
    moved = sum(1 for sid, devs in after.items() if sid in before and before[sid] != devs)
    return replace(plan, moved=moved)
