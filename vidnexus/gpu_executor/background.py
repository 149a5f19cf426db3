"""Delay-tolerant work beside real-time sessions (DeepQuery, MMSys'19; ../shared/reference/
other-papers.md): how large a batch of background work — re-processing a stored video, a backfill,
WEG's retraining — may run now without delaying any real-time batch. Pure: times are given, ``now``
included, so the simulator and the executor decide alike.

DeepQuery's rule, without preemption: sort the upcoming real-time start times t_1 ≤ t_2 ≤ …; with
N devices of which N_bg already run background work, k = N − N_bg devices are left for real time,
and the k-th upcoming real-time start bounds the background batch: D_budget = t_k − now if k ≤
the number of upcoming starts, else unbounded. The batch shrinks until its duration fits the
budget; if not even one item fits, the work waits.

Example (one device; the next real-time batch must start in 50 ms; ℓ(b) = 10 ms + 5 ms · b):
    >>> lat = lambda b: 0.010 + 0.005 * b
    >>> background_batch(0.0, [0.120, 0.050], lat, pending=100, max_batch=16)
    8
    >>> background_batch(0.0, [0.120, 0.050], lat, pending=100, max_batch=16, devices=2)  # t_2 = 120 ms
    16
    >>> background_batch(0.045, [0.050], lat, pending=100, max_batch=16)  # 5 ms left: wait
    0
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

__all__ = ["background_budget", "background_batch", "latest_end", "next_arrival", "recent_rate", "expected_batch",
           "GAP_SHARE"]

GAP_SHARE = 0.9
"""A real-time session's next request is expected no sooner than this share of its shortest recent
gap after its last one (:func:`next_arrival`): a periodic stream's period, less 10% for jitter."""


def background_budget(now: float, rt_starts: Sequence[float], devices: int = 1, running: int = 0) -> float:
    """Seconds a background batch started now may take: until the k-th upcoming real-time start,
    k = ``devices`` − ``running`` (devices already running background work); unbounded when fewer
    real-time starts are coming; 0 when no device is left for real time.

    Example:
        >>> background_budget(1.0, [1.5, 1.2, 0.9])  # a start already due counts as now
        0.0
        >>> background_budget(1.0, [1.5, 1.2], devices=3)
        inf
    """
    if devices < 1 or running < 0:
        raise ValueError(f"devices must be ≥ 1 and running ≥ 0, got {devices} and {running}")
    k = devices - running
    if k <= 0:
        return 0.0
    upcoming = sorted(rt_starts)
    if k > len(upcoming):
        return math.inf
    return max(0.0, upcoming[k - 1] - now)


def background_batch(now: float, rt_starts: Sequence[float], latency: Callable[[int], float], *, pending: int,
                     max_batch: int, devices: int = 1, running: int = 0) -> int:
    """The batch b ≤ min(``pending``, ``max_batch``) with ``latency(b)`` within
    :func:`background_budget` that serves most items per second (DeepQuery shrinks the batch until it
    fits; of the sizes that fit, a measured profile's largest is not always its most efficient); 0
    when none fits (the background work waits). ``latency`` is the planning latency of the
    background model (non-decreasing in b).

    Example (a measured profile where 8 items take 37 ms and 11 take 68 ms: with 70 ms left, 8):
        >>> lat = lambda b: {8: 0.037, 9: 0.047, 10: 0.057, 11: 0.068}.get(b, 0.005 * b)
        >>> background_batch(0.0, [0.070], lat, pending=100, max_batch=16)
        8
    """
    budget = background_budget(now, rt_starts, devices, running)
    best, rate = 0, 0.0
    for b in range(1, min(pending, max_batch) + 1):
        took = latency(b)
        if took > budget:
            break
        if b / took >= rate:
            best, rate = b, b / took
    return best


def next_arrival(now: float, last: float | None, gaps: Sequence[float], share: float = GAP_SHARE) -> float:
    """When a real-time session's next request may arrive: ``share`` of its shortest recent gap
    after its ``last`` arrival, never before ``now``; ``now`` when it has no gaps yet (a request
    may arrive any moment). DeepQuery has clients announce their next request (FutureQuery);
    sampled camera streams are periodic, so their past gaps announce it.

    Example:
        >>> next_arrival(1.00, last=0.95, gaps=[0.100, 0.101, 0.099])  # 30 fps: the next ~0.089 s on
        1.0391
        >>> next_arrival(1.00, last=0.80, gaps=[0.100]), next_arrival(1.00, None, [])
        (1.0, 1.0)
    """
    if last is None or not gaps:
        return now
    return round(max(now, last + share * min(gaps)), 9)


def recent_rate(now: float, last: float | None, gaps: Sequence[float], requests: Sequence[int] | None = None) -> float:
    """A real-time session's request rate over its recent gaps and the time since its last arrival,
    so that it decays once the session goes quiet; 0 without gaps. ``requests``: how many requests
    came at each arrival after a gap (a frame's crops arrive together), one per gap; default 1 each.

    Example:
        >>> recent_rate(1.0, last=1.0, gaps=[0.1] * 10), recent_rate(3.0, last=1.0, gaps=[0.1] * 10)
        (10.0, 3.333333333)
        >>> recent_rate(1.0, last=1.0, gaps=[0.2] * 5, requests=[4] * 5)  # 5 frames/s of 4 crops each
        20.0
    """
    if last is None or not gaps:
        return 0.0
    n = sum(requests) if requests is not None else len(gaps)
    return round(n / (sum(gaps) + max(0.0, now - last)), 9)


def expected_batch(latency: Callable[[int], float], slo_s: float, rate: float, target: int, reserve: int = 1,
                   first: int = 1) -> int:
    """The batch a real-time session will have queued when it must start, if background work runs
    until then: its next arrival's ``first`` requests and those arriving at ``rate`` while it waits,
    i.e. the least n ≤ ``target`` with n ≥ first + rate · (SLO − ``reserve`` · ℓ(n)), rounded (the
    wait shrinks as the batch it must leave room for grows); ``target`` when no n fits.

    Example (ℓ(b) = 5 ms + 5 ms · b, SLO 70 ms; at 66.5 req/s the session can wait 70 − 2 · ℓ(3) = 30 ms
    and gathers 2 more requests meanwhile; at 1 req/s a batch of 1):
        >>> lat = lambda b: 0.005 + 0.005 * b
        >>> expected_batch(lat, 0.070, 66.5, 8, reserve=2), expected_batch(lat, 0.070, 1.0, 8, reserve=2)
        (3, 1)
    """
    for n in range(1, target + 1):
        if n >= round(first + rate * max(0.0, slo_s - reserve * latency(n))):
            return n
    return target


def latest_end(batches: Sequence[tuple[float, float]]) -> float:
    """The latest time a background batch may end so that the real-time ``batches`` —
    (latest start, duration) each, run one after another on the device in latest-start order —
    all still start in time: min over k of (k-th latest start − the durations before it).
    Unbounded when there are none.

    Example (two batches that must start by 100 ms and 120 ms, 30 ms each: the second waits for
    the first, so the device must be free by 90 ms):
        >>> latest_end([(0.120, 0.030), (0.100, 0.030)])
        0.09
    """
    end, before = math.inf, 0.0
    for start, duration in sorted(batches):
        end = min(end, start - before)
        before += duration
    return round(end, 12)
