"""Profiling larger batches in the background, while serving: which batch size a served executor
measures next, whether it fits the device's idle time now, and the profile once it is measured.
Pure: times and measurements are given, so the simulator and the executor decide alike.

A served executor profiles a short ladder of sizes at start-up (``loading.SERVED_SIZES``), and
plans never use a batch its profile has not measured. A session whose SLO allows larger batches
(a 2 s backfill, a 400 ms app on a fast device) would lose throughput to that cap, and profiling
every size up front would cost minutes on a CPU. So the executor extends its profile one size at a
time, the next of :data:`LADDER` past the largest measured, while the extrapolated ℓ(b) lets some
hosted session use it (2ℓ(b) ≤ its SLO, Nexus's worst case), and only in idle time: a probe runs
when the duty cycle has no batch ready and the probe's estimated time ends before the next
real-time batch must start (DeepQuery's budget, :func:`~vidnexus.gpu_executor.background.latest_end`).
Each size runs once to build its kernels (budgeted at :data:`FIRST_RUN_FACTOR` × ℓ), then
:data:`TIMED_RUNS` times; the profile gains the size with the mean and spread of the timed runs.

Example (ℓ(b) = 10 ms + 2 ms · b measured up to 16; a session with a 400 ms SLO):
    >>> from vidnexus.contracts.profile import Profile
    >>> p = Profile.linear(alpha=0.002, beta=0.010, max_batch=16)
    >>> next_size(p, [0.400])
    24
    >>> next_size(p, [0.100])  # 2ℓ(24) = 116 ms > 100 ms: nothing to gain
    >>> round(probe_estimate(p, 24, first=True), 3)
    0.116
    >>> extend(p, 24, [0.059, 0.058, 0.060]).sizes[-3:]
    (15, 16, 24)
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from vidnexus.contracts.profile import Profile

__all__ = ["LADDER", "TIMED_RUNS", "FIRST_RUN_FACTOR", "next_size", "probe_estimate", "extend", "Probe", "Prober"]

LADDER = (24, 32, 48, 64, 96, 128, 192, 256)
"""Batch sizes measured in the background, in order, past the start-up profile (at most 256)."""
TIMED_RUNS = 3
"""Timed runs per size, after one run that builds its kernels."""
FIRST_RUN_FACTOR = 2.0
"""A new size's first run (kernel build, allocation) is budgeted at this multiple of its estimate."""


def next_size(profile: Profile, slos_s: Iterable[float], ladder: Sequence[int] = LADDER) -> int | None:
    """The next size of ``ladder`` past ``profile.max_batch`` that a session with one of ``slos_s``
    could run (2ℓ(b) ≤ SLO, ℓ extrapolated from the profile's last segment, planning latency);
    None when the largest SLO allows no larger batch, or the ladder is done."""
    top = max((s for s in slos_s if s > 0), default=0.0)
    if top <= 0:
        return None
    for b in ladder:
        if b <= profile.max_batch:
            continue
        return b if 2 * profile.planning_latency(b) <= top else None
    return None


def probe_estimate(profile: Profile, b: int, first: bool, first_factor: float = FIRST_RUN_FACTOR) -> float:
    """Seconds to budget for one run of batch ``b``: the extrapolated planning latency, times
    ``first_factor`` for the size's first run (a runner that captures a CUDA graph per size runs
    the model several times then: ``TorchRunner.first_run_factor``)."""
    est = profile.planning_latency(b)
    return est * first_factor if first else est


def extend(profile: Profile, b: int, seconds: Sequence[float]) -> Profile:
    """``profile`` with size ``b`` measured by ``seconds`` (timed runs): its mean and spread, kept no
    smaller than the largest size below it (ℓ is non-decreasing in b)."""
    if not seconds or any(not (s > 0 and math.isfinite(s)) for s in seconds):
        raise ValueError(f"batch {b}: timed runs must be positive and finite, got {list(seconds)}")
    if b in profile.sizes:
        raise ValueError(f"batch {b} is already in the profile")
    mean = max(statistics.fmean(seconds), max((m for s, m in zip(profile.sizes, profile.mean_s) if s < b),
                                              default=0.0))
    std = statistics.pstdev(seconds) if len(seconds) > 1 else 0.0
    rows = sorted([*zip(profile.sizes, profile.mean_s, profile.std_s or [0.0] * len(profile.sizes)), (b, mean, std)])
    return Profile(tuple(r[0] for r in rows), tuple(r[1] for r in rows), tuple(r[2] for r in rows))


@dataclass
class Probe:
    """One size being measured: its first (kernel-building) run done or not, and the timed runs."""

    size: int
    warmed: bool = False
    timed: list[float] = field(default_factory=list)


class Prober:
    """Which model to probe next and at what size, one probe at a time (pure state: the caller runs
    the batch and reports its time).

    Example:
        >>> from vidnexus.contracts.profile import Profile
        >>> pr = Prober()
        >>> p = Profile.linear(alpha=0.002, beta=0.010, max_batch=16)
        >>> pr.want({"m": p}, {"m": [0.4]}, now=0.0, free_until=1.0)
        ('m', 24)
        >>> pr.want({"m": p}, {"m": [0.4]}, now=0.0, free_until=0.1)  # 116 ms does not fit
        >>> for s in (0.2, 0.058, 0.058, 0.058):
        ...     done = pr.ran("m", 24, s, p)
        >>> done.max_batch, round(done.latency(24), 3)
        (24, 0.058)
    """

    def __init__(self, ladder: Sequence[int] = LADDER, timed_runs: int = TIMED_RUNS) -> None:
        self.ladder = tuple(ladder)
        self.timed_runs = timed_runs
        self._probes: dict[str, Probe] = {}
        self._failed: set[tuple[str, int]] = set()

    def want(self, profiles: Mapping[str, Profile], slos_s: Mapping[str, Sequence[float]], now: float,
             free_until: float, first_factors: Mapping[str, float] | None = None) -> tuple[str, int] | None:
        """(model, batch size) to run now: the first model (by name) with a size worth measuring
        whose next run's estimate ends by ``free_until``; None when nothing fits or is wanted.
        ``first_factors``: per model, the multiple of ℓ its first run at a new size takes (default
        :data:`FIRST_RUN_FACTOR`)."""
        for model in sorted(slos_s):
            profile = profiles.get(model)
            if profile is None:
                continue
            probe = self._probes.get(model)
            if probe is None or probe.size <= profile.max_batch:
                b = next_size(profile, slos_s[model], self.ladder)
                if b is None or (model, b) in self._failed:
                    continue
                probe = self._probes[model] = Probe(b)
            factor = (first_factors or {}).get(model, FIRST_RUN_FACTOR)
            if now + probe_estimate(profile, probe.size, not probe.warmed, factor) <= free_until:
                return model, probe.size
        return None

    def ran(self, model: str, b: int, seconds: float, profile: Profile) -> Profile | None:
        """Report one run of ``b`` on ``model`` (``profile``: its current one); the extended profile
        once the size has its timed runs, else None."""
        probe = self._probes.get(model)
        if probe is None or probe.size != b:
            return None
        if not probe.warmed:
            probe.warmed = True
            return None
        probe.timed.append(seconds)
        if len(probe.timed) < self.timed_runs:
            return None
        del self._probes[model]
        return extend(profile, b, probe.timed) if b not in profile.sizes else None

    def failed(self, model: str, b: int) -> None:
        """The run failed (out of memory, a runner error): never try this size of this model again."""
        self._probes.pop(model, None)
        self._failed.add((model, b))
