"""Multiplexing 1–4 models on one device: the duty-cycle round-robin of one backend vs free-running
threads (one executor per model, running concurrently and interleaving on the CPU). Same models,
same SLO, Poisson total rate split evenly; goodput = highest total rate with ≥ 99% within SLO."""

from __future__ import annotations

import time
from typing import Any

from vidnexus.benchmarks.machine import machine_info
from vidnexus.benchmarks.openloop import FULL_LIMITS, QUICK_LIMITS, best_of, drive, good_fraction, probe_goodput, probe_seconds, warm_up

__all__ = ["run"]

SHAPE = (3, 64, 64)


def run(quick: bool, console: Any) -> dict[str, Any]:
    import numpy as np
    from rich.table import Table

    from vidnexus.benchmarks.models import headed_variants, profile_resnet18_variant, separate_copies
    from vidnexus.gpu_executor.backend import SessionSpec
    from vidnexus.gpu_executor.executor import Executor
    from vidnexus.gpu_executor.runner import TorchRunner
    from vidnexus.sim.loadgen import arrivals, merge

    t_start = time.perf_counter()
    x = np.random.default_rng(0).random(SHAPE, dtype=np.float32)
    prof = profile_resnet18_variant(x)
    slo = max(0.150, 6 * prof.latency(1))
    t_sat = prof.throughput(max(1, prof.max_batch_within(slo / 2)))
    ks = (4,) if quick else (1, 2, 3, 4)  # quick: one k (four goodput searches took 2 min)
    duration = 2.0 if quick else 6.0
    min_requests = 100 if quick else 300  # per probe (see probe_seconds); quick only checks the harness
    limits = QUICK_LIMITS if quick else FULL_LIMITS
    reps = 1 if quick else 2  # runs per probe, the best counts (quick: the harness only)
    results = []
    table = Table("models", "duty cycle req/s", "free threads req/s", "ratio", title=f"multiplexing (SLO {slo * 1000:.0f} ms)")
    for k in ks:
        models = separate_copies(headed_variants(k, seed=k))
        runners = {m: TorchRunner(m, mod, postprocess=lambda t: None) for m, mod in models.items()}
        for r in runners.values():
            warm_up(r, x)
        row: dict[str, Any] = {"models": k}
        for mode in ("duty_cycle", "free_threads"):
            def frac(rate: float, mode: str = mode) -> float:
                trace = merge(*[arrivals("poisson", rate / k, probe_seconds(rate, duration, min_requests, limits["probe_max_s"]), f"s-{m}", seed=i)
                                for i, m in enumerate(models)])
                if mode == "duty_cycle":
                    exs = {"all": Executor([SessionSpec(f"s-{m}", m, slo) for m in models], runners,
                                           {m: prof for m in models}, workers=1)}
                    route = {f"s-{m}": exs["all"] for m in models}
                else:
                    exs = {m: Executor([SessionSpec(f"s-{m}", m, slo)], {m: runners[m]}, {m: prof}, workers=1)
                           for m in models}
                    route = {f"s-{m}": exs[m] for m in models}
                for e in exs.values():
                    e.start()
                try:
                    res = drive(trace, lambda a: route[a.session_id].submit(a.session_id, x))
                finally:
                    for e in exs.values():
                        e.stop()
                return good_fraction(res, slo)

            g = probe_goodput(lambda r: best_of(reps, lambda: frac(r)), 0.05 * t_sat, 1.5 * t_sat,
                              tol=0.2 if quick else 0.03, target=limits["target"], budget_s=limits["search_budget_s"])
            row[f"goodput_{mode}"] = round(g, 1)
            console.print(f"  {k} models, {mode:12s}: goodput {g:.0f} req/s")
        row["ratio"] = round(row["goodput_duty_cycle"] / row["goodput_free_threads"], 3) if row["goodput_free_threads"] else None
        results.append(row)
        table.add_row(str(k), f"{row['goodput_duty_cycle']:.0f}", f"{row['goodput_free_threads']:.0f}", str(row["ratio"]))
    console.print(table)
    ratios = [r["ratio"] for r in results if r["ratio"]]
    if not ratios:
        raise RuntimeError(f"no duty-cycle/free-threads ratio: a goodput search found no rate meeting {limits['target']:.0%} "
                           f"within the SLO ({results}); is the machine busy?")
    summary = {"duty_cycle_over_threads_min": min(ratios), "duty_cycle_over_threads_max": max(ratios)}
    console.print(f"summary: {summary}  ({time.perf_counter() - t_start:.0f} s)")
    return {"name": "multiplex", "machine": machine_info(),
            "config": {"quick": quick, "model": "resnet18 (64x64 input), separate weights per model",
                       "slo_ms": round(slo * 1000, 1), "probe_seconds": duration, "min_requests_per_probe": min_requests, "runs_per_probe_best_of": reps, **limits, "ks": list(ks), "torch_threads": 2,
                       "profile": prof.to_dict()},
            "results": results, "summary": summary}
