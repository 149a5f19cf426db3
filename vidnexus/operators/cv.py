"""Built-in CPU operators on images (OpenCV): resize, crops, regions of interest, background
subtraction, frame-difference skipping, and OpenCV's classical detectors (the HOG people detector
and Haar cascades). Each is a small object: configuration in ``__init__``, per-stream state (where
there is any) inside, one method per frame. No clocks: time is counted in frames.

Classical detectors are real recognizers (no training by us, no random weights): the HOG+SVM
people detector of Dalal & Triggs shipped with OpenCV, and OpenCV's Haar cascades.

Example:
    >>> import numpy as np
    >>> img = np.zeros((432, 768, 3), np.uint8)
    >>> small, scale = Resize(max_side=384)(img)
    >>> small.shape, scale
    ((216, 384, 3), 0.5)
    >>> [c.shape for c in crop_boxes(img, [Box(10, 20, 50, 100)])]
    [(80, 40, 3)]
"""

from __future__ import annotations

from typing import Any, Literal, Sequence

import cv2
import cv2.data  # the bundled Haar cascades (a submodule the stubs do not declare on cv2)
import numpy as np

from vidnexus.operators.tracking import BlobTracker, Box, IouTracker, Track, moving_tracks, nms

__all__ = [
    "Resize",
    "crop_boxes",
    "text_line",
    "RegionOfInterest",
    "MotionDetector",
    "FrameDiffSkip",
    "MovingPeople",
    "HogPeopleDetector",
    "HaarDetector",
    "HAAR_CASCADES",
    "MotionCounter",
]


class Resize:
    """Downscale so the longer side is at most ``max_side`` (never upscales). Returns
    ``(image, scale)``; multiply boxes found on the result by ``1 / scale`` to map them back."""

    def __init__(self, max_side: int) -> None:
        if max_side <= 0:
            raise ValueError(f"Resize: max_side must be > 0, got {max_side}")
        self.max_side = max_side

    def __call__(self, image: np.ndarray) -> tuple[np.ndarray, float]:
        h, w = image.shape[:2]
        s = min(1.0, self.max_side / max(h, w))
        if s == 1.0:
            return image, 1.0
        return cv2.resize(image, (round(w * s), round(h * s)), interpolation=cv2.INTER_AREA), s


def crop_boxes(image: np.ndarray, boxes: Sequence[Box], pad: float = 0.0,
               min_size: int = 2) -> list[np.ndarray]:
    """One crop per box (``pad`` grows each side by that fraction of the box), clipped to the
    image; boxes smaller than ``min_size`` pixels after clipping give no crop."""
    h, w = image.shape[:2]
    out = []
    for b in boxes:
        px, py = (b.x2 - b.x1) * pad, (b.y2 - b.y1) * pad
        x1, y1 = max(0, int(b.x1 - px)), max(0, int(b.y1 - py))
        x2, y2 = min(w, int(round(b.x2 + px))), min(h, int(round(b.y2 + py)))
        if x2 - x1 >= min_size and y2 - y1 >= min_size:
            out.append(image[y1:y2, x1:x2])
    return out


def text_line(image: np.ndarray, pad: int = 4) -> np.ndarray:
    """The crop of ``image`` (uint8 BGR or gray) around its most prominent line of text, for a
    text recogniser that wants one tight line (a HUD field's box is larger than its text, whose
    size varies). Strong edges (a morphological gradient, Otsu's threshold) closed along the line
    into blobs; the largest blob shaped like text (at least 6 pixels high, wider than high, not the
    whole height) and every such blob sharing most of its rows make the line, grown by ``pad``.
    The whole image when nothing looks like text.

    Example:
        >>> img = np.full((60, 300, 3), 90, np.uint8)
        >>> _ = cv2.putText(img, "SCORE 123", (40, 40), cv2.FONT_HERSHEY_SIMPLEX, 0.7, (255, 255, 255), 2)
        >>> text_line(img).shape[:2]
        (28, 134)
    """
    g = cv2.cvtColor(image, cv2.COLOR_BGR2GRAY) if image.ndim == 3 else image
    height, width = g.shape
    grad = cv2.morphologyEx(g, cv2.MORPH_GRADIENT, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (3, 3)))
    _, edges = cv2.threshold(grad, 0, 255, cv2.THRESH_BINARY | cv2.THRESH_OTSU)
    edges = cv2.morphologyEx(edges, cv2.MORPH_CLOSE, cv2.getStructuringElement(cv2.MORPH_RECT, (9, 3)))
    n, _, stats, _ = cv2.connectedComponentsWithStats(edges)
    if n <= 1:
        return image
    x, y, w, h, area = (stats[1:, k] for k in range(5))
    texty = (h >= 6) & (h <= 0.9 * height) & (w >= 1.2 * h)
    if not texty.any():
        return image
    k = int(np.argmax(np.where(texty, area, -1)))
    top, bottom = y[k], y[k] + h[k]
    line = texty & ((np.minimum(y + h, bottom) - np.maximum(y, top)) >= 0.5 * np.minimum(h, bottom - top))
    line[k] = True
    x1, x2 = int(x[line].min()), int((x + w)[line].max())
    y1, y2 = int(y[line].min()), int((y + h)[line].max())
    return image[max(0, y1 - pad):min(height, y2 + pad), max(0, x1 - pad):min(width, x2 + pad)]


class RegionOfInterest:
    """A polygon of interest (pixel coordinates): mask images to it, or keep boxes whose centre is
    inside it."""

    def __init__(self, points: Sequence[tuple[int, int]]) -> None:
        if len(points) < 3:
            raise ValueError("RegionOfInterest needs at least 3 points")
        self.points = np.asarray(points, np.int32)

    def mask(self, image: np.ndarray) -> np.ndarray:
        m = np.zeros(image.shape[:2], np.uint8)
        cv2.fillPoly(m, [self.points], 255)
        return cv2.bitwise_and(image, image, mask=m)

    def contains(self, box: Box) -> bool:
        cx, cy = box.center
        return cv2.pointPolygonTest(self.points.reshape(-1, 1, 2), (float(cx), float(cy)), False) >= 0

    def keep(self, boxes: Sequence[Box]) -> list[Box]:
        return [b for b in boxes if self.contains(b)]


def blob_boxes(mask: np.ndarray, kernel: np.ndarray, min_area: float) -> tuple[list[Box], np.ndarray]:
    """Boxes around the blobs of a binary foreground mask (opened, then dilated twice with
    ``kernel``) of at least ``min_area`` pixels, top to bottom; and the cleaned mask."""
    fg = cv2.dilate(cv2.morphologyEx(mask, cv2.MORPH_OPEN, kernel), kernel, iterations=2)
    contours, _ = cv2.findContours(fg, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
    boxes = []
    for c in contours:
        if cv2.contourArea(c) >= min_area:
            x, y, w, h = cv2.boundingRect(c)
            boxes.append(Box(x, y, x + w, y + h, 1.0, "motion"))
    return sorted(boxes, key=lambda b: (b.y1, b.x1)), fg


class MotionDetector:
    """Background subtraction (OpenCV MOG2) per stream: ``apply(image)`` returns boxes around
    moving blobs of at least ``min_area`` pixels (shadows ignored). The first ``warmup`` frames
    only learn the background."""

    def __init__(self, history: int = 200, var_threshold: float = 25.0, min_area: int = 400,
                 warmup: int = 5, learning_rate: float = -1.0) -> None:
        self.min_area, self.warmup, self.learning_rate = min_area, warmup, learning_rate
        self._bg = cv2.createBackgroundSubtractorMOG2(history=history, varThreshold=var_threshold,
                                                      detectShadows=True)
        self._kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (5, 5))
        self.frames = 0

    def apply(self, image: np.ndarray) -> list[Box]:
        fg = self._bg.apply(image, learningRate=self.learning_rate)
        self.frames += 1
        if self.frames <= self.warmup:
            return []
        _, fg = cv2.threshold(fg, 200, 255, cv2.THRESH_BINARY)  # 127 marks shadows; drop them
        boxes, _ = blob_boxes(fg, self._kernel, self.min_area)
        return boxes


class HeldBackground:
    """Foreground of a fixed camera that keeps people who stand still and ignores the camera's own
    exposure changes: a running-average background, learned (at ``alpha`` per frame) only where
    nothing is in the foreground, and each frame scaled per channel to the background's brightness
    first (the ratio of medians over the pixels that were background in the last frame: a camera's
    auto-exposure, which brightens the whole room when a dark-clothed person walks in, is not a
    foreground). ``apply(image)`` returns boxes around blobs of at least ``min_area`` pixels where
    some channel differs from the background by more than ``threshold``; the first ``warmup``
    frames only learn the background (the scene should be empty then). Foreground pixels are learned
    too, 50 times slower: what stays for minutes (a moved chair) becomes background.

    MOG2 (:class:`MotionDetector`) is the better choice for things that keep moving (cars); it
    absorbs a person standing still within seconds, and a camera's exposure change makes all of a
    frame foreground.
    """

    def __init__(self, threshold: float = 30.0, alpha: float = 0.05, warmup: int = 5, min_area: int = 300) -> None:
        self.threshold, self.alpha, self.warmup, self.min_area = threshold, alpha, warmup, min_area
        self._kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (5, 5))
        self._bg: np.ndarray | None = None
        self._was_fg: np.ndarray | None = None
        self.frames = 0

    def apply(self, image: np.ndarray) -> list[Box]:
        x = image.astype(np.float32)
        self.frames += 1
        if self._bg is None or self._bg.shape != x.shape:
            self._bg, self._was_fg, self.frames = x.copy(), np.zeros(x.shape[:2], bool), 1
            return []
        if self.frames <= self.warmup:
            self._bg += (x - self._bg) / self.frames
            return []
        assert self._was_fg is not None
        ref = ~self._was_fg
        if ref.sum() < 0.2 * ref.size:  # mostly foreground: scale by the whole frame
            ref = np.ones_like(ref)
        gain = np.median(self._bg[ref], axis=0) / np.maximum(1.0, np.median(x[ref], axis=0))
        x *= gain
        boxes, fg = blob_boxes((np.abs(x - self._bg).max(axis=2) > self.threshold).astype(np.uint8) * 255,
                               self._kernel, self.min_area)
        self._was_fg = fg > 0
        learn = ~self._was_fg
        self._bg[learn] += self.alpha * (x[learn] - self._bg[learn])
        # What stays foreground for minutes becomes background (a moved chair, a lamp switched on):
        # 1/50 of the rate, so a person standing still for a minute at 5 fps is 8% faded.
        self._bg[self._was_fg] += self.alpha / 50 * (x[self._was_fg] - self._bg[self._was_fg])
        return boxes


class MovingPeople:
    """People in a fixed camera's view, per frame: a :class:`HeldBackground` on the frame scaled to
    ``max_side`` (people who stand still stay; the camera's exposure is no one), its blobs joined
    into one track per person (:class:`~vidnexus.operators.tracking.BlobTracker`: head, body and legs
    that come apart). One per stream; ``apply`` gives the tracks seen in this frame and their boxes
    in the frame's own pixels (the mask is dilated: a box is a few pixels larger than the person).

    Example:
        >>> people = MovingPeople()
        >>> room = np.full((240, 320, 3), 120, np.uint8)
        >>> for _ in range(5):
        ...     _ = people.apply(room)
        >>> walker = room.copy(); walker[60:200, 150:190] = 20
        >>> [(t.track_id, box) for t, box in people.apply(walker)]
        [(1, (146.0, 56.0, 194.0, 204.0))]
    """

    def __init__(self, max_side: int = 384) -> None:
        self.resize = Resize(max_side)
        self.background = HeldBackground(threshold=30.0, alpha=0.05, warmup=5, min_area=300)
        self.tracker = BlobTracker(margin=20.0, gap=20.0, max_missed=5)
        self.n = 0

    def apply(self, image: np.ndarray) -> list[tuple[Track, tuple[float, float, float, float]]]:
        small, scale = self.resize(image)
        seen = self.tracker.update(self.background.apply(small), self.n)
        self.n += 1
        return [(t, (t.box.x1 / scale, t.box.y1 / scale, t.box.x2 / scale, t.box.y2 / scale)) for t in seen]


class FrameDiffSkip:
    """Skip frames that barely differ from the last frame kept: ``keep(image)`` is True when the
    mean absolute difference of the grey 64-pixel-wide thumbnails exceeds ``threshold`` (0–255)."""

    def __init__(self, threshold: float = 4.0, width: int = 64) -> None:
        self.threshold, self.width = threshold, width
        self._last: np.ndarray | None = None
        self.kept = self.skipped = 0

    def _thumb(self, image: np.ndarray) -> np.ndarray:
        h, w = image.shape[:2]
        g = cv2.cvtColor(image, cv2.COLOR_BGR2GRAY) if image.ndim == 3 else image
        return cv2.resize(g, (self.width, max(1, round(h * self.width / w))), interpolation=cv2.INTER_AREA)

    def keep(self, image: np.ndarray) -> bool:
        t = self._thumb(image).astype(np.int16)
        if self._last is not None and float(np.abs(t - self._last).mean()) <= self.threshold:
            self.skipped += 1
            return False
        self._last = t
        self.kept += 1
        return True


class HogPeopleDetector:
    """OpenCV's HOG + linear SVM pedestrian detector (Dalal & Triggs), on a downscaled copy.

    The defaults were chosen on the real footage in the test data (768×432, people seen from
    behind): full resolution, a 4-pixel stride and score ≥ 0.7 find the person in most frames with
    someone in the room and nothing in empty frames, at about 0.4 s per frame on one CPU core.
    Overlapping part detections of one person are merged (IoU and containment NMS).

    Args:
        max_side: detect on an image at most this large (speed); boxes are mapped back.
        hit_threshold: SVM margin a window needs (higher: fewer, surer detections).
        min_score: drop detections whose SVM weight is below this.
    """

    def __init__(self, max_side: int = 768, hit_threshold: float = 0.0, win_stride: int = 4,
                 scale: float = 1.03, min_score: float = 0.7, nms_iou: float = 0.3,
                 containment: float = 0.7) -> None:
        self._hog = cv2.HOGDescriptor()
        # An ndarray at run time (the stubs say Sequence[float]); asarray returns that same array.
        self._hog.setSVMDetector(np.asarray(cv2.HOGDescriptor.getDefaultPeopleDetector(), np.float32))
        self.resize = Resize(max_side)
        self.hit_threshold, self.win_stride, self.scale = hit_threshold, win_stride, scale
        self.min_score, self.nms_iou, self.containment = min_score, nms_iou, containment

    def detect(self, image: np.ndarray) -> list[Box]:
        small, s = self.resize(image)
        rects, weights = self._hog.detectMultiScale(
            small, hitThreshold=self.hit_threshold, winStride=(self.win_stride, self.win_stride),
            padding=(16, 16), scale=self.scale)
        boxes = [Box(x / s, y / s, (x + w) / s, (y + h) / s, float(np.ravel(wt)[0]), "person")
                 for (x, y, w, h), wt in zip(rects, weights)]
        return nms([b for b in boxes if b.score >= self.min_score], self.nms_iou, self.containment)


HAAR_CASCADES = {
    "face": "haarcascade_frontalface_default.xml",
    "fullbody": "haarcascade_fullbody.xml",
    "upperbody": "haarcascade_upperbody.xml",
    "profileface": "haarcascade_profileface.xml",
}


class HaarDetector:
    """An OpenCV Haar cascade (``face``, ``fullbody``, ``upperbody``, ``profileface``, or a path to
    a cascade XML) on a downscaled grey, histogram-equalized copy."""

    def __init__(self, cascade: Literal["face", "fullbody", "upperbody", "profileface"] | str = "face",
                 max_side: int = 640, scale_factor: float = 1.1, min_neighbors: int = 4,
                 min_size: tuple[int, int] = (24, 24)) -> None:
        path = cv2.data.haarcascades + HAAR_CASCADES[cascade] if cascade in HAAR_CASCADES else cascade
        self._cc = cv2.CascadeClassifier(path)
        if self._cc.empty():
            raise ValueError(f"HaarDetector: cannot load cascade {cascade!r} ({path})")
        self.label = cascade if cascade in HAAR_CASCADES else "object"
        self.resize = Resize(max_side)
        self.scale_factor, self.min_neighbors, self.min_size = scale_factor, min_neighbors, min_size

    def detect(self, image: np.ndarray) -> list[Box]:
        small, s = self.resize(image)
        g = cv2.equalizeHist(cv2.cvtColor(small, cv2.COLOR_BGR2GRAY) if small.ndim == 3 else small)
        found: Any = self._cc.detectMultiScale(g, scaleFactor=self.scale_factor, minNeighbors=self.min_neighbors,
                                               minSize=self.min_size)
        return [Box(x / s, y / s, (x + w) / s, (y + h) / s, 1.0, self.label) for (x, y, w, h) in found]


class MotionCounter:
    """Count objects passing through a fixed camera's view without a detector: background
    subtraction → boxes of moving blobs → IoU/centre-distance tracking → tracks seen in at least
    ``min_hits`` sampled frames whose centre travelled ``min_displacement`` pixels (on the
    ``max_side`` image). Lighting flicker and auto-exposure jumps make short or static blobs, which do
    not count. Per stream: one instance per camera.

    Tuned on the shared parking-lot footage (``car-detection.mp4``): at 3, 5 and 10 sampled fps it
    counts the 4 cars a person counts (tests/data/hand_counts.json).
    """

    def __init__(self, max_side: int = 384, min_area: int = 1500, min_hits: int = 5,
                 min_displacement: float = 40.0, max_center_distance: float = 80.0) -> None:
        self.resize = Resize(max_side)
        self.motion = MotionDetector(min_area=min_area, warmup=5)
        self.min_hits, self.min_displacement = min_hits, min_displacement
        self.tracker = IouTracker(iou_threshold=0.1, max_missed=3, max_center_distance=max_center_distance,
                                  keep_finished=0, on_finish=self._finished)
        self.finished_moving = 0
        """Finished tracks that count (the tracker itself keeps none: memory stays flat on a live camera)."""
        self._n = 0

    def _finished(self, t: Track) -> None:
        self.finished_moving += bool(moving_tracks([t], self.min_hits, self.min_displacement))

    def apply(self, image: np.ndarray) -> list[Track]:
        """Feed the next sampled frame; returns the tracks seen in it (boxes on the resized image)."""
        return [t for t, _ in self.frame_tracks(image)]

    def frame_tracks(self, image: np.ndarray) -> list[tuple[Track, tuple[int, int, int, int]]]:
        """:meth:`apply`, each track with its box on the frame's own pixels (clipped to the frame;
        the track keeps its box on the resized image)."""
        small, scale = self.resize(image)
        seen = self.tracker.update(self.motion.apply(small), self._n)
        self._n += 1
        h, w = image.shape[:2]
        return [(t, (max(0, int(t.box.x1 / scale)), max(0, int(t.box.y1 / scale)),
                     min(w, int(t.box.x2 / scale)), min(h, int(t.box.y2 / scale)))) for t in seen]

    def count(self) -> int:
        """Objects counted so far (tracks finished or still live)."""
        return self.finished_moving + len(moving_tracks(self.tracker.live, self.min_hits, self.min_displacement))
