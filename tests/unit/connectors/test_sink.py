"""The batched table sink and the retrying insert, on a FakeClock: backoff and age flushes happen when
the clock says so, and no test sleeps."""

import queue

import pytest

from vidnexus.connectors.sink import TableSink, insert_retrying
from vidnexus.errors import ConnectorError
from vidnexus.testing import FakeClock, MemoryStore


class FlakyStore(MemoryStore):
    """Fails the first ``fail`` inserts; reports every successful insert on ``inserted``."""

    def __init__(self, fail=0, retryable=True):
        super().__init__()
        self.fail, self.retryable, self.attempts = fail, retryable, 0
        self.inserted = queue.Queue()

    def insert(self, table, columns, rows):
        self.attempts += 1
        if self.attempts <= self.fail:
            raise ConnectorError(f"insert into {table}: store busy", retryable=self.retryable)
        n = super().insert(table, columns, rows)
        self.inserted.put([tuple(r) for r in rows])
        return n


def test_insert_retrying_backs_off_exponentially_on_the_clock():
    clock, store, retried = FakeClock(), FlakyStore(fail=3), []
    n = insert_retrying(store, "t", ("a",), [(1,), (2,)], retries=5, clock=clock,
                        on_retry=lambda: retried.append(clock.now()))
    assert n == 2 and store.rows["t"] == [(1,), (2,)]
    assert retried == pytest.approx([0.0, 0.2, 0.6])          # waits of 0.2, 0.4, then 0.8 s
    assert clock.now() == pytest.approx(1.4)


@pytest.mark.parametrize("fail, retryable, attempts, waited", [
    (9, True, 3, 0.2 + 0.4),     # out of retries: the last error is raised
    (1, False, 1, 0.0),          # not retryable: raised at once
])
def test_insert_retrying_gives_up(fail, retryable, attempts, waited):
    clock, store = FakeClock(), FlakyStore(fail=fail, retryable=retryable)
    with pytest.raises(ConnectorError, match="store busy"):
        insert_retrying(store, "t", ("a",), [(1,)], retries=3, clock=clock)
    assert store.attempts == attempts and clock.now() == pytest.approx(waited)


def test_table_sink_flushes_by_age_when_the_clock_says_and_by_size_at_once():
    clock, store = FakeClock(), FlakyStore()
    sink = TableSink(store, "t", ("a",), max_rows=3, max_delay_s=0.5, clock=clock)
    try:
        sink.write((1,))
        clock.until_waiting(1)                 # the sink's thread waits for the row to come of age
        clock.advance(0.4)
        clock.until_waiting(1)
        assert store.inserted.empty()          # 0.4 s old: not yet
        clock.advance(0.1)
        assert store.inserted.get(timeout=5) == [(1,)]
        for v in (2, 3, 4):
            sink.write((v,))
        assert store.inserted.get(timeout=5) == [(2,), (3,), (4,)]   # full: no time had to pass
        assert clock.now() == pytest.approx(0.5)
        with pytest.raises(ConnectorError, match="row has 2 values"):
            sink.write((5, 6))
        sink.write((7,))
    finally:
        sink.close()                           # flushes what is buffered
    assert store.rows["t"] == [(1,), (2,), (3,), (4,), (7,)] and sink.written == 5
