"""The Bus over the real Kafka broker: ordering, groups, rebalancing, committed offsets."""

import time
import uuid

import pytest

from tests.integration.conftest import kafka_bus_of
from vidnexus.errors import ConnectorError


def drain(consumer, n, timeout_s=30.0):
    out, deadline = [], time.monotonic() + timeout_s
    while len(out) < n and time.monotonic() < deadline:
        out += consumer.poll(timeout_s=0.5)
    return out


def assert_flows_in_order(bus, topic, n):
    """``n`` records under one key through a new one-partition ``topic`` arrive, all and in order."""
    bus.create_topic(topic, partitions=1)
    for i in range(n):
        bus.publish(topic, b"k", str(i).encode())
    bus.flush()
    c = bus.subscribe([topic], group=f"g-{uuid.uuid4().hex[:6]}")
    assert [int(m.value) for m in drain(c, n)] == list(range(n))
    c.close()


def test_round_trip_keeps_per_key_order_across_partitions(kafka_bus, topic):
    kafka_bus.create_topic(topic, partitions=4)
    assert kafka_bus.partitions(topic) == 4
    for i in range(400):
        kafka_bus.publish(topic, f"cam-{i % 9}".encode(), str(i).encode(), headers=[("n", str(i).encode())])
    kafka_bus.flush()
    c = kafka_bus.subscribe([topic], group=f"g-{uuid.uuid4().hex[:6]}")
    msgs = drain(c, 400)
    c.close()
    assert len(msgs) == 400
    assert len({m.partition for m in msgs}) == 4
    for k in range(9):
        key = f"cam-{k}".encode()
        vals = [int(m.value) for m in msgs if m.key == key]
        assert vals == sorted(vals) and vals == list(range(k, 400, 9))
        assert len({m.partition for m in msgs if m.key == key}) == 1
    assert all(dict(m.headers)["n"] == m.value for m in msgs)


@pytest.mark.parametrize("linger_ms", [None, 0.0, 3.0])
def test_the_producer_linger_comes_from_the_settings_and_records_flow_at_each(kafka_bootstrap, kafka_driver, topic,
                                                                               linger_ms):
    from vidnexus.config import Settings
    from vidnexus.connectors.factory import open_bus

    bus = open_bus(Settings(bus="kafka", kafka_driver=kafka_driver, kafka_bootstrap=kafka_bootstrap,
                            kafka_linger_ms=linger_ms))
    try:
        assert bus.linger_ms == (linger_ms if linger_ms is not None else {"confluent": 0.5, "kafka-python": 2.0}[kafka_driver])
        # Unset on confluent: a second, eager producer takes records while the rate is low.
        assert getattr(bus, "adaptive", False) == (linger_ms is None and kafka_driver == "confluent")
        assert_flows_in_order(bus, topic, 50)
    finally:
        bus.close()


def test_the_adaptive_producer_switches_with_the_rate_and_keeps_the_order(kafka_bootstrap, topic):
    """Unset linger on confluent: records go to the eager producer (linger 0) at low rates and to
    the batching one at high rates; a switch waits for the other to drain, so order holds. The
    switch happens while records keep coming at an even rate, with no pause or flush to let the
    eager producer empty by itself."""
    from vidnexus.config import Settings
    from vidnexus.connectors.factory import open_bus

    bus = open_bus(Settings(bus="kafka", kafka_driver="confluent", kafka_bootstrap=kafka_bootstrap))
    try:
        assert bus.adaptive and bus.switches == 0
        bus.create_topic(topic, partitions=1)
        n = 0
        for _ in range(20):  # slow: 20 records 10 ms apart stay on the eager producer
            bus.publish(topic, b"k", str(n).encode())
            n += 1
            time.sleep(0.01)
        assert bus.switches == 0
        start = time.monotonic()
        while bus.switches == 0 and n < 20 + 3000 * 5:  # 3,000 a second, evenly, for up to 5 s
            ahead = start + (n - 20) / 3000 - time.monotonic()
            if ahead > 0.001:
                time.sleep(ahead)
            bus.publish(topic, b"k", str(n).encode())
            n += 1
        assert bus.switches == 1, f"still on the eager producer after {n - 20} records at 3,000/s"
        for _ in range(200):  # batching from here on
            bus.publish(topic, b"k", str(n).encode())
            n += 1
        assert bus.switches == 1
        time.sleep(0.3)
        for _ in range(20):  # slow again: back to eager once the batching producer has drained
            bus.publish(topic, b"k", str(n).encode())
            n += 1
            time.sleep(0.01)
        assert bus.switches == 2
        bus.flush()
        assert bus.delivered()
        c = bus.subscribe([topic], group=f"g-{uuid.uuid4().hex[:6]}")
        assert [int(m.value) for m in drain(c, n)] == list(range(n))
        c.close()
    finally:
        bus.close()


def test_producers_take_the_leaders_write_on_a_one_broker_cluster(kafka_bus, topic):
    """One broker: a partition's only replica is its leader, so acks=all would wait for nothing more
    (and cost the broker more); records still arrive, in order."""
    assert kafka_bus.acks == "1"
    assert_flows_in_order(kafka_bus, topic, 20)


def test_create_topic_is_idempotent(kafka_bus, topic):
    kafka_bus.create_topic(topic, partitions=2)
    kafka_bus.create_topic(topic, partitions=2)
    assert kafka_bus.partitions(topic) == 2


def test_consumer_group_rebalances_between_two_consumers(kafka_bus, topic):
    kafka_bus.create_topic(topic, partitions=4)
    group = f"g-{uuid.uuid4().hex[:6]}"
    a = kafka_bus.subscribe([topic], group=group)
    deadline = time.monotonic() + 30
    while len(a.assignment()) < 4 and time.monotonic() < deadline:
        a.poll(timeout_s=0.2)
    assert len(a.assignment()) == 4
    b = kafka_bus.subscribe([topic], group=group)
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline:
        a.poll(timeout_s=0.2)
        b.poll(timeout_s=0.2)
        if a.assignment() and b.assignment() and len(a.assignment() | b.assignment()) == 4:
            break
    sa, sb = a.assignment(), b.assignment()
    assert sa and sb and sa.isdisjoint(sb) and len(sa | sb) == 4
    # Both members now receive data from their own partitions.
    for i in range(40):
        kafka_bus.publish(topic, f"k{i}".encode(), b"x")
    kafka_bus.flush()
    got_a, got_b, deadline = [], [], time.monotonic() + 30
    while len(got_a) + len(got_b) < 40 and time.monotonic() < deadline:
        got_a += a.poll(timeout_s=0.2)
        got_b += b.poll(timeout_s=0.2)
    assert len(got_a) + len(got_b) == 40 and got_a and got_b
    assert {(m.topic, m.partition) for m in got_a} <= sa
    assert {(m.topic, m.partition) for m in got_b} <= sb
    b.close()
    deadline = time.monotonic() + 40
    while len(a.assignment()) < 4 and time.monotonic() < deadline:
        a.poll(timeout_s=0.2)
    assert len(a.assignment()) == 4
    a.close()


def test_committed_offsets_survive_a_consumer_restart(kafka_bus, topic):
    kafka_bus.create_topic(topic, partitions=2)
    group = f"g-{uuid.uuid4().hex[:6]}"
    for i in range(20):
        kafka_bus.publish(topic, b"same-key", str(i).encode())
    kafka_bus.flush()
    c = kafka_bus.subscribe([topic], group=group)
    first = drain(c, 20)
    assert [int(m.value) for m in first] == list(range(20))
    p = first[0].partition
    assert kafka_bus.group_lag(group, topic, [p]) == {p: 20}  # nothing committed yet: all of it
    c.commit()
    c.close()
    assert kafka_bus.group_lag(group, topic, [p]) == {p: 0}
    for i in range(20, 30):
        kafka_bus.publish(topic, b"same-key", str(i).encode())
    kafka_bus.flush()
    assert kafka_bus.group_lag(group, topic, [p]) == {p: 10}
    c2 = kafka_bus.subscribe([topic], group=group)
    second = drain(c2, 10)
    time.sleep(1.0)
    second += c2.poll(timeout_s=1.0)
    c2.close()
    assert [int(m.value) for m in second] == list(range(20, 30))


def test_uncommitted_records_are_redelivered_after_restart(kafka_bus, topic):
    kafka_bus.create_topic(topic, partitions=1)
    group = f"g-{uuid.uuid4().hex[:6]}"
    for i in range(5):
        kafka_bus.publish(topic, None, str(i).encode())
    kafka_bus.flush()
    c = kafka_bus.subscribe([topic], group=group)
    assert len(drain(c, 5)) == 5
    c.close()  # no commit
    c2 = kafka_bus.subscribe([topic], group=group)
    assert [int(m.value) for m in drain(c2, 5)] == list(range(5))
    c2.close()


def test_oversized_message_is_a_clear_error(kafka_bootstrap, kafka_driver, topic):
    bus = kafka_bus_of(kafka_driver, kafka_bootstrap, max_message_bytes=1000)
    try:
        with pytest.raises(ConnectorError, match="exceeds the 1000-byte limit"):
            bus.publish(topic, None, b"x" * 2000)
    finally:
        bus.close()


def closed_port() -> str:
    """``host:port`` where nothing listens: what a broker that went away looks like to a client."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def test_metadata_that_never_arrives_is_retryable(kafka_bootstrap, kafka_driver, topic):
    """A broker that goes away between creating a topic and listing it (a restart) must leave the
    role riding out the outage, not exiting: the CI run of 2026-11-30 lost its executor to this."""
    bus = kafka_bus_of(kafka_driver, kafka_bootstrap)
    try:
        bus.timeout_s = 0.5
        if kafka_driver == "kafka-python":
            from kafka import KafkaProducer

            bus._producer.close()
            bus._producer = KafkaProducer(bootstrap_servers=[closed_port()], api_version=(2, 8, 0), max_block_ms=200)
        else:
            from confluent_kafka.admin import AdminClient

            bus._admin = AdminClient({"bootstrap.servers": closed_port(), "log_level": 0})
        with pytest.raises(ConnectorError, match="metadata never arrived") as e:
            bus._wait_for_metadata(topic)
        assert e.value.retryable
    finally:
        bus.close()


@pytest.mark.parametrize("name, partitions, reason", [("has space", 1, "invalid"), (None, 0, "partitions")])
def test_a_topic_the_broker_refuses_for_good_is_not_retryable(kafka_bus, kafka_bootstrap, topic, name, partitions,
                                                              reason):
    """A bad name or partition count is answered the same however often it is tried: a role must stop
    with the broker's reason, not ride it out as an outage until VNX_GIVE_UP_S (both drivers
    classified every creation error retryable until 2026-11-30)."""
    name = name or topic
    with pytest.raises(ConnectorError, match=f"(?i)cannot create topic.*{reason}") as e:
        kafka_bus.create_topic(name, partitions)
    assert not e.value.retryable
    assert name not in broker_topics(kafka_bootstrap)


def test_the_group_lag_of_a_broker_that_does_not_answer_is_bounded_and_retryable(kafka_bootstrap, topic):
    """The executor's and sink's watchdogs ask for a group's lag from their loops: with no answer
    the confluent driver waited on the admin's futures without a timeout (librdkafka's default
    request timeout is a minute); now it is a retryable error within about twice the bus's timeout."""
    from confluent_kafka.admin import AdminClient

    bus = kafka_bus_of("confluent", kafka_bootstrap)
    try:
        bus.timeout_s = 0.5
        bus._admin = AdminClient({"bootstrap.servers": closed_port(), "log_level": 0})
        t0 = time.monotonic()
        with pytest.raises(ConnectorError, match="lag of group") as e:
            bus.group_lag("vnx-test-group", topic, [0])
        assert e.value.retryable
        assert time.monotonic() - t0 < 10
    finally:
        bus.close()


@pytest.mark.parametrize("code, retryable, says", [("LEADER_NOT_AVAILABLE", True, "cannot read topic"),
                                                    ("UNKNOWN_TOPIC_OR_PART", False, "unknown topic 't'; create it first")])
def test_a_topic_without_a_leader_yet_is_retryable_and_an_unknown_one_is_not(kafka_bootstrap, code, retryable, says):
    """The confluent driver's ``partitions``: a topic whose partitions have no leader yet (just
    created, or its broker restarting) said "unknown topic" and was not retryable until 2026-11-30.
    The broker does not answer LEADER_NOT_AVAILABLE on demand, so the metadata is given here as
    librdkafka carries it."""
    from types import SimpleNamespace

    from confluent_kafka import KafkaError

    bus = kafka_bus_of("confluent", kafka_bootstrap)
    try:
        md = SimpleNamespace(error=KafkaError(getattr(KafkaError, code)), partitions={})
        bus._admin = SimpleNamespace(list_topics=lambda topic, timeout: SimpleNamespace(topics={topic: md}))
        with pytest.raises(ConnectorError, match=says) as e:
            bus.partitions("t")
        assert e.value.retryable == retryable
    finally:
        bus.close()


def test_an_unknown_topic_is_said_at_once_and_not_retryable(kafka_bus, topic):
    """Both drivers: ``partitions`` of a topic the broker does not know raises "unknown topic", not
    retryable, in well under the bus's timeout (10 s here). kafka-python's producer metadata waited
    the whole timeout and raised a timeout, which it called "unknown topic" (until 2026-12-02)."""
    t0 = time.monotonic()
    with pytest.raises(ConnectorError, match=f"unknown topic '{topic}'; create it first") as e:
        kafka_bus.partitions(topic)
    assert not e.value.retryable
    assert time.monotonic() - t0 < 3
    kafka_bus.create_topic(topic, partitions=3)
    assert kafka_bus.partitions(topic) == 3


@pytest.mark.parametrize("error, retryable, says", [("KafkaConnectionError", True, "cannot read topic"),
                                                     ("KafkaTimeoutError", True, "cannot read topic"),
                                                     (5, True, "cannot read topic 't': error 5"),
                                                     (29, False, "cannot read topic 't': error 29")])
def test_kafka_python_partitions_tells_a_broker_away_from_an_unknown_topic(kafka_bootstrap, error, retryable, says):
    """The kafka-python driver's ``partitions``: a broker that does not answer (the admin's request
    fails) or a topic without a leader yet (error 5) is retryable; a refusal for good (29: topic
    authorization failed) is not. The broker does not fail on demand, so the admin's answer is
    given here as kafka-python carries it."""
    from types import SimpleNamespace

    import kafka.errors

    bus = kafka_bus_of("kafka-python", kafka_bootstrap)

    def describe(topics):
        if isinstance(error, str):
            raise getattr(kafka.errors, error)("no answer")
        return [{"name": topics[0], "error_code": error, "partitions": []}]

    try:
        bus._admin, real = SimpleNamespace(describe_topics=describe), bus._admin
        with pytest.raises(ConnectorError, match=says) as e:
            bus.partitions("t")
        assert e.value.retryable == retryable
    finally:
        bus._admin = real
        bus.close()


def broker_topics(bootstrap: str) -> set[str]:
    """The topics the broker lists, read by an admin client of its own (not the bus under test)."""
    from confluent_kafka.admin import AdminClient

    return set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics)


def wait_gone(bootstrap: str, name: str, timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if name not in broker_topics(bootstrap):
            return True
        time.sleep(0.2)
    return False


def test_delete_topic_removes_it_and_is_idempotent(kafka_bus, kafka_bootstrap, topic):
    kafka_bus.create_topic(topic, partitions=2)
    assert topic in broker_topics(kafka_bootstrap)
    kafka_bus.delete_topic(topic)
    assert wait_gone(kafka_bootstrap, topic)
    kafka_bus.delete_topic(topic)  # gone already: no error
    kafka_bus.delete_topic(f"vnx-never-{uuid.uuid4().hex[:10]}")


def test_executor_client_close_deletes_its_reply_topic(kafka_bus, kafka_bootstrap):
    from vidnexus.config import Settings
    from vidnexus.gpu_executor.client import ExecutorClient

    settings = Settings(bus="kafka", kafka_bootstrap=kafka_bootstrap, topic_prefix=f"rt{uuid.uuid4().hex[:8]}")
    client = ExecutorClient(kafka_bus, settings)
    other = ExecutorClient(kafka_bus, settings)
    assert {client.reply_topic, other.reply_topic} <= broker_topics(kafka_bootstrap)
    started = time.monotonic()
    client.close()
    assert time.monotonic() - started < 20
    assert wait_gone(kafka_bootstrap, client.reply_topic)
    assert other.reply_topic in broker_topics(kafka_bootstrap)  # only the closed client's own topic
    other.close()
    assert wait_gone(kafka_bootstrap, other.reply_topic)


def test_kafka_python_group_consumer_joins_once(kafka_bootstrap, topic):
    """A new kafka-python group member on an existing topic gets its partitions from its first
    rebalance. Joining before the topic's metadata came in assigned nothing and forced a second
    rebalance, which kafka-python 3.0.12 sometimes never finished (the member then held nothing for
    the broker's 60 s rebalance timeout: `bench hop`'s "echo answered nothing")."""
    bus = kafka_bus_of("kafka-python", kafka_bootstrap)
    try:
        bus.create_topic(topic, partitions=2)
        for _ in range(5):
            c = bus.subscribe([topic], group=f"g-{uuid.uuid4().hex[:6]}")
            deadline = time.monotonic() + 30
            while len(c.assignment()) < 2 and time.monotonic() < deadline:
                c.poll(timeout_s=0.05)
            generation = c._c._coordinator._generation.generation_id  # kafka-python's own count of rebalances
            c.close()
            assert generation == 1
    finally:
        bus.close()


def topic_configs(bootstrap: str, topic: str) -> dict[str, str]:
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = admin.describe_configs([res])[res].result(timeout=20)
    return {k: v.value for k, v in entries.items()}


def test_a_topic_with_retention_keeps_a_minute_or_two_in_segments_rolled_rarely(kafka_bus, kafka_bootstrap, topic):
    """Request and reply topics are worthless past their deadline: their records go in segments of
    256 MiB at most, rolled by size or after a minute less up to 15 s at random (a roll stalls the
    partition: EPHEMERAL_SEGMENT_BYTES, EPHEMERAL_ROLL_S), deleted a second after their newest
    record expires, instead of the broker's 24 h of 150 KB requests."""
    kafka_bus.create_topic(topic, partitions=1, retention_s=10)
    c = topic_configs(kafka_bootstrap, topic)
    assert (c["retention.ms"], c["segment.ms"], c["segment.jitter.ms"], c["segment.bytes"],
            c["file.delete.delay.ms"]) == ("10000", "60000", "15000", str(256 * 1024 * 1024), "1000")
    assert c["cleanup.policy"] == "delete"
    plain = f"{topic}-plain"
    kafka_bus.create_topic(plain, partitions=1)
    assert topic_configs(kafka_bootstrap, plain)["retention.ms"] == str(24 * 3600 * 1000)  # the broker's


def test_an_existing_topic_gets_the_configs_it_would_be_created_with_and_keeps_its_others(kafka_bus, kafka_bootstrap,
                                                                                           topic):
    """A topic created by an earlier release (another retention and rolling) or by hand: creating it
    again sets what vidnexus creates it with, and only that (a config it does not set stays)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1, config={"retention.ms": "86400000", "segment.ms": "10000",
                                                       "min.compaction.lag.ms": "1234"})])[topic].result(timeout=20)
    kafka_bus.create_topic(topic, partitions=2, retention_s=10)
    c = topic_configs(kafka_bootstrap, topic)
    assert (c["retention.ms"], c["segment.ms"], c["segment.bytes"]) == ("10000", "60000", str(256 * 1024 * 1024))
    assert c["max.message.bytes"] == str(kafka_bus.max_message_bytes + 64 * 1024)
    assert c["min.compaction.lag.ms"] == "1234"
    assert kafka_bus.partitions(topic) == 2
    kafka_bus.create_topic(topic, partitions=2, retention_s=10)  # up to date: nothing to set, no error
    assert topic_configs(kafka_bootstrap, topic)["retention.ms"] == "10000"


def test_the_executor_client_reply_topic_keeps_a_minute(kafka_bus, kafka_bootstrap):
    from vidnexus.config import Settings
    from vidnexus.contracts.topics import REPLY_RETENTION_S
    from vidnexus.gpu_executor.client import ExecutorClient

    settings = Settings(bus="kafka", kafka_bootstrap=kafka_bootstrap, topic_prefix=f"rt{uuid.uuid4().hex[:8]}")
    client = ExecutorClient(kafka_bus, settings)
    try:
        assert topic_configs(kafka_bootstrap, client.reply_topic)["retention.ms"] == str(int(REPLY_RETENTION_S * 1000))
    finally:
        client.close()
def test_delivered_says_whether_every_record_is_acknowledged_without_waiting(kafka_bus, topic):
    kafka_bus.create_topic(topic, partitions=1)
    for i in range(50):
        kafka_bus.publish(topic, None, b"x" * 10_000)
    t0 = time.monotonic()
    kafka_bus.delivered()
    assert time.monotonic() - t0 < 0.5  # never waits for the broker
    deadline = time.monotonic() + 20
    while not kafka_bus.delivered() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert kafka_bus.delivered()
    c = kafka_bus.subscribe([topic], group=None, from_beginning=True)
    assert len(drain(c, 50)) == 50
    c.close()
