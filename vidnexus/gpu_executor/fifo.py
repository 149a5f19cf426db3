"""No-drop FIFO: run up to the planned batch size from the head of the queue, never drop."""

from __future__ import annotations

from typing import Sequence

from vidnexus.gpu_executor.batching import BatchDecision
from vidnexus.contracts.profile import Profile

__all__ = ["NoDropFifo"]


class NoDropFifo:
    """Example:
        >>> p = Profile.linear(alpha=0.010, beta=0.010, max_batch=8)
        >>> NoDropFifo().decide([-1.0, 0.0, 5.0], now=0.0, target=2, profile=p)
        BatchDecision(drop=0, take=2)
    """

    name = "fifo"

    def decide(
        self, deadlines: Sequence[float], now: float, target: int, profile: Profile
    ) -> BatchDecision:
        return BatchDecision(drop=0, take=min(max(1, target), len(deadlines)))
