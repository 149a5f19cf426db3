"""The plan the scheduler publishes each epoch, and the pure steps around it: turning executor stats
into session loads, and mapping the planner's nodes onto live executors.

Plan document (JSON on the compacted control topic, key ``plan``)::

    {"epoch": 7, "ts": 1763772000.0,
     "assignments": {"exec-a": {"lenet5-100ms": 16}, "exec-b": {...}},   # session → batch size
     "routing": {"lenet5-100ms": {"exec-a": 640.0}},                      # session → executor → req/s
     "infeasible": [["big-50ms", "reason"]], "moved": 1, "devices": 2}
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping, Sequence

from vidnexus.gpu_executor.profile import Profile
from vidnexus.gpu_executor.squishy import Node, Plan, SessionLoad

__all__ = ["loads_from_stats", "assign_executors", "plan_document", "assignment_of", "cover_idle_sessions"]


def loads_from_stats(stats: Sequence[Mapping[str, Any]]) -> tuple[list[SessionLoad], dict[str, Profile]]:
    """Session loads (rates summed over executors) and model profiles from executor stats documents."""
    rate: dict[str, float] = {}
    meta: dict[str, tuple[str, float]] = {}
    profiles: dict[str, Profile] = {}
    for doc in stats:
        for model, p in doc.get("profiles", {}).items():
            profiles.setdefault(model, Profile.from_dict(p))
        for s in doc.get("sessions", []):
            sid = s["session"]
            rate[sid] = rate.get(sid, 0.0) + float(s.get("rate_recent", 0.0))
            if "model" in s:
                meta[sid] = (s["model"], float(s["slo_ms"]) / 1000)
    loads = [SessionLoad(sid, meta[sid][0], meta[sid][1], r) for sid, r in sorted(rate.items())
             if sid in meta and meta[sid][0] in profiles]
    return loads, profiles


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
        nodes[i] = replace(nodes[i], allocations=nodes[i].allocations + n.allocations)
        short.extend((a.session_id, f"overloaded: not enough executors ({len(live)} alive)") for a in n.allocations)
    return replace(plan, nodes=tuple(nodes)), short


def plan_document(plan: Plan, epoch: int, ts: float, extra_infeasible: Sequence[tuple[str, str]] = ()) -> dict[str, Any]:
    assignments: dict[str, dict[str, int]] = {}
    routing: dict[str, dict[str, float]] = {}
    for n in plan.nodes:
        dev = n.device_id or "?"
        for a in n.allocations:
            assignments.setdefault(dev, {})[a.session_id] = max(assignments.get(dev, {}).get(a.session_id, 0), a.batch)
            routing.setdefault(a.session_id, {})[dev] = routing.get(a.session_id, {}).get(dev, 0.0) + a.rate
    return {"epoch": epoch, "ts": ts, "assignments": assignments, "routing": routing,
            "infeasible": [list(x) for x in (*plan.infeasible, *extra_infeasible)], "moved": plan.moved,
            "devices": plan.devices}


def assignment_of(doc: Mapping[str, Any], executor_id: str) -> dict[str, int]:
    """The sessions (→ batch size) a plan gives one executor."""
    return dict(doc.get("assignments", {}).get(executor_id, {}))


def cover_idle_sessions(doc: dict[str, Any], stats: Mapping[str, Mapping[str, Any]],
                        retire_idle_s: float = 120.0) -> dict[str, Any]:
    """Sessions with no load this epoch get no node from the planner, yet a burst may come: give
    each one to the least-assigned live executor that hosts its model, at batch 1 — except sessions
    a plan created (``origin`` "plan" in the executor's stats) that have had no request for
    ``retire_idle_s``: those are left unassigned, and executors retire them (and unload models no
    session uses any more). Sessions an executor was started with are always covered."""
    assigned = {sid for per in doc["assignments"].values() for sid in per}
    for eid in sorted(stats):
        doc["assignments"].setdefault(eid, {})
    retired: set[str] = set()
    for eid, st in sorted(stats.items()):
        for s in st.get("sessions", []):
            sid = s["session"]
            if sid in assigned or sid in retired:
                continue
            if s.get("origin") == "plan" and float(s.get("idle_s", 0.0)) >= retire_idle_s:
                retired.add(sid)
                continue
            hosts = [e for e, d in stats.items() if any(x["session"] == sid for x in d.get("sessions", []))]
            target = min(hosts, key=lambda e: (len(doc["assignments"][e]), e))
            doc["assignments"][target][sid] = 1
            doc["routing"].setdefault(sid, {})[target] = 0.0
            assigned.add(sid)
    if retired:
        doc["retired"] = sorted(retired)
    return doc
