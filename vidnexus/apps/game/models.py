"""The game app's models, all trained by the project, and their catalogue entries (:data:`MODELS`).

- ``hud_digits``: the LeNet-5 digit reader (:mod:`vidnexus.training.digits`), six requests a frame;
  the HUD app's entry (:data:`vidnexus.apps.hud.models.HUD_DIGITS`).
- ``game_icons_g<k>`` (k < 20): one item-icon classifier per game. They share one trunk — the glyph
  oracle's convolutional body, trained on all 120 glyph classes — and differ in the last layer,
  which keeps the rows of the oracle's classifier for that game's 24 icons. The executor finds the
  shared trunk (same structure and weights) and runs it once for a batch mixing games (prefix
  batching), then each game's head on its slice.
- ``glyph_compact``: the compact template's body (``compact_a``: two strided convolutions and a
  48-unit layer), returning features; the specialized last layer that turns them into "one of the
  streamer's favourite items, or other" is trained in the worker in milliseconds (WEG, see
  :mod:`vidnexus.specialization.specializer`).

The glyph models come from :func:`vidnexus.training.glyphs.load_or_train` in quick mode (about two
minutes of training on two cores the first time, then cached under ``<data_dir>/models``).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Callable

from vidnexus.apps.game.render import N_GAMES, style
from vidnexus.apps.hud.models import HUD_DIGITS
from vidnexus.gpu_executor.catalog import ModelEntry
from vidnexus.gpu_executor.preprocess import ImageInput

__all__ = ["glyph_models", "icon_classifier", "compact_features", "ICON_MODELS", "COMPACT_MODEL", "TEMPLATE",
           "MODELS"]

ICON_INPUT = ImageInput((3, 32, 32), "bgr")
"""An item icon (uint8 BGR, 32×32 as cut from the frame) → the icon models' float32 input."""
ICON_MODELS = tuple(f"game_icons_g{g}" for g in range(N_GAMES))
COMPACT_MODEL = "glyph_compact"
TEMPLATE = "compact_a"
QUICK = True


def glyph_models(model_dir: Path | None = None) -> Any:
    """The trained glyph models (oracle and compact templates) cached in ``model_dir`` (default:
    ``<data_dir>/models`` of the settings), loaded once per process and directory."""
    if model_dir is None:
        from vidnexus.config import load_settings

        model_dir = load_settings().data_dir / "models"
    return _glyph_models(model_dir.resolve())


@functools.lru_cache(maxsize=2)
def _glyph_models(model_dir: Path) -> Any:
    from vidnexus.training.glyphs import load_or_train

    return load_or_train(model_dir, quick=QUICK)


def icon_classifier(game: int, model_dir: Path | None = None) -> Any:
    """``Headed(oracle trunk, game head)``: logits over the game's icons (in ``style(game).icons`` order)."""
    import torch
    from torch import nn

    from vidnexus.gpu_executor.prefix import Headed

    oracle = glyph_models(model_dir).models["oracle"]
    icons = list(style(game).icons)
    head = nn.Linear(oracle.head.in_features, len(icons))
    with torch.no_grad():
        head.weight.copy_(oracle.head.weight[icons])
        head.bias.copy_(oracle.head.bias[icons])
    return Headed(oracle.body, head).eval()


def compact_features(model_dir: Path | None = None) -> Any:
    """The compact template's body: 3×32×32 icon → its 48 features."""
    return glyph_models(model_dir).models[TEMPLATE].body.eval()


def _icon_entry(game: int) -> ModelEntry:
    build: Callable[[Path], Any] = lambda model_dir: icon_classifier(game, model_dir)
    return ModelEntry(
        ICON_MODELS[game], build, (3, 32, 32), "classify",
        f"item icons of game {game}: the glyph oracle's trunk (shared by all games) + this game's 24-icon head",
        ICON_INPUT,
        weights="trained by the project on first use on the 120 item icons it renders for its 20 games "
                "(validation accuracy ~97% on rendered icons, its training report)",
    )


MODELS: tuple[ModelEntry, ...] = (
    HUD_DIGITS,
    ModelEntry(COMPACT_MODEL, compact_features, (3, 32, 32), "embed",
               "compact glyph template's body (48 features; the game app's WEG specializes its last layer)",
               ICON_INPUT, weights="trained by the project on first use on its rendered item icons "
                                   "(a compact template; its validation accuracy is in its training report)"),
    *(_icon_entry(g) for g in range(N_GAMES)),
)
"""The models this app declares (see :func:`vidnexus.apps.model_catalog`)."""
