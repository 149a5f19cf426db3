"""In-process Bus with Kafka's semantics (partitions, keyed ordering, groups, committed offsets).

Used by embedded mode and by unit tests; thread-safe. Message timestamps and poll timeouts come from
the injected clock: on a :class:`~vidnexus.testing.FakeClock` an empty poll blocks until a message
arrives, the consumer is woken or closed, or the test moves the clock past its timeout.

Retention: a partition keeps its most recent ``retain_bytes`` and, beyond them, only what a live
reader still needs — a record goes once every group with a member subscribed to its topic has
committed past it and every group-less consumer of the topic has read it. A group with no member
for the moment (a role resubscribing) keeps holding from its committed offsets, and a partition
nobody has read yet keeps everything (its readers may still be starting), until the partition
reaches ``dormant_bytes``; past that they hold nothing (a role gone for good, a topic nobody reads). Memory is then bounded by
the readers' real backlog, not by how long the process has run (an embedded pipeline publishes
uncompressed frames). Compacted topics keep everything. A reader whose position falls before a
partition's first kept record resumes there, as a Kafka consumer with ``auto.offset.reset=earliest``.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field
from typing import Sequence

from vidnexus.clock import Clock, MonotonicClock
from vidnexus.connectors.bus import Message, partition_for
from vidnexus.errors import ConnectorError

__all__ = ["MemoryBus", "MemoryConsumer"]


_RECORD_OVERHEAD = 64  # bytes counted per record besides its key and value: many tiny records weigh too


class _Log:
    """One partition: records from offset ``base`` on (the ones before it were let go)."""

    __slots__ = ("records", "base", "bytes")

    def __init__(self) -> None:
        self.records: list[Message] = []
        self.base = 0
        self.bytes = 0

    @property
    def end(self) -> int:
        return self.base + len(self.records)


def _size(m: Message) -> int:
    return len(m.value) + (len(m.key) if m.key is not None else 0) + _RECORD_OVERHEAD


@dataclass
class _Group:
    members: list["MemoryConsumer"] = field(default_factory=list)
    committed: dict[tuple[str, int], int] = field(default_factory=dict)
    generation: int = 0


class MemoryBus:
    """A Bus held in memory. ``max_message_bytes`` mirrors the broker's message size limit;
    ``retain_bytes`` is what a partition keeps of records every live reader has passed; a group with
    no live member holds its partitions from its committed offsets, and a partition nobody has read
    yet keeps everything, while they hold at most ``dormant_bytes``."""

    in_process = True
    """Publishers and consumers share this process: ingest puts frames on it uncompressed."""

    def __init__(self, *, default_partitions: int = 4, max_message_bytes: int = 8 * 1024 * 1024,
                 clock: Clock | None = None, retain_bytes: int = 4 * 1024 * 1024,
                 dormant_bytes: int = 128 * 1024 * 1024):
        self.clock = clock or MonotonicClock()
        self._topics: dict[str, list[_Log]] = {}
        self._compacted: set[str] = set()
        self._readers: dict[str, set[MemoryConsumer]] = {}  # live consumers per topic
        self._groups: dict[str, _Group] = {}
        self._cond = threading.Condition()  # on an RLock: a publisher holding it may move a fake clock
        self._changes = 0  # bumped on every publish and rebalance: what a waiting poll waits for
        self._rr = itertools.count()
        self._ids = itertools.count()
        self.default_partitions = default_partitions
        self.max_message_bytes = max_message_bytes
        self.retain_bytes = retain_bytes
        self.dormant_bytes = dormant_bytes

    # -- topics -------------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int = 4, *, compacted: bool = False,
                     retention_s: float | None = None) -> None:
        # ``retention_s`` is not needed here: a partition keeps only what its readers may still read.
        if partitions < 1:
            raise ConnectorError(f"topic {name!r}: partitions must be >= 1, got {partitions}")
        with self._cond:
            self._topics.setdefault(name, [_Log() for _ in range(partitions)])
            if compacted:
                self._compacted.add(name)

    def delete_topic(self, name: str) -> None:
        """Forget ``name``, its records and the groups' offsets on it; consumers still subscribed
        read nothing more from it (a publish creates it again, as a broker that auto-creates does)."""
        with self._cond:
            if self._topics.pop(name, None) is None:
                return
            self._compacted.discard(name)
            for g in self._groups.values():
                g.committed = {tp: o for tp, o in g.committed.items() if tp[0] != name}
                if any(name in m.topics for m in g.members):
                    # Members take their assignments again, without the topic (and, as after any
                    # rebalance, from the committed offsets). Other groups are not disturbed: a
                    # rebalance would make them read their uncommitted records a second time.
                    g.generation += 1
            self._changes += 1
            self._cond.notify_all()

    def partitions(self, topic: str) -> int:
        with self._cond:
            return len(self._topic(topic))

    def _topic(self, topic: str) -> list[_Log]:
        try:
            return self._topics[topic]
        except KeyError:
            raise ConnectorError(f"unknown topic {topic!r}; create it first") from None

    # -- produce ------------------------------------------------------------------------------
    def publish(
        self,
        topic: str,
        key: bytes | None,
        value: bytes,
        headers: Sequence[tuple[str, bytes]] = (),
    ) -> None:
        if len(value) > self.max_message_bytes:
            raise ConnectorError(
                f"message of {len(value)} bytes for topic {topic!r} exceeds the "
                f"{self.max_message_bytes}-byte limit"
            )
        with self._cond:
            if topic not in self._topics:
                self.create_topic(topic, self.default_partitions)
            parts = self._topics[topic]
            p = partition_for(key, len(parts), next(self._rr))
            log = parts[p]
            m = Message(topic, p, log.end, key, value, int(self.clock.wall() * 1000), tuple(headers))
            log.records.append(m)
            log.bytes += _size(m)
            self._trim(topic, p)
            self._changes += 1
            self._cond.notify_all()

    def flush(self, timeout_s: float = 10.0) -> None:
        return None

    def delivered(self) -> bool:
        return True

    # -- consume ------------------------------------------------------------------------------
    def subscribe(
        self, topics: Sequence[str], group: str | None, *, from_beginning: bool = True
    ) -> "MemoryConsumer":
        with self._cond:
            for t in topics:
                if t not in self._topics:
                    self.create_topic(t, self.default_partitions)
            consumer = MemoryConsumer(self, list(topics), group, from_beginning, next(self._ids))
            for t in topics:
                self._readers.setdefault(t, set()).add(consumer)
            if group is not None:
                g = self._groups.setdefault(group, _Group())
                g.members.append(consumer)
                g.generation += 1
                self._changes += 1
                self._cond.notify_all()  # the other members' waiting polls pick up the rebalance
            consumer._refresh()  # "from now on" (from_beginning=False) means from the subscription
            return consumer

    def close(self) -> None:
        return None

    def group_lag(self, group: str, topic: str, partitions: Sequence[int]) -> dict[int, int]:
        with self._cond:
            parts = self._topic(topic)
            g = self._groups.get(group)
            return {p: parts[p].end - max(parts[p].base, (g.committed.get((topic, p)) if g else None) or 0)
                    for p in partitions}

    def end_offsets(self, topic: str) -> list[int]:
        """Next offset of every partition (for tests and lag metrics)."""
        with self._cond:
            return [log.end for log in self._topic(topic)]

    def retained(self, topic: str) -> tuple[int, int]:
        """(records, bytes) the topic holds now, over all its partitions."""
        with self._cond:
            logs = self._topic(topic)
            return sum(len(log.records) for log in logs), sum(log.bytes for log in logs)

    # internal, called with the condition held
    def _floor(self, topic: str, partition: int, log: _Log) -> int:
        """First offset some live reader of the topic may still read."""
        floor = log.end
        groups: set[str] = set()
        read = False  # has anyone read or committed here?
        for c in self._readers.get(topic, ()):
            read = True
            if c.group is None:
                pos = c._positions.get((topic, partition))
                if pos is not None:
                    floor = min(floor, pos)
            else:
                groups.add(c.group)
        held = log.bytes <= self.dormant_bytes
        for name, g in self._groups.items():
            committed = g.committed.get((topic, partition))
            read = read or committed is not None
            if name in groups:
                floor = min(floor, log.base if committed is None else committed)
            elif committed is not None and held:
                floor = min(floor, committed)  # a group between two members (a resubscription) loses nothing
        if not read and held:
            floor = log.base  # published before its readers subscribed (a role still starting): kept for them
        return floor

    def _trim(self, topic: str, partition: int) -> None:
        """Once a partition holds an eighth over ``retain_bytes``, let go of its oldest records every live
        reader has passed, down to ``retain_bytes``."""
        if topic in self._compacted:
            return
        log = self._topics[topic][partition]
        if log.bytes <= self.retain_bytes + (self.retain_bytes >> 3):
            return
        floor = self._floor(topic, partition, log)
        records, left, n = log.records, log.bytes, 0
        while n < len(records) and records[n].offset < floor and left > self.retain_bytes:
            left -= _size(records[n])
            n += 1
        if n:
            del records[:n]
            log.base += n
            log.bytes = left

    def _assignment_for(self, consumer: "MemoryConsumer") -> list[tuple[str, int]]:
        pairs = sorted((t, p) for t in consumer.topics if t in self._topics for p in range(len(self._topics[t])))
        if consumer.group is None:
            return pairs
        # As Kafka's range assignor: each topic's partitions are spread over the members subscribed
        # to that topic (members of one group may subscribe to different topics).
        members = self._groups[consumer.group].members
        out = []
        for t, p in pairs:
            subs = [m for m in members if t in m.topics]
            if p % len(subs) == subs.index(consumer):
                out.append((t, p))
        return out

    def _leave(self, consumer: "MemoryConsumer") -> None:
        for t in consumer.topics:
            self._readers.get(t, set()).discard(consumer)
        if consumer.group is not None:
            g = self._groups[consumer.group]
            if consumer in g.members:
                g.members.remove(consumer)
                g.generation += 1
                self._changes += 1
                self._cond.notify_all()


class MemoryConsumer:
    """Consumer of a :class:`MemoryBus`; see :class:`vidnexus.connectors.bus.Consumer`."""

    def __init__(
        self, bus: MemoryBus, topics: list[str], group: str | None, from_beginning: bool, ident: int
    ) -> None:
        self._bus = bus
        self.topics = topics
        self.group = group
        self._from_beginning = from_beginning
        self._id = ident
        self._generation = -1
        self._positions: dict[tuple[str, int], int] = {}
        self._closed = False
        self._woken = False

    def _refresh(self) -> None:
        g = self._bus._groups.get(self.group) if self.group is not None else None
        gen = g.generation if g is not None else 0
        if gen == self._generation:
            return
        self._generation = gen
        positions = {}
        for t, p in self._bus._assignment_for(self):
            committed = g.committed.get((t, p)) if g is not None else None
            log = self._bus._topics[t][p]
            if committed is None:
                committed = log.base if self._from_beginning else log.end
            positions[(t, p)] = max(committed, log.base)
        self._positions = positions

    def poll(self, timeout_s: float = 1.0, max_records: int = 500) -> list[Message]:
        if self._closed:
            raise ConnectorError("poll on a closed consumer")
        clock = self._bus.clock
        deadline = clock.now() + timeout_s
        with self._bus._cond:
            while True:
                self._refresh()
                out: list[Message] = []
                for (t, p), pos in sorted(self._positions.items()):
                    if t not in self._bus._topics:  # deleted since the assignment
                        del self._positions[(t, p)]
                        continue
                    log = self._bus._topics[t][p]
                    pos = max(pos, log.base)  # records let go while this reader was behind
                    i = pos - log.base
                    take = log.records[i : i + max_records - len(out)]
                    out.extend(take)
                    self._positions[(t, p)] = pos + len(take)
                    if len(out) >= max_records:
                        break
                if out:
                    if self.group is None:
                        for t, p in {(m.topic, m.partition) for m in out}:
                            self._bus._trim(t, p)
                    return out
                left = deadline - clock.now()
                if left <= 0 or self._closed or self._woken:
                    self._woken = False
                    return []
                seen = self._bus._changes
                clock.wait_for(self._bus._cond, lambda: self._bus._changes != seen or self._woken or self._closed,
                               left)

    def commit(self, offsets: dict[tuple[str, int], int] | None = None, *, wait: bool = True) -> None:
        if self.group is None:
            return
        with self._bus._cond:
            g = self._bus._groups[self.group]
            if g.generation == self._generation:
                done = self._positions if offsets is None else {
                    tp: o for tp, o in offsets.items() if tp in self._positions}
                g.committed.update(done)
                for t, p in done:
                    if t in self._bus._topics:
                        self._bus._trim(t, p)

    def assignment(self) -> set[tuple[str, int]]:
        with self._bus._cond:
            self._refresh()
            return {tp for tp in self._positions if tp[0] in self._bus._topics}

    def wakeup(self) -> None:
        """Make a poll in progress (or else the next one) return at once, possibly empty."""
        with self._bus._cond:
            self._woken = True
            self._bus._cond.notify_all()

    def close(self) -> None:
        """Leave the group; a poll in progress in another thread returns empty."""
        with self._bus._cond:
            if not self._closed:
                self._closed = True
                self._bus._leave(self)
                self._bus._cond.notify_all()
