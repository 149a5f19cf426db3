"""KafkaGroupConsumer recreates a client whose assigned partitions never get a fetch position (the
kafka-python 3.0 lost offset-fetch reply) or that has no partitions and is not a member of its
group (a lost group request), and leaves healthy clients and members without partitions alone."""

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
    def __init__(self, assigned: bool, positioned: bool, member_id: str = "m-1") -> None:
        self._subscription = FakeSubscription(positioned)
        self._coordinator = type("Coord", (), {"_generation": type("Gen", (), {"member_id": member_id})()})()
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


class FakeAdmin:
    def __init__(self, members: list[str]) -> None:
        self.members = members
        self.calls = 0

    def describe_groups(self, groups):
        self.calls += 1
        return {g: {"members": [{"member_id": m} for m in self.members]} for g in groups}


def consumer(monkeypatch, clients, members=("m-1",)):
    made = iter(clients)
    monkeypatch.setattr(KafkaGroupConsumer, "_make", lambda self: next(made))
    bus = type("Bus", (), {"_admin": FakeAdmin(list(members))})()
    return KafkaGroupConsumer(bus, ["t"], "g", True, stuck_s=15.0)


def test_a_client_without_positions_past_the_window_is_recreated(monkeypatch, clock):
    stuck, fresh = FakeClient(True, False), FakeClient(True, True)
    c = consumer(monkeypatch, [stuck, fresh])
    for t in [i * 1.4 for i in range(11)]:  # polls up to 14 s
        clock[0] = t
        c.poll(0.05)
    assert c._c is stuck and c.recreated == 0
    clock[0] = 15.5
    c.poll(0.05)
    assert c._c is fresh and stuck.closed and c.recreated == 1
    clock[0] = 100.0
    c.poll(0.05)
    assert c.recreated == 1  # the new client has its positions


def test_healthy_clients_and_members_without_partitions_are_left_alone(monkeypatch, clock):
    for client in (FakeClient(True, True), FakeClient(False, False, member_id="m-1")):
        c = consumer(monkeypatch, [client], members=["m-0", "m-1"])
        for t in range(0, 61, 2):
            clock[0] = t
            c.poll(0.05)
        assert c._c is client and c.recreated == 0
    assert 1 <= c._bus._admin.calls <= 3  # the broker is asked at most once per window


def test_a_client_that_is_not_a_member_of_its_group_is_recreated(monkeypatch, clock):
    lost, fresh = FakeClient(False, False, member_id=""), FakeClient(True, True)
    c = consumer(monkeypatch, [lost, fresh], members=[])  # the group stayed empty
    for t in (0.0, 16.0):  # two polls only (a client that polls rarely): not judged yet
        clock[0] = t
        c.poll(0.05)
    assert c._c is lost
    for t in range(17, 24):
        clock[0] = t
        c.poll(0.05)
    assert c._c is lost  # nine polls in all; the tenth is judged
    clock[0] = 24.0
    c.poll(0.05)
    assert c._c is fresh and lost.closed and c.recreated == 1
