"""Benchmark models: real architectures with random weights (compute cost only)."""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["resnet18_trunk", "headed_variants", "separate_copies", "profile_resnet18_variant"]


def resnet18_trunk() -> Any:
    """ResNet-18 up to the pooled 512-d feature (the part variants share)."""
    import torch.nn as nn
    import torchvision.models as tvm

    m = tvm.resnet18(weights=None)
    return nn.Sequential(m.conv1, m.bn1, m.relu, m.maxpool, m.layer1, m.layer2, m.layer3, m.layer4,
                         m.avgpool, nn.Flatten())


def headed_variants(k: int, classes: int = 10, seed: int = 0) -> dict[str, Any]:
    """k models sharing one trunk, each with its own last layer (specialized by retraining it)."""
    import torch
    import torch.nn as nn

    from vidnexus.gpu_executor.prefix import Headed

    torch.manual_seed(seed)
    trunk = resnet18_trunk().eval()
    return {f"variant{i}": Headed(trunk, nn.Linear(512, classes)).eval() for i in range(k)}


def separate_copies(models: dict[str, Any]) -> dict[str, Any]:
    """The same models with no shared objects (what serving them without prefix batching holds)."""
    return {k: copy.deepcopy(m) for k, m in models.items()}


def profile_resnet18_variant(x: Any) -> Any:
    """ℓ(b) of one ResNet-18 variant on ``x``-shaped inputs, b = 1…32 (two torch threads)."""
    import torch

    from vidnexus.gpu_executor.profiler import profile_runner
    from vidnexus.gpu_executor.runner import TorchRunner

    torch.set_num_threads(2)
    runner = TorchRunner("r18", headed_variants(1)["variant0"], postprocess=lambda t: None)
    prof, _ = profile_runner(runner, lambda: x, [1, 2, 4, 8, 16, 32], repeats=3)
    return prof
