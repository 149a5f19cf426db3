"""The people app's model, as the executors know it: ``pose_landmarks``, Google's BlazePose GHUM
pose landmark model ("full"), the TFLite file the ``mediapipe`` 0.10.21 package ships (Apache-2.0).
A real pose estimator: 33 body landmarks of the one person a crop is centred on.

The worker sends each person's crop as a 256×256 uint8 square (:func:`person_square`: the person's
box grown to a square around its centre, black where it leaves the frame); the executor makes the
model's input on its CPU pool (``prepare``: RGB, [0, 1], 256×256×3), runs the batch in the LiteRT
interpreter (the file fixes a batch of 1; the runner resizes it per batch size) and turns each row
into 33 ``[x, y, visibility]`` (``postprocess``: x and y as fractions of the square, visibility a
probability), so a reply is 99 numbers, not the model's 195 raw values.

Example:
    >>> import numpy as np
    >>> sq = person_square(np.zeros((432, 768, 3), np.uint8), (700.0, 10.0, 760.0, 200.0))
    >>> sq.image.shape, sq.x0, sq.y0, round(sq.side, 1)
    ((256, 256, 3), 611.25, -13.75, 237.5)
    >>> sq.to_frame([[0.5, 0.5, 1.0]])
    [(730.0, 105.0, 1.0)]
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from vidnexus.errors import ModelError
from vidnexus.gpu_executor.catalog import ModelEntry, package_file

__all__ = ["POSE_LANDMARKS", "MODELS", "KEYPOINTS", "PersonSquare", "person_square", "pose_input", "pose_rows"]

SIDE = 256
KEYPOINTS = 33
"""BlazePose's body landmarks: 0 nose … 11/12 shoulders, 23/24 hips, 25/26 knees, 27/28 ankles."""
GROW = 1.25
"""The square's side over the person box's longer side (MediaPipe's own crop is 1.25× too)."""
PACKAGE = "mediapipe"
LANDMARK_FILE = "modules/pose_landmark/pose_landmark_full.tflite"


def landmark_file(_model_dir: Path | None = None) -> str:
    """The landmark model's TFLite file inside the installed package."""
    return package_file("pose_landmarks", PACKAGE, LANDMARK_FILE, "BlazePose's TFLite files")


@dataclass(frozen=True)
class PersonSquare:
    """A person's 256×256 square crop and where it lies in the frame (its top-left, its side in
    frame pixels), to put the model's landmarks back in frame coordinates."""

    image: np.ndarray
    x0: float
    y0: float
    side: float

    def to_frame(self, points: Sequence[Sequence[float]]) -> list[tuple[float, float, float]]:
        return [(self.x0 + x * self.side, self.y0 + y * self.side, v) for x, y, v in points]


def person_square(image: np.ndarray, box: tuple[float, float, float, float]) -> PersonSquare:
    """The square around ``box`` (x1, y1, x2, y2 in ``image``'s pixels), :data:`GROW` times its
    longer side, resized to 256×256 (black outside the frame)."""
    import cv2

    x1, y1, x2, y2 = box
    side = max(x2 - x1, y2 - y1, 1.0) * GROW
    x0, y0 = (x1 + x2) / 2 - side / 2, (y1 + y2) / 2 - side / 2
    # An affine map from the square to 256×256 pixels: one warp, borders black.
    scale = SIDE / side
    m = np.array([[scale, 0, -x0 * scale], [0, scale, -y0 * scale]], np.float32)
    sq = cv2.warpAffine(image, m, (SIDE, SIDE), flags=cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR,
                        borderMode=cv2.BORDER_CONSTANT, borderValue=(0, 0, 0))
    return PersonSquare(sq, x0, y0, side)


def pose_input(square: np.ndarray) -> np.ndarray:
    """A person's square crop (uint8 BGR, any size) → the model's 256×256×3 RGB float32 in [0, 1]."""
    import cv2

    img = square if square.shape[:2] == (SIDE, SIDE) else cv2.resize(square, (SIDE, SIDE), interpolation=cv2.INTER_AREA)
    if img.ndim == 2:
        img = cv2.cvtColor(img, cv2.COLOR_GRAY2BGR)
    out: np.ndarray = cv2.cvtColor(img, cv2.COLOR_BGR2RGB).astype(np.float32) / 255.0
    return out


def pose_rows(raw: np.ndarray) -> list[list[float]]:
    """One row of the model's landmark output (39 × x, y, z, visibility, presence; x and y in
    input pixels, the last two logits) → the 33 body landmarks as ``[x, y, visibility]``, x and y
    as fractions of the square."""
    lm = np.asarray(raw, np.float32).reshape(-1, 5)[:KEYPOINTS]
    vis = 0.5 * (1.0 + np.tanh(lm[:, 3] / 2))  # the logistic function, without overflow for large logits
    return [[round(float(x) / SIDE, 4), round(float(y) / SIDE, 4), round(float(v), 3)]
            for x, y, v in zip(lm[:, 0], lm[:, 1], vis)]


def _no_torch(_model_dir: Path) -> Any:
    raise ModelError("model pose_landmarks runs in the LiteRT interpreter (its model_file), not as a torch module")


POSE_LANDMARKS = ModelEntry(
    "pose_landmarks", _no_torch, (SIDE, SIDE, 3), "pose",
    "BlazePose GHUM pose landmarks (full, TFLite): one person's square crop → 33 [x, y, visibility]",
    pose_input,
    weights=f"Google's trained BlazePose GHUM weights, shipped in the {PACKAGE} 0.10.21 package (Apache-2.0); "
            "finds the pose of real people; checked on one-by-one-person-detection.mp4: see docs/apps.md (people)",
    model_file=landmark_file,
    postprocess=pose_rows,
)

MODELS: tuple[ModelEntry, ...] = (POSE_LANDMARKS,)
"""The models this app declares (see :func:`vidnexus.apps.model_catalog`)."""
