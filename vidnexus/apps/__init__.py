"""Apps that ship with vidnexus. Streams are registered for apps by name, so an unknown name is an
error at registration time. ``APP_REFS`` maps each built-in name to its import string, which is
what ``vidnexus worker`` and the runtimes load."""

from __future__ import annotations

from vidnexus.gpu_executor.catalog import ModelEntry, merge_entries

__all__ = ["APPS", "APP_REFS", "known_apps", "model_catalog"]

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


def model_catalog() -> tuple[ModelEntry, ...]:
    """The models the built-in apps declare, each once (two apps may share one: ``hud_digits``), for
    a :class:`~vidnexus.gpu_executor.repository.ModelRepository`'s ``extra``. Whatever builds a
    repository for executors (the CLI, the executor role) passes them; the executor itself never
    imports an app.

    Example:
        >>> names = [m.name for m in model_catalog()]
        >>> names[:3], len(names)
        (['hud_digits', 'glyph_compact', 'game_icons_g0'], 24)
    """
    from vidnexus.apps.dance.models import MODELS as dance
    from vidnexus.apps.game.models import MODELS as game
    from vidnexus.apps.hud.models import MODELS as hud
    from vidnexus.apps.traffic.models import MODELS as traffic

    return merge_entries(hud, game, traffic, dance)
