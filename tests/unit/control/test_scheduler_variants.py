"""A task with variants in the running control plane (MCDNN): the scheduler picks each app's variant
within the task's budget every epoch, plans its session before the app switches to it, and the
app's workers send a task's requests to the variant the plan names."""

from dataclasses import replace

import pytest

from vidnexus.contracts.plans import EpochPlan, decode_plan, encode_plan
from vidnexus.contracts.profile import Profile
from vidnexus.contracts.reports import AppReport, FanOut, decode_report, encode_report
from vidnexus.contracts.stats import ExecutorStats, SessionStats
from vidnexus.control.scheduler import (Observed, SchedulerConfig, SchedulerState, observe_report, observe_stats,
                                        plan_epoch)
from vidnexus.control.variants import Budgets, Variant
from vidnexus.errors import ConfigError
from vidnexus.operators.chain import App

BIG = Profile.linear(0.0010, 0.002, 32)     # 1 ms a request at a large batch
SMALL = Profile.linear(0.0002, 0.001, 32)   # 0.2 ms
CATALOG = (Variant("big", "t", 0.97, 0.0011, 4_000_000, 0.01), Variant("small", "t", 0.88, 0.00025, 100_000, 0.01))


def _seen(rate: float, serving: str = "small") -> Observed:
    """One executor serving the app's task on variant ``serving`` at ``rate`` req/s, and two reports
    of the app's worker ``rate`` frames (one request each) apart."""
    st = ExecutorStats("e1", "cpu", 0.0, profiles={"big": BIG, "small": SMALL},
                       sessions=(SessionStats(f"{serving}-100ms", serving, 100.0, rate_recent=rate),), every_s=2.0)
    seen = observe_stats(Observed(), 0.0, st)
    for t, frames in ((0.0, 1000), (1.0, 1000 + int(rate))):
        r = AppReport("icons", "w", 200.0, ("t",), (("frames", "t"),), FanOut(frames, {"t": frames}, {"t": frames}),
                      variants={"t": ("big", "small")})
        seen = observe_report(seen, t, r)
    return seen


def _cfg(device_s_per_s: float) -> SchedulerConfig:
    return SchedulerConfig(variant_budgets={"t": Budgets(device_s_per_s)}, variant_catalogs={"t": CATALOG})


def test_the_plan_names_the_most_accurate_variant_the_budget_holds_and_hosts_it():
    plan, state = plan_epoch(1.0, 0.0, _seen(100.0), SchedulerState(1), _cfg(0.5))
    assert plan.variants == {"icons": {"t": "big"}}          # 100 req/s × ~1 ms ≤ 0.5 device-s/s
    assert "big-200ms" in plan.served()                      # its split stage, planned before the switch
    assert plan.variants_to_adopt("icons") == {"t": "big"}
    assert state.last_variants == {"icons/t": "big"}
    tight, _ = plan_epoch(1.0, 0.0, _seen(100.0), SchedulerState(1), _cfg(0.05))
    assert tight.variants == {"icons": {"t": "small"}}       # 0.1 device-s/s would not fit 0.05


def test_a_load_step_moves_the_task_down_and_back():
    plan, state = plan_epoch(1.0, 0.0, _seen(100.0), SchedulerState(1), _cfg(0.2))
    assert plan.variants["icons"]["t"] == "big"
    step, state = plan_epoch(2.0, 0.0, _seen(400.0, serving="big"), state, _cfg(0.2))
    assert step.variants["icons"]["t"] == "small"            # 400 × 1 ms over 0.2: down at once
    back, state = plan_epoch(3.0, 0.0, _seen(100.0, serving="small"), state, _cfg(0.2))
    assert back.variants["icons"]["t"] == "big"              # the load (10 ms) fits 10% of its share


def test_no_variant_is_named_before_the_apps_frame_rate_is_measured():
    # CI: the first plan of the icons app chose the float32 oracle over its budget (every variant
    # fits a rate of 0); the next one, with the rate, chose int8.
    r = AppReport("icons", "w", 200.0, ("t",), (("frames", "t"),), FanOut(0, {}), variants={"t": ("big", "small")})
    st = ExecutorStats("e1", "cpu", 0.0, profiles={"small": SMALL},
                       sessions=(SessionStats("small-100ms", "small", 100.0, rate_recent=0.0),), every_s=2.0)
    seen = observe_report(observe_stats(Observed(), 0.0, st), 0.0, r)  # one report: no rate
    plan, state = plan_epoch(1.0, 0.0, seen, SchedulerState(1), _cfg(0.05))
    assert plan.variants == {} and state.last_variants == {}
    # Its first frames arrived in the next interval, with the start-up: still no rate from it.
    seen = observe_report(seen, 1.0, replace(r, fanout=FanOut(30, {"t": 30})))
    assert "icons/w" not in seen.report_rates
    plan, _ = plan_epoch(1.0, 0.0, seen, SchedulerState(1), _cfg(0.05))
    assert plan.variants == {}
    seen = observe_report(seen, 2.0, replace(r, fanout=FanOut(130, {"t": 130})))
    assert seen.report_rates["icons/w"] == pytest.approx(100.0)
    plan, _ = plan_epoch(2.0, 0.0, seen, SchedulerState(1), _cfg(0.05))
    assert plan.variants == {"icons": {"t": "small"}}        # 100 req/s × 1 ms would not fit 0.05


def test_without_a_budget_the_most_accurate_variant_serves():
    plan, _ = plan_epoch(1.0, 0.0, _seen(100.0), SchedulerState(1), SchedulerConfig())
    assert plan.variants == {"icons": {"t": "big"}}


def test_a_variant_is_adopted_only_once_an_executor_hosts_it():
    p = EpochPlan(1, 1, 0.0, assignments={"e1": {"small-100ms": 8}}, variants={"icons": {"t": "big"}})
    assert p.variants_to_adopt("icons") == {} and p.variants_to_adopt("other") == {}
    p = EpochPlan(1, 1, 0.0, assignments={"e1": {"big-100ms": 8}}, variants={"icons": {"t": "big"}})
    assert p.variants_to_adopt("icons") == {"t": "big"}


def test_plans_and_reports_carry_variants_and_older_ones_decode_without():
    p = EpochPlan(1, 2, 0.0, variants={"icons": {"t": "big"}})
    assert decode_plan(encode_plan(p)) == p
    assert decode_plan(encode_plan(EpochPlan(1, 2, 0.0))).variants == {}
    r = AppReport("icons", "w", 200.0, ("t",), (("frames", "t"),), variants={"t": ("big", "small")})
    assert decode_report(encode_report(r)) == r
    assert decode_report(encode_report(AppReport("a", "w", 1.0, (), ()))).variants == {}


def test_the_worker_sends_a_task_to_the_plans_variant_else_the_cheapest():
    from vidnexus.operators.infer import RemoteBackend

    app = App("icons", slo_ms=200)
    app.model("t", variants=("big", "small"))
    app.model("plain")
    backend = RemoteBackend(app, client=None, slos={"t": 100.0, "plain": 100.0})  # type: ignore[arg-type]
    assert backend.session("t") == "small-100ms" and backend.session("plain") == "plain-100ms"
    backend.variants = {"t": "big"}
    assert backend.session("t") == "big-100ms"
    backend.variants = {"t": "unlisted"}                       # a plan naming a model the app does not list
    assert backend.session("t") == "small-100ms"
    assert app.served_model("t") == "small" and app.served_model("plain") == "plain"


def test_a_task_declares_distinct_repository_variants():
    app = App("a", slo_ms=100)
    with pytest.raises(ConfigError, match="distinct variants"):
        app.model("t", variants=("x", "x"))
    with pytest.raises(ConfigError, match="distinct variants"):
        app.model("t", variants=("t", "x"))
    with pytest.raises(ConfigError, match="no loader"):
        app.model("t", variants=("x",), loader=lambda s: None)


def test_a_worker_refuses_a_task_whose_variant_the_repository_lacks():
    from vidnexus.roles.worker import unknown_models

    app = App("a", slo_ms=100)
    app.model("t", variants=("x", "y"))
    app.table("out", {"n": "UInt8"})
    app.chain(lambda s: s.infer("t").map(lambda e: {"n": 1}).sink("out"))
    assert unknown_models(app, lambda name: name == "x") == ["infer[0] t calls model 'y' (a variant of task 't')"]


def test_a_worker_keeps_the_plans_variant_between_plans_and_waits_for_a_host():
    """A task's requests move to the plan's variant once an executor holds it, and stay there while
    no newer plan arrives (a poll that finds no new plan changes nothing)."""
    from vidnexus.config import Settings
    from vidnexus.connectors.memory_bus import MemoryBus
    from vidnexus.contracts.topics import Topics
    from vidnexus.roles.worker import WorkerRole
    from vidnexus.testing import FakeClock

    clock = FakeClock()
    bus = MemoryBus(clock=clock)
    topics = Topics("vt")
    bus.create_topic(topics.control, 1, compacted=True)
    app = App("icons", slo_ms=200)
    app.model("t", variants=("big", "small"))
    app.table("out", {"n": "UInt32"})
    app.chain(lambda s: s.infer("t").map(lambda e: {"n": 1}).sink("out"))
    role = WorkerRole(Settings(topic_prefix="vt"), app, bus=bus, worker_id="w", clock=clock)
    try:
        assert role.backend.session("t") == "small-200ms"
        bus.publish(topics.control, b"plan", encode_plan(EpochPlan(1, 1, clock.wall(), variants={"icons": {"t": "big"}})))
        role.follow_plan()
        assert role.backend.session("t") == "small-200ms"            # no executor holds big yet
        bus.publish(topics.control, b"plan", encode_plan(EpochPlan(1, 2, clock.wall(), assignments={"e": {"big-200ms": 4}},
                                                                   variants={"icons": {"t": "big"}})))
        role.follow_plan()
        assert role.backend.session("t") == "big-200ms"
        role.follow_plan()                                             # nothing new
        assert role.backend.session("t") == "big-200ms"
    finally:
        role.close()


def test_a_chosen_variant_no_executor_has_loaded_is_planned_on_the_catalogs_profile():
    """Only ``small`` is loaded (and profiled) on the executor; the budget holds ``big``, whose
    profile the catalog carries: the plan hosts ``big`` anyway, so the executor loads it."""
    st = ExecutorStats("e1", "cpu", 0.0, profiles={"small": SMALL},
                       sessions=(SessionStats("small-100ms", "small", 100.0, rate_recent=100.0),), every_s=2.0)
    seen = observe_stats(Observed(), 0.0, st)
    for t, frames in ((0.0, 1000), (1.0, 1100)):
        seen = observe_report(seen, t, AppReport("icons", "w", 200.0, ("t",), (("frames", "t"),),
                                                 FanOut(frames, {"t": frames}, {"t": frames}),
                                                 variants={"t": ("big", "small")}))
    catalog = tuple(replace(v, profile=BIG if v.name == "big" else SMALL) for v in CATALOG)
    cfg = SchedulerConfig(variant_budgets={"t": Budgets(0.5)}, variant_catalogs={"t": catalog})
    plan, _ = plan_epoch(1.0, 0.0, seen, SchedulerState(1), cfg)
    assert plan.variants == {"icons": {"t": "big"}}
    assert any(s.startswith("big-") for s in plan.served()), plan.assignments
    without, _ = plan_epoch(1.0, 0.0, seen, SchedulerState(1), _cfg(0.5))     # no profile anywhere
    assert not any(s.startswith("big-") for s in without.served())
    assert any(s.startswith("big-") for s, _ in without.infeasible)
