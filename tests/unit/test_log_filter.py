"""Role logs stay readable through an outage: a repeated line passes once per window, with a count."""

import logging

from vidnexus.cli.common import RepeatFilter
from vidnexus.testing import FakeClock


def record(name, msg, *args, level=logging.WARNING):
    return logging.LogRecord(name, level, __file__, 1, msg, args, None)


def test_repeats_pass_once_per_window_with_the_count():
    clock = FakeClock()
    f = RepeatFilter(every_s=30.0, clock=clock)
    passed = [f.filter(record("vidnexus.roles.sink", "insert failed: %s", "refused")) for _ in range(50)]
    assert passed == [True] + [False] * 49
    assert f.filter(record("vidnexus.roles.sink", "insert failed: %s", "another reason"))  # other text: its own line
    clock.advance(31)
    r = record("vidnexus.roles.sink", "insert failed: %s", "refused")
    assert f.filter(r) and r.getMessage() == "insert failed: refused (49 more like this in the last 31 s)"


def test_a_client_librarys_lines_repeat_by_template():
    f = RepeatFilter(every_s=30.0, clock=FakeClock())
    assert f.filter(record("aiokafka.consumer", "Unable connect to node with id %s: %s", 1, "refused"))
    assert not f.filter(record("aiokafka.consumer", "Unable connect to node with id %s: %s", 2, "timeout"))
    assert f.filter(record("aiokafka.conn", "Unable connect to node with id %s: %s", 1, "refused"))
