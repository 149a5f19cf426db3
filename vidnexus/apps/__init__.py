"""Apps that ship with vidnexus, and :func:`load_app`, which finds any app: a built-in name or a
user's ``package.module:attribute``. ``APP_REFS`` maps each built-in name to its import string."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

from vidnexus.errors import ConfigError
from vidnexus.gpu_executor.catalog import ModelEntry, merge_entries
from vidnexus.operators.chain import App

__all__ = ["APPS", "APP_REFS", "known_apps", "load_app", "model_catalog", "task_catalog", "TASKS"]

APPS: dict[str, str] = {
    "hud": "read game-HUD digits: score and kills per frame (vidnexus demo hud)",
    "game": "per-streamer game stats: six HUD digits and the held item per frame, 20 games, WEG on the icon",
    "traffic": "vehicles per camera and minute, dwell and colour: motion tracking + a car colour recognizer",
    "dance": "score dance performances against a reference choreography: pose regression per frame",
    "people": "people who came into a fixed camera's view, when each was in it and their pose: background subtraction + tracking + BlazePose",
    "hudtext": "read a game HUD's score and kills in any font: PP-OCRv4's text recogniser on each field",
    "icons": "the held item of every game stream, read by the glyph task's variant that fits its budget (MCDNN)",
}

APP_REFS: dict[str, str] = {
    "hud": "vidnexus.apps.hud:app",
    "game": "vidnexus.apps.game:app",
    "traffic": "vidnexus.apps.traffic:app",
    "dance": "vidnexus.apps.dance:app",
    "people": "vidnexus.apps.people:app",
    "hudtext": "vidnexus.apps.hudtext:app",
    "icons": "vidnexus.apps.icons:app",
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
        (['hud_digits', 'glyph_compact', 'game_icons_g0'], 30)
    """
    from vidnexus.apps.dance.models import MODELS as dance
    from vidnexus.apps.game.models import MODELS as game
    from vidnexus.apps.hud.models import MODELS as hud
    from vidnexus.apps.hudtext.models import MODELS as hudtext
    from vidnexus.apps.icons.models import MODELS as icons
    from vidnexus.apps.people.models import MODELS as people
    from vidnexus.apps.traffic.models import MODELS as traffic

    return merge_entries(hud, game, traffic, dance, hudtext, people, icons)


TASKS: dict[str, str] = {"glyph120": "the 120 glyph classes of the game streams' item icons (app icons)"}
"""Tasks with a measured variant catalog (``vidnexus scheduler --variant-budget TASK=…``)."""


def task_catalog(task: str, model_dir: Any) -> tuple[Any, ...]:
    """The variants of a built-in task as measured (accuracy, ℓ(b), memory, load time:
    :class:`~vidnexus.training.variants.MeasuredVariant` under their repository names), once per
    machine under ``model_dir`` (the models are trained first when they are not cached).

    Raises:
        ConfigError: ``task`` has no catalog.
    """
    if task not in TASKS:
        raise ConfigError(f"task {task!r} has no variant catalog; the tasks: {', '.join(sorted(TASKS))}")
    from vidnexus.apps.icons.models import variant_catalog

    return tuple(variant_catalog(model_dir))


def load_app(ref: str) -> App:
    """Import ``package.module:attribute`` (or a built-in app's name) and return the App, its chain
    checked. The module is looked up on ``sys.path`` and then in the current directory (as
    ``python -m`` or uvicorn find it): ``vidnexus run myapp:app`` works from the folder that holds
    ``myapp.py``, with no ``PYTHONPATH``.

    Raises:
        ConfigError: the module or attribute does not exist, is not an App, or its chain is invalid.

    Example:
        >>> load_app("hud").name
        'hud'
        >>> load_app("no_such_module:app")
        Traceback (most recent call last):
        ...
        vidnexus.errors.ConfigError: app 'no_such_module:app': cannot import no_such_module: No module named 'no_such_module' (looked on sys.path and in the current directory)
    """
    ref = APP_REFS.get(ref, ref)
    mod_name, sep, attr = ref.partition(":")
    if not sep or not mod_name or not attr:
        raise ConfigError(f"app {ref!r}: expected package.module:attribute (e.g. vidnexus.apps.hud:app) "
                          f"or a built-in app name ({', '.join(sorted(APP_REFS))})")
    try:
        mod = importlib.import_module(mod_name)
    except ModuleNotFoundError as e:
        here = os.getcwd()
        where = "on sys.path and in the current directory"
        if e.name != mod_name.split(".")[0]:
            raise ConfigError(f"app {ref!r}: cannot import {mod_name}: {e}") from None
        if here in sys.path:
            raise ConfigError(f"app {ref!r}: cannot import {mod_name}: {e} (looked {where})") from None
        sys.path.append(here)  # after everything else: the current directory never shadows a package
        try:
            mod = importlib.import_module(mod_name)
        except ImportError as e2:
            sys.path.remove(here)
            raise ConfigError(f"app {ref!r}: cannot import {mod_name}: {e2} (looked {where})") from None
    except ImportError as e:
        raise ConfigError(f"app {ref!r}: cannot import {mod_name}: {e}") from None
    obj = getattr(mod, attr, None)
    if not isinstance(obj, App):
        raise ConfigError(f"app {ref!r}: {mod_name}.{attr} is {type(obj).__name__}, not a vidnexus App")
    obj.steps()
    return obj
