"""Incremental re-planning between epochs (Nexus §6.1, "incremental epochs"). Pure.

Given the previous plan and new rates: keep every session on the devices it had when they can still
carry it; on overload evict the cheapest sessions of the overloaded device and re-pack them; place
new load best-fit; on a load drop, empty the least-occupied devices into the others when everything
fits, and release idle devices. The result says how many sessions moved. Runs on the same residual
items and bins as :func:`~vidnexus.control.squishy.plan` (:mod:`vidnexus.control.packing`), so an
epoch of 10,000 sessions costs about what planning them from scratch does.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from typing import Mapping, Sequence

from vidnexus.contracts.profile import Profile
from vidnexus.control.packing import Bin, Item, best_fit, repack
from vidnexus.control.squishy import Node, Plan, SessionLoad, bin_node, split

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


def _fill(members: list[Item], cap: float, tag: str | None) -> tuple[Bin | None, list[Item]]:
    bn: Bin | None = None
    out: list[Item] = []
    for x in members:
        if bn is None:
            bn = Bin(x, tag)
            continue
        r = bn.try_add(x, cap)
        if r is None:
            out.append(x)
        else:
            bn.add(x, r[0])
    return bn, out


def _keep(members: list[Item], cap: float, tag: str | None) -> tuple[Bin | None, list[Item]]:
    """The previous device's residual items that still fit it together, and the ones evicted: the
    fewest sessions (trying the smallest loads first, then the largest), the smallest load on a tie."""
    by_occ = sorted(members, key=lambda y: y.occ)
    best = _fill(by_occ, cap, tag)
    if best[1]:
        other = _fill(by_occ[::-1], cap, tag)
        if (len(other[1]), sum(x.occ for x in other[1])) < (len(best[1]), sum(x.occ for x in best[1])):
            best = other
    return best


def replan(
    previous: Plan,
    sessions: Sequence[SessionLoad],
    profiles: Mapping[str, Profile],
    memory_capacity: float = math.inf,
    *,
    k_std: float = 1.0,
) -> Plan:
    """The next epoch's plan, moving as few sessions as possible."""
    sp = split(sessions, profiles, memory_capacity, k_std)
    # 1. Saturated devices: reuse the previous ones of each session, open or release the difference.
    prev_sat: dict[str, list[str | None]] = {}
    for n in previous.nodes:
        if n.saturated:
            prev_sat.setdefault(n.allocations[0].session_id, []).append(n.device_id)
    used: dict[str, int] = {}
    nodes: list[Node] = []
    for n in sp.saturated:
        sid = n.allocations[0].session_id
        k = used.get(sid, 0)
        used[sid] = k + 1
        old = prev_sat.get(sid, [])
        nodes.append(replace(n, device_id=old[k] if k < len(old) else None))
    # 2. Keep residual devices with the sessions they had; evict the cheapest on overload.
    items = {x.sid: x for x in sp.items}
    kept: list[Bin] = []
    pool: list[Item] = []
    placed: set[str] = set()
    for n in previous.nodes:
        if n.saturated:
            continue
        members = [items[a.session_id] for a in n.allocations if a.session_id in items and a.session_id not in placed]
        placed.update(x.sid for x in members)
        same = Bin.at(members, n.duty_cycle_s, memory_capacity, n.device_id)  # unchanged if it still fits
        bn, evicted = (same, []) if same is not None else _keep(members, memory_capacity, n.device_id)
        if bn is not None:
            kept.append(bn)
        pool.extend(evicted)
    pool.extend(x for sid, x in items.items() if sid not in placed)
    # 3. Best-fit the pool (new sessions, evicted ones) by occupancy, as Algorithm 1 does.
    bins = best_fit(sorted(pool, key=lambda x: x.occ, reverse=True), memory_capacity, bins=kept)
    # 4. Load drop: empty the least-occupied devices into the others while all of one fits.
    bins = repack(bins, memory_capacity)
    plan = assign_devices(Plan(tuple(nodes) + tuple(bin_node(bn, bn.tag) for bn in bins), sp.infeasible))
    before, after = placement(previous), placement(plan)
    moved = sum(1 for sid, devs in after.items() if sid in before and before[sid] != devs)
    return replace(plan, moved=moved)
