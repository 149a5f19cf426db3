"""Clipper-style lazy drop ("earliest first"), the baseline Nexus compares early drop against.

Drop only requests whose deadline has already passed; size the batch by the budget left for the
oldest remaining request (largest b whose latency fits it, at least 1). Under Poisson load with a
large fixed cost β this collapses to small batches (Nexus §6.3).
"""

from __future__ import annotations

import bisect
from typing import Sequence

from vidnexus.gpu_executor.batching import BatchDecision
from vidnexus.contracts.profile import Profile

__all__ = ["LazyDrop"]


class LazyDrop:
    """Example:
        >>> p = Profile.linear(alpha=0.010, beta=0.010, max_batch=8)
        >>> LazyDrop().decide([-0.01, 0.035, 0.2, 0.2], now=0.0, target=4, profile=p)
        BatchDecision(drop=1, take=2)
    """

    name = "lazy_drop"

    def decide(
        self, deadlines: Sequence[float], now: float, target: int, profile: Profile
    ) -> BatchDecision:
        expired = bisect.bisect_left(deadlines, now)
        left = len(deadlines) - expired
        if left == 0:
            return BatchDecision(drop=expired, take=0)
        cap = min(left, profile.max_batch)
        b = max(1, profile.max_batch_within(deadlines[expired] - now, cap=cap))
        return BatchDecision(drop=expired, take=b)
