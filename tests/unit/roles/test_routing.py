"""Requests follow the plan's routing weights: a client that was given a plan sends each session's
requests to the executors the plan names, in proportion, each on its own topic; an executor
consumes its own topic of every session it hosts; workers take routing from fresh plans only."""

import numpy as np

from vidnexus.config import Settings
from vidnexus.connectors.memory_bus import MemoryBus
from vidnexus.contracts.plans import EpochPlan, encode_plan
from vidnexus.contracts.sessions import SessionKey
from vidnexus.contracts.topics import Topics
from vidnexus.gpu_executor.client import ExecutorClient
from vidnexus.operators.chain import App
from vidnexus.roles.executor import ExecutorRole
from vidnexus.roles.worker import ROUTE_PLANS_FOR_S, WorkerRole
from vidnexus.testing import FakeClock
from tests.unit.roles.test_outages import fake_load

SETTINGS = Settings(topic_prefix="rt")
T = Topics("rt")
SID = "m-5000ms"


def counts(bus, topics):
    c = bus.subscribe(topics, group=None, from_beginning=True)
    got: dict[str, int] = {}
    for m in c.poll(timeout_s=0.0):
        got[m.topic] = got.get(m.topic, 0) + 1
    c.close()
    return got


def test_a_routed_client_splits_a_sessions_requests_by_the_plans_weights():
    clock = FakeClock()
    bus = MemoryBus(clock=clock)
    client = ExecutorClient(bus, SETTINGS, "c", clock=clock)
    try:
        client.submit("other-100ms", np.ones(2, np.float32))  # not routed: the shared topic
        client.route({SID: {"e1": 30.0, "e2": 10.0}, "idle-100ms": {}})
        for _ in range(40):
            client.submit(SID, np.ones(2, np.float32))
        client.submit("idle-100ms", np.ones(2, np.float32))  # routed nowhere: shared
        got = counts(bus, [T.routed_requests(SID, "e1"), T.routed_requests(SID, "e2"), T.requests(SID),
                           T.requests("other-100ms"), T.requests("idle-100ms")])
        assert got == {T.routed_requests(SID, "e1"): 30, T.routed_requests(SID, "e2"): 10,
                       T.requests("other-100ms"): 1, T.requests("idle-100ms"): 1}
        client.route({})  # back to the shared topics
        client.submit(SID, np.ones(2, np.float32))
        assert counts(bus, [T.requests(SID)]) == {T.requests(SID): 1}
    finally:
        client.close()


def two_executors():
    """e1 and e2 hosting SID on one bus (each answers a request with the sum of its input), and a client."""
    clock = FakeClock()
    bus = MemoryBus(clock=clock)
    roles = {e: ExecutorRole(SETTINGS, [SessionKey.parse(SID)], bus=bus, clock=clock, load=fake_load(clock),
                             executor_id=e, stats_every_s=1e9).start() for e in ("e1", "e2")}
    return roles, ExecutorClient(bus, SETTINGS, "c", clock=clock)


def test_each_executor_serves_what_clients_route_to_it_even_after_the_plan_moves_the_session():
    roles, client = two_executors()
    try:
        plan = EpochPlan(1, 1, 0.0, assignments={"e1": {SID: 4}, "e2": {SID: 4}},
                         routing={SID: {"e1": 10.0, "e2": 30.0}}, executors=("e1", "e2"))
        for r in roles.values():
            r.apply(plan)
        client.route(plan.routing)
        futs = [client.submit(SID, np.full(2, i, np.float32), slo_s=5.0) for i in range(8)]
        # The next plan gives the session to e1 alone: e2 still answers what was routed to it.
        moved = EpochPlan(1, 2, 0.0, assignments={"e1": {SID: 4}}, routing={SID: {"e1": 40.0}},
                          executors=("e1", "e2"))
        for r in roles.values():
            r.apply(moved)
        while not all(f.done() for f in futs):
            for r in roles.values():
                r.step(timeout_s=0.0)
        assert [f.result().output for f in futs] == [2.0 * i for i in range(8)]
        served = {e: r.service.served for e, r in roles.items()}
        # (a member joining or leaving the group has the others read their unanswered requests
        # again, as Kafka does: at least once)
        assert served["e1"] >= 2 and served["e2"] >= 6
        assert T.requests(SID) not in roles["e2"].service.topics
        assert T.routed_requests(SID, "e2") in roles["e2"].service.topics
    finally:
        client.close()
        for r in roles.values():
            r.close()


def test_an_executor_id_must_be_usable_in_a_topic_name():
    import pytest

    from vidnexus.errors import ConfigError

    with pytest.raises(ConfigError, match="--id"):
        ExecutorRole(SETTINGS, [SessionKey("m", 100)], bus=MemoryBus(), executor_id="gpu 0/a")


def test_workers_route_by_fresh_plans_only():
    clock = FakeClock()
    bus = MemoryBus(clock=clock)
    bus.create_topic(T.control, 1, compacted=True)
    app = App("noop", slo_ms=1000)
    app.table("out", {"n": "UInt32"})
    app.chain(lambda s: s.map(lambda f: {"n": 1}).sink("out"))
    role = WorkerRole(SETTINGS, app, bus=bus, worker_id="w", clock=clock)
    try:
        now = clock.wall()
        bus.publish(T.control, b"plan", encode_plan(EpochPlan(1, 1, now - ROUTE_PLANS_FOR_S - 1,
                                                              routing={SID: {"gone": 5.0}})))
        role.follow_plan()
        assert role.client._routers == {}
        bus.publish(T.control, b"plan", encode_plan(EpochPlan(1, 2, now, routing={SID: {"e1": 5.0}})))
        role.follow_plan()
        assert set(role.client._routers) == {SID}
    finally:
        role.close()


def test_what_was_routed_to_an_executor_gone_from_the_plans_is_served_by_the_one_given_its_session():
    roles, client = two_executors()
    try:
        both = EpochPlan(1, 1, 0.0, assignments={"e1": {SID: 4}, "e2": {SID: 4}},
                         routing={SID: {"e1": 10.0, "e2": 10.0}}, executors=("e1", "e2"))
        for r in roles.values():
            r.apply(both)
            r.step(timeout_s=0.0)
        client.route(both.routing)
        futs = [client.submit(SID, np.full(2, i, np.float32), slo_s=5.0) for i in range(6)]
        # e2 dies before reading anything; the next plan gives the session to e1 alone.
        roles["e2"].close()
        alone = EpochPlan(1, 2, 0.0, assignments={"e1": {SID: 4}}, routing={SID: {"e1": 20.0}}, executors=("e1",))
        roles["e1"].apply(alone)
        assert T.routed_requests(SID, "e2") in roles["e1"].service.topics
        while not all(f.done() for f in futs):
            roles["e1"].step(timeout_s=0.0)
        assert [f.result().output for f in futs] == [2.0 * i for i in range(6)]
        # e2 is back in the plans: e1 leaves its topic to it.
        roles["e1"].apply(both)
        assert T.routed_requests(SID, "e2") not in roles["e1"].service.topics
    finally:
        client.close()
        roles["e1"].close()


def test_an_executor_that_never_saw_the_dead_one_serves_its_routed_requests_when_the_plan_names_it_gone():
    """kill-executor: the executor restarted under a new id; the first plan it follows no longer
    lists the dead one, so only the plan can tell it whose routed topic holds the session's requests."""
    roles, client = two_executors()
    try:
        client.route({SID: {"e2": 10.0}})
        futs = [client.submit(SID, np.full(2, i, np.float32), slo_s=5.0) for i in range(4)]
        roles["e2"].close()  # dies before reading anything; e1 (the restart) never saw it in a plan
        plan = EpochPlan(1, 7, 0.0, assignments={"e1": {SID: 4}}, routing={SID: {"e1": 10.0}}, executors=("e1",),
                         gone={SID: ("e2",)})
        roles["e1"].apply(plan)
        assert T.routed_requests(SID, "e2") in roles["e1"].service.topics
        for _ in range(200):
            roles["e1"].step(timeout_s=0.0)
            if all(f.done() for f in futs):
                break
        assert [f.result(timeout=10).output for f in futs] == [2.0 * i for i in range(4)]
    finally:
        client.close()
        roles["e1"].close()


def test_a_worker_with_pinned_stage_slos_routes_by_the_plan_and_keeps_its_slos():
    from vidnexus.contracts.plans import LatencySplit

    clock = FakeClock()
    bus = MemoryBus(clock=clock)
    bus.create_topic(T.control, 1, compacted=True)
    app = App("one", slo_ms=1000)
    app.model("m")
    app.table("out", {"n": "UInt32"})
    app.chain(lambda s: s.infer("m").map(lambda f: {"n": 1}).sink("out"))
    role = WorkerRole(SETTINGS, app, bus=bus, worker_id="w", clock=clock, split={"m": 5000})
    try:
        split = LatencySplit(True, budgets_ms={"m": 400.0})
        bus.publish(T.control, b"plan", encode_plan(EpochPlan(1, 1, clock.wall(), assignments={"e1": {"m-400ms": 4}},
                                                              routing={SID: {"e1": 5.0}}, splits={"one": split})))
        role.follow_plan()
        assert set(role.client._routers) == {SID}
        assert role.backend.slos == {"m": 5000.0}
    finally:
        role.close()
