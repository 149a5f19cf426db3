"""Counting lines and zones: a tracked object's anchor (its box's centre) crossing a line drawn on
a camera's image, with the direction, and being inside a polygon drawn on it (a zone: dwell per
zone is then SQL over the rows). Pure: the traffic app keeps one :class:`LineCounter` per stream
and feeds it each frame's tracks, and asks :func:`zones_at` which zones hold each anchor.

A zone is declared as a tag too, ``zone.NAME=x1,y1,x2,y2,x3,y3[,…]``: a polygon of at least three
points in the frame's pixels (supervision's ``PolygonZone``); a point on its border is inside.

A line is declared per stream as a tag, ``line.NAME=x1,y1,x2,y2`` in the frame's pixels (``vidnexus
streams add … --tag line.gate=0,216,768,216``). Which side a point is on is the sign of the cross
product of A→B and A→P in image coordinates (y grows downwards): a crossing to the side on the
right of A→B, as drawn on the image, is ``in``, to the left ``out`` (a line drawn left to right
counts objects moving down the image as ``in``). As supervision's ``LineZone``, a track crosses
when its anchor is seen on one side and later on the other; each track counts at most once per
line and direction, so a car that dithers on the line is not counted twice.

Example:
    >>> lc = LineCounter([Line("gate", 0, 100, 200, 100)])
    >>> lc.update(7, (50, 150)), lc.update(7, (55, 60))       # below, then above: moving up
    ([], [Crossing(line='gate', track_id=7, direction='out')])
    >>> lc.update(7, (56, 160)), lc.update(7, (57, 40))       # back down (in), up again: once per direction
    ([Crossing(line='gate', track_id=7, direction='in')], [])
    >>> lc.update(8, (10, 90), counts=False), lc.update(8, (10, 110), counts=False)  # flicker that never counts
    ([], [])
    >>> zs = parse_zones({"zone.bay": "0,0,100,0,100,50,0,50", "line.gate": "0,1,2,3"})
    >>> zones_at(zs, (20, 10)), zones_at(zs, (20, 80))
    (('bay',), ())
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

__all__ = ["Line", "Crossing", "LineCounter", "Zone", "parse_lines", "parse_zones", "parse_geometry", "zones_at"]

TAG_PREFIX = "line."
ZONE_PREFIX = "zone."


@dataclass(frozen=True)
class Line:
    name: str
    x1: float
    y1: float
    x2: float
    y2: float

    def side(self, x: float, y: float) -> int:
        """+1 on the right of A→B (image coordinates), -1 on the left, 0 on the line."""
        c = (self.x2 - self.x1) * (y - self.y1) - (self.y2 - self.y1) * (x - self.x1)
        return (c > 0) - (c < 0)


@dataclass(frozen=True)
class Crossing:
    line: str
    track_id: int
    direction: str  # "in" or "out"


def parse_lines(tags: Mapping[str, str]) -> list[Line]:
    """The lines a stream's tags declare (``line.NAME`` = ``x1,y1,x2,y2``).

    Raises:
        ValueError: a ``line.`` tag that is not four numbers of two distinct points, naming the tag.
    """
    out = []
    for key, value in sorted(tags.items()):
        if not key.startswith(TAG_PREFIX):
            continue
        name = key[len(TAG_PREFIX):]
        try:
            x1, y1, x2, y2 = (float(v) for v in value.split(","))
        except ValueError:
            raise ValueError(f"tag {key}={value!r}: a line is x1,y1,x2,y2 in the frame's pixels") from None
        if not name or ":" in name or (x1, y1) == (x2, y2):
            raise ValueError(f"tag {key}={value!r}: a line needs a name (without ':') and two distinct points")
        out.append(Line(name, x1, y1, x2, y2))
    return out


@dataclass(frozen=True)
class Zone:
    name: str
    points: tuple[tuple[float, float], ...]

    def contains(self, x: float, y: float) -> bool:
        """Inside or on the border (even-odd rule; the border counts as inside)."""
        pts, inside = self.points, False
        for (ax, ay), (bx, by) in zip(pts, pts[1:] + pts[:1]):
            cross = (bx - ax) * (y - ay) - (by - ay) * (x - ax)
            if cross == 0 and min(ax, bx) <= x <= max(ax, bx) and min(ay, by) <= y <= max(ay, by):
                return True  # on this edge
            if (ay > y) != (by > y) and x < ax + (y - ay) * (bx - ax) / (by - ay):
                inside = not inside
        return inside


def parse_zones(tags: Mapping[str, str]) -> list[Zone]:
    """The zones a stream's tags declare (``zone.NAME`` = ``x1,y1,x2,y2,x3,y3[,…]``).

    Raises:
        ValueError: a ``zone.`` tag that is not an even count (≥ 6) of numbers, or has no name or
            no area, naming the tag.
    """
    out = []
    for key, value in sorted(tags.items()):
        if not key.startswith(ZONE_PREFIX):
            continue
        name = key[len(ZONE_PREFIX):]
        try:
            nums = [float(v) for v in value.split(",")]
        except ValueError:
            nums = []
        if len(nums) < 6 or len(nums) % 2 or not all(math.isfinite(v) for v in nums):
            raise ValueError(f"tag {key}={value!r}: a zone is x1,y1,x2,y2,x3,y3[,…] (three points or more) in the "
                             f"frame's pixels")
        pts = tuple(zip(nums[0::2], nums[1::2]))
        area = sum(ax * by - bx * ay for (ax, ay), (bx, by) in zip(pts, pts[1:] + pts[:1])) / 2
        if not name or ":" in name or area == 0:
            raise ValueError(f"tag {key}={value!r}: a zone needs a name (without ':') and an area")
        out.append(Zone(name, pts))
    return out


def parse_geometry(tags: Mapping[str, str]) -> tuple[list[Line], list[Zone]]:
    """Every line and zone a stream's tags declare; raises ValueError naming a malformed tag."""
    return parse_lines(tags), parse_zones(tags)


def zones_at(zones: Sequence[Zone], anchor: tuple[float, float]) -> tuple[str, ...]:
    """The names of the zones that hold ``anchor``."""
    return tuple(z.name for z in zones if z.contains(*anchor))


@dataclass
class LineCounter:
    """Crossings of ``lines`` by tracks, from each track's anchor in successive frames."""

    lines: Sequence[Line]
    _side: dict[tuple[str, int], int] = field(default_factory=dict)
    _counted: set[tuple[str, int, str]] = field(default_factory=set)
    _pending: dict[int, list[Crossing]] = field(default_factory=dict)

    def update(self, track_id: int, anchor: tuple[float, float], counts: bool = True) -> list[Crossing]:
        """The crossings this sighting of ``track_id`` at ``anchor`` completes. ``counts``: whether
        the track is a real object yet (the app's moving-track rule); a crossing made before it is
        waits, and is reported with its first sighting that counts — so flicker that hops the line
        and vanishes is never counted."""
        for line in self.lines:
            s = line.side(*anchor)
            if s == 0:
                continue
            key = (line.name, track_id)
            before = self._side.get(key)
            self._side[key] = s
            if before is not None and before != s:
                direction = "in" if s > 0 else "out"
                if (line.name, track_id, direction) not in self._counted:
                    self._counted.add((line.name, track_id, direction))
                    self._pending.setdefault(track_id, []).append(Crossing(line.name, track_id, direction))
        return self._pending.pop(track_id, []) if counts else []

    def bound(self, live: set[int], factor: int = 4) -> None:
        """Keep memory bounded on a long stream: once it holds more than ``factor`` × the live
        tracks' state, forget the tracks no longer live (a track missed for a frame or two keeps
        its side until then, so it is not counted twice)."""
        if len(self._side) > factor * max(1, len(live)) * max(1, len(self.lines)):
            self.forget(live)

    def forget(self, live: set[int]) -> None:
        """Drop the state of tracks no longer live (bounded memory on a long stream)."""
        self._side = {k: v for k, v in self._side.items() if k[1] in live}
        self._counted = {k for k in self._counted if k[1] in live}
        self._pending = {k: v for k, v in self._pending.items() if k in live}
