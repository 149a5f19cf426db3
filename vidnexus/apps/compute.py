"""Optional compute-only DNN stages for the built-in apps.

The seed papers' apps run a large detector or keypoint network on every sampled frame before their
recognizers (Nexus's traffic query: SSD → car and face recognizers). The models the project can
ship run with random weights, so they give real compute cost and a real dataflow graph (the
executor batches them, query analysis measures the fan-out after them, the latency split divides
the SLO over both stages) but never a recognition: their outputs are discarded, and what the app
reports still comes from its trained models and classical detectors.

An app turns the stage on from a setting naming a zoo model of the right task (e.g.
``VNX_TRAFFIC_DETECTOR=ssdlite``, ``VNX_DANCE_KEYPOINTS=keypointrcnn``: ``Settings.traffic_detector``,
``Settings.dance_keypoints``); it is off by default because on a CPU these models cost far more than
the rest of the chain (see docs/apps.md).

    >>> from vidnexus.config import Settings
    >>> compute_stage_model(Settings(traffic_detector=""), "traffic_detector", ("detect",)) is None
    True
    >>> compute_stage_model(Settings(traffic_detector="resnet18"), "traffic_detector", ("detect",))
    Traceback (most recent call last):
    ...
    vidnexus.errors.ConfigError: VNX_TRAFFIC_DETECTOR=resnet18: a compute-only stage needs a zoo model with task detect; choose one of ssdlite (or unset VNX_TRAFFIC_DETECTOR)
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from vidnexus.config import Settings
from vidnexus.errors import ConfigError

__all__ = ["compute_stage_model", "frame_input", "keep_element", "discard_output"]


def compute_stage_model(settings: Settings, field: str, tasks: Sequence[str]) -> str | None:
    """The zoo model the setting ``field`` names (None when unset, empty or ``0``/``off``/``none``/``no``);
    a clear error, naming its ``VNX_`` variable, when it is not a zoo model of one of ``tasks``."""
    from vidnexus.gpu_executor.zoo import ZOO

    env_var = f"VNX_{field.upper()}"
    name = (getattr(settings, field) or "").strip()
    if not name or name.lower() in ("0", "off", "none", "no"):
        return None
    choices = sorted(n for n, e in ZOO.items() if e.task in tasks)
    if name not in ZOO or ZOO[name].task not in tasks:
        raise ConfigError(f"{env_var}={name}: a compute-only stage needs a zoo model with task "
                          f"{'/'.join(tasks)}; choose one of {', '.join(choices)} (or unset {env_var})")
    return name


def frame_input(model: str) -> Callable[[Any], Any]:
    """``infer(input=…)`` for a compute-only stage on whole frames: the frame as it travels — its
    JPEG bytes untouched (:class:`~vidnexus.contracts.requests.Jpeg`), a raw frame's uint8 pixels —
    for the executor to decode, resize to ``model``'s zoo input and normalize on its CPU pool (the
    zoo entry's ``prepare``). The worker decodes nothing for this stage."""
    from vidnexus.contracts.requests import Jpeg
    from vidnexus.gpu_executor.zoo import ZOO
    from vidnexus.streams.images import image_of

    if ZOO[model].prepare is None:
        raise ConfigError(f"zoo model {model} has no input conversion for whole frames")

    def wire(f: Any) -> Any:
        return Jpeg(bytes(f.data)) if f.encoding == "jpeg" else image_of(f)

    return wire


def keep_element(element: Any, _output: Any) -> Any:
    """``infer(merge=…)`` for a compute-only stage: the element goes on unchanged."""
    return element


def discard_output(_output: Any) -> None:
    """``decode`` for a compute-only stage: nothing of a random-weight model's output is kept."""
    return None
