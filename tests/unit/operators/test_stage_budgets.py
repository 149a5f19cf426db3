"""Deadlines that add up: each stage's requests carry the stage's budget from the latency split, so
a stage that has spent its budget is dropped there by the executor, and the next stage never spends
its own budget on a frame that can no longer make it. Real chain engine, executor client, executor
role and its early drop, on the in-memory bus and a fake clock (the models' latencies come from
their profiles)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from vidnexus.config import Settings
from vidnexus.connectors.memory_bus import MemoryBus
from vidnexus.contracts.profile import Profile
from vidnexus.contracts.sessions import SessionKey
from vidnexus.gpu_executor.client import ExecutorClient
from vidnexus.operators.chain import App
from vidnexus.operators.engine import ChainEngine
from vidnexus.operators.infer import RemoteBackend
from vidnexus.roles.executor import ExecutorRole
from vidnexus.testing import FakeClock, FakeRunner, frame_factory

SPLIT = {"a": 200.0, "b": 800.0}  # the app's 1 s SLO split over its two stages


def two_stages() -> App:
    app = App("st", slo_ms=1000)
    app.model("a")
    app.model("b")
    app.table("st_rows", {"v": "Float64"})
    app.chain(lambda s: (s.infer("a", input=lambda f: np.ones(2, np.float32), merge=lambda f, o: o)
                         .infer("b", input=lambda v: np.full(2, v, np.float32), merge=lambda v, o: {"v": o})
                         .sink("st_rows")))
    return app


def run_frame(a_seconds: float) -> tuple[object, dict[str, FakeRunner], list[float]]:
    """One frame through stage a (taking ``a_seconds`` on the executor) and stage b (1 ms)."""
    clock = FakeClock(wall_start=1_800_000_000.0)
    bus = MemoryBus(clock=clock)
    settings = Settings(topic_prefix="sb")
    runners = {"a": FakeRunner(Profile.linear(0.0, a_seconds, 16), clock, fn=lambda x: float(x.sum())),
               "b": FakeRunner(Profile.linear(0.0, 0.001, 16), clock, fn=lambda x: float(x.sum()))}

    def load(names):
        return {n: runners[n] for n in names}, {n: runners[n].profile for n in names}

    keys = [SessionKey(m, ms) for m, ms in SPLIT.items()]
    role = ExecutorRole(settings, keys, bus=bus, clock=clock, load=load, executor_id="e1", stats_every_s=1e9,
                        follow_plans=False)
    role.start()
    client = ExecutorClient(bus, settings, "w", clock=clock)
    sent_deadlines: list[float] = []
    submit_many = client.submit_many

    def spy(session_id, xs, **kw):
        sent_deadlines.append(kw["deadline_wall"])
        return submit_many(session_id, xs, **kw)

    client.submit_many = spy  # type: ignore[method-assign]
    app = two_stages()
    eng = ChainEngine(app, RemoteBackend(app, client, dict(SPLIT)), clock=clock)
    f = frame_factory("cam", 1, clock=clock)

    async def go():
        task = asyncio.create_task(eng.run(f))
        for _ in range(20_000):
            if task.done():
                break
            role.step(timeout_s=0.0)
            await asyncio.sleep(0.0005)
        return await task

    try:
        outcome = asyncio.run(go())
    finally:
        client.close()
        role.close()
    return outcome, runners, [d - f.ingest_ts for d in sent_deadlines]


def test_a_stage_within_its_budget_then_the_next_stage():
    outcome, runners, deadlines = run_frame(a_seconds=0.05)
    assert outcome.status == "ok" and runners["a"].batches == [1] and runners["b"].batches == [1]
    # Each stage's requests carry its own budget from when it was issued, not the frame's 1 s.
    assert deadlines[0] == pytest.approx(0.2, abs=1e-6) and 0.85 - 1e-6 <= deadlines[1] <= 1.0


def test_a_stage_that_spent_its_budget_is_dropped_there_and_the_next_never_runs():
    outcome, runners, deadlines = run_frame(a_seconds=0.25)  # ℓ(1) of stage a > its 200 ms budget
    assert outcome.status == "dropped" and dict(outcome.reasons) == {"deadline": 1}
    assert runners["a"].batches == [] and runners["b"].batches == []  # dropped at a, before any work
    assert deadlines == [pytest.approx(0.2, abs=1e-6)]  # stage b was never asked
    assert outcome.latency_ms < 200  # decided at stage a, not after b had also spent its budget
