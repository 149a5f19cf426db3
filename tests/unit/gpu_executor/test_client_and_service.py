"""The bus client and the executor service, over the in-memory bus with a real executor, all on one
FakeClock: time moves only when a batch runs or the test advances it, and nothing sleeps."""

import contextlib
import threading

import numpy as np
import pytest

from vidnexus.config import Settings
from vidnexus.contracts.requests import decode_replies
from vidnexus.connectors.memory_bus import MemoryBus
from vidnexus.gpu_executor.backend import SessionSpec
from vidnexus.gpu_executor.client import ExecutorClient
from vidnexus.gpu_executor.executor import Executor
from vidnexus.contracts.profile import Profile
from vidnexus.contracts.topics import Topics
from vidnexus.gpu_executor.service import ExecutorService
from vidnexus.errors import ConnectorError
from vidnexus.testing import FakeClock, FakeRunner


def request_topic(settings, session):
    return Topics(settings.topic_prefix).requests(session)


def test_client_and_service_over_the_memory_bus():
    settings = Settings(bus="memory", topic_prefix="t")
    clock = FakeClock()
    bus = MemoryBus(clock=clock)
    prof = Profile.linear(0.0001, 0.0005, 32)
    ex = Executor([SessionSpec("sum", "m", 5.0)], {"m": FakeRunner(prof, clock, fn=lambda x: float(x.sum()))},
                  {"m": prof}, clock=clock).start()
    svc = ExecutorService(ex, bus, settings, clock=clock)
    t = threading.Thread(target=svc.run, daemon=True)
    t.start()
    client = ExecutorClient(bus, settings, "c", clock=clock)
    futs = [client.submit("sum", np.full((2,), i, np.float32), slo_s=5.0) for i in range(20)]
    bus.publish(request_topic(settings, "sum"), b"x", b"garbage")
    replies = [f.result(timeout=10) for f in futs]
    assert [r.output for r in replies] == [2.0 * i for i in range(20)]
    # The caller's view, submit to reply: at least the fake time of the batch that answered it.
    assert all(r.ok and r.latency_s >= prof.latency(1) - 1e-9 for r in replies)  # fake-clock sums: float error
    late = client.submit("sum", np.zeros(2, np.float32), deadline_wall=0.0).result(timeout=10)
    assert not late.ok and late.reason == "deadline"
    svc.stop()                          # wakes the service's waiting poll: no clock advance needed
    t.join(timeout=10)
    assert not t.is_alive()
    client.close()
    ex.stop()
    assert svc.dead == 1
    dlq = bus.subscribe([Topics("t").dead_letter("requests")], group=None)
    assert dlq.poll(timeout_s=0.0)[0].value == b"garbage"


class _SlowAcks(MemoryBus):
    """A bus whose broker has not acknowledged the replies yet until ``acked`` is set."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.acked, self.flushes = False, 0

    def delivered(self):
        return self.acked

    def flush(self, timeout_s=10.0):
        self.flushes += 1


def test_the_serving_loop_commits_once_replies_are_acknowledged_and_waits_for_them_only_when_overdue():
    """Commits never block the loop while replies keep being acknowledged: an offset is committed
    only after the replies of what it covers are on the broker (at least once); past
    COMMIT_AT_LEAST_EVERY_S without a commit, the loop waits for them (flush)."""
    from vidnexus.gpu_executor.service import COMMIT_AT_LEAST_EVERY_S

    settings = Settings(bus="memory", topic_prefix="a")
    clock = FakeClock()
    bus = _SlowAcks(clock=clock)
    ex = Executor([SessionSpec("s", "m", 30.0)], {"m": lambda xs: [float(x.sum()) for x in xs]},
                  {"m": Profile.linear(0.0001, 0.0005, 8)}, clock=clock).start()
    svc = ExecutorService(ex, bus, settings, partitions=1, clock=clock)
    client = ExecutorClient(bus, settings, "c", clock=clock)
    topic = request_topic(settings, "s")
    futs = [client.submit("s", np.full((2,), i, np.float32), slo_s=30.0) for i in range(4)]
    assert svc.step(timeout_s=0.0, commit_every_s=0.05) == 4
    [f.result(timeout=10) for f in futs]
    assert svc.wait_answered(timeout_s=10.0)
    committed = bus._groups["a-executor"].committed
    clock.advance(0.1)
    svc.step(timeout_s=0.0, commit_every_s=0.05)
    assert committed.get((topic, 0), 0) == 0 and bus.flushes == 0  # replies not acknowledged: later
    bus.acked = True
    clock.advance(0.1)
    svc.step(timeout_s=0.0, commit_every_s=0.05)
    assert committed == {(topic, 0): 4} and bus.flushes == 0
    bus.acked = False
    more = [client.submit("s", np.full((2,), i, np.float32), slo_s=30.0) for i in range(2)]
    svc.step(timeout_s=0.0, commit_every_s=0.05)
    [f.result(timeout=10) for f in more]
    assert svc.wait_answered(timeout_s=10.0)
    clock.advance(0.1)
    svc.step(timeout_s=0.0, commit_every_s=0.05)
    assert committed == {(topic, 0): 4}
    clock.advance(COMMIT_AT_LEAST_EVERY_S)
    svc.step(timeout_s=0.0, commit_every_s=0.05)
    assert committed == {(topic, 0): 6} and bus.flushes == 1  # overdue: it waited for the acks
    svc.stop()
    svc.close()
    client.close()
    ex.stop()


def test_service_keeps_reading_while_a_request_is_unanswered_and_commits_only_answered_offsets():
    """Polling never waits for replies; the committed offset stops at the first unanswered request."""
    settings = Settings(bus="memory", topic_prefix="c")
    clock = FakeClock()
    bus = MemoryBus(clock=clock)
    release = threading.Event()

    def runner(xs):
        if any(x[0] < 0 for x in xs):
            release.wait(10)
        return [float(x.sum()) for x in xs]

    ex = Executor([SessionSpec("s", "m", 30.0)], {"m": runner}, {"m": Profile.linear(0.0001, 0.0005, 1)},
                  clock=clock).start()
    svc = ExecutorService(ex, bus, settings, partitions=1, clock=clock)
    client = ExecutorClient(bus, settings, "c", clock=clock)
    topic = request_topic(settings, "s")
    futs = [client.submit("s", np.full((2,), -1.0 if i == 0 else i, np.float32), slo_s=30.0) for i in range(6)]
    assert svc.step(timeout_s=0.0, commit_every_s=0.05) == 6   # all read, though none is answered
    committed = bus._groups["c-executor"].committed
    for _ in range(3):                                         # several commit cycles
        clock.advance(0.1)
        assert svc.step(timeout_s=0.0, commit_every_s=0.05) == 0
        assert svc.committable()[(topic, 0)] == 0
        assert committed == {(topic, 0): 0}
    release.set()
    assert [f.result(timeout=10).output for f in futs] == [-2.0] + [2.0 * i for i in range(1, 6)]
    assert svc.wait_answered(timeout_s=10.0)
    clock.advance(0.1)
    svc.step(timeout_s=0.0, commit_every_s=0.05)
    assert committed == {(topic, 0): 6}
    svc.stop()
    svc.close()
    client.close()
    ex.stop()


def test_requests_with_no_deadline_travel_on_the_sessions_background_topic():
    """A backfill's request (no deadline) goes to ``req.<session>.bg`` and is answered from there; its
    offsets are committed apart from the live topic's, so one waiting for slack holds back no live
    request's commit."""
    import math

    settings = Settings(bus="memory", topic_prefix="bg")
    clock = FakeClock()
    bus = MemoryBus(clock=clock)
    prof = Profile.linear(0.0001, 0.0005, 8)
    ex = Executor([SessionSpec("s", "m", 30.0)], {"m": FakeRunner(prof, clock, fn=lambda x: float(x.sum()))},
                  {"m": prof}, clock=clock).start()
    svc = ExecutorService(ex, bus, settings, partitions=1, clock=clock)
    client = ExecutorClient(bus, settings, "c", clock=clock)
    names = Topics("bg")
    back = client.submit_many("s", [np.full((2,), 3.0, np.float32)], deadline_wall=math.inf)
    live = [client.submit("s", np.full((2,), i, np.float32), slo_s=30.0) for i in range(4)]
    assert svc.step(timeout_s=0.0, commit_every_s=0.05) == 5
    assert [f.result(timeout=10).output for f in live] == [2.0 * i for i in range(4)]
    assert back[0].result(timeout=10).output == 6.0
    assert svc.wait_answered(timeout_s=10.0)
    clock.advance(0.1)
    svc.step(timeout_s=0.0, commit_every_s=0.05)
    assert bus._groups["bg-executor"].committed == {(names.requests("s"), 0): 4, (names.background_requests("s"), 0): 1}
    assert ex.background_stats() and ex.background_stats()[0]["replies"] == 1
    svc.stop()
    svc.close()
    client.close()
    ex.stop()


def test_requests_nobody_answers_expire_on_the_clients_clock():
    """A request with ``expires_wall`` and no executor behind its session ends as a ``timeout`` drop
    once the clock passes that time, and not before."""
    clock = FakeClock()
    client = ExecutorClient(MemoryBus(clock=clock), Settings(topic_prefix="x"), "c", clock=clock)
    try:
        fut = client.submit("nobody-50ms", np.zeros(2, np.float32), deadline_wall=clock.wall() + 0.05,
                            expires_wall=clock.wall() + 0.1)
        clock.until_waiting(1)                                 # the listener waits on the clock
        clock.advance(0.09)
        clock.until_waiting(1)
        assert not fut.done() and client.outstanding == 1
        clock.advance(0.02)
        r = fut.result(timeout=10)
        assert (r.ok, r.reason) == (False, "timeout") and r.latency_s == pytest.approx(0.11)
        assert client.outstanding == 0
    finally:
        client.close()


def test_a_frames_inputs_for_a_session_travel_as_one_message_and_come_back_as_one():
    """submit_many: one request message (cut only past max_bytes), its replies in one message, a
    reply per input in order; the executor batches the inputs together (and the three messages of
    a cut request, answered by one batch, share one reply message)."""
    settings = Settings(bus="memory", topic_prefix="m1")
    clock = FakeClock()
    bus = MemoryBus(clock=clock)
    prof = Profile.linear(0.0001, 0.0005, 32)
    runner = FakeRunner(prof, clock, fn=lambda x: float(x.sum()))
    ex = Executor([SessionSpec("sum", "m", 5.0)], {"m": runner}, {"m": prof}, clock=clock).start()
    svc = ExecutorService(ex, bus, settings, clock=clock)
    t = threading.Thread(target=svc.run, daemon=True)
    t.start()
    client = ExecutorClient(bus, settings, "c", clock=clock)
    requests = bus.subscribe([request_topic(settings, "sum")], group=None)
    replies_topic = bus.subscribe([client.reply_topic], group=None)
    try:
        xs = [np.full((4,), i, np.float32) for i in range(12)]  # 16 bytes each
        futs = client.submit_many("sum", xs, deadline_wall=clock.wall() + 5.0)
        assert [f.result(timeout=10).output for f in futs] == [4.0 * i for i in range(12)]
        assert len(requests.poll(timeout_s=0.0)) == 1 and len(replies_topic.poll(timeout_s=0.0)) == 1
        assert sum(runner.batches) == 12 and len(runner.batches) <= 2  # batched together, not one by one
        cut = client.submit_many("sum", xs, deadline_wall=clock.wall() + 5.0, max_bytes=64)  # 4 inputs a message
        assert [f.result(timeout=10).output for f in cut] == [4.0 * i for i in range(12)]
        assert len(requests.poll(timeout_s=0.0)) == 3
        answered = [g for m in replies_topic.poll(timeout_s=0.0) for g in decode_replies(m.value)]
        assert len(answered) == 3 and [len(reps) for _, _, reps in answered] == [4, 4, 4]
        assert svc.reply_messages <= 1 + (len(runner.batches) - 1)  # at most one per batch
        assert client.outstanding == 0 and svc.served == 24
    finally:
        svc.stop()
        t.join(timeout=10)
        client.close()
        ex.stop()


def _until(condition, timeout_s=10.0):
    """Wait (real time: another thread makes it true) until ``condition()``; fail after ``timeout_s``."""
    import time

    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


class _GatedRunner(FakeRunner):
    """Its first batch waits for ``go``: the requests sent meanwhile queue up for the next one."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.started, self.go = threading.Event(), threading.Event()

    def __call__(self, inputs):
        if not self.batches:
            self.started.set()
            assert self.go.wait(10)
        return super().__call__(inputs)


@contextlib.contextmanager
def _served(prefix, fn):
    """An executor (a gated runner computing ``fn`` per input) served over a memory bus on a
    FakeClock: yields (settings, bus, clock, executor, service, runner); stops them after."""
    settings = Settings(bus="memory", topic_prefix=prefix)
    clock = FakeClock()
    bus = MemoryBus(clock=clock)
    prof = Profile.linear(0.0001, 0.0005, 32)
    runner = _GatedRunner(prof, clock, fn=fn)
    ex = Executor([SessionSpec("sum", "m", 5.0)], {"m": runner}, {"m": prof}, clock=clock).start()
    svc = ExecutorService(ex, bus, settings, clock=clock)
    t = threading.Thread(target=svc.run, daemon=True)
    t.start()
    try:
        yield settings, bus, clock, ex, svc, runner
    finally:
        svc.stop()
        t.join(timeout=10)
        ex.stop()


def test_a_batchs_replies_travel_as_one_message_per_reply_topic():
    """Requests of two clients answered by one batch: one reply message per client (not one per
    request), each answering its own requests; the service's count says so."""
    with _served("rb", lambda x: float(x.sum())) as (settings, bus, clock, ex, svc, runner):
        a, b = ExecutorClient(bus, settings, "a", clock=clock), ExecutorClient(bus, settings, "b", clock=clock)
        seen = {c: bus.subscribe([c.reply_topic], group=None) for c in (a, b)}
        try:
            first = a.submit("sum", np.zeros(2, np.float32), slo_s=5.0)
            assert runner.started.wait(10)  # the device holds the first batch: the rest queue
            fa = [a.submit("sum", np.full((2,), i, np.float32), slo_s=5.0) for i in range(5)]
            fb = [b.submit("sum", np.full((2,), 10 + i, np.float32), slo_s=5.0) for i in range(3)]
            _until(lambda: ex.stats()[0]["arrivals"] == 9)  # all nine taken before the device goes on
            runner.go.set()
            assert first.result(timeout=10).output == 0.0
            assert [f.result(timeout=10).output for f in fa] == [2.0 * i for i in range(5)]
            assert [f.result(timeout=10).output for f in fb] == [2.0 * (10 + i) for i in range(3)]
            assert runner.batches == [1, 8]
            got = {c: [decode_replies(m.value) for m in sub.poll(timeout_s=0.0)] for c, sub in seen.items()}
            assert [len(groups) for groups in got[a]] == [1, 5] and [len(groups) for groups in got[b]] == [3]
            assert svc.reply_messages == 3 and svc.served == 9
        finally:
            a.close()
            b.close()


def test_a_batchs_replies_past_the_message_limit_travel_one_per_request(monkeypatch):
    import vidnexus.gpu_executor.service as service

    monkeypatch.setattr(service, "MAX_REPLIES_MESSAGE_BYTES", 64)
    with _served("rc", lambda x: [float(v) for v in x]) as (settings, bus, clock, ex, svc, runner):  # 8 floats a reply
        client = ExecutorClient(bus, settings, "c", clock=clock)
        sub = bus.subscribe([client.reply_topic], group=None)
        try:
            first = client.submit("sum", np.zeros(8, np.float32), slo_s=5.0)
            assert runner.started.wait(10)
            futs = [client.submit("sum", np.full((8,), i, np.float32), slo_s=5.0) for i in range(4)]
            _until(lambda: ex.stats()[0]["arrivals"] == 5)
            runner.go.set()
            assert first.result(timeout=10).ok
            assert [f.result(timeout=10).output for f in futs] == [[float(i)] * 8 for i in range(4)]
            assert runner.batches == [1, 4]
            assert [len(decode_replies(m.value)) for m in sub.poll(timeout_s=0.0)] == [1] * 5
            assert svc.reply_messages == 5
        finally:
            client.close()


def test_close_deletes_the_clients_reply_topic_only():
    settings = Settings(bus="memory", topic_prefix="r")
    bus = MemoryBus(clock=FakeClock())
    a, b = ExecutorClient(bus, settings, "a"), ExecutorClient(bus, settings, "b")
    assert bus.partitions(a.reply_topic) == 1
    a.close()
    with pytest.raises(ConnectorError, match="unknown topic"):
        bus.partitions(a.reply_topic)
    assert bus.partitions(b.reply_topic) == 1
    b.close()


class _Unreachable(MemoryBus):
    def delete_topic(self, name):
        raise ConnectorError("Kafka is not reachable", retryable=True)


def test_close_logs_and_carries_on_when_the_topic_cannot_be_deleted(caplog):
    bus = _Unreachable(clock=FakeClock())
    client = ExecutorClient(bus, Settings(bus="memory", topic_prefix="u"), "c")
    with caplog.at_level("WARNING", logger="vidnexus.gpu_executor.client"):
        client.close()
    assert not client._thread.is_alive()
    assert any("was not deleted" in r.getMessage() and "not reachable" in r.getMessage() for r in caplog.records)
    assert bus.partitions(client.reply_topic) == 1
