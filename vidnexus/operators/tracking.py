"""Boxes, IoU, non-maximum suppression and a simple IoU tracker: pure Python, time counted in frames.

Example:
    >>> t = IouTracker(iou_threshold=0.3, max_missed=1)
    >>> [tr.track_id for tr in t.update([Box(0, 0, 10, 10)], frame_no=0)]
    [1]
    >>> [tr.track_id for tr in t.update([Box(1, 0, 11, 10), Box(50, 50, 60, 60)], frame_no=1)]
    [1, 2]
    >>> _ = t.update([], frame_no=2)
    >>> [tr.track_id for tr in t.update([], frame_no=3)]
    []
    >>> [(tr.track_id, tr.first_frame, tr.last_frame) for tr in t.finished]
    [(1, 0, 1), (2, 1, 1)]
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

__all__ = ["Box", "iou", "contained", "nms", "Track", "IouTracker", "moving_tracks"]


@dataclass(frozen=True)
class Box:
    """An axis-aligned box in pixels (x1, y1) inclusive to (x2, y2) exclusive, with a score and label."""

    x1: float
    y1: float
    x2: float
    y2: float
    score: float = 1.0
    label: str = ""

    def __post_init__(self) -> None:
        if self.x2 < self.x1 or self.y2 < self.y1:
            raise ValueError(f"box ({self.x1}, {self.y1}, {self.x2}, {self.y2}) has negative size")

    @property
    def area(self) -> float:
        return (self.x2 - self.x1) * (self.y2 - self.y1)

    @property
    def center(self) -> tuple[float, float]:
        return (self.x1 + self.x2) / 2, (self.y1 + self.y2) / 2

    def scaled(self, s: float) -> "Box":
        return replace(self, x1=self.x1 * s, y1=self.y1 * s, x2=self.x2 * s, y2=self.y2 * s)


def iou(a: Box, b: Box) -> float:
    w = min(a.x2, b.x2) - max(a.x1, b.x1)
    h = min(a.y2, b.y2) - max(a.y1, b.y1)
    if w <= 0 or h <= 0:
        return 0.0
    inter = w * h
    return inter / (a.area + b.area - inter)


def contained(inner: Box, outer: Box) -> float:
    """Fraction of ``inner``'s area that lies inside ``outer``."""
    w = min(inner.x2, outer.x2) - max(inner.x1, outer.x1)
    h = min(inner.y2, outer.y2) - max(inner.y1, outer.y1)
    return w * h / inner.area if w > 0 and h > 0 and inner.area > 0 else 0.0


def nms(boxes: Sequence[Box], threshold: float = 0.5, containment: float = 1.01) -> list[Box]:
    """Keep the best-scoring box of every group overlapping by more than ``threshold`` IoU; with
    ``containment`` < 1, also drop a box whose area lies that much inside a box already kept, or
    that holds a kept box that much (part detections of one object)."""
    kept: list[Box] = []
    for b in sorted(boxes, key=lambda b: -b.score):
        if all(iou(b, k) <= threshold and contained(b, k) < containment and contained(k, b) < containment
               for k in kept):
            kept.append(b)
    return kept


@dataclass
class Track:
    track_id: int
    box: Box
    first_frame: int
    last_frame: int
    hits: int = 1
    history: list[tuple[int, Box]] = field(default_factory=list)


class IouTracker:
    """Greedy IoU association frame to frame: each detection joins the live track it overlaps most
    (above ``iou_threshold``, same label) — or, with ``max_center_distance``, the nearest one whose
    centre is within that many pixels when no overlap is enough (objects that move fast between
    sampled frames) — or starts a new track; a track missing for more than ``max_missed`` frames is
    finished: handed to ``on_finish`` and kept in ``finished``, the most recent ``keep_finished`` of
    them (a tracker runs for weeks on a live camera: what it remembers must not grow with time)."""

    def __init__(self, iou_threshold: float = 0.3, max_missed: int = 2,
                 max_center_distance: float | None = None, *, keep_finished: int = 1000,
                 on_finish: Callable[[Track], None] | None = None) -> None:
        self.iou_threshold, self.max_missed = iou_threshold, max_missed
        self.max_center_distance = max_center_distance
        self.live: list[Track] = []
        self.finished: deque[Track] = deque(maxlen=keep_finished)
        self.on_finish = on_finish
        self._next = 1

    def update(self, boxes: Sequence[Box], frame_no: int) -> list[Track]:
        """Associate this frame's boxes; returns the tracks seen in this frame (in box order)."""
        pairs = []
        for ti, t in enumerate(self.live):
            for bi, b in enumerate(boxes):
                if t.box.label != b.label:
                    continue
                o = iou(t.box, b)
                if o >= self.iou_threshold:
                    pairs.append(((1, o), ti, bi))
                elif self.max_center_distance is not None:
                    d = math.dist(t.box.center, b.center)
                    if d <= self.max_center_distance:
                        pairs.append(((0, -d), ti, bi))  # fast objects: overlap lost, still close
        pairs.sort(key=lambda p: p[0], reverse=True)
        used_t: set[int] = set()
        match: dict[int, int] = {}
        for _, ti, bi in pairs:
            if ti in used_t or bi in match:
                continue
            used_t.add(ti)
            match[bi] = ti
        seen = []
        for bi, b in enumerate(boxes):
            if bi in match:
                t = self.live[match[bi]]
                t.box, t.last_frame, t.hits = b, frame_no, t.hits + 1
            else:
                t = Track(self._next, b, frame_no, frame_no)
                self._next += 1
                self.live.append(t)
            t.history.append((frame_no, b))
            seen.append(t)
        still: list[Track] = []
        for t in self.live:
            if frame_no - t.last_frame <= self.max_missed:
                still.append(t)
            else:
                self._finish(t)
        self.live = still
        return seen

    def _finish(self, t: Track) -> None:
        self.finished.append(t)
        if self.on_finish is not None:
            self.on_finish(t)

    def close(self) -> list[Track]:
        """Finish every live track (end of stream) and return the finished tracks kept."""
        for t in self.live:
            self._finish(t)
        self.live = []
        return list(self.finished)


def moving_tracks(tracks: Sequence[Track], min_hits: int = 5, min_displacement: float = 40.0) -> list[Track]:
    """Tracks seen in at least ``min_hits`` frames whose centre travelled at least
    ``min_displacement`` pixels from first to last sighting: objects that passed through, not
    flicker, lighting changes or parked things."""
    out = []
    for t in tracks:
        if t.hits < min_hits or not t.history:
            continue
        if math.dist(t.history[0][1].center, t.history[-1][1].center) >= min_displacement:
            out.append(t)
    return out
