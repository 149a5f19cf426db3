"""Batched, retrying table sink: rows are inserted by size or by age, whichever comes first.

Idempotence on replay comes from the table: sink tables use ``ReplacingMergeTree`` keyed by the
row's identity (stream, frame, …), and queries read them with ``FINAL``.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Sequence

from vidnexus.clock import Clock, MonotonicClock
from vidnexus.connectors.store import Store
from vidnexus.errors import ConnectorError

__all__ = ["TableSink", "insert_retrying"]

logger = logging.getLogger(__name__)


def insert_retrying(store: Store, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], *,
                    retries: int, clock: Clock, on_retry: Callable[[], None] | None = None) -> int:
    """Insert ``rows``, retrying a retryable store error with exponential backoff from 0.2 s (at
    most 10 s, slept on ``clock``); returns the rows inserted. The last error, or a non-retryable one,
    is raised."""
    delay = 0.2
    for attempt in range(1, retries + 1):
        try:
            return store.insert(table, columns, rows)
        except ConnectorError as e:
            if not e.retryable or attempt == retries:
                raise
            if on_retry is not None:
                on_retry()
            logger.warning("insert into %s: %s; retry %d in %.1fs", table, e, attempt, delay)
            clock.sleep(delay)
            delay = min(delay * 2, 10.0)
    return 0


class TableSink:
    """Buffer rows for ``table`` and insert them in batches from a background thread.

    Args:
        max_rows: flush when this many rows are buffered.
        max_delay_s: flush rows older than this (on ``clock``).
        retries: attempts for a retryable store error (exponential backoff from 0.2 s).
        clock: time source; on a FakeClock the background thread waits until rows arrive or the test
            moves the clock past the oldest row's ``max_delay_s``.
    """

    def __init__(
        self, store: Store, table: str, columns: Sequence[str], *, max_rows: int = 1000,
        max_delay_s: float = 0.5, retries: int = 5, clock: Clock | None = None,
    ) -> None:
        self.store, self.table, self.columns = store, table, tuple(columns)
        self.max_rows, self.max_delay_s, self.retries = max_rows, max_delay_s, retries
        self.clock = clock or MonotonicClock()
        self._buf: list[Sequence[Any]] = []
        self._oldest: float | None = None
        self._cond = threading.Condition()
        self._stop = False
        self.written = 0
        self._thread = threading.Thread(target=self._loop, name=f"vnx-sink-{table}", daemon=True)
        self._thread.start()

    def write(self, row: Sequence[Any]) -> None:
        if len(row) != len(self.columns):
            raise ConnectorError(
                f"sink {self.table}: row has {len(row)} values for columns {self.columns}"
            )
        with self._cond:
            first = not self._buf
            if first:
                self._oldest = self.clock.now()
            self._buf.append(row)
            if first or len(self._buf) >= self.max_rows:
                self._cond.notify()  # the first row arms the age timer

    def _take(self) -> list[Sequence[Any]]:
        rows, self._buf, self._oldest = self._buf, [], None
        return rows

    def _ready(self) -> bool:
        due = self._oldest is not None and self.clock.now() - self._oldest >= self.max_delay_s
        return self._stop or len(self._buf) >= self.max_rows or due

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._ready():
                    armed = self._oldest
                    left = None if armed is None else armed + self.max_delay_s - self.clock.now()
                    self.clock.wait_for(self._cond, lambda: self._ready() or self._oldest != armed, left)
                rows = self._take()
                stopping = self._stop
            if rows:
                self._insert(rows)
            if stopping:
                return

    def _insert(self, rows: list[Sequence[Any]]) -> None:
        try:
            self.written += insert_retrying(self.store, self.table, self.columns, rows, retries=self.retries,
                                            clock=self.clock)
        except ConnectorError as e:
            logger.error("sink %s lost %d rows: %s", self.table, len(rows), e)
            raise

    def flush(self) -> None:
        """Insert everything buffered now (from the caller's thread)."""
        with self._cond:
            rows = self._take()
        if rows:
            self._insert(rows)

    def close(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify()
        self._thread.join(timeout=60)
        self.flush()
