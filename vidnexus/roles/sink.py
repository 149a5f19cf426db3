"""The sink role (``vidnexus sink``): rows from the rows topic into the store.

Consumes the rows topic in a consumer group, buffers rows per table, and inserts them in batches by
size or age, whichever comes first; offsets are committed only after the insert succeeded, so a
crash replays rows instead of losing them, and the tables (``ReplacingMergeTree`` on the row's
identity) count replayed rows once under ``FINAL``. Tables are created, or migrated by adding
columns, before the first insert into them. A message the store rejects for good (or whose table
cannot take its rows) goes to the rows dead-letter topic with the reason, and nothing else is lost.

A store or broker outage is ridden out (:class:`~vidnexus.connectors.outage.Outage`): the buffer is
kept, no more is read once it is full (back-pressure on the rows topic), and the insert is
retried with backoff until the store is back; the role reports itself degraded meanwhile.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from vidnexus.clock import Clock, MonotonicClock
from vidnexus.config import SINK_MAX_ROWS, Settings
from vidnexus.connectors.bus import Bus, Message
from vidnexus.connectors.dead_letter import DeadLetters
from vidnexus.connectors.outage import Health, Outage
from vidnexus.connectors.sink import insert_retrying
from vidnexus.connectors.store import Store, ensure_table
from vidnexus.connectors.watchdog import GroupWatchdog
from vidnexus.contracts.rows import decode_rows
from vidnexus.contracts.schema import TableSchema
from vidnexus.contracts.topics import Topics
from vidnexus.errors import CodecError, ConfigError, ConnectorError
from vidnexus.operators.engine import FRAMES_TABLE
from vidnexus.roles.summary import PeriodicSummary

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
                 group: str | None = None, max_rows: int = SINK_MAX_ROWS, max_delay_s: float = 1.0, retries: int = 3,
                 partitions: int = 8) -> None:
        self.bus, self.store = bus, store
        self.max_rows, self.max_delay_s, self.retries = max_rows, max_delay_s, retries
        self.clock = clock or MonotonicClock()
        topics = Topics(settings.topic_prefix)
        self.topic = topics.rows
        bus.create_topic(self.topic, partitions)
        self.dead_letters = DeadLetters(bus, topics, "sink").expect("rows")
        self.group = group or topics.group("sink")
        self.consumer = bus.subscribe([self.topic], group=self.group)
        self._closed = False  # the consumer was closed to rejoin and its successor is not subscribed yet
        self.watchdog = GroupWatchdog(bus, self.group, lambda: [self.topic], self.clock, stall_s=settings.watchdog_s,
                                      role="sink")
        self.stats = SinkStats()
        self.summary = PeriodicSummary("sink", "rows", ok_keys=("inserted",), start=self.clock.now())
        self.on_summary: Callable[[str, bool], None] | None = None
        """Called with each periodic summary line and whether it is a warning (the CLI prints it)."""
        self._known: dict[str, TableSchema] = {}
        self._ensured: set[TableSchema] = set()  # schemas whose table is known to take their rows
        self._buf: list[tuple[Message, dict[str, list[tuple[Any, ...]]], dict[str, TableSchema]]] = []
        self._buffered_rows = 0
        self._oldest: float | None = None
        self.outage = Outage("sink", self.clock, give_up_s=settings.give_up_s)

    def step(self, timeout_s: float = 0.2) -> int:
        """Poll once (unless the buffer is full); flush when it is full or old enough. Returns the
        rows buffered.

        Raises:
            ConnectorError: retryable when the store or the broker is down (the buffer is kept:
                :meth:`run` retries the flush with backoff).
        """
        read = self._read(timeout_s) if self._buffered_rows < self.max_rows else -1
        due = self._oldest is not None and self.clock.now() - self._oldest >= self.max_delay_s
        if self._buf and (self._buffered_rows >= self.max_rows or due):
            self.flush()
        if read == 0 and not self._buf and self.watchdog.check(self.consumer):
            self._closed = True  # a subscribe that fails now is tried again by the next read
            self.consumer.close()
            self._subscribe()
        if self.on_summary is not None:
            st = self.stats
            out = self.summary.tick(self.clock.now(), {"inserted": st.rows, "dead-lettered": st.dead},
                                    {"inserts": st.inserts, "retries": st.retries})
            if out is not None:
                self.on_summary(*out)
        return self._buffered_rows

    def _read(self, timeout_s: float) -> int:
        """Buffer what one poll returns; the messages read."""
        if self._closed:
            self._subscribe()
        msgs = self.consumer.poll(timeout_s=timeout_s)
        for m in msgs:
            self.stats.messages += 1
            try:
                rows, schemas = decode_rows(m.value)
            except CodecError as e:
                self._dead(m, str(e))
                continue
            if self._oldest is None:
                self._oldest = self.clock.now()
            self._buf.append((m, rows, schemas))
            self._buffered_rows += sum(len(r) for r in rows.values())
        return len(msgs)

    def _ensure(self, schema: TableSchema) -> None:
        if schema not in self._ensured:
            try:
                added = ensure_table(self.store, schema)
            except ConfigError as e:  # the table exists with another type for a column
                raise ConnectorError(str(e)) from None
            if added:
                logger.info("table %s: added columns %s", schema.name, added)
            self._known[schema.name] = schema
            self._ensured.add(schema)
            self.stats.tables.add(schema.name)

    def prepare(self) -> bool:
        """Create ``vnx_frames`` now, so that it can be queried before the first row arrives (the
        apps' tables come with their first rows). A store that is down is not an error here: the
        table is then created at the first flush. True when the table is there."""
        try:
            self._ensure(FRAMES_TABLE)
        except ConnectorError as e:
            if not e.retryable:
                raise
            logger.warning("store not reachable yet (%s); vnx_frames will be created with the first rows", e)
            return False
        return True

    def _ensure_buffered(self) -> None:
        """Create or migrate the tables the buffer names; a message whose table cannot take its
        rows goes to the dead-letter topic. A store that is down raises (retryable)."""
        refused: dict[str, str] = {}
        seen: set[int] = set()  # messages share their schema objects (decode_rows caches them)
        for _, _, schemas in self._buf:
            for schema in schemas.values():
                if id(schema) in seen:
                    continue
                seen.add(id(schema))
                if schema.name in refused or schema in self._ensured:
                    continue
                try:
                    self._ensure(schema)
                except ConnectorError as e:
                    if e.retryable:
                        raise
                    refused[schema.name] = f"table {schema.name}: {e}"
        if not refused:
            return
        kept = []
        for entry in self._buf:
            bad = [refused[t] for t in entry[2] if t in refused]
            if bad:
                self._dead(entry[0], bad[0])
                self._buffered_rows -= sum(len(r) for r in entry[1].values())
            else:
                kept.append(entry)
        self._buf = kept

    def flush(self) -> None:
        """Insert everything buffered (table by table), then commit the consumed offsets.

        Raises:
            ConnectorError: retryable when the store or the broker is down; what was buffered
                stays buffered (a table that was inserted is inserted again on the retry, and
                counted once under ``FINAL``).
        """
        if not self._buf:
            return
        self._ensure_buffered()
        # Rows go in with the columns of the schema their message carries: during a rolling
        # upgrade, workers of two versions write one table with different columns.
        by_table: dict[tuple[str, tuple[str, ...]], list[tuple[Any, ...]]] = {}
        names_of: dict[int, tuple[str, ...]] = {}  # by schema object: shared across messages
        for _, rows, schemas in self._buf:
            for t, rs in rows.items():
                s = schemas.get(t) or self._known[t]
                cols = names_of.get(id(s))
                if cols is None:
                    cols = names_of[id(s)] = tuple(s.column_names)
                by_table.setdefault((t, cols), []).extend(rs)
        # vnx_frames last: a frame whose row is there has its app rows in too (what `ingest --wait`
        # and `up --once` wait for).
        for (table, columns), rs in sorted(by_table.items(), key=lambda kv: kv[0][0] == FRAMES_TABLE.name):
            try:
                self._insert(table, columns, rs)
            except ConnectorError as e:
                if e.retryable:
                    raise
                self._salvage(table, columns, str(e))
        self.stats.rows += self._buffered_rows
        self._buf, self._buffered_rows, self._oldest = [], 0, None
        self.consumer.commit()

    def _subscribe(self) -> None:
        self.consumer = self.bus.subscribe([self.topic], group=self.group)
        self._closed = False

    def _columns(self, table: str, schemas: dict[str, TableSchema]) -> tuple[str, ...]:
        return tuple((schemas.get(table) or self._known[table]).column_names)

    def _insert(self, table: str, columns: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
        def retried() -> None:
            self.stats.retries += 1

        insert_retrying(self.store, table, columns, rows, retries=self.retries, clock=self.clock, on_retry=retried)
        self.stats.inserts += 1

    def _salvage(self, table: str, columns: tuple[str, ...], reason: str) -> None:
        """The store rejected a batch: insert message by message; dead-letter the ones it rejects."""
        logger.error("insert into %s rejected (%s); retrying message by message", table, reason)
        for m, rows, schemas in self._buf:
            if table not in rows or self._columns(table, schemas) != columns:
                continue
            try:
                self._insert(table, columns, rows[table])
            except ConnectorError as e:
                if e.retryable:
                    raise
                self._dead(m, f"table {table}: {e}")

    def _dead(self, m: Message, reason: str) -> None:
        self.stats.dead += 1
        self.dead_letters.send(m, reason)

    def health(self) -> Health:
        """The role's health, with its dead letters by source."""
        return replace(self.outage.health(), dead_letters=self.dead_letters.snapshot())

    def run(self, stop: threading.Event) -> SinkStats:
        """:meth:`step` until ``stop``, riding out outages; then read what is already there (for
        at most 5 s) and insert it. Stopped while the store is down, it exits without committing
        what it could not insert (the rows are read again by the next sink)."""
        try:
            self.outage.ride_out(self.step, stop)
            if not self.outage.degraded:
                until = self.clock.now() + 5.0
                while self._read(0.1) and self.clock.now() < until:
                    if self._buffered_rows >= self.max_rows:
                        self.flush()
                self.flush()
        finally:
            if not self._closed:
                self.consumer.close()
        return self.stats
