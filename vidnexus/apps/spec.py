"""What an app ships for ``vidnexus demo <app>``: its synthetic streams, model preparation, the SQL
the demo prints and an optional summary computed from the rows."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["DemoSpec"]


@dataclass(frozen=True)
class DemoSpec:
    """``sources(n, seconds, fps)`` → [(stream id, generator with ``frames()``)]; ``prepare(settings)``
    trains or loads the app's models and returns a report (printed); ``summary(store, executor)``
    returns lines computed from what the pipeline wrote."""

    sources: Callable[[int, float, float], list[tuple[str, Any]]]
    queries: dict[str, str]
    tables: tuple[str, ...]
    prepare: Callable[[Any], dict[str, Any]] = lambda settings: {}
    summary: Callable[[Any, Any], list[str]] | None = None
    source_fps: float = 10.0
    sample_fps: float = 5.0
    slo_ms: float | None = None
    defaults: dict[str, Any] = field(default_factory=dict)
