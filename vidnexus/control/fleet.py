"""Devices of several types (Piccolo, ../shared/reference/other-papers.md): which type runs each
session, at the least cost. Pure.

A :class:`DeviceType` is what a group of executors report alike: a name, a unit price, each model's
profile measured on one of them, the memory one device holds and how many are live. Each session
goes to the type with the best throughput per unit of price it can meet its SLO on — Piccolo's
throughput-cost rank t/p, with t the session's saturated throughput on that type
(:func:`~vidnexus.control.squishy.saturate`). Each type's sessions are packed by squishy bin packing,
or re-planned incrementally from that type's nodes of the last epoch
(:func:`~vidnexus.control.epochs.replan`). A type that needs more devices than it has live sheds
the sessions whose next type costs them least, and the types are packed again, until every type
fits or nothing can move (what is left runs overloaded on the live executors, as
:func:`~vidnexus.control.plans.assign_executors` says). The cost of a plan is Σ devices × price.

A session runs on one type (its load is not split across types, as Piccolo splits a module's).

Example: the tight session only the fast type meets goes there; the loose ones go to the slow type,
more requests per unit of price; with one slow device live, the larger loose one moves to the fast type.
    >>> from vidnexus.contracts.profile import Profile
    >>> fast = DeviceType("fast", 3.0, {"m": Profile.linear(0.001, 0.004, 16)})
    >>> slow = DeviceType("slow", 1.0, {"m": Profile.linear(0.002, 0.016, 16)})
    >>> loads = [SessionLoad("tight", "m", 0.025, 100.0), SessionLoad("a", "m", 0.400, 300.0),
    ...          SessionLoad("b", "m", 0.400, 200.0)]
    >>> [(s.session_id, [t for _, t in rank(s, [fast, slow])]) for s in loads]
    [('tight', ['fast']), ('a', ['slow', 'fast']), ('b', ['slow', 'fast'])]
    >>> fp = plan_fleet(loads, [fast, slow])
    >>> {t: p.devices for t, p in fp.plans.items()}, fp.cost, single_type_cost(loads, [fast, slow])
    ({'fast': 1, 'slow': 2}, 5.0, (6.0, 'fast'))
    >>> fp = plan_fleet(loads, [fast, replace(slow, count=1)])
    >>> {t: p.devices for t, p in fp.plans.items()}, fp.home
    ({'fast': 1, 'slow': 1}, {'tight': 'fast', 'a': 'fast', 'b': 'slow'})
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

from vidnexus.contracts.profile import Profile
from vidnexus.control.epochs import assign_devices, replan
from vidnexus.control.squishy import Plan, SessionLoad, plan, saturate

__all__ = ["DeviceType", "FleetPlan", "rank", "plan_fleet", "single_type_cost"]


@dataclass(frozen=True)
class DeviceType:
    """One kind of device: its unit price (per device and unit of time), its models' profiles, the
    memory one device can give models, and how many are live (None: as many as the plan needs)."""

    name: str
    price: float
    profiles: Mapping[str, Profile]
    memory_bytes: float = math.inf
    count: int | None = None

    def __post_init__(self) -> None:
        if not self.price > 0 or math.isinf(self.price):
            raise ValueError(f"device type {self.name!r}: price must be positive and finite, got {self.price}")


@dataclass(frozen=True)
class FleetPlan:
    """Each type's packing (its nodes carry device ids), and the sessions no type can serve."""

    plans: Mapping[str, Plan]
    prices: Mapping[str, float]
    infeasible: tuple[tuple[str, str], ...] = ()
    home: Mapping[str, str] = field(default_factory=dict)
    """session → the device type it runs on."""

    @property
    def cost(self) -> float:
        return sum(p.devices * self.prices[t] for t, p in self.plans.items())

    @property
    def devices(self) -> int:
        return sum(p.devices for p in self.plans.values())

    @property
    def moved(self) -> int:
        return sum(p.moved for p in self.plans.values())

    def combined(self) -> Plan:
        """One :class:`Plan` of every type's nodes (in type order), with every infeasible session."""
        nodes = tuple(n for t in sorted(self.plans) for n in self.plans[t].nodes)
        infeasible = tuple(x for t in sorted(self.plans) for x in self.plans[t].infeasible) + self.infeasible
        return Plan(nodes, infeasible, self.moved)


def rank(s: SessionLoad, types: Sequence[DeviceType], k_std: float = 1.0) -> list[tuple[float, str]]:
    """The types that can serve ``s`` within its SLO (its model profiled there, its memory fits), as
    (price per request/s of saturated throughput, type), cheapest first; ties by name."""
    out = []
    for t in types:
        p = t.profiles.get(s.model)
        if p is None or s.memory_bytes > t.memory_bytes:
            continue
        _, thr = saturate(s, p, k_std)
        if thr > 0:
            out.append((t.price / thr, t.name))
    return sorted(out)


def _pack(members: list[SessionLoad], t: DeviceType, previous: Plan | None, k_std: float) -> Plan:
    if previous is not None:
        return replan(previous, members, t.profiles, t.memory_bytes, k_std=k_std)
    return assign_devices(plan(members, t.profiles, t.memory_bytes, k_std=k_std), f"{t.name}-new")


def plan_fleet(sessions: Sequence[SessionLoad], types: Sequence[DeviceType],
               previous: Mapping[str, Plan] | None = None, *, k_std: float = 1.0) -> FleetPlan:
    """Place every session on the type of best throughput per price (see the module docstring);
    ``previous``: each type's packing of the last epoch, re-planned incrementally.

    The rank compares throughputs, but devices come whole: sessions whose loads fill a slow device
    only in part may cost less together on a faster one. So the plan is also made with each type
    left out in turn (for the sessions another type serves), and the cheapest of these is kept among
    those that need the fewest devices beyond the types' counts."""
    by_name = {t.name: t for t in types}
    if len(by_name) != len(types):
        raise ValueError("device types must have distinct names")
    ranks: dict[str, list[str]] = {}
    costs: dict[str, dict[str, float]] = {}  # session → type → price per req/s of its throughput there
    infeasible: list[tuple[str, str]] = []
    for s in sessions:
        r = rank(s, types, k_std)
        if r:
            ranks[s.session_id] = [name for _, name in r]
            costs[s.session_id] = {name: c for c, name in r}
        elif s.rate > 0:
            infeasible.append((s.session_id, f"no device type ({', '.join(sorted(by_name))}) serves {s.model} "
                                             f"within {s.slo_s * 1000:.0f} ms"))
    load = {s.session_id: s for s in sessions if s.session_id in ranks}
    best = _greedy(load, ranks, costs, by_name, previous or {}, k_std)
    if len(types) > 1:
        for t in types:
            without = {sid: [x for x in r if x != t.name] or r for sid, r in ranks.items()}
            other = _greedy(load, without, costs, by_name, previous or {}, k_std)
            if _worse(best[0], other[0], by_name):
                best = other
    plans, home = best
    return FleetPlan(plans, {t.name: t.price for t in types}, tuple(infeasible), home)


def _worse(a: Mapping[str, Plan], b: Mapping[str, Plan], types: Mapping[str, DeviceType]) -> bool:
    """Whether ``a`` needs more devices beyond the counts than ``b``, or as many and costs more."""
    def key(plans: Mapping[str, Plan]) -> tuple[int, float]:
        over = sum(max(0, p.devices - c) for t, p in plans.items() if (c := types[t].count) is not None)
        return over, sum(p.devices * types[t].price for t, p in plans.items())

    (over_a, cost_a), (over_b, cost_b) = key(a), key(b)
    return over_a > over_b or (over_a == over_b and cost_a > cost_b + 1e-9)


def _greedy(load: Mapping[str, SessionLoad], ranks: Mapping[str, list[str]], costs: Mapping[str, Mapping[str, float]],
            types: Mapping[str, DeviceType], previous: Mapping[str, Plan], k_std: float
            ) -> tuple[dict[str, Plan], dict[str, str]]:
    """Each session on the first type of its rank; types over their count shed, packed again."""
    step = {sid: 0 for sid in ranks}  # index into the session's rank
    plans: dict[str, Plan] = {}
    for _ in range(1 + sum(len(r) for r in ranks.values())):  # every round moves a session down its rank
        members: dict[str, list[SessionLoad]] = {name: [] for name in types}
        for sid, k in step.items():
            members[ranks[sid][k]].append(load[sid])
        plans = {name: _pack(m, types[name], previous.get(name), k_std) for name, m in members.items()
                 if m or previous.get(name) is not None}
        moved = False
        for name, p in plans.items():
            count = types[name].count
            if count is not None and p.devices > count:
                moved |= _shed(name, count, members[name], ranks, costs, step, types, plans)
        if not moved:
            break
    return plans, {sid: ranks[sid][k] for sid, k in step.items()}


def _shed(name: str, count: int, members: list[SessionLoad], ranks: Mapping[str, list[str]],
          costs: Mapping[str, Mapping[str, float]], step: dict[str, int], types: Mapping[str, DeviceType],
          plans: Mapping[str, Plan]) -> bool:
    """Move sessions off type ``name`` onto their next type with room, those whose cost per request
    rises least first, until what stays needs no more than ``count`` devices of this type by
    Σ rate / saturated throughput. Whether any moved."""
    def devices_here(s: SessionLoad) -> float:  # rate / throughput = rate × cost / price
        return s.rate * costs[s.session_id][name] / types[name].price

    def nxt(s: SessionLoad) -> str | None:
        r, k = ranks[s.session_id], step[s.session_id] + 1
        if k >= len(r):
            return None
        c = types[r[k]].count
        return r[k] if c is None or (r[k] not in plans and c > 0) or plans[r[k]].devices < c else None

    movable = [(s, t) for s in members if (t := nxt(s)) is not None]
    movable.sort(key=lambda x: (costs[x[0].session_id][x[1]] / costs[x[0].session_id][name], -x[0].rate,
                                x[0].session_id))
    left = sum(devices_here(s) for s in members)
    for s, _ in movable:
        step[s.session_id] += 1
        left -= devices_here(s)
        if math.ceil(left - 1e-9) <= count:
            break
    return bool(movable)


def single_type_cost(sessions: Sequence[SessionLoad], types: Sequence[DeviceType], *,
                     k_std: float = 1.0) -> tuple[float, str] | None:
    """The cheapest plan on one type alone that serves every session any type serves (as many
    devices as it needs): (its cost, the type); None when no single type serves them all."""
    servable = [s for s in sessions if s.rate > 0 and rank(s, types, k_std)]
    best: tuple[float, str] | None = None
    for t in types:
        unbounded = replace(t, count=None)
        if any(not rank(s, [unbounded], k_std) for s in servable):
            continue
        c = plan(servable, t.profiles, t.memory_bytes, k_std=k_std).devices * t.price
        if best is None or c < best[0]:
            best = (c, t.name)
    return best
