"""Squishy bin packing vs the lower bound Σ R_i/T_i, the exact optimum (small instances) and the
batch-oblivious baseline, on generated workloads: sessions over profiles measured on this machine,
Zipf-0.9 rates, SLOs 50–400 ms. Also planning time at 1,000 sessions and at 10,000 (4 req/s each)."""

from __future__ import annotations

import math
import random
import statistics
import time
from typing import Any

from vidnexus.benchmarks.machine import machine_info
from vidnexus.control.baselines import batch_oblivious, exact_plan
from vidnexus.contracts.profile import Profile
from vidnexus.control.squishy import SessionLoad, lower_bound, plan

__all__ = ["run", "workload"]


def workload(n: int, profiles: dict[str, Profile], total_rate: float, seed: int) -> list[SessionLoad]:
    """n sessions: a random model, an SLO in 50–400 ms the model can meet, Zipf(0.9) rate shares."""
    rng = random.Random(seed)
    weights = [1 / (k ** 0.9) for k in range(1, n + 1)]
    rng.shuffle(weights)
    scale = total_rate / sum(weights)
    out = []
    models = list(profiles)
    for i in range(n):
        m = rng.choice(models)
        floor_ms = max(50.0, 2.2 * profiles[m].latency(1) * 1000)
        slo = rng.uniform(floor_ms, max(floor_ms, 400.0)) / 1000
        out.append(SessionLoad(f"s{i}", m, slo, weights[i] * scale))
    return out


def run(quick: bool, console: Any) -> dict[str, Any]:
    from rich.table import Table

    from vidnexus.benchmarks.profiles import measured_profiles

    t0 = time.perf_counter()
    profiles = measured_profiles(quick, console)
    sizes = (16, 64, 256, 1000) if not quick else (16, 64, 1000)
    seeds = 3 if quick else 10
    results = []
    table = Table("sessions", "squishy", "lower bound", "oblivious", "squishy/LB", "oblivious/squishy", "plan ms",
                  title="devices used (mean over seeds)")
    for n in sizes:
        rows = []
        for seed in range(seeds):
            sessions = workload(n, profiles, total_rate=40.0 * n, seed=seed)
            t = time.perf_counter()
            sq = plan(sessions, profiles)
            ms = (time.perf_counter() - t) * 1000
            assert sq.check() == [], sq.check()[:3]
            placed = [s for s in sessions if s.session_id not in {sid for sid, _ in sq.infeasible}]
            lb = lower_bound(placed, profiles)
            ob = batch_oblivious(placed, profiles)
            rows.append({"devices": sq.devices, "lower_bound": lb, "oblivious": ob.devices, "plan_ms": ms,
                         "infeasible": len(sq.infeasible)})
        r = {"sessions": n,
             "devices": statistics.fmean(x["devices"] for x in rows),
             "lower_bound": statistics.fmean(x["lower_bound"] for x in rows),
             "oblivious": statistics.fmean(x["oblivious"] for x in rows),
             "over_lower_bound": statistics.fmean(x["devices"] / max(1.0, math.ceil(x["lower_bound"])) for x in rows),
             "oblivious_over_squishy": statistics.fmean(x["oblivious"] / x["devices"] for x in rows),
             "plan_ms": statistics.fmean(x["plan_ms"] for x in rows),
             "infeasible_sessions": statistics.fmean(x["infeasible"] for x in rows)}
        results.append(r)
        table.add_row(str(n), f"{r['devices']:.1f}", f"{r['lower_bound']:.1f}", f"{r['oblivious']:.1f}",
                      f"{r['over_lower_bound']:.3f}", f"{r['oblivious_over_squishy']:.2f}", f"{r['plan_ms']:.1f}")
    console.print(table)
    small = []
    for seed in range(10 if quick else 40):
        sessions = workload(8, profiles, total_rate=40.0 * 8, seed=1000 + seed)
        sq = plan(sessions, profiles)
        try:
            ex = exact_plan(sessions, profiles)
        except ValueError:
            continue
        small.append({"squishy": sq.devices, "exact": ex.devices})
    over_opt = statistics.fmean(s["squishy"] / s["exact"] for s in small if s["exact"])
    console.print(f"small instances (8 sessions, {len(small)} solved exactly): squishy/optimal = {over_opt:.3f}")
    # Cluster scale: 10,000 sessions at 4 req/s on average (about 1,000-2,000 devices).
    big = []
    for seed in range(1 if quick else 3):
        sessions = workload(10_000, profiles, total_rate=4.0 * 10_000, seed=2000 + seed)
        t = time.perf_counter()
        sq = plan(sessions, profiles)
        ms = (time.perf_counter() - t) * 1000
        assert sq.check() == [], sq.check()[:3]
        big.append({"sessions": 10_000, "plan_ms": round(ms, 1), "devices": sq.devices,
                    "lower_bound": round(lower_bound(sessions, profiles), 1), "infeasible": len(sq.infeasible)})
    console.print(f"10,000 sessions at 4 req/s: {statistics.fmean(b['plan_ms'] for b in big):.0f} ms to plan, "
                  f"{statistics.fmean(b['devices'] for b in big):.0f} devices")
    summary = {
        "mean_devices_over_lower_bound": round(statistics.fmean(r["over_lower_bound"] for r in results), 3),
        "mean_devices_over_optimal_small": round(over_opt, 3),
        "oblivious_over_squishy": round(statistics.fmean(r["oblivious_over_squishy"] for r in results), 3),
        "plan_ms_1000_sessions": round(next(r["plan_ms"] for r in results if r["sessions"] == 1000), 1),
        "plan_ms_10000_sessions": round(statistics.fmean(b["plan_ms"] for b in big), 1),
        "devices_10000_sessions": round(statistics.fmean(b["devices"] for b in big), 1),
    }
    console.print(f"summary: {summary}  ({time.perf_counter() - t0:.0f} s)")
    return {"name": "scheduler", "machine": machine_info(),
            "config": {"quick": quick, "sizes": list(sizes), "seeds": seeds, "zipf": 0.9, "slo_ms": [50, 400],
                       "mean_rate_per_session": 40.0,
                       "lower_bound_note": "devices / ceil(Σ R_i/T_i) over placed sessions",
                       "profiles": {k: v.to_dict() for k, v in profiles.items()}},
            "results": results + [{"small_instances": small}, {"cluster_scale": big}], "summary": summary}
