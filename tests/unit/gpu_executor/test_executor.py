"""The in-process executor: every request ends as a reply or an accounted drop.

Every executor here runs on a FakeClock: time moves only when a FakeRunner runs a batch, and the idle
device loop blocks on the clock, so no test sleeps and no deadline passes by accident."""

import threading
import time

import pytest

from vidnexus.gpu_executor.backend import SessionSpec
from vidnexus.gpu_executor.executor import Executor
from vidnexus.contracts.profile import Profile
from vidnexus.testing import FakeClock, FakeRunner

P = Profile.linear(0.0001, 0.0005, 32)


def test_replies_carry_outputs_in_order_for_two_sessions():
    ex = Executor(
        [SessionSpec("dbl", "m1", 2.0), SessionSpec("neg", "m2", 2.0)],
        {"m1": lambda xs: [2 * x for x in xs], "m2": lambda xs: [-x for x in xs]},
        {"m1": P, "m2": P}, clock=FakeClock(),
    )
    with ex:
        f1 = [ex.submit("dbl", i) for i in range(50)]
        f2 = [ex.submit("neg", i) for i in range(50)]
        r1 = [f.result(timeout=10) for f in f1]
        r2 = [f.result(timeout=10) for f in f2]
    assert [r.output for r in r1] == [2 * i for i in range(50)]
    assert [r.output for r in r2] == [-i for i in range(50)]
    assert all(r.ok for r in r1 + r2)


def test_batches_form_under_load():
    gate = threading.Event()

    def slow(xs):
        gate.wait(5)
        return list(xs)

    ex = Executor([SessionSpec("s", "m", 5.0)], {"m": slow}, {"m": P}, targets={"s": 16}, clock=FakeClock())
    with ex:
        futs = [ex.submit("s", i) for i in range(40)]
        gate.set()
        replies = [f.result(timeout=10) for f in futs]
    assert all(r.ok for r in replies)
    assert max(r.batch for r in replies) > 1


def test_runner_failure_becomes_error_drops_and_the_executor_keeps_serving():
    calls = {"n": 0}

    def flaky(xs):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("boom")
        return list(xs)

    ex = Executor([SessionSpec("s", "m", 5.0)], {"m": flaky}, {"m": P}, clock=FakeClock())
    with ex:
        first = ex.submit("s", 1).result(timeout=5)
        second = ex.submit("s", 2).result(timeout=5)
    assert (first.ok, first.reason) == (False, "error")
    assert second.ok and second.output == 2


def test_wrong_output_count_is_a_batch_contract_error():
    ex = Executor([SessionSpec("s", "m", 5.0)], {"m": lambda xs: []}, {"m": P}, clock=FakeClock())
    with ex:
        r = ex.submit("s", 1).result(timeout=5)
    assert r.reason == "error"


def test_bad_input_fails_alone():
    def pre(x):
        if x < 0:
            raise ValueError("negative")
        return x

    ex = Executor([SessionSpec("s", "m", 5.0)], {"m": lambda xs: list(xs)}, {"m": P}, preprocess={"m": pre},
                  clock=FakeClock())
    with ex:
        rs = [ex.submit("s", x).result(timeout=5) for x in (1, -1, 2)]
    assert [(r.ok, r.reason) for r in rs] == [(True, None), (False, "error"), (True, None)]


@pytest.mark.parametrize("where", ["caller", "pool"])
def test_a_messages_requests_enter_the_queue_together_and_run_in_one_batch(where):
    """One message's requests (a frame's crops) are converted, then queued at once: the device never
    takes the first alone while the others are still converting (it did: a batch of 1, then the
    rest), and a bad one among them is a drop for itself only."""
    def pre(x):
        if x < 0:
            raise ValueError("negative")
        time.sleep(0.01 * x)  # real time, in which the free device loop would take the first alone
        return x

    clock = FakeClock()
    runner = FakeRunner(P, clock)
    ex = Executor([SessionSpec("s", "m", 5.0)], {"m": runner}, {"m": P}, preprocess={"m": pre},
                  preprocess_on=where, workers=4, clock=clock)
    with ex:
        rs = [f.result(timeout=5) for f in ex.submit_many("s", [3, 1, -1, 2])]
        assert ex.submit("s", 1).result(timeout=5).output == 1
    assert [r.output if r.ok else r.reason for r in rs] == [3, 1, "error", 2]
    assert runner.batches == [3, 1]
    assert ex.stats()[0]["arrivals"] == 5


def test_unknown_session_and_overload_are_accounted():
    gate = threading.Event()
    ex = Executor([SessionSpec("s", "m", 5.0, max_queue=3)], {"m": lambda xs: (gate.wait(5), list(xs))[1]},
                  {"m": P}, targets={"s": 1}, clock=FakeClock())
    with ex:
        assert ex.submit("zzz", 1).result(timeout=1).reason == "error"
        futs = [ex.submit("s", i) for i in range(20)]
        gate.set()
        rs = [f.result(timeout=10) for f in futs]
    reasons = {r.reason for r in rs if not r.ok}
    assert "overload" in reasons
    assert len(rs) == 20
    stats = {s["session"]: s for s in ex.stats()}
    assert stats["s"]["arrivals"] == 20
    assert stats["s"]["replies"] + sum(stats["s"]["drops"].values()) == 20


def test_missing_runner_is_rejected():
    with pytest.raises(ValueError, match="no runner"):
        Executor([SessionSpec("s", "m", 1.0)], {}, {"m": P})


def test_sessions_added_at_run_time_serve_with_a_new_model_or_an_existing_one():
    ex = Executor([SessionSpec("dbl-100ms", "m1", 2.0)], {"m1": lambda xs: [2 * x for x in xs]}, {"m1": P},
                  clock=FakeClock())
    with ex:
        assert ex.submit("neg-50ms", 1).result(timeout=5).reason == "error"    # not hosted yet
        ex.add_session(SessionSpec("neg-50ms", "m2", 2.0), lambda xs: [-x for x in xs], P)
        ex.add_session(SessionSpec("dbl-40ms", "m1", 2.0))                    # same model, new SLO
        ex.add_session(SessionSpec("dbl-40ms", "m1", 2.0))                    # idempotent
        assert ex.submit("neg-50ms", 3).result(timeout=5).output == -3
        assert ex.submit("dbl-40ms", 3).result(timeout=5).output == 6
        with pytest.raises(ValueError, match="model m3 is not loaded"):
            ex.add_session(SessionSpec("x-10ms", "m3", 1.0))


def test_removing_a_session_drops_its_queue_as_retired_and_unloads_an_unused_model():
    import threading

    from vidnexus.gpu_executor.backend import SessionSpec
    from vidnexus.gpu_executor.executor import Executor
    from vidnexus.contracts.profile import Profile

    gate, running = threading.Event(), threading.Event()

    def slow(xs):
        running.set()
        gate.wait(5)
        return [0.0 for _ in xs]

    prof = Profile.linear(0.0001, 0.0005, 1)
    ex = Executor([SessionSpec("a-100ms", "a", 30.0), SessionSpec("b-100ms", "b", 30.0)],
                  {"a": slow, "b": lambda xs: [1.0 for _ in xs]}, {"a": prof, "b": prof}, clock=FakeClock()).start()
    first = ex.submit("a-100ms", 0)
    assert running.wait(5)                     # `first` occupies the device
    queued = [ex.submit("a-100ms", i) for i in range(3)]
    assert ex.remove_session("a-100ms") == ["a"]
    gate.set()
    assert first.result(5).ok                  # already running: its runner finishes it
    assert all(f.result(5).reason == "retired" for f in queued)
    assert not ex.hosts_model("a") and ex.hosts_model("b")
    assert ex.submit("b-100ms", 1).result(5).output == 1.0
    assert ex.remove_session("a-100ms") == []    # idempotent
    ex.stop()


def test_on_a_fake_clock_latencies_and_drops_are_exact():
    """Batches take exactly ℓ(b) of fake time: replies carry that latency, and a request whose
    deadline passes while the device is busy is dropped, never run."""
    clock = FakeClock()
    prof = Profile.linear(0.010, 0.020, 8)                        # ℓ(1) = 30 ms
    runner = FakeRunner(prof, clock)
    ex = Executor([SessionSpec("s", "m", 0.05)], {"m": runner}, {"m": prof}, targets={"s": 1}, clock=clock)
    a, b = ex.submit("s", "a"), ex.submit("s", "b")               # deadlines at 50 ms
    c = ex.submit("s", "c", deadline=1.0)
    with ex:
        ra, rb, rc = (f.result(timeout=5) for f in (a, b, c))
    assert (ra.ok, ra.output, ra.batch) == (True, "a", 1) and ra.latency_s == pytest.approx(0.03)
    # At 30 ms, b alone would end at 60 ms, past its 50 ms deadline: dropped; c runs instead.
    assert (rb.ok, rb.reason) == (False, "deadline") and rb.latency_s == pytest.approx(0.03)
    assert (rc.ok, rc.output) == (True, "c") and rc.latency_s == pytest.approx(0.06)
    assert runner.batches == [1, 1] and clock.now() == pytest.approx(0.06)


def test_the_device_loop_waits_on_the_clock_and_never_sleeps(monkeypatch):
    """Idle, the device loop blocks on the clock until a request comes: no time.sleep, no timed wait,
    no polling (each request costs exactly two schedule() calls), and no fake time passes."""
    import time

    sleeps, timed = [], []
    monkeypatch.setattr(time, "sleep", sleeps.append)
    real_wait = threading.Condition.wait

    def wait(self, timeout=None):
        if timeout and threading.current_thread().name == "vnx-device":  # 0: the pool's non-blocking check
            timed.append(timeout)
        return real_wait(self, timeout)

    monkeypatch.setattr(threading.Condition, "wait", wait)
    clock = FakeClock()
    ex = Executor([SessionSpec("s", "m", 1.0)], {"m": FakeRunner(P, clock)}, {"m": P}, clock=clock)
    calls = []
    schedule = ex.core.schedule
    ex.core.schedule = lambda now: (calls.append(now), schedule(now))[1]
    with ex:
        clock.until_waiting(1)                                    # started, found nothing, waits
        assert len(calls) == 1
        for i in range(3):
            assert ex.submit("s", i).result(timeout=5).output == i
            clock.until_waiting(1)
        assert len(calls) == 1 + 2 * 3                            # dispatch, then find nothing
    assert sleeps == [] and timed == []
    assert clock.now() == pytest.approx(3 * P.latency(1))         # only the batches moved the clock


def test_an_idle_executor_profiles_the_larger_batches_its_sessions_could_use():
    """Measured up to 16 at start; a 400 ms SLO allows 2ℓ(b) ≤ 0.4 s, so 24, 32, 48 and 64 are
    measured in idle time (one kernel-building run and three timed runs each) and 96 is not."""
    import time

    clock = FakeClock()
    true = Profile.linear(0.002, 0.010, 256)
    start = Profile.linear(0.002, 0.010, 16)
    runner = FakeRunner(true, clock)
    seen = []
    ex = Executor([SessionSpec("s", "m", 0.4)], {"m": runner}, {"m": start}, clock=clock, probe=True,
                  on_profile=lambda m, p: seen.append((m, p.max_batch)))
    with ex:
        assert all(f.result(timeout=10).ok for f in [ex.submit("s", i) for i in range(3)])
        t_end = time.monotonic() + 10
        while ex.core.profile("m").max_batch < 64 and time.monotonic() < t_end:
            time.sleep(0.01)
        time.sleep(0.05)
        prof = ex.core.profile("m")
        target = ex.targets()["s"]
    assert prof.sizes[-4:] == (24, 32, 48, 64)
    assert target == 64  # no plan set the batch sizes: the new sizes are used at once
    assert prof.latency(64) == pytest.approx(true.latency(64))
    assert seen == [("m", 24), ("m", 32), ("m", 48), ("m", 64)]
    assert [runner.batches.count(b) for b in (24, 32, 48, 64, 96)] == [4, 4, 4, 4, 0]


def test_a_new_profile_changes_local_batch_sizes_but_not_a_plans():
    from vidnexus.gpu_executor.backend import DutyCycle

    short, long = Profile.linear(0.002, 0.010, 16), Profile.linear(0.002, 0.010, 64)
    local = DutyCycle([SessionSpec("s", "m", 0.4)], {"m": short})
    assert local.targets() == {"s": 16}
    local.with_profile("m", long)
    assert local.targets() == {"s": 64}
    planned = DutyCycle([SessionSpec("s", "m", 0.4)], {"m": short})
    planned.set_targets({"s": 8})
    planned.with_profile("m", long)
    assert planned.targets() == {"s": 8}


def test_without_probe_the_profile_stays_as_measured():
    clock = FakeClock()
    runner = FakeRunner(Profile.linear(0.002, 0.010, 256), clock)
    ex = Executor([SessionSpec("s", "m", 0.4)], {"m": runner}, {"m": Profile.linear(0.002, 0.010, 16)}, clock=clock)
    with ex:
        assert all(f.result(timeout=10).ok for f in [ex.submit("s", i) for i in range(3)])
    assert ex.core.profile("m").max_batch == 16 and max(runner.batches) <= 16


@pytest.mark.skipif(not hasattr(__import__("os"), "SCHED_BATCH"), reason="SCHED_BATCH is Linux's")
@pytest.mark.parametrize("sched", ["batch", "normal"])
def test_the_device_thread_runs_as_a_batch_job_unless_told_otherwise(sched):
    """The device thread takes SCHED_BATCH (the threads carrying requests to it are not preempted by
    it); the caller's threads keep their own policy; ``normal`` leaves the device thread as it was."""
    import os

    seen = {}

    def runner(xs):
        seen["policy"] = os.sched_getscheduler(0)
        return list(xs)

    mine = os.sched_getscheduler(0)
    ex = Executor([SessionSpec("s", "m", 2.0)], {"m": runner}, {"m": P}, clock=FakeClock(), device_sched=sched)
    with ex:
        assert ex.submit("s", 1).result(timeout=10).ok
    assert seen["policy"] == (os.SCHED_BATCH if sched == "batch" else mine)
    assert os.sched_getscheduler(0) == mine


def test_an_unknown_device_policy_is_refused():
    with pytest.raises(ValueError, match="device_sched"):
        Executor([SessionSpec("s", "m", 2.0)], {"m": list}, {"m": P}, device_sched="realtime")
