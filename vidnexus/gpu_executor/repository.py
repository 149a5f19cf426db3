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
- ``torchscript:/path/model.pt`` — a TorchScript file;
- ``onnx:/path/model.onnx`` — an ONNX file run with onnxruntime (task ``classify``, ``embed`` or ``text``: its
  first input takes the batch, its first output gives a row per input; the batch dimension must be
  dynamic).

Registration loads the model once, runs a batch of one to check the input shape, and records its
parameter memory. Where the registry lives:

- with a ``store`` (``VNX_STORE=clickhouse``: every role reads the same server), in the tables
  ``vnx_models`` and, for TorchScript and ONNX files, ``vnx_model_files``: the file is copied into
  the store at registration, so every executor and worker on every host sees the model without a
  copy of the file (each caches it under ``<data_dir>/models/files`` on first use);
- without one (the embedded default, one process), a JSON file, ``<data_dir>/models/registry.json``.

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

import base64
import hashlib
import importlib
import json
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

from vidnexus.clock import wall_time
from vidnexus.connectors.store import Store, ensure_table, quote
from vidnexus.contracts.schema import Column, TableSchema
from vidnexus.errors import ModelError
from vidnexus.gpu_executor.catalog import TASKS, ModelEntry, merge_entries
from vidnexus.gpu_executor.zoo import ZOO

__all__ = ["ModelSpec", "ModelRepository", "TASKS", "SOURCES"]

SOURCES = ("zoo", "factory", "torchscript", "onnx")

MODELS_TABLE = TableSchema(
    "vnx_models",
    (Column("name", "String"), Column("version", "UInt32"), Column("spec", "String"), Column("registered", "UInt64")),
    order_by=("name", "version"),
    engine="ReplacingMergeTree(registered)",
)
"""The shared registry (a repository with a store): one row per model version, its spec as JSON."""

FILES_TABLE = TableSchema(
    "vnx_model_files",
    (Column("sha256", "String"), Column("chunk", "UInt32"), Column("chunks", "UInt32"), Column("data", "String")),
    order_by=("sha256", "chunk"),
    engine="ReplacingMergeTree",
)
"""A registered model file (TorchScript, ONNX), base64 in chunks of 1 MiB, by content hash: every
executor and worker reads it from the store and caches it under ``<data_dir>/models/files``."""

CHUNK = 1 << 20


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
    sha256: str | None = None
    """The model file's content hash, when the repository keeps the file in its store."""

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
        if kind not in SOURCES:
            raise ModelError(
                f"model {self.name}: source {self.source!r} must start with zoo:, factory:, torchscript: or onnx:"
            )
        if kind == "onnx" and self.task not in ("classify", "embed", "text"):
            raise ModelError(f"model {self.name}: an ONNX model's task is classify, embed or text (one output, a row per "
                             f"input); a {self.task} model needs its outputs decoded: register it as TorchScript")
        if kind == "onnx" and self.weights:
            raise ModelError(f"model {self.name}: an ONNX file holds its weights; --weights is for torch models")
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

    def __init__(self, directory: Path, extra: Iterable[ModelEntry] = (), store: Store | None = None) -> None:
        self.directory = directory
        self.path = directory / "registry.json"
        self.store = store
        self._tables_ready = False
        extra = merge_entries(extra)
        clash = sorted(e.name for e in extra if e.name in ZOO)
        if clash:
            raise ModelError(f"models {clash} are zoo architectures; give the app's models other names")
        self.catalog: dict[str, ModelEntry] = {**ZOO, **{e.name: e for e in extra}}

    def _builtin(self, name: str) -> ModelSpec:
        e = self.catalog[name]
        return ModelSpec(name, f"zoo:{name}", e.input_shape, e.task, description=e.description, builtin=True)

    def _ensure_tables(self) -> None:
        if self.store is not None and not self._tables_ready:
            ensure_table(self.store, MODELS_TABLE)
            ensure_table(self.store, FILES_TABLE)
            self._tables_ready = True

    def _registered(self) -> dict[str, list[dict[str, Any]]]:
        if self.store is not None:
            if not self._tables_ready and not int(self.store.query(
                    "SELECT count() FROM system.tables WHERE database = currentDatabase() "
                    f"AND name = {quote(MODELS_TABLE.name)}").scalar() or 0):
                return {}
            out: dict[str, list[dict[str, Any]]] = {}
            for (doc,) in self.store.query(f"SELECT spec FROM {MODELS_TABLE.name} FINAL ORDER BY name, version").rows:
                d = json.loads(doc)
                out.setdefault(d["name"], []).append(d)
            return out
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
        if name in self.catalog and version in (None, 1):
            return self._builtin(name)  # registered names never take a catalogue name: no store read
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
        raise ModelError(f"unknown model {name!r} in the model repository ({self.where()}); see `vidnexus models list`")

    def weights_of(self, spec: ModelSpec) -> str:
        """Where ``spec``'s weights come from and what it recognises, in words (``models list``)."""
        kind, _, ref = spec.source.partition(":")
        if spec.weights:
            return f"registered by a user: a local state_dict file ({spec.weights})"
        if kind == "zoo":
            entry = self.catalog.get(ref)
            return entry.weights if entry is not None else f"unknown catalogue model {ref!r}"
        if kind == "factory":
            return f"registered by a user: whatever {ref} builds"
        return f"registered by a user: the {kind} file's own weights"

    def model_file(self, spec: ModelSpec) -> str | None:
        """The file ``spec`` runs outside PyTorch (a registered ``onnx:`` file, or a catalogue
        entry's packaged ``.onnx`` or ``.tflite`` file), or None for a torch model."""
        kind, _, ref = spec.source.partition(":")
        if kind == "onnx":
            return self.file_of(spec)
        entry = self.catalog.get(ref) if kind == "zoo" else None
        if entry is not None and entry.model_file is not None:
            return entry.model_file(self.directory)
        return None

    def where(self) -> str:
        """Where registered models live, in words."""
        if self.store is not None:
            return "the store's vnx_models table, shared by every host"
        return str(self.path)

    def load(self, spec: ModelSpec, device: str = "cpu") -> Any:
        """Build the module (and load local weights when the spec names a file). An ONNX model has
        no torch module, nor has a catalogue entry's packaged file:
        :func:`vidnexus.gpu_executor.loading.build_runner` runs those."""
        import torch

        kind, _, ref = spec.source.partition(":")
        if kind == "onnx" or (kind == "zoo" and ref in self.catalog and self.catalog[ref].model_file is not None):
            raise ModelError(f"model {spec.name} is a model file: it runs in onnxruntime or LiteRT, not as a torch module")
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
                module = torch.jit.load(self.file_of(spec), map_location=device)
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
        if self.store is not None and spec.weights:
            raise ModelError(f"model {spec.name}: --weights names a file on this host only; with a shared "
                             "repository (VNX_STORE=clickhouse), register the model with its weights in a "
                             "TorchScript or ONNX file")
        if spec.source.startswith("onnx:"):
            memory = _check_onnx(spec)
        else:
            module = self.load(spec)
            try:
                with torch.inference_mode():
                    x = torch.zeros((1, *spec.input_shape))
                    module([x[0]] if spec.task in ("detect", "pose") else x)
            except Exception as e:
                raise ModelError(f"model {spec.name} does not accept input shape {spec.input_shape}: {e}") from None
            memory = parameter_bytes(module)
        spec = ModelSpec(**{**asdict(spec), "memory_bytes": memory, "builtin": False})
        reg = self._registered()
        versions = [v for v in reg.get(spec.name, []) if v["version"] != spec.version]
        if len(versions) != len(reg.get(spec.name, [])) and not overwrite:
            raise ModelError(f"model {spec.name} version {spec.version} exists; pass --overwrite or a new --version")
        if self.store is not None:
            self._ensure_tables()
            kind, _, ref = spec.source.partition(":")
            if kind in ("torchscript", "onnx"):
                spec = ModelSpec(**{**asdict(spec), "sha256": self._upload(Path(ref))})
            d = asdict(spec)
            d.pop("builtin")
            self.store.insert(MODELS_TABLE.name, ("name", "version", "spec", "registered"),
                              [(spec.name, spec.version, json.dumps(d), int(wall_time() * 1e6))])
            return spec
        d = asdict(spec)
        d.pop("builtin")
        reg[spec.name] = sorted(versions + [d], key=lambda v: v["version"])
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(reg, indent=2))
        return spec

    # -- files in the store ------------------------------------------------------------------------
    def _upload(self, path: Path) -> str:
        """Copy a model file into the store (once per content); its sha256."""
        assert self.store is not None
        data = path.read_bytes()
        sha = hashlib.sha256(data).hexdigest()
        chunks = max(1, -(-len(data) // CHUNK))
        have = int(self.store.query(f"SELECT count() FROM {FILES_TABLE.name} FINAL WHERE sha256 = {quote(sha)}")
                   .scalar() or 0)
        if have < chunks:
            for k in range(chunks):
                self.store.insert(FILES_TABLE.name, ("sha256", "chunk", "chunks", "data"),
                                  [(sha, k, chunks, base64.b64encode(data[k * CHUNK:(k + 1) * CHUNK]).decode())])
        return sha

    def file_of(self, spec: ModelSpec) -> str:
        """The local path of a TorchScript or ONNX model's file: its source path, or, for a file kept
        in the store, the cached copy (fetched and checked against its hash on first use)."""
        kind, _, ref = spec.source.partition(":")
        if not spec.sha256 or self.store is None:
            return ref
        cache = self.directory / "files" / f"{spec.sha256}{Path(ref).suffix or '.' + kind}"
        if cache.is_file() and _sha256_of(cache) == spec.sha256:
            return str(cache)
        rows = self.store.query(f"SELECT chunk, chunks, data FROM {FILES_TABLE.name} FINAL "
                                f"WHERE sha256 = {quote(spec.sha256)} ORDER BY chunk").rows
        if not rows or len(rows) != int(rows[0][1]):
            raise ModelError(f"model {spec.name}: its file ({spec.sha256[:12]}…) is not complete in the store "
                             f"({len(rows)} of {rows[0][1] if rows else '?'} chunks); register it again")
        data = b"".join(base64.b64decode(r[2]) for r in rows)
        if hashlib.sha256(data).hexdigest() != spec.sha256:
            raise ModelError(f"model {spec.name}: its file in the store does not match its hash; register it again")
        cache.parent.mkdir(parents=True, exist_ok=True)
        # A name of its own per writer (executors sharing a volume may all be pid 1), then an atomic
        # rename: a reader sees the whole file or none, and a cut-short write is never used.
        tmp = cache.with_name(f".{cache.name}.{uuid.uuid4().hex}")
        try:
            tmp.write_bytes(data)
            tmp.replace(cache)
        finally:
            tmp.unlink(missing_ok=True)
        return str(cache)


def _sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _check_onnx(spec: ModelSpec) -> int:
    """Load an ONNX model, check its input against the spec (the dimensions after the batch that
    the file fixes must be the spec's) and that a batch of 1 and of 2 each give a row per input;
    its memory: the file's size (its weights)."""
    import numpy as np

    from vidnexus.gpu_executor.runner import OnnxRunner

    path = Path(spec.source.partition(":")[2])
    if not path.is_file():
        raise ModelError(f"model {spec.name}: no ONNX file at {path}")
    runner = OnnxRunner(spec.name, str(path))
    fixed = runner.input_shape[1:]
    if len(fixed) != len(spec.input_shape) or any(isinstance(d, int) and d != w for d, w in zip(fixed, spec.input_shape)):
        raise ModelError(f"model {spec.name}: the ONNX input {runner.input_name!r} has shape "
                         f"{list(runner.input_shape)}, which does not take --input {'x'.join(map(str, spec.input_shape))} "
                         f"after the batch dimension")
    if isinstance(runner.input_shape[0], int) and runner.input_shape[0] != -1:
        raise ModelError(f"model {spec.name}: the ONNX input's batch dimension is fixed to {runner.input_shape[0]}; "
                         f"export it with a dynamic batch (torch.onnx.export(..., dynamic_axes={{name: {{0: 'n'}}}}))")
    x = np.zeros(spec.input_shape, np.float32)
    for n in (1, 2):
        try:
            rows = runner([x] * n)
        except Exception as e:
            raise ModelError(f"model {spec.name} does not run a batch of {n} of {spec.input_shape}: {e}") from None
        if len(rows) != n:
            raise ModelError(f"model {spec.name}: a batch of {n} gave {len(rows)} rows")
    return path.stat().st_size
