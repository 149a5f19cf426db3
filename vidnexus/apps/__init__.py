"""Apps that ship with vidnexus. Streams are registered for apps by name, so an unknown name is an
error at registration time. The traffic, game and dance apps arrive with their issue; today the
embedded HUD demo is the one app."""

from __future__ import annotations

__all__ = ["APPS", "known_apps"]

APPS: dict[str, str] = {
    "hud": "embedded demo: read game-HUD digits (vidnexus demo hud)",
}


def known_apps() -> dict[str, str]:
    """App name → one-line description."""
    return dict(APPS)
