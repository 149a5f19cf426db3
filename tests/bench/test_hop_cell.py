"""bench hop keeps a cell whose driver could not flush its backlog in time (on 2026-11-29 a full run
lost all its cells when kafka-python's flush timed out at 1,000 req/s of 150 KB, its last cell)."""

import time
from concurrent.futures import Future

from vidnexus.benchmarks.hop import _cell
from vidnexus.contracts.replies import Reply
from vidnexus.errors import ConnectorError


class _SlowDriverClient:
    """Answers every other request, then fails its flush as kafka-python's does past its timeout."""

    def __init__(self) -> None:
        self.sent = 0

    def wall(self) -> float:
        return time.time()

    def submit(self, session_id, x, *, slo_s, expires_wall):
        self.sent += 1
        f: Future = Future()
        if self.sent % 2:
            f.set_result(Reply.answer(None, latency_s=0.002))
        else:
            f.set_result(Reply.dropped("timeout"))
        return f

    def flush(self) -> None:
        raise ConnectorError("flush failed: KafkaTimeoutError: Timeout waiting for future", retryable=True)


def test_a_flush_that_times_out_is_recorded_and_the_cell_still_counts():
    row = _cell(_SlowDriverClient(), rate=200, kb=1, seconds=0.1, pids={})
    assert row["requests"] == 20
    assert row["flush_error"] and "KafkaTimeoutError" in row["flush_error"]
    assert row["answered_fraction"] == 0.5
    assert row["p50_ms"] == 2.0


class _LateClient:
    """Answers every request 30 ms after it was sent, from another thread (as the listener does);
    the last one never (it expires as lost)."""

    def __init__(self, n: int) -> None:
        self.n, self.sent = n, 0

    def wall(self) -> float:
        return time.time()

    def submit(self, session_id, x, *, slo_s, expires_wall):
        import threading

        self.sent += 1
        f: Future = Future()
        reply = Reply.answer(None, latency_s=0.03) if self.sent < self.n else Reply.dropped("timeout")
        threading.Timer(0.03, f.set_result, (reply,)).start()
        return f

    def flush(self) -> None:
        pass


def test_replies_that_come_after_the_sending_are_counted_and_a_lost_one_is_a_miss():
    """The cell keeps no future (their heap paused the client's listener in full collections): each
    reply's latency is recorded as it arrives, and the cell waits until every request has ended."""
    row = _cell(_LateClient(20), rate=200, kb=1, seconds=0.1, pids={})
    assert row["requests"] == 20 and row["answered_fraction"] == 0.95
    assert row["p50_ms"] == 30.0 and row["max_ms"] == 30.0


def test_the_warm_up_lasts_until_two_chunks_in_a_row_settle_and_no_longer_than_its_cap(monkeypatch):
    import vidnexus.benchmarks.hop as hop

    def chunks(p99s):
        it = iter(p99s)
        monkeypatch.setattr(hop, "_cell", lambda client, rate, kb, seconds, pids: {
            "rate_rps": rate, "payload_kb": kb, "answered_fraction": 1.0, "p99_ms": next(it)})

    chunks([4000.0, 300.0, 12.0, 80.0, 14.0, 9.0, 1.0])  # a cold broker: settles at the 6th chunk
    rows = hop._warm(None, 5.0, 120.0, {})
    assert [r["p99_ms"] for r in rows] == [4000.0, 300.0, 12.0, 80.0, 14.0, 9.0]
    assert all(r["warm_up"] for r in rows) and rows[-1]["warm_settled"] and "warm_settled" not in rows[0]
    chunks([400.0] * 10)  # never settles: stops at the cap and says so
    rows = hop._warm(None, 5.0, 20.0, {})
    assert len(rows) == 4 and rows[-1]["warm_settled"] is False
