"""The HUD app's model, as the executors know it: ``hud_digits``, the LeNet-5 digit reader the
project trains on rendered HUD digits (:mod:`vidnexus.training.digits`; trained on first use, cached
under the repository's directory). The game app reads its HUD with the same model.

Example:
    >>> HUD_DIGITS.name, HUD_DIGITS.input_shape, HUD_DIGITS.task
    ('hud_digits', (1, 28, 28), 'classify')
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vidnexus.gpu_executor.catalog import ModelEntry
from vidnexus.training import digits

__all__ = ["HUD_DIGITS", "MODELS"]


def _hud_digits(model_dir: Path) -> Any:
    return digits.load_or_train(model_dir)[0]


HUD_DIGITS = ModelEntry(
    "hud_digits", _hud_digits, (1, 28, 28), "classify",
    "LeNet-5 trained by the project on rendered HUD digits (trained on first use, ~25 s; cached)",
    digits.cell_to_input,
    weights="trained by the project on first use on HUD digits it renders with OpenCV's Hershey fonts "
            "(held-out accuracy ~99.9% on 4,000 rendered cells, its training report); other fonts: use hud_text",
)

MODELS: tuple[ModelEntry, ...] = (HUD_DIGITS,)
"""The models this app declares (see :func:`vidnexus.apps.model_catalog`)."""
