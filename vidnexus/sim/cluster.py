"""Cluster mode of the simulator: the devices of a plan, each running the real DutyCycle with the
plan's sessions and batch sizes, requests routed to a session's devices in proportion to the rate
the plan gives each. Pure (virtual time), for goodput and device-count experiments.

Example:
    >>> from vidnexus.contracts.profile import Profile
    >>> from vidnexus.control.squishy import SessionLoad, plan
    >>> from vidnexus.sim.loadgen import uniform_arrivals
    >>> prof = {"m": Profile.linear(0.001, 0.010, 64)}
    >>> p = plan([SessionLoad("s", "m", 0.1, 1200)], prof)   # one saturated device + a residual one
    >>> r = simulate_cluster(p, prof, uniform_arrivals(1200, 5.0, "s"))
    >>> p.devices, r.requests == r.replies + r.dropped, r.good_fraction >= 0.99
    (2, True, True)
"""

from __future__ import annotations

import heapq
from collections import Counter
from typing import Mapping, Sequence

from vidnexus.gpu_executor.backend import DutyCycle, SessionSpec
from vidnexus.gpu_executor.batching import PolicyName
from vidnexus.contracts.profile import Profile
from vidnexus.control.squishy import Plan
from vidnexus.gpu_executor.routing import Router
from vidnexus.sim.loadgen import Arrival
from vidnexus.sim.simulator import SimResult

__all__ = ["simulate_cluster", "Router"]


def simulate_cluster(
    plan: Plan,
    profiles: Mapping[str, Profile],
    trace: Sequence[Arrival],
    *,
    policy: PolicyName = "early_drop",
) -> SimResult:
    """Run ``trace`` through the plan's devices. Requests of sessions the plan does not place are
    dropped with reason ``error`` (counted, never lost)."""
    cores: list[DutyCycle] = []
    routes: dict[str, dict[int, float]] = {}
    slo: dict[str, float] = {}
    for i, node in enumerate(plan.nodes):
        specs = [SessionSpec(al.session_id, al.model, al.slo_s, policy=policy) for al in node.allocations]
        targets = {al.session_id: al.batch for al in node.allocations}
        cores.append(DutyCycle(specs, profiles, targets))
        for al in node.allocations:
            routes.setdefault(al.session_id, {})[i] = al.rate
            slo[al.session_id] = al.slo_s
    routers = {sid: Router(w) for sid, w in routes.items()}
    res = SimResult(per_session={sid: Counter() for sid in routes})
    arrival_t: dict[int, float] = {}
    deadline: dict[int, float] = {}
    sid_of: dict[int, str] = {}
    busy_until = [0.0] * len(cores)
    events: list[tuple[float, int, int]] = []  # (time, kind 0=device free 1=arrival, index)
    for i, a in enumerate(trace):
        heapq.heappush(events, (a.t, 1, i))

    def drop(sid: str, reason: str) -> None:
        res.drops[reason] += 1
        res.per_session.setdefault(sid, Counter())[reason] += 1

    def kick(dev: int, now: float) -> None:
        if busy_until[dev] > now:
            return
        step = cores[dev].schedule(now)
        for d in step.dropped:
            drop(d.session_id, d.reason)
        if step.dispatch is None:
            return
        disp = step.dispatch
        done = now + profiles[disp.model].latency(disp.batch)
        busy_until[dev] = done
        res.busy_s += done - now
        res.batches[disp.batch] += 1
        for rid in disp.request_ids:
            res.replies += 1
            res.latencies.append(done - arrival_t[rid])
            ok = done <= deadline[rid] + 1e-12
            res.on_time += int(ok)
            res.per_session[sid_of[rid]]["on_time" if ok else "late"] += 1
        heapq.heappush(events, (done, 0, dev))

    while events:
        t, kind, idx = heapq.heappop(events)
        res.end_s = t
        if kind == 1:
            a = trace[idx]
            res.requests += 1
            if a.session_id not in routers:
                drop(a.session_id, "error")
                continue
            dev = routers[a.session_id].next()
            arrival_t[idx], deadline[idx], sid_of[idx] = a.t, a.t + slo[a.session_id], a.session_id
            shed = cores[dev].enqueue(a.session_id, idx, deadline[idx], a.t)
            if shed is not None:
                drop(shed.session_id, shed.reason)
            kick(dev, t)
        else:
            kick(idx, t)
    return res
