"""Train on first use, then load: the one weights cache and training loop of the models the project
trains itself (the HUD digit reader, the glyph models, the car colour recognizer, the dance pose
regressor).

A trained model is one state-dict file per *part* (most models have one part; the glyph models have
three) and a JSON report beside them: what it was trained on, its held-out accuracy or error, and
``train_seconds``, the wall time of the whole training (rendering the data, fitting, evaluating)
measured here. The first use trains, saves the weights and then the report, and returns them; later
uses build each part's architecture and load its weights. A report the caller does not ``accept``
(weights rendered by another OpenCV version, say), a missing file or an unreadable report means
train again. Each model keeps its own architecture, data and recipe; :func:`fit_minibatches` is the
loop they share.

Example:
    >>> import tempfile, torch
    >>> cache = WeightsCache.single(Path(tempfile.mkdtemp()), "tiny-v1")
    >>> def train():
    ...     model = torch.nn.Linear(2, 1)
    ...     x, y = torch.rand(64, 2), torch.rand(64, 1)
    ...     opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ...     fit_minibatches(model, x, y, torch.nn.functional.mse_loss, opt, epochs=2, batch_size=16)
    ...     return model, {"train_examples": 64}
    >>> model, report = load_or_train(cache, lambda: torch.nn.Linear(2, 1), train)
    >>> sorted(report), cache.exists()
    (['train_examples', 'train_seconds'], True)
    >>> again, report2 = load_or_train(cache, lambda: torch.nn.Linear(2, 1), train)  # loaded, not trained
    >>> report2 == report and torch.equal(again.weight, model.weight)
    True
"""

from __future__ import annotations

import json
import logging
import os
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from vidnexus.clock import Clock, MonotonicClock

__all__ = ["MODEL", "WeightsCache", "every_core", "load_or_train", "load_or_train_parts", "fit_minibatches"]

logger = logging.getLogger(__name__)

MODEL = "model"
"""The part name of a model with one part (:meth:`WeightsCache.single`)."""

Report = dict[str, Any]


def _any_report(report: Report) -> bool:
    return True


@dataclass(frozen=True)
class WeightsCache:
    """Where a trained model lives: its report (JSON) and one state-dict file per part."""

    report: Path
    parts: Mapping[str, Path]

    @classmethod
    def single(cls, model_dir: Path, stem: str, *, report_name: str | None = None) -> WeightsCache:
        """A model of one part: ``<stem>.pt``, reported in ``<stem>.json`` (or ``report_name``)."""
        return cls(model_dir / (report_name or f"{stem}.json"), {MODEL: model_dir / f"{stem}.pt"})

    def exists(self) -> bool:
        """Every file is there (whether its report is accepted is the caller's question)."""
        return self.report.exists() and all(p.exists() for p in self.parts.values())

    def read_report(self) -> Report | None:
        """The saved report, or None when a file is missing or the report is unreadable."""
        if not self.exists():
            return None
        try:
            report = json.loads(self.report.read_text())
        except (OSError, json.JSONDecodeError) as e:
            logger.warning("training report %s is unreadable (%s): training again", self.report, e)
            return None
        return report if isinstance(report, dict) else None

    def load(self, build: Callable[[str], Any]) -> dict[str, Any]:
        """Each part built by ``build(part)``, its saved weights loaded, in eval mode."""
        import torch

        models = {}
        for part, path in self.parts.items():
            module = build(part)
            module.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
            models[part] = module.eval()
        return models

    def save(self, models: Mapping[str, Any], report: Report) -> None:
        """The weights of every part, then the report (a crash in between leaves no report: the
        next use trains again rather than trusting half a cache)."""
        import torch

        missing = set(self.parts) - set(models)
        if missing:
            raise ValueError(f"training returned no {sorted(missing)} for {self.report.name}")
        self.report.parent.mkdir(parents=True, exist_ok=True)
        for part, path in self.parts.items():
            torch.save(models[part].state_dict(), path)
        self.report.write_text(json.dumps(report, indent=2))


def load_or_train_parts(
    cache: WeightsCache,
    build: Callable[[str], Any],
    train: Callable[[], tuple[Mapping[str, Any], Report]],
    *,
    accept: Callable[[Report], bool] = _any_report,
    clock: Clock | None = None,
) -> tuple[dict[str, Any], Report]:
    """The cached parts and report, or ``train()``'s, timed (``train_seconds``) and saved.

    Args:
        cache: where the weights and the report live.
        build: part name → the untrained architecture, to load saved weights into.
        train: renders the data, trains and evaluates; returns the trained parts and a report.
        accept: whether a saved report's weights are still valid (else train again).
        clock: measures ``train_seconds`` (default: the monotonic clock).
    """
    report = cache.read_report()
    if report is not None and accept(report):
        return cache.load(build), report
    clock = clock or MonotonicClock()
    logger.info("training %s (first use; cached afterwards)", cache.report.name)
    t0 = clock.now()
    with every_core():
        models, report = train()
    report = {**report, "train_seconds": round(clock.now() - t0, 1)}
    cache.save(models, report)
    logger.info("trained %s in %.1f s", cache.report.name, report["train_seconds"])
    return {part: models[part].eval() for part in cache.parts}, report


def every_core() -> AbstractContextManager[None]:
    """torch's intra-op threads set to every core this process may run on, for the duration (then
    as they were): training is a one-off job before its model serves, however few threads the
    caller serves with (``vidnexus run`` serves with 1; on two cores the dance regressor's fitting
    took 112 s on one thread, 64 s on two)."""
    from vidnexus.gpu_executor.profiler import torch_threads

    return torch_threads(max(1, len(os.sched_getaffinity(0))))


def load_or_train(
    cache: WeightsCache,
    build: Callable[[], Any],
    train: Callable[[], tuple[Any, Report]],
    *,
    accept: Callable[[Report], bool] = _any_report,
    clock: Clock | None = None,
) -> tuple[Any, Report]:
    """:func:`load_or_train_parts` for a model of one part (a :meth:`WeightsCache.single` cache):
    ``build()`` its architecture, ``train()`` → (model, report)."""
    if set(cache.parts) != {MODEL}:
        raise ValueError(f"{cache.report.name} has parts {sorted(cache.parts)}: use load_or_train_parts")

    def train_one() -> tuple[dict[str, Any], Report]:
        model, report = train()
        return {MODEL: model}, report

    models, report = load_or_train_parts(cache, lambda _part: build(), train_one, accept=accept, clock=clock)
    return models[MODEL], report


def fit_minibatches(
    model: Any,
    x: Any,
    y: Any,
    loss: Callable[[Any, Any], Any],
    optimizer: Any,
    *,
    epochs: int,
    batch_size: int,
    scheduler: Any = None,
) -> None:
    """The training loop the project's models share: ``epochs`` passes over ``(x, y)`` (tensors), each
    in a fresh random order (``torch.randperm``, so ``torch.manual_seed`` makes it repeatable), one
    optimizer step per minibatch (and one ``scheduler`` step when given). Leaves ``model`` in eval
    mode."""
    import torch

    n = len(x)
    model.train()
    for _ in range(epochs):
        perm = torch.randperm(n)
        for k in range(0, n, batch_size):
            idx = perm[k : k + batch_size]
            optimizer.zero_grad()
            loss(model(x[idx]), y[idx]).backward()
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
    model.eval()
