"""The fetch-stall decision (pure): a consumer is reopened only when records that existed at one
check are still unread at the next, after a window with nothing consumed."""

from vidnexus.connectors.watchdog import FetchWatchdog, behind

A, B = ("t", 0), ("t", 1)


def test_an_idle_consumer_with_nothing_waiting_is_never_reopened():
    w = FetchWatchdog(stall_s=10.0)
    w.start({A: 5})
    assert not w.due(0.0)
    for now in range(10, 200, 5):
        assert w.due(float(now))
        assert w.check(float(now), {A: (0, 5)}) == {}
    assert w.reopened == 0


def test_records_read_between_checks_are_no_stall():
    w = FetchWatchdog(stall_s=10.0)
    w.start({A: 0})
    w.due(0.0)
    assert w.check(10.0, {A: (0, 3)}) == {}
    w.consumed({A: 3}, now=12.0)  # they arrived: the window starts again
    assert not w.due(15.0)
    assert w.due(22.0) and w.check(22.0, {A: (0, 3)}) == {}


def test_records_still_unread_at_the_next_check_are_a_stall_at_the_consumers_positions():
    w = FetchWatchdog(stall_s=10.0)
    w.start({A: 7, B: 2})
    w.due(0.0)
    assert w.check(10.0, {A: (0, 7), B: (0, 4)}) == {}  # B: two records, just now perhaps
    assert not w.due(12.0)  # checks come every stall_s / 2
    assert w.check(15.0, {A: (0, 7), B: (0, 4)}) == {A: 7, B: 2}
    assert w.reopened == 1


def test_the_window_doubles_after_each_reopen_and_resets_when_records_arrive():
    w = FetchWatchdog(stall_s=10.0, max_stall_s=25.0)
    w.start({A: 0})
    w.due(0.0)
    w.check(10.0, {A: (0, 1)})
    assert w.check(15.0, {A: (0, 1)}) == {A: 0}
    assert w.stall_s == 20.0 and not w.due(30.0) and w.due(35.0)
    w.check(35.0, {A: (0, 1)})
    assert w.check(45.0, {A: (0, 1)}) == {A: 0}
    assert w.stall_s == 25.0  # capped
    w.consumed({A: 1}, now=50.0)
    assert w.stall_s == 10.0


def test_a_partition_of_unknown_start_counts_from_its_high_watermark_when_first_checked():
    w = FetchWatchdog(stall_s=10.0)  # a group member that has read nothing yet
    w.due(0.0)
    assert w.check(10.0, {A: (0, 50)}) == {}
    assert w.check(15.0, {A: (0, 50)}) == {}  # the 50 before are not known to be its to read
    assert w.check(20.0, {A: (0, 52)}) == {}
    assert w.check(25.0, {A: (0, 52)}) == {A: 50}


def test_records_gone_by_retention_and_partitions_given_away_are_not_waiting():
    w = FetchWatchdog(stall_s=10.0)
    w.start({A: 3, B: 0})
    w.due(0.0)
    assert w.check(10.0, {A: (9, 9)}) == {}  # A's records expired; B moved to another member
    assert w.check(15.0, {A: (9, 9), B: (4, 4)}) == {}


def test_behind():
    assert behind({A: 4}, {A: 4}) == []
    assert behind({A: 4}, {A: 5, B: 9}) == [A]  # B: not assigned any more
