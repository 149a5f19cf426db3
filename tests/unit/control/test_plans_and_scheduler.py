"""The control plane's pure epoch (``plan_epoch``) and the scheduler role's loop (in-memory bus,
fake clock), on typed stats and app reports."""

from dataclasses import replace

from vidnexus.config import Settings
from vidnexus.connectors.memory_bus import MemoryBus
from vidnexus.contracts.plans import EpochPlan, decode_plan, encode_plan
from vidnexus.contracts.profile import Profile
from vidnexus.contracts.reports import AppReport, FanOut, encode_report
from vidnexus.contracts.stats import ExecutorStats, SessionStats, encode_stats
from vidnexus.contracts.topics import Topics
from vidnexus.control.plans import assign_executors, cover_idle_sessions, epoch_plan, loads_from_stats
from vidnexus.control.scheduler import (Observed, SchedulerConfig, SchedulerState, alive, due, observe_report,
                                        observe_stats, plan_epoch)
from vidnexus.control.squishy import SessionLoad, plan
from vidnexus.roles.scheduler import SchedulerRole
from vidnexus.testing import FakeClock

PROF = Profile.linear(0.002, 0.010, 32)


def stats(eid, rates, slo_ms=200, profiles=None, **extra):
    return ExecutorStats(eid, "cpu", 0.0, profiles=profiles or {"m": PROF}, sessions=tuple(
        SessionStats(sid, "m", slo_ms, rate_recent=r, **extra) for sid, r in rates.items()))


def test_loads_sum_rates_over_executors():
    loads, profiles = loads_from_stats([stats("a", {"s1": 10, "s2": 5}), stats("b", {"s1": 30})])
    assert {(l.session_id, l.rate) for l in loads} == {("s1", 40.0), ("s2", 5.0)}
    assert loads[0].slo_s == 0.2 and set(profiles) == {"m"}


def test_nodes_map_to_live_executors_and_overflow_is_kept_served():
    p = plan([SessionLoad(f"s{i}", "m", 0.1, 300) for i in range(3)], {"m": PROF})
    assert p.devices >= 3
    mapped, short = assign_executors(p, ["e1", "e2"])
    assert {n.device_id for n in mapped.nodes} == {"e1", "e2"}
    doc = epoch_plan(mapped, generation=1, epoch=1, ts=0.0, extra_infeasible=short)
    assert doc.served() == {"s0", "s1", "s2"} and doc.infeasible
    assert all("overloaded" in r for _, r in doc.infeasible)


def test_an_overflow_node_merged_onto_one_holding_its_session_keeps_one_allocation():
    # One session on three whole devices, two executors: the third node joins a node of the same
    # session. A node holds a session once (an executor's duty cycle has one queue per session),
    # with the rates added.
    p = plan([SessionLoad("s0", "m", 0.1, 900)], {"m": PROF})
    assert p.devices >= 3
    mapped, short = assign_executors(p, ["e1", "e2"])
    assert len(mapped.nodes) == 2 and short
    for n in mapped.nodes:
        assert len({a.session_id for a in n.allocations}) == len(n.allocations)
    assert abs(sum(a.rate for n in mapped.nodes for a in n.allocations) - sum(a.rate for n in p.nodes
                                                                              for a in n.allocations)) < 1e-6


def test_idle_sessions_still_get_a_home():
    doc = EpochPlan(1, 1, 0.0, {"e1": {"s1": 8}}, {"s1": {"e1": 50.0}})
    out = cover_idle_sessions(doc, {"e1": stats("e1", {"s1": 50, "idle": 0}), "e2": stats("e2", {"idle": 0})})
    assert out.assignment_of("e2") == {"idle": 1} and doc.assignment_of("e2") == {}  # a new plan, not a mutation


def test_idle_plan_sessions_are_left_to_retire_and_static_ones_always_covered():
    st = ExecutorStats("e1", "cpu", 0.0, sessions=(
        SessionStats("old-split-140ms", "m", 140, origin="plan", idle_s=300.0),
        SessionStats("recent-split-150ms", "m", 150, origin="plan", idle_s=20.0),
        SessionStats("static-100ms", "m", 100, origin="static", idle_s=9999.0)))
    out = cover_idle_sessions(EpochPlan(1, 1, 0.0, {"e1": {}}), {"e1": st}, retire_idle_s=120)
    assert out.assignment_of("e1") == {"recent-split-150ms": 1, "static-100ms": 1}
    assert out.retired == ("old-split-140ms",)


def test_epochs_follow_rates_and_executor_deaths():
    cfg = SchedulerConfig(epoch_s=30, min_epoch_s=10, change=0.5, stale_s=15)
    state, seen, t = SchedulerState(generation=5), Observed(), 0.0
    seen = observe_stats(observe_stats(seen, t, stats("e1", {"s1": 20, "s2": 20})), t, stats("e2", {"s1": 20}))
    assert due(t, state, seen, cfg)
    first, state = plan_epoch(t, 100.0, seen, state, cfg)
    assert (first.generation, first.epoch, first.executors) == (5, 1, ("e1", "e2"))
    t = 5.0
    seen = observe_stats(observe_stats(seen, t, stats("e1", {"s1": 400, "s2": 20})), t, stats("e2", {"s1": 400}))
    assert not due(t, state, seen, cfg)  # a big change, but within the minimum epoch
    t = 11.0
    assert due(t, state, seen, cfg)  # 11 s after the last epoch: the rate change triggers one early
    second, state = plan_epoch(t, 111.0, seen, state, cfg)
    assert second.rates["s1"] == 800.0
    t = 22.0
    seen = observe_stats(seen, t, stats("e1", {"s1": 400, "s2": 20}))  # e2 stops reporting
    t = 27.0
    seen = observe_stats(seen, t, stats("e1", {"s1": 400, "s2": 20}))
    assert alive(t, seen, cfg) == ["e1"] and due(t, state, seen, cfg)
    third, state = plan_epoch(t, 127.0, seen, state, cfg)
    assert set(third.assignments) == {"e1"} and {"s1", "s2"} <= set(third.assignments["e1"])
    assert third.supersedes(second) and second.supersedes(first) and state.epoch == 3


def app_report(worker, frames, det_calls, cls_calls, slo_ms=300, det_ok=None):
    return AppReport("traffic", worker, slo_ms, ("det", "cls"), (("frames", "det"), ("det", "cls")),
                     FanOut(frames, {"det": det_calls, "cls": cls_calls}, {"det": det_ok} if det_ok is not None else {}))


def test_the_role_publishes_each_apps_latency_split_from_measured_fanout():
    from vidnexus.control.latency_split import Stage, split_latency, throughput_from_profile

    settings, bus, clock = Settings(topic_prefix="qa"), MemoryBus(), FakeClock()
    topics = Topics("qa")
    published = []
    role = SchedulerRole(settings, bus=bus, clock=clock, generation=7, on_plan=published.append,
                         config=SchedulerConfig(epoch_s=30, min_epoch_s=10)).start()
    det, cls = Profile.linear(0.012, 0.010, 32), Profile.linear(0.003, 0.004, 64)
    ex = ExecutorStats("e1", "cpu", 0.0, profiles={"det": det, "cls": cls},
                       sessions=(SessionStats("det-150ms", "det", 150, rate_recent=10.0),))
    bus.publish(topics.stats, b"e1", encode_stats(ex))
    # Two workers: 100 frames → 100 detector calls → 1,000 classifier calls (γ = 10).
    bus.publish(topics.apps, b"traffic/w1", encode_report(app_report("w1", 60, 60, 600)))
    bus.publish(topics.apps, b"traffic/w2", encode_report(app_report("w2", 40, 40, 400)))
    bus.publish(topics.apps, b"traffic/w3", b"{not json")           # skipped, logged
    doc = role.step(timeout_s=0.5)
    assert doc is not None and published == [doc]
    sp = doc.splits["traffic"]
    assert sp.ok and sp.gamma == {"frames->det": 1.0, "det->cls": 10.0}
    want = split_latency(Stage("det", 1.0, throughput_from_profile(det),
                               (Stage("cls", 10.0, throughput_from_profile(cls)),)), 0.3, epsilon_s=0.01)
    assert sp.budgets_ms == {k: round(v * 1000, 3) for k, v in want.budgets.items()}
    assert sum(sp.budgets_ms.values()) <= 300 and sp.even_ms == {"det": 150.0, "cls": 150.0}
    assert sp.gain >= 1.0
    on_topic = [decode_plan(m.value) for m in bus.subscribe([topics.control], None).poll(0.2)]
    assert on_topic == [doc] and doc.generation == 7


def test_apps_without_profiles_or_frames_are_reported_with_the_reason():
    from vidnexus.control.query_analysis import analyze_apps

    rep = app_report("w", 0, 0, 0)
    assert analyze_apps([rep], {}).get("traffic").reason == "no profile yet for ['det', 'cls']"
    p = Profile.linear(0.001, 0.001, 8)
    assert analyze_apps([rep], {"det": p, "cls": p})["traffic"].reason == "no frames seen yet"
    slow = Profile.linear(0.5, 0.5, 8)  # 1 s for one input: no split of 300 ms works
    bad = analyze_apps([app_report("w", 60, 60, 60)], {"det": slow, "cls": slow})["traffic"]
    assert not bad.ok and "no split of 300 ms" in bad.reason


def test_a_split_waits_until_every_edge_has_enough_answered_requests():
    from vidnexus.control.query_analysis import analyze_apps

    p = Profile.linear(0.005, 0.002, 16)
    # A worker's first frames: the detector has answered 12 requests, the classifier calls lag behind.
    early = replace(app_report("w", 40, 40, 3), fanout=FanOut(40, {"det": 40, "cls": 3}, {"det": 12, "cls": 0}))
    r = analyze_apps([early], {"det": p, "cls": p})["traffic"]
    assert not r.ok and r.reason == ("fan-out not measured on enough requests yet: "
                                     "frames->det (40 of 50), det->cls (12 of 50)")
    later = replace(app_report("w", 200, 200, 1190), fanout=FanOut(200, {"det": 200, "cls": 1190},
                                                                   {"det": 198, "cls": 1190}))
    r = analyze_apps([later], {"det": p, "cls": p})["traffic"]
    assert r.ok and r.gamma == {"frames->det": 1.0, "det->cls": round(1190 / 198, 4)}


def test_split_sessions_enter_the_plan_at_the_measured_frame_rate_and_workers_adopt_them():
    cfg = SchedulerConfig(epoch_s=30, min_epoch_s=10)
    det, cls = Profile.linear(0.012, 0.010, 32), Profile.linear(0.003, 0.004, 64)
    ex = ExecutorStats("e1", "cpu", 0.0, profiles={"det": det, "cls": cls})
    seen = observe_report(observe_stats(Observed(), 0.0, ex), 0.0, app_report("w1", 100, 100, 400))
    seen = observe_report(observe_stats(seen, 5.0, ex), 5.0, app_report("w1", 150, 150, 600))  # 10 frames/s
    doc, _ = plan_epoch(5.0, 0.0, seen, SchedulerState(1), cfg)
    sp = doc.splits["traffic"]
    assert all(b % 10 == 0 for b in sp.budgets_ms.values())          # 10 ms steps: no churn
    sids = {m: f"{m}-{b:g}ms" for m, b in sp.budgets_ms.items()}
    assert doc.rates[sids["det"]] == 10.0 and doc.rates[sids["cls"]] == 40.0   # γ = 4
    assert {sids["det"], sids["cls"]} <= set(doc.assignments["e1"])
    assert doc.split_to_adopt("traffic") == sp.budgets_ms
    unassigned = replace(doc, assignments={"e1": {sids["det"]: 4}})
    assert unassigned.split_to_adopt("traffic") is None                # cls-… not served yet: wait
    assert doc.split_to_adopt("other") is None


def test_an_executor_is_dead_after_three_of_its_own_stats_periods():
    from vidnexus.contracts.stats import ExecutorStats
    from vidnexus.control.scheduler import Observed, SchedulerConfig, alive, observe_stats

    cfg = SchedulerConfig(epoch_s=10, min_epoch_s=3)
    seen = observe_stats(Observed(), 0.0, ExecutorStats("slow", "cpu", 0.0, every_s=5.0))
    seen = observe_stats(seen, 0.0, ExecutorStats("fast", "cpu", 0.0, every_s=0.5))
    seen = observe_stats(seen, 0.0, ExecutorStats("old", "cpu", 0.0))  # says nothing: max(3 s, min epoch)
    assert alive(4.9, seen, cfg) == ["slow"]  # between two reports of a 5-s executor, it is alive
    assert alive(2.9, seen, cfg) == ["fast", "old", "slow"]
    assert alive(15.1, seen, cfg) == []
    assert alive(10.0, seen, SchedulerConfig(stale_s=12)) == ["fast", "old", "slow"]  # pinned for all


def test_the_state_says_how_many_devices_the_packing_wants_when_executors_are_too_few():
    seen = Observed(stats={"e1": (0.0, stats("e1", {"s1": 600.0, "s2": 400.0}, slo_ms=100))})
    doc, state = plan_epoch(0.0, 0.0, seen, SchedulerState(generation=1), SchedulerConfig())
    assert doc.devices == 1 and state.wanted_devices > 1  # one executor alive, several devices' worth
    seen = Observed(stats={e: (0.0, stats(e, {"s1": 600.0 / 12, "s2": 400.0 / 12}, slo_ms=100))
                           for e in (f"e{i}" for i in range(12))})
    doc, state = plan_epoch(0.0, 0.0, seen, state, SchedulerConfig())
    assert doc.devices == state.wanted_devices < 12


def test_memory_is_a_second_capacity_from_what_executors_report():
    """Two light sessions of two 2 GB models share one device by time; executors that say their device
    holds 3 GB of models get them on two, with the stats' per-model bytes as each session's need.
    An executor that reports nothing leaves memory unbounded."""
    profiles = {"a": PROF, "b": PROF}

    def report(eid, memory):
        return ExecutorStats(eid, "cpu", 0.0, profiles=profiles, memory_bytes=memory,
                             model_bytes={"a": 2 << 30, "b": 2 << 30},
                             sessions=(SessionStats("a-200ms", "a", 200, rate_recent=10.0),
                                       SessionStats("b-200ms", "b", 200, rate_recent=10.0)))

    loads, _ = loads_from_stats([report("e1", 3 << 30)])
    assert {l.memory_bytes for l in loads} == {2 << 30}
    roomy = Observed(stats={e: (0.0, report(e, 0)) for e in ("e1", "e2")})
    doc, _ = plan_epoch(0.0, 0.0, roomy, SchedulerState(generation=1), SchedulerConfig())
    assert doc.devices == 1
    tight = Observed(stats={e: (0.0, report(e, 3 << 30)) for e in ("e1", "e2")})
    doc, _ = plan_epoch(0.0, 0.0, tight, SchedulerState(generation=1), SchedulerConfig())
    assert doc.devices == 2 and {len(doc.assignment_of(e)) for e in ("e1", "e2")} == {1}


def test_stats_carry_memory_both_ways():
    from vidnexus.contracts.stats import decode_stats

    st = ExecutorStats("e1", "cuda:0", 1.0, memory_bytes=80 << 30, model_bytes={"m": 123})
    back = decode_stats(encode_stats(st))
    assert (back.memory_bytes, back.model_bytes) == (80 << 30, {"m": 123})
    old = decode_stats(encode_stats(ExecutorStats("e0", "cpu", 1.0)))  # says nothing: unbounded
    assert (old.memory_bytes, old.model_bytes) == (0, {})


def test_sessions_of_a_prefix_group_are_planned_as_the_one_merged_batch_they_run_as():
    """Two models sharing a trunk whose fixed cost dominates (ℓ(b) = 30 ms + 1 ms · b), 60 req/s
    each at 100 ms: apart, each needs its own batch every cycle and two devices; as one merged
    load (as the executor runs them) they share one. Each member is assigned the group's batch and
    routed its own rate."""
    prof = Profile.linear(0.001, 0.030, 16)

    def report(eid, groups):  # the load arrives on e1
        r = 60.0 if eid == "e1" else 0.0
        return ExecutorStats(eid, "cpu", 0.0, profiles={"a": prof, "b": prof}, prefix_groups=groups,
                             sessions=(SessionStats("a-100ms", "a", 100, rate_recent=r),
                                       SessionStats("b-100ms", "b", 100, rate_recent=r)))

    apart = Observed(stats={e: (0.0, report(e, {})) for e in ("e1", "e2")})
    doc, _ = plan_epoch(0.0, 0.0, apart, SchedulerState(generation=1), SchedulerConfig())
    assert doc.devices == 2
    shared = {"a": "prefix-x", "b": "prefix-x"}
    merged = Observed(stats={e: (0.0, report(e, shared)) for e in ("e1", "e2")})
    doc, state = plan_epoch(0.0, 0.0, merged, SchedulerState(generation=1), SchedulerConfig())
    assert doc.devices == 1
    (host,) = [e for e in ("e1", "e2") if doc.assignment_of(e)]
    batches = doc.assignment_of(host)
    assert set(batches) == {"a-100ms", "b-100ms"} and len(set(batches.values())) == 1
    assert {sid: round(sum(r.values()), 6) for sid, r in doc.routing.items()} == {"a-100ms": 60.0, "b-100ms": 60.0}
    assert [a.session_id for n in state.packing.nodes for a in n.allocations] == ["prefix-x"]
    # The next epoch re-plans the merged load where it was.
    doc2, _ = plan_epoch(40.0, 40.0, Observed(stats={e: (40.0, report(e, shared)) for e in ("e1", "e2")}), state,
                         SchedulerConfig())
    assert doc2.assignments == doc.assignments and doc2.moved == 0


def test_a_session_whose_executor_died_is_re_homed_even_with_no_load_left():
    """e1 served an earlier split's session that no live executor reports once e1 is gone: workers
    may still send to it (and clients routed requests to e1's own topic), so the next plan gives it
    to e2, which has the model, instead of forgetting it."""
    cfg = SchedulerConfig()
    seen = Observed(stats={"e1": (0.0, stats("e1", {"m-150ms": 20.0})), "e2": (0.0, stats("e2", {"m-200ms": 1.0}))})
    doc, state = plan_epoch(0.0, 0.0, seen, SchedulerState(generation=1), cfg)
    assert "m-150ms" in doc.assignment_of("e1")
    seen = Observed(stats={"e2": (30.0, stats("e2", {"m-200ms": 1.0}))})
    doc, state = plan_epoch(30.0, 30.0, seen, state, cfg)
    assert doc.executors == ("e2",) and set(doc.assignment_of("e2")) == {"m-150ms", "m-200ms"}
    # e2 hosts it, it stays idle past retire_idle_s: retired like any plan-created session, not re-homed.
    idle = replace(stats("e2", {"m-200ms": 1.0}), sessions=(
        SessionStats("m-200ms", "m", 200, rate_recent=1.0),
        SessionStats("m-150ms", "m", 150, origin="plan", idle_s=cfg.retire_idle_s + 1)))
    doc, state = plan_epoch(200.0, 200.0, Observed(stats={"e2": (200.0, idle)}), state, cfg)
    assert "m-150ms" not in doc.served() and doc.retired == ("m-150ms",)
    e2_gone = Observed(stats={"e2": (230.0, stats("e2", {"m-200ms": 1.0}))})  # e2 retired it
    doc, _ = plan_epoch(230.0, 230.0, e2_gone, state, cfg)
    assert "m-150ms" not in doc.served()


def test_plans_name_the_dead_executors_a_session_was_routed_to_while_its_requests_may_wait():
    """An executor restarted under a new id never saw the dead one in a plan: the plan itself says
    whose routed topics may still hold the session's requests, for the session's request retention."""
    cfg = SchedulerConfig()
    seen = Observed(stats={"e1": (0.0, stats("e1", {"m-150ms": 20.0})), "e2": (0.0, stats("e2", {"m-200ms": 5.0}))})
    doc, state = plan_epoch(0.0, 0.0, seen, SchedulerState(generation=1), cfg)
    assert doc.routing["m-150ms"] == {"e1": 20.0} and doc.gone == {}
    was_on_e1 = {sid for sid, per in doc.routing.items() if "e1" in per}
    restarted = Observed(stats={"e3": (8.0, stats("e3", {"m-200ms": 5.0})), "e2": (8.0, stats("e2", {"m-200ms": 5.0}))})
    doc, state = plan_epoch(8.0, 8.0, restarted, state, cfg)
    assert doc.gone == {sid: ("e1",) for sid in was_on_e1} and "m-150ms" in doc.gone
    assert decode_plan(encode_plan(doc)).gone == doc.gone
    assert decode_plan(encode_plan(EpochPlan(1, 1, 0.0))).gone == {}
    doc, _ = plan_epoch(30.0, 30.0, restarted, state, cfg)  # past 10 s, no 150 ms request waits any more
    assert doc.gone == {}
