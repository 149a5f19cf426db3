"""Synthetic live game streams with ground truth: ``synthetic://game?game=3&seed=1&fps=10&seconds=30``.

Every one of the :data:`N_GAMES` games has its own look (:func:`style`): a HUD font, colours, where
its three two-digit counters sit (``score``, ``kills``, players ``alive``) and where the held item's
icon is drawn, plus its own set of :data:`ICONS_PER_GAME` item icons taken from the project's
120-class glyph task (:mod:`vidnexus.training.glyphs`). A streamer favours a few items: with
probability ``p`` the held item is one of ``dominant`` favourites, which change every ``change_s``
seconds — the per-streamer skew that specialization (WEG) exploits. Each frame's ``truth`` holds
the game, the three counters and the item's glyph class.

Example:
    >>> src = GameSource.from_url("synthetic://game?game=2&seed=5&fps=5&seconds=1")
    >>> f = next(iter(src.frames()))
    >>> f.image.shape, sorted(f.truth)
    ((180, 320, 3), ['alive', 'game', 'item', 'kills', 'score'])
    >>> f.truth["item"] in style(2).icons
    True
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Iterator
from urllib.parse import parse_qs, urlparse

import numpy as np

from vidnexus.errors import StreamError
from vidnexus.streams.synthetic import FONTS, Blob, HudLayout, RawFrame, render_digit_cell

__all__ = ["N_GAMES", "ICONS_PER_GAME", "FIELDS", "GameStyle", "style", "zipf_games", "GameSource", "ICON_SIZE"]

N_GAMES = 20
ICONS_PER_GAME = 24
ICON_SIZE = 32
FIELDS = ("score", "kills", "alive")
WIDTH, HEIGHT = 320, 180


@dataclass(frozen=True)
class GameStyle:
    """How one game looks: HUD font and colours, the counters' layout, the icon's place and set."""

    game: int
    font: int
    fg: tuple[int, int, int]
    bg: tuple[int, int, int]
    layout: HudLayout
    icon_xy: tuple[int, int]
    icons: tuple[int, ...]


def style(game: int) -> GameStyle:
    """The look of game ``game`` (0 ≤ game < N_GAMES), fixed by its number."""
    if not 0 <= game < N_GAMES:
        raise StreamError(f"game {game} is outside 0..{N_GAMES - 1}")
    from vidnexus.training.glyphs import N_CLASSES

    rng = random.Random(7_000 + game)
    fg = (rng.randint(170, 255), rng.randint(170, 255), rng.randint(130, 255))
    bg = (rng.randint(0, 60), rng.randint(0, 60), rng.randint(0, 60))
    if rng.random() < 0.25:
        fg, bg = bg, fg
    top = game % 2 == 0
    left = (game // 2) % 2 == 0
    y = 8 if top else HEIGHT - 8 - 24
    x0 = 8 if left else WIDTH - 8 - 128
    layout = HudLayout({name: (x0 + 48 * k, y, 2) for k, name in enumerate(FIELDS)})
    icon_y = HEIGHT - 8 - ICON_SIZE if top else 8
    icon_x = WIDTH - 8 - ICON_SIZE if (game // 4) % 2 == 0 else 8
    icons = tuple(sorted(np.random.default_rng(9_000 + game).choice(N_CLASSES, ICONS_PER_GAME, replace=False).tolist()))
    return GameStyle(game, FONTS[game % len(FONTS)], fg, bg, layout, (icon_x, icon_y), icons)


def zipf_games(n_streams: int, seed: int = 0, s: float = 0.9) -> list[int]:
    """Which game each of ``n_streams`` streamers plays: game k has popularity ∝ 1/(k+1)^s."""
    w = 1.0 / np.arange(1, N_GAMES + 1) ** s
    rng = np.random.default_rng(seed)
    return [int(g) for g in rng.choice(N_GAMES, n_streams, p=w / w.sum())]


class GameSource:
    """One streamer playing one game; frames are deterministic for (game, seed)."""

    def __init__(self, game: int = 0, seed: int = 0, fps: float = 10.0, seconds: float = 30.0, *,
                 dominant: int = 4, p: float = 0.9, change_s: float = 60.0, noise: float = 4.0) -> None:
        if fps <= 0 or seconds <= 0:
            raise StreamError(f"game source: fps and seconds must be > 0 (got {fps}, {seconds})")
        if not 1 <= dominant <= ICONS_PER_GAME or not 0 <= p <= 1 or change_s <= 0:
            raise StreamError(f"game source: need 1 ≤ dominant ≤ {ICONS_PER_GAME}, 0 ≤ p ≤ 1, change_s > 0")
        self.style = style(game)
        self.game, self.seed, self.fps, self.seconds = game, seed, fps, seconds
        self.dominant, self.p, self.change_s, self.noise = dominant, p, change_s, noise
        self.width, self.height = WIDTH, HEIGHT

    @classmethod
    def from_url(cls, url: str) -> "GameSource":
        u = urlparse(url)
        if u.scheme != "synthetic" or u.netloc != "game":
            raise StreamError(f"not a game URL: {url!r}; use synthetic://game?game=&seed=&fps=&seconds=")
        q = {k: v[-1] for k, v in parse_qs(u.query).items()}
        known = {"game", "seed", "fps", "seconds", "dominant", "p", "change_s", "noise"}
        unknown = set(q) - known
        if unknown:
            raise StreamError(f"synthetic URL {url!r}: unknown parameter(s) {sorted(unknown)}")
        try:
            return cls(int(q.get("game", 0)), int(q.get("seed", 0)), float(q.get("fps", 10)),
                       float(q.get("seconds", 30)), dominant=int(q.get("dominant", 4)), p=float(q.get("p", 0.9)),
                       change_s=float(q.get("change_s", 60)), noise=float(q.get("noise", 4)))
        except ValueError as e:
            raise StreamError(f"synthetic URL {url!r}: {e}") from None

    def frames(self) -> Iterator[RawFrame]:
        from vidnexus.training.glyphs import render_icon

        st = self.style
        rng = random.Random(self.seed * 1_000 + self.game)
        np_rng = np.random.default_rng(self.seed * 1_000 + self.game)
        icons = list(st.icons)
        score, kills, alive = 0, 0, rng.randint(60, 99)
        favourites: list[int] = []
        item, item_until, fav_until = icons[0], -1.0, -1.0
        blobs = [Blob.random(rng, WIDTH, HEIGHT, (10, 40)) for _ in range(6)]
        n = int(round(self.seconds * self.fps))
        dt = 1.0 / self.fps
        for i in range(n):
            t = i * dt
            if t >= fav_until:
                favourites = [int(c) for c in np_rng.choice(icons, self.dominant, replace=False)]
                fav_until = t + self.change_s
            if t >= item_until:
                rest = [c for c in icons if c not in favourites]
                item = rng.choice(favourites) if (rng.random() < self.p or not rest) else rng.choice(rest)
                item_until = t + rng.uniform(0.2, 1.0)
            if rng.random() < 0.05:
                score = min(99, score + rng.randint(1, 3))
            if rng.random() < 0.04:
                kills = min(99, kills + 1)
            if rng.random() < 0.06:
                alive = max(1, alive - rng.randint(1, 3))
            img = np.empty((HEIGHT, WIDTH, 3), np.uint8)
            ramp = np.linspace(50, 150, WIDTH, dtype=np.float32)
            img[:] = np.stack([ramp * 0.7, ramp, ramp * 0.8], axis=-1).astype(np.uint8)
            for b in blobs:
                b.step_and_draw(img, dt, WIDTH, HEIGHT)
            truth = {"game": self.game, "score": score, "kills": kills, "alive": alive, "item": item}
            for name, k, (x, y, _w, _h) in st.layout.cells():
                render_digit_cell(img, int(f"{truth[name]:02d}"[k]), x, y, font=st.font, fg=st.fg, bg=st.bg, rng=rng)
            ix, iy = st.icon_xy
            img[iy : iy + ICON_SIZE, ix : ix + ICON_SIZE] = render_icon(item, np_rng)
            if self.noise > 0:
                img = np.clip(img.astype(np.float32) + np_rng.normal(0, self.noise, img.shape), 0, 255).astype(np.uint8)
            yield RawFrame(i, t, img, truth, keyframe=True)
