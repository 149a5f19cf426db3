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
    from vidnexus.gpu_executor.profile import Profile
    from vidnexus.streams.frame import Frame

__all__ = ["FakeClock", "ListSource", "ListSink", "FakeRunner", "linear_profile", "MemoryStore", "frame_factory"]

T = TypeVar("T")


class FakeClock:
    """A clock that moves only when told to. ``sleep`` advances it; ``wait`` advances to the timeout."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"a clock cannot go back ({seconds} s)")
        with self._lock:
            self._now += seconds

    def set(self, t: float) -> None:
        with self._lock:
            if t < self._now:
                raise ValueError(f"a clock cannot go back (from {self._now} to {t})")
            self._now = t

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self.advance(seconds)

    def wait(self, event: threading.Event, timeout: float | None) -> bool:
        if event.is_set():
            return True
        if timeout:
            self.advance(timeout)
        return event.is_set()


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
    from vidnexus.gpu_executor.profile import Profile

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
    the column lookup ``ensure_table`` makes. Use chdb or the server for SQL."""

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
                  ingest_ts: float | None = None, tags: dict[str, str] | None = None) -> "Frame":
    """A sampled Frame for tests: raw BGR ``image`` (a black 32×24 by default), pts from ``fps``,
    ``ingest_ts`` now by default (so deadlines are in the future)."""
    import numpy as np

    from vidnexus.clock import wall_time
    from vidnexus.streams.frame import Frame

    img = np.zeros((24, 32, 3), np.uint8) if image is None else np.ascontiguousarray(image, np.uint8)
    ts = wall_time() if ingest_ts is None else ingest_ts
    return Frame(stream, frame_no, frame_no / fps, ts, ts, img.shape[1], img.shape[0], "raw", img.tobytes(),
                 dict(tags or {}))
