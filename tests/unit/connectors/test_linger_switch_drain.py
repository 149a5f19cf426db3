"""The wait a wanted producer switch makes for the producer in use to drain (ConfluentBus._drain).
The switch itself runs against the real broker in tests/integration/test_kafka_bus.py; here, a
producer's queue that drains or stops draining, to pin the wait's bounds."""
import time

from vidnexus.connectors import confluent_bus
from vidnexus.connectors.confluent_bus import ConfluentBus


class Queue:
    """A producer's queue: ``flush(t)`` acknowledges ``per_slice`` records and takes ``t``."""

    def __init__(self, queued: int, per_slice: int) -> None:
        self.queued, self.per_slice, self.flushes = queued, per_slice, 0

    def __len__(self) -> int:
        return self.queued

    def flush(self, timeout: float) -> int:
        self.flushes += 1
        time.sleep(timeout)
        self.queued = max(0, self.queued - self.per_slice)
        return self.queued


def test_a_producer_that_keeps_draining_is_waited_for_until_empty():
    q = Queue(queued=100, per_slice=30)
    ConfluentBus._drain(q)
    assert len(q) == 0 and q.flushes == 4


def test_a_producer_that_stops_draining_ends_the_wait_after_one_slice():
    q = Queue(queued=100, per_slice=0)  # a broker away: nothing acknowledged
    ConfluentBus._drain(q)
    assert q.flushes == 1 and len(q) == 100


def test_the_wait_is_bounded_while_the_producer_drains_slowly():
    q = Queue(queued=10**6, per_slice=1)
    start = time.monotonic()
    ConfluentBus._drain(q)
    assert len(q) > 0 and time.monotonic() - start >= confluent_bus.SWITCH_DRAIN_S
    assert q.flushes <= round(confluent_bus.SWITCH_DRAIN_S / confluent_bus.SWITCH_SLICE_S) + 1
