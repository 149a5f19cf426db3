"""``vidnexus bench device``: what the control plane needs to know about an accelerator, measured on
it. Run it on a machine with a GPU (``--device cuda``, the default when torch sees one); the other
benchmarks read its committed JSON where a figure needs a real device type this box does not have
(``bench scheduler``'s heterogeneous cost, ``bench layerwise``'s GPU groups).

It measures, on the device and on the same machine's CPU (all its cores, the second device type):

1. ℓ(b) of the profile benchmarks' four architectures (``benchmarks.profiles``; random weights:
   compute cost only) up to batch 256 on the device (the background prober's ladder,
   ``gpu_executor.probing.LADDER``) and up to 32 on the CPU. ℓ(b) is what a served executor pays:
   stacking the batch on the host, the copy to the device, the model, the synchronize.
2. h_k(b) of MobileNetV3-Small's five layer groups on the device (``bench layerwise``'s cut).
3. The executor served for real, with the eager runner and (on CUDA) with CUDA graphs
   (``TorchRunner(cuda_graphs=True)``): a start-up profile up to 32; ¼, ½ and 1× of what batches
   up to 32 serve within the SLO (C32, from the runner's profile); then, with the fastest runner,
   a quiet period at ¼ C32 followed by a step halfway to what its profile to 256 serves, with and
   without background probing (the prober measures 48…256 in the quiet period's idle time).
   Good fraction (answered within the SLO) after the step with ``probe=True`` (the executor
   measures 48…256 in the quiet period's idle time) and without. On a device where ℓ(b)/b stops
   falling by 32 (this box's CPU) there is nothing to gain, and the summary says so.

Summary: ``probe_capacity_gain`` (best within-SLO throughput with the ladder to 256 over up to 32,
from the profile), ``probe_served_good_after_step`` and ``…_without_probe``, and the device's
name.
"""

from __future__ import annotations

import os
import time
from typing import Any, Sequence

from vidnexus.benchmarks.machine import machine_info
from vidnexus.contracts.profile import Profile

__all__ = ["run", "capacity_within", "restrict"]

SLO_S = 0.100
"""The served probing run's SLO, and the SLO the capacity gain is computed at."""


def capacity_within(p: Profile, slo_s: float, max_batch: int | None = None) -> float:
    """The most requests per second ``p`` serves within ``slo_s`` (Nexus's worst case 2ℓ(b) ≤
    SLO) at batch sizes up to ``max_batch``; 0 when not even one fits.

    >>> p = Profile((1, 32, 256), (0.004, 0.010, 0.040), (0.0, 0.0, 0.0))
    >>> capacity_within(p, 0.100), capacity_within(p, 0.100, 32)
    (6400.0, 3200.0)
    """
    best = 0.0
    for b, lat in zip(p.sizes, p.mean_s):
        if (max_batch is None or b <= max_batch) and 2 * lat <= slo_s:
            best = max(best, b / lat)
    return best


def restrict(p: Profile, max_batch: int) -> Profile:
    """``p`` measured only up to ``max_batch`` (a served executor's start-up profile)."""
    keep = [k for k, b in enumerate(p.sizes) if b <= max_batch]
    return Profile(tuple(p.sizes[k] for k in keep), tuple(p.mean_s[k] for k in keep),
                   tuple(p.std_s[k] for k in keep) if p.std_s else ())


def _serve(runner: Any, start: Profile, x: Any, trace: Sequence[Any], probe: bool
           ) -> tuple[list[tuple[Any, Any]], dict[str, Any], list[int]]:
    """Replay ``trace`` into a one-session executor; the replies, its stats and its profile's sizes
    at the end."""
    from vidnexus.benchmarks.openloop import drive
    from vidnexus.gpu_executor.backend import SessionSpec
    from vidnexus.gpu_executor.executor import Executor

    ex = Executor([SessionSpec("s", "m", SLO_S)], {"m": runner}, {"m": start}, workers=1, probe=probe).start()
    try:
        res = drive(trace, lambda a: ex.submit("s", x))
        stats = ex.stats()[0]
        sizes = list(ex.core.profiles()["m"].sizes)
    finally:
        ex.stop()
    keep = ("drops", "mean_batch", "latency_p50_ms", "latency_p99_ms", "device_busy_fraction")
    return res, {k: stats[k] for k in keep if k in stats}, sizes


def _served(device: str, profiles: dict[str, Profile], quick: bool, console: Any) -> list[dict[str, Any]]:
    """The executor serving one MobileNetV3-Small session (float32 224² inputs, as profiled), with
    each runner (``eager``; ``graphs``: CUDA graphs) whose profile is given: first a sweep without
    probing at ¼, ½ and 1× of what batches up to 32 serve within the SLO (C32, from that runner's
    profile), to see what the served executor sustains; then, with the last runner, a quiet period
    at ¼ C32 followed by a step halfway from C32 to what the runner's whole profile (to 256) serves,
    with and without background probing (1.5× C32 where the profile stops at 32)."""
    import numpy as np

    from vidnexus.benchmarks.openloop import good_fraction
    from vidnexus.gpu_executor.runner import TorchRunner
    from vidnexus.gpu_executor.zoo import random_init
    from vidnexus.sim.loadgen import Arrival, poisson_arrivals

    x = np.random.default_rng(0).random((3, 224, 224), dtype=np.float32)
    rows: list[dict[str, Any]] = []
    sweep_s = 1.0 if quick else 3.0
    quiet_s, step_s = (2.0, 1.0) if quick else (6.0, 4.0)
    for kind, profile in profiles.items():
        runner = TorchRunner("m", random_init("mobilenet_v3_small"), device=device, postprocess=lambda r: None,
                             cuda_graphs=kind == "graphs")
        for b in range(1, 33):
            runner([x] * b)
        start = restrict(profile, 32)
        c32 = capacity_within(start, SLO_S)
        for k in (0.25, 0.5, 1.0):
            res, stats, _ = _serve(runner, start, x, poisson_arrivals(k * c32, sweep_s, seed=3), False)
            ok = sum(1 for _, r in res if r.ok and r.latency_s <= SLO_S)
            rows.append({"runner": kind, "phase": "sweep", "probe": False, "rate_over_c32": k, "rps": round(k * c32, 1),
                         "good": round(good_fraction(res, SLO_S), 4), "served_rps": round(ok / sweep_s, 1), **stats})
            console.print(f"  {kind}: served at {k:.2f} C32 ({k * c32:.0f} req/s): good {rows[-1]['good']:.3f}, "
                          f"mean batch {stats.get('mean_batch', 0):.1f}, p99 {stats.get('latency_p99_ms', 0):.0f} ms")
        if kind != list(profiles)[-1]:
            continue  # the step runs with the last (fastest) runner only
        # The step: past what batches up to 32 serve, halfway to what the full profile serves.
        high = 0.5 * (c32 + capacity_within(profile, SLO_S)) if profile.max_batch > 32 else 1.5 * c32
        quiet = poisson_arrivals(0.25 * c32, quiet_s, seed=1)
        step = [Arrival(quiet_s + a.t) for a in poisson_arrivals(high, step_s, seed=2)]
        for probe in (False, True):
            res, stats, sizes = _serve(runner, start, x, quiet + step, probe)
            after = [(a, r) for a, r in res if a.t >= quiet_s]
            row = {"runner": kind, "phase": "step", "probe": probe, "quiet_rps": round(0.25 * c32, 1),
                   "step_rps": round(high, 1), "quiet_s": quiet_s, "step_s": step_s, "requests": len(res),
                   "good_quiet": round(good_fraction([(a, r) for a, r in res if a.t < quiet_s], SLO_S), 4),
                   "good_after_step": round(good_fraction(after, SLO_S), 4),
                   "served_after_step_rps": round(sum(1 for _, r in after if r.ok and r.latency_s <= SLO_S) / step_s, 1),
                   "largest_batch_after_step": max((r.batch for _, r in after if r.ok), default=0),
                   "profile_sizes_at_end": sizes, **stats}
            rows.append(row)
            console.print(f"  {kind}: step, probe={probe}: good {row['good_quiet']:.3f} quiet, "
                          f"{row['good_after_step']:.3f} after the step to {row['step_rps']:.0f} req/s (largest batch "
                          f"{row['largest_batch_after_step']}, profile to {max(sizes)})")
    return rows


def graphs_match(device: str) -> float:
    """The largest difference between MobileNetV3-Small's outputs run eagerly and through CUDA
    graphs, at batches that are padded (5 in the graph of 8, 40 in 48): the graph runner's check."""
    import numpy as np

    from vidnexus.gpu_executor.runner import TorchRunner
    from vidnexus.gpu_executor.zoo import random_init

    module = random_init("mobilenet_v3_small")
    eager = TorchRunner("e", module, device=device, postprocess=lambda r: r.numpy())
    graphs = TorchRunner("g", module, device=device, postprocess=lambda r: r.numpy(), cuda_graphs=True)
    rng = np.random.default_rng(1)
    worst = 0.0
    for n in (5, 40, 5):
        xs = [rng.random((3, 224, 224), dtype=np.float32) for _ in range(n)]
        worst = max(worst, max(float(np.abs(a - b).max()) for a, b in zip(eager(xs), graphs(xs))))
    return worst


def run(quick: bool, console: Any, device: str | None = None) -> dict[str, Any]:
    import torch

    from vidnexus.benchmarks.layerwise_bench import measure_groups
    from vidnexus.benchmarks.profiles import measured_profiles
    from vidnexus.gpu_executor.probing import LADDER

    t0 = time.perf_counter()
    device = device or os.environ.get("VNX_BENCH_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    cores = os.cpu_count() or 1
    if device.startswith("cuda"):
        name = torch.cuda.get_device_name(0)
        dev_sizes: Sequence[int] = [1, 4, 16, 32, 64] if quick else [1, 2, 4, 8, 12, 16, *LADDER]
        detection_max = 16 if quick else 64
    else:  # no accelerator: the same runs on the CPU, to check the benchmark (its figures say "cpu")
        name = f"cpu ({cores} threads)"
        dev_sizes = [1, 4, 16, 32] if quick else [1, 2, 4, 8, 16, 24, 32, 48, 64]
        detection_max = 4 if quick else 8
    console.print(f"profiles on {device} ({name}) up to {max(dev_sizes)} …")
    on_device = measured_profiles(quick, console, threads=cores, device=device, sizes=dev_sizes,
                                  detection_max=detection_max)
    console.print(f"profiles on the host CPU ({cores} threads) …")
    on_cpu = measured_profiles(quick, console, threads=cores, sizes=[1, 4, 16] if quick else [1, 2, 4, 8, 16, 32],
                               detection_max=4 if quick else 8)
    gains = {}
    for m, p in on_device.items():
        c32, full = capacity_within(p, SLO_S, 32), capacity_within(p, SLO_S)
        gains[m] = round(full / c32, 3) if c32 else None
        console.print(f"  {m}: ℓ(1) {p.latency(1) * 1000:.2f} ms, ℓ({p.max_batch}) {p.latency(p.max_batch) * 1000:.2f} ms; "
                      f"within {SLO_S * 1000:.0f} ms: {c32:.0f} req/s up to 32, {full:.0f} up to {p.max_batch}; "
                      f"CPU {capacity_within(on_cpu[m], SLO_S):.0f}")
    graphs: dict[str, Profile] = {}
    if device.startswith("cuda"):
        console.print(f"profiles on {device} with CUDA graphs …")
        graphs = measured_profiles(quick, console, threads=cores, device=device, sizes=dev_sizes,
                                   detection_max=detection_max, cuda_graphs=True)
        graphs.pop("ssdlite", None)  # a list of images in, dicts out: not captured
        diff = graphs_match(device)
        console.print(f"  CUDA graphs vs eager, largest output difference: {diff:.2e}")
    console.print(f"layer groups of mobilenet_v3_small on {device} …")
    groups, cuts = measure_groups(quick, console, device=device, sizes=[1, 4, 16] if quick else [1, 2, 4, 8, 16, 32, 64])
    console.print("served …")
    runners = {"eager": on_device["mobilenet_v3_small"]}
    if graphs:
        runners["graphs"] = graphs["mobilenet_v3_small"]
    served = _served(device, runners, quick, console)

    def row(kind: str, phase: str, **match: Any) -> dict[str, Any]:
        return next(r for r in served if r["runner"] == kind and r["phase"] == phase
                    and all(r.get(k) == v for k, v in match.items()))

    best = "graphs" if graphs else "eager"
    finite = [g for g in gains.values() if g]
    summary = {
        "probe_capacity_gain": round(max(finite), 3) if finite else 0.0,
        "probe_capacity_gain_mobilenet_v3_small": gains.get("mobilenet_v3_small") or 0.0,
        "probe_served_good_after_step": row(best, "step", probe=True)["good_after_step"],
        "probe_served_good_after_step_without_probe": row(best, "step", probe=False)["good_after_step"],
        "probe_served_rps_after_step": row(best, "step", probe=True)["served_after_step_rps"],
        "probe_served_rps_after_step_without_probe": row(best, "step", probe=False)["served_after_step_rps"],
        "served_good_at_c32": row("eager", "sweep", rate_over_c32=1.0)["good"],
        "served_good_at_quarter_c32": row("eager", "sweep", rate_over_c32=0.25)["good"],
    }
    if graphs:
        summary.update({
            "graphs_max_abs_diff": diff,
            "graphs_served_good_at_c32": row("graphs", "sweep", rate_over_c32=1.0)["good"],
            "graphs_served_good_at_quarter_c32": row("graphs", "sweep", rate_over_c32=0.25)["good"],
            "graphs_served_rps_at_c32_over_eager": round(row("graphs", "sweep", rate_over_c32=1.0)["served_rps"]
                                                         / max(1e-9, row("eager", "sweep", rate_over_c32=1.0)["served_rps"]), 3),
            "graphs_latency_1_over_eager": round(graphs["mobilenet_v3_small"].latency(1)
                                                 / on_device["mobilenet_v3_small"].latency(1), 3),
        })
    console.print(f"summary: {summary}  ({time.perf_counter() - t0:.0f} s)")
    return {"name": "device", "machine": machine_info(),
            "config": {"quick": quick, "device": device, "device_name": name, "host_threads": cores,
                       "slo_ms": SLO_S * 1000, "device_sizes": list(dev_sizes), "layer_groups": cuts,
                       "note": "ℓ(b) includes stacking the batch on the host, the copy to the device and a "
                               "synchronize; random weights (compute cost only)"},
            "results": [{"profiles": {"device": {k: v.to_dict() for k, v in on_device.items()},
                                      "device_cuda_graphs": {k: v.to_dict() for k, v in graphs.items()},
                                      "host_cpu": {k: v.to_dict() for k, v in on_cpu.items()}},
                         "capacity_gain_256_over_32": gains},
                        {"layer_group_profiles": [p.to_dict() for p in groups], "group_layers": cuts},
                        {"served": served}],
            "summary": summary}
