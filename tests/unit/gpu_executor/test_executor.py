"""The in-process executor: every request ends as a reply or an accounted drop."""

import threading

import pytest

from vidnexus.gpu_executor.backend import SessionSpec
from vidnexus.gpu_executor.executor import Executor
from vidnexus.gpu_executor.profile import Profile

P = Profile.linear(0.0001, 0.0005, 32)


def test_replies_carry_outputs_in_order_for_two_sessions():
    ex = Executor(
        [SessionSpec("dbl", "m1", 2.0), SessionSpec("neg", "m2", 2.0)],
        {"m1": lambda xs: [2 * x for x in xs], "m2": lambda xs: [-x for x in xs]},
        {"m1": P, "m2": P},
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

    ex = Executor([SessionSpec("s", "m", 5.0)], {"m": slow}, {"m": P}, targets={"s": 16})
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

    ex = Executor([SessionSpec("s", "m", 5.0)], {"m": flaky}, {"m": P})
    with ex:
        first = ex.submit("s", 1).result(timeout=5)
        second = ex.submit("s", 2).result(timeout=5)
    assert (first.ok, first.reason) == (False, "error")
    assert second.ok and second.output == 2


def test_wrong_output_count_is_a_batch_contract_error():
    ex = Executor([SessionSpec("s", "m", 5.0)], {"m": lambda xs: []}, {"m": P})
    with ex:
        r = ex.submit("s", 1).result(timeout=5)
    assert r.reason == "error"


def test_bad_input_fails_alone():
    def pre(x):
        if x < 0:
            raise ValueError("negative")
        return x

    ex = Executor([SessionSpec("s", "m", 5.0)], {"m": lambda xs: list(xs)}, {"m": P}, preprocess={"m": pre})
    with ex:
        rs = [ex.submit("s", x).result(timeout=5) for x in (1, -1, 2)]
    assert [(r.ok, r.reason) for r in rs] == [(True, None), (False, "error"), (True, None)]


def test_unknown_session_and_overload_are_accounted():
    gate = threading.Event()
    ex = Executor([SessionSpec("s", "m", 5.0, max_queue=3)], {"m": lambda xs: (gate.wait(5), list(xs))[1]},
                  {"m": P}, targets={"s": 1})
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
    ex = Executor([SessionSpec("dbl-100ms", "m1", 2.0)], {"m1": lambda xs: [2 * x for x in xs]}, {"m1": P})
    with ex:
        assert ex.submit("neg-50ms", 1).result(timeout=5).reason == "error"    # not hosted yet
        ex.add_session(SessionSpec("neg-50ms", "m2", 2.0), lambda xs: [-x for x in xs], P)
        ex.add_session(SessionSpec("dbl-40ms", "m1", 2.0))                    # same model, new SLO
        ex.add_session(SessionSpec("dbl-40ms", "m1", 2.0))                    # idempotent
        assert ex.submit("neg-50ms", 3).result(timeout=5).output == -3
        assert ex.submit("dbl-40ms", 3).result(timeout=5).output == 6
        with pytest.raises(ValueError, match="model m3 is not loaded"):
            ex.add_session(SessionSpec("x-10ms", "m3", 1.0))


def test_canonical_session_names_round_trip():
    from vidnexus.gpu_executor.service import parse_session_name, session_name

    assert parse_session_name(session_name("mobilenet_v3_small", 120.0)) == ("mobilenet_v3_small", 120.0)
    assert parse_session_name("hud_digits-600000ms") == ("hud_digits", 600000.0)
    assert parse_session_name("digits") is None and parse_session_name("a-fastms") is None


def test_removing_a_session_drops_its_queue_as_retired_and_unloads_an_unused_model():
    import threading

    from vidnexus.gpu_executor.backend import SessionSpec
    from vidnexus.gpu_executor.executor import Executor
    from vidnexus.gpu_executor.profile import Profile

    gate = threading.Event()

    def slow(xs):
        gate.wait(5)
        return [0.0 for _ in xs]

    prof = Profile.linear(0.0001, 0.0005, 1)
    ex = Executor([SessionSpec("a-100ms", "a", 30.0), SessionSpec("b-100ms", "b", 30.0)],
                  {"a": slow, "b": lambda xs: [1.0 for _ in xs]}, {"a": prof, "b": prof}).start()
    first = ex.submit("a-100ms", 0)            # occupies the device
    queued = [ex.submit("a-100ms", i) for i in range(3)]
    import time as _t
    _t.sleep(0.1)
    assert ex.remove_session("a-100ms") == ["a"]
    gate.set()
    assert first.result(5).ok or first.result(5).reason in ("retired", "error")
    assert all(f.result(5).reason == "retired" for f in queued)
    assert not ex.hosts_model("a") and ex.hosts_model("b")
    assert ex.submit("b-100ms", 1).result(5).output == 1.0
    assert ex.remove_session("a-100ms") == []    # idempotent
    ex.stop()
