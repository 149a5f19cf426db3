"""The HUD-text app's model, as the executors know it: ``hud_text``, PaddleOCR's PP-OCRv4 text
recogniser (CRNN-style, CTC head, 6,623 characters: Chinese, Latin letters, digits, punctuation),
as the ONNX file the ``rapidocr-onnxruntime`` package ships. A real recogniser: it reads text in
fonts and over backgrounds it never saw from this project.

The executor runs all of it: ``prepare`` (on its CPU pool) scales a text crop to 48 pixels high,
keeps its aspect, pads it to 320 wide and normalizes to [-1, 1], PP-OCR's recognition input; the
batch runs in onnxruntime (the batch dimension is dynamic: requests of many streams batch
together); ``postprocess`` decodes each row's per-step scores greedily (CTC: best class per step,
repeats merged, blanks dropped) into ``[text, confidence]``, so a reply carries a few bytes, not
40 × 6,625 scores.

Example:
    >>> import numpy as np
    >>> x = text_input(np.full((30, 120, 3), 255, np.uint8))
    >>> x.shape, x.dtype.name, float(x[:, :, :192].min()), float(x[:, :, 192:].max())   # 30×120 → 48×192
    ((3, 48, 320), 'float32', 1.0, 0.0)
    >>> ctc_greedy(np.eye(4)[[1, 1, 0, 2, 2, 3]], ["", "4", "2", " "])
    ('42 ', 1.0)
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from vidnexus.errors import ModelError
from vidnexus.gpu_executor.catalog import ModelEntry, package_file

__all__ = ["HUD_TEXT", "MODELS", "PACKAGE", "ctc_greedy", "text_input"]

HEIGHT, WIDTH = 48, 320
"""PP-OCR's recognition input: 48 pixels high; 320 wide holds a crop up to 6.7× as wide as high."""
PACKAGE = "rapidocr_onnxruntime"
"""The package whose files hold the weights (installed without its dependencies: only its ONNX
files and their character table are used; see requirements-files.lock)."""
REC_FILE = "models/ch_PP-OCRv4_rec_infer.onnx"


def rec_file(_model_dir: Path | None = None) -> str:
    """The recogniser's ONNX file inside the installed package."""
    return package_file("hud_text", PACKAGE, REC_FILE, "PP-OCRv4's ONNX files")


def text_input(crop: np.ndarray) -> np.ndarray:
    """A text crop (uint8 BGR, or gray) → the recogniser's 3×48×320 float32 input: scaled to 48
    high (aspect kept, at most 320 wide), RGB, ``(x / 255 - 0.5) / 0.5``, zeros on the right."""
    import cv2

    img = cv2.cvtColor(crop, cv2.COLOR_GRAY2BGR) if crop.ndim == 2 else crop
    h, w = img.shape[:2]
    nw = max(1, min(WIDTH, int(np.ceil(HEIGHT * w / max(h, 1)))))
    img = cv2.resize(img, (nw, HEIGHT), interpolation=cv2.INTER_AREA if h > HEIGHT else cv2.INTER_LINEAR)
    out = np.zeros((3, HEIGHT, WIDTH), np.float32)
    # One OpenCV call (releases the GIL): swap to RGB, C×H×W, scale to [-1, 1].
    out[:, :, :nw] = cv2.dnn.blobFromImage(img, 2 / 255, mean=(127.5, 127.5, 127.5), swapRB=True)[0]
    return out


def ctc_greedy(scores: np.ndarray, chars: Sequence[str]) -> tuple[str, float]:
    """One row of per-step class scores (steps × classes; class 0 the CTC blank) → (text, mean
    score of its characters; 0.0 for no text)."""
    best = scores.argmax(axis=-1)
    keep = (best != 0) & np.concatenate(([True], best[1:] != best[:-1]))
    idx = best[keep]
    text = "".join(chars[i] for i in idx)
    conf = float(scores[np.flatnonzero(keep), idx].mean()) if len(idx) else 0.0
    return text, round(conf, 4)


class _Chars:
    """The recogniser's character table, read once from its ONNX file's metadata (``character``:
    one per line; the blank before it and a space after it, as PP-OCR trains)."""

    def __init__(self) -> None:
        self._chars: list[str] | None = None
        self._lock = threading.Lock()

    def get(self) -> list[str]:
        with self._lock:
            if self._chars is None:
                import onnxruntime as ort

                opts = ort.SessionOptions()
                opts.log_severity_level = 3
                meta = ort.InferenceSession(rec_file(), sess_options=opts, providers=["CPUExecutionProvider"]).get_modelmeta()
                table = meta.custom_metadata_map.get("character")
                if not table:
                    raise ModelError(f"model hud_text: {rec_file()} has no character table in its metadata")
                self._chars = ["", *table.splitlines(), " "]
            return self._chars


_CHARS = _Chars()


def _decode(row: np.ndarray) -> list[Any]:
    text, conf = ctc_greedy(row, _CHARS.get())
    return [text, conf]


def _no_torch(_model_dir: Path) -> Any:
    raise ModelError("model hud_text runs in onnxruntime (its model_file), not as a torch module")


HUD_TEXT = ModelEntry(
    "hud_text", _no_torch, (3, HEIGHT, WIDTH), "text",
    "PP-OCRv4 text recogniser (PaddleOCR, ONNX): one text line crop → [text, confidence]",
    text_input,
    weights=f"PaddleOCR's trained PP-OCRv4 weights, shipped in the {PACKAGE} 1.4.4 package (Apache-2.0); "
            "reads printed text in any font; HUD values read exactly on clips in a font vidnexus never "
            "trained on: see docs/apps.md (hudtext)",
    model_file=rec_file,
    postprocess=_decode,
)

MODELS: tuple[ModelEntry, ...] = (HUD_TEXT,)
"""The models this app declares (see :func:`vidnexus.apps.model_catalog`)."""
