"""Drive :class:`~vidnexus.gpu_executor.backend.DutyCycle` with a virtual clock.

The device's batch latency comes from a profile (optionally with Gaussian noise); the batching
policies and the duty cycle are the real objects the executor uses. Every request ends as a reply
(on time or late) or a drop with its reason.

Example:
    >>> from vidnexus.gpu_executor.backend import SessionSpec
    >>> from vidnexus.contracts.profile import Profile
    >>> from vidnexus.sim.loadgen import uniform_arrivals
    >>> r = simulate([SessionSpec("s", "m", 0.1)], {"m": Profile.linear(0.002, 0.01, 32)},
    ...              uniform_arrivals(100, 2.0))
    >>> r.requests == r.replies + r.dropped, r.good_fraction
    (True, 1.0)
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from vidnexus.gpu_executor.backend import GROW, DutyCycle, Order, SessionSpec
from vidnexus.contracts.profile import Profile
from vidnexus.sim.loadgen import Arrival

__all__ = ["SimResult", "simulate", "goodput"]


@dataclass
class SimResult:
    requests: int = 0
    replies: int = 0
    on_time: int = 0
    drops: Counter[str] = field(default_factory=Counter)
    batches: Counter[int] = field(default_factory=Counter)
    busy_s: float = 0.0
    end_s: float = 0.0
    per_session: dict[str, Counter[str]] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)
    unfinished: int = 0

    @property
    def dropped(self) -> int:
        return sum(self.drops.values())

    @property
    def good_fraction(self) -> float:
        """Share of requests answered within their SLO (drops and late replies are misses)."""
        return self.on_time / self.requests if self.requests else 1.0

    @property
    def mean_batch(self) -> float:
        n = sum(self.batches.values())
        return sum(k * v for k, v in self.batches.items()) / n if n else 0.0


def simulate(
    sessions: Sequence[SessionSpec],
    profiles: Mapping[str, Profile],
    trace: Sequence[Arrival],
    *,
    targets: Mapping[str, int] | None = None,
    noise_cv: float = 0.0,
    seed: int = 0,
    actual: Mapping[str, Callable[[int], float]] | None = None,
    order: Order = "laxity",
    until_s: float | None = None,
    grow: bool = GROW,
) -> SimResult:
    """Run ``trace`` through one simulated device (until it is served, or until ``until_s``: no
    batch starts after it, and requests still queued then are counted in ``unfinished``). A reply
    is on time when it is back by its arrival's due time (over a bus, :func:`~vidnexus.sim.loadgen.over_bus`:
    the batch's end plus the reply's time back within the SLO from when it was sent); the policies
    see only each request's deadline, as the executor does.

    Args:
        noise_cv: coefficient of variation of the simulated batch latency (0 = exact profile).
        actual: model → true latency function, when it differs from the profile the policies see.
        order: which session runs next (:class:`~vidnexus.gpu_executor.backend.DutyCycle`).
        grow: a batch takes more of its session's backlog when it can (``DutyCycle``'s ``grow``).
    """
    core = DutyCycle(sessions, profiles, targets, order=order, grow=grow)
    slo = {s.session_id: s.slo_s for s in sessions}
    rng = random.Random(seed)
    res = SimResult(per_session={s.session_id: Counter() for s in sessions})
    arrival_t: dict[int, float] = {}
    due: dict[int, float] = {}  # when the caller needs the reply back (over a bus: past the deadline)
    sid_of: dict[int, str] = {}
    t, i, n = 0.0, 0, len(trace)

    def record_drop(sid: str, reason: str) -> None:
        res.drops[reason] += 1
        res.per_session[sid][reason] += 1

    while True:
        while i < n and trace[i].t <= t:
            a = trace[i]
            rid = i
            deadline = a.t + (slo[a.session_id] if a.budget_s is None else a.budget_s)
            arrival_t[rid], sid_of[rid] = a.t, a.session_id
            due[rid] = (a.t + a.due_s if a.due_s is not None else deadline) - a.reply_s
            res.requests += 1
            shed = core.enqueue(a.session_id, rid, deadline, a.t)
            if shed is not None:
                record_drop(shed.session_id, shed.reason)
            i += 1
        if until_s is not None and t >= until_s:
            res.unfinished = core.queued() + (n - i)
            break
        step = core.schedule(t)
        for d in step.dropped:
            record_drop(d.session_id, d.reason)
        if step.dispatch is None:
            if i >= n:
                res.unfinished = core.queued()
                break
            t = max(t, trace[i].t)
            continue
        disp = step.dispatch
        lat_fn = actual[disp.model] if actual and disp.model in actual else profiles[disp.model].latency
        dur = lat_fn(disp.batch)
        if noise_cv > 0:
            dur = max(dur * 0.2, rng.gauss(dur, dur * noise_cv))
        t += dur
        res.busy_s += dur
        res.batches[disp.batch] += 1
        for rid in disp.request_ids:
            res.replies += 1
            lat = t - arrival_t[rid]
            res.latencies.append(lat)
            if t <= due[rid] + 1e-12:
                res.on_time += 1
                res.per_session[sid_of[rid]]["on_time"] += 1
            else:
                res.per_session[sid_of[rid]]["late"] += 1
    res.end_s = t
    return res


def goodput(
    run: Callable[[float], SimResult | float],
    lo: float,
    hi: float,
    *,
    target: float = 0.99,
    tol: float = 0.01,
    stop: Callable[[], bool] | None = None,
) -> float:
    """Highest rate in [lo, hi] at which ``run(rate)`` keeps ≥ ``target`` of requests within SLO,
    found by bisection to a relative tolerance ``tol``. ``run`` returns a SimResult or a fraction.

    ``stop`` (real systems: a time budget) is asked before each further probe; once it says so, the
    search returns the highest rate that passed so far (0 if none), a lower bound."""

    def ok(rate: float) -> bool:
        r = run(rate)
        frac = r.good_fraction if isinstance(r, SimResult) else float(r)
        return frac >= target

    def stopped() -> bool:
        return stop is not None and stop()

    for _ in range(3):  # a failure at the floor may be noise (real systems): look lower first
        if ok(lo):
            break
        if stopped():
            return 0.0
        lo, hi = lo / 2, lo
    else:
        return 0.0
    if stopped():
        return lo
    if ok(hi):
        return hi
    while (hi - lo) / hi > tol and not stopped():
        mid = (lo + hi) / 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo
