"""A cluster's day in the simulator (vidnexus/sim/day.py): the real scheduler and policies, every
request accounted, epochs that follow the load, churn, and a step the scheduler reacts to."""

from __future__ import annotations

import math

import pytest

from vidnexus.contracts.profile import Profile
from vidnexus.control.squishy import SessionLoad, lower_bound
from vidnexus.sim.day import DayConfig, day_sessions, simulate_day

PROF = {"a": Profile.linear(0.004, 0.006, 32), "b": Profile.linear(0.02, 0.015, 16)}


def test_sessions_are_scaled_to_the_peak_and_churn_replaces_them():
    cfg = DayConfig(sessions=20, peak_devices=6, day_s=300.0, churn_per_epoch=0.1, seed=3)
    ss = day_sessions(cfg, PROF)
    assert len({s.key for s in ss}) == len(ss)  # one session per (model, SLO)
    ended = [s for s in ss if s.end_s < math.inf]
    assert ended and len(ss) == 20 + len(ended)  # each one that ends is replaced
    assert all(sum(1 for s in ss if s.start_s <= t < s.end_s) == 20 for t in (0.0, 100.0, 299.0))
    live = [s for s in ss if s.end_s == math.inf]
    peak = lower_bound([SessionLoad(s.key, s.model, s.slo_s, s.base_rate * 1.5) for s in live], PROF)
    assert peak == pytest.approx(6.0, rel=1e-6)
    s = ss[0]
    assert s.rate(s.start_s, cfg) > 0 and s.rate(-1.0, cfg) == 0.0


def test_a_day_accounts_every_request_and_follows_the_load():
    cfg = DayConfig(sessions=12, peak_devices=5, day_s=240.0, seed=2)
    r = simulate_day(cfg, PROF)
    assert r.requests == r.on_time + r.late + sum(r.drops.values()) > 1000
    assert r.warmup_requests > 0 and r.epochs[0].t > 0  # before the first report nothing is planned
    assert len(r.epochs) >= 240 / cfg.epoch_s
    assert r.miss_rate < 0.1
    assert all(e.devices >= math.ceil(e.lower_bound) * 0.9 for e in r.epochs)  # never far under the bound
    # The load peaks a quarter into the day and bottoms out at three quarters: so do the devices.
    by_t = {e.t: e.devices for e in r.epochs}
    near = lambda t: by_t[min(by_t, key=lambda x: abs(x - t))]  # noqa: E731
    assert near(60.0) > near(180.0)


def test_the_scheduler_reacts_to_a_step():
    cfg = DayConfig(sessions=10, peak_devices=4, day_s=120.0, amplitude=0.0, churn_per_epoch=0.0, step_at_s=60.0,
                    seed=4)
    r = simulate_day(cfg, PROF)
    after = [e for e in r.epochs if e.t >= 60.0]
    assert after and after[0].t - 60.0 <= cfg.min_epoch_s + cfg.stats_every_s + cfg.rate_window_s
    assert after[-1].devices > [e for e in r.epochs if e.t < 60.0][-1].devices
    steady = r.miss_rate_between(30.0, 60.0)
    assert r.miss_rate_between(60.0, 65.0) > 2 * steady  # the step overloads the plan in force
    reaction = r.reaction_s(60.0, under=max(0.01, 1.5 * steady))
    assert reaction is not None and 0 < reaction <= 30.0
