"""In-process Bus with Kafka's semantics (partitions, keyed ordering, groups, committed offsets).

Used by embedded mode and by unit tests; thread-safe. Message timestamps and poll timeouts come from
the injected clock: on a :class:`~vidnexus.testing.FakeClock` an empty poll blocks until a message
arrives, the consumer is woken or closed, or the test moves the clock past its timeout.
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


@dataclass
class _Group:
    members: list["MemoryConsumer"] = field(default_factory=list)
    committed: dict[tuple[str, int], int] = field(default_factory=dict)
    generation: int = 0


class MemoryBus:
    """A Bus held in memory. ``max_message_bytes`` mirrors the broker's message size limit."""

    in_process = True
    """Publishers and consumers share this process: ingest puts frames on it uncompressed."""

    def __init__(self, *, default_partitions: int = 4, max_message_bytes: int = 8 * 1024 * 1024,
                 clock: Clock | None = None):
        self.clock = clock or MonotonicClock()
        self._topics: dict[str, list[list[Message]]] = {}
        self._groups: dict[str, _Group] = {}
        self._cond = threading.Condition()  # on an RLock: a publisher holding it may move a fake clock
        self._changes = 0  # bumped on every publish and rebalance: what a waiting poll waits for
        self._rr = itertools.count()
        self._ids = itertools.count()
        self.default_partitions = default_partitions
        self.max_message_bytes = max_message_bytes

    # -- topics -------------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int = 4, *, compacted: bool = False) -> None:
        if partitions < 1:
            raise ConnectorError(f"topic {name!r}: partitions must be >= 1, got {partitions}")
        with self._cond:
            self._topics.setdefault(name, [[] for _ in range(partitions)])

    def delete_topic(self, name: str) -> None:
        """Forget ``name``, its records and the groups' offsets on it; consumers still subscribed
        read nothing more from it (a publish creates it again, as a broker that auto-creates does)."""
        with self._cond:
            if self._topics.pop(name, None) is None:
                return
            for g in self._groups.values():
                g.committed = {tp: o for tp, o in g.committed.items() if tp[0] != name}
                g.generation += 1  # members take their assignments again, without the topic
            self._changes += 1
            self._cond.notify_all()

    def partitions(self, topic: str) -> int:
        with self._cond:
            return len(self._topic(topic))

    def _topic(self, topic: str) -> list[list[Message]]:
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
            parts[p].append(
                Message(topic, p, len(parts[p]), key, value, int(self.clock.wall() * 1000), tuple(headers))
            )
            self._changes += 1
            self._cond.notify_all()

    def flush(self, timeout_s: float = 10.0) -> None:
        return None

    # -- consume ------------------------------------------------------------------------------
    def subscribe(
        self, topics: Sequence[str], group: str | None, *, from_beginning: bool = True
    ) -> "MemoryConsumer":
        with self._cond:
            for t in topics:
                if t not in self._topics:
                    self.create_topic(t, self.default_partitions)
            consumer = MemoryConsumer(self, list(topics), group, from_beginning, next(self._ids))
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
            return {p: len(parts[p]) - ((g.committed.get((topic, p)) if g else None) or 0) for p in partitions}

    def end_offsets(self, topic: str) -> list[int]:
        """Next offset of every partition (for tests and lag metrics)."""
        with self._cond:
            return [len(p) for p in self._topic(topic)]

    # internal, called with the condition held
    def _assignment_for(self, consumer: "MemoryConsumer") -> list[tuple[str, int]]:
        pairs = sorted((t, p) for t in consumer.topics if t in self._topics for p in range(len(self._topics[t])))
        if consumer.group is None:
            return pairs
        members = self._groups[consumer.group].members
        idx, n = members.index(consumer), len(members)
        return [pair for i, pair in enumerate(pairs) if i % n == idx]

    def _leave(self, consumer: "MemoryConsumer") -> None:
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
            if committed is None:
                committed = 0 if self._from_beginning else len(self._bus._topics[t][p])
            positions[(t, p)] = committed
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
                    take = log[pos : pos + max_records - len(out)]
                    out.extend(take)
                    self._positions[(t, p)] = pos + len(take)
                    if len(out) >= max_records:
                        break
                if out:
                    return out
                left = deadline - clock.now()
                if left <= 0 or self._closed or self._woken:
                    self._woken = False
                    return []
                seen = self._bus._changes
                clock.wait_for(self._bus._cond, lambda: self._bus._changes != seen or self._woken or self._closed,
                               left)

    def commit(self, offsets: dict[tuple[str, int], int] | None = None) -> None:
        if self.group is None:
            return
        with self._bus._cond:
            g = self._bus._groups[self.group]
            if g.generation == self._generation:
                if offsets is None:
                    g.committed.update(self._positions)
                else:
                    g.committed.update({tp: o for tp, o in offsets.items() if tp in self._positions})

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
