"""Serving a model layer group by layer group (the edge-serving paper's layer-wise batching, for
real): requests that arrive while others are part-way through the model join them at the next
group boundary. The decisions are :func:`vidnexus.gpu_executor.layerwise.next_step`'s (pure, the
same as in ``bench layerwise``'s simulator); this module holds the activations, runs the groups
and answers.

- :class:`StagedRunner`: a torch model cut into groups; ``run_stage(k, activations)`` stacks the
  requests' activations at group ``k``, runs the group once, and splits the result back.
- :class:`LayerwiseServer`: one model on one device. ``submit`` queues a request with its
  deadline; each :meth:`~LayerwiseServer.step` drops what can no longer make it and runs the next
  group for the requests ``next_step`` picks (``policy``: ``layerwise`` min total completion time,
  ``layerwise_tardy`` fewest late, ``model`` whole-model batches of the queue's head, as the
  executor runs them). ``start`` runs the steps on a thread of its own.

``vidnexus models layerwise MODEL`` serves a Poisson trace through it on this machine with each
policy (docs/control-plane.md#layer-wise-batching). ``vidnexus executor --layerwise MODEL`` serves a
model's sessions through one over the bus: the executor's device loop runs its steps
(:class:`~vidnexus.gpu_executor.executor.Executor`, ``staged``), :func:`staged_server` builds it from
the loaded model.
"""

from __future__ import annotations

import logging
import math
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from vidnexus.clock import Clock, MonotonicClock
from vidnexus.contracts.profile import Profile
from vidnexus.contracts.replies import DropReason, Reply
from vidnexus.gpu_executor.layerwise import Job, next_step

__all__ = ["StagedRunner", "LayerwiseServer", "SERVED_POLICIES", "staged_zoo_model", "layer_groups", "whole_profile",
           "staged_server"]

logger = logging.getLogger(__name__)

SERVED_POLICIES = ("layerwise", "layerwise_tardy", "model")


class StagedRunner:
    """``groups`` (torch modules run in order) on ``device``; ``postprocess`` turns the last group's
    row into the reply's value."""

    def __init__(self, name: str, groups: Sequence[Any], device: str = "cpu",
                 postprocess: Callable[[Any], Any] | None = None) -> None:
        import torch

        if not groups:
            raise ValueError(f"model {name}: no layer groups")
        self.name, self.device = name, device
        self.groups = [g.eval().to(device) for g in groups]
        self.postprocess = postprocess or (lambda t: t.tolist())
        self._torch = torch

    def __len__(self) -> int:
        return len(self.groups)

    def first(self, x: Any) -> Any:
        """A request's input (an array or a tensor) as the first group's activation (a batch of one,
        on the device)."""
        t = x if self._torch.is_tensor(x) else self._torch.from_numpy(np.ascontiguousarray(x))
        return t[None].to(self.device)

    def run_stage(self, k: int, activations: Sequence[Any]) -> list[Any]:
        """Group ``k`` on the requests' activations (each a batch of one) at once; their next ones."""
        torch = self._torch
        with torch.inference_mode():
            out = self.groups[k](torch.cat(list(activations)))
            if self.device.startswith("cuda"):
                torch.cuda.synchronize()
        return list(out.split(1))

    def output(self, activation: Any) -> Any:
        return self.postprocess(activation[0].cpu())

    def profile(self, x: np.ndarray, sizes: Sequence[int], repeats: int = 5,
                warm: Sequence[int] = ()) -> list[Profile]:
        """h_k(b) of every group at ``sizes``, each timed on the previous group's real output
        (:func:`~vidnexus.gpu_executor.profiler.profile_runner`: medians, ℓ non-decreasing); each
        group also runs once at every batch size in ``warm`` (a new shape's first run builds kernels)."""
        from vidnexus.gpu_executor.profiler import profile_runner

        act = self.first(x)
        out = []
        for k in range(len(self)):
            for b in warm:
                self.run_stage(k, [act] * b)
            def run(batch: list[Any], k: int = k) -> Any:
                return self.run_stage(k, batch)

            def one(a: Any = act) -> Any:
                return a

            prof, _ = profile_runner(run, one, list(sizes), repeats=repeats, warmup=1)
            out.append(prof)
            act = self.run_stage(k, [act])[0]
        return out


def layer_groups(name: str, module: Any, groups: int = 5) -> list[Any]:
    """``module``'s top-level layers, in the order they run, cut into ``groups`` contiguous groups
    (fewer when it has fewer layers). Architectures: a ``features`` trunk with ``avgpool`` and
    ``classifier`` (MobileNet, EfficientNet, VGG, AlexNet) and ResNets (``conv1`` … ``layer4``, ``fc``).

    Raises:
        ValueError: naming the model, for an architecture whose layer order is not known here.
    """
    import torch

    if all(hasattr(module, a) for a in ("features", "avgpool", "classifier")):
        layers = [*module.features, torch.nn.Sequential(module.avgpool, torch.nn.Flatten(1), module.classifier)]
    elif all(hasattr(module, a) for a in ("conv1", "bn1", "maxpool", "layer4", "fc")):
        layers = [torch.nn.Sequential(module.conv1, module.bn1, module.relu, module.maxpool), module.layer1,
                  module.layer2, module.layer3, torch.nn.Sequential(module.layer4, module.avgpool,
                                                                    torch.nn.Flatten(1), module.fc)]
    else:
        raise ValueError(f"model {name}: its layer groups are not known (layer-wise serving takes a CNN with a "
                         "features/avgpool/classifier trunk, e.g. mobilenet_v3_small, or a ResNet)")
    groups = max(1, min(groups, len(layers)))
    bounds = [round(i * len(layers) / groups) for i in range(groups + 1)]
    return [torch.nn.Sequential(*layers[a:b]) for a, b in zip(bounds, bounds[1:])]


def staged_zoo_model(name: str, groups: int = 5) -> tuple[list[Any], tuple[int, ...]]:
    """A zoo CNN (random weights: compute cost only) cut into ``groups`` (:func:`layer_groups`) and
    its input shape. Models: ``mobilenet_v3_small``, ``resnet18``."""
    from vidnexus.gpu_executor.zoo import random_init

    if name not in ("mobilenet_v3_small", "resnet18"):
        raise ValueError(f"no layer groups for model {name!r}: mobilenet_v3_small or resnet18")
    return layer_groups(name, random_init(name).eval(), groups), (3, 224, 224)


def whole_profile(h: Sequence[Profile]) -> Profile:
    """The whole model's ℓ(b) = Σ_k h_k(b) at the sizes every group measured (what planners see of a
    model served layer-wise).

    >>> whole_profile([Profile.linear(0.001, 0.010, 4), Profile.linear(0.002, 0.005, 2)]).mean_s
    (0.018, 0.021)
    """
    sizes = sorted(set.intersection(*(set(p.sizes) for p in h)))
    if not sizes:
        raise ValueError("the layer groups' profiles share no batch size")
    return Profile(tuple(sizes), tuple(round(sum(p.latency(b) for p in h), 9) for b in sizes),
                   tuple(round(sum(p.planning_latency(b) - p.latency(b) for p in h), 9) for b in sizes))


def staged_server(name: str, module: Any, x: Any, *, device: str = "cpu", groups: int = 5,
                  policy: str = "layerwise", postprocess: Callable[[Any], Any] | None = None,
                  sizes: Sequence[int] = (1, 2, 4, 8, 16), clock: Clock | None = None) -> "LayerwiseServer":
    """A :class:`LayerwiseServer` for a loaded torch ``module`` (the executor's own, so replies equal
    the whole model's), its groups profiled here on the input ``x`` at ``sizes``, then every batch
    size it may run warmed (:func:`~vidnexus.gpu_executor.loading.warm_sizes`: a new shape's first
    run builds kernels)."""
    from vidnexus.gpu_executor.loading import warm_sizes

    runner = StagedRunner(name, layer_groups(name, module, groups), device, postprocess)
    h = runner.profile(x, sizes, warm=warm_sizes(tuple(sorted(sizes))))
    return LayerwiseServer(runner, h, policy=policy, clock=clock)


@dataclass
class _Pending:
    future: "Future[Reply]"
    arrival: float
    activation: Any
    tag: Any = None


class LayerwiseServer:
    """One staged model on one device (see the module docstring). ``profiles``: h_k(b) of each
    group; its smallest largest size bounds a batch unless ``max_batch`` does."""

    def __init__(self, runner: StagedRunner, profiles: Sequence[Profile], *, policy: str = "layerwise",
                 clock: Clock | None = None, max_batch: int | None = None) -> None:
        if policy not in SERVED_POLICIES:
            raise ValueError(f"policy must be one of {', '.join(SERVED_POLICIES)}, not {policy!r}")
        if len(profiles) != len(runner):
            raise ValueError(f"{len(profiles)} group profiles for {len(runner)} groups")
        self.runner, self.h, self.policy = runner, list(profiles), policy
        self.profile = whole_profile(self.h)
        """The whole model's ℓ(b) (:func:`whole_profile`; the group profiles do not change)."""
        self.clock = clock or MonotonicClock()
        self.max_batch = max_batch if max_batch is not None else min(p.max_batch for p in profiles)
        self.jobs: list[Job] = []
        self._pending: dict[int, _Pending] = {}
        self._next = 0
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stop = False
        self.steps: list[tuple[int, int]] = []
        """(group, batch size) of every step run, in order."""

    def has_work(self) -> bool:
        with self._cond:
            return bool(self.jobs)

    def submit(self, x: Any, deadline: float | None = None, slo_s: float = math.inf, tag: Any = None) -> "Future[Reply]":
        """Queue one request; ``deadline`` on this server's clock (default: now + ``slo_s``);
        ``tag`` comes back from the :meth:`step` that runs it."""
        fut: Future[Reply] = Future()
        with self._cond:
            now = self.clock.now()
            rid, self._next = self._next, self._next + 1
            self._pending[rid] = _Pending(fut, now, self.runner.first(x), tag)
            self.jobs.append(Job(rid, now, deadline if deadline is not None else now + slo_s))
            self._cond.notify()
        return fut

    def _whole(self, b: int) -> float:
        return sum(p.latency(b) for p in self.h)

    def _drop(self, rids: Sequence[int], reason: str, now: float) -> None:
        gone = set(rids)
        self.jobs = [j for j in self.jobs if j.rid not in gone]
        for rid in rids:
            p = self._pending.pop(rid)
            p.future.set_result(Reply.dropped(reason, latency_s=now - p.arrival))  # type: ignore[arg-type]

    def _pick(self, now: float) -> list[int]:
        """The requests whose next group runs now (dropping those that can no longer make it)."""
        if self.policy == "model":  # whole-model batches of the head that finish in time (early drop)
            late = [j.rid for j in self.jobs if j.layer == 0 and now + self._whole(1) > j.deadline]
            self._drop(late, "early_drop", now)
            if not self.jobs:
                return []
            if self.jobs[0].layer > 0:  # a batch under way runs on to its end
                top = self.jobs[0].layer
                return [j.rid for j in self.jobs if j.layer == top]
            b = 1
            while b < min(len(self.jobs), self.max_batch) and now + self._whole(b + 1) <= self.jobs[0].deadline:
                b += 1
            return [j.rid for j in self.jobs[:b]]
        late = [j.rid for j in self.jobs if j.deadline <= now]
        self._drop(late, "deadline", now)
        run, drops = next_step(self.jobs, self.h, now, max_batch=self.max_batch,
                               objective="tardy" if self.policy == "layerwise_tardy" else "time")
        self._drop(drops, "early_drop", now)
        return run

    def step(self, until: float = math.inf) -> list[Any]:
        """One device step: drop what cannot make it, run the next group for the requests picked if
        it ends by ``until`` (planned from its h_k), answer those that finished. Returns the tags of
        the requests the group ran for (empty: none ran)."""
        with self._cond:
            now = self.clock.now()
            run = self._pick(now)
            if not run:
                return []
            chosen = set(run)
            members = [j for j in self.jobs if j.rid in chosen]
            k = members[0].layer
            if until < math.inf and now + self.h[k].planning_latency(len(members)) > until:
                return []
            acts = [self._pending[j.rid].activation for j in members]
            tags = [self._pending[j.rid].tag for j in members]
        outs = self.runner.run_stage(k, acts)
        done: list[tuple[_Pending, Any]] = []
        with self._cond:
            self.steps.append((k, len(members)))
            for j, a in zip(members, outs):
                if j.rid not in self._pending:  # ended meanwhile (a stop)
                    continue
                j.layer += 1
                self._pending[j.rid].activation = a
                if j.layer >= len(self.runner):
                    done.append((self._pending.pop(j.rid), a))
            self.jobs = [j for j in self.jobs if j.layer < len(self.runner)]
            end = self.clock.now()
        for p, a in done:
            p.future.set_result(Reply(True, self.runner.output(a), latency_s=end - p.arrival, batch=len(members)))
        return tags

    def start(self) -> "LayerwiseServer":
        self._thread = threading.Thread(target=self._loop, name="vnx-layerwise", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self.jobs and not self._stop:
                    self._cond.wait(0.5)
                if self._stop:
                    break
            try:
                self.step()
            except Exception as e:  # a failing group: every request in flight ends, the server goes on
                logger.warning("model %s: a layer group failed: %s", self.runner.name, e)
                self.end_all("error")

    def end_all(self, reason: DropReason) -> None:
        """Every request in flight ends as a drop for ``reason``."""
        with self._cond:
            self._drop([j.rid for j in self.jobs], reason, self.clock.now())

    def stop(self) -> None:
        """Stop the thread (if started); requests in flight end as drops (``overload``)."""
        with self._cond:
            self._stop = True
            self._drop([j.rid for j in self.jobs], "overload", self.clock.now())
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=10.0)
