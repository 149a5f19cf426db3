"""Batching policies: given a session's deadline-ordered queue, which requests to drop and how many
to run now. Pure: they take ``now`` and a profile, and return a :class:`BatchDecision`.

Because the queue is ordered by deadline, every policy here drops a prefix and takes the requests
right after it, so a decision is two counts.

The policies themselves live one per module (``early_drop``, ``lazy_drop``, ``fifo``); the factory
that picks one by name is :func:`vidnexus.gpu_executor.policies.make_policy`.

Example:
    >>> from vidnexus.contracts.profile import Profile
    >>> p = Profile.linear(alpha=0.010, beta=0.010, max_batch=8)   # ℓ(b) = 10b + 10 ms
    >>> BatchDecision(drop=1, take=3)
    BatchDecision(drop=1, take=3)
    >>> drop_reason(0.015, now=0.0, profile=p), drop_reason(0.030, now=0.0, profile=p)
    ('deadline', 'early_drop')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol, Sequence

from vidnexus.contracts.profile import Profile

__all__ = ["BatchDecision", "BatchPolicy", "PolicyName", "drop_reason"]

PolicyName = Literal["early_drop", "early_rescue", "lazy_drop", "fifo"]


@dataclass(frozen=True)
class BatchDecision:
    """Drop the first ``drop`` queued requests, then run the next ``take`` as one batch."""

    drop: int
    take: int

    def __post_init__(self) -> None:
        if self.drop < 0 or self.take < 0:
            raise ValueError(f"negative counts in {self}")


class BatchPolicy(Protocol):
    """Decides the next batch of one session."""

    name: str

    def decide(
        self, deadlines: Sequence[float], now: float, target: int, profile: Profile
    ) -> BatchDecision:
        """``deadlines`` ascending; ``target`` is the planned batch size (≥ 1)."""
        ...


def drop_reason(deadline: float, now: float, profile: Profile) -> Literal["deadline", "early_drop"]:
    """``deadline`` when the request could not have finished even alone, else ``early_drop``."""
    return "deadline" if deadline < now + profile.latency(1) else "early_drop"

