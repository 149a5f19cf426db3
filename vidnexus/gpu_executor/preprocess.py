"""Model inputs from the wire: what the executor's CPU pool does to a request before it is queued.

Workers send what their step made — a uint8 crop or cell, or a frame's JPEG bytes
(:class:`~vidnexus.contracts.requests.Jpeg`) — not float tensors: a 224² crop is 150 KB as uint8
and 602 KB as float32, a 768×432 frame ~40 KB as JPEG and 1.2 MB as a 320² float tensor. The
executor decodes, resizes, normalizes and tensorizes on its pre/post-processing pool while the device
runs the previous batch (Nexus's CPU/device overlap; :class:`~vidnexus.gpu_executor.executor.Executor`
``preprocess=``).

A model says how its tensor is made from a uint8 image (BGR, as OpenCV and ingest give it) with
``ModelEntry.prepare``: :class:`ImageInput` for the usual resize + channel order + [0, 1] scaling,
or the app's own function (the HUD reader's contrast normalization). :func:`wire_input` wraps it
into the executor's per-request function, which also accepts a ready tensor of the model's shape
(clients that build tensors, profiles) and refuses anything else with a clear error — a drop
(``error``) for that request only, where a wrong shape inside a batch would fail the whole batch.

Example:
    >>> import numpy as np
    >>> to_rgb = ImageInput((3, 2, 2), color="rgb")
    >>> crop = np.zeros((4, 6, 3), np.uint8); crop[..., 2] = 255        # pure red in BGR
    >>> x = to_rgb(crop); x.shape, x.dtype, float(x[0].min()), float(x[2].max())
    ((3, 2, 2), dtype('float32'), 1.0, 0.0)
    >>> prep = wire_input("m", (3, 2, 2), to_rgb)
    >>> prep(crop).shape, prep(np.ones((3, 2, 2), np.float32)).sum()
    ((3, 2, 2), np.float32(12.0))
    >>> prep(np.ones((3, 5, 5), np.float32))
    Traceback (most recent call last):
    ...
    ValueError: model m takes a (3, 2, 2) tensor or a uint8 image; got float32 (3, 5, 5)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Literal

import numpy as np

from vidnexus.contracts.requests import Jpeg

__all__ = ["ImageInput", "Prepare", "decode_jpeg", "wire_input"]

Prepare = Callable[[np.ndarray], np.ndarray]
"""A uint8 image (H×W×3 BGR or H×W gray) → the model's float32 tensor."""


@dataclass(frozen=True)
class ImageInput:
    """The usual conversion: resize to the model's H×W (``INTER_AREA``; none when the size already
    matches), channel order (``bgr`` as given, ``rgb`` swapped, ``gray``), C×H×W float32 in [0, 1]."""

    shape: tuple[int, int, int]
    color: Literal["bgr", "rgb", "gray"] = "rgb"

    def __call__(self, image: np.ndarray) -> np.ndarray:
        import cv2

        c, h, w = self.shape
        img = image
        if self.color == "gray" and img.ndim == 3:
            img = cv2.cvtColor(img, cv2.COLOR_BGR2GRAY)
        elif self.color != "gray" and img.ndim == 2:
            img = cv2.cvtColor(img, cv2.COLOR_GRAY2BGR)
        if img.shape[:2] != (h, w):
            img = cv2.resize(img, (w, h), interpolation=cv2.INTER_AREA)
        # Channel swap, C×H×W and the scaling in one OpenCV call, which releases the GIL: numpy
        # here would hold it, and the device thread (torch) would queue behind this one.
        out: np.ndarray = cv2.dnn.blobFromImage(img, 1 / 255, swapRB=self.color == "rgb")[0]
        if out.shape != (c, h, w):
            raise ValueError(f"image input gives {out.shape}, the model takes {self.shape}")
        return out


def decode_jpeg(j: Jpeg) -> np.ndarray:
    """A :class:`Jpeg` input → its BGR pixels (the decoder ingest's frames are read with)."""
    import cv2

    img = cv2.imdecode(np.frombuffer(j.data, np.uint8), cv2.IMREAD_COLOR)
    if img is None:
        raise ValueError(f"undecodable JPEG input ({len(j.data)} bytes)")
    return img


def wire_input(model: str, shape: tuple[int, ...], prepare: Prepare | None) -> Callable[[Any], Any]:
    """The executor's per-request function for ``model``: a :class:`Jpeg` is decoded, a uint8 image
    goes through ``prepare``; a float tensor of ``shape`` passes as it is (as float32). Anything else (or a
    uint8 image for a model without ``prepare``) raises ``ValueError`` naming the model."""
    want = tuple(shape)

    def to_tensor(x: Any) -> Any:
        if isinstance(x, Jpeg):
            x = decode_jpeg(x)
        if isinstance(x, np.ndarray):
            if x.dtype == np.uint8 and prepare is not None and x.ndim in (2, 3) and min(x.shape) > 0:
                return prepare(x)
            if x.dtype.kind == "f" and x.shape == want:
                return x.astype(np.float32, copy=False)
        kind = f"{x.dtype} {x.shape}" if isinstance(x, np.ndarray) else type(x).__name__
        takes = f"a {want} tensor" + (" or a uint8 image" if prepare is not None else " (float32)")
        raise ValueError(f"model {model} takes {takes}; got {kind}")

    return to_tensor
