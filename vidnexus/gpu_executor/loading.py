"""Loading models for an executor: runners for repository models (or an app's own loaders),
their ℓ(b) profiles (measured once per model and device, cached), and prefix-batching groups."""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any, Callable

from vidnexus.config import Settings

__all__ = ["build_runner", "prepare_models", "prefix_batching", "profile_schedule", "profile_saver", "warm_sizes"]

logger = logging.getLogger(__name__)

SERVED_SIZES = (1, 2, 3, 4, 6, 8, 12, 16)
"""Batch sizes a served executor profiles (plans never go past the largest: ℓ(b) of the sizes
between is interpolated). A CPU's most efficient batch is often small and not a power of two."""
SLOW_SIZES = (1, 2, 4, 8)
"""What a model too slow for :data:`SERVED_SIZES` within :data:`PROFILE_BUDGET_S` is profiled at."""
WARM_EVERY_UP_TO = 32
"""At start-up every batch size up to this is warmed; past it, only the profile's measured sizes
(a profile the background probes extended to 256 would otherwise warm 32,000 items)."""
PROFILE_BUDGET_S = 15.0
"""Seconds a first profile of a model may take before it is cut to :data:`SLOW_SIZES`, 1 + 2 runs."""


def profile_schedule(one_s: float) -> tuple[tuple[int, ...], int, int]:
    """Pure: (batch sizes, warm-up runs, timed rounds) to profile a model whose batch of 1 takes
    ``one_s``: every size of :data:`SERVED_SIZES` warmed twice, then 5 rounds over them, when that
    fits :data:`PROFILE_BUDGET_S` (a batch of b costs at most about b batches of 1); else
    :data:`SLOW_SIZES`, once and twice (a 5 s detector then profiles in about 4 minutes, not 40).

    Example:
        >>> profile_schedule(0.004)
        ((1, 2, 3, 4, 6, 8, 12, 16), 2, 5)
        >>> profile_schedule(5.0)
        ((1, 2, 4, 8), 1, 2)
    """
    if (2 + 5) * sum(SERVED_SIZES) * one_s <= PROFILE_BUDGET_S:
        return SERVED_SIZES, 2, 5
    return SLOW_SIZES, 1, 2


def warm_sizes(measured: tuple[int, ...]) -> list[int]:
    """Batch sizes to warm before serving (b > 1): every size up to :data:`WARM_EVERY_UP_TO` the
    profile reaches, and its measured sizes past that.

    Example:
        >>> warm_sizes((1, 2, 4, 8))
        [2, 3, 4, 5, 6, 7, 8]
        >>> warm_sizes((1, 8, 16, 24, 32, 48, 64))[-4:]
        [31, 32, 48, 64]
    """
    top = measured[-1]
    return list(range(2, min(top, WARM_EVERY_UP_TO) + 1)) + [b for b in measured if b > WARM_EVERY_UP_TO]


def runner_env(device: str, version: int | None, cuda_graphs: bool = False) -> dict[str, Any]:
    """The key a served model's profile is cached under: what changes it (``profile_env``), and
    whether its runner replays CUDA graphs (a different ℓ(b) on the same device)."""
    from vidnexus.gpu_executor.profiler import profile_env

    env = profile_env(device, version)
    return {**env, "cuda_graphs": True} if cuda_graphs and device.startswith("cuda") else env


def profile_saver(settings: Settings, device: str, repo: Any, cuda_graphs: bool = False) -> Callable[[str, Any], None]:
    """A function (model, profile) → None that caches a profile the executor extended in the
    background (:mod:`~vidnexus.gpu_executor.probing`) where :func:`prepare_models` looks for it,
    under the same environment key (the model's repository version, None for an app's own model;
    ``cuda_graphs`` as the runners were built)."""
    from vidnexus.gpu_executor.profiler import save_profile

    def save(model: str, profile: Any) -> None:
        try:
            version = repo.get(model).version
        except Exception:  # an app's own model: prepare_models keys it without a version
            version = None
        try:
            save_profile(settings.data_dir / "profiles", model, device, profile, runner_env(device, version, cuda_graphs))
        except OSError as e:  # a read-only data directory: serving goes on with the profile in memory
            logger.warning("could not cache the extended profile of %s: %s", model, e)

    return save


def build_runner(repo: Any, model: str, device: str, weights: Path | None, threads: int = 0,
                 cuda_graphs: bool = False) -> Any:
    """A runner for a model of ``repo`` (a :class:`~vidnexus.gpu_executor.repository.ModelRepository`):
    a TorchRunner (real weights from a local state_dict file when given), or a runner for a model
    file (a registered ONNX file, or a catalogue entry's packaged ONNX or TFLite file:
    :func:`~vidnexus.gpu_executor.runner.file_runner`); a catalogue entry's ``postprocess``
    turns each output row into the reply's value. ``threads``: a model file's runtime threads
    (onnxruntime's intra-op, LiteRT's; 0: the runtime's default), as ``vidnexus executor --threads``
    gives torch's. ``cuda_graphs``: a torch model on a CUDA device replays a CUDA graph per batch
    size (``TorchRunner``; a detector, whose inputs are a list, runs eagerly)."""
    from dataclasses import replace

    from vidnexus.gpu_executor.runner import TorchRunner

    spec = repo.get(model)
    entry = repo.catalog.get(model) if spec.builtin else None
    own: Callable[[Any], Any] | None = entry.postprocess if entry is not None else None
    path = repo.model_file(spec)
    if path is not None:
        from vidnexus.gpu_executor.runner import file_runner

        return file_runner(model, path, device, postprocess=own or (lambda t: t.tolist()), threads=threads), spec
    if weights is not None:
        spec = replace(spec, weights=str(weights))
    module = repo.load(spec, device)
    detection = spec.task in ("detect", "pose")
    post: Callable[[Any], Any] = own or ((lambda r: {k: v.tolist() for k, v in r.items()}) if detection
                                         else (lambda t: t.tolist()))
    return TorchRunner(model, module, device, postprocess=post, list_input=detection, cuda_graphs=cuda_graphs), spec


def prepare_models(
    settings: Settings, models: list[str], device: str = "cpu", weights: dict[str, Path] | None = None,
    loaders: dict[str, Callable[[Settings], Any]] | None = None,
    shapes: dict[str, tuple[int, ...]] | None = None, *, repo: Any,
    progress: Callable[[str], None] | None = None, threads: int = 0, cuda_graphs: bool = False,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Runners and profiles for ``models``, every batch size warmed up.

    A model comes from ``repo`` (a :class:`~vidnexus.gpu_executor.repository.ModelRepository`; the
    roles pass one that knows the apps' models, ``vidnexus.roles.executor.repository``), or from
    ``loaders[name]`` (a function returning a torch module, with its input shape in
    ``shapes[name]``). Profiles are measured once per (model, device) and cached under the data
    directory, keyed by what changes them (:func:`~vidnexus.gpu_executor.profiler.profile_env`).
    ``progress`` receives one line per step (loading, profiling with an estimate, warming, ready);
    ``threads``: a model file's runtime threads, ``cuda_graphs``: torch models replay CUDA graphs
    (:func:`build_runner`)."""
    import time

    import numpy as np

    from vidnexus.gpu_executor.profiler import load_profile, profile_runner, save_profile
    from vidnexus.gpu_executor.runner import TorchRunner

    say = progress or (lambda line: None)
    runners: dict[str, Any] = {}
    profiles: dict[str, Any] = {}
    for name in dict.fromkeys(models):
        t0 = time.perf_counter()
        say(f"loading {name} on {device}")
        version = None
        if loaders and name in loaders:
            module = loaders[name](settings)
            runners[name] = TorchRunner(name, module, device, postprocess=lambda t: t.tolist(), cuda_graphs=cuda_graphs)
            shape = (shapes or {})[name]
        else:
            runners[name], spec = build_runner(repo, name, device, (weights or {}).get(name), threads, cuda_graphs)
            shape, version = spec.input_shape, spec.version
        x = np.zeros(shape, np.float32)
        t1 = time.perf_counter()
        runners[name]([x])  # the first call builds kernels
        t2 = time.perf_counter()
        one = math.inf
        for _ in range(3):  # one request: the best of three (TorchScript optimizes on its second call), or 1 s
            t = time.perf_counter()
            runners[name]([x])
            one = min(one, time.perf_counter() - t)
            if time.perf_counter() - t2 > 1.0:
                break
        env = runner_env(device, version, cuda_graphs)
        prof = load_profile(settings.data_dir / "profiles", name, device, env)
        if prof is None:
            sizes, warmup, repeats = profile_schedule(one)
            say(f"profiling {name}: batch sizes {', '.join(map(str, sizes))}, about "
                f"{(warmup + repeats) * sum(sizes) * one:.0f} s "
                f"(once for this model, device, CPU, torch version and thread count)")
            prof, _ = profile_runner(runners[name], lambda: x, list(sizes), repeats=repeats,
                                     warmup=warmup)  # called now
            save_profile(settings.data_dir / "profiles", name, device, prof, env)
        profiles[name] = prof
        # The first batch of each new size builds kernels (100+ ms on a CPU): do it before serving,
        # for the batch sizes a plan is likely to choose (plans stay within the profile).
        todo = warm_sizes(prof.sizes)
        say(f"warming {name}: batch sizes 1-{min(prof.max_batch, WARM_EVERY_UP_TO)}"
            f"{''.join(f', {b}' for b in todo if b > WARM_EVERY_UP_TO)}, "
            f"about {sum(todo) * one + (t2 - t1) * len(todo):.0f} s")
        for b in todo:
            runners[name]([x] * b)
        say(f"{name} ready in {time.perf_counter() - t0:.1f} s")
    return runners, profiles


def served_runners(runners: dict[str, Any], device: str = "cpu", declared: dict[str, str] | None = None
                   ) -> tuple[dict[str, Any], dict[str, str], dict[str, Any]]:
    """What a served executor holds for ``runners``: (its own runners, prefix groups, group runners).
    A prefix group's members run through its PrefixRunner only — their own full copies are not kept,
    so the trunk is held once (the memory prefix batching saves; ``bench prefix`` measures it on
    exactly this)."""
    groups, group_runners = prefix_batching(runners, device, declared)
    return {m: r for m, r in runners.items() if m not in groups}, groups, group_runners


def prefix_batching(runners: dict[str, Any], device: str = "cpu",
                    declared: dict[str, str] | None = None) -> tuple[dict[str, str], dict[str, Any]]:
    """Models among ``runners`` whose trunks are equal (structure and weights), or that declare the
    same prefix group at registration (``declared``: model → group, ``vidnexus models register
    --prefix``), → prefix groups and one :class:`~vidnexus.gpu_executor.prefix.PrefixRunner` per
    group (the trunk held once and run once per merged batch, each model's head on its slice).
    A declared group's members share the first member's trunk: declaring says they are the same."""
    from vidnexus.gpu_executor.prefix import PrefixRunner, detect_prefix_groups

    modules = {m: r.module for m, r in runners.items() if getattr(r, "module", None) is not None
               and not getattr(r, "list_input", False)}
    groups = detect_prefix_groups(modules, declared)
    group_runners = {}
    for gid in set(groups.values()):
        members = {m: modules[m] for m, g in groups.items() if g == gid}
        group_runners[gid] = PrefixRunner.from_models(members, device)
        logger.info("prefix batching: %s share one trunk (%s)", sorted(members), gid)
    return groups, group_runners
