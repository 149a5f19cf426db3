"""Open-loop arrival traces (pure and seeded): Poisson and uniform at a target rate.

The same trace drives the simulator, the in-process executor and the executor over Kafka.

Example:
    >>> [round(a.t, 3) for a in uniform_arrivals(4.0, 1.0)]
    [0.0, 0.25, 0.5, 0.75]
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal, Sequence

__all__ = ["Arrival", "poisson_arrivals", "uniform_arrivals", "arrivals", "merge"]


@dataclass(frozen=True)
class Arrival:
    t: float
    session_id: str = "s"


def poisson_arrivals(rate: float, duration_s: float, session_id: str = "s", seed: int = 0) -> list[Arrival]:
    """Exponential inter-arrival times with mean 1/rate over [0, duration)."""
    if rate <= 0:
        return []
    rng = random.Random(seed)
    out, t = [], rng.expovariate(rate)
    while t < duration_s:
        out.append(Arrival(t, session_id))
        t += rng.expovariate(rate)
    return out


def uniform_arrivals(rate: float, duration_s: float, session_id: str = "s", offset: float = 0.0) -> list[Arrival]:
    """One arrival every 1/rate seconds."""
    if rate <= 0:
        return []
    n = int(duration_s * rate)
    return [Arrival(offset + i / rate, session_id) for i in range(n)]


def arrivals(
    kind: Literal["poisson", "uniform"], rate: float, duration_s: float, session_id: str = "s", seed: int = 0
) -> list[Arrival]:
    if kind == "poisson":
        return poisson_arrivals(rate, duration_s, session_id, seed)
    if kind == "uniform":
        return uniform_arrivals(rate, duration_s, session_id)
    raise ValueError(f"unknown arrival process {kind!r}: choose poisson or uniform")


def merge(*traces: Sequence[Arrival]) -> list[Arrival]:
    """Several sessions' traces in time order."""
    return sorted((a for tr in traces for a in tr), key=lambda a: a.t)
