"""What a model repository knows by name without registration: one :class:`ModelEntry` per model.

The repository's own entries are the torchvision architectures of :mod:`vidnexus.gpu_executor.zoo`
(random weights: compute profiles only). Models an app trains or ships are declared by the app, in
its own package, and handed to the repository by whoever builds it: the CLI and the roles pass
:func:`vidnexus.apps.model_catalog` as ``ModelRepository(directory, extra=...)``. Nothing here, and
nothing else in the executor, imports an app.

Example:
    >>> def build(model_dir):
    ...     import torch
    ...     return torch.nn.Linear(4, 2)
    >>> tiny = ModelEntry("tiny", build, (4,), "classify", "a 4→2 linear layer")
    >>> [e.name for e in merge_entries([tiny], [tiny])]   # the same entry twice is one entry
    ['tiny']
    >>> merge_entries([tiny], [ModelEntry("tiny", build, (8,), "classify", "another")])
    Traceback (most recent call last):
    ...
    vidnexus.errors.ModelError: two different models are named 'tiny' (a 4→2 linear layer; another)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from vidnexus.errors import ModelError
from vidnexus.gpu_executor.preprocess import Prepare

__all__ = ["ModelEntry", "RANDOM_WEIGHTS", "TASKS", "merge_entries", "package_file"]

TASKS = ("classify", "detect", "pose", "embed", "text")


RANDOM_WEIGHTS = "random: a load generator for benchmarks and profiles; recognises nothing"
"""What ``ModelEntry.weights`` says of an architecture with random weights."""


@dataclass(frozen=True)
class ModelEntry:
    """A model known by name: how to build it and what it expects.

    ``build(model_dir)`` returns the ``nn.Module``; ``model_dir`` is the repository's directory
    (``<data_dir>/models``), where a model the project trains caches its weights (trained on first
    use). Architectures with random weights ignore it.

    ``prepare`` turns a uint8 image from the wire (BGR, any size) into the model's tensor on the
    executor's CPU pool (:mod:`vidnexus.gpu_executor.preprocess`); without it the model takes float32
    tensors of ``input_shape`` only.

    ``model_file(model_dir)``, when given, is the path of a model file a package ships with its
    weights — ``.onnx`` (run in onnxruntime) or ``.tflite`` (run in the LiteRT interpreter) — and
    ``build`` is then never called. ``postprocess`` turns one row of the
    model's output into the reply's value on the executor (default: the row as nested lists), e.g. a
    text recogniser's per-step scores into its text, so a client gets a few bytes and not the
    scores. ``weights`` says where the weights come from, what the model recognises and how well
    on which data (``vidnexus models list`` shows it): a model with random weights says so.
    """

    name: str
    build: Callable[[Path], Any]
    input_shape: tuple[int, ...]
    task: str
    description: str
    prepare: Prepare | None = None
    weights: str = RANDOM_WEIGHTS
    model_file: Callable[[Path], str] | None = None
    postprocess: Callable[[Any], Any] | None = None

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("_", "").replace("-", "").isalnum():
            raise ModelError(f"model name {self.name!r}: use letters, digits, '_' and '-'")
        if self.task not in TASKS:
            raise ModelError(f"model {self.name}: unknown task {self.task!r}; choose one of {TASKS}")
        if not self.input_shape or any(d <= 0 for d in self.input_shape):
            raise ModelError(f"model {self.name}: input shape {self.input_shape} must be positive dims")


def merge_entries(*groups: Iterable[ModelEntry]) -> tuple[ModelEntry, ...]:
    """The entries of every group, in order, each name once; an entry listed by two groups (two apps
    sharing a model) counts once.

    Raises:
        ModelError: two different entries have one name.
    """
    seen: dict[str, ModelEntry] = {}
    for group in groups:
        for e in group:
            other = seen.setdefault(e.name, e)
            if other != e:
                raise ModelError(f"two different models are named {e.name!r} ({other.description}; {e.description})")
    return tuple(seen.values())


def package_file(model: str, package: str, relative: str, what: str) -> str:
    """The file ``relative`` inside the installed ``package`` (found without importing the package:
    one kept only for the weights it ships may lack its own dependencies), for a catalogue entry's
    ``model_file``.

    Raises:
        ModelError: the package or the file is not there, naming ``what`` the file holds.
    """
    import importlib.util

    spec = importlib.util.find_spec(package)
    for root in (list(spec.submodule_search_locations or []) if spec is not None else []):
        path = Path(root) / relative
        if path.is_file():
            return str(path)
    raise ModelError(f"model {model}: the {package} package ({what}) is not installed; "
                     "`make bootstrap` installs it (requirements-files.lock)")
