"""The sink role (``vidnexus sink``): rows from the rows topic into the store.

Consumes the rows topic in a consumer group, buffers rows per table, and inserts them in batches by
size or age, whichever comes first; offsets are committed only after the insert succeeded, so a
crash replays rows instead of losing them, and the tables (``ReplacingMergeTree`` on the row's
identity) count replayed rows once under ``FINAL``. Tables are created, or migrated by adding
columns, the first time a message names them. A retryable store error is retried with exponential
backoff; a message the store rejects for good goes to the rows dead-letter topic with the reason,
and nothing else is lost.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from vidnexus.clock import Clock, MonotonicClock
from vidnexus.config import Settings
from vidnexus.connectors.bus import Bus, Message
from vidnexus.connectors.sink import insert_retrying
from vidnexus.connectors.store import Store, ensure_table
from vidnexus.contracts.rows import decode_rows
from vidnexus.contracts.schema import TableSchema
from vidnexus.contracts.topics import Topics
from vidnexus.errors import CodecError, ConnectorError

__all__ = ["SinkRole", "SinkStats"]

logger = logging.getLogger(__name__)


@dataclass
class SinkStats:
    messages: int = 0
    rows: int = 0
    inserts: int = 0
    dead: int = 0
    retries: int = 0
    tables: set[str] = field(default_factory=set)


class SinkRole:
    """Rows topic → store. ``run(stop)`` loops; ``step()`` does one poll (and a flush when due)."""

    def __init__(self, settings: Settings, *, bus: Bus, store: Store, clock: Clock | None = None,
                 group: str | None = None, max_rows: int = 5000, max_delay_s: float = 1.0, retries: int = 6,
                 partitions: int = 8) -> None:
        self.bus, self.store = bus, store
        self.max_rows, self.max_delay_s, self.retries = max_rows, max_delay_s, retries
        self.clock = clock or MonotonicClock()
        topics = Topics(settings.topic_prefix)
        self.topic = topics.rows
        self.dead_topic = topics.dead_letter("rows")
        bus.create_topic(self.topic, partitions)
        bus.create_topic(self.dead_topic, 1)
        self.consumer = bus.subscribe([self.topic], group=group or topics.group("sink"))
        self.stats = SinkStats()
        self._known: dict[str, TableSchema] = {}
        self._buf: list[tuple[Message, dict[str, list[tuple[Any, ...]]]]] = []
        self._buffered_rows = 0
        self._oldest: float | None = None

    def step(self, timeout_s: float = 0.2) -> int:
        """Poll once; flush when the buffer is full or old enough. Returns the rows buffered."""
        self._read(timeout_s)
        due = self._oldest is not None and self.clock.now() - self._oldest >= self.max_delay_s
        if self._buf and (self._buffered_rows >= self.max_rows or due):
            self.flush()
        return self._buffered_rows

    def _read(self, timeout_s: float) -> int:
        """Buffer what one poll returns; the messages read."""
        msgs = self.consumer.poll(timeout_s=timeout_s)
        for m in msgs:
            self.stats.messages += 1
            try:
                rows, schemas = decode_rows(m.value)
                for name, schema in schemas.items():
                    self._ensure(schema)
            except (CodecError, ConnectorError) as e:
                self._dead(m, str(e))
                continue
            if self._oldest is None:
                self._oldest = self.clock.now()
            self._buf.append((m, rows))
            self._buffered_rows += sum(len(r) for r in rows.values())
        return len(msgs)

    def _ensure(self, schema: TableSchema) -> None:
        if self._known.get(schema.name) != schema:
            added = ensure_table(self.store, schema)
            if added:
                logger.info("table %s: added columns %s", schema.name, added)
            self._known[schema.name] = schema
            self.stats.tables.add(schema.name)

    def flush(self) -> None:
        """Insert everything buffered (table by table), then commit the consumed offsets."""
        if not self._buf:
            return
        by_table: dict[str, list[tuple[Any, ...]]] = {}
        for _, rows in self._buf:
            for t, rs in rows.items():
                by_table.setdefault(t, []).extend(rs)
        for table, rs in by_table.items():
            try:
                self._insert(table, rs)
            except ConnectorError as e:
                if e.retryable:
                    raise  # the store is down for good: exit without committing; rows replay later
                self._salvage(table, str(e))
        self.stats.rows += self._buffered_rows
        self._buf, self._buffered_rows, self._oldest = [], 0, None
        self.consumer.commit()

    def _insert(self, table: str, rows: list[tuple[Any, ...]]) -> None:
        def retried() -> None:
            self.stats.retries += 1

        insert_retrying(self.store, table, self._known[table].column_names, rows, retries=self.retries,
                        clock=self.clock, on_retry=retried)
        self.stats.inserts += 1

    def _salvage(self, table: str, reason: str) -> None:
        """The store rejected a batch: insert message by message; dead-letter the ones it rejects."""
        logger.error("insert into %s rejected (%s); retrying message by message", table, reason)
        for m, rows in self._buf:
            if table not in rows:
                continue
            try:
                self._insert(table, rows[table])
            except ConnectorError as e:
                self._dead(m, f"table {table}: {e}")

    def _dead(self, m: Message, reason: str) -> None:
        self.stats.dead += 1
        logger.error("rows message to %s: %s", self.dead_topic, reason)
        self.bus.publish(self.dead_topic, m.key, m.value, headers=[("reason", reason.encode()[:1000])])

    def run(self, stop: threading.Event) -> SinkStats:
        """:meth:`step` until ``stop``; then read what is already there (for at most 5 s) and insert it."""
        try:
            while not stop.is_set():
                self.step()
            until = self.clock.now() + 5.0
            while self._read(0.1) and self.clock.now() < until:
                if self._buffered_rows >= self.max_rows:
                    self.flush()
            self.flush()
        finally:
            self.consumer.close()
        return self.stats
