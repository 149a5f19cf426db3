"""Prefix batching support on the torch side: detect models that share a prefix (same structure and
weights of the leading layers) and run the prefix once on a merged batch, the suffixes per model.

A model is split into a prefix ("trunk") and a suffix ("head") when it is a :class:`Headed` module or
an ``nn.Sequential`` (everything but the last layer is the trunk). Two models share a prefix when their
trunks hash the same (module structure + every parameter and buffer), or when the user declares a
common prefix group at registration.
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import torch
import torch.nn as nn

from vidnexus.errors import BatchContractError, ModelError

__all__ = ["Headed", "split_prefix", "module_signature", "detect_prefix_groups", "PrefixRunner",
           "parameter_bytes"]


class Headed(nn.Module):
    """An ``nn.Module`` computing ``head(trunk(x))`` whose trunk can be shared.

    Example:
        >>> m = Headed(nn.Flatten(), nn.Linear(4, 2))
        >>> tuple(m(torch.zeros(3, 2, 2)).shape)
        (3, 2)
    """

    def __init__(self, trunk: nn.Module, head: nn.Module) -> None:
        super().__init__()
        self.trunk, self.head = trunk, head

    def forward(self, x: Any) -> Any:
        return self.head(self.trunk(x))


def split_prefix(module: Any) -> tuple[Any, Any] | None:
    """(trunk, head) of a splittable module, else None."""
    if isinstance(module, Headed):
        return module.trunk, module.head
    if isinstance(module, nn.Sequential) and len(module) >= 2:
        return module[:-1], module[-1]
    return None


def module_signature(module: Any) -> str:
    """SHA-256 of a module's structure and of every parameter and buffer."""
    h = hashlib.sha256(repr(module).encode())
    for name, t in list(module.named_parameters()) + list(module.named_buffers()):
        h.update(name.encode())
        h.update(str(tuple(t.shape)).encode())
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def _tensors(module: Any) -> list[torch.Tensor]:
    return list(module.parameters()) + list(module.buffers())


def parameter_bytes(module: Any) -> int:
    return sum(t.numel() * t.element_size() for t in _tensors(module))


def held_bytes(runners: Iterable[Any]) -> int:
    """Bytes of the distinct parameters and buffers that ``runners`` hold (a TorchRunner's module, a
    PrefixRunner's trunk and heads), each tensor counted once however many runners share it: the
    model memory an executor holding these runners keeps."""
    seen: dict[int, int] = {}
    for r in runners:
        modules = [getattr(r, "module", None), getattr(r, "trunk", None), *getattr(r, "heads", {}).values()]
        for m in modules:
            if m is None or not hasattr(m, "parameters"):
                continue
            for t in _tensors(m):
                seen[t.data_ptr()] = t.numel() * t.element_size()
    return sum(seen.values())


def detect_prefix_groups(models: Mapping[str, Any], declared: Mapping[str, str] | None = None) -> dict[str, str]:
    """model → group for every model whose trunk is shared with at least one other model."""
    by_sig: dict[str, list[str]] = {}
    for name, m in models.items():
        parts = split_prefix(m)
        if parts is None:
            continue
        key = ("declared:" + declared[name]) if declared and name in declared else module_signature(parts[0])
        by_sig.setdefault(key, []).append(name)
    groups = {}
    for key, names in by_sig.items():
        if len(names) > 1:
            gid = "prefix-" + key.replace("declared:", "")[:12]
            for n in names:
                groups[n] = gid
    return groups


class PrefixRunner:
    """Runs one trunk on a merged batch and each model's head on its slice. The trunk is held once."""

    def __init__(self, trunk: Any, heads: Mapping[str, Any], device: str = "cpu",
                 postprocess: Callable[[Any], Any] | None = None) -> None:
        self.trunk = trunk.eval().to(device)
        self.heads = {k: h.eval().to(device) for k, h in heads.items()}
        self.device = device
        self.postprocess = postprocess or (lambda t: t.tolist())
        self._lock = threading.Lock()

    @classmethod
    def from_models(cls, models: Mapping[str, Any], device: str = "cpu",
                    postprocess: Callable[[Any], Any] | None = None) -> "PrefixRunner":
        splits = {k: split_prefix(m) for k, m in models.items()}
        bad = [k for k, s in splits.items() if s is None]
        if bad:
            raise ModelError(f"models {bad} cannot be split into prefix and suffix")
        first = next(iter(splits.values()))
        return cls(first[0], {k: s[1] for k, s in splits.items()}, device, postprocess)  # type: ignore[index]

    def memory_bytes(self) -> int:
        return parameter_bytes(self.trunk) + sum(parameter_bytes(h) for h in self.heads.values())

    def run_parts(self, parts: Sequence[tuple[str, Sequence[np.ndarray]]]) -> list[list[Any]]:
        """[(model, inputs)] → [outputs per part], the trunk run once on all inputs."""
        sizes = [len(xs) for _, xs in parts]
        flat = [x for _, xs in parts for x in xs]
        if not flat:
            return [[] for _ in parts]
        with self._lock, torch.inference_mode():
            feats = self.trunk(torch.from_numpy(np.stack(flat)).to(self.device))
            outs, k = [], 0
            for (model, _), n in zip(parts, sizes):
                y = self.heads[model](feats[k : k + n])
                k += n
                rows = [self.postprocess(r) for r in y.cpu()]
                if len(rows) != n:
                    raise BatchContractError(f"head {model} returned {len(rows)} outputs for {n} inputs")
                outs.append(rows)
        return outs

    def runner_for(self, model: str) -> Callable[[Sequence[np.ndarray]], list[Any]]:
        """A plain batch runner for one model (trunk + its head)."""
        return lambda xs: self.run_parts([(model, xs)])[0]
