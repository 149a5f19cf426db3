"""The Clock contract, on the real clock and on the FakeClock the tests drive (nothing here sleeps)."""

import threading

import pytest

from vidnexus.clock import Clock, MonotonicClock
from vidnexus.testing import FakeClock


@pytest.mark.parametrize("clock", [MonotonicClock(), FakeClock()], ids=["monotonic", "fake"])
def test_both_clocks_keep_the_contract_without_waiting(clock):
    assert isinstance(clock, Clock)
    done, cond = threading.Event(), threading.Condition()
    assert clock.wait(done, 0.0) is False                 # a zero timeout does not wait
    done.set()
    assert clock.wait(done, None) is True                 # already set: no limit needed
    with cond:
        assert clock.wait_for(cond, lambda: True, None) is True
        assert clock.wait_for(cond, lambda: False, 0.0) is False
    t0 = clock.now()
    assert clock.now() >= t0 and clock.wall() > 1e9       # seconds since the epoch


def test_fake_time_moves_only_when_told_and_wall_follows_now():
    clock = FakeClock(start=3.0, wall_start=1000.0)
    assert (clock.now(), clock.wall()) == (3.0, 1000.0)
    clock.sleep(0.5)                                      # a sleeper gets its time at once
    clock.advance(1.5)
    assert (clock.now(), clock.wall()) == (5.0, 1002.0)
    with pytest.raises(ValueError, match="cannot go back"):
        clock.set(4.0)
    with pytest.raises(ValueError, match="cannot go back"):
        clock.advance(-1)


def test_a_fake_wait_ends_on_its_event_or_when_the_clock_passes_its_timeout():
    clock = FakeClock()
    events = [threading.Event(), threading.Event()]
    results = {}
    threads = [threading.Thread(target=lambda i=i: results.__setitem__(i, clock.wait(events[i], 10.0)))
               for i in range(2)]
    for t in threads:
        t.start()
    clock.until_waiting(2)
    events[0].set()                                       # ends the first wait, no time passing
    threads[0].join(5)
    assert results == {0: True} and clock.now() == 0.0
    clock.advance(9.0)
    clock.until_waiting(1)
    assert 1 not in results                               # 9 of its 10 s
    clock.advance(1.0)
    threads[1].join(5)
    assert results == {0: True, 1: False} and clock.waiting() == 0
