"""The pure steps around each epoch's plan: executor stats into session loads, the planner's nodes
onto live executors, the published :class:`~vidnexus.contracts.plans.EpochPlan`, and a home for
every idle session.

Example:
    >>> from vidnexus.contracts.stats import ExecutorStats, SessionStats
    >>> from vidnexus.contracts.profile import Profile
    >>> st = ExecutorStats("e1", "cpu", 0.0, profiles={"m": Profile.linear(0.002, 0.01, 8)},
    ...                    sessions=(SessionStats("m-100ms", "m", 100.0, rate_recent=20.0),))
    >>> loads, profiles = loads_from_stats([st])
    >>> [(l.session_id, l.rate, l.slo_s) for l in loads], sorted(profiles)
    ([('m-100ms', 20.0, 0.1)], ['m'])
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Mapping, Sequence

from vidnexus.contracts.plans import EpochPlan, LatencySplit
from vidnexus.contracts.profile import Profile
from vidnexus.contracts.sessions import SessionKey
from vidnexus.contracts.stats import ExecutorStats
from vidnexus.control.fleet import DeviceType
from vidnexus.control.squishy import Allocation, Node, Plan, SessionLoad
from vidnexus.errors import ConfigError

__all__ = ["loads_from_stats", "memory_capacity", "device_types", "prefix_groups", "merge_prefix_sessions", "assign_executors",
           "epoch_plan", "cover_idle_sessions"]


def prefix_groups(stats: Sequence[ExecutorStats]) -> dict[str, str]:
    """model → prefix group, over every executor's report (group ids are content hashes or declared
    names, the same on every executor)."""
    return {m: g for doc in stats for m, g in doc.prefix_groups.items()}


def loads_from_stats(stats: Sequence[ExecutorStats]) -> tuple[list[SessionLoad], dict[str, Profile]]:
    """Session loads (rates summed over executors) and model profiles from executor stats."""
    rate: dict[str, float] = {}
    meta: dict[str, tuple[str, float]] = {}
    profiles: dict[str, Profile] = {}
    memory: dict[str, int] = {}
    for doc in stats:
        for model, p in doc.profiles.items():
            profiles.setdefault(model, p)
        for model, n in doc.model_bytes.items():
            memory[model] = max(memory.get(model, 0), n)
        for s in doc.sessions:
            rate[s.session] = rate.get(s.session, 0.0) + s.rate_recent
            meta[s.session] = (s.model, s.slo_ms / 1000)
    loads = [SessionLoad(sid, meta[sid][0], meta[sid][1], r, memory.get(meta[sid][0], 0))
             for sid, r in sorted(rate.items()) if meta[sid][0] in profiles]
    return loads, profiles


def memory_capacity(stats: Sequence[ExecutorStats]) -> float:
    """The memory a device can give models, for planning: the least any executor reports (a plan's
    nodes may land on any of them); unbounded when none reports one.

    Example:
        >>> memory_capacity([ExecutorStats("a", "cpu", 0.0, memory_bytes=8 << 30),
        ...                  ExecutorStats("b", "cuda", 0.0, memory_bytes=2 << 30), ExecutorStats("c", "cpu", 0.0)])
        2147483648
        >>> memory_capacity([])
        inf
    """
    reported = [s.memory_bytes for s in stats if s.memory_bytes > 0]
    return min(reported) if reported else math.inf


def device_types(stats: Mapping[str, ExecutorStats]) -> list[DeviceType]:
    """The device types of the live executors (``stats``: executor → its latest stats), each with
    how many are live, the least memory one of them reports, their price (the highest, should they
    disagree) and, per model, the profile that reaches the largest batch among theirs.

    Example:
        >>> fast = ExecutorStats("a", "cpu", 0.0, device_type="2-thread", price=2.0)
        >>> [(t.name, t.price, t.count) for t in device_types({"a": fast, "b": ExecutorStats("b", "cpu", 0.0)})]
        [('2-thread', 2.0, 1), ('cpu', 1.0, 1)]
    """
    groups: dict[str, list[ExecutorStats]] = {}
    for e in sorted(stats):
        groups.setdefault(stats[e].kind, []).append(stats[e])
    out = []
    for name, docs in sorted(groups.items()):
        profiles: dict[str, Profile] = {}
        for d in docs:
            for m, p in d.profiles.items():
                if m not in profiles or max(p.sizes) > max(profiles[m].sizes):
                    profiles[m] = p
        out.append(DeviceType(name, max(d.price for d in docs), profiles, memory_capacity(docs), len(docs)))
    return out


def merge_prefix_sessions(loads: Sequence[SessionLoad], groups: Mapping[str, str], profiles: Mapping[str, Profile]
                          ) -> tuple[list[SessionLoad], dict[str, tuple[tuple[str, float], ...]]]:
    """Prefix batching in the plan (Nexus §6.3, DESIGN §6): the sessions of models that share a
    trunk (``groups``: model → prefix group, as executors report) run on an executor as one merged
    batch, so they are planned as one load — the group's id, the sum of their rates, the tightest of
    their SLOs, the profile of the member slowest at batch 1 and the largest member's memory (the
    trunk, held once). Returns the loads and, per merged load, its members with their rates.

    Example:
        >>> profs = {"a": Profile.linear(0.001, 0.010, 8), "b": Profile.linear(0.001, 0.012, 8)}
        >>> loads = [SessionLoad("a-100ms", "a", 0.1, 30.0), SessionLoad("b-200ms", "b", 0.2, 10.0),
        ...          SessionLoad("c-100ms", "c", 0.1, 5.0)]
        >>> merged, members = merge_prefix_sessions(loads, {"a": "prefix-1", "b": "prefix-1"}, profs)
        >>> [(l.session_id, l.model, l.slo_s, l.rate) for l in merged], members
        ([('c-100ms', 'c', 0.1, 5.0), ('prefix-1', 'b', 0.1, 40.0)], {'prefix-1': (('a-100ms', 30.0), ('b-200ms', 10.0))})
    """
    units: dict[str, list[SessionLoad]] = {}
    out: list[SessionLoad] = []
    for s in loads:
        g = groups.get(s.model)
        if g is None:
            out.append(s)
        else:
            units.setdefault(g, []).append(s)
    members: dict[str, tuple[tuple[str, float], ...]] = {}
    for g, ss in units.items():
        if len(ss) == 1:
            out.append(ss[0])
            continue
        lead = max(ss, key=lambda s: (profiles[s.model].latency(1), s.model))
        out.append(SessionLoad(g, lead.model, min(s.slo_s for s in ss), sum(s.rate for s in ss),
                               max(s.memory_bytes for s in ss)))
        members[g] = tuple((s.session_id, s.rate) for s in ss)
    return sorted(out, key=lambda s: s.session_id), members


def assign_executors(plan: Plan, alive: Sequence[str]) -> tuple[Plan, list[tuple[str, str]]]:
    """Put each node on a live executor: nodes that already name one keep it; the others take free
    executors in order. Nodes beyond the executors available are dropped and their sessions reported
    (``not enough executors``)."""
    live = list(alive)
    used = {n.device_id for n in plan.nodes if n.device_id in live}
    free = [e for e in live if e not in used]
    nodes: list[Node] = []
    overflow: list[Node] = []
    short: list[tuple[str, str]] = []
    for n in plan.nodes:
        if n.device_id in live and n.device_id not in {m.device_id for m in nodes}:
            nodes.append(n)
        elif free:
            nodes.append(replace(n, device_id=free.pop(0)))
        else:
            overflow.append(n)
    # More nodes than executors: still give every session a home (the executor with the least busy
    # duty cycle takes it, overloaded; early drop sheds what it cannot serve in time).
    for n in overflow:
        if not nodes:
            short.extend((a.session_id, "no live executor") for a in n.allocations)
            continue
        i = min(range(len(nodes)), key=lambda k: nodes[k].occupancy)
        nodes[i] = replace(nodes[i], allocations=_merged(nodes[i].allocations + n.allocations))
        short.extend((a.session_id, f"overloaded: not enough executors ({len(live)} alive)") for a in n.allocations)
    return replace(plan, nodes=tuple(nodes)), short


def _merged(allocs: Sequence[Allocation]) -> tuple[Allocation, ...]:
    """One allocation per session (an overflow node merged into a node that already holds one of
    its sessions): the rates add up, the larger batch and its latency win."""
    out: dict[str, Allocation] = {}
    for a in allocs:
        b = out.get(a.session_id)
        out[a.session_id] = a if b is None else replace(max(a, b, key=lambda x: x.batch), rate=a.rate + b.rate)
    return tuple(out.values())


def epoch_plan(plan: Plan, *, generation: int, epoch: int, ts: float,
               extra_infeasible: Sequence[tuple[str, str]] = (), rates: Mapping[str, float] | None = None,
               splits: Mapping[str, LatencySplit] | None = None, executors: Sequence[str] = (),
               members: Mapping[str, Sequence[tuple[str, float]]] | None = None) -> EpochPlan:
    """The published plan of a packing whose nodes carry executor ids. ``members``: the sessions of
    each merged prefix-group load (:func:`merge_prefix_sessions`): each gets the group's batch (the
    merged batch's limit on the executor) and its share of the load's rate."""
    assignments: dict[str, dict[str, int]] = {}
    routing: dict[str, dict[str, float]] = {}
    for n in plan.nodes:
        dev = n.device_id or "?"
        for a in n.allocations:
            parts = (members or {}).get(a.session_id) or ((a.session_id, a.rate),)
            total = sum(r for _, r in parts) or 1.0
            for sid, r in parts:
                assignments.setdefault(dev, {})[sid] = max(assignments.get(dev, {}).get(sid, 0), a.batch)
                routing.setdefault(sid, {})[dev] = routing.get(sid, {}).get(dev, 0.0) + a.rate * r / total
    return EpochPlan(generation, epoch, ts, assignments, routing,
                     tuple((*plan.infeasible, *extra_infeasible)), plan.moved, plan.devices,
                     {k: round(v, 2) for k, v in (rates or {}).items()}, dict(splits or {}), tuple(executors))


def cover_idle_sessions(plan: EpochPlan, stats: Mapping[str, ExecutorStats], retire_idle_s: float = 120.0,
                        previous: Sequence[str] = ()) -> EpochPlan:
    """Sessions with no load this epoch get no node from the planner, yet a burst may come: give
    each one to the least-assigned live executor that hosts its model, at batch 1 — except sessions
    a plan created (``origin`` "plan" in the executor's stats) that have had no request for
    ``retire_idle_s``: those are left unassigned (and listed in ``retired``), and executors retire
    them. Sessions an executor was started with are always covered.

    ``previous``: the sessions the last plan assigned. One whose every host has died since (no live
    executor reports it) is re-homed the same way, onto the least-assigned live executor that has
    its model: workers may still send to it, and what was routed to the dead executor's own topic
    is taken over there; it retires like any plan-created session.

    Example (e1 died with a session of an earlier split; e2 has the model):
        >>> from vidnexus.contracts.stats import SessionStats
        >>> e2 = ExecutorStats("e2", "cpu", 0.0, sessions=(SessionStats("m-100ms", "m", 100.0, rate_recent=5.0),))
        >>> doc = EpochPlan(1, 2, 0.0, {"e2": {"m-100ms": 4}}, {"m-100ms": {"e2": 5.0}})
        >>> cover_idle_sessions(doc, {"e2": e2}, previous=["m-100ms", "m-95ms", "x-10ms"]).assignments
        {'e2': {'m-100ms': 4, 'm-95ms': 1}}
    """
    assignments = {e: dict(per) for e, per in plan.assignments.items()}
    routing = {s: dict(per) for s, per in plan.routing.items()}
    for eid in sorted(stats):
        assignments.setdefault(eid, {})
    assigned = {sid for per in assignments.values() for sid in per}
    retired: set[str] = set()

    def home(sid: str, hosts: Sequence[str]) -> None:  # the least-assigned host, at batch 1
        target = min(hosts, key=lambda e: (len(assignments[e]), e))
        assignments[target][sid] = 1
        routing.setdefault(sid, {})[target] = 0.0
        assigned.add(sid)

    for _, st in sorted(stats.items()):
        for s in st.sessions:
            if s.session in assigned or s.session in retired:
                continue
            if s.origin == "plan" and s.idle_s >= retire_idle_s:
                retired.add(s.session)
                continue
            home(s.session, [e for e, d in stats.items() if any(x.session == s.session for x in d.sessions)])
    reported = {x.session for st in stats.values() for x in st.sessions}
    for sid in sorted(set(previous) - assigned - reported):
        try:
            model = SessionKey.parse(sid).model
        except ConfigError:
            continue
        hosts = [e for e, d in stats.items() if any(x.model == model for x in d.sessions)]
        if not hosts:  # no live executor has its model: nothing could serve it
            continue
        home(sid, hosts)
    return replace(plan, assignments=assignments, routing=routing, retired=tuple(sorted(retired)))
