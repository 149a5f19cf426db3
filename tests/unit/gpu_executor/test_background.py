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
