"""Which executor gets a session's next request: smooth weighted round-robin in proportion to the
plan's routing weights (req/s per executor, ``EpochPlan.routing``). Pure: the simulator's cluster
mode routes its requests with it too.

Example (a session the plan splits 3:1 over two executors; zero weights — an idle session's home —
count as equal):
    >>> r = Router({"e1": 30.0, "e2": 10.0})
    >>> [r.next() for _ in range(8)]
    ['e1', 'e1', 'e2', 'e1', 'e1', 'e1', 'e2', 'e1']
    >>> Router({"e1": 0.0}).next()
    'e1'
"""

from __future__ import annotations

from typing import Generic, Hashable, Mapping, TypeVar

__all__ = ["Router"]

K = TypeVar("K", bound=Hashable)


class Router(Generic[K]):
    """Smooth weighted round-robin over destinations (deterministic, proportional to the weights;
    destinations of weight 0 are used only when every weight is 0)."""

    def __init__(self, weights: Mapping[K, float]) -> None:
        positive = {k: float(w) for k, w in weights.items() if w > 0}
        self.weights: dict[K, float] = positive or {k: 1.0 for k in weights}
        if not self.weights:
            raise ValueError("a router needs at least one destination")
        self.current = {k: 0.0 for k in self.weights}
        self.total = sum(self.weights.values())

    def next(self) -> K:
        for k, w in self.weights.items():
            self.current[k] += w
        best = max(self.current, key=lambda k: self.current[k])
        self.current[best] -= self.total
        return best
