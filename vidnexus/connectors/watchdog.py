"""Consumer watchdogs. A consumer-group member that owns no partitions while its topics have
records its group has not committed is rejoined (closed and subscribed anew), and that is logged
(:class:`GroupWatchdog`). A consumer whose fetching stopped — nothing arrives while its partitions
hold records past its position — is reopened at its position (:class:`FetchWatchdog`).

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
import math
from typing import Callable, Mapping, Sequence

from vidnexus.clock import Clock
from vidnexus.connectors.bus import Bus, Consumer
from vidnexus.errors import ConnectorError

__all__ = ["FetchWatchdog", "GroupWatchdog", "behind", "should_rejoin"]

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


TP = tuple[str, int]


def behind(positions: Mapping[TP, int], highs_before: Mapping[TP, int]) -> list[TP]:
    """The partitions whose records that existed at the previous check (their high watermarks then)
    are still unread at ``positions`` (the next offset the consumer would read).

    Example:
        >>> behind({("t", 0): 40, ("t", 1): 7}, {("t", 0): 40, ("t", 1): 9})
        [('t', 1)]
    """
    return sorted(tp for tp, hi in highs_before.items() if tp in positions and hi > positions[tp])


class FetchWatchdog:
    """Whether a consumer's fetching stopped (pure: the caller gives ``now`` and the facts).

    librdkafka can leave a partition in a fetch state it never leaves after a broker restart
    (confluentinc/librdkafka#5153: an ``assign()``-ed consumer gets nothing more until it is
    recreated); nothing is logged and the records wait. The consumer tells the watchdog where it
    started (:meth:`start`) and how far each poll got (:meth:`consumed`); once nothing arrived for
    ``stall_s`` it asks the broker for its partitions' watermarks every ``stall_s / 2`` (:meth:`due`,
    :meth:`check`). Records that existed at one check and are still unread at the next mean the
    fetch stalled: :meth:`check` returns the positions to reopen the consumer at, and the window
    doubles (up to ``max_stall_s``) until records arrive again, which bounds how often a consumer
    whose records cannot be read is reopened. A partition of unknown start (a group member's, until
    it reads a record) counts from its high watermark when first checked.

    Example:
        >>> w = FetchWatchdog(stall_s=10.0)
        >>> w.consumed({("t", 0): 40}, now=0.0)
        >>> w.due(5.0), w.due(10.0)
        (False, True)
        >>> w.check(10.0, {("t", 0): (0, 45)})  # 5 records unread: remembered
        {}
        >>> w.check(15.0, {("t", 0): (0, 47)})  # still unread 5 s later: stalled at offset 40
        {('t', 0): 40}
    """

    def __init__(self, stall_s: float = 10.0, max_stall_s: float = 600.0) -> None:
        self.base_stall_s, self.stall_s, self.max_stall_s = stall_s, stall_s, max_stall_s
        self.reopened = 0
        self._next: dict[TP, int] = {}  # per partition, the next offset to read
        self._highs: dict[TP, int] = {}  # the high watermarks at the previous check
        self._last: float | None = None  # when records last arrived (or the consumer was reopened)
        self._next_check = -math.inf

    def start(self, positions: Mapping[TP, int]) -> None:
        """Where the consumer starts reading (a group-less consumer knows)."""
        self._next.update(positions)

    def consumed(self, positions: Mapping[TP, int], now: float) -> None:
        """A poll returned records: per partition, the next offset to read."""
        self._next.update(positions)
        self._last, self.stall_s = now, self.base_stall_s
        if self._highs:
            self._highs = {}

    def due(self, now: float) -> bool:
        if self._last is None:
            self._last = now  # the first poll starts the window
        return self.stall_s > 0 and now - self._last >= self.stall_s and now >= self._next_check

    def check(self, now: float, marks: Mapping[TP, tuple[int, int]]) -> dict[TP, int]:
        """``marks``: each assigned partition's (low, high) watermarks now. Returns, when the fetch
        stalled, every assigned partition's position to reopen at; else nothing."""
        self._next_check = now + self.stall_s / 2
        self._next = {tp: max(marks[tp][0], self._next.get(tp, marks[tp][1])) for tp in marks}
        stalled = behind(self._next, self._highs)
        self._highs = {tp: hi for tp, (_, hi) in marks.items()}
        if not stalled:
            return {}
        self.reopened += 1
        self._highs, self._last = {}, now
        self.stall_s = min(self.max_stall_s, self.stall_s * 2)
        return dict(self._next)
