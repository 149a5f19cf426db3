"""``synthetic://`` sources: deterministic rendered video with ground truth, for tests and demos.

``synthetic://hud?seed=1&fps=10&seconds=30&width=320&height=180`` renders a moving scene with a
game-style HUD: two numbers (``score``, 3 digits, and ``kills``, 2 digits) drawn in fixed-width
digit cells at known positions. Each frame carries its ground truth in ``tags``.

Example:
    >>> src = SyntheticSource.from_url("synthetic://hud?seed=3&fps=5&seconds=1")
    >>> frames = list(src.frames())
    >>> len(frames), frames[0].image.shape
    (5, (180, 320, 3))
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping
from urllib.parse import parse_qs, urlparse

import numpy as np

from vidnexus.errors import StreamError

__all__ = ["SyntheticSource", "synthetic_source", "GENERATORS", "RawFrame", "HudLayout", "render_digit_cell", "HUD",
           "FONTS", "Blob", "query_number", "rate_problem", "size_problem"]

MAX_FPS = 1000.0
MAX_SECONDS = 1e7  # ~116 days of video
MAX_SIDE = 4096
FONTS = (0, 2, 3, 4, 6, 7)  # cv2 Hershey faces that render all ten digits distinctly
CELL_W, CELL_H = 16, 24


@dataclass(frozen=True)
class HudLayout:
    """Where the HUD numbers are: name → (x, y, n_digits) of the first digit cell's top-left."""

    fields: dict[str, tuple[int, int, int]] = field(
        default_factory=lambda: {"score": (8, 8, 3), "kills": (8, 40, 2)}
    )

    def cells(self) -> list[tuple[str, int, tuple[int, int, int, int]]]:
        """(field, digit index, (x, y, w, h)) for every digit cell, in reading order."""
        out = []
        for name, (x, y, n) in self.fields.items():
            for k in range(n):
                out.append((name, k, (x + k * CELL_W, y, CELL_W, CELL_H)))
        return out


HUD = HudLayout()


@dataclass(frozen=True)
class RawFrame:
    """A decoded frame: its index in the source, presentation time (s, from the first frame), its
    pixels (a BGR array, or a video decoder's :class:`~vidnexus.streams.images.Planes`), ground truth
    (synthetic sources) and whether it is a keyframe."""

    index: int
    pts: float
    image: Any
    truth: Mapping[str, int | str] = field(default_factory=dict)
    keyframe: bool = False


def render_digit_cell(
    img: Any, digit: int, x: int, y: int, *, font: int, fg: tuple[int, int, int],
    bg: tuple[int, int, int], rng: random.Random,
) -> None:
    """Draw one digit into the CELL_W×CELL_H cell at (x, y) with a little jitter."""
    import cv2

    img[y : y + CELL_H, x : x + CELL_W] = bg
    scale = rng.uniform(0.62, 0.75)
    thick = rng.choice((1, 2))
    (tw, th), _ = cv2.getTextSize(str(digit), font, scale, thick)
    ox = x + (CELL_W - tw) // 2 + rng.randint(-1, 1)
    oy = y + (CELL_H + th) // 2 + rng.randint(-1, 1)
    cv2.putText(img, str(digit), (ox, oy), font, scale, fg, thick, cv2.LINE_AA)


@dataclass
class Blob:
    """A coloured disc drifting across a synthetic frame (background motion), wrapping at the edges."""

    x: float
    y: float
    vx: float
    vy: float
    radius: int
    color: tuple[int, int, int]

    @classmethod
    def random(cls, rng: random.Random, width: int, height: int, radius: tuple[int, int]) -> "Blob":
        return cls(rng.uniform(0, width), rng.uniform(0, height), rng.uniform(-40, 40), rng.uniform(-30, 30),
                   rng.randint(*radius), (rng.randint(40, 255), rng.randint(40, 255), rng.randint(40, 255)))

    def step_and_draw(self, img: np.ndarray, dt: float, width: int, height: int) -> None:
        """Move by ``dt`` seconds, then draw onto ``img``."""
        import cv2

        self.x = (self.x + self.vx * dt) % width
        self.y = (self.y + self.vy * dt) % height
        cv2.circle(img, (int(self.x), int(self.y)), self.radius, self.color, -1)


class SyntheticSource:
    """A rendered HUD stream; frames are deterministic for a given seed."""

    def __init__(
        self, seed: int = 0, fps: float = 10.0, seconds: float = 30.0, width: int = 320,
        height: int = 180, noise: float = 6.0,
    ) -> None:
        problem = rate_problem(fps, seconds) or size_problem(width, height, (120, 80))
        if not problem and not (math.isfinite(noise) and 0 <= noise <= 255):
            problem = f"noise={noise!r} is not allowed; use a number from 0 to 255"
        if problem:
            raise StreamError(f"synthetic source: {problem}")
        self.seed, self.fps, self.seconds = seed, fps, seconds
        self.width, self.height, self.noise = width, height, noise

    @classmethod
    def from_url(cls, url: str) -> "SyntheticSource":
        u = urlparse(url)
        if u.scheme != "synthetic" or u.netloc not in ("hud", ""):
            raise StreamError(f"unsupported synthetic URL {url!r}; use synthetic://hud?seed=&fps=&seconds=")
        q = {k: v[-1] for k, v in parse_qs(u.query).items()}
        known = {"seed", "fps", "seconds", "width", "height", "noise"}
        unknown = set(q) - known
        if unknown:
            raise StreamError(f"synthetic URL {url!r}: unknown parameter(s) {sorted(unknown)}")
        args = dict(seed=query_number(url, q, "seed", 0, int), fps=query_number(url, q, "fps", 10.0, float),
                    seconds=query_number(url, q, "seconds", 30.0, float), width=query_number(url, q, "width", 320, int),
                    height=query_number(url, q, "height", 180, int), noise=query_number(url, q, "noise", 6.0, float))
        try:
            return cls(**args)
        except StreamError as e:
            raise StreamError(str(e).replace("synthetic source:", f"synthetic URL {url!r}:")) from None

    def frames(self) -> Iterator[RawFrame]:
        rng = random.Random(self.seed)
        font = rng.choice(FONTS)
        fg = (rng.randint(200, 255), rng.randint(200, 255), rng.randint(160, 255))
        bg = (rng.randint(0, 50), rng.randint(0, 50), rng.randint(0, 50))
        score, kills = rng.randint(0, 200), rng.randint(0, 10)
        blobs = [Blob.random(rng, self.width, self.height, (8, 30)) for _ in range(5)]
        n = int(round(self.seconds * self.fps))
        np_rng = np.random.default_rng(self.seed)
        for i in range(n):
            dt = 1.0 / self.fps
            img = np.empty((self.height, self.width, 3), np.uint8)
            ramp = np.linspace(60, 140, self.width, dtype=np.float32)
            img[:] = np.stack([ramp * 0.6, ramp * 0.8, ramp], axis=-1).astype(np.uint8)
            for b in blobs:
                b.step_and_draw(img, dt, self.width, self.height)
            if rng.random() < 0.3:
                score = min(999, score + rng.randint(1, 25))
            if rng.random() < 0.05:
                kills = min(99, kills + 1)
            truth = {"score": score, "kills": kills}
            for name, k, (x, y, _w, _h) in HUD.cells():
                ndig = HUD.fields[name][2]
                digit = int(f"{truth[name]:0{ndig}d}"[k])
                render_digit_cell(img, digit, x, y, font=font, fg=fg, bg=bg, rng=rng)
            if self.noise > 0:
                noise = np_rng.normal(0, self.noise, img.shape)
                img = np.clip(img.astype(np.float32) + noise, 0, 255).astype(np.uint8)
            yield RawFrame(i, i / self.fps, img, truth, keyframe=True)


def query_number(url: str, q: dict[str, str], key: str, default: Any, kind: type) -> Any:
    """``q[key]`` as a finite ``kind`` (int or float), or ``default``; a StreamError naming the
    parameter otherwise."""
    if key not in q:
        return default
    try:
        v = kind(q[key])
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        raise StreamError(f"synthetic URL {url!r}: {key}={q[key]!r} is not {what}") from None
    if kind is float and not math.isfinite(v):
        raise StreamError(f"synthetic URL {url!r}: {key}={q[key]!r} is not a finite number")
    return v


def rate_problem(fps: Any, seconds: Any) -> str | None:
    """What is wrong with a generator's frame rate and length, or None."""
    if not (isinstance(fps, (int, float)) and math.isfinite(fps) and 0 < fps <= MAX_FPS):
        return f"fps={fps!r} is not allowed; use a finite number > 0 and <= {MAX_FPS:g}"
    if not (isinstance(seconds, (int, float)) and math.isfinite(seconds) and 0 < seconds <= MAX_SECONDS):
        return f"seconds={seconds!r} is not allowed; use a finite number > 0 and <= {MAX_SECONDS:g}"
    return None


def size_problem(width: Any, height: Any, least: tuple[int, int] = (16, 16)) -> str | None:
    """What is wrong with a generator's frame size, or None."""
    ok = all(isinstance(v, int) and lo <= v <= MAX_SIDE for v, lo in ((width, least[0]), (height, least[1])))
    if not ok:
        return (f"{width}x{height} is not allowed; use a width from {least[0]} and a height from {least[1]}, "
                f"each at most {MAX_SIDE}")
    return None


GENERATORS: dict[str, str] = {
    "hud": "vidnexus.streams.synthetic:SyntheticSource",
    "game": "vidnexus.apps.game.render:GameSource",
    "traffic": "vidnexus.apps.traffic.render:TrafficSource",
    "dance": "vidnexus.apps.dance.render:DanceSource",
    "hudtext": "vidnexus.apps.hudtext.render:HudTextSource",
}
"""``synthetic://<name>?…`` → the generator class (``from_url``, ``frames()``, ``fps``, ``seconds``,
``width``, ``height``). The apps' generators live with their apps."""


def synthetic_source(url: str) -> Any:
    """The generator for a ``synthetic://`` URL, or a StreamError naming the known ones."""
    import importlib

    u = urlparse(url)
    name = u.netloc or "hud"
    if u.scheme != "synthetic" or name not in GENERATORS:
        raise StreamError(f"unsupported synthetic URL {url!r}; known generators: "
                          + ", ".join(f"synthetic://{g}" for g in GENERATORS))
    for key, value in parse_qs(u.query).items():  # every generator: no inf, nan or 1e400 anywhere
        try:
            finite = math.isfinite(float(value[-1]))
        except ValueError:
            continue
        if not finite:
            raise StreamError(f"synthetic URL {url!r}: {key}={value[-1]!r} is not a finite number")
    mod, _, cls = GENERATORS[name].partition(":")
    try:
        src = getattr(importlib.import_module(mod), cls).from_url(url)
    except StreamError:
        raise
    except (ValueError, TypeError, ArithmeticError) as e:
        raise StreamError(f"synthetic URL {url!r}: {e}") from None
    problem = rate_problem(src.fps, src.seconds) or size_problem(src.width, src.height)
    if problem:
        raise StreamError(f"synthetic URL {url!r}: {problem}")
    return src
