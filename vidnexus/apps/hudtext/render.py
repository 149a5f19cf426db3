"""``synthetic://hudtext``: a game HUD drawn over real footage, in a font vidnexus never trained on.

Each frame is a frame of one of the shared real videos with two HUD fields drawn on it —
``SCORE 12345`` at the top left and ``KILLS 07`` at the top right — in Pillow's built-in
TrueType font (Aileron Regular; the project's digit reader only ever saw OpenCV's Hershey fonts),
at a size, colour, outline and position picked per stream by its seed (``style=``: ``outline``
text with a dark outline, ``panel`` text on a translucent dark panel, ``plain`` neither). The
values change as a game's do (the score often, the kills seldom) and travel in the frame tags, so
accuracy is a SQL query away. Fields are drawn inside :data:`FIELDS`' boxes (fractions of the
frame), where the app crops them.

    synthetic://hudtext?seed=3&fps=10&seconds=20&video=car&style=outline
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Iterator
from urllib.parse import parse_qs, urlparse

import numpy as np

from vidnexus.apps.spec import real_video
from vidnexus.errors import StreamError
from vidnexus.streams.synthetic import RawFrame, query_number, rate_problem

__all__ = ["FIELDS", "HudTextSource", "VIDEOS", "field_boxes"]

FIELDS: dict[str, tuple[float, float, float, float]] = {
    "score": (0.01, 0.015, 0.46, 0.12),
    "kills": (0.60, 0.015, 0.39, 0.12),
}
"""Field → its box (x, y, width, height) as fractions of the frame: where it is drawn and read."""
LABELS = {"score": "SCORE", "kills": "KILLS"}
DIGITS = {"score": 5, "kills": 2}
VIDEOS = {"car": "car-detection.mp4", "people": "one-by-one-person-detection.mp4"}
STYLES = ("outline", "panel", "plain")


def field_boxes(width: int, height: int) -> dict[str, tuple[int, int, int, int]]:
    """:data:`FIELDS` in pixels of a ``width`` × ``height`` frame."""
    return {f: (int(x * width), int(y * height), int(w * width), int(h * height)) for f, (x, y, w, h) in FIELDS.items()}


@dataclass(frozen=True)
class _Look:
    size: int
    fill: tuple[int, int, int]
    style: str
    offsets: dict[str, tuple[int, int]]


class HudTextSource:
    """HUD text over a real video (see the module). Frames are deterministic for a seed."""

    def __init__(self, seed: int = 0, fps: float = 10.0, seconds: float = 20.0, video: str = "car",
                 style: str | None = None) -> None:
        problem = rate_problem(fps, seconds)
        if problem:
            raise StreamError(f"synthetic hudtext: {problem}")
        if video not in VIDEOS:
            raise StreamError(f"synthetic hudtext: video={video!r}; choose one of {sorted(VIDEOS)}")
        if style is not None and style not in STYLES:
            raise StreamError(f"synthetic hudtext: style={style!r}; choose one of {list(STYLES)}")
        path = real_video(VIDEOS[video])
        if path is None:
            raise StreamError(f"synthetic hudtext: {VIDEOS[video]} not found under ../shared/data/real")
        self.seed, self.fps, self.seconds, self.path, self.style = seed, fps, seconds, path, style
        self.width, self.height = self._size()

    def _size(self) -> tuple[int, int]:
        import cv2

        cap = cv2.VideoCapture(str(self.path))
        try:
            w, h = int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)), int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT))
        finally:
            cap.release()
        if w <= 0 or h <= 0:
            raise StreamError(f"synthetic hudtext: cannot read {self.path}")
        return w, h

    @classmethod
    def from_url(cls, url: str) -> "HudTextSource":
        u = urlparse(url)
        q = {k: v[-1] for k, v in parse_qs(u.query).items()}
        unknown = set(q) - {"seed", "fps", "seconds", "video", "style"}
        if unknown:
            raise StreamError(f"synthetic URL {url!r}: unknown parameter(s) {sorted(unknown)}")
        try:
            return cls(seed=query_number(url, q, "seed", 0, int), fps=query_number(url, q, "fps", 10.0, float),
                       seconds=query_number(url, q, "seconds", 20.0, float), video=q.get("video", "car"),
                       style=q.get("style"))
        except StreamError as e:
            raise StreamError(str(e).replace("synthetic hudtext:", f"synthetic URL {url!r}:")) from None

    def _look(self, rng: random.Random) -> _Look:
        boxes = field_boxes(self.width, self.height)
        size = rng.randint(max(12, self.height // 24), max(14, self.height // 15))
        fill = (rng.randint(180, 255), rng.randint(180, 255), rng.randint(120, 255))
        style = self.style or rng.choice(STYLES)
        offsets = {}
        for f, (_x, _y, w, h) in boxes.items():
            room_x = max(0, w - int(size * 0.62 * (len(LABELS[f]) + 1 + DIGITS[f])) - 8)
            offsets[f] = (rng.randint(2, 2 + room_x // 2), rng.randint(1, max(1, h - size - 6)))
        return _Look(size, fill, style, offsets)

    def frames(self) -> Iterator[RawFrame]:
        import cv2
        from PIL import ImageFont

        rng = random.Random(self.seed)
        look = self._look(rng)
        font = ImageFont.load_default(size=look.size)
        boxes = field_boxes(self.width, self.height)
        score, kills = rng.randint(0, 20000), rng.randint(0, 20)
        cap = cv2.VideoCapture(str(self.path))
        src_fps = cap.get(cv2.CAP_PROP_FPS) or self.fps
        total = max(1, int(cap.get(cv2.CAP_PROP_FRAME_COUNT)))
        pos: int = -1
        img: Any = np.zeros((self.height, self.width, 3), np.uint8)
        try:
            for i in range(int(round(self.seconds * self.fps))):
                # The video's frame at this time (looped; read forward, reopened at a loop), then
                # the HUD drawn over it.
                want = int(i / self.fps * src_fps) % total
                if want < pos:
                    cap.release()
                    cap, pos = cv2.VideoCapture(str(self.path)), -1
                while pos < want:
                    ok, frame = cap.read()
                    if not ok:
                        break
                    pos, img = pos + 1, frame
                if rng.random() < 0.4:
                    score = min(10 ** DIGITS["score"] - 1, score + rng.randint(1, 250))
                if rng.random() < 0.06:
                    kills = min(10 ** DIGITS["kills"] - 1, kills + 1)
                truth = {"score": score, "kills": kills}
                yield RawFrame(i, i / self.fps, self._draw(img, truth, look, font, boxes), truth,
                               keyframe=True)
        finally:
            cap.release()

    @staticmethod
    def _draw(img: np.ndarray, truth: dict[str, int], look: _Look, font: Any,
              boxes: dict[str, tuple[int, int, int, int]]) -> np.ndarray:
        import cv2
        from PIL import Image, ImageDraw

        if look.style == "panel":
            over = img.copy()
            for x, y, w, h in boxes.values():
                cv2.rectangle(over, (x, y), (x + w, y + h), (20, 20, 20), -1)
            img = cv2.addWeighted(over, 0.6, img, 0.4, 0)
        pil = Image.fromarray(cv2.cvtColor(img, cv2.COLOR_BGR2RGB))
        draw = ImageDraw.Draw(pil)
        for f, (x, y, _w, _h) in boxes.items():
            dx, dy = look.offsets[f]
            text = f"{LABELS[f]} {truth[f]:0{DIGITS[f]}d}" if f == "kills" else f"{LABELS[f]} {truth[f]}"
            fill: tuple[int, ...] = look.fill
            if look.style == "plain":  # no outline, no panel: a colour that stands out where it is drawn
                _x, _y, bw, bh = boxes[f]
                fill = look.fill if img[y:y + bh, x:x + bw].mean() < 110 else tuple(c // 6 for c in look.fill)
            draw.text((x + dx, y + dy), text, font=font, fill=fill,
                      stroke_width=(1 if look.size < 24 else 2) if look.style == "outline" else 0,
                      stroke_fill=(0, 0, 0))
        return cv2.cvtColor(np.asarray(pil), cv2.COLOR_RGB2BGR)
