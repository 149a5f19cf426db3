"""The in-memory bus keeps Kafka's semantics (the same checks run against Kafka in integration)."""

import threading

import pytest

from vidnexus.connectors.memory_bus import MemoryBus
from vidnexus.errors import ConnectorError
from vidnexus.testing import FakeClock


def drain(consumer, n, timeout=2.0):
    out = []
    for _ in range(50):
        out += consumer.poll(timeout_s=timeout / 50)
        if len(out) >= n:
            break
    return out


def test_per_key_order_across_partitions():
    bus = MemoryBus()
    bus.create_topic("t", partitions=4)
    for i in range(100):
        bus.publish("t", f"k{i % 7}".encode(), str(i).encode())
    c = bus.subscribe(["t"], group="g")
    msgs = drain(c, 100)
    assert len(msgs) == 100
    assert len({m.partition for m in msgs}) > 1
    for k in range(7):
        vals = [int(m.value) for m in msgs if m.key == f"k{k}".encode()]
        assert vals == sorted(vals) and len(vals) > 0


def test_group_members_split_partitions_and_rebalance_on_leave():
    bus = MemoryBus()
    bus.create_topic("t", partitions=4)
    a = bus.subscribe(["t"], group="g")
    b = bus.subscribe(["t"], group="g")
    assert a.assignment().isdisjoint(b.assignment())
    assert len(a.assignment() | b.assignment()) == 4
    b.close()
    assert len(a.assignment()) == 4


def test_committed_offsets_survive_a_restart():
    bus = MemoryBus()
    bus.create_topic("t", partitions=2)
    for i in range(10):
        bus.publish("t", b"k", str(i).encode())
    c = bus.subscribe(["t"], group="g")
    first = drain(c, 10)
    assert len(first) == 10
    p = first[0].partition
    assert bus.group_lag("g", "t", [p]) == {p: 10} and bus.group_lag("other", "t", [p]) == {p: 10}
    c.commit()
    c.close()
    for i in range(10, 15):
        bus.publish("t", b"k", str(i).encode())
    assert bus.group_lag("g", "t", [p]) == {p: 5}
    c2 = bus.subscribe(["t"], group="g")
    assert [int(m.value) for m in drain(c2, 5)] == list(range(10, 15))


def test_uncommitted_records_are_redelivered():
    bus = MemoryBus()
    bus.create_topic("t", partitions=1)
    bus.publish("t", None, b"x")
    c = bus.subscribe(["t"], group="g")
    assert len(drain(c, 1)) == 1
    c.close()
    assert len(drain(bus.subscribe(["t"], group="g"), 1)) == 1


def test_oversized_message_is_refused():
    bus = MemoryBus(max_message_bytes=10)
    with pytest.raises(ConnectorError, match="exceeds"):
        bus.publish("t", None, b"x" * 11)


def test_poll_times_out_empty():
    bus = MemoryBus(clock=FakeClock())
    assert bus.subscribe(["t"], group=None).poll(timeout_s=0.0) == []


def in_thread(fn):
    """Run ``fn`` in a thread; returns (thread, list that gets its result)."""
    out = []
    t = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    t.start()
    return t, out


def test_a_waiting_poll_times_out_when_the_clock_passes_its_timeout_and_not_before():
    clock = FakeClock()
    c = MemoryBus(clock=clock).subscribe(["t"], group=None)
    t, out = in_thread(lambda: c.poll(timeout_s=1.0))
    clock.until_waiting(1)
    clock.advance(0.5)
    clock.until_waiting(1)
    assert out == []                                       # still waiting: half its timeout passed
    clock.advance(0.5)
    t.join(5)
    assert out == [[]] and clock.now() == 1.0


@pytest.mark.parametrize("how", ["publish", "wakeup", "close"])
def test_a_waiting_poll_returns_on_a_message_a_wakeup_or_close_with_no_time_passing(how):
    clock = FakeClock(wall_start=1000.0)
    bus = MemoryBus(clock=clock)
    bus.create_topic("t", partitions=1)
    c = bus.subscribe(["t"], group=None)
    t, out = in_thread(lambda: c.poll(timeout_s=60.0))
    clock.until_waiting(1)
    {"publish": lambda: bus.publish("t", b"k", b"v"), "wakeup": c.wakeup, "close": c.close}[how]()
    t.join(5)
    assert not t.is_alive() and clock.now() == 0.0
    if how == "publish":
        assert [(m.value, m.timestamp_ms) for m in out[0]] == [(b"v", 1_000_000)]  # stamped by clock.wall()
    else:
        assert out == [[]]


def test_delete_topic_forgets_it_and_is_idempotent():
    bus = MemoryBus(clock=FakeClock())
    bus.create_topic("t", partitions=2)
    bus.create_topic("keep", partitions=1)
    bus.publish("t", b"k", b"v")
    reader = bus.subscribe(["t", "keep"], group=None)
    member = bus.subscribe(["t", "keep"], group="g")
    assert len(member.poll(timeout_s=0.0)) == 1
    member.commit()
    bus.delete_topic("t")
    bus.delete_topic("t")  # again: no error
    bus.delete_topic("never-created")
    with pytest.raises(ConnectorError, match="unknown topic 't'"):
        bus.partitions("t")
    assert reader.assignment() == {("keep", 0)} and member.assignment() == {("keep", 0)}
    assert reader.poll(timeout_s=0.0) == []
    bus.publish("keep", None, b"still here")
    assert [m.value for m in reader.poll(timeout_s=0.0)] == [b"still here"]
    bus.create_topic("t", partitions=1)  # a new topic of the same name starts empty, no offsets kept
    assert bus.end_offsets("t") == [0] and bus.group_lag("g", "t", [0]) == {0: 0}


def test_deleting_a_topic_does_not_make_other_groups_read_again():
    # A client closing (its reply topic deleted) once made every group take its committed offsets
    # again: an executor re-read and re-ran the requests it had not committed yet.
    bus = MemoryBus(clock=FakeClock())
    bus.create_topic("requests", partitions=1)
    bus.create_topic("replies.x", partitions=1)
    executor = bus.subscribe(["requests"], group="executor")
    bus.publish("requests", None, b"r0")
    assert len(executor.poll(timeout_s=0.0)) == 1  # read, not committed yet
    bus.delete_topic("replies.x")
    bus.publish("requests", None, b"r1")
    assert [m.value for m in executor.poll(timeout_s=0.0)] == [b"r1"]


# -- retention: memory follows the readers' backlog, not the run's length ----------------------------
KB = 1024


def test_records_every_group_committed_are_let_go_down_to_the_retained_bytes():
    bus = MemoryBus(retain_bytes=10 * KB)
    bus.create_topic("frames", partitions=1)
    fast, slow = bus.subscribe(["frames"], group="fast"), bus.subscribe(["frames"], group="slow")
    for i in range(100):
        bus.publish("frames", b"cam", bytes(KB))
    assert len(drain(fast, 100)) == 100
    fast.commit()
    assert bus.retained("frames")[0] == 100  # "slow" has committed nothing: all of it is still needed
    assert len(drain(slow, 100)) == 100
    slow.commit()
    records, size = bus.retained("frames")
    assert size <= 10 * KB and 0 < records < 100
    assert bus.end_offsets("frames") == [100]  # offsets stay absolute
    bus.publish("frames", b"cam", b"next")
    assert [m.offset for m in fast.poll(timeout_s=0.1)] == [100]
    assert bus.group_lag("slow", "frames", [0]) == {0: 1}


def test_a_long_run_holds_only_the_backlog():
    bus = MemoryBus(retain_bytes=64 * KB)
    bus.create_topic("frames", partitions=2)
    c = bus.subscribe(["frames"], group="worker")
    for i in range(2000):
        bus.publish("frames", str(i % 3).encode(), bytes(4 * KB))
        if i % 10 == 9:
            assert len(drain(c, 10)) == 10
            c.commit()
    assert bus.retained("frames")[1] <= 2 * 2 * 64 * KB  # 8 MB published


def test_records_published_before_their_readers_subscribe_wait_for_them():
    bus = MemoryBus(retain_bytes=4 * KB, dormant_bytes=1024 * KB)
    bus.create_topic("frames", partitions=1)
    for i in range(100):  # ingest runs ahead of a worker that is still starting
        bus.publish("frames", b"cam", bytes(KB))
    worker = bus.subscribe(["frames"], group="worker")
    assert len(drain(worker, 100)) == 100


def test_a_groupless_reader_holds_what_it_has_not_read_and_a_closed_one_nothing():
    bus = MemoryBus(retain_bytes=4 * KB, dormant_bytes=0)
    bus.create_topic("stats", partitions=1)
    reader = bus.subscribe(["stats"], group=None)
    for i in range(50):
        bus.publish("stats", None, str(i).encode() * 100)
    assert bus.retained("stats")[0] == 50
    got = drain(reader, 50)
    assert [m.value for m in got] == [str(i).encode() * 100 for i in range(50)]  # nothing lost to it
    assert bus.retained("stats")[1] <= 4 * KB
    reader.close()
    for i in range(50):  # nobody reads it: it keeps its last retain_bytes
        bus.publish("stats", None, bytes(1000))
    assert bus.retained("stats")[1] <= 2 * 4 * KB


def test_a_group_between_two_members_loses_nothing():
    bus = MemoryBus(retain_bytes=2 * KB)
    bus.create_topic("requests", partitions=1)
    first = bus.subscribe(["requests"], group="executor")
    bus.publish("requests", None, b"r0")
    drain(first, 1)
    first.commit()
    first.close()  # resubscribing: for a moment the group has no member
    for i in range(1, 101):
        bus.publish("requests", None, str(i).encode() * 100)
    second = bus.subscribe(["requests"], group="executor")
    got = drain(second, 100)
    assert [m.offset for m in got] == list(range(1, 101))


def test_a_group_resuming_behind_the_first_kept_record_starts_there():
    bus = MemoryBus(retain_bytes=2 * KB, dormant_bytes=8 * KB)
    bus.create_topic("t", partitions=1)
    old = bus.subscribe(["t"], group="g")
    bus.publish("t", None, b"a")
    drain(old, 1)
    old.commit()
    old.close()  # the group has no live member: it no longer holds records back
    for i in range(100):
        bus.publish("t", None, bytes(200))
    first = bus.end_offsets("t")[0] - bus.retained("t")[0]
    assert first > 1
    again = bus.subscribe(["t"], group="g")
    got = drain(again, 100 - first + 1)
    assert got[0].offset == first and got[-1].offset == 100


def test_compacted_topics_keep_everything():
    bus = MemoryBus(retain_bytes=KB)
    bus.create_topic("registry", partitions=1, compacted=True)
    for i in range(100):
        bus.publish("registry", f"s{i}".encode(), bytes(100))
    assert bus.retained("registry")[0] == 100


def test_members_of_one_group_subscribed_to_different_topics_each_get_their_own_topics_partitions():
    """As Kafka's assignor: a topic's partitions go to the members subscribed to it (an executor's
    own routed request topic to that executor, a shared topic's partitions split between them)."""
    bus = MemoryBus()
    for t, n in (("shared", 2), ("only-a", 1), ("only-b", 1)):
        bus.create_topic(t, n)
        for p in range(n):
            bus.publish(t, f"{t}{p}".encode() if n > 1 else None, t.encode())
    a = bus.subscribe(["shared", "only-a"], group="g")
    b = bus.subscribe(["shared", "only-b"], group="g")
    assert a.assignment() | b.assignment() == {("shared", 0), ("shared", 1), ("only-a", 0), ("only-b", 0)}
    assert ("only-a", 0) in a.assignment() and ("only-b", 0) in b.assignment()
    assert len({p for t, p in a.assignment() if t == "shared"}) == 1
    assert {m.topic for m in drain(b, 2)} >= {"only-b"}
