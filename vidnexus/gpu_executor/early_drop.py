"""Nexus early drop (SOSP §6.3, "adaptive batching").

Slide a window of the planned batch size over the deadline-ordered queue; stop at the first request
whose deadline admits the execution of the whole window; drop every request before it. When fewer
than ``target`` requests remain, the window shrinks to what is left (as in Nexus's
``backend/model_exec.cpp``).

:class:`EarlyRescue` (``early_rescue``, the executor's default) is early drop that first tries to
serve a head the window cannot wait for, when no backlog stands behind it (see its docstring).
"""

from __future__ import annotations

from typing import Sequence

from vidnexus.gpu_executor.batching import BatchDecision
from vidnexus.contracts.profile import Profile

__all__ = ["EarlyDrop", "EarlyRescue"]


class EarlyDrop:
    """Example:
        >>> p = Profile.linear(alpha=0.010, beta=0.010, max_batch=8)   # ℓ(4) = 50 ms
        >>> EarlyDrop().decide([0.04, 0.045, 0.06, 0.07, 0.08], now=0.0, target=4, profile=p)
        BatchDecision(drop=2, take=3)
    """

    name = "early_drop"
    rescue = False

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
            if self.rescue and n - i <= target:
                r = _rescued(deadlines, i, now, profile)
                if r:
                    return BatchDecision(drop=i, take=r)
        return BatchDecision(drop=n, take=0)


class EarlyRescue(EarlyDrop):
    """Early drop that serves the head in a smaller batch when no backlog stands behind it.

    When the requests from the head on fit in one window (at most ``target`` of them) and the head
    cannot wait for all of them, Nexus's rule drops it. This policy runs the largest batch from the
    head that the head can wait for, provided the requests left behind it can still run as one
    batch right after it and meet their deadlines; otherwise it drops as early drop does. With a
    backlog (more than one window queued) the rule is Nexus's unchanged: a smaller batch there costs
    the requests behind it.

    Why: requests that came over a bus arrive with budgets that vary by their hop (a broker's
    collection pause delays a few by tens of milliseconds), so a short queue often has a head with
    less budget than the planned batch's latency though it would make it alone or in a smaller
    batch. Where every request arrives with the same budget (in process), such a head has waited
    through a batch, the queue behind it is short, and rescuing it leaves the rest their turn.

    Example (ℓ(b) = 10b + 10 ms): early drop drops the head; here the head and the next run as a
    batch of 2 (done at 30 ms), the third alone after it (done at 50 ms):
        >>> p = Profile.linear(alpha=0.010, beta=0.010, max_batch=8)
        >>> EarlyDrop().decide([0.035, 0.1, 0.1], now=0.0, target=4, profile=p)
        BatchDecision(drop=1, take=2)
        >>> EarlyRescue().decide([0.035, 0.1, 0.1], now=0.0, target=4, profile=p)
        BatchDecision(drop=0, take=2)
    """

    name = "early_rescue"
    rescue = True


def _rescued(deadlines: Sequence[float], i: int, now: float, profile: Profile) -> int:
    """The largest batch from ``deadlines[i]`` (the rest of the queue is one window) that the head
    can wait for and after which the rest still meet their deadlines as one batch; 0 if none."""
    window = len(deadlines) - i
    r = profile.max_batch_within(deadlines[i] - now, cap=window - 1) if window > 1 else 0
    if r < 1:
        return 0
    done = now + profile.latency(r)
    rest = window - r
    return r if deadlines[i + r] >= done + profile.latency(rest) else 0
