"""The control plane's document steps and the scheduler's epoch loop (in-memory bus, fake clock)."""

import json

from vidnexus.config import Settings
from vidnexus.connectors.memory_bus import MemoryBus
from vidnexus.gpu_executor.plans import (assign_executors, assignment_of, cover_idle_sessions, loads_from_stats,
                                         plan_document)
from vidnexus.gpu_executor.profile import Profile
from vidnexus.gpu_executor.scheduler import SchedulerService, control_topic
from vidnexus.gpu_executor.squishy import SessionLoad, plan
from vidnexus.testing import FakeClock

PROF = Profile.linear(0.002, 0.010, 32).to_dict()


def stats(eid, rates, slo_ms=200):
    return {"executor": eid, "profiles": {"m": PROF},
            "sessions": [{"session": sid, "model": "m", "slo_ms": slo_ms, "rate_recent": r} for sid, r in rates.items()]}


def test_loads_sum_rates_over_executors():
    loads, profiles = loads_from_stats([stats("a", {"s1": 10, "s2": 5}), stats("b", {"s1": 30})])
    assert {(l.session_id, l.rate) for l in loads} == {("s1", 40.0), ("s2", 5.0)}
    assert loads[0].slo_s == 0.2 and set(profiles) == {"m"}


def test_nodes_map_to_live_executors_and_overflow_is_kept_served():
    p = plan([SessionLoad(f"s{i}", "m", 0.1, 300) for i in range(3)], {"m": Profile.from_dict(PROF)})
    assert p.devices >= 3
    mapped, short = assign_executors(p, ["e1", "e2"])
    assert {n.device_id for n in mapped.nodes} == {"e1", "e2"}
    doc = plan_document(mapped, 1, 0.0, short)
    served = {sid for per in doc["assignments"].values() for sid in per}
    assert served == {"s0", "s1", "s2"} and doc["infeasible"]
    assert all("overloaded" in r for _, r in doc["infeasible"])


def test_idle_sessions_still_get_a_home():
    doc = {"assignments": {"e1": {"s1": 8}}, "routing": {"s1": {"e1": 50.0}}}
    st = {"e1": stats("e1", {"s1": 50, "idle": 0}), "e2": stats("e2", {"idle": 0})}
    out = cover_idle_sessions(doc, st)
    assert assignment_of(out, "e2") == {"idle": 1}


def publish(bus, settings, doc):
    bus.publish(settings.topic("stats"), doc["executor"].encode(), json.dumps(doc).encode())


def test_epochs_follow_rates_and_executor_deaths():
    settings = Settings(topic_prefix="sch")
    bus, clock = MemoryBus(), FakeClock()
    plans = []
    svc = SchedulerService(bus, settings, epoch_s=30, min_epoch_s=10, change=0.5, stale_s=15, clock=clock,
                           on_plan=plans.append)
    consumer = bus.subscribe([settings.topic("stats")], group=None, from_beginning=True)

    def feed(*docs):
        for d in docs:
            publish(bus, settings, d)
        for m in consumer.poll(timeout_s=0.1):
            d = json.loads(m.value)
            svc.latest[d["executor"]] = (clock.now(), d)

    feed(stats("e1", {"s1": 20, "s2": 20}), stats("e2", {"s1": 20}))
    assert svc.due(clock.now())
    first = svc.run_epoch(clock.now())
    assert first["epoch"] == 1 and set(first["executors"]) == {"e1", "e2"}
    clock.advance(5)
    feed(stats("e1", {"s1": 400, "s2": 20}), stats("e2", {"s1": 400}))
    assert not svc.due(clock.now())  # a big change, but within the minimum epoch
    clock.advance(6)
    assert svc.due(clock.now())  # 11 s after the last epoch: the rate change triggers one early
    second = svc.run_epoch(clock.now())
    assert second["rates"]["s1"] == 800.0
    clock.advance(11)
    feed(stats("e1", {"s1": 400, "s2": 20}))  # e2 stops reporting
    clock.advance(5)
    feed(stats("e1", {"s1": 400, "s2": 20}))
    assert svc.alive(clock.now()) == ["e1"] and svc.due(clock.now())
    third = svc.run_epoch(clock.now())
    assert set(third["assignments"]) == {"e1"}
    assert {"s1", "s2"} <= set(third["assignments"]["e1"])
    published = [json.loads(m.value)["epoch"] for m in bus.subscribe([control_topic(settings)], None).poll(0.2)]
    assert published == [1, 2, 3] and [p["epoch"] for p in plans] == [1, 2, 3]


def app_report(worker, frames, det_calls, cls_calls, slo_ms=300):
    return {"app": "traffic", "worker": worker, "slo_ms": slo_ms, "models": ["det", "cls"],
            "edges": [["frames", "det"], ["det", "cls"]],
            "fanout": {"frames": frames, "calls": {"det": det_calls, "cls": cls_calls}, "edges": []}}


def test_epoch_publishes_each_apps_latency_split_from_measured_fanout():
    from vidnexus.gpu_executor.latency_split import Stage, split_latency, throughput_from_profile

    settings = Settings(topic_prefix="qa")
    bus, clock = MemoryBus(), FakeClock()
    svc = SchedulerService(bus, settings, epoch_s=30, min_epoch_s=10, clock=clock)
    det = Profile.linear(0.012, 0.010, 32)
    cls = Profile.linear(0.003, 0.004, 64)
    ex = {"executor": "e1", "profiles": {"det": det.to_dict(), "cls": cls.to_dict()},
          "sessions": [{"session": "det-150ms", "model": "det", "slo_ms": 150, "rate_recent": 10.0}]}
    svc.receive(settings.topic("stats"), json.dumps(ex).encode())
    # Two workers: 100 frames → 100 detector calls → 1,000 classifier calls (γ = 10).
    svc.receive(settings.topic("apps"), json.dumps(app_report("w1", 60, 60, 600)).encode())
    svc.receive(settings.topic("apps"), json.dumps(app_report("w2", 40, 40, 400)).encode())
    svc.receive(settings.topic("apps"), b"{not json")           # ignored, logged
    doc = svc.run_epoch(clock.now())
    sp = doc["splits"]["traffic"]
    assert sp["ok"] and sp["gamma"] == {"frames->det": 1.0, "det->cls": 10.0}
    want = split_latency(Stage("det", 1.0, throughput_from_profile(det),
                               (Stage("cls", 10.0, throughput_from_profile(cls)),)), 0.3, epsilon_s=0.01)
    assert sp["budgets_ms"] == {k: round(v * 1000, 3) for k, v in want.budgets.items()}
    assert sum(sp["budgets_ms"].values()) <= 300 and sp["even_ms"] == {"det": 150.0, "cls": 150.0}
    assert sp["gain"] >= 1.0


def test_apps_without_profiles_or_frames_are_reported_with_the_reason():
    from vidnexus.gpu_executor.query_analysis import analyze_apps

    rep = app_report("w", 0, 0, 0)
    assert analyze_apps([rep], {}).get("traffic").reason == "no profile yet for ['det', 'cls']"
    p = Profile.linear(0.001, 0.001, 8)
    assert analyze_apps([rep], {"det": p, "cls": p})["traffic"].reason == "no frames seen yet"
    slow = Profile.linear(0.5, 0.5, 8)  # 1 s for one input: no split of 300 ms works
    bad = analyze_apps([app_report("w", 60, 60, 60)], {"det": slow, "cls": slow})["traffic"]
    assert not bad.ok and "no split of 300 ms" in bad.reason


def test_a_split_waits_until_every_edge_has_enough_answered_requests():
    from vidnexus.gpu_executor.query_analysis import analyze_apps

    p = Profile.linear(0.005, 0.002, 16)
    # A worker's first frames: the detector has answered 12 requests, the classifier calls lag behind.
    early = app_report("w", 40, 40, 3)
    early["fanout"]["ok"] = {"det": 12, "cls": 0}
    r = analyze_apps([early], {"det": p, "cls": p})["traffic"]
    assert not r.ok and r.reason == ("fan-out not measured on enough requests yet: "
                                     "frames->det (40 of 50), det->cls (12 of 50)")
    later = app_report("w", 200, 200, 1190)
    later["fanout"]["ok"] = {"det": 198, "cls": 1190}
    r = analyze_apps([later], {"det": p, "cls": p})["traffic"]
    assert r.ok and r.gamma == {"frames->det": 1.0, "det->cls": round(1190 / 198, 4)}


def test_split_sessions_enter_the_plan_at_the_measured_frame_rate_and_workers_adopt_them():
    from vidnexus.operators.chain import App
    from vidnexus.operators.faust_runtime import split_to_adopt

    settings = Settings(topic_prefix="qa2")
    bus, clock = MemoryBus(), FakeClock()
    svc = SchedulerService(bus, settings, epoch_s=30, min_epoch_s=10, clock=clock)
    det, cls = Profile.linear(0.012, 0.010, 32), Profile.linear(0.003, 0.004, 64)
    ex = {"executor": "e1", "profiles": {"det": det.to_dict(), "cls": cls.to_dict()}, "sessions": []}
    svc.receive(settings.topic("stats"), json.dumps(ex).encode())
    svc.receive(settings.topic("apps"), json.dumps(app_report("w1", 100, 100, 400)).encode())
    clock.advance(5)
    svc.receive(settings.topic("stats"), json.dumps(ex).encode())
    svc.receive(settings.topic("apps"), json.dumps(app_report("w1", 150, 150, 600)).encode())  # 10 frames/s
    doc = svc.run_epoch(clock.now())
    sp = doc["splits"]["traffic"]
    assert all(b % 10 == 0 for b in sp["budgets_ms"].values())          # 10 ms steps: no churn
    sids = {m: f"{m}-{b:g}ms" for m, b in sp["budgets_ms"].items()}
    assert doc["rates"][sids["det"]] == 10.0 and doc["rates"][sids["cls"]] == 40.0   # γ = 4
    assert {sids["det"], sids["cls"]} <= set(doc["assignments"]["e1"])

    app = App("traffic", slo_ms=300)
    assert split_to_adopt(app, doc) == sp["budgets_ms"]
    unassigned = dict(doc, assignments={"e1": {sids["det"]: 4}})
    assert split_to_adopt(app, unassigned) is None                      # cls-… not served yet: wait
    assert split_to_adopt(App("other", 100), doc) is None


def test_idle_plan_sessions_are_left_to_retire_and_static_ones_always_covered():
    doc = {"assignments": {"e1": {}}, "routing": {}}
    st = {"e1": {"executor": "e1", "sessions": [
        {"session": "old-split-140ms", "origin": "plan", "idle_s": 300.0},
        {"session": "recent-split-150ms", "origin": "plan", "idle_s": 20.0},
        {"session": "static-100ms", "origin": "static", "idle_s": 9999.0},
    ]}}
    out = cover_idle_sessions(doc, st, retire_idle_s=120)
    assert assignment_of(out, "e1") == {"recent-split-150ms": 1, "static-100ms": 1}
    assert out["retired"] == ["old-split-140ms"]
