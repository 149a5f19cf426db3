"""Frame sampling as pure functions of (pts, frame index) (issue: streams).

Example:
    >>> s = FpsSampler(fps=2.0)
    >>> [i for i in range(25) if s.keep(pts=i / 12.5, index=i)]
    [0, 7, 13, 19]
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["FpsSampler", "EveryNth"]


@dataclass
class FpsSampler:
    """Keep the first frame at or after each multiple of 1/fps of presentation time."""

    fps: float
    _next_slot: int = 0

    def __post_init__(self) -> None:
        if not self.fps > 0:
            raise ValueError(f"sampling fps must be > 0, got {self.fps}")

    def keep(self, pts: float, index: int) -> bool:
        slot = math.floor(pts * self.fps + 1e-9)
        if slot >= self._next_slot:
            self._next_slot = slot + 1
            return True
        return False


@dataclass(frozen=True)
class EveryNth:
    """Keep frames 0, n, 2n, …"""

    n: int

    def keep(self, pts: float, index: int) -> bool:
        return index % self.n == 0
