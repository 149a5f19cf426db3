"""Profiles of real models measured on this machine, shared by the control-plane benchmarks."""

from __future__ import annotations

from typing import Any, Sequence

from vidnexus.contracts.profile import Profile

__all__ = ["measured_profiles"]


def measured_profiles(quick: bool, console: Any = None, threads: int = 2, *, device: str = "cpu",
                      sizes: Sequence[int] | None = None, detection_max: int = 8,
                      cuda_graphs: bool = False) -> dict[str, Profile]:
    """ℓ(b) of a few real architectures (random weights: compute cost only) on ``device`` (this
    CPU by default, with ``threads`` torch threads, restored afterwards), at ``sizes`` (a default
    ladder up to 32) and at most ``detection_max`` for the detector; ``cuda_graphs``: the runners
    replay CUDA graphs (``TorchRunner(cuda_graphs=True)``; the detector has none)."""
    import numpy as np

    from vidnexus.benchmarks.models import headed_variants
    from vidnexus.benchmarks.openloop import warm_up
    from vidnexus.gpu_executor.profiler import profile_runner, torch_threads
    from vidnexus.gpu_executor.runner import TorchRunner
    from vidnexus.gpu_executor.zoo import random_init

    with torch_threads(threads):
        specs: dict[str, tuple[Any, tuple[int, ...], bool]] = {
            "lenet5": (random_init("lenet5"), (1, 28, 28), False),
            "resnet18_64px": (headed_variants(1)["variant0"], (3, 64, 64), False),
            "mobilenet_v3_small": (random_init("mobilenet_v3_small"), (3, 224, 224), False),
            "ssdlite": (random_init("ssdlite"), (3, 320, 320), True),
        }
        if sizes is None:
            sizes = [1, 2, 4, 8, 16] if quick else [1, 2, 4, 8, 12, 16, 24, 32]
        out = {}
        for name, (module, shape, detection) in specs.items():
            if console:
                console.print(f"  profiling {name} {shape} on {device}, {threads} thread(s) …")
            runner = TorchRunner(name, module, device=device, postprocess=lambda r: None, list_input=detection,
                                 cuda_graphs=cuda_graphs)
            x = np.random.default_rng(0).random(shape, dtype=np.float32)
            warm_up(runner, x, (1, 2))
            sz = [b for b in sizes if not detection or b <= detection_max]
            out[name], _ = profile_runner(runner, lambda: x, sz, repeats=2 if quick else 3, warmup=1)  # called now
    return out
