"""Query analysis vs even split (Nexus §6.2): a detector feeding a classifier with fan-out γ, for
γ ∈ {0.1, 1, 10} and SLOs 300–500 ms. The stages' throughput-by-budget comes from profiles measured
on this machine (SSDlite detector, ResNet-18 classifier on 64×64 crops); the metric is requests/s
entering the app per device (Nexus Figure 4), from the plan each split implies."""

from __future__ import annotations

import time
from typing import Any

from vidnexus.benchmarks.machine import machine_info
from vidnexus.gpu_executor.latency_split import Stage, even_split, split_latency, throughput_from_profile

__all__ = ["run"]


def run(quick: bool, console: Any) -> dict[str, Any]:
    from rich.table import Table

    from vidnexus.benchmarks.profiles import measured_profiles

    t0 = time.perf_counter()
    profiles = measured_profiles(quick, console)
    det, cls = profiles["ssdlite"], profiles["resnet18_64px"]
    results = []
    table = Table("γ", "SLO ms", "split det/cls ms", "analyzer req/s/dev", "even req/s/dev", "gain",
                  title="latency split: SSDlite → ResNet-18")
    for gamma in (0.1, 1.0, 10.0):
        for slo_ms in (300, 400, 500):
            root = Stage("detector", 1.0, throughput_from_profile(det),
                         (Stage("classifier", gamma, throughput_from_profile(cls)),))
            slo = slo_ms / 1000
            best = split_latency(root, slo, epsilon_s=0.001 if not quick else 0.005)
            even = even_split(root, slo)
            a, e = best.per_device_throughput(1.0), even.per_device_throughput(1.0)
            gain = a / e if e > 0 else float("inf")
            results.append({"gamma": gamma, "slo_ms": slo_ms,
                            "split_ms": {k: round(v * 1000, 1) for k, v in best.budgets.items()},
                            "analyzer_rps_per_device": round(a, 2), "even_rps_per_device": round(e, 2),
                            "gain": round(gain, 3)})
            table.add_row(str(gamma), str(slo_ms),
                          f"{best.budgets['detector'] * 1000:.0f}/{best.budgets['classifier'] * 1000:.0f}",
                          f"{a:.1f}", f"{e:.1f}", f"{gain:.2f}")
    console.print(table)
    finite = [r["gain"] for r in results if r["gain"] != float("inf")]
    summary = {"min_gain": min(finite), "max_gain": max(finite)}
    console.print(f"summary: {summary}  ({time.perf_counter() - t0:.0f} s)")
    return {"name": "latency-split", "machine": machine_info(),
            "config": {"quick": quick, "detector": "ssdlite320 (3x320x320)", "classifier": "resnet18 (3x64x64)",
                       "profiles": {"detector": det.to_dict(), "classifier": cls.to_dict()}},
            "results": results, "summary": summary}
