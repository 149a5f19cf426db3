"""Riding out an outage of the bus or the store: what every role does when a retryable
:class:`~vidnexus.errors.ConnectorError` reaches its loop.

A role is ``ok`` until a retryable error; then ``degraded`` (one warning naming the dependency and
the error) and it retries its step with exponential backoff, logging a reminder at most once a
minute; the first step that succeeds again makes it ``ok`` (one line with how long the outage
lasted). It exits only when told to stop, on an error that retrying cannot fix, or after
``give_up_s`` of uninterrupted failure (``VNX_GIVE_UP_S``, default one hour; 0: never).

Example:
    >>> from vidnexus.testing import FakeClock
    >>> from vidnexus.errors import ConnectorError
    >>> clock = FakeClock()
    >>> o = Outage("sink", clock, give_up_s=60)
    >>> o.failed(ConnectorError("lost the ClickHouse server", retryable=True)), o.health().state
    (0.5, 'degraded')
    >>> clock.advance(5); o.ok(); o.health().state, o.health().outages
    ('ok', 1)
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Callable, Literal

from vidnexus.clock import Clock
from vidnexus.errors import ConnectorError

__all__ = ["Backoff", "Outage", "Health", "DEFAULT_GIVE_UP_S"]

logger = logging.getLogger(__name__)

DEFAULT_GIVE_UP_S = 3600.0
REMIND_EVERY_S = 60.0


@dataclass
class Backoff:
    """Exponential backoff between reconnects: initial, ×factor, capped."""

    initial_s: float = 0.5
    max_s: float = 10.0
    factor: float = 2.0
    _next: float = 0.0

    def next(self) -> float:
        self._next = self.initial_s if self._next == 0 else min(self.max_s, self._next * self.factor)
        return self._next

    def reset(self) -> None:
        self._next = 0.0


@dataclass(frozen=True)
class Health:
    """A role's health, as its health endpoint and status lines report it."""

    role: str
    state: Literal["ok", "degraded"]
    reason: str = ""
    """The last error while degraded."""
    degraded_for_s: float = 0.0
    failures: int = 0
    """Failed attempts in the current outage."""
    outages: int = 0
    """Outages ridden out since the role started."""
    dead_letters: dict[str, int] = field(default_factory=dict)
    """Records the role could not read, by source (see :mod:`vidnexus.connectors.dead_letter`)."""

    def as_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


class Outage:
    """One role's view of its dependencies (see the module docstring)."""

    def __init__(self, role: str, clock: Clock, *, give_up_s: float = DEFAULT_GIVE_UP_S,
                 backoff: Backoff | None = None) -> None:
        self.role, self.clock, self.give_up_s = role, clock, give_up_s
        self.backoff = backoff or Backoff(initial_s=0.5, max_s=10.0)
        self._since: float | None = None
        self._reason = ""
        self._failures = 0
        self._outages = 0
        self._reminded = 0.0

    @property
    def degraded(self) -> bool:
        return self._since is not None

    def failed(self, e: BaseException) -> float:
        """Record a failed step; returns how long to wait before the next try.

        Raises:
            BaseException: ``e`` itself when retrying cannot help (not a retryable ConnectorError).
            ConnectorError: not retryable, once the outage has lasted ``give_up_s``.
        """
        if not (isinstance(e, ConnectorError) and e.retryable):
            raise e
        now = self.clock.now()
        self._failures += 1
        self._reason = str(e)
        if self._since is None:
            self._since, self._reminded = now, now
            self._outages += 1
            limit = f"gives up after {self.give_up_s:g} s" if self.give_up_s > 0 else "never gives up"
            logger.warning("%s degraded: %s; retrying with backoff (%s)", self.role, e, limit)
        elif now - self._reminded >= REMIND_EVERY_S:
            self._reminded = now
            logger.warning("%s still degraded after %.0f s (%d failed attempts): %s", self.role, now - self._since,
                           self._failures, e)
        if self.give_up_s > 0 and now - self._since >= self.give_up_s:
            raise ConnectorError(f"{self.role}: gave up after {now - self._since:.0f} s of outage "
                                 f"({self._failures} failed attempts); last error: {e}") from None
        return self.backoff.next()

    def ok(self) -> None:
        """Record a step that succeeded (cheap when nothing was wrong)."""
        if self._since is None:
            return
        logger.warning("%s recovered after %.1f s (%d failed attempts)", self.role, self.clock.now() - self._since,
                       self._failures)
        self._since, self._failures, self._reason = None, 0, ""
        self.backoff.reset()

    def ride_out(self, step: Callable[[], object], stop: threading.Event,
                 stopped: Callable[[], bool] | None = None) -> None:
        """Call ``step`` until ``stop`` is set (or ``stopped()`` says so): a retryable failure is
        recorded and waited out on the clock (``stop`` cuts the wait short), a success ends the
        outage. What :meth:`failed` raises ends the loop."""
        while not stop.is_set() and not (stopped is not None and stopped()):
            try:
                step()
            except ConnectorError as e:
                self.clock.wait(stop, self.failed(e))
            else:
                self.ok()

    def health(self) -> Health:
        if self._since is None:
            return Health(self.role, "ok", outages=self._outages)
        return Health(self.role, "degraded", self._reason, round(self.clock.now() - self._since, 1), self._failures,
                      self._outages)

