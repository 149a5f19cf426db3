"""The repository's own catalogue: LeNet-5 and torchvision architectures, with random weights.

Random weights give real compute profiles (what the executor batches and the scheduler plans with),
never recognitions. Real weights load from a local file when the user has one (``weights=PATH`` at
registration, ``--weights`` on the executor). The models the project trains for its apps (the HUD
digit reader, the car colour recognizer, …) are not here: each app declares its own
(:func:`vidnexus.apps.model_catalog`) and the repository's builder passes them in.

Example:
    >>> ZOO["resnet18"].input_shape, ZOO["ssdlite"].task
    ((3, 224, 224), 'detect')
    >>> sum(p.numel() for p in random_init("lenet5").parameters())
    120382
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from vidnexus.gpu_executor.catalog import ModelEntry
from vidnexus.gpu_executor.preprocess import ImageInput

__all__ = ["ZOO", "lenet5", "random_init"]

_RGB224 = ImageInput((3, 224, 224), "rgb")
_RGB320 = ImageInput((3, 320, 320), "rgb")


def lenet5(num_classes: int = 10) -> Any:
    """LeNet-5 style CNN for 1×28×28 inputs (the game HUD digit reader's architecture)."""
    import torch.nn as nn

    return nn.Sequential(
        nn.Conv2d(1, 16, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * 5 * 5, 120), nn.ReLU(),
        nn.Linear(120, 84), nn.ReLU(),
        nn.Linear(84, num_classes),
    )


def _tv(name: str) -> Callable[[Path], Any]:
    def build(_model_dir: Path) -> Any:
        import torchvision.models as tvm

        return getattr(tvm, name)(weights=None)

    return build


def _ssdlite(_model_dir: Path) -> Any:
    from torchvision.models.detection import ssdlite320_mobilenet_v3_large

    return ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None)


def _keypoint(_model_dir: Path) -> Any:
    from torchvision.models.detection import keypointrcnn_resnet50_fpn

    return keypointrcnn_resnet50_fpn(weights=None, weights_backbone=None)


ZOO: dict[str, ModelEntry] = {e.name: e for e in (
    ModelEntry("lenet5", lambda _model_dir: lenet5(), (1, 28, 28), "classify",
               "LeNet-5 architecture, 10 classes", ImageInput((1, 28, 28), "gray")),
    ModelEntry("resnet18", _tv("resnet18"), (3, 224, 224), "classify", "ResNet-18 architecture, 1,000-class head",
               _RGB224),
    ModelEntry("resnet50", _tv("resnet50"), (3, 224, 224), "classify", "ResNet-50 architecture, 1,000-class head",
               _RGB224),
    ModelEntry("mobilenet_v3_small", _tv("mobilenet_v3_small"), (3, 224, 224), "classify",
               "MobileNetV3-Small architecture, 1,000-class head", _RGB224),
    ModelEntry("mobilenet_v3_large", _tv("mobilenet_v3_large"), (3, 224, 224), "classify",
               "MobileNetV3-Large architecture, 1,000-class head", _RGB224),
    ModelEntry("ssdlite", _ssdlite, (3, 320, 320), "detect", "SSDlite320 MobileNetV3-Large detector architecture",
               _RGB320),
    ModelEntry("keypointrcnn", _keypoint, (3, 320, 320), "pose",
               "Keypoint R-CNN ResNet-50-FPN architecture, 17 COCO keypoints", _RGB320),
)}
"""Name → entry: the architectures every repository knows (random weights)."""


def random_init(name: str) -> Any:
    """The zoo architecture ``name`` with random weights (for benchmarks and profiles)."""
    return ZOO[name].build(Path())
