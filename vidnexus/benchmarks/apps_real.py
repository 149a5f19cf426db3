"""``vidnexus bench apps-real``: ``vidnexus bench apps`` for the apps whose models recognise real
footage with real weights — ``hudtext`` (PP-OCRv4's text recogniser, ONNX, on HUD text over the
real videos) and ``people`` (BlazePose's landmarks, TFLite, on n cameras playing the real room
video): each app's capacity at its own SLO over Kafka and embedded, and the ratio of the two."""

from __future__ import annotations

from typing import Any

from vidnexus.benchmarks.apps_bench import REAL_APPS, run_apps

__all__ = ["run"]


def run(quick: bool, console: Any) -> dict[str, Any]:
    return run_apps(REAL_APPS, quick, console, name="apps-real")
