"""The model repository: a catalogue of models known by name, plus models registered by users.

The catalogue is the zoo's architectures (:mod:`vidnexus.gpu_executor.zoo`, random weights) and the
entries the caller passes as ``extra``: the apps' models, which the layers above the executor collect
with :func:`vidnexus.apps.model_catalog` (``ModelRepository(directory, extra=model_catalog())``).

A registered model is a name, a version, a task, an input shape, what its clients send
(``images``: ``rgb``/``bgr``/``gray`` — uint8 images or JPEG frames, which the executor resizes to the
input shape and scales to [0, 1] on its CPU pool; none: float tensors of the input shape) and a
*source*:

- ``zoo:NAME`` — a catalogue model (random weights unless it is trained by its app, or ``weights``
  points to a local file);
- ``factory:package.module:function`` — a Python callable returning an ``nn.Module``;
- ``torchscript:/path/model.pt`` — a TorchScript file.

Registration loads the model once, runs a batch of one to check the input shape, and records its
parameter memory. The registry is a JSON file under ``<data_dir>/models/registry.json``.

Example:
    >>> import tempfile
    >>> from vidnexus.gpu_executor.catalog import ModelEntry
    >>> def tiny(model_dir):
    ...     import torch
    ...     return torch.nn.Linear(4, 2)
    >>> repo = ModelRepository(Path(tempfile.mkdtemp()), extra=[ModelEntry("tiny", tiny, (4,), "classify", "")])
    >>> repo.get("tiny").source, repo.get("resnet18").builtin
    ('zoo:tiny', True)
"""

from __future__ import annotations

import importlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

from vidnexus.errors import ModelError
from vidnexus.gpu_executor.catalog import TASKS, ModelEntry, merge_entries
from vidnexus.gpu_executor.zoo import ZOO

__all__ = ["ModelSpec", "ModelRepository", "TASKS"]


@dataclass(frozen=True)
class ModelSpec:
    name: str
    source: str
    input_shape: tuple[int, ...]
    task: str = "classify"
    version: int = 1
    weights: str | None = None
    prefix: str | None = None
    memory_bytes: int = 0
    description: str = ""
    builtin: bool = field(default=False, compare=False)
    images: str | None = None

    def __post_init__(self) -> None:
        if self.images is not None:
            want = {"rgb": 3, "bgr": 3, "gray": 1}.get(self.images)
            if want is None:
                raise ModelError(f"model {self.name}: images {self.images!r}: choose rgb, bgr or gray")
            if len(self.input_shape) != 3 or self.input_shape[0] != want:
                raise ModelError(f"model {self.name}: {self.images} images need an input shape "
                                 f"{want}xHxW, not {'x'.join(map(str, self.input_shape))}")
        if not self.name or not self.name.replace("_", "").replace("-", "").isalnum():
            raise ModelError(f"model name {self.name!r}: use letters, digits, '_' and '-'")
        if self.task not in TASKS:
            raise ModelError(f"model {self.name}: unknown task {self.task!r}; choose one of {TASKS}")
        kind = self.source.split(":", 1)[0]
        if kind not in ("zoo", "factory", "torchscript"):
            raise ModelError(
                f"model {self.name}: source {self.source!r} must start with zoo:, factory: or torchscript:"
            )
        if not self.input_shape or any(d <= 0 for d in self.input_shape):
            raise ModelError(f"model {self.name}: input shape {self.input_shape} must be positive dims")


class ModelRepository:
    """Catalogue + registered models. Registered names shadow nothing: they must not clash with the
    catalogue.

    Args:
        directory: where the registry lives (``<data_dir>/models``); catalogue models the project
            trains cache their weights here too.
        extra: catalogue entries beside the zoo's, e.g. :func:`vidnexus.apps.model_catalog`.

    Raises:
        ModelError: an ``extra`` entry takes a zoo name, or two take one name.
    """

    def __init__(self, directory: Path, extra: Iterable[ModelEntry] = ()) -> None:
        self.directory = directory
        self.path = directory / "registry.json"
        extra = merge_entries(extra)
        clash = sorted(e.name for e in extra if e.name in ZOO)
        if clash:
            raise ModelError(f"models {clash} are zoo architectures; give the app's models other names")
        self.catalog: dict[str, ModelEntry] = {**ZOO, **{e.name: e for e in extra}}

    def _builtin(self, name: str) -> ModelSpec:
        e = self.catalog[name]
        return ModelSpec(name, f"zoo:{name}", e.input_shape, e.task, description=e.description, builtin=True)

    def _registered(self) -> dict[str, list[dict[str, Any]]]:
        if not self.path.exists():
            return {}
        try:
            registered: dict[str, list[dict[str, Any]]] = json.loads(self.path.read_text())
        except json.JSONDecodeError as e:
            raise ModelError(f"model registry {self.path} is corrupt: {e}") from None
        return registered

    def list(self) -> list[ModelSpec]:
        out = [self._builtin(n) for n in self.catalog]
        for versions in self._registered().values():
            out.extend(self._spec(v) for v in versions)
        return out

    @staticmethod
    def _spec(d: dict[str, Any]) -> ModelSpec:
        return ModelSpec(**{**d, "input_shape": tuple(d["input_shape"])})

    def get(self, name: str, version: int | None = None) -> ModelSpec:
        versions = self._registered().get(name)
        if versions:
            if version is None:
                return self._spec(max(versions, key=lambda v: v["version"]))
            for v in versions:
                if v["version"] == version:
                    return self._spec(v)
            raise ModelError(f"model {name} has no version {version} (have {[v['version'] for v in versions]})")
        if name in self.catalog:
            return self._builtin(name)
        raise ModelError(f"unknown model {name!r}; see `vidnexus models list`")

    def load(self, spec: ModelSpec, device: str = "cpu") -> Any:
        """Build the module (and load local weights when the spec names a file)."""
        import torch

        kind, _, ref = spec.source.partition(":")
        try:
            if kind == "zoo":
                if ref not in self.catalog:
                    raise ModelError(f"model {spec.name}: no catalogue model {ref!r} (zoo: {sorted(ZOO)}; "
                                     f"an app's model needs the app's catalogue, see `vidnexus models list`)")
                module = self.catalog[ref].build(self.directory)
            elif kind == "factory":
                mod_name, _, fn_name = ref.partition(":")
                module = getattr(importlib.import_module(mod_name), fn_name)()
            else:
                module = torch.jit.load(ref, map_location=device)
            if spec.weights:
                module.load_state_dict(torch.load(spec.weights, map_location="cpu", weights_only=True))
        except ModelError:
            raise
        except Exception as e:
            raise ModelError(f"cannot load model {spec.name} from {spec.source}: {e}") from None
        return module.eval().to(device)

    def register(self, spec: ModelSpec, *, overwrite: bool = False) -> ModelSpec:
        """Check that the model loads and accepts its input shape, measure its memory, persist it."""
        import torch

        from vidnexus.gpu_executor.prefix import parameter_bytes

        if spec.name in self.catalog:
            raise ModelError(f"{spec.name!r} is a built-in model; register under another name")
        module = self.load(spec)
        try:
            with torch.inference_mode():
                x = torch.zeros((1, *spec.input_shape))
                module([x[0]] if spec.task in ("detect", "pose") else x)
        except Exception as e:
            raise ModelError(f"model {spec.name} does not accept input shape {spec.input_shape}: {e}") from None
        spec = ModelSpec(**{**asdict(spec), "memory_bytes": parameter_bytes(module), "builtin": False})
        reg = self._registered()
        versions = [v for v in reg.get(spec.name, []) if v["version"] != spec.version]
        if len(versions) != len(reg.get(spec.name, [])) and not overwrite:
            raise ModelError(f"model {spec.name} version {spec.version} exists; pass --overwrite or a new --version")
        d = asdict(spec)
        d.pop("builtin")
        reg[spec.name] = sorted(versions + [d], key=lambda v: v["version"])
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(reg, indent=2))
        return spec
