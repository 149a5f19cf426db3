"""The one place that reads the system clock.

Everything else receives a :class:`Clock` (I/O loops) or ``now`` (pure policies), so tests and the
simulator can drive time with :class:`vidnexus.testing.FakeClock`. A clock has two readings:
``now()`` for intervals and local deadlines (monotonic, never goes back) and ``wall()`` for times that
leave the process (a frame's ingest time, a request's deadline, a message timestamp). Loops that wait
for something *or* a timeout wait through the clock (``wait``, ``wait_for``), so on a fake clock they
block until the awaited thing happens or the test moves time past the timeout, and never sleep.

Example:
    >>> clock = MonotonicClock()
    >>> t0 = clock.now(); t1 = clock.now()
    >>> t1 >= t0
    True
    >>> import threading
    >>> clock.wait(threading.Event(), 0.0)
    False
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Protocol, runtime_checkable

__all__ = ["Clock", "MonotonicClock", "wall_time"]


@runtime_checkable
class Clock(Protocol):
    """A source of time in seconds."""

    def now(self) -> float:
        """Monotonic seconds, for intervals and deadlines inside this process; never goes back."""
        ...

    def wall(self) -> float:
        """Seconds since the epoch, for times that leave the process (frames, deadlines on the
        wire, message timestamps, rows)."""
        ...

    def sleep(self, seconds: float) -> None:
        """Let ``seconds`` pass (a fake clock advances instead)."""
        ...

    def wait(self, event: threading.Event, timeout: float | None) -> bool:
        """Wait until ``event`` is set, for at most ``timeout`` seconds of this clock (None: no
        limit); True if it was set."""
        ...

    def wait_for(self, cond: threading.Condition, predicate: Callable[[], bool], timeout: float | None) -> bool:
        """``cond.wait_for(predicate, timeout)`` on this clock: the caller holds ``cond``; returns the
        predicate's last value (False: the timeout passed first)."""
        ...


class MonotonicClock:
    """The real clock: ``time.monotonic`` for ``now``, ``time.time`` for ``wall``."""

    def now(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    def wait(self, event: threading.Event, timeout: float | None) -> bool:
        return event.wait(timeout)

    def wait_for(self, cond: threading.Condition, predicate: Callable[[], bool], timeout: float | None) -> bool:
        return cond.wait_for(predicate, timeout)


def wall_time() -> float:
    """Seconds since the epoch, for code with no clock at hand: a user's app step computing a
    row's latency. Code that has a :class:`Clock` uses ``clock.wall()``."""
    return time.time()
