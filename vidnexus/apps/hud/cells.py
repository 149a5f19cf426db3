"""Crop the digit cells of a game HUD (the HUD and game apps' CPU step): each cell travels to the
executor as its uint8 pixels, which makes the digit reader's input (``cell_to_input``, the
``hud_digits`` entry's ``prepare``).

Example:
    >>> import numpy as np
    >>> cells = HudCells().apply(np.zeros((180, 320, 3), np.uint8))
    >>> [(c.field, c.index, c.input.shape, c.input.dtype.name) for c in cells][:2]
    [('score', 0, (24, 16, 3), 'uint8'), ('score', 1, (24, 16, 3), 'uint8')]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from vidnexus.streams.synthetic import HUD, HudLayout

__all__ = ["HudCells", "DigitCell", "assemble"]


@dataclass(frozen=True)
class DigitCell:
    field: str
    index: int
    input: np.ndarray  # the cell's uint8 BGR pixels


class HudCells:
    """One :class:`DigitCell` per digit position of the layout."""

    def __init__(self, layout: HudLayout = HUD) -> None:
        self.layout = layout

    def apply(self, image: Any) -> list[DigitCell]:
        h, w = image.shape[:2]
        out = []
        for name, k, (x, y, cw, ch) in self.layout.cells():
            if x + cw > w or y + ch > h:
                raise ValueError(f"HUD cell {name}[{k}] at ({x},{y}) is outside a {w}x{h} frame")
            out.append(DigitCell(name, k, np.ascontiguousarray(image[y : y + ch, x : x + cw])))
        return out


def assemble(cells: list[DigitCell], digits: list[int]) -> dict[str, int]:
    """Read numbers back from per-cell digit predictions (cells in layout order)."""
    text: dict[str, str] = {}
    for c, d in zip(cells, digits):
        text[c.field] = text.get(c.field, "") + str(d)
    return {k: int(v) for k, v in text.items()}
