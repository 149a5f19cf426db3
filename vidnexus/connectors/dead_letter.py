"""Records a role cannot read: one naming rule, one set of headers, one count per source.

A record read from a topic of kind ``K`` (frames, requests, replies, rows, control, stats, apps;
see :meth:`~vidnexus.contracts.topics.Topics.source_of`) that does not decode is published,
unchanged, to ``<prefix>.dead.K`` with the headers

- ``reason``: why it could not be read (the codec's message),
- ``topic``, ``partition``, ``offset``: where it was read,
- ``role``: who read it;

the role counts it (``counts``, reported by its health endpoint as ``dead_letters``) and goes on
with the next record.

Example:
    >>> from vidnexus.connectors.memory_bus import MemoryBus
    >>> bus, topics = MemoryBus(), Topics("doc")
    >>> dl = DeadLetters(bus, topics, "sink")
    >>> dl.send(Message("doc.rows", 0, 7, b"cam1", b"junk"), "not msgpack")
    'doc.dead.rows'
    >>> [m] = bus.subscribe([topics.dead_letter("rows")], group=None).poll(timeout_s=0.1)
    >>> m.value, dict(m.headers)["reason"], dict(m.headers)["offset"], dl.counts["rows"]
    (b'junk', b'not msgpack', b'7', 1)
"""

from __future__ import annotations

import logging
import threading
from collections import Counter

from vidnexus.connectors.bus import Bus, Message
from vidnexus.contracts.topics import DeadLetterSource, Topics

__all__ = ["DeadLetters", "dead_letter_headers"]

logger = logging.getLogger(__name__)

LOG_EVERY = 1000
"""After the first few per source, one log line per this many dead letters."""
MAX_REASON_BYTES = 1000


def dead_letter_headers(m: Message, reason: str, role: str) -> list[tuple[str, bytes]]:
    """The headers of ``m``'s dead letter (see the module docstring)."""
    return [("reason", reason.encode("utf-8", "replace")[:MAX_REASON_BYTES]), ("topic", m.topic.encode()),
            ("partition", str(m.partition).encode()), ("offset", str(m.offset).encode()),
            ("role", role.encode("utf-8", "replace"))]


class DeadLetters:
    """One role's dead letters (thread-safe)."""

    def __init__(self, bus: Bus, topics: Topics, role: str) -> None:
        self.bus, self.topics, self.role = bus, topics, role
        self.counts: Counter[str] = Counter()
        self._created: set[str] = set()
        self._lock = threading.Lock()

    def expect(self, *sources: DeadLetterSource) -> "DeadLetters":
        """Create the dead-letter topics of ``sources`` now (a role calls this when it starts, for
        the kinds of topic it reads), so that their readers can subscribe before the first one."""
        for s in sources:
            self._create(self.topics.dead_letter(s))
        return self

    def _create(self, topic: str) -> None:
        if topic not in self._created:
            self.bus.create_topic(topic, 1)
            self._created.add(topic)

    def topic_for(self, m: Message) -> str:
        """Where ``m`` goes if it cannot be read (created on first use if not expected)."""
        topic = self.topics.dead_letter(self.topics.source_of(m.topic))
        self._create(topic)
        return topic

    def count(self, m: Message, reason: str) -> None:
        """Count (and log) a dead letter of ``m`` that the caller publishes itself."""
        source = self.topics.source_of(m.topic)
        with self._lock:
            self.counts[source] += 1
            n = self.counts[source]
        if n <= 3 or n % LOG_EVERY == 0:
            logger.warning("%s: a record of %s[%d]@%d to %s (%d so far): %s", self.role, m.topic, m.partition,
                           m.offset, self.topics.dead_letter(source), n, reason)

    def send(self, m: Message, reason: str) -> str:
        """Publish ``m`` unchanged to its dead-letter topic with the reason; returns that topic.

        Raises:
            ConnectorError: the bus did not take it (the caller's outage handling decides).
        """
        topic = self.topic_for(m)
        self.bus.publish(topic, m.key, m.value, headers=dead_letter_headers(m, reason, self.role))
        self.count(m, reason)
        return topic

    def snapshot(self) -> dict[str, int]:
        """Dead letters so far, by source."""
        with self._lock:
            return dict(self.counts)
