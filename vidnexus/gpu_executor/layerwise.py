"""Layer-wise batching (adaptive scheduling for edge-assisted DNN serving, ../shared/reference/
other-papers.md): a model runs as G layer groups, and a request that arrives while others are part-way
through joins them when the batch reaches its group, instead of waiting for the whole model.

Pure: requests and profiles in, the next step out; ``now`` is given. The simulator
(:func:`simulate_layerwise`) drives it on a virtual clock.

**Min total completion time** (Lemma 1, Theorem 1). Among FIFO schedules (an earlier request never
finishes after a later one), requests sorted by arrival — 1 earliest, so deepest in the model — split
into contiguous *segments* that run one after another, earliest first; a segment starts at its
latest member's group, picks up the others as it reaches their groups, and runs to the end, where all
its members finish together. Running segment [j..i] takes
``run(j, i) = Σ_{k ≥ l_i} h_k(members at or before group k)``, and every request still active waits
for it, so the dynamic program is ``best(i) = min_j best(j − 1) + run(j, i) · (n − j + 1)`` (Eq. 1–2,
with ``active`` = the requests not yet finished: this segment's and every later one's), O(n²). A
segment larger than the largest batch B costs ∞.

**Tardy-aware** ("Our-Tardy"): the same segments, the lexicographic objective (tardy requests, then
time), and one more choice per request: give it up (a tardy request that costs no device time).
Requests the plan gives up, or still makes late, are dropped.

Example (two groups, h_k(b) = 10 ms + 1 ms · b; the earliest request is in group 1, two more have
just arrived: run apart, they finish at 11, 35 and 35 ms, 81 ms in all; the two new ones run group 0
together and the earliest joins them at group 1: all three finish at 25 ms, 75 ms in all):
    >>> from vidnexus.contracts.profile import Profile
    >>> h = [Profile.linear(0.001, 0.010, 8), Profile.linear(0.001, 0.010, 8)]
    >>> plan = plan_segments([1, 0, 0], h)
    >>> plan.segments, round(plan.cost, 3)
    (((0, 2),), 0.075)
"""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Literal, Sequence

from vidnexus.contracts.profile import Profile

__all__ = ["Plan", "plan_segments", "segment_time", "next_step", "Job", "LayerwiseResult", "simulate_layerwise",
           "POLICIES"]

Objective = Literal["time", "tardy"]
POLICIES = ("layerwise", "layerwise_tardy", "model", "none")
HORIZON = 64
"""Requests planned at once, the earliest (the paper plans the first 500 active requests; later ones
cannot run soon anyway and are planned in a later round)."""


@dataclass(frozen=True)
class Plan:
    """Segments as (first, last) index pairs in arrival order, run in that order; ``cost`` the total
    completion time the plan gives (from now); ``tardy`` the requests it makes late (with deadlines)."""

    segments: tuple[tuple[int, int], ...]
    cost: float
    tardy: int = 0
    dropped: tuple[int, ...] = ()
    """With the tardy objective: requests given up (they would miss anyway; running them would only
    delay the others)."""


def segment_time(layers: Sequence[int], h: Sequence[Profile], first: int, last: int) -> float:
    """Seconds to run requests ``first..last`` (arrival order, their current groups ``layers``,
    non-increasing) as one segment to the end of the model: group by group from the latest
    member's, each batched with the members that have reached it."""
    g = len(h)
    at = Counter(layers[first : last + 1])
    total, n = 0.0, 0
    for k in range(layers[last], g):
        n += at.get(k, 0)
        total += h[k].latency(n)
    return total


def plan_segments(layers: Sequence[int], h: Sequence[Profile], *, max_batch: int | None = None,
                  deadlines: Sequence[float] | None = None, now: float = 0.0,
                  objective: Objective = "time") -> Plan:
    """The FIFO segmentation of the requests (current group of each, in arrival order: earliest
    first, so ``layers`` is non-increasing) that minimises the total completion time
    (``objective="time"``), or the number of requests that finish after their ``deadlines``, then
    the time (``"tardy"``). ``max_batch`` bounds a segment's size (default: the smallest largest
    measured batch of the groups)."""
    n = len(layers)
    if any(layers[i] < layers[i + 1] for i in range(n - 1)):
        raise ValueError(f"requests in arrival order must be at non-increasing groups, got {list(layers)}")
    if objective == "tardy" and (deadlines is None or len(deadlines) != n):
        raise ValueError("the tardy objective needs one deadline per request")
    bound = max_batch if max_batch is not None else min(p.max_batch for p in h)
    # best[i]: (tardy, cost, end time, segment start; -1: request i-1 dropped) for requests 0..i-1.
    best: list[tuple[int, float, float, int]] = [(0, 0.0, 0.0, 0)] + [(0, math.inf, math.inf, 0)] * n

    def better(cand: tuple[int, float, float, int], cur: tuple[int, float, float, int]) -> bool:
        if math.isinf(cur[1]):
            return True
        return (cand[0], cand[1]) < (cur[0], cur[1]) if objective == "tardy" else cand[1] < cur[1]

    g = len(h)
    table = [[0.0] + [p.latency(b) for b in range(1, min(bound, n) + 1)] for p in h]  # h_k(b), b ≤ the bound
    for i in range(1, n + 1):
        if objective == "tardy" and not math.isinf(best[i - 1][1]):  # give up request i-1: one tardy, no time
            best[i] = (best[i - 1][0] + 1, best[i - 1][1], best[i - 1][2], -1)
        # Segments j-1 .. i-1 (0-based), j from i down: each step adds one earlier (deeper) member,
        # which joins the batch from its group on: O(G) per step.
        members = [0] * g
        per_group = [0.0] * g
        run = 0.0  # Σ per_group: groups before the latest member's have no members, so cost 0
        for j in range(i, max(1, i - bound + 1) - 1, -1):
            for k in range(layers[j - 1], g):
                members[k] += 1
                took = table[k][members[k]]
                run += took - per_group[k]
                per_group[k] = took
            prev = best[j - 1]
            if math.isinf(prev[1]):
                continue
            end = prev[2] + run
            late = 0
            if deadlines is not None:
                late = sum(1 for d in deadlines[j - 1 : i] if now + end > d + 1e-12)
            cand = (prev[0] + late, prev[1] + run * (n - j + 1), end, j - 1)
            if better(cand, best[i]):
                best[i] = cand
    segments: list[tuple[int, int]] = []
    dropped: list[int] = []
    i = n
    while i > 0:
        start = best[i][3]
        if start < 0:
            dropped.append(i - 1)
            i -= 1
            continue
        segments.append((start, i - 1))
        i = start
    return Plan(tuple(reversed(segments)), best[n][1], best[n][0], tuple(reversed(dropped)))


@dataclass
class Job:
    """A request on its way through the model: ``layer`` is the next group it runs."""

    rid: int
    arrival: float
    deadline: float
    layer: int = 0


def next_step(jobs: Sequence[Job], h: Sequence[Profile], now: float, *, objective: Objective = "time",
              max_batch: int | None = None) -> tuple[list[int], list[int]]:
    """What the device runs next: (request ids to run the next group together, request ids to drop).
    ``jobs`` in arrival order. The first segment of the plan runs; its members at its shallowest group
    run that group now (the others wait for them there). With the tardy objective, requests the plan
    makes late are dropped first and the rest planned again."""
    if not jobs:
        return [], []
    drops: list[int] = []
    live = list(jobs[:HORIZON])
    layers = [j.layer for j in live]
    if objective == "tardy":
        plan = plan_segments(layers, h, max_batch=max_batch, deadlines=[j.deadline for j in live], now=now,
                             objective="tardy")
        if plan.tardy:
            ends, t = {}, 0.0
            for a, b in plan.segments:
                t += segment_time(layers, h, a, b)
                for k in range(a, b + 1):
                    ends[k] = now + t
            gone = set(plan.dropped) | {k for k, end in ends.items() if end > live[k].deadline + 1e-12}
            drops = [live[k].rid for k in sorted(gone)]
            live = [j for k, j in enumerate(live) if k not in gone]
            if not live:
                return [], drops
            layers = [j.layer for j in live]
    plan = plan_segments(layers, h, max_batch=max_batch)
    a, b = plan.segments[0]
    top = min(layers[a : b + 1])
    return [live[k].rid for k in range(a, b + 1) if layers[k] == top], drops


@dataclass
class LayerwiseResult:
    requests: int = 0
    on_time: int = 0
    drops: int = 0
    completion_s: list[float] = field(default_factory=list)

    @property
    def on_time_fraction(self) -> float:
        return self.on_time / self.requests if self.requests else 1.0

    @property
    def mean_completion_s(self) -> float:
        return sum(self.completion_s) / len(self.completion_s) if self.completion_s else 0.0


def simulate_layerwise(h: Sequence[Profile], arrivals: Sequence[float], deadline_s: float, *,
                       policy: str = "layerwise", noise_cv: float = 0.0, seed: int = 0,
                       max_batch: int | None = None) -> LayerwiseResult:
    """One device serving one model of ``len(h)`` groups on a virtual clock. Policies:
    ``layerwise`` (min total completion time), ``layerwise_tardy`` (fewest tardy), ``model`` (whole-
    model batches of what is queued, early drop of requests that cannot finish even alone) and
    ``none`` (one request at a time). Every policy drops a request once its deadline has passed."""
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {', '.join(POLICIES)}, not {policy!r}")
    rng = random.Random(seed)
    g = len(h)
    bound = max_batch if max_batch is not None else min(p.max_batch for p in h)
    res = LayerwiseResult(requests=len(arrivals))
    jobs: list[Job] = []
    t, i = 0.0, 0
    ids = iter(range(len(arrivals)))

    def took(seconds: float) -> float:
        return max(seconds * 0.2, rng.gauss(seconds, seconds * noise_cv)) if noise_cv > 0 else seconds

    def whole(b: int) -> float:
        return sum(p.latency(b) for p in h)

    while i < len(arrivals) or jobs:
        while i < len(arrivals) and arrivals[i] <= t:
            jobs.append(Job(next(ids), arrivals[i], arrivals[i] + deadline_s))
            i += 1
        expired = [j for j in jobs if j.deadline <= t + (0.0 if policy.startswith("layerwise") else whole(1))]
        if expired:
            res.drops += len(expired)
            gone = {j.rid for j in expired}
            jobs = [j for j in jobs if j.rid not in gone]
        if not jobs:
            if i < len(arrivals):
                t = max(t, arrivals[i])
            continue
        if policy in ("model", "none"):
            # Whole-model batches (FIFO): the largest head that finishes in time; ``none``: one.
            b = 1
            if policy == "model":
                while b < min(len(jobs), bound) and t + whole(b + 1) <= jobs[0].deadline:
                    b += 1
            batch, jobs = jobs[:b], jobs[b:]
            t += took(whole(len(batch)))
            for j in batch:
                res.completion_s.append(t - j.arrival)
                res.on_time += t <= j.deadline + 1e-12
            continue
        run, dropped = next_step(jobs, h, t, objective="tardy" if policy == "layerwise_tardy" else "time",
                                 max_batch=bound)
        if dropped:
            res.drops += len(dropped)
            gone = set(dropped)
            jobs = [j for j in jobs if j.rid not in gone]
        if not run:
            continue
        chosen = set(run)
        members = [j for j in jobs if j.rid in chosen]
        t += took(h[members[0].layer].latency(len(members)))
        for j in members:
            j.layer += 1
        done = [j for j in jobs if j.layer >= g]
        for j in done:
            res.completion_s.append(t - j.arrival)
            res.on_time += t <= j.deadline + 1e-12
        if done:
            jobs = [j for j in jobs if j.layer < g]
    return res
