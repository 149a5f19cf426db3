"""Prefix batching support on the torch side: detect models that share a prefix (same structure and
weights of the leading layers) and run the prefix once on a merged batch, the suffixes per model.

A :class:`Headed` module is split into its trunk and head. ``nn.Sequential`` models are compared
layer by layer, as Nexus finds common prefixes: models whose leading layers hash the same (structure +
every parameter and buffer) share those layers as a trunk, at the deepest depth two or more of them
share (each keeps at least one layer of its own as its head). Models that declare a common prefix
group at registration form one group whatever their hashes (their trunk: the layers they share, else
the first member's all-but-last).
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


def _prefix_hashes(seq: nn.Sequential) -> list[str]:
    """Hash of the first 1, 2, … layers of ``seq`` (each layer's signature chained)."""
    h, out = hashlib.sha256(), []
    for layer in seq:
        h.update(module_signature(layer).encode())
        out.append(h.hexdigest())
    return out


def common_depth(models: Sequence[nn.Sequential]) -> int:
    """How many leading layers every one of ``models`` shares (layer structure and weights), at most
    the shortest's length less one (each keeps a head).

    Example:
        >>> torch.manual_seed(0) is not None
        True
        >>> a, b, c = nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2)
        >>> common_depth([nn.Sequential(a, b, c), nn.Sequential(a, b, nn.Linear(4, 3))])
        2
        >>> common_depth([nn.Sequential(a, c), nn.Sequential(nn.Linear(4, 4), c)])
        0
    """
    hashes = [_prefix_hashes(m) for m in models]
    limit = min(len(h) for h in hashes) - 1
    depth = 0
    while depth < limit and len({h[depth] for h in hashes}) == 1:
        depth += 1
    return depth


def detect_prefix_groups(models: Mapping[str, Any], declared: Mapping[str, str] | None = None) -> dict[str, str]:
    """model → group for every model whose trunk is shared with at least one other model: declared
    groups; Headed models with equal trunks; ``nn.Sequential`` models by their longest shared run
    of leading layers, deepest first (two models sharing 10 layers group at 10 even if a third
    shares only the first with them)."""
    groups: dict[str, str] = {}
    by_key: dict[str, list[str]] = {}
    seqs: dict[str, list[str]] = {}
    for name, m in models.items():
        if declared and name in declared:
            by_key.setdefault("declared:" + declared[name], []).append(name)
        elif isinstance(m, Headed):
            by_key.setdefault(module_signature(m.trunk), []).append(name)
        elif isinstance(m, nn.Sequential) and len(m) >= 2:
            seqs[name] = _prefix_hashes(m)
    for key, names in by_key.items():
        if len(names) > 1:
            for n in names:
                groups[n] = "prefix-" + key.replace("declared:", "")[:12]
    free = dict(seqs)
    for depth in range(max((len(h) for h in seqs.values()), default=1) - 1, 0, -1):
        buckets: dict[str, list[str]] = {}
        for name, h in free.items():
            if len(h) > depth and parameter_bytes(models[name][:depth]) > 0:  # a head left; a trunk with weights
                buckets.setdefault(h[depth - 1], []).append(name)
        for key, names in buckets.items():
            if len(names) > 1:
                for n in names:
                    groups[n] = f"prefix-{key[:12]}"
                    del free[n]
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
        """One runner for a group: Sequential members share the layers they have in common (else, a
        declared group, the first member's all-but-last); Headed members the first one's trunk."""
        seqs = list(models.values())
        if len(seqs) > 1 and all(isinstance(m, nn.Sequential) and len(m) >= 2 for m in seqs):
            depth = common_depth(seqs)
            if depth >= 1:
                return cls(seqs[0][:depth], {k: m[depth:] for k, m in models.items()}, device, postprocess)
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
