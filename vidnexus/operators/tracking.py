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


def _grown(b: Box, m: float) -> Box:
    return Box(b.x1 - m, b.y1 - m, b.x2 + m, b.y2 + m, b.score, b.label)


def _meets(a: Box, b: Box) -> bool:
    return a.x1 < b.x2 and b.x1 < a.x2 and a.y1 < b.y2 and b.y1 < a.y2


def _union(boxes: Sequence[Box]) -> Box:
    return Box(min(b.x1 for b in boxes), min(b.y1 for b in boxes), max(b.x2 for b in boxes), max(b.y2 for b in boxes),
               1.0, boxes[0].label)


class BlobTracker:
    """Tracks of foreground blobs that come apart and change shape (a person whose head, body and
    legs are separate blobs in some frames, who walks in head first and then stands still): each
    detection joins the live track whose box, grown by ``margin`` pixels, it meets most, and a
    track's new box is the union of what joined it, and of the detections within ``gap`` pixels of
    that union; detections that join no track and lie within ``gap`` pixels of each other start one
    new track together. A track missing for more than
    ``max_missed`` frames is finished. Two objects closer than ``margin`` merge into one track
    (the limit of blob tracking: it counts people who come apart, not a group walking together).

        >>> bt = BlobTracker(margin=10)
        >>> [t.track_id for t in bt.update([Box(0, 0, 10, 10), Box(0, 14, 10, 40)], 0)]  # head and body: one
        [1]
        >>> t = bt.update([Box(2, 0, 12, 42)], 1)[0]; (t.track_id, t.hits, t.box.y2)
        (1, 2, 42)
        >>> [t.track_id for t in bt.update([Box(200, 0, 210, 40)], 2)]  # far away: a new track
        [2]
    """

    def __init__(self, margin: float = 20.0, gap: float = 20.0, max_missed: int = 5) -> None:
        self.margin, self.gap, self.max_missed = margin, gap, max_missed
        self.live: list[Track] = []
        self._next = 1

    def update(self, boxes: Sequence[Box], frame_no: int) -> list[Track]:
        """Associate this frame's boxes; returns the tracks seen in this frame."""
        claims: dict[int, list[Box]] = {}
        rest: list[Box] = []
        for b in boxes:
            best, overlap = None, 0.0
            for ti, t in enumerate(self.live):
                near = _grown(t.box, self.margin)
                o = (max(0.0, min(near.x2, b.x2) - max(near.x1, b.x1))
                     * max(0.0, min(near.y2, b.y2) - max(near.y1, b.y1)))
                if o > overlap:
                    best, overlap = ti, o
            if best is None:
                rest.append(b)
            else:
                claims.setdefault(best, []).append(b)
        joined = True
        while joined and rest and claims:  # pieces next to what a track took this frame are its too
            joined = False
            for b in list(rest):
                for got in claims.values():
                    if _meets(_grown(_union(got), self.gap), b):
                        got.append(b)
                        rest.remove(b)
                        joined = True
                        break
        seen = []
        for ti, got in claims.items():
            t = self.live[ti]
            t.box, t.last_frame, t.hits = _union(got), frame_no, t.hits + 1
            t.history.append((frame_no, t.box))
            if len(t.history) > 64:  # the first sighting and the recent ones (a person may stand for hours)
                del t.history[1:-63]
            seen.append(t)
        groups: list[list[Box]] = []
        for b in rest:
            for g in groups:
                if _meets(_grown(_union(g), self.gap), b):
                    g.append(b)
                    break
            else:
                groups.append([b])
        for g in groups:
            t = Track(self._next, _union(g), frame_no, frame_no)
            t.history.append((frame_no, t.box))
            self._next += 1
            self.live.append(t)
            seen.append(t)
        self.live = [t for t in self.live if frame_no - t.last_frame <= self.max_missed]
        return seen


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
