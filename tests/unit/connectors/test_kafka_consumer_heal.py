"""KafkaGroupConsumer recreates a client whose assigned partitions never get a fetch position (the
kafka-python 3.0 lost offset-fetch reply), and leaves healthy or idle clients alone."""

import time

import pytest

from vidnexus.connectors.kafka_bus import KafkaGroupConsumer


class FakeSubscription:
    def __init__(self, positioned: bool) -> None:
        self.positioned = positioned

    def has_all_fetch_positions(self) -> bool:
        return self.positioned

    def missing_fetch_positions(self):
        return [] if self.positioned else [type("TP", (), {"topic": "t", "partition": 0})()]


class FakeClient:
    def __init__(self, assigned: bool, positioned: bool) -> None:
        self._subscription = FakeSubscription(positioned)
        self._assigned = assigned
        self.closed = False

    def assignment(self):
        return {("t", 0)} if self._assigned else set()

    def poll(self, timeout_ms, max_records):
        return {}

    def close(self, autocommit=True, timeout_ms=None):
        self.closed = True


@pytest.fixture
def clock(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])  # the consumer reads time.monotonic
    return now


def consumer(monkeypatch, clients):
    made = iter(clients)
    monkeypatch.setattr(KafkaGroupConsumer, "_make", lambda self: next(made))
    return KafkaGroupConsumer(object(), ["t"], "g", True, stuck_s=15.0)


def test_a_client_without_positions_past_the_window_is_recreated(monkeypatch, clock):
    stuck, fresh = FakeClient(True, False), FakeClient(True, True)
    c = consumer(monkeypatch, [stuck, fresh])
    for t in (0.0, 5.0, 14.0):
        clock[0] = t
        c.poll(0.05)
    assert c._c is stuck and c.recreated == 0
    clock[0] = 15.5
    c.poll(0.05)
    assert c._c is fresh and stuck.closed and c.recreated == 1
    clock[0] = 100.0
    c.poll(0.05)
    assert c.recreated == 1  # the new client has its positions


def test_idle_or_healthy_clients_are_left_alone(monkeypatch, clock):
    for client in (FakeClient(False, False), FakeClient(True, True)):  # no partitions (more members than
        c = consumer(monkeypatch, [client])                              # partitions), or all positioned
        for t in (0.0, 20.0, 40.0):
            clock[0] = t
            c.poll(0.05)
        assert c._c is client and c.recreated == 0
