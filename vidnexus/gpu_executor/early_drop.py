"""Nexus early drop (SOSP §6.3, "adaptive batching").

Slide a window of the planned batch size over the deadline-ordered queue; stop at the first request
whose deadline admits the execution of the whole window; drop every request before it. When fewer
than ``target`` requests remain, the window shrinks to what is left (as in Nexus's
``backend/model_exec.cpp``).
"""

from __future__ import annotations

from typing import Sequence

from vidnexus.gpu_executor.batching import BatchDecision
from vidnexus.contracts.profile import Profile

__all__ = ["EarlyDrop"]


class EarlyDrop:
    """Example:
        >>> p = Profile.linear(alpha=0.010, beta=0.010, max_batch=8)   # ℓ(4) = 50 ms
        >>> EarlyDrop().decide([0.04, 0.045, 0.06, 0.07, 0.08], now=0.0, target=4, profile=p)
        BatchDecision(drop=2, take=3)
    """

    name = "early_drop"

    def decide(
        self, deadlines: Sequence[float], now: float, target: int, profile: Profile
    ) -> BatchDecision:
        n = len(deadlines)
        target = max(1, target)
        for i in range(n):
            b = min(target, n - i)
            # Deadlines ascend, so if the window's first request fits, the whole window does.
            if deadlines[i] >= now + profile.latency(b):
                return BatchDecision(drop=i, take=b)
        return BatchDecision(drop=n, take=0)
