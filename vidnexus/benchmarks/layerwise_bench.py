"""Layer-wise batching (edge-assisted serving paper) against model-level batching and no batching.

Profiles per layer group h_k(b) are measured on this CPU: MobileNetV3-Small at 224 px (random
weights: compute cost), its layers split into 5 groups of similar cost (``split_groups``), each
group timed on the previous group's real output at every batch size, one torch thread. The four
policies of ``gpu_executor.layerwise`` then serve Poisson arrivals in its simulator on those
profiles: ``layerwise`` (min total completion time: requests join a running batch at a group
boundary), ``layerwise_tardy`` (fewest late requests, giving up those that cannot make it),
``model`` (whole-model batches, early drop) and ``none`` (one request at a time). Capacity = the
highest rate with ≥ 90% of requests on time within the paper's 150 ms deadline, by bisection up to
1.5 × the throughput at the largest batch; mean completion time at 60% of the one-at-a-time rate.

The same runs on a *synthetic* GPU-shaped profile (each group 2 ms whatever the batch, plus 0.2 ms
per item: not measured here, labelled ``synthetic``) show where the policy is meant to win.

**Served** (``served``): the real :class:`~vidnexus.gpu_executor.executor.Executor` — its device
thread, as ``vidnexus executor`` runs it — serves the same model (one module, one torch thread) to
Poisson arrivals at 0.6, 1.2, 1.8 and 2.4 × the one-at-a-time rate, 150 ms deadlines: once as a whole
model (early drop, the local planner's batch) and layer-wise (``Executor(staged=...)``, as
``vidnexus executor --layerwise`` serves it) with each of its two policies. Wall-clock runs, so they
carry this VM's noise.

Summary: ``layerwise_capacity_over_model_level`` and ``…_over_none`` (this CPU),
``layerwise_tardy_capacity_over_model_level``, ``layerwise_completion_over_model_level``, the
synthetic profile's ``synthetic_layerwise_capacity_over_model_level``, and the served runs'
``served_layerwise_on_time_over_model_level`` and ``served_layerwise_tardy_on_time_over_model_level`` (at the highest rate) and
``served_layerwise_completion_over_model_level`` (at the lowest).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Sequence

from vidnexus.benchmarks.machine import machine_info
from vidnexus.contracts.profile import Profile
from vidnexus.gpu_executor.layerwise import POLICIES, simulate_layerwise
from vidnexus.sim.loadgen import poisson_arrivals
from vidnexus.sim.simulator import goodput

__all__ = ["run", "split_groups", "measure_groups"]

GROUPS = 5
TARGET = 0.90


def split_groups(costs: Sequence[float], groups: int) -> list[tuple[int, int]]:
    """Contiguous [start, end) ranges of layers whose summed ``costs`` are as close as a greedy cut
    gets to equal (each group ends once it reaches its share of the rest).

    >>> split_groups([1, 1, 1, 1, 4, 1, 1], 3)
    [(0, 4), (4, 5), (5, 7)]
    """
    out, start, left = [], 0, float(sum(costs))
    for g in range(groups, 0, -1):
        if g == 1:
            out.append((start, len(costs)))
            break
        share, acc, end = left / g, 0.0, start
        while end < len(costs) - (g - 1) and (acc < share or end == start):
            acc += costs[end]
            end += 1
        out.append((start, end))
        left -= acc
        start = end
    return out


def measure_groups(quick: bool, console: Any, *, device: str = "cpu",
                   sizes: Sequence[int] | None = None) -> tuple[list[Profile], list[tuple[int, int]]]:
    """h_k(b) of MobileNetV3-Small's 5 layer groups on ``device`` (this CPU by default, one torch
    thread; on a GPU each run is timed to its end with a synchronize)."""
    import numpy as np
    import torch

    from vidnexus.gpu_executor.zoo import random_init

    if device == "cpu":
        torch.set_num_threads(1)
    cuda = device.startswith("cuda")

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    model = random_init("mobilenet_v3_small").eval().to(device)
    layers = [*model.features, torch.nn.Sequential(model.avgpool, torch.nn.Flatten(1), model.classifier)]
    x = torch.from_numpy(np.random.default_rng(0).random((1, 3, 224, 224), dtype=np.float32)).to(device)
    costs, outs = [], []
    with torch.inference_mode():
        for layer in layers:  # one pass at batch 1: each layer's cost, to cut the groups
            layer(x)
            sync()
            t0 = time.perf_counter()
            for _ in range(5):
                y = layer(x)
            sync()
            costs.append((time.perf_counter() - t0) / 5)
            outs.append(x)
            x = y
    cuts = split_groups(costs, GROUPS)
    if sizes is None:
        sizes = [1, 4, 16] if quick else [1, 2, 4, 8, 12, 16, 24, 32]  # the bound B: the largest
    repeats = 3 if quick else 7
    profiles = []
    with torch.inference_mode():
        for a, b in cuts:
            group = torch.nn.Sequential(*layers[a:b])
            one = outs[a]
            means, stds = [], []
            for n in sizes:
                batch = one.repeat(n, *([1] * (one.dim() - 1)))
                group(batch)  # warm the shape
                sync()
                times = []
                for _ in range(repeats):
                    t0 = time.perf_counter()
                    group(batch)
                    sync()
                    times.append(time.perf_counter() - t0)
                times.sort()
                mid = times[: max(1, len(times) - 1)]  # the slowest run out: this VM's stalls
                means.append(sum(mid) / len(mid))
                stds.append((sum((t - means[-1]) ** 2 for t in mid) / len(mid)) ** 0.5)
            profiles.append(Profile(tuple(sizes), tuple(means), tuple(stds)))
            console.print(f"  group layers {a}–{b - 1}: h(1) {means[0] * 1000:.2f} ms, h({sizes[-1]}) "
                          f"{means[-1] * 1000:.2f} ms ({means[-1] / means[0] / sizes[-1]:.2f} of {sizes[-1]} singles)")
    return profiles, cuts


DEVICE_RESULT = Path(__file__).resolve().parents[2] / "bench" / "results" / "device-h200-2026-11-27.json"
"""The same five groups' h_k(b) measured on an NVIDIA H200 by ``vidnexus bench device``."""


def measured_gpu_groups() -> tuple[list[Profile], str]:
    """:data:`DEVICE_RESULT`'s group profiles and its GPU's name; none where the file is not there."""
    import json

    if not DEVICE_RESULT.exists():
        return [], ""
    doc = json.loads(DEVICE_RESULT.read_text())
    return [Profile.from_dict(d) for d in doc["results"][1]["layer_group_profiles"]], str(doc["machine"].get("gpu"))


def _capacity(h: list[Profile], policy: str, deadline_s: float, duration_s: float, lo: float, hi: float,
              tol: float) -> float:
    def frac(rate: float) -> float:
        arr = [a.t for a in poisson_arrivals(rate, duration_s, seed=1)]
        return simulate_layerwise(h, arr, deadline_s, policy=policy).on_time_fraction

    return round(goodput(frac, lo, hi, target=TARGET, tol=tol), 1)


def _compare(name: str, h: list[Profile], deadline_s: float, duration_s: float, tol: float,
             console: Any) -> dict[str, Any]:
    single = sum(p.latency(1) for p in h)
    one_rate = 1.0 / single
    most = max(min(p.max_batch for p in h) / sum(p.latency(min(q.max_batch for q in h)) for p in h), one_rate)
    row: dict[str, Any] = {"profile": name, "deadline_ms": round(deadline_s * 1000, 1),
                           "model_latency_1_ms": round(single * 1000, 2), "one_at_a_time_rps": round(one_rate, 1)}
    for policy in POLICIES:
        row[f"capacity_{policy}"] = _capacity(h, policy, deadline_s, duration_s, 0.2 * one_rate, 1.5 * most, tol)
        arr = [a.t for a in poisson_arrivals(0.6 * one_rate, duration_s, seed=2)]
        r = simulate_layerwise(h, arr, deadline_s, policy=policy)
        row[f"completion_ms_{policy}"] = round(r.mean_completion_s * 1000, 2)
        row[f"on_time_{policy}"] = round(r.on_time_fraction, 4)
        console.print(f"  {name:9s} {policy:16s}: capacity {row[f'capacity_{policy}']:7.1f} req/s, mean completion "
                      f"{row[f'completion_ms_{policy}']:6.2f} ms at {0.6 * one_rate:.0f} req/s")
    return row


SERVED_FACTORS = (0.6, 1.2, 1.8, 2.4)
"""Arrival rates of the served runs, × the one-at-a-time rate 1/ℓ(1)."""
SERVED_POLICIES = ("model", "layerwise", "layerwise_tardy")
"""The whole model (the executor's batching), and the staged server's two policies."""


def served(quick: bool, console: Any, deadline_s: float = 0.150) -> list[dict[str, Any]]:
    """The real executor serving MobileNetV3-Small whole and layer-wise on this CPU (module docstring)."""
    import numpy as np

    from vidnexus.benchmarks.openloop import drive
    from vidnexus.gpu_executor.backend import SessionSpec
    from vidnexus.gpu_executor.executor import Executor
    from vidnexus.gpu_executor.layerwise_server import LayerwiseServer, staged_server
    from vidnexus.gpu_executor.loading import warm_sizes
    from vidnexus.gpu_executor.profiler import profile_runner
    from vidnexus.gpu_executor.runner import TorchRunner
    from vidnexus.gpu_executor.zoo import random_init

    name = "mobilenet_v3_small"
    module = random_init(name).eval()
    x = np.random.default_rng(0).random((3, 224, 224), dtype=np.float32)
    sizes = [1, 4, 16] if quick else [1, 2, 4, 8, 16, 32]
    whole = TorchRunner(name, module, "cpu", postprocess=lambda t: None)
    prof, _ = profile_runner(whole, lambda: x, sizes, repeats=3 if quick else 5, warmup=1)
    for b in warm_sizes(prof.sizes):
        whole([x] * b)
    staged = staged_server(name, module, x, groups=GROUPS, postprocess=lambda t: None, sizes=sizes)
    one_rate = 1.0 / prof.latency(1)
    spec = SessionSpec(f"{name}-{deadline_s * 1000:g}ms", name, deadline_s)
    rows = []
    for factor in SERVED_FACTORS[1:2] if quick else SERVED_FACTORS:
        rate = factor * one_rate
        trace = poisson_arrivals(rate, 1.5 if quick else 10.0, seed=3)
        row: dict[str, Any] = {"rate_rps": round(rate, 1), "over_one_at_a_time": factor, "requests": len(trace)}
        for policy in SERVED_POLICIES:
            if policy == "model":
                ex = Executor([spec], {name: whole}, {name: prof})
            else:
                server = LayerwiseServer(staged.runner, staged.h, policy=policy)
                ex = Executor([spec], {}, {}, staged={name: server})
            with ex:
                res = drive(trace, lambda a: ex.submit(spec.session_id, x))
            ok = [r for _, r in res if r.ok]
            row[f"on_time_{policy}"] = round(sum(1 for r in ok if r.latency_s <= deadline_s) / max(1, len(res)), 4)
            row[f"completion_ms_{policy}"] = round(1000 * sum(r.latency_s for r in ok) / len(ok), 2) if ok else None
            row[f"mean_batch_{policy}"] = round(sum(r.batch for r in ok) / len(ok), 2) if ok else 0.0
            console.print(f"  served {policy:15s} at {rate:6.1f} req/s: on time {row[f'on_time_{policy}']:.3f}, "
                          f"mean completion {row[f'completion_ms_{policy}']} ms")
        rows.append(row)
    return rows


def run(quick: bool, console: Any) -> dict[str, Any]:
    t0 = time.perf_counter()
    console.print("per-group profiles on this CPU:")
    h, cuts = measure_groups(quick, console)
    duration, tol = (1.0, 0.2) if quick else (20.0, 0.02)
    deadline = 0.150  # the paper's
    cpu = _compare("cpu", h, deadline, duration, tol, console)
    synthetic = [Profile.linear(0.0002, 0.002, 64) for _ in range(GROUPS)]
    syn = _compare("synthetic", synthetic, deadline, duration, tol, console)
    gpu_groups, gpu_name = measured_gpu_groups()
    gpu = _compare("gpu", gpu_groups, deadline, 0.3 if quick else 2.0, tol, console) if gpu_groups else None

    console.print("served by the executor on this CPU (whole model vs layer-wise):")
    live = served(quick, console, deadline)

    def ratio(row: dict[str, Any], a: str, b: str) -> float:
        return round(row[a] / row[b], 3) if row[b] else 0.0

    summary = {
        "layerwise_capacity_over_model_level": ratio(cpu, "capacity_layerwise", "capacity_model"),
        "layerwise_capacity_over_none": ratio(cpu, "capacity_layerwise", "capacity_none"),
        "layerwise_tardy_capacity_over_model_level": ratio(cpu, "capacity_layerwise_tardy", "capacity_model"),
        "layerwise_completion_over_model_level": ratio(cpu, "completion_ms_layerwise", "completion_ms_model"),
        "synthetic_layerwise_capacity_over_model_level": ratio(syn, "capacity_layerwise", "capacity_model"),
        "synthetic_layerwise_completion_over_model_level": ratio(syn, "completion_ms_layerwise", "completion_ms_model"),
        "served_layerwise_on_time_over_model_level": ratio(live[-1], "on_time_layerwise", "on_time_model"),
        "served_layerwise_tardy_on_time_over_model_level": ratio(live[-1], "on_time_layerwise_tardy", "on_time_model"),
        "served_layerwise_completion_over_model_level": (ratio(live[0], "completion_ms_layerwise", "completion_ms_model")
                                                         if live[0]["completion_ms_layerwise"] else 0.0),
    }
    if gpu is not None:
        summary.update({
            "gpu_layerwise_capacity_over_model_level": ratio(gpu, "capacity_layerwise", "capacity_model"),
            "gpu_layerwise_capacity_over_none": ratio(gpu, "capacity_layerwise", "capacity_none"),
            "gpu_layerwise_completion_over_model_level": ratio(gpu, "completion_ms_layerwise", "completion_ms_model"),
        })
    console.print(f"summary: {summary}  ({time.perf_counter() - t0:.0f} s)")
    return {"name": "layerwise", "machine": machine_info(),
            "config": {"quick": quick, "model": "mobilenet_v3_small", "groups": GROUPS, "group_layers": cuts,
                       "torch_threads": 1, "profiles": [p.to_dict() for p in h], "deadline_ms": deadline * 1000,
                       "sim_seconds": duration, "target": TARGET,
                       "synthetic_profile": "each group 2 ms + 0.2 ms per item (not measured)",
                       "gpu_profile": f"{DEVICE_RESULT.name}: {gpu_name}" if gpu is not None else None},
            "results": [cpu, syn] + ([gpu] if gpu is not None else []), "served": live, "summary": summary}
