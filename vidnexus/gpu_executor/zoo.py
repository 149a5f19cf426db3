"""Model architectures the repository knows out of the box.

The torchvision architectures run with random weights: they give real compute profiles, never
recognitions. Real weights load from a local file when the user has one (``weights=PATH`` at
registration). Small models the project trains itself (the digit reader) live in
``vidnexus.training``.
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["ZOO", "ZooEntry", "lenet5"]


class ZooEntry:
    """How to build one architecture, and what it expects."""

    def __init__(
        self,
        factory: Callable[[], Any],
        input_shape: tuple[int, int, int],
        task: str,
        description: str,
    ) -> None:
        self.factory = factory
        self.input_shape = input_shape
        self.task = task
        self.description = description


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


def _tv(name: str, **kw: Any) -> Callable[[], Any]:
    def build() -> Any:
        import torchvision.models as tvm

        return getattr(tvm, name)(weights=None, **kw)

    return build


def _ssdlite() -> Any:
    from torchvision.models.detection import ssdlite320_mobilenet_v3_large

    return ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None)


def _hud_digits() -> Any:
    from vidnexus.config import load_settings
    from vidnexus.training.digits import load_or_train

    return load_or_train(load_settings().data_dir / "models")[0]


def _game_icon(game: int) -> Callable[[], Any]:
    def build() -> Any:
        from vidnexus.apps.game.models import icon_classifier

        return icon_classifier(game)

    return build


def _glyph_compact() -> Any:
    from vidnexus.apps.game.models import compact_features

    return compact_features()


def _car_colours() -> Any:
    from vidnexus.apps.traffic.models import car_colours

    return car_colours()


def _dance_pose() -> Any:
    from vidnexus.apps.dance.models import dance_pose

    return dance_pose()


def _keypoint() -> Any:
    from torchvision.models.detection import keypointrcnn_resnet50_fpn

    return keypointrcnn_resnet50_fpn(weights=None, weights_backbone=None)


ZOO: dict[str, ZooEntry] = {
    "lenet5": ZooEntry(lenet5, (1, 28, 28), "classify", "LeNet-5 architecture (10 classes, random weights)"),
    "hud_digits": ZooEntry(
        _hud_digits, (1, 28, 28), "classify",
        "LeNet-5 trained by the project on rendered HUD digits (trained on first use, ~25 s; cached)",
    ),
    "resnet18": ZooEntry(_tv("resnet18"), (3, 224, 224), "classify", "ResNet-18, ImageNet head"),
    "resnet50": ZooEntry(_tv("resnet50"), (3, 224, 224), "classify", "ResNet-50, ImageNet head"),
    "mobilenet_v3_small": ZooEntry(
        _tv("mobilenet_v3_small"), (3, 224, 224), "classify", "MobileNetV3-Small, ImageNet head"
    ),
    "mobilenet_v3_large": ZooEntry(
        _tv("mobilenet_v3_large"), (3, 224, 224), "classify", "MobileNetV3-Large, ImageNet head"
    ),
    "ssdlite": ZooEntry(_ssdlite, (3, 320, 320), "detect", "SSDlite320 MobileNetV3-Large detector"),
    "keypointrcnn": ZooEntry(
        _keypoint, (3, 320, 320), "pose", "Keypoint R-CNN ResNet-50-FPN (17 COCO keypoints)"
    ),
}
ZOO["car_colours"] = ZooEntry(
    _car_colours, (3, 32, 32), "classify",
    "car colour recognizer trained by the project on rendered cars (6 colours; trained on first use, ~15 s)",
)
ZOO["dance_pose"] = ZooEntry(
    _dance_pose, (3, 64, 64), "embed",
    "pose regressor trained by the project on stick-figure dancers (13 keypoints; trained on first use, 2–3 min)",
)
ZOO["glyph_compact"] = ZooEntry(
    _glyph_compact, (3, 32, 32), "embed",
    "compact glyph template's body (48 features; the game app's WEG specializes its last layer)",
)
for _g in range(20):
    ZOO[f"game_icons_g{_g}"] = ZooEntry(
        _game_icon(_g), (3, 32, 32), "classify",
        f"item icons of game {_g}: the glyph oracle's trunk (shared by all games) + this game's 24-icon head",
    )
