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

import functools
import math
from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

from vidnexus.contracts.plans import EpochPlan, LatencySplit
from vidnexus.contracts.profile import Profile
from vidnexus.contracts.reports import AppReport
from vidnexus.contracts.sessions import SessionKey
from vidnexus.contracts.stats import ExecutorStats
from vidnexus.contracts.topics import request_retention_s
from vidnexus.control.fleet import plan_fleet
from vidnexus.control.plans import (assign_executors, cover_idle_sessions, device_types, epoch_plan, loads_from_stats,
                                    merge_prefix_sessions, prefix_groups)
from vidnexus.control.query_analysis import analyze_merged, merge_reports, reserves_of, settle_reserves
from vidnexus.control.squishy import Node, Plan, SessionLoad
from vidnexus.control.variants import Budgets, TaskSession, Variant, choose_variants
from vidnexus.errors import ConfigError

__all__ = ["SchedulerConfig", "Observed", "SchedulerState", "alive", "due", "observe_stats", "observe_report",
           "split_loads", "task_variants", "plan_epoch", "recently_routed", "gone_hosts"]


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
    variant_budgets: Mapping[str, Budgets] = field(default_factory=dict)
    """Task → what all the sessions of the task may use (MCDNN; ``--variant-budget``). A task with
    variants and no budget is served by its most accurate variant."""
    variant_catalogs: Mapping[str, tuple[Variant, ...]] = field(default_factory=dict)
    """Task → its variants' measured accuracy, cost per request, memory and load time; an
    executor's profile of a variant replaces the catalog's cost once one has loaded it."""

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
    """Record a report, and the worker's frame rate since its previous one, once that one had
    frames: the interval in which its first frame arrived also holds its start-up, so a rate
    measured over it is low (and a variant chosen for it may not hold the real load)."""
    rates = dict(seen.report_rates)
    prev = seen.reports.get(r.key)
    if prev is not None and now > prev[0] and prev[1].fanout.frames > 0:
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
    last_variants: Mapping[str, str] = field(default_factory=dict)
    """``app/task`` → the variant the last plan chose (a switch up weighs its load time)."""
    routed: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    """Session → executor → when a plan last routed requests there (``now``), kept while such a
    request may still wait on the executor's routed topic (the session's request retention)."""


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


def _fresh_reports(now: float, seen: Observed, cfg: SchedulerConfig) -> tuple[dict[str, AppReport], dict[str, float]]:
    """Each app's workers' recent reports merged, and the app's frame rate (summed over them; an
    app none of whose workers has reported twice yet has no rate, and no entry)."""
    fresh = {k: v for k, v in seen.reports.items() if now - v[0] <= max(3 * cfg.stale, 15.0)}
    frame_rate: dict[str, float] = {}
    for key, (_, r) in fresh.items():
        if key in seen.report_rates:
            frame_rate[r.app] = frame_rate.get(r.app, 0.0) + seen.report_rates[key]
    return merge_reports([r for _, r in fresh.values()]), frame_rate


def _calls_rate(r: AppReport, frame_rate: float, model: str) -> float:
    """Requests/s an app sends ``model``: its frame rate × the model's calls per frame."""
    return frame_rate * r.fanout.calls.get(model, 0) / max(1, r.fanout.frames)


def task_variants(now: float, seen: Observed, loads: Sequence[SessionLoad], profiles: Mapping[str, Profile],
                  cfg: SchedulerConfig, previous: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """App → task → the variant to serve it (MCDNN, :func:`~vidnexus.control.variants.choose_variants`):
    per task with a budget and a catalog, the most accurate variant that fits each app's share of
    the budget at the task's rate (the executors' measured rate of its variants, or the app's
    reported calls, whichever is larger), switching up only when the load is paid for
    (``previous``); a task without either is served by its most accurate variant. A task with a
    budget whose app has no frame rate yet (:func:`observe_report`) is not named: at rate 0 every
    variant fits, and a first plan chose the most accurate one for a load it could not hold
    (workers keep the cheapest until a plan names one).

    Example (one app at 100 req/s; half a device: the 1 ms variant does not fit, the 0.2 ms one does):
        >>> from vidnexus.contracts.reports import FanOut
        >>> r = AppReport("icons", "w", 200.0, ("t",), (("frames", "t"),), FanOut(100, {"t": 100}),
        ...               variants={"t": ("big", "small")})
        >>> seen = Observed(reports={"icons/w": (0.0, r)}, report_rates={"icons/w": 100.0})
        >>> cat = (Variant("big", "t", 0.97, 0.010, 0), Variant("small", "t", 0.88, 0.002, 0))
        >>> cfg = SchedulerConfig(variant_budgets={"t": Budgets(0.5)}, variant_catalogs={"t": cat})
        >>> task_variants(0.0, seen, [], {}, cfg, {})
        {'icons': {'t': 'small'}}
        >>> task_variants(0.0, seen, [], {}, SchedulerConfig(), {})
        {'icons': {'t': 'big'}}
    """
    totals, frame_rate = _fresh_reports(now, seen, cfg)
    out: dict[str, dict[str, str]] = {}
    by_task: dict[str, list[TaskSession]] = {}
    listed: dict[str, tuple[str, ...]] = {}
    for app, r in sorted(totals.items()):
        for task, names in r.variants.items():
            if not names:
                continue
            budgeted = task in cfg.variant_budgets and bool(cfg.variant_catalogs.get(task))
            if budgeted and app not in frame_rate:
                continue  # no rate yet
            out.setdefault(app, {})[task] = names[0]
            if budgeted:
                measured = sum(s.rate for s in loads if s.model in names)
                rate = max(measured, _calls_rate(r, frame_rate[app], task))
                by_task.setdefault(task, []).append(TaskSession(f"{app}/{task}", task, rate))
                listed[f"{app}/{task}"] = names
    for task, sessions in by_task.items():
        catalog = []
        for v in cfg.variant_catalogs[task]:
            p = profiles.get(v.name)  # measured on the executors: replaces the catalog's cost
            b = min(16, p.max_batch) if p is not None else 0
            catalog.append(replace(v, cost_s=p.latency(b) / b) if p is not None else v)
        for c in choose_variants({task: catalog}, sessions, cfg.variant_budgets[task], previous=previous):
            if c.variant in listed[c.session_id]:
                app = c.session_id.rpartition("/")[0]
                out[app][task] = c.variant
    return out


def split_loads(now: float, seen: Observed, loads: list[SessionLoad], profiles: Mapping[str, Profile],
                cfg: SchedulerConfig, previous: Mapping[str, Mapping[str, float]] | None = None,
                variants: Mapping[str, Mapping[str, str]] | None = None,
                ) -> tuple[list[SessionLoad], dict[str, LatencySplit]]:
    """Query analysis: each app's split, and one session per (model, stage SLO) at the app's frame
    rate × the model's calls per frame, added to the executors' loads (their measured rate wins
    when they already serve it). The split reserves what the app's workers measured outside the
    executor, or ``previous[app]`` (the last split's reserves) while that stays within
    ``cfg.reserve_slack_ms`` (:func:`~vidnexus.control.query_analysis.settle_reserves`).

    ``variants`` (app → task → model, :func:`task_variants`): a task's stage is the chosen
    variant's session; its profile is the variant's. An app with no split yet gets its chosen
    variant's session at the SLO its task's variants are served at now, so that a plan hosts the
    variant before the app's workers switch to it."""
    variants = variants or {}
    totals, frame_rate = _fresh_reports(now, seen, cfg)
    held = {a: settle_reserves(reserves_of(r), (previous or {}).get(a), cfg.reserve_slack_ms)
            for a, r in totals.items()}
    aliased = dict(profiles)
    for per in variants.values():
        aliased.update({task: profiles[m] for task, m in per.items() if m in profiles})
    splits = analyze_merged(totals, aliased, epsilon_s=cfg.split_step_s, reserves=held)
    merged = {s.session_id: s for s in loads}
    memory = {s.model: s.memory_bytes for s in loads}  # a stage session's model holds what its others do
    for catalog in cfg.variant_catalogs.values():
        memory.update({v.name: v.memory_bytes for v in catalog if not memory.get(v.name)})

    def add(app: str, m: str, slo_ms: float) -> None:
        served = variants.get(app, {}).get(m, m)
        sid = str(SessionKey(served, slo_ms))
        rate = _calls_rate(totals[app], frame_rate.get(app, 0.0), m)
        old = merged.get(sid)
        merged[sid] = SessionLoad(sid, served, slo_ms / 1000, max(rate, old.rate if old else 0.0), memory.get(served, 0))

    for app, sp in splits.items():
        if sp.ok:
            for m, budget in sp.budgets_ms.items():
                add(app, m, budget)
            continue
        for task, served in variants.get(app, {}).items():
            names = totals[app].variants.get(task, ())
            now_served = sorted((s for s in loads if s.model in names), key=lambda s: -s.rate)
            if now_served:
                add(app, task, now_served[0].slo_s * 1000)
    return sorted(merged.values(), key=lambda s: s.session_id), {a: s.to_contract() for a, s in splits.items()}


def plan_epoch(now: float, ts: float, seen: Observed, state: SchedulerState,
               cfg: SchedulerConfig) -> tuple[EpochPlan, SchedulerState]:
    """One epoch: the plan to publish (``ts``: wall-clock time for the document) and the next state."""
    live = alive(now, seen, cfg)
    reports = {e: seen.stats[e][1] for e in live}
    loads, profiles = loads_from_stats(list(reports.values()))
    chosen = task_variants(now, seen, loads, profiles, cfg, state.last_variants)
    loads, splits = split_loads(now, seen, loads, profiles, cfg, state.last_reserves, chosen)
    rates = {s.session_id: s.rate for s in loads}
    loads, members = merge_prefix_sessions(loads, prefix_groups(list(reports.values())), profiles)
    # Each device type packed on its own profiles and memory (memory is a second capacity, as in
    # Nexus), sessions on the type of best throughput per price (Piccolo); see control.fleet.
    # A chosen variant no executor has loaded yet is planned on the catalog's profile until one
    # reports its own (which then wins).
    chosen_models = {m for per in chosen.values() for m in per.values()}
    priors = {v.name: v.profile for cat in cfg.variant_catalogs.values() for v in cat
              if v.profile is not None and v.name in chosen_models}
    types = [replace(t, profiles={**priors, **t.profiles}) for t in device_types(reports)]
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
    doc = replace(cover_idle_sessions(doc, reports, cfg.retire_idle_s, state.last_assigned), variants=chosen)
    routed = recently_routed(now, state.routed, doc.routing)
    doc = replace(doc, gone=gone_hosts(routed, live))
    reserves = {**state.last_reserves, **{a: dict(sp.reserve_ms) for a, sp in splits.items() if sp.ok}}
    return doc, replace(state, epoch=epoch, last_epoch_at=now, packing=packing,
                        last_rates=rates, last_alive=frozenset(live),
                        last_reserves=reserves, wanted_devices=wanted, last_assigned=tuple(sorted(doc.served())),
                        last_variants={f"{a}/{t}": m for a, per in chosen.items() for t, m in per.items()},
                        routed=routed)


def recently_routed(now: float, before: Mapping[str, Mapping[str, float]],
                    routing: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """``before`` with this epoch's ``routing`` (session → executor → req/s) marked at ``now``,
    less what is older than the session's request retention (no request waits that long).

    Example:
        >>> recently_routed(100.0, {"m-50ms": {"e1": 0.0, "e2": 95.0}}, {"m-50ms": {"e3": 4.0}})
        {'m-50ms': {'e2': 95.0, 'e3': 100.0}}
    """
    out = {sid: dict(per) for sid, per in before.items()}
    for sid, per in routing.items():
        for e, rate in per.items():
            if rate > 0:
                out.setdefault(sid, {})[e] = now
    kept = {}
    for sid, per in out.items():
        horizon = _retention_of(sid)
        fresh = {e: t for e, t in per.items() if now - t <= horizon}
        if fresh:
            kept[sid] = fresh
    return kept


@functools.lru_cache(maxsize=1 << 16)
def _retention_of(session_id: str) -> float:
    """How long ``session_id``'s requests are kept (parsed once per session, not every epoch)."""
    try:
        return request_retention_s(SessionKey.parse(session_id).slo_s)
    except ConfigError:
        return request_retention_s(0.0)


def gone_hosts(routed: Mapping[str, Mapping[str, float]], live: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """Per session, the executors it was routed to recently that are not live (``EpochPlan.gone``).

    Example:
        >>> gone_hosts({"m-50ms": {"e1": 1.0, "e2": 2.0}, "n-80ms": {"e2": 2.0}}, ["e2"])
        {'m-50ms': ('e1',)}
    """
    alive_now = set(live)
    out = {sid: tuple(sorted(e for e in per if e not in alive_now)) for sid, per in routed.items()}
    return {sid: es for sid, es in out.items() if es}
