"""Early drop vs lazy drop vs no-drop FIFO (Nexus SOSP Fig. 5/9; dissertation §3.5).

Part 1, simulator: SLO 100 ms, ℓ(b) = αb + β with β = 50 ms − 25α so the optimal throughput stays
500 req/s (b = 25, ℓ = 50 ms = SLO/2); uniform and Poisson arrivals, and Poisson arrivals that came
over a bus (``bus``: each request delayed on its way in and arriving with its SLO less that delay and
the reply's reserve, :class:`~vidnexus.sim.loadgen.Hop`, where early rescue — the executor's default
— differs from Nexus's early drop); goodput = highest rate with ≥ 99% of requests within the SLO
(drops and late replies are misses), by bisection.

Part 2, the real executor on this CPU: a real model (MobileNetV3-Small at 224 px, random weights:
compute cost only) profiled first, then served by the in-process executor under an open-loop
Poisson load; goodput per policy by bisection over the rate, one short run per probe.

Part 3, the simulator on part 2's measured profile at SLO 50 ms (bench peers' tightest): Poisson
arrivals in process and over the bus, each policy's goodput (the summary's ``cpu_*`` ratios: what
the rescue gains over early drop, and what the hop costs, with nothing but the hop to blame).
"""

from __future__ import annotations

import time
from typing import Any

from vidnexus.benchmarks.machine import machine_info
from vidnexus.gpu_executor.backend import SessionSpec
from vidnexus.contracts.profile import Profile
from vidnexus.sim.loadgen import Hop, arrivals, over_bus
from vidnexus.sim.simulator import goodput, simulate

__all__ = ["run", "sim_goodput"]

POLICIES = ("early_drop", "early_rescue", "lazy_drop", "fifo")
KINDS = ("uniform", "poisson", "bus")


def sim_goodput(policy: str, alpha_ms: float, kind: str, duration_s: float, seeds: int = 1) -> float:
    beta_ms = 50.0 - 25.0 * alpha_ms
    prof = Profile.linear(alpha_ms / 1000, beta_ms / 1000, 64)
    return _sim_goodput(policy, prof, 0.100, kind, duration_s, seeds, 20.0, 600.0)


def _sim_goodput(policy: str, prof: Profile, slo_s: float, kind: str, duration_s: float, seeds: int, lo: float,
                 hi: float) -> float:
    spec = [SessionSpec("s", "m", slo_s, policy=policy)]  # type: ignore[arg-type]

    def trace(rate: float, sd: int) -> list[Any]:
        if kind == "bus":  # Poisson sends, received over the bus
            return over_bus(arrivals("poisson", rate, duration_s, "s", seed=sd), {"s": slo_s}, Hop(), seed=sd)
        return arrivals(kind, rate, duration_s, "s", seed=sd)  # type: ignore[arg-type]

    # The policies as Nexus runs them: each batch at most its planned size (no growth into the
    # backlog, ``DutyCycle``'s ``grow``), so the comparison is the paper's.
    def frac(rate: float) -> float:
        return min(simulate(spec, {"m": prof}, trace(rate, sd), grow=False).good_fraction for sd in range(seeds))

    return goodput(frac, lo, hi, tol=0.005)


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if b else None


CPU_SLO_S = 0.050
"""The SLO of the simulator's run on the real part's profile: bench peers' tightest, where a
request's hop over the bus is a large share of its budget."""


def _cpu_part(prof: Profile, duration_s: float, seeds: int, console: Any) -> dict[str, Any]:
    """The simulator on the profile measured for the real part, at :data:`CPU_SLO_S`: Poisson
    arrivals in process and over the bus, each policy's goodput."""
    t_sat = prof.throughput(max(1, prof.efficient_batch_within(CPU_SLO_S / 2)))
    g = {kind: {p: round(_sim_goodput(p, prof, CPU_SLO_S, kind, duration_s, seeds, 0.05 * t_sat, 1.5 * t_sat), 1)
                for p in POLICIES} for kind in ("poisson", "bus")}
    for kind, row in g.items():
        console.print(f"  simulated on this profile, SLO {CPU_SLO_S * 1000:g} ms, {kind}: "
                      + ", ".join(f"{p} {v:.1f}" for p, v in row.items()) + " req/s")
    return {"slo_ms": CPU_SLO_S * 1000, "goodput_by_arrivals": g}


def _real_part(quick: bool, console: Any) -> dict[str, Any]:
    import numpy as np
    import torch

    from vidnexus.benchmarks.openloop import best_of, drive, good_fraction, probe_seconds, warm_up
    from vidnexus.gpu_executor.executor import Executor
    from vidnexus.gpu_executor.profiler import profile_runner
    from vidnexus.gpu_executor.runner import TorchRunner
    from vidnexus.gpu_executor.zoo import random_init

    torch.set_num_threads(1)
    model_name = "mobilenet_v3_small"
    runner = TorchRunner(model_name, random_init(model_name), postprocess=lambda r: None)
    x = np.random.default_rng(0).random((3, 224, 224), dtype=np.float32)
    sizes = [1, 2, 4, 8, 12, 16] if quick else [1, 2, 3, 4, 6, 8, 12, 16, 24]
    warm_up(runner, x)
    prof, _ = profile_runner(runner, lambda: x, sizes, repeats=3 if quick else 5)
    slo = max(0.100, 2 * prof.latency(8))  # an SLO that admits batching on this CPU
    b_sat = prof.max_batch_within(slo / 2)
    t_sat = prof.throughput(max(1, b_sat))
    duration = 2.0 if quick else 8.0
    rows: list[dict[str, Any]] = []

    def fraction_at(policy: str, rate: float) -> float:
        ex = Executor([SessionSpec("s", model_name, slo, policy=policy)],  # type: ignore[arg-type]
                      {model_name: runner}, {model_name: prof}, workers=1)
        with ex:
            res = drive(arrivals("poisson", rate, probe_seconds(rate, duration), "s", seed=1),
                        lambda a: ex.submit("s", x))
        good = good_fraction(res, slo)
        st = ex.stats()[0]
        rows.append({"policy": policy, "rate": round(rate, 1), "requests": len(res),
                     "good_fraction": round(good, 4), "drops": st["drops"],
                     "mean_batch": round(st["mean_batch"], 2), "p99_ms": round(st["latency_p99_ms"], 1)})
        console.print(f"  real {policy:10s} {rate:6.1f} req/s: {100 * good:6.2f}% within SLO, "
                      f"mean batch {st['mean_batch']:.1f}, drops {st['drops'] or 'none'}")
        return good

    lo, hi = (0.5, 2.0) if quick else (0.3, 3.0)
    reps = 1 if quick else 2
    best = {p: round(goodput(lambda r: best_of(reps, lambda: fraction_at(p, r)), lo * t_sat, hi * t_sat,
                             tol=0.15 if quick else 0.02), 1)
            for p in POLICIES}
    return {"model": model_name, "slo_ms": round(slo * 1000, 1), "profile": prof.to_dict(),
            "probe_seconds": duration, "runs_per_probe_best_of": reps, "saturated_batch": b_sat,
            "profiled_saturated_throughput": round(t_sat, 1), "probes": rows, "goodput_by_policy": best}


def run(quick: bool, console: Any) -> dict[str, Any]:
    from rich.table import Table

    alphas = (0.4, 1.2) if quick else (0.2, 0.4, 0.8, 1.2, 1.6)
    duration = 10.0 if quick else 30.0
    seeds = 1 if quick else 3
    results: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    table = Table("arrivals", "α ms", "β ms", *[f"{p} req/s" for p in POLICIES], "early/lazy", "rescue/early",
                  title="drop policies in the simulator (SLO 100 ms, optimum 500 req/s)")
    for kind in KINDS:
        for a in alphas:
            g = {p: sim_goodput(p, a, kind, duration, seeds) for p in POLICIES}
            ratio = _ratio(g["early_drop"], g["lazy_drop"])  # None where the denominator served nothing
            gain = _ratio(g["early_rescue"], g["early_drop"])  # (bus at α 0.2: ℓ(1) is most of the budget)
            results.append({"part": "sim", "arrivals": kind, "alpha_ms": a, "beta_ms": 50 - 25 * a,
                            **{f"goodput_{p}": round(v, 1) for p, v in g.items()},
                            "early_over_lazy": ratio, "rescue_over_early": gain})
            table.add_row(kind, f"{a:.1f}", f"{50 - 25 * a:.0f}", *[f"{g[p]:.0f}" for p in POLICIES],
                          "—" if ratio is None else f"{ratio:.2f}", "—" if gain is None else f"{gain:.2f}")
    console.print(table)
    console.print("real executor on this CPU:")
    real = _real_part(quick, console)
    cpu = _cpu_part(Profile.from_dict(real["profile"]), duration, seeds, console)
    cg = cpu["goodput_by_arrivals"]
    g = real["goodput_by_policy"]

    def defined(key: str, kind: str) -> list[float]:
        """The simulator's ``key`` ratios for ``kind`` arrivals, where both goodputs were above 0."""
        return [r[key] for r in results if r["arrivals"] == kind and r[key] is not None]

    summary = {
        "early_over_lazy_poisson_min": min(defined("early_over_lazy", "poisson"), default=None),
        "early_over_lazy_poisson_max": max(defined("early_over_lazy", "poisson"), default=None),
        "rescue_over_early_poisson_min": min(defined("rescue_over_early", "poisson"), default=None),
        "rescue_over_early_bus_min": min(defined("rescue_over_early", "bus"), default=None),
        "rescue_over_early_bus_max": max(defined("rescue_over_early", "bus"), default=None),
        "real_early_over_lazy": _ratio(g["early_drop"], g["lazy_drop"]),
        "real_early_over_fifo": _ratio(g["early_drop"], g["fifo"]),
        "real_rescue_over_early": _ratio(g["early_rescue"], g["early_drop"]),
        "cpu_poisson_rescue_over_early": _ratio(cg["poisson"]["early_rescue"], cg["poisson"]["early_drop"]),
        "cpu_bus_rescue_over_early": _ratio(cg["bus"]["early_rescue"], cg["bus"]["early_drop"]),
        "cpu_bus_over_poisson_early_rescue": _ratio(cg["bus"]["early_rescue"], cg["poisson"]["early_rescue"]),
    }
    console.print(f"summary: {summary}  ({time.perf_counter() - t0:.0f} s)")
    return {"name": "drop-policies", "machine": machine_info(),
            "config": {"quick": quick, "alphas_ms": list(alphas), "sim_duration_s": duration, "seeds": seeds,
                       "slo_ms": 100, "optimal_rps": 500, "arrivals": list(KINDS), "bus_hop": Hop().to_dict()},
            "results": results + [{"part": "real", **real}, {"part": "sim_cpu_profile", **cpu}], "summary": summary}
