"""Synthetic traffic cameras with ground truth: ``synthetic://traffic?seed=1&fps=10&seconds=60&rush=0``.

A fixed camera over a two-lane road (cars go right in the upper lane, left in the lower one). Cars
arrive as a Poisson process — 8 a minute off-peak, 24 in rush hour (``rush=1``), or ``rate`` —
each with a colour from :data:`COLOURS`, a length and a speed, and never closer than a safe gap to
the car ahead in its lane. Each frame's ``truth`` has ``entered`` (cars that have come into view
so far) and ``cars``: ``id:colour:cx:cy`` for the cars in view, ``;``-separated.

Example:
    >>> src = TrafficSource.from_url("synthetic://traffic?seed=2&fps=5&seconds=20&rush=1")
    >>> frames = list(src.frames())
    >>> frames[-1].truth["entered"] > 0, frames[0].image.shape
    (True, (180, 320, 3))
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Iterator
from urllib.parse import parse_qs, urlparse

import numpy as np

from vidnexus.errors import StreamError
from vidnexus.streams.synthetic import RawFrame

__all__ = ["TrafficSource", "COLOURS", "draw_car", "LANES", "parse_cars", "background"]

WIDTH, HEIGHT = 320, 180
COLOURS: dict[str, tuple[int, int, int]] = {  # BGR
    "white": (235, 235, 235), "black": (35, 35, 35), "red": (40, 40, 200), "blue": (190, 90, 30),
    "yellow": (40, 205, 235), "silver": (150, 150, 145),
}
LANES = ((68, 1), (122, -1))  # (centre y, direction)


def background(rng: random.Random | None = None) -> np.ndarray:
    """The static scene: grass, the road with lane markings, a few trees."""
    import cv2

    img = np.empty((HEIGHT, WIDTH, 3), np.uint8)
    img[:] = (70, 140, 80)
    cv2.rectangle(img, (0, 48), (WIDTH, 142), (95, 95, 95), -1)
    for x in range(0, WIDTH, 40):
        cv2.line(img, (x, 95), (x + 20, 95), (220, 220, 220), 2)
    r = rng or random.Random(0)
    for _ in range(5):
        x, y = r.randint(10, WIDTH - 10), r.choice((r.randint(5, 38), r.randint(152, 172)))
        cv2.circle(img, (x, y), r.randint(6, 11), (40, 100, 40), -1)
    return img


def draw_car(img: np.ndarray, cx: float, cy: float, length: int, colour: tuple[int, int, int], direction: int,
             shade: float = 1.0) -> None:
    """A car seen from above: body, windscreen and rear window, wheels."""
    import cv2

    h = 24
    x1, x2 = int(cx - length / 2), int(cx + length / 2)
    y1, y2 = int(cy - h / 2), int(cy + h / 2)
    col = tuple(int(min(255, c * shade)) for c in colour)
    for wx in (x1 + 8, x2 - 10):
        cv2.rectangle(img, (wx, y1 - 2), (wx + 6, y2 + 2), (20, 20, 20), -1)
    cv2.rectangle(img, (x1, y1), (x2, y2), col, -1)
    front = x2 - 14 if direction > 0 else x1 + 6
    back = x1 + 6 if direction > 0 else x2 - 12
    cv2.rectangle(img, (front, y1 + 4), (front + 8, y2 - 4), (60, 50, 40), -1)
    cv2.rectangle(img, (back, y1 + 5), (back + 6, y2 - 5), (70, 60, 50), -1)


@dataclass
class _Car:
    cid: int
    colour: str
    lane: int
    x: float
    speed: float
    length: int
    shade: float


class TrafficSource:
    """One camera; frames are deterministic for a seed."""

    def __init__(self, seed: int = 0, fps: float = 10.0, seconds: float = 60.0, *, rush: bool = False,
                 rate: float | None = None, noise: float = 3.0) -> None:
        if fps <= 0 or seconds <= 0:
            raise StreamError(f"traffic source: fps and seconds must be > 0 (got {fps}, {seconds})")
        self.rate_per_min = rate if rate is not None else (24.0 if rush else 8.0)
        if self.rate_per_min <= 0:
            raise StreamError("traffic source: rate must be > 0 cars per minute")
        self.seed, self.fps, self.seconds, self.noise = seed, fps, seconds, noise
        self.width, self.height = WIDTH, HEIGHT

    @classmethod
    def from_url(cls, url: str) -> "TrafficSource":
        u = urlparse(url)
        if u.scheme != "synthetic" or u.netloc != "traffic":
            raise StreamError(f"not a traffic URL: {url!r}; use synthetic://traffic?seed=&fps=&seconds=&rush=")
        q = {k: v[-1] for k, v in parse_qs(u.query).items()}
        unknown = set(q) - {"seed", "fps", "seconds", "rush", "rate", "noise"}
        if unknown:
            raise StreamError(f"synthetic URL {url!r}: unknown parameter(s) {sorted(unknown)}")
        try:
            return cls(int(q.get("seed", 0)), float(q.get("fps", 10)), float(q.get("seconds", 60)),
                       rush=q.get("rush", "0") in ("1", "true", "yes"),
                       rate=float(q["rate"]) if "rate" in q else None, noise=float(q.get("noise", 3)))
        except ValueError as e:
            raise StreamError(f"synthetic URL {url!r}: {e}") from None

    def frames(self) -> Iterator[RawFrame]:
        rng = random.Random(self.seed)
        np_rng = np.random.default_rng(self.seed)
        bg = background(random.Random(self.seed + 1))
        cars: list[_Car] = []
        entered = 0
        next_arrival = rng.expovariate(self.rate_per_min / 60.0)
        dt = 1.0 / self.fps
        for i in range(int(round(self.seconds * self.fps))):
            t = i * dt
            while t >= next_arrival:
                lane = rng.randrange(len(LANES))
                length = rng.randint(52, 72)
                speed = rng.uniform(45, 80)
                start = -length / 2 - 2 if LANES[lane][1] > 0 else WIDTH + length / 2 + 2
                ahead = [c for c in cars if c.lane == lane]
                clear = all(abs(c.x - start) > (c.length + length) / 2 + 50 for c in ahead)
                if clear:
                    if ahead:  # never faster than the car ahead: no overtaking inside a lane
                        speed = min(speed, min(c.speed for c in ahead))
                    cars.append(_Car(entered, rng.choice(list(COLOURS)), lane, start, speed, length,
                                     rng.uniform(0.85, 1.1)))
                    entered += 1
                    next_arrival += rng.expovariate(self.rate_per_min / 60.0)
                else:
                    next_arrival += 0.5  # wait for the lane to clear
            img = bg.copy()
            in_view = []
            for c in cars:
                y, d = LANES[c.lane]
                draw_car(img, c.x, y, c.length, COLOURS[c.colour], d, c.shade)
                if -c.length / 2 < c.x < WIDTH + c.length / 2:
                    in_view.append(f"{c.cid}:{c.colour}:{int(c.x)}:{y}")
            if self.noise > 0:
                img = np.clip(img.astype(np.float32) + np_rng.normal(0, self.noise, img.shape), 0, 255).astype(np.uint8)
            yield RawFrame(i, t, img, {"entered": entered, "cars": ";".join(in_view)}, keyframe=True)
            for c in cars:
                c.x += LANES[c.lane][1] * c.speed * dt
            cars = [c for c in cars if -c.length < c.x < WIDTH + c.length]


def parse_cars(text: str) -> list[tuple[int, str, float, float]]:
    """The ``cars`` truth tag → [(id, colour, cx, cy)]."""
    out: list[tuple[int, str, float, float]] = []
    for part in filter(None, text.split(";")):
        cid, colour, cx, cy = part.split(":")
        out.append((int(cid), colour, float(cx), float(cy)))
    return out
