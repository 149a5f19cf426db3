"""Every topic name, under one prefix (``VNX_TOPIC_PREFIX``).

Example:
    >>> from vidnexus.contracts.sessions import SessionKey
    >>> t = Topics("vnx")
    >>> t.frames, t.requests(SessionKey("lenet5", 100)), t.dead_letter("frames")
    ('vnx.frames', 'vnx.req.lenet5-100ms', 'vnx.dead.frames')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from vidnexus.contracts.sessions import SessionKey

__all__ = ["Topics", "DeadLetterSource", "DEAD_LETTER_SOURCES", "REPLY_RETENTION_S", "request_retention_s",
           "BACKGROUND_RETENTION_S"]

DeadLetterSource = Literal["frames", "requests", "replies", "rows", "control", "stats", "apps"]
"""The kinds of topic a role reads; a record of one that cannot be read goes to ``dead.<kind>``."""
DEAD_LETTER_SOURCES: tuple[DeadLetterSource, ...] = ("frames", "requests", "replies", "rows", "control", "stats",
                                                     "apps")
_KINDS: dict[str, DeadLetterSource] = {**{k: k for k in DEAD_LETTER_SOURCES if k != "requests"}, "req": "requests",
                                        "backfill": "frames"}
"""The first part of a topic's name (after the prefix) → its kind."""

REPLY_RETENTION_S = 60.0
"""How long a reply topic keeps its records: replies are read as they arrive; a minute covers a
client that lags or restarts (replies are small, so keeping them costs the broker little)."""


def request_retention_s(slo_s: float) -> float:
    """How long a session's request topic keeps its records: a request is worthless once its
    deadline has passed, so twice the SLO, and at least 10 s (an executor that falls 10 s behind
    answers nothing on time anyway), so a broker holds a minute or two of 150 KB requests, not days
    (:func:`vidnexus.connectors.bus.ephemeral_configs`).

        >>> request_retention_s(0.1), request_retention_s(60.0)
        (10.0, 120.0)
    """
    return max(10.0, 2.0 * slo_s)


BACKGROUND_RETENTION_S = 1200.0
"""How long a background request topic keeps its records: twice the longest a client waits for a
request with no deadline (``vidnexus.operators.infer.BACKGROUND_TIMEOUT_S``, 10 minutes)."""


@dataclass(frozen=True)
class Topics:
    """The topics of one deployment."""

    prefix: str = "vnx"

    def _t(self, name: str) -> str:
        return f"{self.prefix}.{name}"

    @property
    def frames(self) -> str:
        """Sampled frames, keyed by stream (per-stream order within a partition)."""
        return self._t("frames")

    @property
    def backfill(self) -> str:
        """Sampled frames of backfill streams (delay-tolerant: re-processing stored video), keyed by
        stream; read by backfill workers (``vidnexus worker APP --backfill``), apart from live frames so
        that a backlog of them never holds up a live one."""
        return self._t("backfill")

    @property
    def rows(self) -> str:
        """One message per frame with every row it produced, keyed by stream (for the sink)."""
        return self._t("rows")

    @property
    def stats(self) -> str:
        """Executor stats, keyed by executor id."""
        return self._t("stats")

    @property
    def apps(self) -> str:
        """App reports (DNN graph, fan-out), keyed by ``app/worker``."""
        return self._t("apps")

    @property
    def control(self) -> str:
        """The scheduler's plans (compacted, key ``plan``)."""
        return self._t("control")

    def requests(self, session: SessionKey | str) -> str:
        """DNN requests of one session (its key, or the id an executor knows it by)."""
        return self._t(f"req.{session}")

    def routed_requests(self, session: SessionKey | str, executor: str) -> str:
        """DNN requests of one session that clients route to one executor by the plan's weights
        (only that executor consumes them).

        Example:
            >>> Topics("p").routed_requests("lenet5-100ms", "gpu0")
            'p.req.lenet5-100ms.via.gpu0'
        """
        return self._t(f"req.{session}.via.{executor}")

    def background_requests(self, session: SessionKey | str) -> str:
        """DNN requests of one session with no deadline (a backfill's, run in the live requests'
        slack): a topic of their own, so that a request waiting minutes for slack does not hold
        back the committed offsets of the live requests behind it.

        Example:
            >>> Topics("p").background_requests("lenet5-100ms")
            'p.req.lenet5-100ms.bg'
        """
        return self._t(f"req.{session}.bg")

    def replies(self, client: str) -> str:
        """Replies to one client (a worker process)."""
        return self._t(f"replies.{client}")

    def dead_letter(self, source: DeadLetterSource) -> str:
        """Records of ``source`` that could not be read, with the reason in a header."""
        return self._t(f"dead.{source}")

    def source_of(self, topic: str) -> DeadLetterSource:
        """The kind of one of this deployment's topics (where its unreadable records go).

        Example:
            >>> t = Topics("p")
            >>> [t.source_of(n) for n in ("p.frames", "p.req.lenet5-100ms", "p.replies.w1", "p.control")]
            ['frames', 'requests', 'replies', 'control']

        Raises:
            ValueError: ``topic`` is not one of this deployment's topics that roles read.
        """
        head = f"{self.prefix}."
        kind, dot, _ = (topic[len(head):] if topic.startswith(head) else "").partition(".")
        source = _KINDS.get(kind)
        if source is None or (dot and source not in ("requests", "replies")):  # only these are per key
            raise ValueError(f"{topic!r} is not a topic roles of prefix {self.prefix!r} read")
        return source

    def group(self, role: str) -> str:
        """The consumer group of a role (``executor``, ``sink``, ``app-<name>``)."""
        return f"{self.prefix}-{role}"
