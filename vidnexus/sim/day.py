"""A day of a cluster in the simulator: the real scheduler (:func:`~vidnexus.control.scheduler.due`
and :func:`~vidnexus.control.scheduler.plan_epoch`: incremental squishy bin packing, executor
assignment) plans a pool of executors from the rates the executors report, and the real batching
policies (:class:`~vidnexus.gpu_executor.backend.DutyCycle`, through
:func:`~vidnexus.sim.cluster.simulate_cluster`) serve Poisson arrivals under each plan. Pure
(virtual time, seeded), so it runs in the unit tests as it runs in ``vidnexus bench cluster``.

The load: sessions (``MODEL-SLOms``) whose rates follow a diurnal curve (one period is the
compressed day, each session with its own phase), with churn (sessions end and new ones start
throughout the day) and optionally a step (every rate × ``step_factor`` from ``step_at_s``).

Time goes in segments of ``segment_s``: each segment's arrivals are simulated under the plan in
force at its start (a device starts each segment idle; what is queued at a segment's end is still
served, in that segment's run). Every ``stats_every_s`` each executor "reports" the rate of each
of its sessions over the last ``rate_window_s`` (its share of the session's arrivals, by the
plan's rates); a session no executor serves yet (it just started) is reported by the pool's first
executor, as the executor an app's workers first send to (``vidnexus executor --app``). The
scheduler runs an epoch whenever ``due`` says so: every ``epoch_s``, or early (after
``min_epoch_s``) when a rate moved by more than ``change`` or a session appeared.

Example:
    >>> from vidnexus.contracts.profile import Profile
    >>> prof = {"m": Profile.linear(0.004, 0.012, 32)}
    >>> cfg = DayConfig(sessions=6, peak_devices=3, day_s=120.0, segment_s=2.0, seed=1)
    >>> r = simulate_day(cfg, prof)
    >>> r.requests == r.on_time + r.late + sum(r.drops.values()), r.miss_rate < 0.05, len(r.epochs) >= 4
    (True, True, True)
"""

from __future__ import annotations

import math
import random
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Callable, Mapping

from vidnexus.contracts.plans import EpochPlan
from vidnexus.contracts.profile import Profile
from vidnexus.contracts.sessions import SessionKey
from vidnexus.contracts.stats import ExecutorStats, SessionStats
from vidnexus.control.scheduler import Observed, SchedulerConfig, SchedulerState, due, plan_epoch
from vidnexus.control.squishy import Plan, SessionLoad, lower_bound, plan
from vidnexus.sim.cluster import simulate_cluster
from vidnexus.sim.loadgen import Arrival

__all__ = ["DayConfig", "DaySession", "EpochRecord", "DayResult", "day_sessions", "simulate_day"]


@dataclass(frozen=True)
class DayConfig:
    """The day's load and the scheduler's knobs (its defaults are ``vidnexus scheduler``'s)."""

    sessions: int = 300
    """Sessions live at any time (churn replaces them one for one)."""
    peak_devices: int = 100
    """The rates are scaled so that the lower bound at the day's peak is about this many devices."""
    day_s: float = 900.0
    """One diurnal period: the day, compressed."""
    amplitude: float = 0.5
    """rate = base × (1 + amplitude × sin(2π t / day_s + phase)): peak / trough = 3 at 0.5."""
    phase_jitter: float = 0.5
    """Each session's phase is uniform in ± this many radians (not every camera peaks at once)."""
    churn_per_epoch: float = 0.02
    """Fraction of the sessions that end (and are replaced by new ones) per ``epoch_s``."""
    slo_ms: tuple[float, float] = (50.0, 400.0)
    step_at_s: float | None = None
    step_factor: float = 2.0
    segment_s: float = 1.0
    stats_every_s: float = 5.0
    rate_window_s: float = 5.0
    epoch_s: float = 30.0
    min_epoch_s: float = 10.0
    change: float = 0.5
    pool: float = 4.0
    """Executors available, as a multiple of ``peak_devices`` (× ``step_factor`` with a step; + 2)."""
    seed: int = 0


@dataclass(frozen=True)
class DaySession:
    key: str
    model: str
    slo_s: float
    base_rate: float
    phase: float
    start_s: float = 0.0
    end_s: float = math.inf

    def rate(self, t: float, cfg: DayConfig) -> float:
        if not self.start_s <= t < self.end_s:
            return 0.0
        r = self.base_rate * (1 + cfg.amplitude * math.sin(2 * math.pi * t / cfg.day_s + self.phase))
        return r * (cfg.step_factor if cfg.step_at_s is not None and t >= cfg.step_at_s else 1.0)


@dataclass(frozen=True)
class EpochRecord:
    t: float
    devices: int
    lower_bound: float
    """Σ R_i / T_i over the sessions' true rates at ``t``."""
    moved: int
    infeasible: int
    sessions: int
    fresh_devices: int
    """Devices a plan from scratch on the true rates at ``t`` uses (squishy, not incremental)."""
    wanted: int = 0
    """Devices the scheduler's packing wanted (more than ``devices`` only when the pool ran out)."""


@dataclass
class DayResult:
    requests: int = 0
    on_time: int = 0
    late: int = 0
    drops: Counter[str] = field(default_factory=Counter)
    epochs: list[EpochRecord] = field(default_factory=list)
    segments: list[tuple[float, int, int]] = field(default_factory=list)
    """(start, requests, on time) of every segment."""
    sessions_started: int = 0
    warmup_requests: int = 0
    """Requests before the first plan (every one unplaced): not in the counts above."""

    @property
    def miss_rate(self) -> float:
        return 1.0 - self.on_time / self.requests if self.requests else 0.0

    def devices_over_lower_bound(self) -> float:
        """Mean over the epochs of devices / ⌈lower bound⌉."""
        xs = [e.devices / max(1, math.ceil(e.lower_bound)) for e in self.epochs if e.lower_bound > 0]
        return sum(xs) / len(xs) if xs else math.nan

    def miss_rate_between(self, start_s: float, end_s: float) -> float:
        n = sum(k for t, k, _ in self.segments if start_s <= t < end_s)
        ok = sum(o for t, _, o in self.segments if start_s <= t < end_s)
        return 1.0 - ok / n if n else 0.0

    def reaction_s(self, at_s: float, under: float, hold: int = 5) -> float | None:
        """Seconds from ``at_s`` until the miss rate over ``hold`` segments in a row is at most
        ``under`` (None: never)."""
        after = [(t, n, ok) for t, n, ok in self.segments if t >= at_s]
        for i in range(len(after) - hold + 1):
            n = sum(k for _, k, _ in after[i:i + hold])
            ok = sum(o for _, _, o in after[i:i + hold])
            if n and 1 - ok / n <= under:
                return after[i][0] - at_s
        return None


def day_sessions(cfg: DayConfig, profiles: Mapping[str, Profile], k_std: float = 1.0) -> list[DaySession]:
    """Every session of the day (the initial ones and those churn starts), rates scaled to
    ``cfg.peak_devices`` at the peak. Each (model, SLO) is one session, as in the product."""
    rng = random.Random(cfg.seed)
    models = sorted(profiles)
    used: set[str] = set()

    def new(start: float) -> DaySession:
        for _ in range(10_000):
            m = rng.choice(models)
            floor_ms = max(cfg.slo_ms[0], math.ceil(2.2 * profiles[m].latency(1) * 1000))
            slo_ms = float(rng.randint(int(floor_ms), int(max(floor_ms, cfg.slo_ms[1]))))
            key = str(SessionKey(m, slo_ms))
            if key not in used:
                used.add(key)
                return DaySession(key, m, slo_ms / 1000, rng.paretovariate(1.2), rng.uniform(-1, 1) * cfg.phase_jitter,
                                  start_s=start)
        raise ValueError(f"no (model, SLO) pair left for another session: {len(used)} sessions over {len(models)} "
                         f"models and SLOs {cfg.slo_ms} ms; widen the SLO range or use fewer sessions")

    live = [new(0.0) for _ in range(cfg.sessions)]
    done: list[DaySession] = []
    t = 0.0
    per_s = cfg.churn_per_epoch * cfg.sessions / cfg.epoch_s
    while per_s > 0:
        t += rng.expovariate(per_s)
        if t >= cfg.day_s:
            break
        k = rng.randrange(len(live))
        old = live[k]
        done.append(DaySession(old.key, old.model, old.slo_s, old.base_rate, old.phase, old.start_s, t))
        live[k] = new(t)
    everyone = done + live
    peak = [SessionLoad(s.key, s.model, s.slo_s, s.base_rate * (1 + cfg.amplitude)) for s in live]
    scale = cfg.peak_devices / max(1e-9, lower_bound(peak, profiles, k_std))
    return [DaySession(s.key, s.model, s.slo_s, s.base_rate * scale, s.phase, s.start_s, s.end_s) for s in everyone]


def _arrivals(sessions: list[DaySession], t0: float, dt: float, cfg: DayConfig, rng: random.Random) -> list[Arrival]:
    out = []
    for s in sessions:
        r = s.rate(t0 + dt / 2, cfg)
        if r <= 0:
            continue
        t = rng.expovariate(r)
        while t < dt:
            out.append(Arrival(t, s.key))
            t += rng.expovariate(r)
    out.sort(key=lambda a: a.t)
    return out


PlanFn = Callable[[float, float, Observed, SchedulerState, SchedulerConfig], tuple[EpochPlan, SchedulerState]]


def simulate_day(cfg: DayConfig, profiles: Mapping[str, Profile], *, plan_fn: PlanFn = plan_epoch,
                 policy: str = "early_drop") -> DayResult:
    """Run the day (see the module docstring). ``plan_fn`` is :func:`plan_epoch` (the benchmark
    passes it wrapped, to time it)."""
    sessions = day_sessions(cfg, profiles)
    by_key = {s.key: s for s in sessions}
    rng = random.Random(cfg.seed + 1)
    sched = SchedulerConfig(epoch_s=cfg.epoch_s, min_epoch_s=cfg.min_epoch_s, change=cfg.change,
                            stale_s=3 * cfg.stats_every_s, retire_idle_s=math.inf)
    # Enough executors for the peak (after a step too): what the day measures is the planner, not a
    # cluster that runs out of machines.
    peak = cfg.peak_devices * (cfg.step_factor if cfg.step_at_s is not None else 1.0)
    executors = [f"x{i:04d}" for i in range(math.ceil(cfg.pool * peak) + 2)]
    state = SchedulerState(generation=1)
    seen = Observed()
    packing: Plan = Plan(())
    window: deque[Counter[str]] = deque(maxlen=max(1, round(cfg.rate_window_s / cfg.segment_s)))
    stats_every = max(1, round(cfg.stats_every_s / cfg.segment_s))
    res = DayResult(sessions_started=len(sessions))
    segments = math.ceil(cfg.day_s / cfg.segment_s)
    for k in range(segments):
        t = k * cfg.segment_s
        if k % stats_every == 0 and window:
            seen = Observed(stats=_report(t, window, cfg, packing, executors, by_key, profiles))
        if seen.stats and due(t, state, seen, sched):
            _, state = plan_fn(t, t, seen, state, sched)
            packing = state.packing or Plan(())
            truth = [SessionLoad(s.key, s.model, s.slo_s, r) for s in sessions if (r := s.rate(t, cfg)) > 0]
            res.epochs.append(EpochRecord(t, packing.devices, lower_bound(truth, profiles), packing.moved,
                                          len(packing.infeasible), len(truth), plan(truth, profiles).devices,
                                          state.wanted_devices))
        live = [s for s in sessions if s.start_s <= t + cfg.segment_s and s.end_s > t]
        trace = _arrivals(live, t, cfg.segment_s, cfg, rng)
        window.append(Counter(a.session_id for a in trace))
        if not res.epochs:
            res.warmup_requests += len(trace)
            continue
        seg = simulate_cluster(packing, profiles, trace, policy=policy)  # type: ignore[arg-type]
        res.requests += seg.requests
        res.on_time += seg.on_time
        res.late += seg.replies - seg.on_time
        for reason, n in seg.drops.items():
            res.drops["unplaced" if reason == "error" else reason] += n
        res.segments.append((t, seg.requests, seg.on_time))
    return res


def _report(t: float, window: deque[Counter[str]], cfg: DayConfig, packing: Plan, executors: list[str],
            by_key: Mapping[str, DaySession], profiles: Mapping[str, Profile]) -> dict[str, tuple[float, ExecutorStats]]:
    """Every executor's stats at ``t``: its sessions' rates over the window, split by the plan."""
    seconds = len(window) * cfg.segment_s
    counts: Counter[str] = Counter()
    for c in window:
        counts.update(c)
    share: dict[str, dict[str, float]] = {}
    for node in packing.nodes:
        for a in node.allocations:
            share.setdefault(a.session_id, {})[node.device_id or executors[0]] = a.rate
    per_exec: dict[str, list[SessionStats]] = {e: [] for e in executors}
    for key, n in counts.items():
        s = by_key[key]
        rate = n / seconds
        where = share.get(key) or {executors[0]: 1.0}
        total = sum(where.values()) or 1.0
        for e, w in where.items():
            per_exec.setdefault(e, []).append(SessionStats(key, s.model, s.slo_s * 1000, origin="plan",
                                                           rate_recent=rate * w / total))
    prof = dict(profiles)
    return {e: (t, ExecutorStats(e, "sim", t, profiles=prof, sessions=tuple(ss), every_s=cfg.stats_every_s))
            for e, ss in per_exec.items()}
