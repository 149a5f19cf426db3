"""What an app ships for ``vidnexus demo <app>``: the streams it runs on, model preparation, the
SQL the demo prints and an optional summary computed from the rows."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from vidnexus.streams.spec import StreamSpec

__all__ = ["DemoSpec", "DemoSummary", "Streams", "beside_checkout", "real_video"]

Streams = Callable[[int, float, float, float], list[StreamSpec]]
"""``streams(n, seconds, source_fps, sample_fps)``: the demo's streams (synthetic URLs, real files)."""


@dataclass(frozen=True)
class DemoSummary:
    """What a demo's summary found: the lines it prints (rich markup allowed) and the same figures
    as data, for ``vidnexus demo --save`` (JSON values only: numbers, strings, lists, dicts).

    Example:
        >>> s = DemoSummary(("[bold]cam-1[/]: 3 vehicles",), {"vehicles": {"cam-1": 3}})
        >>> s.figures["vehicles"]["cam-1"]
        3
    """

    lines: tuple[str, ...] = ()
    figures: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DemoSpec:
    """``streams(n, seconds, source_fps, sample_fps)`` → the streams to run on; ``prepare(settings)``
    trains or loads the app's models and returns a report (printed); ``summary(store, executor)``
    returns a :class:`DemoSummary` computed from what the pipeline wrote (``executor``: the
    in-process :class:`~vidnexus.gpu_executor.executor.Executor`)."""

    streams: Streams
    queries: dict[str, str]
    tables: tuple[str, ...]
    prepare: Callable[[Any], dict[str, Any]] = lambda settings: {}
    summary: Callable[[Any, Any], DemoSummary] | None = None
    source_fps: float = 10.0
    sample_fps: float = 5.0
    slo_ms: float | None = None
    load_streams: Streams | None = None
    """``n`` streams for a load test (``vidnexus bench apps``) when the demo's own do not grow with
    ``n`` (the people demo plays one real video); default: ``streams``."""


def beside_checkout(relative: str) -> Any:
    """``relative`` under the cwd or a parent of this package (the checkout, or the folder that
    holds it and ``shared/``), as a resolved path, or None."""
    from pathlib import Path

    for base in (Path.cwd(), *Path(__file__).resolve().parents):
        if (base / relative).exists():
            return (base / relative).resolve()
    return None


def real_video(name: str) -> Any:
    """The shared real footage ``name`` (``../shared/data/real/NAME`` beside the checkout), or None."""
    return beside_checkout(f"../shared/data/real/{name}")
