import pytest

from vidnexus.gpu_executor.backend import DutyCycle, SessionSpec, local_targets
from vidnexus.contracts.profile import Profile

P = Profile.linear(0.010, 0.010, max_batch=16)


def core(*sessions, targets=None, grow=False):
    """A duty cycle over models a and b; batches at most their planned size unless ``grow`` (the
    tests of sizes and order run without growth; growth has tests of its own)."""
    return DutyCycle(list(sessions), {"a": P, "b": P}, targets, grow=grow)


def test_round_robin_alternates_sessions():
    c = core(SessionSpec("s1", "a", 1.0), SessionSpec("s2", "b", 1.0), targets={"s1": 2, "s2": 2})
    for i in range(4):
        c.enqueue("s1", i, 1.0, 0.0)
        c.enqueue("s2", 10 + i, 1.0, 0.0)
    order = []
    while (step := c.schedule(0.0)).dispatch:
        order.append((step.dispatch.session_id, step.dispatch.request_ids))
    assert order == [("s1", (0, 1)), ("s2", (10, 11)), ("s1", (2, 3)), ("s2", (12, 13))]


def test_queue_is_deadline_ordered():
    c = core(SessionSpec("s", "a", 1.0), targets={"s": 3})
    for rid, dl in [(1, 0.9), (2, 0.5), (3, 0.7)]:
        c.enqueue("s", rid, dl, 0.0)
    assert c.schedule(0.0).dispatch.request_ids == (2, 3, 1)


def test_full_queue_sheds_with_overload():
    c = core(SessionSpec("s", "a", 1.0, max_queue=2))
    assert c.enqueue("s", 1, 1.0, 0.0) is None
    assert c.enqueue("s", 2, 1.0, 0.0) is None
    shed = c.enqueue("s", 3, 1.0, 0.0)
    assert shed is not None and shed.reason == "overload" and shed.request_id == 3


def test_unknown_session_is_an_error_drop():
    c = core(SessionSpec("s", "a", 1.0))
    assert c.enqueue("nope", 1, 1.0, 0.0).reason == "error"


def test_drops_carry_reasons():
    c = core(SessionSpec("s", "a", 1.0), targets={"s": 4})
    c.enqueue("s", 1, 0.015, 0.0)  # cannot finish even alone: deadline
    c.enqueue("s", 2, 0.025, 0.0)  # could alone, not in the window: early_drop
    for rid in range(3, 7):
        c.enqueue("s", rid, 0.5, 0.0)
    step = c.schedule(0.0)
    assert [(d.request_id, d.reason) for d in step.dropped] == [(1, "deadline"), (2, "early_drop")]
    assert step.dispatch.request_ids == (3, 4, 5, 6)


def test_expire_and_remove_account_for_everything():
    c = core(SessionSpec("s", "a", 1.0))
    c.enqueue("s", 1, 0.01, 0.0)
    c.enqueue("s", 2, 5.0, 0.0)
    assert [d.request_id for d in c.expire(0.0)] == [1]
    assert [(d.request_id, d.reason) for d in c.remove_session("s")] == [(2, "overload")]
    assert c.queued() == 0


def test_local_targets_saturate_one_session():
    # ℓ(b) = 10b + 10 ms and SLO 200 ms: 2ℓ(b) ≤ 200 → b = 9.
    assert local_targets([SessionSpec("s", "a", 0.2)], {"a": P}) == {"s": 9}


def test_local_targets_take_the_batch_that_serves_most():
    """On a CPU whose caches a batch of 8 spills, ℓ(8) costs more per request than ℓ(4): the session
    runs batches of 4 (425 req/s) rather than the largest that fits (222 req/s); where throughput
    grows with the batch, the largest that fits, as in Nexus."""
    cpu = Profile((1, 2, 4, 8), (0.0033, 0.0056, 0.0094, 0.036))
    s = SessionSpec("s", "m", 0.100)
    assert local_targets([s], {"m": cpu}) == {"s": 4}
    gpu = Profile.linear(alpha=0.002, beta=0.010, max_batch=16)   # ℓ(b) = 2b + 10 ms
    assert local_targets([s], {"m": gpu}) == {"s": 16}


def test_local_targets_shrink_until_the_duty_cycle_fits():
    sessions = [SessionSpec("s1", "a", 0.2), SessionSpec("s2", "b", 0.2)]
    t = local_targets(sessions, {"a": P, "b": P})
    cycle = sum(P.latency(b) for b in t.values())
    assert all(cycle + P.latency(t[s.session_id]) <= s.slo_s + 1e-9 for s in sessions)
    assert min(t.values()) >= 1


@pytest.mark.parametrize("order", ["laxity", "round_robin"])
def test_local_targets_of_no_sessions_or_only_background_ones(order):
    # An executor with no session yet (or only background ones) sizes nothing and raises nothing.
    assert local_targets([], {"a": P}, order=order) == {}
    bg = SessionSpec("bg", "a", 1.0, background=True)
    assert local_targets([bg], {"a": P}, order=order) == {"bg": P.max_batch}


def test_invalid_session_spec():
    with pytest.raises(ValueError, match="SLO"):
        SessionSpec("s", "a", 0.0)
    with pytest.raises(ValueError, match="no profile"):
        DutyCycle([SessionSpec("s", "zzz", 1.0)], {"a": P})


def _run_out(c, now=0.0):
    """Schedule until nothing is left, advancing ``now`` by each batch's latency."""
    ran, dropped = [], []
    while True:
        step = c.schedule(now)
        dropped += [(d.session_id, d.request_id, d.reason) for d in step.dropped]
        if step.dispatch is None:
            return ran, dropped
        ran.append((step.dispatch.session_id, step.dispatch.request_ids))
        now += step.dispatch.expected_s


@pytest.mark.parametrize("order", ["laxity", "round_robin"])
def test_a_tight_request_behind_a_loose_batch(order):
    # The loose session's batch of 4 takes ℓ(4) = 50 ms; the tight request needs ℓ(1) = 20 ms and
    # must finish by 60 ms. Round-robin runs the loose batch first (it is next in turn) and the
    # tight request misses; least laxity first runs the tight one first and both make it.
    c = DutyCycle([SessionSpec("loose", "a", 1.0), SessionSpec("tight", "b", 0.06)], {"a": P, "b": P},
                  {"loose": 4, "tight": 1}, order=order)
    for i in range(4):
        c.enqueue("loose", i, 1.0, 0.0)
    c.enqueue("tight", 9, 0.06, 0.0)
    ran, dropped = _run_out(c)
    if order == "laxity":
        assert ran == [("tight", (9,)), ("loose", (0, 1, 2, 3))] and dropped == []
    else:
        assert ran == [("loose", (0, 1, 2, 3))] and dropped == [("tight", 9, "deadline")]


def test_laxity_counts_the_batch_a_session_would_take():
    # Same head deadline, but "big" would run a batch of 8 (ℓ = 90 ms) and "small" a batch of 1:
    # "big" must start first.
    c = DutyCycle([SessionSpec("small", "a", 1.0), SessionSpec("big", "b", 1.0)], {"a": P, "b": P},
                  {"small": 1, "big": 8})
    c.enqueue("small", 1, 0.5, 0.0)
    for i in range(8):
        c.enqueue("big", 10 + i, 0.5, 0.0)
    assert c.schedule(0.0).dispatch.session_id == "big"


def test_unknown_order_is_refused():
    with pytest.raises(ValueError, match="order must be one of laxity, round_robin"):
        DutyCycle([SessionSpec("s", "a", 1.0)], {"a": P}, order="edf")


def _taken(c, session_id, n, deadline, now):
    """Queue ``n`` requests on ``session_id`` and schedule once: the size of the batch it ran."""
    for rid in range(n):
        c.enqueue(session_id, 1000 * len(session_id) + rid, deadline, now)
    step = c.schedule(now)
    assert step.dispatch is not None and step.dispatch.session_id == session_id
    return step.dispatch.batch


def test_an_idle_session_does_not_shrink_an_active_ones_batch():
    """Without a plan, a session counts in the others' duty cycle only while it is active: an
    executor hosting sessions for traffic that has not come (or has gone) keeps the busy one at
    the batch it would have alone. Before 2026-11-28 it sized every batch as if all hosted sessions
    were busy, and bench peers' executor behind Kafka, hosting five, ran its 50 ms session at
    batch 1-2 where the same executor in-process ran 6-8."""
    from vidnexus.gpu_executor.backend import ACTIVE_WINDOW_S

    c = core(SessionSpec("s1", "a", 0.2), SessionSpec("s2", "b", 0.2))
    alone = local_targets([SessionSpec("s1", "a", 0.2)], {"a": P})["s1"]
    both = local_targets([SessionSpec("s1", "a", 0.2), SessionSpec("s2", "b", 0.2)], {"a": P, "b": P})["s1"]
    assert both < alone
    assert _taken(c, "s1", 12, 0.2, now=0.0) == alone      # s2 never had a request
    c.enqueue("s2", 1, 0.5, 0.1)                             # s2 turns active: both share the device
    assert c.targets()["s1"] == alone                        # (chosen again on the next schedule)
    assert c.schedule(0.1).dispatch.session_id == "s1"      # s1's 3 left, least laxity first
    assert c.targets()["s1"] == both
    assert c.schedule(0.2).dispatch.session_id == "s2"      # s2's queue runs out
    now = 0.1 + ACTIVE_WINDOW_S + 0.01                       # no request from s2 since: idle again
    assert _taken(c, "s1", 12, now + 0.25, now) == alone
    # A plan's sizes stay as given, active or not.
    planned = core(SessionSpec("s1", "a", 0.2), SessionSpec("s2", "b", 0.2), targets={"s1": 3, "s2": 3})
    assert _taken(planned, "s1", 12, 0.2, now=0.0) == 3


def test_batch_sizes_follow_the_budget_requests_arrive_with():
    """A request that came over the bus has less than its SLO left (the request hop taken, the
    reply's reserved): the batch is sized for the time requests have here, not the SLO."""
    c = core(SessionSpec("s", "a", 0.2))
    assert _taken(c, "s", 12, 0.2, now=0.0) == 9           # 2ℓ(9) = 200 ms ≤ 200 ms
    for k in range(40):                                     # then requests arrive with 100 ms left
        c.enqueue("s", 10_000 + k, 1.0 + 0.01 * k + 0.1, 1.0 + 0.01 * k)
    c.schedule(1.0 + 0.01 * 40)
    assert c.budget("s") == pytest.approx(0.1)
    assert c.targets()["s"] == 4                            # 2ℓ(4) = 100 ms


def test_a_slowdown_that_passed_leaves_no_batch_size_inflated():
    """The online refresh scales the whole profile by one observed pace. Before 2026-11-28 it kept
    a mean per size and held ℓ non-decreasing: batches of 1 slowed for a while (a fresh broker's
    JIT on the same CPU) raised ℓ(2..) with ℓ(1); the smaller targets this gave then ran only
    batches of 1, so once those were fast again the larger sizes stayed inflated and the target
    stayed small for good (a served executor behind Kafka stuck at batch 1, ℓ(2) at twice its
    measured 9 ms)."""
    from vidnexus.gpu_executor.backend import Dispatch

    c = core(SessionSpec("s", "a", 0.11))
    assert _taken(c, "s", 8, 0.11, now=0.0) == 4             # 2ℓ(4) = 100 ms ≤ 110 < 2ℓ(5)
    slow, fast = Dispatch("s", "a", (1,), P.latency(1)), Dispatch("s", "a", (1,), P.latency(1))
    for _ in range(30):                                       # batches of 1 at 3× their profiled time
        c.observed(slow, 3 * P.latency(1))
    assert c.profile("a").latency(4) > 2 * P.latency(4)      # the whole device looks slower
    assert _taken(c, "s", 8, 1.11, now=1.0) < 4
    for _ in range(100):                                      # the slowdown passed: batches of 1 as profiled
        c.observed(fast, P.latency(1))
    assert c.pace("a") == pytest.approx(1.0, abs=0.01)
    assert c.profile("a").latency(4) == pytest.approx(P.latency(4), rel=0.01)
    assert _taken(c, "s", 8, 3.11, now=3.0) == 4
    c.observed(fast, 1e6)                                     # one stall moves the pace a bounded step
    assert c.pace("a") < 1.4


def test_a_size_the_profile_got_wrong_is_corrected_while_it_runs():
    from vidnexus.gpu_executor.backend import Dispatch

    c = core(SessionSpec("s", "a", 0.2))
    one, four = Dispatch("s", "a", (1,), 0.0), Dispatch("s", "a", (1, 2, 3, 4), 0.0)
    for _ in range(200):                       # batches of 4 run 1.5× their profiled time, of 1 as profiled
        c.observed(one, P.latency(1))
        c.observed(four, 1.5 * P.latency(4))
    assert c.profile("a").latency(1) == pytest.approx(P.latency(1), rel=0.05)
    assert c.profile("a").latency(4) == pytest.approx(1.5 * P.latency(4), rel=0.05)


def test_a_backlog_joins_the_batch_when_its_head_can_wait_for_it():
    """Without a plan, a batch at its planned size with more of its session's requests queued
    takes them too, up to what its head's deadline admits (GROW): ℓ(b) = 10b + 10 ms, SLO 110 ms
    plans 4 (2ℓ(4) ≤ 110); 12 queued run 10 at once (ℓ(10) = 110 ms), where Nexus's rule runs 4."""
    assert _taken(core(SessionSpec("s", "a", 0.11), grow=True), "s", 12, 0.11, now=0.0) == 10
    assert _taken(core(SessionSpec("s", "a", 0.11)), "s", 12, 0.11, now=0.0) == 4
    # A queue no longer than the planned size runs as it is; a plan's size is kept.
    assert _taken(core(SessionSpec("s", "a", 0.11), grow=True), "s", 3, 0.11, now=0.0) == 3
    planned = core(SessionSpec("s", "a", 0.11), targets={"s": 4}, grow=True)
    assert _taken(planned, "s", 12, 0.11, now=0.0) == 4


def test_a_grown_batch_leaves_another_sessions_next_batch_its_time():
    """s1 (round robin's turn) has a backlog with room to grow to 16; s2's queued request must
    start by 80 ms (deadline 100 ms, ℓ(1) = 20 ms), so s1's batch ends by then: ℓ(7) = 80 ms."""
    c = DutyCycle([SessionSpec("s1", "a", 1.0), SessionSpec("s2", "b", 1.0)], {"a": P, "b": P},
                  order="round_robin", grow=True)
    for rid in range(20):
        c.enqueue("s1", rid, 1.0, 0.0)
    c.enqueue("s2", 100, 0.1, 0.0)
    first = c.schedule(0.0).dispatch
    assert first.session_id == "s1" and first.batch == 7
    after = c.schedule(P.latency(7)).dispatch
    assert after.session_id == "s2" and P.latency(7) + P.latency(after.batch) <= 0.1 + 1e-9


def test_a_batch_does_not_grow_to_a_size_that_serves_fewer_requests_a_second():
    """A profile where every size above 3 costs more per request than 3 (like bench peers' model
    on a fast VM, tests/sim PEERS_LIKE; 6.2 ms a request at 3, 6.25-7.2 above): a backlog behind
    a batch of 3 waits for the next batch rather than slow the device down."""
    prof = Profile((1, 2, 3, 4, 6, 8), (0.0099, 0.0158, 0.0186, 0.0288, 0.0412, 0.050))
    c = DutyCycle([SessionSpec("s", "m", 0.2)], {"m": prof}, grow=True)
    assert c.targets()["s"] == 3
    assert _taken(c, "s", 8, 0.2, now=0.0) == 3
