"""A role's start-up heap, set aside from garbage collection once the role is ready to serve."""

from __future__ import annotations

import gc

__all__ = ["settle_heap"]


def settle_heap() -> None:
    """Collect once, then freeze what survives (``gc.freeze``).

    A role's start-up objects (modules, the app's operators, models, profiles) live as long as the
    process, yet every full collection walks them again while every thread of the process waits:
    on the 2-core VM of docs/benchmarks.md a full pass over the hop benchmark's client process
    (~220,000 objects) took 57-115 ms, against SLOs of 50 ms. Frozen, a full collection walks only
    what serving allocated since. Objects frozen here are never collected as cycles, so a role calls
    this once, when its set-up is done.
    """
    gc.collect()
    gc.freeze()
