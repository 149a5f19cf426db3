"""Query analysis vs even split (Nexus §6.2): a detector feeding a classifier with fan-out γ, for
γ ∈ {0.1, 1, 10} and SLOs 300–500 ms. The stages' throughput-by-budget comes from profiles measured
on this machine (SSDlite detector, MobileNetV3-Small classifier), extended to batch 64 by their fitted line; the metric is requests/s
entering the app per device (Nexus Figure 4), from the plan each split implies."""

from __future__ import annotations

import time
from typing import Any

from vidnexus.benchmarks.machine import machine_info
from vidnexus.control.latency_split import Stage, even_split, split_latency, throughput_from_profile
from vidnexus.contracts.profile import Profile

__all__ = ["run"]


def run(quick: bool, console: Any) -> dict[str, Any]:
    from rich.table import Table

    from vidnexus.benchmarks.profiles import measured_profiles

    t0 = time.perf_counter()
    profiles = measured_profiles(quick, console)
    # Extend the measured profiles to batch 64 with their least-squares line ℓ(b) = αb + β.
    det, cls = (Profile.linear(*profiles[m].fit(), 64) for m in ("ssdlite", "mobilenet_v3_small"))
    # Nexus's traffic detector takes 47 ms at batch 1 on its GPU; this CPU is slower, so the SLOs are
    # scaled by the same factor (stated in the output) to keep the stages' latency/SLO ratios.
    scale = max(1.0, det.latency(1) / 0.047)
    results: list[dict[str, Any]] = []
    table = Table("γ", "SLO ms", "split det/cls ms", "analyzer req/s/dev", "even req/s/dev", "gain",
                  title="latency split: SSDlite → MobileNetV3-Small")
    for gamma in (0.1, 1.0, 10.0):
        for base_ms in (300, 400, 500):
            slo_ms = round(base_ms * scale)
            root = Stage("detector", 1.0, throughput_from_profile(det),
                         (Stage("classifier", gamma, throughput_from_profile(cls)),))
            slo = slo_ms / 1000
            best = split_latency(root, slo, epsilon_s=0.001 if not quick else 0.005)
            even = even_split(root, slo)
            a, e = best.per_device_throughput(1.0), even.per_device_throughput(1.0)
            gain = a / e if e > 0 else float("inf")
            results.append({"gamma": gamma, "slo_ms": slo_ms, "nexus_slo_ms": base_ms,
                            "split_ms": {k: round(v * 1000, 1) for k, v in best.budgets.items()},
                            "analyzer_rps_per_device": round(a, 2), "even_rps_per_device": round(e, 2),
                            "gain": round(gain, 3)})
            table.add_row(str(gamma), str(slo_ms),
                          f"{best.budgets['detector'] * 1000:.0f}/{best.budgets['classifier'] * 1000:.0f}",
                          f"{a:.1f}", f"{e:.1f}", f"{gain:.2f}")
    console.print(table)
    console.print(f"SLOs 300/400/500 ms scaled ×{scale:.2f} for this CPU (detector ℓ(1) = {det.latency(1) * 1000:.0f} ms vs 47 ms)")
    finite = [r["gain"] for r in results if r["gain"] != float("inf")]
    summary = {"min_gain": min(finite), "max_gain": max(finite),
               "even_split_infeasible": sum(1 for r in results if r["gain"] == float("inf"))}
    console.print(f"summary: {summary}  ({time.perf_counter() - t0:.0f} s)")
    return {"name": "latency-split", "machine": machine_info(),
            "config": {"quick": quick, "slo_scale": round(scale, 3), "detector": "ssdlite320 (3x320x320)", "classifier": "mobilenet_v3_small (3x224x224)", "profiles_note": "linear fit of measured ℓ(b), b ≤ 64",
                       "profiles": {"detector": det.to_dict(), "classifier": cls.to_dict()}},
            "results": results, "summary": summary}
