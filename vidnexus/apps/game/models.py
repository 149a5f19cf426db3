"""The game app's models, all trained by the project.

- ``hud_digits``: the LeNet-5 digit reader (:mod:`vidnexus.training.digits`), six requests a frame.
- ``game_icons_g<k>`` (k < 20): one item-icon classifier per game. They share one trunk — the glyph
  oracle's convolutional body, trained on all 120 glyph classes — and differ in the last layer,
  which keeps the rows of the oracle's classifier for that game's 24 icons. The executor finds the
  shared trunk (same structure and weights) and runs it once for a batch mixing games (prefix
  batching), then each game's head on its slice.
- ``glyph_compact``: the compact template's body (``compact_a``: two strided convolutions and a
  48-unit layer), returning features; the specialized last layer that turns them into "one of the
  streamer's favourite items, or other" is trained in the worker in milliseconds (WEG, see
  :mod:`vidnexus.operators.specialized`).

The glyph models come from :func:`vidnexus.training.glyphs.load_or_train` in quick mode (about two
minutes of training on two cores the first time, then cached under ``<data_dir>/models``).
"""

from __future__ import annotations

import functools
from typing import Any

from vidnexus.apps.game.render import N_GAMES, style

__all__ = ["glyph_models", "icon_classifier", "compact_features", "ICON_MODELS", "COMPACT_MODEL", "TEMPLATE"]

ICON_MODELS = tuple(f"game_icons_g{g}" for g in range(N_GAMES))
COMPACT_MODEL = "glyph_compact"
TEMPLATE = "compact_a"
QUICK = True


@functools.lru_cache(maxsize=1)
def glyph_models() -> Any:
    """The trained glyph models (oracle and compact templates), loaded once per process."""
    from vidnexus.config import load_settings
    from vidnexus.training.glyphs import load_or_train

    return load_or_train(load_settings().data_dir / "models", quick=QUICK)


def icon_classifier(game: int) -> Any:
    """``Headed(oracle trunk, game head)``: logits over the game's icons (in ``style(game).icons`` order)."""
    import torch
    from torch import nn

    from vidnexus.gpu_executor.prefix import Headed

    oracle = glyph_models().models["oracle"]
    icons = list(style(game).icons)
    head = nn.Linear(oracle.head.in_features, len(icons))
    with torch.no_grad():
        head.weight.copy_(oracle.head.weight[icons])
        head.bias.copy_(oracle.head.bias[icons])
    return Headed(oracle.body, head).eval()


def compact_features() -> Any:
    """The compact template's body: 3×32×32 icon → its 48 features."""
    return glyph_models().models[TEMPLATE].body.eval()
