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
