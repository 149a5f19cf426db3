"""The model repository: built-in zoo architectures plus models registered by users.

A registered model is a name, a version, a task, an input shape and a *source*:

- ``zoo:NAME`` — a zoo architecture (random weights unless ``weights`` points to a local file);
- ``factory:package.module:function`` — a Python callable returning an ``nn.Module``;
- ``torchscript:/path/model.pt`` — a TorchScript file.

Registration loads the model once, runs a batch of one to check the input shape, and records its
parameter memory. The registry is a JSON file under ``<data_dir>/models/registry.json``.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vidnexus.errors import ModelError

__all__ = ["ModelSpec", "ModelRepository", "TASKS"]

TASKS = ("classify", "detect", "pose", "embed")


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

    def __post_init__(self) -> None:
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
    """Zoo + registered models. Registered names shadow nothing: they must not clash with the zoo."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / "registry.json"

    def _registered(self) -> dict[str, list[dict[str, Any]]]:
        if not self.path.exists():
            return {}
        try:
            return json.loads(self.path.read_text())
        except json.JSONDecodeError as e:
            raise ModelError(f"model registry {self.path} is corrupt: {e}") from None

    def list(self) -> list[ModelSpec]:
        from vidnexus.gpu_executor.zoo import ZOO

        out = [ModelSpec(n, f"zoo:{n}", e.input_shape, e.task, description=e.description, builtin=True)
               for n, e in ZOO.items()]
        for versions in self._registered().values():
            out.extend(self._spec(v) for v in versions)
        return out

    @staticmethod
    def _spec(d: dict[str, Any]) -> ModelSpec:
        return ModelSpec(**{**d, "input_shape": tuple(d["input_shape"])})

    def get(self, name: str, version: int | None = None) -> ModelSpec:
        from vidnexus.gpu_executor.zoo import ZOO

        versions = self._registered().get(name)
        if versions:
            if version is None:
                return self._spec(max(versions, key=lambda v: v["version"]))
            for v in versions:
                if v["version"] == version:
                    return self._spec(v)
            raise ModelError(f"model {name} has no version {version} (have {[v['version'] for v in versions]})")
        if name in ZOO:
            e = ZOO[name]
            return ModelSpec(name, f"zoo:{name}", e.input_shape, e.task, description=e.description, builtin=True)
        raise ModelError(f"unknown model {name!r}; see `vidnexus models list`")

    def load(self, spec: ModelSpec, device: str = "cpu") -> Any:
        """Build the module (and load local weights when the spec names a file)."""
        import torch

        kind, _, ref = spec.source.partition(":")
        try:
            if kind == "zoo":
                from vidnexus.gpu_executor.zoo import ZOO

                if ref not in ZOO:
                    raise ModelError(f"model {spec.name}: no zoo architecture {ref!r}")
                module = ZOO[ref].factory()
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
        from vidnexus.gpu_executor.zoo import ZOO

        if spec.name in ZOO:
            raise ModelError(f"{spec.name!r} is a built-in zoo model; register under another name")
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
