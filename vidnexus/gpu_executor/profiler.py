"""Measure ℓ(b) of a model on a device: warm-up, repeats, typical latency and spread per batch size."""

from __future__ import annotations

import hashlib
import json
import platform
import statistics
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from vidnexus.errors import ModelError
from vidnexus.contracts.profile import Profile

__all__ = ["profile_runner", "profile_model", "save_profile", "load_profile", "profile_env", "torch_threads"]


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """torch's intra-op threads set to ``n`` for the duration, then back to what they were."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def profile_runner(
    run: Callable[[list[Any]], Any], make_input: Callable[[], Any], sizes: list[int],
    repeats: int = 5, warmup: int = 2, progress: Callable[[int], None] | None = None,
) -> tuple[Profile, list[tuple[int, float, float]]]:
    """Time ``run`` on batches of each size; returns the profile and (b, typical, spread) rows.

    Every size is warmed (``warmup`` runs each) before any is timed, and the timed runs go round the
    sizes ``repeats`` times instead of one size after the other: a JIT (TorchScript's profiling
    executor re-specializes as shapes change) and the caches then are in the state serving leaves
    them, where batch sizes vary from one batch to the next. The typical latency of a size is the
    median of its runs (a run the OS preempted does not move it); the spread is their standard
    deviation."""
    batches = {b: [make_input() for _ in range(b)] for b in sizes}
    for b in sizes:
        if progress:
            progress(b)
        for _ in range(warmup):
            run(batches[b])
    times: dict[int, list[float]] = {b: [] for b in sizes}
    for _ in range(repeats):
        for b in sizes:
            t0 = time.perf_counter()
            run(batches[b])
            times[b].append(time.perf_counter() - t0)
    rows = [(b, statistics.median(times[b]), statistics.pstdev(times[b])) for b in sizes]
    # ℓ must not decrease with b (noise at small sizes can make it look so).
    means, best = [], 0.0
    for _, m, _ in rows:
        best = max(best, m)
        means.append(best)
    prof = Profile(tuple(r[0] for r in rows), tuple(means), tuple(r[2] for r in rows))
    return prof, rows


def profile_model(
    repo: Any, name: str, device: str = "cpu", max_batch: int = 16, repeats: int = 5,
    threads: int | None = None, progress: Callable[[int], None] | None = None,
) -> tuple[Profile, list[tuple[int, float, float]]]:
    """Profile a repository model (zoo models have random weights: compute cost only)."""
    import numpy as np
    import torch

    from vidnexus.gpu_executor.runner import TorchRunner

    spec = repo.get(name)
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ModelError(f"device {device!r} requested but CUDA is not available here")
    if threads:
        torch.set_num_threads(threads)
    detection = spec.task in ("detect", "pose")
    path = repo.model_file(spec)
    if path is not None:
        from vidnexus.gpu_executor.runner import file_runner

        runner: Any = file_runner(name, path, device, postprocess=lambda r: None)
    else:
        runner = TorchRunner(name, repo.load(spec, device), device, postprocess=lambda r: None, list_input=detection)
    rng = np.random.default_rng(0)
    sizes = sorted({b for b in (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256) if b <= max_batch}
                   | {max_batch})
    return profile_runner(runner, lambda: rng.random(spec.input_shape, dtype=np.float32), sizes, repeats,
                          progress=progress)


PROFILE_METHOD = 2
"""How :func:`profile_runner` measures, part of every cached profile's key: 2 = every size warmed
before timing, rounds over the sizes, medians (1, before 2026-11-27: sizes one after the other, 2
runs each, the first timed while a JIT was still specializing: batches looked up to 2× dearer)."""


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def profile_env(device: str, version: int | None = None) -> dict[str, Any]:
    """What changes ℓ(b) besides the model's architecture: the device (its GPU's name), the CPU,
    torch's version and its thread count now, and the model's version when known. A cached profile
    is used only where all of them match (an executor with 2 torch threads does not plan on a
    profile measured with 1)."""
    import torch

    env: dict[str, Any] = {"device": device, "cpu": _cpu_name(), "torch": torch.__version__,
                           "threads": torch.get_num_threads(), "method": PROFILE_METHOD}
    if device.startswith("cuda"):
        env["gpu"] = torch.cuda.get_device_name(int(device.partition(":")[2] or 0))
    if version is not None:
        env["version"] = version
    return env


def _path(directory: Path, model: str, env: dict[str, Any]) -> Path:
    key = hashlib.sha256(json.dumps(env, sort_keys=True).encode()).hexdigest()[:10]
    return directory / f"{model}@{str(env['device']).replace(':', '_')}-{key}.json"


def save_profile(directory: Path, model: str, device: str, profile: Profile,
                 env: dict[str, Any] | None = None) -> Path:
    """Store ``profile`` under the environment it was measured in (:func:`profile_env` now, unless given)."""
    env = env if env is not None else profile_env(device)
    directory.mkdir(parents=True, exist_ok=True)
    path = _path(directory, model, env)
    path.write_text(json.dumps({"model": model, "device": device, "env": env, **profile.to_dict()}, indent=2))
    return path


def load_profile(directory: Path, model: str, device: str = "cpu",
                 env: dict[str, Any] | None = None) -> Profile | None:
    """The profile cached for ``model`` in this environment (:func:`profile_env` now, unless given), or None."""
    env = env if env is not None else profile_env(device)
    path = _path(directory, model, env)
    if not path.exists():
        return None
    d = json.loads(path.read_text())
    if d.get("env") != env:  # a hash collision, or a file written by hand
        return None
    return Profile.from_dict(d)
