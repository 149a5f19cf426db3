"""DeepQuery's sizing of delay-tolerant work (gpu_executor.background), pinned on hand-built cases."""

import math

import pytest

from vidnexus.contracts.profile import Profile
from vidnexus.gpu_executor.background import background_batch, background_budget


def test_the_budget_is_the_kth_upcoming_real_time_start_with_k_the_devices_left_for_real_time():
    starts = [0.30, 0.10, 0.20]
    assert background_budget(0.0, starts) == pytest.approx(0.10)
    assert background_budget(0.0, starts, devices=2) == pytest.approx(0.20)
    assert background_budget(0.0, starts, devices=2, running=1) == pytest.approx(0.10)
    assert background_budget(0.0, starts, devices=4) == math.inf  # more devices than starts
    assert background_budget(0.0, [], devices=1) == math.inf  # no real-time work coming
    assert background_budget(0.0, starts, devices=2, running=2) == 0.0  # every device busy with background
    assert background_budget(0.25, starts) == 0.0  # a start is overdue
    with pytest.raises(ValueError):
        background_budget(0.0, starts, devices=0)


def test_the_batch_shrinks_until_it_ends_before_the_next_real_time_start():
    prof = Profile.linear(0.004, 0.020, 32)  # ℓ(b) = 20 ms + 4 ms · b
    lat = prof.latency
    # 60 ms to the next start: b = 10 ends at exactly 60 ms.
    assert background_batch(0.0, [0.060], lat, pending=100, max_batch=32) == 10
    assert lat(10) <= 0.060 + 1e-12 < lat(11)
    # Fewer items pending, or a smaller largest batch, cap it.
    assert background_batch(0.0, [0.060], lat, pending=3, max_batch=32) == 3
    assert background_batch(0.0, [1.0], lat, pending=100, max_batch=32) == 32
    # Not even one item fits (ℓ(1) = 24 ms > 20 ms): the work waits.
    assert background_batch(0.0, [0.020], lat, pending=100, max_batch=32) == 0
    assert background_batch(0.0, [0.060], lat, pending=0, max_batch=32) == 0


# -- in the duty cycle: background sessions fill the slack of real-time ones -----------------------

from vidnexus.gpu_executor.backend import DutyCycle, SessionSpec  # noqa: E402
from vidnexus.gpu_executor.background import latest_end, next_arrival  # noqa: E402
from vidnexus.sim.loadgen import merge, uniform_arrivals  # noqa: E402
from vidnexus.sim.simulator import simulate  # noqa: E402

RT = Profile.linear(0.002, 0.008, 16)  # ℓ(b) = 8 ms + 2 ms · b
BG = Profile.linear(0.004, 0.010, 32)  # ℓ(b) = 10 ms + 4 ms · b


def _core() -> DutyCycle:
    return DutyCycle([SessionSpec("live", "rt", 0.050), SessionSpec("old", "bg", math.inf, background=True)],
                     {"rt": RT, "bg": BG}, targets={"live": 1, "old": 32})


def test_real_time_batches_in_sequence_bound_when_the_device_must_be_free():
    assert latest_end([]) == math.inf
    assert latest_end([(0.100, 0.030)]) == pytest.approx(0.100)
    # The later batch is the binding one: it must start by 0.105 and waits for the first (30 ms).
    assert latest_end([(0.100, 0.030), (0.105, 0.030)]) == pytest.approx(0.075)
    assert next_arrival(0.5, last=0.4, gaps=[0.2, 0.05]) == pytest.approx(0.5)  # the shortest gap, never before now
    assert next_arrival(0.3, last=0.2, gaps=[0.2, 0.3]) == pytest.approx(0.38)


def test_a_background_batch_ends_before_the_next_real_time_request_must_start():
    core = _core()
    for k in range(3):  # a 10 fps live stream: arrivals 100 ms apart, each served at once
        assert core.enqueue("live", k, deadline=0.1 * k + 0.050, now=0.1 * k) is None
        assert core.schedule(0.1 * k).dispatch.request_ids == (k,)
    for k in range(100):
        core.enqueue("old", 100 + k, math.inf, 0.21)
    # At 0.21 the next live request is expected at 0.2 + 0.09 = 0.29 and must start by
    # 0.29 + 0.050 − ℓ(1) = 0.33; one more live batch kept clear (RESERVE_BATCHES = 2): the device must
    # be free by 0.32, so the background batch may take 110 ms: b = 25 (10 + 4·25 = 110 ms).
    step = core.schedule(0.21)
    assert step.dispatch.session_id == "old" and step.dispatch.batch == 25
    assert 0.21 + BG.latency(25) <= core.rt_deadline(0.21) + 1e-9 < 0.21 + BG.latency(26)


def test_queued_real_time_work_runs_first_and_background_waits_rather_than_delay_it():
    core = _core()
    core.enqueue("old", 1, math.inf, 0.0)
    core.enqueue("live", 2, deadline=0.050, now=0.0)
    assert core.schedule(0.0).dispatch.session_id == "live"
    # Right after, a new live request is expected any moment (no gaps yet): budget 50 − 2 · 10 = 30 ms
    # fits ℓ(1) = 14 ms of background.
    assert core.schedule(0.010).dispatch.session_id == "old"
    # A live request queued with 15 ms left to its deadline: it runs; background does not start.
    core.enqueue("old", 3, math.inf, 0.02)
    core.enqueue("live", 4, deadline=0.045, now=0.03)
    assert core.schedule(0.030).dispatch.session_id == "live"
    # A tight SLO leaves no slack at all: the background item waits, and nothing is dropped.
    tight = DutyCycle([SessionSpec("live", "rt", 0.020), SessionSpec("old", "bg", math.inf, background=True)],
                      {"rt": RT, "bg": BG})
    tight.enqueue("old", 1, math.inf, 0.0)
    step = tight.schedule(0.0)
    assert step.dispatch is None and step.dropped == () and tight.queued("old") == 1


def test_colocated_background_work_leaves_every_real_time_request_on_time():
    live = uniform_arrivals(25, 10.0, "live")  # 40 ms apart
    backlog = [a for a in uniform_arrivals(1000, 1.0, "old")]  # 1,000 items queued in the first second
    specs = [SessionSpec("live", "rt", 0.050), SessionSpec("old", "bg", math.inf, background=True)]
    alone = simulate(specs[:1], {"rt": RT}, live)
    both = simulate(specs, {"rt": RT, "bg": BG}, merge(live, backlog))
    assert alone.per_session["live"]["on_time"] == both.per_session["live"]["on_time"] == len(live)
    done = both.per_session["old"]["on_time"]
    # The live stream keeps the device ~25% busy; background work gets a large share of the rest.
    assert done == 1000 and both.end_s < 10.5


def test_a_frame_of_several_requests_counts_as_one_arrival_with_its_requests_reserved():
    def core_after(per_frame: int) -> DutyCycle:
        core = DutyCycle([SessionSpec("live", "rt", 0.200), SessionSpec("old", "bg", math.inf, background=True)],
                         {"rt": RT, "bg": BG}, targets={"live": 8, "old": 32})
        rid = 0
        for k in range(4):  # 5 frames/s, each with per_frame crops arriving together
            for _ in range(per_frame):
                core.enqueue("live", rid, deadline=0.2 * k + 0.200, now=0.2 * k)
                rid += 1
            while core.queued("live"):
                core.schedule(0.2 * k)
        return core

    one, four = core_after(1), core_after(4)
    # Both expect the next frame 0.9 × 0.2 s after the last. Counted in requests (12 over 0.65 s:
    # 18.5/s), the 4-crop stream expects its frame's 4 plus ~3 more within the wait: a batch of 7
    # (ℓ = 22 ms, twice reserved); counted per arrival it would look like the 1-crop stream, whose
    # 4.6 req/s gather a batch of 2 (ℓ = 12 ms).
    assert one.rt_deadline(0.65) - four.rt_deadline(0.65) == pytest.approx(2 * (RT.latency(7) - RT.latency(2)))
