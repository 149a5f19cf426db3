"""A consumer-group watchdog: a member that owns no partitions while its topics have records its
group has not committed is rejoined (closed and subscribed anew), and that is logged.

Kafka's group protocol can leave a member without an assignment (a join that raced a broker
restart, a coordinator that moved): it polls, gets nothing, and logs nothing, while the requests
it should serve pile up. Every consumer role (executor, sink, worker) runs this check.

The decision is pure (:func:`should_rejoin`); :class:`GroupWatchdog` asks the bus for the facts at
most every ``every_s``. In a group with more members than partitions an idle member legitimately
owns nothing; so after each rejoin the window doubles (up to ``max_stall_s``) until the member
gets an assignment, which bounds the rebalances such a member can cause.

Example:
    >>> should_rejoin(owned=0, lag=120, unassigned_since=10.0, now=45.0, stall_s=30.0)
    True
    >>> should_rejoin(owned=2, lag=120, unassigned_since=10.0, now=45.0, stall_s=30.0)
    False
"""

from __future__ import annotations

import logging
from typing import Callable, Sequence

from vidnexus.clock import Clock
from vidnexus.connectors.bus import Bus, Consumer
from vidnexus.errors import ConnectorError

__all__ = ["GroupWatchdog", "should_rejoin"]

logger = logging.getLogger(__name__)


def should_rejoin(*, owned: int, lag: int, unassigned_since: float | None, now: float, stall_s: float) -> bool:
    """Whether a member owning ``owned`` partitions, unassigned since ``unassigned_since``, should
    rejoin while its group has ``lag`` uncommitted records on its topics."""
    return (owned == 0 and lag > 0 and unassigned_since is not None and stall_s > 0
            and now - unassigned_since >= stall_s)


class GroupWatchdog:
    """Watch one member of ``group`` consuming ``topics`` (a callable: the topics may change).

    ``check(consumer)`` returns True when the member should be rejoined; the caller closes the
    consumer and subscribes anew.
    """

    def __init__(self, bus: Bus, group: str, topics: Callable[[], Sequence[str]], clock: Clock, *,
                 stall_s: float = 30.0, every_s: float = 5.0, max_stall_s: float = 600.0, role: str = "") -> None:
        self.bus, self.group, self.topics, self.clock = bus, group, topics, clock
        self.base_stall_s, self.stall_s, self.every_s, self.max_stall_s = stall_s, stall_s, every_s, max_stall_s
        self.role = role or group
        self.rejoins = 0
        self._unassigned_since: float | None = None
        self._next = 0.0

    def check(self, consumer: Consumer) -> bool:
        now = self.clock.now()
        if self.stall_s <= 0 or now < self._next:
            return False
        self._next = now + self.every_s
        if consumer.assignment():
            self._unassigned_since, self.stall_s = None, self.base_stall_s
            return False
        if self._unassigned_since is None:
            self._unassigned_since = now
            return False
        if now - self._unassigned_since < self.stall_s:
            return False  # not long enough to ask the broker
        try:
            lag = sum(sum(self.bus.group_lag(self.group, t, range(self.bus.partitions(t))).values())
                      for t in self.topics())
        except ConnectorError as e:
            logger.debug("%s watchdog: cannot read the group's lag: %s", self.role, e)
            return False
        if not should_rejoin(owned=0, lag=lag, unassigned_since=self._unassigned_since, now=now,
                             stall_s=self.stall_s):
            return False
        logger.error("%s owns no partition of %s for %.0f s while %d records wait in group %s: rejoining",
                     self.role, ", ".join(self.topics()), now - self._unassigned_since, lag, self.group)
        self.rejoins += 1
        self._unassigned_since = now
        self.stall_s = min(self.max_stall_s, self.stall_s * 2)
        return True
