"""The epoch scheduler as pure functions: ``plan_epoch(now, observed, previous) -> (plan, state)``.

What the control loop (``vidnexus.roles.scheduler``) has read — executor stats and app reports,
each with the time it arrived on the loop's clock — goes in as :class:`Observed`; the previous
epoch's :class:`SchedulerState` too. Out comes the :class:`~vidnexus.contracts.plans.EpochPlan` to
publish and the next state. Each epoch — ``epoch_s`` (default 30 s), earlier when a session's rate
moves by more than ``change`` or the set of live executors changes, but never more often than
``min_epoch_s`` (:func:`due`) — runs query analysis (each app's latency split from its measured
fan-out, Nexus §6.2, after reserving the bus hops and CPU steps its workers measured, kept from
epoch to epoch while they move by less than ``reserve_slack_ms``), adds the split's sessions to
the load, re-plans incrementally with squishy bin packing (Nexus §6.1, Algorithm 1), maps the
nodes onto live executors and covers idle sessions.

Example:
    >>> from vidnexus.contracts.profile import Profile
    >>> from vidnexus.contracts.stats import ExecutorStats, SessionStats
    >>> st = ExecutorStats("e1", "cpu", 0.0, profiles={"m": Profile.linear(0.002, 0.01, 32)},
    ...                    sessions=(SessionStats("m-100ms", "m", 100.0, rate_recent=50.0),))
    >>> seen = Observed(stats={"e1": (0.0, st)})
    >>> cfg, state = SchedulerConfig(), SchedulerState(generation=7)
    >>> due(0.0, state, seen, cfg)
    True
    >>> plan, state = plan_epoch(0.0, 1.7e9, seen, state, cfg)
    >>> plan.generation, plan.epoch, plan.assignment_of("e1")
    (7, 1, {'m-100ms': 4})
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Mapping

from vidnexus.contracts.plans import EpochPlan, LatencySplit
from vidnexus.contracts.profile import Profile
from vidnexus.contracts.reports import AppReport
from vidnexus.contracts.sessions import SessionKey
from vidnexus.contracts.stats import ExecutorStats
from vidnexus.control.fleet import plan_fleet
from vidnexus.control.plans import (assign_executors, cover_idle_sessions, device_types, epoch_plan, loads_from_stats,
                                    merge_prefix_sessions, prefix_groups)
from vidnexus.control.query_analysis import analyze_merged, merge_reports, reserves_of, settle_reserves
from vidnexus.control.squishy import Node, Plan, SessionLoad

__all__ = ["SchedulerConfig", "Observed", "SchedulerState", "alive", "due", "observe_stats", "observe_report",
           "split_loads", "plan_epoch"]


@dataclass(frozen=True)
class SchedulerConfig:
    """The epoch loop's knobs (``vidnexus scheduler --help``)."""

    epoch_s: float = 30.0
    min_epoch_s: float = 10.0
    change: float = 0.5
    """Relative rate change of a session that triggers an early epoch."""
    stale_s: float | None = None
    """An executor silent for longer is dead (default: per executor, max(3 s, ``min_epoch_s``,
    three of the stats periods it reports), so that a live executor is never planned out between
    two of its reports)."""
    retire_idle_s: float = 120.0
    split_step_s: float = 0.01
    """Latency-split granularity (ε): 10 ms steps, so stage SLOs do not churn between epochs."""
    reserve_slack_ms: float = 5.0
    """An app's measured reserves (bus hops, CPU steps) replace those of its last split only once
    one of them moved by more than this, so a wobbling percentile does not move stage SLOs."""

    def __post_init__(self) -> None:
        if self.min_epoch_s > self.epoch_s:
            raise ValueError(f"min_epoch_s ({self.min_epoch_s}) must not exceed epoch_s ({self.epoch_s})")

    @property
    def stale(self) -> float:
        return self.stale_s if self.stale_s is not None else max(3.0, self.min_epoch_s)

    def stale_for(self, st: ExecutorStats) -> float:
        """How long ``st``'s executor may stay silent before it counts as dead."""
        return self.stale_s if self.stale_s is not None else max(self.stale, 3.0 * st.every_s)


@dataclass(frozen=True)
class Observed:
    """The latest stats per executor and report per app worker, with when each arrived."""

    stats: Mapping[str, tuple[float, ExecutorStats]] = field(default_factory=dict)
    reports: Mapping[str, tuple[float, AppReport]] = field(default_factory=dict)
    report_rates: Mapping[str, float] = field(default_factory=dict)
    """Frames/s of each app worker between its last two reports."""


def observe_stats(seen: Observed, now: float, st: ExecutorStats) -> Observed:
    return replace(seen, stats={**seen.stats, st.executor: (now, st)})


def observe_report(seen: Observed, now: float, r: AppReport) -> Observed:
    """Record a report, and the worker's frame rate since its previous one."""
    rates = dict(seen.report_rates)
    prev = seen.reports.get(r.key)
    if prev is not None and now > prev[0]:
        rates[r.key] = max(0.0, (r.fanout.frames - prev[1].fanout.frames) / (now - prev[0]))
    return replace(seen, reports={**seen.reports, r.key: (now, r)}, report_rates=rates)


@dataclass(frozen=True)
class SchedulerState:
    """What one epoch leaves the next. ``generation`` is fixed for the scheduler's lifetime (its
    start, wall-clock ms): a restarted scheduler's plans supersede its predecessor's."""

    generation: int
    epoch: int = 0
    last_epoch_at: float = -math.inf
    packing: Plan | None = None
    last_rates: Mapping[str, float] = field(default_factory=dict)
    last_alive: frozenset[str] = frozenset()
    last_reserves: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    """Per app, the reserves (ms per DNN node) its last split was made with."""
    last_assigned: tuple[str, ...] = ()
    """The sessions the last plan assigned (one whose hosts all die is re-homed, not forgotten)."""
    wanted_devices: int = 0
    """Devices the last packing needs, before it was mapped onto the live executors (more than
    are alive when they are too few): what an autoscaler of executors follows."""


def alive(now: float, seen: Observed, cfg: SchedulerConfig) -> list[str]:
    """Executors whose last stats are fresh."""
    return sorted(e for e, (t, st) in seen.stats.items() if now - t <= cfg.stale_for(st))


def due(now: float, state: SchedulerState, seen: Observed, cfg: SchedulerConfig) -> bool:
    """Whether an epoch should run now (see the module docstring)."""
    if not seen.stats:
        return False
    since = now - state.last_epoch_at
    if since >= cfg.epoch_s:
        return True
    if since < cfg.min_epoch_s:
        return False
    live = alive(now, seen, cfg)
    if set(live) != state.last_alive:
        return True
    loads, _ = loads_from_stats([seen.stats[e][1] for e in live])
    for s in loads:
        old = state.last_rates.get(s.session_id, 0.0)
        if abs(s.rate - old) > cfg.change * max(old, 1.0):
            return True
    return False


def split_loads(now: float, seen: Observed, loads: list[SessionLoad], profiles: Mapping[str, Profile],
                cfg: SchedulerConfig, previous: Mapping[str, Mapping[str, float]] | None = None,
                ) -> tuple[list[SessionLoad], dict[str, LatencySplit]]:
    """Query analysis: each app's split, and one session per (model, stage SLO) at the app's frame
    rate × the model's calls per frame, added to the executors' loads (their measured rate wins
    when they already serve it). The split reserves what the app's workers measured outside the
    executor, or ``previous[app]`` (the last split's reserves) while that stays within
    ``cfg.reserve_slack_ms`` (:func:`~vidnexus.control.query_analysis.settle_reserves`)."""
    fresh = {k: v for k, v in seen.reports.items() if now - v[0] <= max(3 * cfg.stale, 15.0)}
    totals = merge_reports([r for _, r in fresh.values()])
    held = {a: settle_reserves(reserves_of(r), (previous or {}).get(a), cfg.reserve_slack_ms)
            for a, r in totals.items()}
    splits = analyze_merged(totals, profiles, epsilon_s=cfg.split_step_s, reserves=held)
    frame_rate: dict[str, float] = {}
    for key, (_, r) in fresh.items():
        frame_rate[r.app] = frame_rate.get(r.app, 0.0) + seen.report_rates.get(key, 0.0)
    merged = {s.session_id: s for s in loads}
    memory = {s.model: s.memory_bytes for s in loads}  # a stage session's model holds what its others do
    for app, sp in splits.items():
        if not sp.ok:
            continue
        fo = totals[app].fanout
        frames = max(1, fo.frames)
        for m, budget in sp.budgets_ms.items():
            sid = str(SessionKey(m, budget))
            rate = frame_rate.get(app, 0.0) * fo.calls.get(m, 0) / frames
            old = merged.get(sid)
            merged[sid] = SessionLoad(sid, m, budget / 1000, max(rate, old.rate if old else 0.0), memory.get(m, 0))
    return sorted(merged.values(), key=lambda s: s.session_id), {a: s.to_contract() for a, s in splits.items()}


def plan_epoch(now: float, ts: float, seen: Observed, state: SchedulerState,
               cfg: SchedulerConfig) -> tuple[EpochPlan, SchedulerState]:
    """One epoch: the plan to publish (``ts``: wall-clock time for the document) and the next state."""
    live = alive(now, seen, cfg)
    reports = {e: seen.stats[e][1] for e in live}
    loads, profiles = loads_from_stats(list(reports.values()))
    loads, splits = split_loads(now, seen, loads, profiles, cfg, state.last_reserves)
    rates = {s.session_id: s.rate for s in loads}
    loads, members = merge_prefix_sessions(loads, prefix_groups(list(reports.values())), profiles)
    # Each device type packed on its own profiles and memory (memory is a second capacity, as in
    # Nexus), sessions on the type of best throughput per price (Piccolo); see control.fleet.
    types = device_types(reports)
    previous = None
    if state.packing is not None:
        previous = {t.name: Plan(tuple(n for n in state.packing.nodes if n.device_id in reports
                                       and reports[n.device_id].kind == t.name)) for t in types}
    fleet = plan_fleet(loads, types, previous)
    wanted = fleet.devices
    nodes: list[Node] = []
    short: list[tuple[str, str]] = []
    for t in types:
        if t.name in fleet.plans:
            placed, over = assign_executors(fleet.plans[t.name], [e for e in live if reports[e].kind == t.name])
            nodes += placed.nodes
            short += over
    packing = replace(fleet.combined(), nodes=tuple(nodes))  # the nodes on executors
    epoch = state.epoch + 1
    doc = epoch_plan(packing, generation=state.generation, epoch=epoch, ts=ts, extra_infeasible=short,
                     rates=rates, splits=splits, executors=live, members=members)
    doc = cover_idle_sessions(doc, reports, cfg.retire_idle_s, state.last_assigned)
    reserves = {**state.last_reserves, **{a: dict(sp.reserve_ms) for a, sp in splits.items() if sp.ok}}
    return doc, replace(state, epoch=epoch, last_epoch_at=now, packing=packing,
                        last_rates=rates, last_alive=frozenset(live),
                        last_reserves=reserves, wanted_devices=wanted, last_assigned=tuple(sorted(doc.served())))
