"""The faust worker's stall watchdog decisions (pure): a stall is suspected only when nothing reached
the agent for the window and nothing is in flight, and confirmed only when frames wait."""

from vidnexus.roles.worker_faust import stall_suspected, stalled


def test_quiet_and_idle_for_the_window_is_suspect():
    assert stall_suspected(now=100.0, last_delivery=60.0, in_flight=0, stall_s=30.0)
    assert not stall_suspected(now=100.0, last_delivery=80.0, in_flight=0, stall_s=30.0)


def test_frames_in_flight_are_not_a_stall():
    # Every frame waits on an executor (slow model, long SLO): the agent gets nothing new, by design.
    assert not stall_suspected(now=1000.0, last_delivery=0.0, in_flight=3, stall_s=30.0)


def test_disabled_window():
    assert not stall_suspected(now=1e9, last_delivery=0.0, in_flight=0, stall_s=0.0)


def test_stalled_only_when_frames_wait():
    assert not stalled({0: 0, 1: 0})  # an idle worker with everything committed
    assert not stalled({})
    assert stalled({0: 0, 3: 4})
