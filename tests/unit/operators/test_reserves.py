"""The worker's side of deadlines that add up: the engine measures the app's CPU steps after each
DNN node and sends a stage's requests with the frame's deadline less the CPU steps after that
stage; the remote backend gives the executor the stage's budget plus the measured bus round trip,
less the reply's trip back; the worker reports what it measured for the latency split."""

import asyncio
import threading
from concurrent.futures import Future

import pytest

from vidnexus.config import Settings
from vidnexus.connectors.memory_bus import MemoryBus
from vidnexus.contracts.frames import encode_frame
from vidnexus.contracts.replies import Reply
from vidnexus.contracts.reports import decode_report, encode_report
from vidnexus.contracts.topics import Topics
from vidnexus.operators.chain import App
from vidnexus.operators.engine import ChainEngine
from vidnexus.operators.infer import RemoteBackend
from vidnexus.roles.worker import WorkerRole
from vidnexus.testing import FakeClock, frame_factory


class Recorder:
    """Answers every request; keeps (model, deadline_wall) of each call."""

    def __init__(self):
        self.calls = []

    async def infer(self, model, inputs, deadline_wall):
        self.calls.append((model.name, deadline_wall))
        return [Reply(True, 1.0) for _ in inputs]


def timed_app(clock):
    """5 ms of CPU before the detector, 30 ms between the stages, 10 ms after the classifier."""
    app = App("timed", slo_ms=1000)
    app.model("det")
    app.model("cls")
    app.table("t", {"v": "Float64"})
    app.chain(lambda s: (s.map(lambda f: clock.advance(0.005) or f.frame_no)
                         .infer("det", merge=lambda v, o: v)
                         .map(lambda v: clock.advance(0.030) or v)
                         .infer("cls", merge=lambda v, o: o)
                         .map(lambda v: clock.advance(0.010) or {"v": v})
                         .sink("t")))
    return app


def test_the_engine_measures_cpu_steps_per_node_and_reserves_them_in_the_stage_deadlines():
    clock = FakeClock(wall_start=1_800_000_000.0)
    backend = Recorder()
    eng = ChainEngine(timed_app(clock), backend, clock=clock)

    async def go():
        ingests = []
        for n in range(25):
            f = frame_factory("c", n, clock=clock)
            ingests.append(f.ingest_ts)
            assert (await eng.run(f)).status == "ok"
        return ingests

    ingests = asyncio.run(go())
    assert eng.cpu_after_s("frames") == pytest.approx(0.005)
    assert eng.cpu_after_s("det") == pytest.approx(0.030)
    assert eng.cpu_after_s("cls") == pytest.approx(0.010)
    per_frame = [(backend.calls[2 * i], backend.calls[2 * i + 1]) for i in range(25)]
    # Until 20 frames were measured nothing is reserved: the frame's own deadline, ingest + 1 s.
    (d0, t0), (c0, u0) = per_frame[0]
    assert (d0, c0) == ("det", "cls") and t0 - ingests[0] == pytest.approx(1.0) and u0 - ingests[0] == pytest.approx(1.0)
    # Then each stage's replies must arrive before the CPU steps after it still fit.
    (_, t), (_, u) = per_frame[24]
    assert t - ingests[24] == pytest.approx(1.0 - 0.030) and u - ingests[24] == pytest.approx(1.0 - 0.010)


class StubClient:
    def __init__(self, now, trip, reserve):
        self.now, self.trip, self.reserve, self.sent = now, trip, reserve, []

    def wall(self):
        return self.now

    def round_trip_s(self, session_id):
        return self.trip  # its 90th percentile

    def reply_reserve_s(self, session_id):
        return self.reserve  # half its median

    def submit_many(self, session_id, xs, **kw):
        self.sent.append((session_id, kw))
        futs = []
        for _ in xs:
            f = Future()
            f.set_result(Reply(True, 0.0))
            futs.append(f)
        return futs


@pytest.mark.parametrize("cap, want", [
    (200.0, 100.0 + 0.100 + 0.020 - 0.004),   # the stage's budget plus the round trip, less the reply's reserve
    (100.050, 100.050 - 0.004),               # the frame's deadline (less later CPU steps) comes first
])
def test_the_remote_backend_adds_the_round_trip_the_split_reserved(cap, want):
    app = App("a", slo_ms=300)
    det = app.model("det")
    app.table("t", {"v": "Float64"})
    app.chain(lambda s: s.infer("det", merge=lambda v, o: {"v": o}).sink("t"))
    client = StubClient(now=100.0, trip=0.020, reserve=0.004)
    rb = RemoteBackend(app, client, {"det": 100.0}, grace_s=5.0)
    asyncio.run(rb.infer(det, [1.0], cap))
    sid, kw = client.sent[0]
    assert sid == "det-100ms" and kw["deadline_wall"] == pytest.approx(want)
    assert kw["expires_wall"] == pytest.approx(want + 0.004 + 5.0)   # the stage's deadline, then the grace


def test_the_worker_reports_what_it_measured_outside_the_executor():
    settings, topics = Settings(bus="memory", topic_prefix="oh"), Topics("oh")
    app = App("cpu_only", slo_ms=1000)
    app.table("t", {"n": "UInt32"})
    app.chain(lambda s: s.map(lambda f: {"n": sum(range(2000)) % 7 + f.frame_no}).sink("t"))
    bus = MemoryBus()
    role = WorkerRole(settings, app, bus=bus, worker_id="t")
    for i in range(30):
        f = frame_factory("a", i)
        bus.publish(topics.frames, b"a", encode_frame(f))
    asyncio.run(role.run_async(threading.Event(), until_idle_s=0.3))
    oh = decode_report(encode_report(role.report())).overheads
    assert oh.cpu_ms["frames"] > 0 and oh.publish_ms > 0 and oh.hop_ms == {}
    assert oh.cpu_ms["frames"] == pytest.approx(role.engine.cpu_after_s("frames") * 1000, abs=1e-3)
