"""Request/reply codec and the bus client, over the in-memory bus with a real executor service."""

import threading
import time

import msgpack
import numpy as np
import pytest

from vidnexus.config import Settings
from vidnexus.connectors.memory_bus import MemoryBus
from vidnexus.errors import CodecError
from vidnexus.gpu_executor.backend import SessionSpec
from vidnexus.gpu_executor.client import ExecutorClient
from vidnexus.gpu_executor.executor import Executor
from vidnexus.gpu_executor.profile import Profile
from vidnexus.gpu_executor.service import ExecutorService, request_topic
from vidnexus.gpu_executor.wire import (InferRequest, WireReply, decode_reply, decode_request, encode_reply,
                                        encode_request)


def test_codecs_round_trip():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    r = decode_request(encode_request(InferRequest("a", "s", 12.5, "t", x, "app", "cam", 3)))
    assert (r.request_id, r.session_id, r.deadline_wall, r.reply_to, r.app, r.stream, r.frame_no) == (
        "a", "s", 12.5, "t", "app", "cam", 3)
    assert np.array_equal(r.input, x)
    rep = decode_reply(encode_reply(WireReply("a", "s", False, None, "early_drop", 0.1, 4)))
    assert (rep.ok, rep.reason, rep.batch) == (False, "early_drop", 4)


@pytest.mark.parametrize("raw, match", [(b"\x00zz", "malformed"), (msgpack.packb([7, "req"]), "version 7"),
                                        (msgpack.packb([1, "rep", 1]), "kind")])
def test_bad_requests(raw, match):
    with pytest.raises(CodecError, match=match):
        decode_request(raw)


def test_client_and_service_over_the_memory_bus():
    settings = Settings(bus="memory", topic_prefix="t")
    bus = MemoryBus()
    ex = Executor([SessionSpec("sum", "m", 5.0)], {"m": lambda xs: [float(x.sum()) for x in xs]},
                  {"m": Profile.linear(0.0001, 0.0005, 32)}).start()
    svc = ExecutorService(ex, bus, settings)
    t = threading.Thread(target=svc.run, daemon=True)
    t.start()
    client = ExecutorClient(bus, settings, "c")
    futs = [client.submit("sum", np.full((2,), i, np.float32), slo_s=5.0) for i in range(20)]
    bus.publish(request_topic(settings, "sum"), b"x", b"garbage")
    replies = [f.result(timeout=10) for f in futs]
    assert [r.output for r in replies] == [2.0 * i for i in range(20)]
    assert all(r.latency_s >= r.executor_latency_s for r in replies)
    late = client.submit("sum", np.zeros(2, np.float32), deadline_wall=0.0).result(timeout=10)
    assert not late.ok and late.reason == "deadline"
    svc.stop()
    t.join(timeout=10)
    client.close()
    ex.stop()
    assert svc.dead == 1
    dlq = bus.subscribe([settings.topic("dead-letter")], group=None)
    assert dlq.poll(timeout_s=1.0)[0].value == b"garbage"


def test_service_keeps_reading_while_a_request_is_unanswered_and_commits_only_answered_offsets():
    """Polling never waits for replies; the committed offset stops at the first unanswered request."""
    settings = Settings(bus="memory", topic_prefix="c")
    bus = MemoryBus()
    release = threading.Event()

    def runner(xs):
        if any(x[0] < 0 for x in xs):
            release.wait(10)
        return [float(x.sum()) for x in xs]

    ex = Executor([SessionSpec("s", "m", 30.0)], {"m": runner}, {"m": Profile.linear(0.0001, 0.0005, 1)}).start()
    svc = ExecutorService(ex, bus, settings, partitions=1)
    t = threading.Thread(target=svc.run, kwargs={"commit_every_s": 0.05}, daemon=True)
    t.start()
    client = ExecutorClient(bus, settings, "c")
    topic = request_topic(settings, "s")
    futs = [client.submit("s", np.full((2,), -1.0 if i == 0 else i, np.float32), slo_s=30.0) for i in range(6)]
    deadline = time.monotonic() + 10
    while svc.committable().get((topic, 0)) is None or svc._next.get((topic, 0), 0) < 6:
        assert time.monotonic() < deadline, "the service stopped reading behind an unanswered request"
        time.sleep(0.01)
    time.sleep(0.2)  # several commit cycles
    assert svc.committable()[(topic, 0)] == 0
    assert bus._groups["c-executor"].committed.get((topic, 0), 0) == 0
    release.set()
    assert [f.result(timeout=10).output for f in futs] == [-2.0] + [2.0 * i for i in range(1, 6)]
    deadline = time.monotonic() + 10
    while bus._groups["c-executor"].committed.get((topic, 0), 0) != 6:
        assert time.monotonic() < deadline, "answered requests were never committed"
        time.sleep(0.01)
    svc.stop()
    t.join(timeout=10)
    client.close()
    ex.stop()
