"""Apps that ship with vidnexus. Streams are registered for apps by name, so an unknown name is an
error at registration time. ``APP_REFS`` maps each built-in name to its import string, which is
what ``vidnexus worker`` and the runtimes load."""

from __future__ import annotations

__all__ = ["APPS", "APP_REFS", "known_apps"]

APPS: dict[str, str] = {
    "hud": "read game-HUD digits: score and kills per frame (vidnexus demo hud)",
    "game": "per-streamer game stats: six HUD digits and the held item per frame, 20 games, WEG on the icon",
    "traffic": "vehicles per camera and minute, dwell and colour: motion tracking + a car colour recognizer",
    "dance": "score dance performances against a reference choreography: pose regression per frame",
}

APP_REFS: dict[str, str] = {
    "hud": "vidnexus.apps.hud:app",
    "game": "vidnexus.apps.game:app",
    "traffic": "vidnexus.apps.traffic:app",
    "dance": "vidnexus.apps.dance:app",
}


def known_apps() -> dict[str, str]:
    """App name → one-line description."""
    return dict(APPS)
