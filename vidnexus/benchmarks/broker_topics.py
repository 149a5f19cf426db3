"""A benchmark's own topics on the Kafka broker: count them, and delete them when the run ends.

A run names its topics under a fresh prefix (``<prefix>.…``); a broker that a user benchmarks
against again and again would otherwise keep every run's topics (bench peers left 3,288 on the test
broker before 2026-11-29). Best effort: a broker that does not answer keeps them.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from vidnexus.errors import VidnexusError


class BrokerTopics:
    """The broker's topics, through an admin client of its own (the run's buses may be closed)."""

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka.admin import AdminClient

        self.bootstrap = bootstrap
        self._admin = AdminClient({"bootstrap.servers": bootstrap})

    def names(self) -> set[str]:
        return set(self._admin.list_topics(timeout=10).topics)

    def count(self, prefix: str) -> tuple[int, int]:
        """(topics on the broker, topics under ``prefix``)."""
        names = self.names()
        return len(names), sum(1 for n in names if n.startswith(prefix + "."))

    def delete_prefix(self, prefix: str, wait_s: float = 10.0) -> int:
        """Delete every topic under ``prefix``; return how many the broker still lists after
        waiting up to ``wait_s`` for its metadata to catch up (0 when all went)."""
        delete_topics(self.bootstrap, [n for n in self.names() if n.startswith(prefix + ".")])
        deadline = time.monotonic() + wait_s
        while (left := self.count(prefix)[1]) and time.monotonic() < deadline:
            time.sleep(0.2)
        return left


def delete_topics(bootstrap: str, names: Iterable[str]) -> None:
    """Delete ``names`` (best effort: a broker that does not answer keeps them)."""
    from vidnexus.connectors.confluent_bus import ConfluentBus

    names = list(names)
    if not names:
        return
    bus = ConfluentBus(bootstrap, timeout_s=10)
    try:
        for name in names:
            try:
                bus.delete_topic(name)
            except VidnexusError:
                pass
    finally:
        bus.close()
