"""Open-loop arrival traces (pure and seeded): Poisson and uniform at a target rate.

The same trace drives the simulator, the in-process executor and the executor over Kafka.

Example:
    >>> [round(a.t, 3) for a in uniform_arrivals(4.0, 1.0)]
    [0.0, 0.25, 0.5, 0.75]
"""

from __future__ import annotations

import bisect
import math
import random
from dataclasses import dataclass
from typing import Literal, Mapping, Sequence

__all__ = ["Arrival", "Hop", "poisson_arrivals", "uniform_arrivals", "arrivals", "merge", "over_bus"]


@dataclass(frozen=True)
class Arrival:
    t: float
    session_id: str = "s"
    budget_s: float | None = None
    """Time from arrival to deadline when it is not the session's SLO: a request that came over a
    bus arrives with its SLO less the hop it took and the reply's reserve (:func:`over_bus`)."""
    due_s: float | None = None
    """Time from arrival to when the caller needs the reply (its SLO less the hop in; None: the
    deadline): a reply counts on time when it is back by then, ``reply_s`` after it was sent."""
    reply_s: float = 0.0
    """The reply's time back to the caller."""


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


@dataclass(frozen=True)
class Hop:
    """A request's way to the executor over a bus and its reply's way back, for the simulator
    (:func:`over_bus`).

    Each request reaches the executor a lognormal delay after it was sent (``median_s``, ``p99_s``),
    never before the request its session sent before it (a partition keeps order). Pauses (a
    broker's collection, a process descheduled) start at ``pause_rate_hz`` (Poisson), each a
    uniform length up to ``pause_max_s``: what would arrive during one arrives at its end, together.
    The reply goes back a lognormal delay (``reply_median_s``, ``reply_p99_s``); the client
    reserves ``reply_reserve_s`` of the SLO for it.

    The defaults are fitted to a trace of 2,040 requests at 60 req/s behind the local broker on this
    2-core VM (2026-11-29; the executor's receive time against the client's send time): the hop in
    p50 3.0, p90 6.1, p99 11.7, max 34 ms (these defaults give p50 3.1, p90 6.0–6.2, p99 11.0–11.9,
    max 28–33 ms over a minute at 60 req/s), the reply's p50 2.4, p99 10.6 ms. The client reserves
    half the median of its measured round trip (``ExecutorClient.reply_reserve_s``; about 2.7 ms
    with these legs' medians; half the p90, about 5 ms, until 2026-11-30).
    """

    median_s: float = 0.003
    p99_s: float = 0.010
    pause_rate_hz: float = 0.4
    pause_max_s: float = 0.034
    reply_median_s: float = 0.0024
    reply_p99_s: float = 0.0106
    reply_reserve_s: float = 0.0027

    def to_dict(self) -> dict[str, float]:
        return {"median_ms": self.median_s * 1e3, "p99_ms": self.p99_s * 1e3, "pause_rate_hz": self.pause_rate_hz,
                "pause_max_ms": self.pause_max_s * 1e3, "reply_median_ms": self.reply_median_s * 1e3,
                "reply_p99_ms": self.reply_p99_s * 1e3, "reply_reserve_ms": self.reply_reserve_s * 1e3}


def _sigma(median_s: float, p99_s: float) -> float:
    """The lognormal's σ with that median and 99th percentile."""
    return math.log(p99_s / median_s) / 2.3263 if p99_s > median_s else 0.0


def over_bus(trace: Sequence[Arrival], slo_s: Mapping[str, float], hop: Hop = Hop(), seed: int = 0) -> list[Arrival]:
    """``trace`` as sent (``t``: the send time) and received over a bus modelled by ``hop``: each
    arrival at its receive time with its budget, the session's SLO less its time on the way and the
    reply's reserve (at least 0: then it is already late), when the caller needs its reply, and the
    reply's time back. Pure and seeded.

    Example:
        >>> sent = uniform_arrivals(100, 1.0)
        >>> got = over_bus(sent, {"s": 0.05}, Hop(pause_rate_hz=0), seed=1)
        >>> len(got) == len(sent), all(b.t > a.t for a, b in zip(sent, got))
        (True, True)
        >>> all(abs(a.t + 0.05 - 0.0027 - (b.t + b.budget_s)) < 1e-9 for a, b in zip(sent, got))
        True
    """
    rng = random.Random(seed)
    sigma, reply_sigma = _sigma(hop.median_s, hop.p99_s), _sigma(hop.reply_median_s, hop.reply_p99_s)
    end = max((a.t for a in trace), default=0.0) + 1.0
    pauses: list[tuple[float, float]] = []
    t = rng.expovariate(hop.pause_rate_hz) if hop.pause_rate_hz > 0 else math.inf
    while t < end:
        length = rng.uniform(0.0, hop.pause_max_s)
        pauses.append((t, t + length))
        t += length + rng.expovariate(hop.pause_rate_hz)
    starts = [p[0] for p in pauses]
    last: dict[str, float] = {}
    out = []
    for a in sorted(trace, key=lambda a: a.t):
        got = a.t + hop.median_s * math.exp(rng.gauss(0.0, sigma))
        k = bisect.bisect_right(starts, got) - 1
        if k >= 0 and got < pauses[k][1]:
            got = pauses[k][1]  # held until the pause ends
        got = max(got, last.get(a.session_id, got))
        last[a.session_id] = got
        due = a.t + slo_s[a.session_id] - got
        reply = hop.reply_median_s * math.exp(rng.gauss(0.0, reply_sigma))
        out.append(Arrival(got, a.session_id, max(0.0, due - hop.reply_reserve_s), due, reply))
    return sorted(out, key=lambda a: a.t)
