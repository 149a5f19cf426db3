"""Squishy bin packing vs the lower bound Σ R_i/T_i, the exact optimum (small instances, a MILP) and
the batch-oblivious baseline, on generated workloads: sessions over profiles measured on this machine,
Zipf-0.9 rates, SLOs 50–400 ms, planned on mean + 1 std latencies. Also planning time at 1,000
sessions (40 req/s each on average) and at 10,000 sessions over about 1,000 devices (5 req/s each),
and an incremental epoch (:func:`~vidnexus.control.epochs.replan`) at 10,000 sessions."""

from __future__ import annotations

import math
import random
import statistics
import time
from pathlib import Path
from typing import Any, Sequence

from vidnexus.benchmarks.machine import machine_info
from vidnexus.contracts.profile import Profile
from vidnexus.control.baselines import batch_oblivious, exact_plan
from vidnexus.control.epochs import assign_devices, replan
from vidnexus.control.squishy import Plan, SessionLoad, lower_bound, plan, split_lower_bound

__all__ = ["run", "workload", "exact_small"]

K_STD = 1.0


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


def exact_small(sessions: list[SessionLoad], profiles: dict[str, Profile], time_limit_s: float) -> tuple[Plan, str] | None:
    """The optimum by the MILP (scipy) or, without scipy, by branch and bound (up to 12 residual
    loads); None when neither proves one."""
    try:
        from vidnexus.control.milp import exact_milp
        r = exact_milp(sessions, profiles, k_std=K_STD, time_limit_s=time_limit_s)
        return (r.plan, "milp") if r.optimal else None
    except ImportError:
        try:
            return exact_plan(sessions, profiles, k_std=K_STD), "branch-and-bound"
        except ValueError:
            return None
    except ValueError:
        return None


LP_BOUND_UP_TO = 256
"""Sessions up to which the bench also computes the LP bound (``control.milp.lp_lower_bound``): its
column generation converges in seconds at 64 sessions and in 15–35 s at 256; 1,000 would take
minutes per instance."""


def best_bound(placed: list[SessionLoad], profiles: dict[str, Profile], split_lb: int) -> tuple[int, float | None]:
    """The tightest lower bound the bench has for ``placed``: its split bound ``split_lb``, and up to
    ``LP_BOUND_UP_TO`` sessions ⌈the LP bound⌉ when that is higher (needs scipy); also the LP bound."""
    if len(placed) > LP_BOUND_UP_TO:
        return split_lb, None
    try:
        from vidnexus.control.milp import lp_lower_bound
    except ImportError:
        return split_lb, None
    lp = lp_lower_bound(placed, profiles, k_std=K_STD)
    return max(split_lb, math.ceil(lp - 1e-6)), lp


def _size(n: int, rate: float, seeds: int, profiles: dict[str, Profile], oblivious: bool = True) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    for seed in range(seeds):
        sessions = workload(n, profiles, total_rate=rate * n, seed=seed)
        t = time.perf_counter()
        sq = plan(sessions, profiles, k_std=K_STD)
        ms = (time.perf_counter() - t) * 1000
        assert sq.check() == [], sq.check()[:3]
        bad = {sid for sid, _ in sq.infeasible}
        placed = [s for s in sessions if s.session_id not in bad]
        lb = lower_bound(placed, profiles, k_std=K_STD)
        ob = batch_oblivious(placed, profiles, k_std=K_STD).devices if oblivious else math.nan  # O(n²): not at 10,000
        split_lb = split_lower_bound(placed, profiles, k_std=K_STD)
        best, lp = best_bound(placed, profiles, split_lb)
        rows.append({"devices": sq.devices, "lower_bound": lb, "oblivious": ob, "plan_ms": ms,
                     "split_bound": split_lb, "lp_bound": lp,
                     "best_bound": best, "infeasible": len(sq.infeasible)})
    return {"sessions": n, "mean_rate": rate,
            "devices": statistics.fmean(x["devices"] for x in rows),
            "lower_bound": statistics.fmean(x["lower_bound"] for x in rows),
            "oblivious": statistics.fmean(x["oblivious"] for x in rows),
            "over_lower_bound": statistics.fmean(x["devices"] / max(1.0, math.ceil(x["lower_bound"])) for x in rows),
            "split_bound": statistics.fmean(x["split_bound"] for x in rows),
            "over_split_bound": statistics.fmean(x["devices"] / max(1, x["split_bound"]) for x in rows),
            "best_bound": statistics.fmean(x["best_bound"] for x in rows),
            "over_best_bound": statistics.fmean(x["devices"] / max(1, x["best_bound"]) for x in rows),
            "lp_bounds": [None if x["lp_bound"] is None else round(x["lp_bound"], 3) for x in rows],
            "oblivious_over_squishy": statistics.fmean(x["oblivious"] / x["devices"] for x in rows),
            "plan_ms": statistics.fmean(x["plan_ms"] for x in rows),
            "plan_ms_max": max(x["plan_ms"] for x in rows),
            "infeasible_sessions": statistics.fmean(x["infeasible"] for x in rows)}


def _epochs(n: int, rate: float, seeds: int, profiles: dict[str, Profile]) -> dict[str, Any]:
    """Plan, then re-plan with every rate moved by up to ±20%: time, sessions moved, devices."""
    rows = []
    for seed in range(seeds):
        sessions = workload(n, profiles, total_rate=rate * n, seed=seed)
        p0 = assign_devices(plan(sessions, profiles, k_std=K_STD))
        rng = random.Random(seed)
        moved_rates = [SessionLoad(s.session_id, s.model, s.slo_s, s.rate * rng.uniform(0.8, 1.2)) for s in sessions]
        t = time.perf_counter()
        p1 = replan(p0, moved_rates, profiles, k_std=K_STD)
        ms = (time.perf_counter() - t) * 1000
        assert p1.check() == [], p1.check()[:3]
        fresh = plan(moved_rates, profiles, k_std=K_STD)
        rows.append({"replan_ms": ms, "moved": p1.moved, "devices": p1.devices, "fresh_devices": fresh.devices})
    return {"epoch_sessions": n, "replan_ms": statistics.fmean(r["replan_ms"] for r in rows),
            "moved_fraction": statistics.fmean(r["moved"] / n for r in rows),
            "devices_over_fresh_plan": statistics.fmean(r["devices"] / r["fresh_devices"] for r in rows)}


DEVICE_RESULT = Path(__file__).resolve().parents[2] / "bench" / "results" / "device-h200-2026-11-27.json"
"""Profiles measured on an NVIDIA H200 and its host's 16-core CPU by ``vidnexus bench device`` (this
box has no GPU): the real device types of the heterogeneous-cost figure."""
PRICES = {"h200": 5.408, "cpu16": 0.68}
"""US dollars per hour: one H200 at AWS EC2 Capacity Blocks' effective accelerator rate (p5e.48xlarge,
US East (Ohio): $43.26 for 8), and a 16-vCPU c5.4xlarge on demand (US East (N. Virginia), the AWS
Auto Scaling guide's example table) — list prices, parameters of the figure, not measurements."""


def _heterogeneous(types: dict[str, tuple[dict[str, Profile], float]], quick: bool,
                   multiples: Sequence[float] | None = None) -> dict[str, Any]:
    """Piccolo's heterogeneous planning (:mod:`vidnexus.control.piccolo`) over device types, each
    ``(profiles, price)``. For each model, rate (``multiples`` of the first type's best throughput)
    and latency budget (2.2 ℓ(1) of the first type to 400 ms), the cost of the configuration
    generator's plan with every type, and of the cheapest plan on one type: their ratio, averaged
    (Piccolo's ablation: 1.232)."""
    from vidnexus.control.piccolo import Config, generate_configs
    from vidnexus.errors import PlacementError

    names = list(types)
    first = types[names[0]][0]
    if multiples is None:
        multiples = (1.5, 4.5) if quick else (1.0, 2.5, 4.5, 6.0)
    rows: list[dict[str, Any]] = []
    ratios: list[float] = []
    for m in sorted(set.intersection(*(set(p) for p, _ in types.values()))):
        configs = [Config(b, profs[m].latency(b), kind, price)
                   for kind, (profs, price) in types.items() for b in profs[m].sizes]
        best = max(b / first[m].latency(b) for b in first[m].sizes)
        floor = 2.2 * first[m].latency(1)
        for budget in sorted({max(floor, x) for x in ((0.1, 0.4) if quick else (0.05, 0.1, 0.2, 0.4))}):
            for k in multiples:
                rate = k * best
                try:
                    mix = generate_configs(configs, rate, budget)
                except PlacementError:
                    continue
                single = []
                for kind in names:
                    try:
                        single.append(generate_configs([c for c in configs if c.device_type == kind], rate, budget).cost)
                    except PlacementError:
                        pass
                if not single:
                    continue
                ratios.append(min(single) / mix.cost)
                rows.append({"model": m, "budget_ms": round(budget * 1000), "rate": round(rate, 1),
                             "mix_cost": round(mix.cost, 3), "single_cost": round(min(single), 3),
                             "types_used": sorted({a.config.device_type for a in mix.allocations})})
    ratio = statistics.fmean(ratios) if ratios else 1.0
    return {"heterogeneous": rows, "single_type_cost_over_mix": round(ratio, 4),
            "device_types": {kind: {"price": price} for kind, (_, price) in types.items()}}


def _measured_device_types(quick: bool) -> dict[str, Any] | None:
    """The heterogeneous figure on real device types: :data:`DEVICE_RESULT`'s H200 profiles (the CUDA
    graph runner where it has one, else eager) and its host CPU's, at :data:`PRICES` and at price
    ratios 4× and 16× around them; None when that file is not there (an installed package)."""
    import json

    if not DEVICE_RESULT.exists():
        return None
    doc = json.loads(DEVICE_RESULT.read_text())
    measured = doc["results"][0]["profiles"]
    gpu = {m: Profile.from_dict(d) for m, d in measured["device"].items()}
    gpu.update({m: Profile.from_dict(d) for m, d in measured["device_cuda_graphs"].items()})
    cpu = {m: Profile.from_dict(d) for m, d in measured["host_cpu"].items()}
    multiples = (0.05, 0.5, 2.5) if quick else (0.02, 0.1, 0.3, 1.0, 2.5, 4.5)
    out: dict[str, Any] = {"source": DEVICE_RESULT.name, "gpu": doc["machine"].get("gpu"), "prices_usd_per_hour": PRICES}
    for label, ratio in (("list", PRICES["h200"] / PRICES["cpu16"]), ("ratio_4", 4.0), ("ratio_16", 16.0)):
        out[label] = _heterogeneous({"h200": (gpu, ratio), "cpu16": (cpu, 1.0)}, quick, multiples)
        out[label]["price_ratio"] = round(ratio, 3)
    return out


def run(quick: bool, console: Any) -> dict[str, Any]:
    from rich.table import Table

    from vidnexus.benchmarks.profiles import measured_profiles

    t0 = time.perf_counter()
    profiles = measured_profiles(quick, console)
    sizes = (16, 64, 256, 1000) if not quick else (16, 64, 1000)
    seeds = 3 if quick else 10
    results = []
    table = Table("sessions", "squishy", "lower bound", "split bound", "best bound", "oblivious", "squishy/LB",
                  "squishy/split", "squishy/best", "oblivious/squishy", "plan ms",
                  title="devices used (mean over seeds)")
    for n, rate, k in [(n, 40.0, seeds) for n in sizes] + [(10_000, 5.0, 2 if quick else 5)]:
        r = _size(n, rate, k, profiles, oblivious=n <= 1000)
        results.append(r)
        table.add_row(str(n), f"{r['devices']:.1f}", f"{r['lower_bound']:.1f}", f"{r['split_bound']:.1f}",
                      f"{r['best_bound']:.1f}", f"{r['oblivious']:.1f}", f"{r['over_lower_bound']:.3f}",
                      f"{r['over_split_bound']:.3f}", f"{r['over_best_bound']:.3f}",
                      f"{r['oblivious_over_squishy']:.2f}", f"{r['plan_ms']:.1f}")
    console.print(table)
    epochs = _epochs(10_000, 5.0, 1 if quick else 3, profiles)
    console.print(f"incremental epoch, 10,000 sessions, rates ±20%: {epochs['replan_ms']:.0f} ms, "
                  f"{epochs['moved_fraction']:.1%} moved, {epochs['devices_over_fresh_plan']:.3f}× a fresh plan's devices")
    small = []
    solver = "none"
    for n_small, count in ((8, 10 if quick else 40), (16, 4 if quick else 20), (24, 0 if quick else 10)):
        for seed in range(count):
            sessions = workload(n_small, profiles, total_rate=40.0 * n_small, seed=1000 + seed)
            sq = plan(sessions, profiles, k_std=K_STD)
            ex = exact_small(sessions, profiles, time_limit_s=20.0)
            if ex is None:
                continue
            solver = ex[1]
            placed = [s for s in sessions if s.session_id not in {sid for sid, _ in sq.infeasible}]
            split_lb = split_lower_bound(placed, profiles, k_std=K_STD)
            small.append({"sessions": n_small, "squishy": sq.devices, "exact": ex[0].devices,
                          "lower_bound": lower_bound(placed, profiles, k_std=K_STD),
                          "split_bound": split_lb, "best_bound": best_bound(placed, profiles, split_lb)[0]})
    over_opt = statistics.fmean(s["squishy"] / s["exact"] for s in small if s["exact"])
    opt_over_lb = statistics.fmean(s["exact"] / max(1, math.ceil(s["lower_bound"])) for s in small if s["exact"])
    opt_over_split = statistics.fmean(s["exact"] / max(1, s["split_bound"]) for s in small if s["exact"])
    opt_over_best = statistics.fmean(s["exact"] / max(1, s["best_bound"]) for s in small if s["exact"])
    console.print(f"small instances (8–24 sessions, {len(small)} solved exactly by {solver}): "
                  f"squishy/optimal = {over_opt:.3f}; optimal/lower bound = {opt_over_lb:.3f}, "
                  f"over the split bound = {opt_over_split:.3f}, over the best bound = {opt_over_best:.3f}")
    one = measured_profiles(quick, console, threads=1)
    hetero = _heterogeneous({"2-thread": (profiles, 2.0), "1-thread": (one, 1.0)}, quick)
    hetero["profiles_1_thread"] = {k: v.to_dict() for k, v in one.items()}
    devices = _measured_device_types(quick)
    if devices is not None:
        hetero["measured_device_types"] = devices
        console.print(f"two real device types ({devices['gpu']} at ${PRICES['h200']}/h and its host's 16-core CPU at "
                      f"${PRICES['cpu16']}/h, profiles from {devices['source']}): the cheapest single type costs "
                      f"{devices['list']['single_type_cost_over_mix']:.3f}× the mix (price ratio 4: "
                      f"{devices['ratio_4']['single_type_cost_over_mix']:.3f}×, 16: "
                      f"{devices['ratio_16']['single_type_cost_over_mix']:.3f}×)")
    console.print(f"two device types (this CPU as a 2-thread executor at price 2 and a 1-thread one at price 1), "
                  f"Piccolo's planner: the cheapest single type costs {hetero['single_type_cost_over_mix']:.3f}× "
                  f"the mix (Piccolo reports 1.232×)")
    mixes = [r for r in results if r["sessions"] <= 1000]
    summary = {
        "mean_devices_over_lower_bound": round(statistics.fmean(r["over_lower_bound"] for r in mixes), 3),
        "mean_devices_over_optimal_small": round(over_opt, 3),
        "mean_optimal_small_over_lower_bound": round(opt_over_lb, 3),
        "mean_devices_over_split_bound": round(statistics.fmean(r["over_split_bound"] for r in mixes), 3),
        "mean_optimal_small_over_split_bound": round(opt_over_split, 3),
        "mean_devices_over_best_bound": round(statistics.fmean(r["over_best_bound"] for r in mixes), 3),
        "mean_optimal_small_over_best_bound": round(opt_over_best, 3),
        "devices_over_split_bound_10000_sessions": round(next(r["over_split_bound"] for r in results
                                                              if r["sessions"] == 10_000), 3),
        "oblivious_over_squishy": round(statistics.fmean(r["oblivious_over_squishy"] for r in mixes), 3),
        "plan_ms_1000_sessions": round(next(r["plan_ms"] for r in results if r["sessions"] == 1000), 1),
        "plan_ms_10000_sessions": round(next(r["plan_ms"] for r in results if r["sessions"] == 10_000), 1),
        "devices_over_lower_bound_10000_sessions": round(next(r["over_lower_bound"] for r in results
                                                              if r["sessions"] == 10_000), 3),
        "replan_ms_10000_sessions": round(epochs["replan_ms"], 1),
        "replan_moved_fraction_10000_sessions": round(epochs["moved_fraction"], 4),
        "single_type_cost_over_mix": hetero["single_type_cost_over_mix"],
        "cost_over_single_type": round(hetero["single_type_cost_over_mix"] - 1, 4),
    }
    if devices is not None:
        summary.update({
            "gpu_cpu_single_type_cost_over_mix": devices["list"]["single_type_cost_over_mix"],
            "gpu_cpu_cost_over_single_type": round(devices["list"]["single_type_cost_over_mix"] - 1, 4),
            "gpu_cpu_cost_over_single_type_ratio_4": round(devices["ratio_4"]["single_type_cost_over_mix"] - 1, 4),
            "gpu_cpu_cost_over_single_type_ratio_16": round(devices["ratio_16"]["single_type_cost_over_mix"] - 1, 4),
        })
    console.print(f"summary: {summary}  ({time.perf_counter() - t0:.0f} s)")
    return {"name": "scheduler", "machine": machine_info(),
            "config": {"quick": quick, "sizes": list(sizes) + [10_000], "seeds": seeds, "zipf": 0.9, "slo_ms": [50, 400],
                       "mean_rate_per_session": {"up to 1000": 40.0, "10000": 5.0}, "k_std": K_STD,
                       "exact_solver": solver,
                       "lower_bound_note": "devices / ceil(Σ R_i/T_i) over placed sessions; T_i the best throughput "
                                           "within the SLO; mean_devices_over_lower_bound over the mixes up to 1000; "
                                           "split bound: control.squishy.split_lower_bound, the fewest devices of any "
                                           "plan that saturates first (squishy's and the exact solver's plan space); "
                                           "best bound: the split bound or, up to 256 sessions, ⌈the LP bound⌉ "
                                           "(control.milp.lp_lower_bound) when higher",
                       "profiles": {k: v.to_dict() for k, v in profiles.items()}},
            "results": results + [epochs, {"small_instances": small}, hetero], "summary": summary}
