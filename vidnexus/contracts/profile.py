"""Batching profiles ℓ(b): measured latency per batch size, interpolated between measured sizes.

Pure: no torch here (the profiler that measures lives in ``profiler.py``).

Example:
    >>> p = Profile.linear(alpha=0.002, beta=0.010, max_batch=32)
    >>> round(p.latency(8), 6)
    0.026
    >>> p.max_batch_within(0.050)
    20
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

__all__ = ["Profile", "fit_linear", "best_throughput_batch"]


def fit_linear(sizes: Sequence[int], lat: Sequence[float]) -> tuple[float, float]:
    """Least-squares ℓ(b) = αb + β with α, β ≥ 0 (a latency neither shrinks with the batch nor starts
    below zero: noisy small batches can tilt the free fit that way); returns (α, β) in the units of
    ``lat``.

    Example:
        >>> fit_linear([1, 2, 3], [0.012, 0.014, 0.016])
        (0.002, 0.01)
        >>> fit_linear([1, 2, 4, 8], [0.001, 0.006, 0.011, 0.021])[1]  # free fit: β < 0
        0.0
    """
    n = len(sizes)
    if n == 0:
        raise ValueError("cannot fit a profile without measurements")
    my = sum(lat) / n
    if n == 1:
        return 0.0, float(lat[0])
    mx = sum(sizes) / n
    sxx = sum((x - mx) ** 2 for x in sizes)
    sxy = sum((x - mx) * (y - my) for x, y in zip(sizes, lat))
    alpha = sxy / sxx if sxx else 0.0
    beta = my - alpha * mx
    if alpha < 0:  # flat: the mean
        return 0.0, my
    if beta < 0:  # through the origin
        return sum(x * y for x, y in zip(sizes, lat)) / sum(x * x for x in sizes), 0.0
    return round(alpha, 12), round(beta, 12)


@dataclass(frozen=True)
class Profile:
    """ℓ(b) in seconds for the measured batch sizes (ascending), with the spread of each measure.

    ``latency(b)`` interpolates linearly between measured sizes and extrapolates with the last
    segment's slope past the largest (never below the largest measured value).
    """

    sizes: tuple[int, ...]
    mean_s: tuple[float, ...]
    std_s: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if not self.sizes or len(self.sizes) != len(self.mean_s):
            raise ValueError("a profile needs one mean latency per measured batch size")
        if list(self.sizes) != sorted(set(self.sizes)) or self.sizes[0] < 1:
            raise ValueError(f"batch sizes must be ascending, unique and >= 1: {self.sizes}")
        if any(m <= 0 for m in self.mean_s):
            raise ValueError("latencies must be positive")
        if self.std_s and len(self.std_s) != len(self.sizes):
            raise ValueError("std_s must be empty or have one entry per batch size")

    @classmethod
    def linear(cls, alpha: float, beta: float, max_batch: int = 64) -> "Profile":
        sizes = tuple(range(1, max_batch + 1))
        return cls(sizes, tuple(alpha * b + beta for b in sizes), tuple(0.0 for _ in sizes))

    @property
    def max_batch(self) -> int:
        return self.sizes[-1]

    def latency(self, b: int) -> float:
        """Mean latency of a batch of ``b`` (seconds)."""
        if b < 1:
            raise ValueError(f"batch size must be >= 1, got {b}")
        return self._interp(self.mean_s, b)

    def planning_latency(self, b: int) -> float:
        """Mean + one standard deviation: what planners should budget for."""
        base = self.latency(b)
        return base + (self._interp(self.std_s, b) if self.std_s else 0.0)

    def _interp(self, values: Sequence[float], b: int) -> float:
        sizes = self.sizes
        i = bisect.bisect_left(sizes, b)
        if i < len(sizes) and sizes[i] == b:
            return values[i]
        if i == 0:
            return values[0]
        if i == len(sizes):
            if len(sizes) == 1:
                return values[0] * b / sizes[0]
            slope = (values[-1] - values[-2]) / (sizes[-1] - sizes[-2])
            return max(values[-1], values[-1] + slope * (b - sizes[-1]))
        x0, x1, y0, y1 = sizes[i - 1], sizes[i], values[i - 1], values[i]
        return y0 + (y1 - y0) * (b - x0) / (x1 - x0)

    def throughput(self, b: int) -> float:
        """Requests per second at batch ``b`` run back to back."""
        return b / self.latency(b)

    def max_batch_within(self, budget_s: float, *, planning: bool = False, cap: int | None = None) -> int:
        """Largest b ≤ cap (default: max measured) with ℓ(b) ≤ budget; 0 if even b=1 does not fit."""
        f = self.planning_latency if planning else self.latency
        best = 0
        for b in range(1, (cap or self.max_batch) + 1):
            if f(b) <= budget_s:
                best = b
            else:
                break
        return best

    def efficient_batch_within(self, budget_s: float, *, planning: bool = False, cap: int | None = None) -> int:
        """The batch to run back to back within ``budget_s``: the highest throughput b/ℓ(b) among
        the b ≤ :meth:`max_batch_within` (the smaller b on a tie); 0 if even b=1 does not fit. Where
        throughput grows with b (a GPU) this is the largest batch that fits, as in Nexus; where a
        bigger batch costs more per request (a CPU whose caches a large batch spills) it is the
        smaller batch that serves more (the control plane's ``saturated_batch`` rule).

        Example:
            >>> Profile((1, 4, 8), (0.003, 0.010, 0.036)).efficient_batch_within(0.050)
            4
            >>> Profile.linear(alpha=0.010, beta=0.010, max_batch=8).efficient_batch_within(0.050)
            4
        """
        f = self.planning_latency if planning else self.latency
        return best_throughput_batch(f, self.max_batch_within(budget_s, planning=planning, cap=cap))

    def fit(self) -> tuple[float, float]:
        """(α, β) of the least-squares line through the measured means."""
        return fit_linear(self.sizes, self.mean_s)

    def adjusted(self, factor: float, per_size: Mapping[int, float] | None = None) -> "Profile":
        """This profile as a device runs it now: every batch ``factor`` times as long (a device
        slowed or sped up as a whole: other work on the same CPU, a clock change), and a batch of
        ``b`` a further ``per_size[b]`` times (a size the measurement got wrong; a size not measured
        is added). ℓ stays non-decreasing in b, so a larger batch never looks cheaper.

        Example:
            >>> p = Profile((1, 2, 4), (0.010, 0.016, 0.030))
            >>> p.adjusted(1.5).mean_s
            (0.015, 0.024, 0.045)
            >>> p.adjusted(1.0, {3: 1.2}).mean_s  # ℓ(3) is 1.2 × the 23 ms interpolated
            (0.01, 0.016, 0.0276, 0.03)
        """
        per_size = per_size or {}
        for f in (factor, *per_size.values()):
            if not (f > 0 and math.isfinite(f)):
                raise ValueError(f"a profile is adjusted by positive finite factors, not {f}")
        sizes = tuple(sorted(set(self.sizes) | set(per_size)))  # a size < 1: Profile refuses it
        means, top = [], 0.0
        for b in sizes:
            top = max(top, round(self.latency(b) * factor * per_size.get(b, 1.0), 12))
            means.append(top)
        stds = tuple(round(self._interp(self.std_s, b) * factor, 12) for b in sizes) if self.std_s else ()
        return Profile(sizes, tuple(means), stds)

    def to_dict(self) -> dict[str, Any]:
        alpha, beta = self.fit()
        return {
            "sizes": list(self.sizes),
            "mean_s": list(self.mean_s),
            "std_s": list(self.std_s),
            "alpha_s": alpha,
            "beta_s": beta,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Profile":
        return cls(tuple(d["sizes"]), tuple(d["mean_s"]), tuple(d.get("std_s", ())))


def best_throughput_batch(latency: Callable[[int], float], top: int) -> int:
    """Pure: the b in 1..``top`` of highest throughput b/ℓ(b), the smaller b on a tie; 0 when
    ``top`` < 1. The rule both the executor's own targets (:meth:`Profile.efficient_batch_within`)
    and the planner's saturated batch (``control.packing.saturated_batch``) apply.

    Example:
        >>> best_throughput_batch({1: 0.003, 2: 0.005, 3: 0.009}.__getitem__, 3)
        2
    """
    best, best_t = 0, 0.0
    for b in range(1, top + 1):
        if b / latency(b) > best_t * (1 + 1e-12):
            best, best_t = b, b / latency(b)
    return best
