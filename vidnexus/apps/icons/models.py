"""The icons app's models: the glyph task's variants (:mod:`vidnexus.training.variants`) as
repository models, and the task's catalog for the scheduler (MCDNN, :mod:`vidnexus.control.variants`).

Each variant answers the whole 120-class glyph task (the item ids of the game app's icons):
``glyph120_oracle`` (float32), ``glyph120_oracle_int8`` (the same weights quantized to int8 for the
x86 backend: it runs on a CPU executor only), ``glyph120_compact_b`` and ``glyph120_compact_a``.
They are trained by the project on first use (the game app's glyph models) and cached under
``<data_dir>/models``.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Callable

from vidnexus.apps.game.models import ICON_INPUT
from vidnexus.gpu_executor.catalog import ModelEntry
from vidnexus.training.variants import TASK, VARIANTS

__all__ = ["TASK", "VARIANT_MODELS", "MODELS", "variant_catalog", "CATALOG_BATCH"]

VARIANT_MODELS = tuple(f"{TASK}_{v}" for v in VARIANTS)
"""The task's variants as repository models, most accurate first (the order of
:data:`vidnexus.training.variants.VARIANTS`)."""
CATALOG_BATCH = 16
"""The batch each variant's cost per request is taken at in the catalog (ℓ(b)/b)."""


@functools.lru_cache(maxsize=2)
def _models(model_dir: Path) -> dict[str, Any]:
    from vidnexus.training.variants import variant_models

    return variant_models(model_dir, quick=True)


def _entry(variant: str) -> ModelEntry:
    build: Callable[[Path], Any] = lambda model_dir: _models(model_dir.resolve())[variant]
    return ModelEntry(
        f"{TASK}_{variant}", build, (3, 32, 32), "classify",
        f"the 120 glyph classes (item icons), variant {variant} of task {TASK}", ICON_INPUT,
        weights="trained by the project on first use on the 120 item icons it renders; held-out accuracy in "
                "`vidnexus models variants glyph120`",
    )


MODELS: tuple[ModelEntry, ...] = tuple(_entry(v) for v in VARIANTS)
"""The models this app declares (see :func:`vidnexus.apps.model_catalog`)."""


def variant_catalog(model_dir: Path) -> list[Any]:
    """The task's variants as measured (:class:`~vidnexus.training.variants.MeasuredVariant`) under
    their repository names: held-out accuracy, ℓ(b) on one CPU thread, memory and load time,
    measured once per machine (:func:`vidnexus.training.variants.load_or_measure`). The scheduler
    takes each one's cost per request at :data:`CATALOG_BATCH` (``control.variants.catalog_of``)
    and replaces it by its executors' profile once one has loaded it."""
    from dataclasses import replace

    from vidnexus.training.variants import load_or_measure

    return [replace(v, name=f"{TASK}_{v.name}") for v in load_or_measure(model_dir)]
