"""Roles ride out outages of their bus and store, rejoin a group that left them without
partitions, and an executor the scheduler does not know keeps serving (issue 29). The faults are
injected by thin wrappers over the real in-memory bus and chdb store; the same roles run over
Kafka and the ClickHouse server in tests/integration."""

from __future__ import annotations

import json
import threading
import urllib.request

import numpy as np
import pytest

from vidnexus.config import Settings
from vidnexus.connectors.chdb_store import ChdbStore
from vidnexus.connectors.memory_bus import MemoryBus
from vidnexus.connectors.outage import Outage
from vidnexus.connectors.watchdog import GroupWatchdog, should_rejoin
from vidnexus.contracts.plans import EpochPlan
from vidnexus.contracts.profile import Profile
from vidnexus.contracts.rows import encode_rows
from vidnexus.contracts.schema import Column, TableSchema
from vidnexus.contracts.sessions import SessionKey
from vidnexus.contracts.topics import Topics
from vidnexus.errors import ConnectorError
from vidnexus.gpu_executor.client import ExecutorClient
from vidnexus.roles.executor import ExecutorRole
from vidnexus.roles.health import HealthServer
from vidnexus.roles.sink import SinkRole
from vidnexus.streams.ingest import StreamSpec, StreamWorker
from vidnexus.streams.registry import StreamRegistry
from vidnexus.streams.supervisor import IngestSupervisor
from vidnexus.testing import FakeClock, FakeRunner

from ..streams.media import frames_of

DOWN = ConnectorError("lost the server: connection refused", retryable=True)


class Switch:
    """A dependency that is down while ``down`` is set (every call raises a retryable error)."""

    def __init__(self) -> None:
        self.down = threading.Event()
        self.calls_while_down = 0

    def check(self) -> None:
        if self.down.is_set():
            self.calls_while_down += 1
            raise DOWN


class FlakyStore:
    def __init__(self, store, switch: Switch) -> None:
        self._s, self.switch = store, switch

    def __getattr__(self, name):
        attr = getattr(self._s, name)
        if name in ("query", "insert", "execute", "create_table"):
            def call(*a, **kw):
                self.switch.check()
                return attr(*a, **kw)
            return call
        return attr


class FlakyBus:
    def __init__(self, bus: MemoryBus, switch: Switch) -> None:
        self._b, self.switch = bus, switch

    def publish(self, *a, **kw):
        self.switch.check()
        return self._b.publish(*a, **kw)

    def flush(self, timeout_s: float = 10.0):
        self.switch.check()
        return self._b.flush(timeout_s)

    def delivered(self):
        self.switch.check()
        return self._b.delivered()

    def __getattr__(self, name):
        return getattr(self._b, name)


# -- Outage --------------------------------------------------------------------------------------
def test_outage_degrades_once_recovers_and_gives_up(caplog):
    clock = FakeClock()
    o = Outage("sink", clock, give_up_s=30)
    with caplog.at_level("WARNING", logger="vidnexus.connectors.outage"):
        delays = []
        for _ in range(5):
            delays.append(o.failed(DOWN))
            clock.advance(1)
        assert delays == [0.5, 1.0, 2.0, 4.0, 8.0]
        h = o.health()
        assert (h.state, h.failures, h.degraded_for_s, h.reason) == ("degraded", 5, 5.0, str(DOWN))
        o.ok()
        o.ok()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and "degraded" in lines[0] and "recovered after 5.0 s (5 failed attempts)" in lines[1]
    assert o.health().state == "ok" and o.failed(DOWN) == 0.5  # the backoff starts over
    clock.advance(30)
    with pytest.raises(ConnectorError, match="gave up after 30 s") as e:
        o.failed(DOWN)
    assert not e.value.retryable
    with pytest.raises(ValueError):  # not an outage: raised as it is
        Outage("x", clock).failed(ValueError("bug"))
    with pytest.raises(ConnectorError, match="syntax"):
        Outage("x", clock).failed(ConnectorError("syntax error"))


def test_health_endpoint_says_degraded_and_why():
    clock = FakeClock()
    o = Outage("sink", clock)
    server = HealthServer(o.health).start()
    try:
        def get():
            with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/health", timeout=5) as r:
                return r.status, json.loads(r.read())
        assert get() == (200, {"role": "sink", "state": "ok", "reason": "", "degraded_for_s": 0.0, "failures": 0,
                               "outages": 0, "dead_letters": {}})
        o.failed(DOWN)
        clock.advance(3)
        status, doc = get()
        assert status == 200 and doc["state"] == "degraded" and doc["degraded_for_s"] == 3.0 and "refused" in doc["reason"]
    finally:
        server.stop()


# -- the sink ------------------------------------------------------------------------------------
T = TableSchema("t_out", (Column("k", "UInt32"), Column("v", "String")), order_by=("k",),
                engine="ReplacingMergeTree")


def rows_message(k0: int, n: int) -> bytes:
    return encode_rows({T.name: [(k, f"v{k}") for k in range(k0, k0 + n)]}, {T.name: T})


def test_the_sink_keeps_its_rows_through_a_store_outage(tmp_path):
    settings = Settings(topic_prefix="so")
    switch = Switch()
    store = ChdbStore(tmp_path / "db")
    try:
        bus, clock = MemoryBus(), FakeClock()
        sink = SinkRole(settings, bus=bus, store=FlakyStore(store, switch), clock=clock, max_rows=10, retries=1)
        rows_topic = Topics("so").rows
        switch.down.set()  # down before the first message: the table cannot even be created
        for i in range(3):
            bus.publish(rows_topic, b"cam", rows_message(i * 5, 5))
        for _ in range(4):
            clock.advance(2.0)  # the buffer is old enough to flush
            with pytest.raises(ConnectorError):
                sink.step(timeout_s=0.0)
        assert sink.stats.dead == 0 and sink._buffered_rows == 15  # kept, nothing dead-lettered
        bus.publish(rows_topic, b"cam", rows_message(15, 5))
        with pytest.raises(ConnectorError):
            sink.step(timeout_s=0.0)  # full (15 ≥ 10): reads nothing more while the store is down
        assert sink._buffered_rows == 15
        switch.down.clear()
        sink.step(timeout_s=0.0)
        sink.step(timeout_s=0.0)
        clock.advance(2.0)
        sink.step(timeout_s=0.0)
        assert store.query(f"SELECT count(), uniqExact(k) FROM {T.name} FINAL").rows == [(20, 20)]
        assert sink.stats.dead == 0
        assert bus._groups[sink.group].committed == {(rows_topic, p): end
                                                     for p, end in enumerate(bus.end_offsets(rows_topic))}
    finally:
        store.close()


def test_the_sink_role_runs_through_an_outage_and_reports_it(tmp_path, caplog):
    settings = Settings(topic_prefix="sr")
    switch = Switch()
    store = ChdbStore(tmp_path / "db")
    try:
        bus = MemoryBus()
        sink = SinkRole(settings, bus=bus, store=FlakyStore(store, switch), max_rows=5, max_delay_s=0.05, retries=1)
        stop = threading.Event()
        t = threading.Thread(target=sink.run, args=(stop,), daemon=True)
        switch.down.set()
        with caplog.at_level("WARNING", logger="vidnexus.connectors.outage"):
            t.start()
            bus.publish(Topics("sr").rows, b"cam", rows_message(0, 3))
            while switch.calls_while_down < 2:
                stop.wait(0.05)
            assert sink.outage.health().state == "degraded"
            switch.down.clear()
            while sink.stats.rows < 3:
                stop.wait(0.05)
            stop.set()
            t.join(10)
        assert not t.is_alive() and sink.outage.health().state == "ok" and sink.outage.health().outages == 1
        assert store.query(f"SELECT count() FROM {T.name} FINAL").scalar() == 3
        lines = [r.getMessage() for r in caplog.records]
        assert len(lines) == 2 and lines[0].startswith("sink degraded: lost the server")
        assert lines[1].startswith("sink recovered after ")
    finally:
        store.close()


# -- ingest --------------------------------------------------------------------------------------
def test_a_file_waits_for_the_bus_and_loses_nothing():
    switch = Switch()
    inner = MemoryBus()
    bus = FlakyBus(inner, switch)
    clock = FakeClock()
    w = StreamWorker(StreamSpec("f", "synthetic://hud?fps=10&seconds=2", every_n=1), bus, "f", clock=clock)
    published = []
    real_publish = inner.publish

    def publish(topic, key, value, headers=()):
        published.append(1)
        out = real_publish(topic, key, value, headers)
        if len(published) == 4:
            switch.down.set()  # the broker goes away after 4 frames
        return out

    inner.publish = publish
    t = threading.Thread(target=w.run, daemon=True)
    t.start()
    clock.until_waiting(1)  # the worker waits for the bus (on the clock)
    assert w.status.state == "waiting" and w.status.published == 4
    while switch.calls_while_down < 4:  # it keeps trying, with backoff
        clock.advance(10)
        t.join(0.01)
    switch.down.clear()
    for _ in range(1000):
        if not t.is_alive():
            break
        clock.advance(10)
        t.join(0.01)
    nos = [f.frame_no for f in frames_of(inner)]
    assert w.status.state == "done" and nos == list(range(20)) and w.status.published == 20
    assert w.status.undelivered == 0


def test_a_live_stream_drops_and_counts_what_the_bus_cannot_take():
    switch = Switch()
    bus = FlakyBus(MemoryBus(), switch)
    w = StreamWorker(StreamSpec("cam", "synthetic://hud?fps=10&seconds=1", every_n=1), bus, "f")
    w.kind = "live"  # what the source says when it is opened; here forced for a deterministic source
    switch.down.set()

    class Raw:
        def __init__(self, i):
            self.index, self.pts, self.truth = i, i / 10, {}
            self.image = np.zeros((8, 8, 3), np.uint8)

    for i in range(3):
        w._publish(Raw(i))
    switch.down.clear()
    for i in range(3, 5):
        w._publish(Raw(i))
    st = w.status
    assert (st.sampled, st.published, st.undelivered) == (5, 2, 3)
    assert st.sampled == st.published + st.rejected + st.undelivered


def test_ingest_keeps_its_streams_running_while_the_registry_is_unreadable(tmp_path):
    switch = Switch()
    store = ChdbStore(tmp_path / "db")
    try:
        reg = StreamRegistry(FlakyStore(store, switch))
        reg.add(StreamSpec("a", "synthetic://hud?fps=10&seconds=2&seed=1", fps=5.0))
        bus = MemoryBus()
        sup = IngestSupervisor(reg, bus, "f", poll_s=0.05)
        sup.tick()
        assert set(sup.workers) == {"a"}
        switch.down.set()
        sup.tick()  # cannot read the registry, nor report: degraded, the worker keeps running
        assert sup.outage.health().state == "degraded" and set(sup.workers) | set(sup.ended) == {"a"}
        switch.down.clear()
        sup.run(once=True)
        assert sup.outage.health().state == "ok"
        assert [f.frame_no for f in frames_of(bus)] == list(range(0, 20, 2))
        assert reg.statuses()["a"].state == "done" and reg.statuses()["a"].published == 10
    finally:
        store.close()


# -- the executor --------------------------------------------------------------------------------
class NoTopics(FlakyBus):
    """Creating topics fails too while the switch is down."""

    def create_topic(self, *a, **kw):
        self.switch.check()
        return self._b.create_topic(*a, **kw)


def fake_load(clock):
    prof = Profile.linear(0.0001, 0.0005, 16)

    def load(names):
        return ({n: FakeRunner(prof, clock, fn=lambda x: float(x.sum())) for n in names}, {n: prof for n in names})
    return load


def test_a_session_a_plan_gives_while_the_broker_is_away_is_served_though_later_plans_forget_it():
    """CI's broker-restart run: a plan gave the executor a new session as the broker died; creating
    its topics failed, the next plans no longer assigned it, and the requests the worker had routed
    to it waited on its routed topic with nobody reading (the app's frames stopped)."""
    settings = Settings(topic_prefix="eb")
    clock = FakeClock()
    mem = MemoryBus(clock=clock)
    switch = Switch()

    key, new = SessionKey("m", 5000), SessionKey("m", 4990)
    role = ExecutorRole(settings, [key], bus=NoTopics(mem, switch), clock=clock, load=fake_load(clock),
                        executor_id="e1", stats_every_s=1e9)
    role.start()
    client = ExecutorClient(mem, settings, "c", clock=clock)  # the worker's, on the broker's other side
    try:
        plan = EpochPlan(1, 5, 0.0, assignments={"e1": {str(key): 4, str(new): 4}}, routing={str(new): {"e1": 9.0}},
                         executors=("e1",))
        client.route(plan.routing)
        switch.down.set()
        role.apply(plan)  # hosts the session; its topics wait for the broker (the rest of the plan applies)
        assert str(new) in role.specs and role.executor.targets()[str(new)] == 4
        fut = client.submit(str(new), np.ones(3, np.float32), slo_s=5.0)  # to e1's routed topic of the new session
        switch.down.clear()
        role.apply(EpochPlan(1, 6, 0.0, assignments={"e1": {str(key): 4}}, executors=("e1",)))
        read = 0
        for _ in range(50):
            read += role.step(timeout_s=0.0)
            if read:
                break
            clock.advance(0.01)
        assert read == 1
        reply = fut.result(timeout=10)
        assert reply.ok and reply.output == 3.0
        assert Topics("eb").requests(str(new)) in mem._topics  # created once the broker was back
    finally:
        client.close()
        role.close()


class RefusesModel:
    """A broker that refuses for good the topics of one model's sessions (a name Kafka rejects)."""

    def __init__(self, bus: MemoryBus, model: str) -> None:
        self._b, self.model = bus, model

    def create_topic(self, name, *a, **kw):
        if f".{self.model}-" in name:
            raise ConnectorError(f"cannot create topic {name!r}: INVALID_TOPIC_EXCEPTION", retryable=False)
        return self._b.create_topic(name, *a, **kw)

    def __getattr__(self, name):
        return getattr(self._b, name)


def test_a_session_whose_topics_the_broker_refuses_for_good_is_not_hosted_and_the_rest_is_served():
    settings = Settings(topic_prefix="er")
    clock = FakeClock()
    mem = MemoryBus(clock=clock)
    key, bad, good = SessionKey("m", 5000), SessionKey("bad", 5000), SessionKey("m", 4000)
    role = ExecutorRole(settings, [key], bus=RefusesModel(mem, "bad"), clock=clock, load=fake_load(clock),
                        executor_id="e1", stats_every_s=1e9)
    role.start()
    client = ExecutorClient(mem, settings, "c", clock=clock)
    try:
        role.apply(EpochPlan(1, 5, 0.0, assignments={"e1": {str(key): 4, str(bad): 4, str(good): 4}}, executors=("e1",)))
        assert str(bad) not in role.specs and str(bad) not in role.service.sessions
        assert not role.executor.hosts_model("bad")   # unloaded again
        assert str(good) in role.specs and str(good) in role.service.sessions
        fut = client.submit(str(good), np.ones(3, np.float32), slo_s=5.0)
        while not fut.done():
            role.step(timeout_s=0.0)
            clock.advance(0.001)
        assert fut.result().output == 3.0
    finally:
        client.close()
        role.close()


def test_an_executor_the_plan_does_not_know_keeps_serving_its_sessions():
    settings = Settings(topic_prefix="ek")
    clock = FakeClock()
    bus = MemoryBus(clock=clock)
    key = SessionKey("m", 5000)
    role = ExecutorRole(settings, [key], bus=bus, clock=clock, load=fake_load(clock), executor_id="e-back",
                        stats_every_s=1e9)
    role.start()
    try:
        # The scheduler presumed this executor dead: its plan gives the session to another one.
        role.apply(EpochPlan(9, 40, 0.0, assignments={"e-other": {str(key): 8}}, executors=("e-other",)))
        routed = Topics("ek").routed_requests(str(key), "e-back")  # consumed while it hosts the session
        assert list(role.service.sessions) == [str(key)]
        assert role.service.topics == [Topics("ek").requests(str(key)), Topics("ek").background_requests(str(key)), routed]
        client = ExecutorClient(bus, settings, "c", clock=clock)
        fut = client.submit(str(key), np.ones(3, np.float32), slo_s=5.0)
        while not fut.done():
            role.step(timeout_s=0.0)
        assert fut.result().output == 3.0
        # A plan that knows it is followed (here: it serves nothing but what clients routed here).
        role.apply(EpochPlan(9, 41, 0.0, assignments={"e-other": {str(key): 8}}, executors=("e-other", "e-back")))
        assert role.service.topics == [routed]
        client.close()
    finally:
        role.close()


class OwnsNothing:
    """A member the group gave no partition; polled after it is closed it raises, as Kafka's do."""

    closed = False

    def poll(self, timeout_s=1.0, max_records=500):
        if self.closed:
            raise RuntimeError("poll on a closed consumer")
        return []

    def assignment(self):
        return set()

    def commit(self, offsets=None, *, wait=True):
        if self.closed:
            raise RuntimeError("commit on a closed consumer")

    def wakeup(self):
        return None

    def close(self):
        self.closed = True


class StuckBus:
    """The first group member subscribed gets no partitions, ever (what a join that raced a broker
    restart looked like in the fault runs); later ones are normal."""

    def __init__(self, bus: MemoryBus) -> None:
        self._b = bus
        self.subscribes = 0

    def subscribe(self, topics, group, *, from_beginning=True):
        self.subscribes += 1
        c = self._b.subscribe(topics, group, from_beginning=from_beginning)
        if self.subscribes == 1:
            c.close()  # leaves the group: owns nothing and reads nothing
            return OwnsNothing()
        return c

    def __getattr__(self, name):
        return getattr(self._b, name)


def watchdog_executor(prefix: str, bus_of):
    """An executor on ``bus_of(MemoryBus)`` with a 30 s watchdog, started, and a client on the
    plain bus: (role, client, session, clock, bus)."""
    settings = Settings(topic_prefix=prefix, watchdog_s=30.0)
    clock = FakeClock()
    inner = MemoryBus(clock=clock)
    bus = bus_of(inner)
    key = SessionKey("m", 60000)
    role = ExecutorRole(settings, [key], bus=bus, clock=clock, load=fake_load(clock), executor_id="e1",
                        stats_every_s=1e9, follow_plans=False)
    role.start()
    return role, ExecutorClient(inner, settings, "c", clock=clock), key, clock, bus


def test_the_executor_watchdog_rejoins_a_group_that_gave_it_no_partitions(caplog):
    role, client, key, clock, bus = watchdog_executor("ew", StuckBus)
    try:
        futs = [client.submit(str(key), np.full(2, i, np.float32), slo_s=60.0) for i in range(5)]
        with caplog.at_level("ERROR", logger="vidnexus.connectors.watchdog"):
            for _ in range(20):  # 40 s with requests waiting and no partition
                role.step(timeout_s=0.0)
                clock.advance(2.0)
                if any(f.done() for f in futs):
                    break
        assert bus.subscribes == 2 and role.service.watchdog.rejoins == 1
        assert any("owns no partition" in r.getMessage() and "5 records wait" in r.getMessage()
                   for r in caplog.records)
        while not all(f.done() for f in futs):
            role.step(timeout_s=0.0)
        assert [f.result().output for f in futs] == [0.0, 2.0, 4.0, 6.0, 8.0]
        client.close()
    finally:
        role.close()


class RejoinFailsOnce(StuckBus):
    """As :class:`StuckBus`, but when the watchdog rejoins the broker is away (the second subscribe
    raises); the third subscribe is normal."""

    def subscribe(self, topics, group, *, from_beginning=True):
        if self.subscribes == 1:
            self.subscribes += 1
            raise DOWN
        return super().subscribe(topics, group, from_beginning=from_beginning)


def test_an_executor_rejoin_that_fails_is_tried_again_not_polled_closed():
    """A watchdog rejoin during a broker restart: the old consumer is closed, subscribing raises;
    the next step must subscribe again (it polled the closed consumer and the role ended)."""
    role, client, key, clock, bus = watchdog_executor("ex", RejoinFailsOnce)
    try:
        futs = [client.submit(str(key), np.full(2, i, np.float32), slo_s=60.0) for i in range(3)]
        failed = 0
        for _ in range(30):
            try:
                role.step(timeout_s=0.0)
            except ConnectorError:  # what the role's run() rides out
                failed += 1
            if bus.subscribes == 3:
                break
            clock.advance(2.0)
        assert failed == 1 and bus.subscribes == 3
        while not all(f.done() for f in futs):
            role.step(timeout_s=0.0)
        assert [f.result().output for f in futs] == [0.0, 2.0, 4.0]
    finally:
        client.close()
        role.close()


def test_a_sink_rejoin_that_fails_is_tried_again_not_polled_closed(tmp_path):
    settings = Settings(topic_prefix="sx", watchdog_s=30.0)
    store = ChdbStore(tmp_path / "db")
    clock = FakeClock()
    bus = RejoinFailsOnce(MemoryBus(clock=clock))
    try:
        sink = SinkRole(settings, bus=bus, store=store, clock=clock, max_rows=10, max_delay_s=0.5)
        bus.publish(Topics("sx").rows, b"cam", rows_message(0, 4))
        failed = 0
        for _ in range(40):
            try:
                sink.step(timeout_s=0.0)
            except ConnectorError:
                failed += 1
            if sink.stats.rows == 4:
                break
            clock.advance(2.0)
        assert failed == 1 and bus.subscribes == 3 and sink.stats.rows == 4
        assert store.query(f"SELECT count() FROM {T.name} FINAL").scalar() == 4
    finally:
        store.close()


def test_an_executor_that_starts_as_the_broker_goes_away_finishes_starting_when_it_returns():
    """start() fails after the models are loaded (creating its topics); the next step finishes it
    without loading them again (it found the executor there, took it as started, and ended on an
    assertion)."""
    settings = Settings(topic_prefix="es")
    clock = FakeClock()
    mem = MemoryBus(clock=clock)
    switch = Switch()
    loads = []
    inner = fake_load(clock)
    key = SessionKey("m", 5000)
    role = ExecutorRole(settings, [key], bus=NoTopics(mem, switch), clock=clock,
                        load=lambda names: loads.append(names) or inner(names), executor_id="e1", stats_every_s=1e9)
    switch.down.set()
    with pytest.raises(ConnectorError):
        role.start()
    switch.down.clear()
    client = ExecutorClient(mem, settings, "c", clock=clock)
    try:
        fut = client.submit(str(key), np.ones(3, np.float32), slo_s=5.0)
        for _ in range(200):
            role.step(timeout_s=0.0)
            if fut.done():
                break
        assert fut.result(timeout=5).output == 3.0 and len(loads) == 1
    finally:
        client.close()
        role.close()


class PollFails(FlakyBus):
    """Consumers whose polls fail while the switch is down (a broker restarting)."""

    def subscribe(self, *a, **kw):
        c, switch = self._b.subscribe(*a, **kw), self.switch

        class Consumer:
            def poll(self, *a, **kw):
                switch.check()
                return c.poll(*a, **kw)

            def __getattr__(self, name):
                return getattr(c, name)
        return Consumer()


def test_the_reply_listener_outlives_failing_polls(caplog):
    """The client's listener thread ended on the first failed poll; the worker went on sending and
    every request timed out."""
    settings = Settings(topic_prefix="el")
    clock = FakeClock()
    mem = MemoryBus(clock=clock)
    switch = Switch()
    key = SessionKey("m", 5000)
    role = ExecutorRole(settings, [key], bus=mem, clock=clock, load=fake_load(clock), executor_id="e1",
                        stats_every_s=1e9, follow_plans=False)
    role.start()
    switch.down.set()
    with caplog.at_level("WARNING", logger="vidnexus.gpu_executor.client"):
        client = ExecutorClient(PollFails(mem, switch), settings, "c", clock=clock)
        try:
            while switch.calls_while_down < 2:  # failed at least twice: it went on trying
                threading.Event().wait(0.05)
            switch.down.clear()
            fut = client.submit(str(key), np.ones(3, np.float32), slo_s=5.0)
            for _ in range(2000):
                role.step(timeout_s=0.0)
                if fut.done():
                    break
                threading.Event().wait(0.005)
            assert fut.result(timeout=5).output == 3.0
        finally:
            client.close()
            role.close()
    lines = [r.getMessage() for r in caplog.records]
    assert any(line.startswith("cannot read replies from") for line in lines)
    assert any(line.startswith("replies from") and "read again after" in line for line in lines)


def test_watchdog_decisions():
    assert should_rejoin(owned=0, lag=1, unassigned_since=0.0, now=30.0, stall_s=30.0)
    assert not should_rejoin(owned=0, lag=0, unassigned_since=0.0, now=300.0, stall_s=30.0)  # nothing waits
    assert not should_rejoin(owned=0, lag=5, unassigned_since=0.0, now=29.0, stall_s=30.0)
    assert not should_rejoin(owned=0, lag=5, unassigned_since=0.0, now=300.0, stall_s=0.0)  # disabled
    # An idle member of a group with more members than partitions: rejoins, but ever less often.
    clock = FakeClock()
    bus = MemoryBus(clock=clock)
    bus.create_topic("t", 1)
    owner = bus.subscribe(["t"], group="g")
    idle = bus.subscribe(["t"], group="g")
    assert owner.assignment() and not idle.assignment()
    bus.publish("t", b"k", b"v")
    dog = GroupWatchdog(bus, "g", lambda: ["t"], clock, stall_s=10.0, every_s=1.0)
    rejoined_at = []
    for _ in range(100):
        if dog.check(idle):
            rejoined_at.append(clock.now())
        clock.advance(1.0)
    assert len(rejoined_at) == 3 and rejoined_at[1] - rejoined_at[0] >= 20 and rejoined_at[2] - rejoined_at[1] >= 40


def test_the_sink_inserts_rows_of_two_worker_versions_into_one_table(tmp_path):
    """A rolling upgrade: old workers' messages carry a table's schema without its new column."""
    store = ChdbStore(tmp_path / "db")
    try:
        bus, clock = MemoryBus(), FakeClock()
        sink = SinkRole(Settings(topic_prefix="ru"), bus=bus, store=store, clock=clock, max_rows=100)
        new = TableSchema(T.name, (*T.columns, Column("w", "UInt8")), order_by=("k",), engine="ReplacingMergeTree")
        topic = Topics("ru").rows
        bus.publish(topic, b"a", encode_rows({T.name: [(1, "old")]}, {T.name: T}))
        bus.publish(topic, b"b", encode_rows({T.name: [(2, "new", 7)]}, {T.name: new}))
        bus.publish(topic, b"a", encode_rows({T.name: [(3, "old")]}, {T.name: T}))
        sink.step(timeout_s=0.0)
        clock.advance(2.0)
        sink.step(timeout_s=0.0)
        assert sink.stats.dead == 0
        assert store.query(f"SELECT k, v, w FROM {T.name} FINAL ORDER BY k").rows == [(1, "old", 0), (2, "new", 7),
                                                                                    (3, "old", 0)]
    finally:
        store.close()
