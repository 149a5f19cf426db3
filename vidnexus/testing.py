"""Test helpers shipped with the package: a fake clock, list sources/sinks, a fake model runner.

Example:
    >>> clock = FakeClock(start=10.0)
    >>> clock.advance(0.5); clock.now()
    10.5
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Generic, Iterable, Iterator, Sequence, TypeVar

if TYPE_CHECKING:
    from vidnexus.clock import Clock
    from vidnexus.contracts.profile import Profile
    from vidnexus.contracts.frames import Frame

__all__ = ["FakeClock", "ListSource", "ListSink", "FakeRunner", "linear_profile", "MemoryStore", "frame_factory"]

T = TypeVar("T")


class FakeClock:
    """A clock that moves only when told to: by :meth:`advance`/:meth:`set`, or by a :meth:`sleep`
    (the sleeper asks for time to pass, and gets it at once).

    A thread that *waits* (:meth:`wait`, :meth:`wait_for`: an event or a timeout) blocks until the
    event comes or another thread moves the clock past its timeout, so background loops on a fake
    clock neither spin nor sleep. ``wall()`` reads ``wall_start`` at construction and moves with
    ``now()``.

    Example:
        >>> clock = FakeClock(start=5.0, wall_start=1000.0)
        >>> clock.sleep(2.0); clock.now(), clock.wall()
        (7.0, 1002.0)
        >>> done = threading.Event()
        >>> t = threading.Thread(target=lambda: clock.wait(done, 1.0)); t.start()
        >>> clock.until_waiting(1); clock.advance(1.0); t.join(5); t.is_alive()
        False
    """

    def __init__(self, start: float = 0.0, wall_start: float = 1_700_000_000.0) -> None:
        self._now = float(start)
        self._wall_offset = float(wall_start) - float(start)
        self._cv = threading.Condition()  # guards _now and _waiting
        self._waiting: list[threading.Condition] = []

    def now(self) -> float:
        with self._cv:
            return self._now

    def wall(self) -> float:
        return self._wall_offset + self.now()

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"a clock cannot go back ({seconds} s)")
        with self._cv:
            self._now += seconds
        self._tick()

    def set(self, t: float) -> None:
        with self._cv:
            if t < self._now:
                raise ValueError(f"a clock cannot go back (from {self._now} to {t})")
            self._now = t
        self._tick()

    def _tick(self) -> None:
        """Wake every waiter so it re-reads the time. Waiters register before they read the time and
        hold their condition until they wait on it, so no tick is lost between the two."""
        with self._cv:
            conds = list({id(c): c for c in self._waiting}.values())
        for c in conds:
            with c:
                c.notify_all()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self.advance(seconds)

    def wait(self, event: threading.Event, timeout: float | None) -> bool:
        # Event.set() notifies the event's own condition (CPython's threading.Event._cond): waiting on
        # it lets either set() or an advance() wake us.
        cond: threading.Condition = getattr(event, "_cond")
        with cond:
            return self.wait_for(cond, event.is_set, timeout)

    def wait_for(self, cond: threading.Condition, predicate: Callable[[], bool], timeout: float | None) -> bool:
        """Like ``cond.wait_for(predicate, timeout)``, the timeout in this clock's seconds. The
        caller holds ``cond``; a condition on a plain Lock must not be held by a thread that moves
        the clock (an RLock may)."""
        with self._cv:
            deadline = None if timeout is None else self._now + timeout
            self._waiting.append(cond)
            self._cv.notify_all()
        try:
            while True:
                if predicate():
                    return True
                if deadline is not None and self.now() >= deadline:
                    return False
                cond.wait()
        finally:
            with self._cv:
                self._waiting.remove(cond)
                self._cv.notify_all()

    def waiting(self) -> int:
        """How many threads wait on this clock now."""
        with self._cv:
            return len(self._waiting)

    def until_waiting(self, n: int = 1, timeout_s: float = 10.0) -> None:
        """Block until at least ``n`` threads wait on this clock, so that an :meth:`advance` surely
        reaches them. Raises AssertionError after ``timeout_s`` real seconds (a test that would hang)."""
        with self._cv:
            if not self._cv.wait_for(lambda: len(self._waiting) >= n, timeout_s):
                raise AssertionError(f"{len(self._waiting)} thread(s) wait on the clock, expected {n}")


class ListSource(Generic[T]):
    """Yields the given items in order (a finite, deterministic source)."""

    def __init__(self, items: Iterable[T]) -> None:
        self.items = list(items)

    def __iter__(self) -> Iterator[T]:
        return iter(self.items)


@dataclass
class ListSink(Generic[T]):
    """Collects whatever is written to it."""

    items: list[T] = field(default_factory=list)

    def write(self, item: T) -> None:
        self.items.append(item)

    def write_batch(self, items: Sequence[T]) -> None:
        self.items.extend(items)


def linear_profile(alpha_ms: float, beta_ms: float, max_batch: int = 64) -> "Profile":
    """A batching profile ℓ(b) = αb + β (milliseconds in, seconds stored)."""
    from vidnexus.contracts.profile import Profile

    return Profile.linear(alpha_ms / 1000.0, beta_ms / 1000.0, max_batch)


class FakeRunner:
    """A model runner whose batch latency comes from a profile and whose outputs are computed by
    ``fn`` per input; advances a FakeClock instead of sleeping."""

    def __init__(
        self,
        profile: "Profile",
        clock: FakeClock | None = None,
        fn: Callable[[Any], Any] = lambda x: x,
    ) -> None:
        self.profile = profile
        self.clock = clock
        self.fn = fn
        self.batches: list[int] = []

    def __call__(self, inputs: Sequence[Any]) -> list[Any]:
        self.batches.append(len(inputs))
        if self.clock is not None:
            self.clock.advance(self.profile.latency(len(inputs)))
        return [self.fn(x) for x in inputs]


class MemoryStore:
    """A Store for operator tests: tables are lists of row tuples in ``rows``; ``query`` answers only
    the column and engine lookups ``ensure_table`` makes. Use chdb or the server for SQL."""

    version = (26, 0)
    embedded = True

    def __init__(self) -> None:
        self.rows: dict[str, list[tuple[Any, ...]]] = {}
        self.schemas: dict[str, Any] = {}

    def execute(self, sql: str) -> None:
        pass

    def query(self, sql: str, settings: Any = None) -> Any:
        from vidnexus.connectors.store import QueryResult

        for name, schema in self.schemas.items():
            if "system.tables" in sql and f"name = '{name}'" in sql:
                return QueryResult(("engine_full", "sorting_key"), ("String", "String"),
                                   [(schema.engine, ", ".join(schema.order_by))])
            if f"table = '{name}'" in sql:
                return QueryResult(("name", "type"), ("String", "String"),
                                   [(c.name, c.type) for c in schema.columns])
        return QueryResult(("name", "type"), ("String", "String"), [])

    def insert(self, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> int:
        batch = [tuple(r) for r in rows]
        self.rows.setdefault(table, []).extend(batch)
        return len(batch)

    def create_table(self, schema: Any) -> None:
        self.schemas[schema.name] = schema
        self.rows.setdefault(schema.name, [])

    def close(self) -> None:
        pass


def frame_factory(stream: str, frame_no: int, *, image: Any = None, fps: float = 10.0,
                  ingest_ts: float | None = None, tags: dict[str, str] | None = None,
                  clock: "Clock | None" = None) -> "Frame":
    """A sampled Frame for tests: raw BGR ``image`` (a black 32×24 by default), pts from ``fps``,
    ``ingest_ts`` now by default (``clock.wall()`` when a clock is given), so deadlines are ahead."""
    import numpy as np

    from vidnexus.clock import wall_time
    from vidnexus.contracts.frames import Frame

    img = np.zeros((24, 32, 3), np.uint8) if image is None else np.ascontiguousarray(image, np.uint8)
    ts = ingest_ts if ingest_ts is not None else clock.wall() if clock is not None else wall_time()
    return Frame(stream, frame_no, frame_no / fps, ts, ts, img.shape[1], img.shape[0], "raw", img.tobytes(),
                 dict(tags or {}))
