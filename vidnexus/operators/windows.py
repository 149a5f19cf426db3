"""Tumbling event-time windows as a small state machine (no clock: time comes from the elements).

Example:
    >>> w = TumblingWindows(10.0)
    >>> w.add("cam-1", "car", 1.0, "a"), w.add("cam-1", "car", 4.0, "b")
    ([], [])
    >>> [(c.key, c.start, c.items) for c in w.add("cam-1", "bus", 12.0, "c")]
    [('car', 0.0, ['a', 'b'])]
    >>> [(c.key, c.start, c.items) for c in w.flush()]
    [('bus', 10.0, ['c'])]
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["TumblingWindows", "ClosedWindow"]


@dataclass(frozen=True)
class ClosedWindow:
    stream: str
    key: str
    start: float
    end: float
    items: list[Any]


class TumblingWindows:
    """Windows ``[k·size, (k+1)·size)`` per (stream, key). A window closes when an element of the same
    stream has a time at or past its end (the stream's watermark); elements older than an already
    closed window are counted in ``late`` and not added."""

    def __init__(self, size_s: float) -> None:
        self.size = float(size_s)
        self._open: dict[tuple[str, str, float], list[Any]] = {}
        self._watermark: dict[str, float] = {}
        self.late = 0

    def add(self, stream: str, key: str, t: float, item: Any) -> list[ClosedWindow]:
        start = math.floor(t / self.size) * self.size
        wm = self._watermark.get(stream, -math.inf)
        if start + self.size <= wm:
            self.late += 1
            return []
        self._open.setdefault((stream, key, start), []).append(item)
        if t > wm:
            self._watermark[stream] = t
            return self._close(lambda s, end: s == stream and end <= t)
        return []

    def flush(self) -> list[ClosedWindow]:
        """Close every open window (end of input)."""
        return self._close(lambda s, end: True)

    def _close(self, due: Any) -> list[ClosedWindow]:
        out = []
        for k in sorted(self._open, key=lambda k: (k[2], k[0], k[1])):
            stream, key, start = k
            if due(stream, start + self.size):
                out.append(ClosedWindow(stream, key, start, start + self.size, self._open.pop(k)))
        return out

    @property
    def open_windows(self) -> int:
        return len(self._open)
