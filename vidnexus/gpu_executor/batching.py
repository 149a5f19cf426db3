"""Batching policies: given a session's deadline-ordered queue, which requests to drop and how many
to run now. Pure: they take ``now`` and a profile, and return a :class:`BatchDecision`.

Because the queue is ordered by deadline, every policy here drops a prefix and takes the requests
right after it, so a decision is two counts.

Example:
    >>> from vidnexus.gpu_executor.profile import Profile
    >>> p = Profile.linear(alpha=0.010, beta=0.010, max_batch=8)   # ℓ(b) = 10b + 10 ms
    >>> make_policy("early_drop").decide([0.030, 0.100, 0.100, 0.100], now=0.0, target=3, profile=p)
    BatchDecision(drop=1, take=3)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol, Sequence

from vidnexus.gpu_executor.profile import Profile

__all__ = ["BatchDecision", "BatchPolicy", "PolicyName", "POLICIES", "make_policy", "drop_reason"]

PolicyName = Literal["early_drop", "lazy_drop", "fifo"]


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


def drop_reason(deadline: float, now: float, profile: Profile) -> str:
    """``deadline`` when the request could not have finished even alone, else ``early_drop``."""
    return "deadline" if deadline < now + profile.latency(1) else "early_drop"


def make_policy(name: PolicyName | str) -> BatchPolicy:
    """The policy registered under ``name`` (see :data:`POLICIES`)."""
    try:
        return POLICIES[name]()
    except KeyError:
        raise ValueError(f"unknown batching policy {name!r}; choose one of {sorted(POLICIES)}") from None


from vidnexus.gpu_executor.early_drop import EarlyDrop  # noqa: E402
from vidnexus.gpu_executor.fifo import NoDropFifo  # noqa: E402
from vidnexus.gpu_executor.lazy_drop import LazyDrop  # noqa: E402

POLICIES: dict[str, type[BatchPolicy]] = {
    "early_drop": EarlyDrop,
    "lazy_drop": LazyDrop,
    "fifo": NoDropFifo,
}
