"""The one place that reads the system clock.

Everything else receives a :class:`Clock` (I/O loops) or ``now`` (pure policies), so tests and the
simulator can drive time with :class:`vidnexus.testing.FakeClock`.

Example:
    >>> clock = MonotonicClock()
    >>> t0 = clock.now(); t1 = clock.now()
    >>> t1 >= t0
    True
"""

from __future__ import annotations

import threading
import time
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "MonotonicClock", "wall_time"]


@runtime_checkable
class Clock(Protocol):
    """A source of time in seconds. ``now()`` never goes backwards."""

    def now(self) -> float:
        """Current time in seconds."""
        ...

    def sleep(self, seconds: float) -> None:
        """Block for ``seconds`` (a fake clock advances instead)."""
        ...

    def wait(self, event: threading.Event, timeout: float | None) -> bool:
        """Wait on ``event`` for at most ``timeout`` seconds of this clock; True if it was set."""
        ...


class MonotonicClock:
    """The real clock: ``time.monotonic`` for intervals and deadlines."""

    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    def wait(self, event: threading.Event, timeout: float | None) -> bool:
        return event.wait(timeout)


def wall_time() -> float:
    """Seconds since the epoch, for timestamps that leave the process (frames, rows)."""
    return time.time()
