"""A wanted producer switch on the confluent bus (ConfluentBus._pick and _drain) against producers'
queues that drain or not. The switch itself runs against the real broker in
tests/integration/test_kafka_bus.py; here, its bounds: waits, give-ups, retries and the hold."""
import pytest

from vidnexus.connectors import confluent_bus
from vidnexus.connectors.confluent_bus import ConfluentBus, LingerSwitch


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def monotonic(self) -> float:
        return self.t


class Queue:
    """A producer's queue: ``flush(t)`` takes ``t`` on the clock and acknowledges ``per_slice``."""

    def __init__(self, clock: Clock, queued: int, per_slice: int) -> None:
        self.clock, self.queued, self.per_slice, self.flushes = clock, queued, per_slice, 0

    def __len__(self) -> int:
        return self.queued

    def flush(self, timeout: float) -> int:
        self.flushes += 1
        self.clock.t += timeout
        self.queued = max(0, self.queued - self.per_slice)
        return self.queued

    def poll(self, timeout: float) -> int:
        return 0


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(confluent_bus.time, "monotonic", c.monotonic)
    return c


def test_a_producer_that_keeps_draining_is_waited_for_until_empty(clock):
    q = Queue(clock, queued=100, per_slice=30)
    assert ConfluentBus._drain(q) and len(q) == 0 and q.flushes == 4


def test_a_producer_that_stops_acknowledging_ends_the_wait_after_the_stall_time(clock):
    q = Queue(clock, queued=100, per_slice=0)  # a broker away
    start = clock.t
    assert not ConfluentBus._drain(q) and len(q) == 100
    assert clock.t - start == pytest.approx(confluent_bus.SWITCH_STALL_S, abs=confluent_bus.SWITCH_SLICE_S)


def test_a_drain_too_slow_to_finish_in_time_is_given_up_once_its_rate_is_known(clock):
    q = Queue(clock, queued=10_000, per_slice=5)  # 250 records/s: 40 s to go
    start = clock.t
    assert not ConfluentBus._drain(q)
    assert clock.t - start == pytest.approx(confluent_bus.SWITCH_STALL_S, abs=confluent_bus.SWITCH_SLICE_S)


def test_the_wait_never_outlasts_its_bound(clock):
    q = Queue(clock, queued=1_000, per_slice=30)  # would take 0.67 s; looks feasible until late
    start = clock.t
    ConfluentBus._drain(q)
    assert clock.t - start <= confluent_bus.SWITCH_DRAIN_S + 1e-9


def bus_on(clock, eager_queue, batching_queue):
    bus = object.__new__(ConfluentBus)
    bus._eager, bus._producer = eager_queue, batching_queue
    bus._switch = LingerSwitch()
    bus.switches, bus._drain_next, bus._drain_wait = 0, 0.0, confluent_bus.SWITCH_RETRY_S
    return bus


def publish_at(bus, clock, rate, seconds):
    picked = []
    for _ in range(int(rate * seconds)):
        clock.t += 1 / rate
        picked.append(bus._pick())
    return picked


def test_a_switch_waits_for_the_drain_and_then_holds(clock):
    eager, batching = Queue(clock, 0, 1_000), Queue(clock, 0, 1_000)
    bus = bus_on(clock, eager, batching)
    assert set(map(id, publish_at(bus, clock, 100, 1.0))) == {id(eager)} and bus.switches == 0
    eager.queued = 200  # fed evenly at 3,000/s it is never empty when a record comes
    picked = []
    while bus.switches == 0 and len(picked) < 3_000:
        picked += publish_at(bus, clock, 3_000, 0.001)
    assert bus.switches == 1 and eager.flushes == 1 and picked[-1] is batching
    clock.t += 0.15  # a pause (the drain's own, say): the window's rate reads low, but the switch holds
    assert bus._pick() is batching and bus.switches == 1
    clock.t += 0.2  # quiet past the hold: back to the eager producer (the batching one is empty)
    assert bus._pick() is eager and bus.switches == 2


def test_a_drain_that_fails_is_retried_later_and_backs_off(clock):
    eager, batching = Queue(clock, 10**6, 0), Queue(clock, 0, 0)  # a broker away
    bus = bus_on(clock, eager, batching)
    publish_at(bus, clock, 3_000, 0.5)
    first = eager.flushes
    assert bus.switches == 0 and 4 <= first <= 6  # one wait of SWITCH_STALL_S; none again within 1 s
    publish_at(bus, clock, 3_000, 1.0)
    second = eager.flushes
    assert 2 * 4 <= second <= 2 * 6  # the second wait, 1 s after the first; the next one 2 s after
    publish_at(bus, clock, 3_000, 1.5)
    assert eager.flushes == second and bus.switches == 0
    eager.queued = 0  # the broker is back and took everything
    assert bus._pick() is batching and bus.switches == 1
