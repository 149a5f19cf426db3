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

__all__ = ["FakeClock", "ListSource", "ListSink", "FakeRunner", "linear_profile"]

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
