"""The Bus protocol: partitioned, keyed topics with consumer groups and committed offsets.

Two implementations keep the same semantics: :class:`~vidnexus.connectors.memory_bus.MemoryBus`
(embedded mode, tests) and :class:`~vidnexus.connectors.kafka_bus.KafkaBus` (kafka-python).
Messages with the same key go to the same partition, so per-key order is preserved; a consumer group
splits partitions among its members and rebalances when one joins or leaves.

Example:
    >>> from vidnexus.connectors.memory_bus import MemoryBus
    >>> bus = MemoryBus()
    >>> bus.create_topic("t", partitions=2)
    >>> bus.publish("t", b"cam-1", b"hello")
    >>> c = bus.subscribe(["t"], group="g")
    >>> [m.value for m in c.poll(timeout_s=1.0)]
    [b'hello']
    >>> c.commit(); c.close()
    >>> bus.delete_topic("t"); bus.delete_topic("t")
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Mapping, Protocol, Sequence, runtime_checkable

__all__ = ["Message", "Bus", "Consumer", "PERMANENT_TOPIC_ERRORS", "partition_for", "topic_error_retryable"]


@dataclass(frozen=True, slots=True)
class Message:
    """One record read from a topic."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    timestamp_ms: int = 0
    headers: tuple[tuple[str, bytes], ...] = field(default=())


def partition_for(key: bytes | None, partitions: int, counter: int = 0) -> int:
    """Partition of a keyed record (stable hash of the key); unkeyed records go round-robin."""
    if key is None:
        return counter % partitions
    return zlib.crc32(key) % partitions


@runtime_checkable
class Consumer(Protocol):
    """A member of a consumer group (or a group-less reader when ``group`` is None)."""

    def poll(self, timeout_s: float = 1.0, max_records: int = 500) -> list[Message]:
        """Records from the assigned partitions, in offset order per partition."""
        ...

    def commit(self, offsets: "dict[tuple[str, int], int] | None" = None, *, wait: bool = True) -> None:
        """Commit the position after every record returned so far, or, with ``offsets``, the given
        next offset to read per (topic, partition). ``wait=False``: send the commit and return (a
        commit that fails then is logged, not raised: the records are read again, at least once)."""
        ...

    def assignment(self) -> set[tuple[str, int]]:
        """The (topic, partition) pairs this member currently owns."""
        ...

    def wakeup(self) -> None:
        """Make a poll in progress in another thread (or else the next poll) return soon, possibly
        empty: how a loop blocked in ``poll`` learns that it should stop. Safe from any thread."""
        ...

    def close(self) -> None:
        """Leave the group (triggers a rebalance) without committing."""
        ...


@runtime_checkable
class Bus(Protocol):
    """Publish/subscribe over partitioned topics. A bus whose publishers and consumers share one
    process says so with a class attribute ``in_process = True`` (the memory bus): ingest then puts
    frames on it uncompressed."""

    def create_topic(self, name: str, partitions: int = 4, *, compacted: bool = False,
                     retention_s: float | None = None) -> None:
        """Create ``name`` if it does not exist (idempotent). With ``retention_s``, records are
        worthless after that long and a broker may delete them (requests and replies: past their
        deadline; on Kafka see :func:`ephemeral_configs`). An existing topic keeps its partitions; on
        Kafka it gets the configs it would be created with (:func:`configs_to_alter`)."""
        ...

    def delete_topic(self, name: str) -> None:
        """Delete ``name`` and its records (idempotent: a topic that does not exist is no error).
        Waits at most the bus's timeout for the broker's answer.

        Raises:
            ConnectorError: retryable when the broker cannot answer now.
        """
        ...

    def partitions(self, topic: str) -> int:
        """Number of partitions of an existing topic."""
        ...

    def publish(
        self,
        topic: str,
        key: bytes | None,
        value: bytes,
        headers: Sequence[tuple[str, bytes]] = (),
    ) -> None:
        """Append a record; same key → same partition."""
        ...

    def flush(self, timeout_s: float = 10.0) -> None:
        """Block until every published record is acknowledged."""
        ...

    def delivered(self) -> bool:
        """Whether every record published so far is acknowledged, without waiting (records that
        failed raise :class:`ConnectorError`, as in :meth:`flush`)."""
        ...

    def subscribe(
        self, topics: Sequence[str], group: str | None, *, from_beginning: bool = True
    ) -> Consumer:
        """A consumer of ``topics`` in consumer group ``group``."""
        ...

    def group_lag(self, group: str, topic: str, partitions: Sequence[int]) -> dict[int, int]:
        """Records of ``topic``'s ``partitions`` that consumer group ``group`` has not committed yet
        (counted from the earliest offset where it committed nothing).

        Raises:
            ConnectorError: retryable when the broker cannot answer now.
        """
        ...

    def close(self) -> None:
        """Flush and release connections."""
        ...


EPHEMERAL_SEGMENT_BYTES = 256 * 1024 * 1024
"""Segment size of request and reply topics. Each segment roll stalled the partition's appends for
~15 ms on this VM (strace showed 12-17 ms fsyncs in the broker's request handler threads at every
roll). 16 MiB segments (until 2026-11-29) rolled every 0.8 s at 1,000 req/s of 20 KB, and each roll
was a burst of replies 15-25 ms late, the p99 of such a hop (15-23 ms in six 10 s cells; 9-13 ms in
five of six with 256 MiB segments; probes noted in issue 18)."""

EPHEMERAL_ROLL_S = 60.0
"""The longest a request or reply topic's segment stays open (``segment.ms``; the retention when that
is longer), less up to ``EPHEMERAL_ROLL_JITTER_S`` at random. Rolled at every retention period (until
2026-11-30: 10 s for a 50 ms session), a request topic's partitions, written since the same moment,
rolled together every 10 s, and each such roll was a burst of 10-17 late or dropped requests at 120
req/s of 150 KB with a 50 ms SLO (misses at 10.1, 20.1, 30.1 and 40.1 s into each 60 s arm; 38-41
misses an arm against 8-9 with segments kept open 5 minutes in two of four alternated rounds, the
other two lost to stalls not at roll times; issue 18's note of 2026-11-30, ``.vnx/abroll.py``, not a
benchmark).
A minute makes them six times rarer, and one partition at a time, while what a topic holds past its
retention stays a minute of records: an executor that resumes from an old commit reads back at most
that many expired requests (each answered as a drop), and the disk holds at most that much."""

EPHEMERAL_ROLL_JITTER_S = 15.0
"""At most this much is taken at random off each segment's ``segment.ms`` (``segment.jitter.ms``), so
the partitions of a topic, and topics created together, do not roll at one moment."""


def ephemeral_configs(retention_s: float) -> dict[str, str]:
    """Kafka topic configs for records worthless after ``retention_s``: segments of up to
    ``EPHEMERAL_SEGMENT_BYTES``, rolled by size or after ``EPHEMERAL_ROLL_S`` (after ``retention_s``
    when that is longer; less a random ``EPHEMERAL_ROLL_JITTER_S``), deleted one second after their
    newest record expired and the broker checked (``log.retention.check.interval.ms``: 5 minutes by
    default, 5 s on the managed broker). So a partition written at R bytes/s holds its open segment
    (at most ``min(R × segment.ms, EPHEMERAL_SEGMENT_BYTES)``) and its closed segments until their
    newest record expired and was checked (about ``max(one segment, R × (retention_s + the check))``):
    a request topic holds a minute or two of 150 KB requests, not the broker's default week (or the
    managed broker's day: a test broker's directory once held 23 GB of benchmark requests). On the
    managed broker that is ~0.2 GB at most for a 4-partition topic at 10 req/s of 150 KB, ~2 GiB at 120
    req/s.

        >>> c = ephemeral_configs(10)
        >>> c["retention.ms"], c["segment.ms"], c["segment.jitter.ms"]
        ('10000', '60000', '15000')
        >>> ephemeral_configs(1200)["segment.ms"]
        '1200000'
    """
    ms = max(1, int(retention_s * 1000))
    return {"retention.ms": str(ms), "segment.ms": str(max(ms, int(EPHEMERAL_ROLL_S * 1000))),
            "segment.jitter.ms": str(int(EPHEMERAL_ROLL_JITTER_S * 1000)),
            "segment.bytes": str(EPHEMERAL_SEGMENT_BYTES), "file.delete.delay.ms": "1000", "cleanup.policy": "delete"}


RECORD_BATCH_HEADROOM = 64 * 1024
"""Bytes a topic's ``max.message.bytes`` allows past the bus's largest record: Kafka checks a whole
record batch (its header, the record's key and headers) against it."""


def topic_configs(max_message_bytes: int, *, compacted: bool = False,
                  retention_s: float | None = None) -> dict[str, str]:
    """Pure: the configs a Kafka driver gives a topic it creates (both drivers alike): room for the
    bus's largest record; compacted (control documents, plans), or ephemeral (:func:`ephemeral_configs`)
    with ``retention_s``, or else the broker's retention.

        >>> topic_configs(8 << 20)
        {'max.message.bytes': '8454144'}
        >>> topic_configs(8 << 20, compacted=True)["cleanup.policy"]
        'compact'
        >>> topic_configs(8 << 20, retention_s=10)["retention.ms"]
        '10000'
    """
    configs = {"cleanup.policy": "compact"} if compacted else {}
    if retention_s is not None and not compacted:
        configs.update(ephemeral_configs(retention_s))
    configs["max.message.bytes"] = str(max_message_bytes + RECORD_BATCH_HEADROOM)
    return configs


def producer_acks(brokers: int) -> str:
    """Pure: the producers' ``acks`` on a cluster of ``brokers`` brokers: ``"1"`` (the leader's
    write) on one broker, where a partition's only replica is its leader and ``acks=all`` waits for
    nothing more but costs the broker more CPU (its produce goes through the purgatory of delayed
    produces: 1.25 against 1.05 ms of broker CPU per 150 KB request and echo, 0.92 against 0.86 for
    20 KB, four alternated rounds of bench hop's echo at 200 req/s; behind a served executor at 150
    req/s, three alternated 15 s runs each, 1.95 against 1.92 ms, within the noise; issue 18's note
    of 2026-12-03, probe scripts, not a benchmark); ``"all"`` on a cluster of several, where a topic
    may have more replicas (vidnexus creates its own with one).

        >>> producer_acks(1), producer_acks(3)
        ('1', 'all')
    """
    return "1" if brokers == 1 else "all"


def configs_to_alter(current: Mapping[str, str | None], wanted: Mapping[str, str]) -> dict[str, str]:
    """Pure: the configs of ``wanted`` (:func:`topic_configs`) that an existing topic does not have
    (``current``: its configs as the broker describes them): what a driver sets when it finds the
    topic already there, so that a topic created by an earlier release (a week's retention, or other
    segment rolling) or by hand gets today's. Configs vidnexus does not set are left alone; those it
    sets are vidnexus's, and a value changed by hand is set back at the next creation.

        >>> configs_to_alter({"retention.ms": "604800000", "segment.ms": "60000", "min.insync.replicas": "2"},
        ...                  {"retention.ms": "10000", "segment.ms": "60000"})
        {'retention.ms': '10000'}
        >>> configs_to_alter({"retention.ms": "10000"}, {"retention.ms": "10000"})
        {}
    """
    return {k: v for k, v in wanted.items() if current.get(k) != v}


PERMANENT_TOPIC_ERRORS: dict[int, str] = {
    17: "INVALID_TOPIC_EXCEPTION", 29: "TOPIC_AUTHORIZATION_FAILED", 31: "CLUSTER_AUTHORIZATION_FAILED",
    37: "INVALID_PARTITIONS", 39: "INVALID_REPLICA_ASSIGNMENT", 40: "INVALID_CONFIG", 42: "INVALID_REQUEST",
    44: "POLICY_VIOLATION",
}
"""Kafka protocol error codes that a topic's creation or deletion answers however often it is tried
again (a bad name, partition count or config, a policy, missing rights): a Kafka driver raises them as
ConnectorErrors that are not retryable, so a role stops at once with the broker's reason instead of
riding them out as an outage until ``VNX_GIVE_UP_S``. Every other code is retryable, the unknown
ones too; among them INVALID_REPLICATION_FACTOR (38), which a broker answers while it restarts and
has no broker registered yet."""


def topic_error_retryable(code: int | None) -> bool:
    """Whether a topic operation that failed with Kafka protocol error ``code`` may succeed when
    tried again (None: no code, a timeout or a transport error).

        >>> topic_error_retryable(17), topic_error_retryable(38), topic_error_retryable(None)
        (False, True, True)
    """
    return code not in PERMANENT_TOPIC_ERRORS
