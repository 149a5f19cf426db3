"""A cluster's day in the simulator (:mod:`vidnexus.sim.day`): the real scheduler plans a pool of
executors every epoch from the rates they report, the real batching policies serve Poisson
arrivals, on profiles measured on this machine. Two runs:

- **day**: a diurnal load (peak / trough = 3, each session's phase jittered) sized so that the
  lower bound at the peak is ``peak_devices`` devices, with churn (2% of the sessions replaced per
  30 s epoch);
- **step**: a flat load that doubles at once halfway through.

Reported: the share of requests not answered within their SLO (by reason; Nexus reports 0.27% on
100 GPUs), devices used over the lower bound Σ R_i / T_i at each epoch and over a plan from
scratch at the same rates, sessions moved per epoch, planning time per epoch, and the seconds
from the step until the miss rate over 5 s is back within max(1%, 1.5 × its level before the
step).
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Any

from vidnexus.benchmarks.machine import machine_info
from vidnexus.contracts.profile import Profile
from vidnexus.control.scheduler import plan_epoch
from vidnexus.sim.day import DayConfig, DayResult, simulate_day

__all__ = ["run"]

NEXUS_MISS_RATE = 0.0027
"""Nexus §7 (100 GPUs, a day of traffic-camera load): 0.27% of requests missed their SLO."""

MODELS = ("mobilenet_v3_small", "resnet18_64px", "ssdlite")
"""The measured models the sessions use (lenet5's throughput would put millions of requests into
each simulated second without telling anything more)."""


def _timed(times: list[float]) -> Any:
    def plan_fn(*args: Any) -> Any:
        t = time.perf_counter()
        out = plan_epoch(*args)
        times.append((time.perf_counter() - t) * 1000)
        return out
    return plan_fn


def _row(name: str, cfg: DayConfig, r: DayResult, plan_ms: list[float], wall_s: float) -> dict[str, Any]:
    epochs = r.epochs
    return {
        "run": name, "sessions": cfg.sessions, "sessions_in_the_day": r.sessions_started,
        "peak_devices": cfg.peak_devices, "seconds": cfg.day_s, "requests": r.requests,
        "warmup_requests": r.warmup_requests, "on_time": r.on_time, "late": r.late, "drops": dict(r.drops),
        "miss_rate": round(r.miss_rate, 5),
        "epochs": len(epochs),
        "devices_over_lower_bound": round(r.devices_over_lower_bound(), 3),
        "fresh_plan_over_lower_bound": round(statistics.fmean(e.fresh_devices / max(1, math.ceil(e.lower_bound))
                                                              for e in epochs), 3),
        "devices_over_fresh_plan": round(statistics.fmean(e.devices / max(1, e.fresh_devices) for e in epochs), 3),
        "devices_max": max(e.devices for e in epochs),
        "epochs_short_of_executors": sum(1 for e in epochs if e.wanted > e.devices),
        "moves_per_epoch": round(statistics.fmean(e.moved for e in epochs), 2),
        "moves_per_epoch_max": max(e.moved for e in epochs),
        "moved_fraction_per_epoch": round(statistics.fmean(e.moved / max(1, e.sessions) for e in epochs), 4),
        "plan_ms_mean": round(statistics.fmean(plan_ms), 2), "plan_ms_max": round(max(plan_ms), 2),
        "sim_wall_s": round(wall_s, 1),
        "epoch_log": [{"t": e.t, "devices": e.devices, "wanted": e.wanted, "lower_bound": round(e.lower_bound, 2),
                       "fresh_devices": e.fresh_devices, "moved": e.moved, "sessions": e.sessions}
                      for e in epochs],
    }


def run(quick: bool, console: Any) -> dict[str, Any]:
    from rich.table import Table

    from vidnexus.benchmarks.profiles import measured_profiles

    t0 = time.perf_counter()
    measured = measured_profiles(quick, console)
    profiles: dict[str, Profile] = {m: measured[m] for m in MODELS}
    if quick:
        day = DayConfig(sessions=40, peak_devices=10, day_s=180.0, seed=0)
        step = DayConfig(sessions=30, peak_devices=8, day_s=90.0, amplitude=0.0, churn_per_epoch=0.0,
                         step_at_s=45.0, seed=1)
    else:
        day = DayConfig(sessions=300, peak_devices=100, day_s=900.0, seed=0)
        step = DayConfig(sessions=300, peak_devices=100, day_s=300.0, amplitude=0.0, churn_per_epoch=0.0,
                         step_at_s=150.0, seed=1)
    rows = []
    for name, cfg in (("day", day), ("step", step)):
        console.print(f"  simulating {name}: {cfg.sessions} sessions, peak ≈ {cfg.peak_devices} devices, "
                      f"{cfg.day_s:g} s …")
        times: list[float] = []
        t = time.perf_counter()
        r = simulate_day(cfg, profiles, plan_fn=_timed(times))
        row = _row(name, cfg, r, times, time.perf_counter() - t)
        if cfg.step_at_s is not None:
            # The steady miss rate before the step (after the first epochs), and how long after the
            # step the miss rate over 5 s is back within max(1%, 1.5 × that).
            steady = r.miss_rate_between(cfg.step_at_s / 2, cfg.step_at_s)
            row["miss_rate_before_step"] = round(steady, 5)
            reaction = r.reaction_s(cfg.step_at_s, under=max(0.01, 1.5 * steady))
            row["reaction_s"] = reaction if reaction is not None else math.inf
        rows.append(row)
    table = Table("run", "requests", "miss rate", "by reason", "devices/LB", "vs fresh plan", "moves/epoch",
                  "plan ms", title="a cluster's day in the simulator (real scheduler and batching policies)")
    for r_ in rows:
        table.add_row(r_["run"], f"{r_['requests']:,}", f"{r_['miss_rate']:.2%}",
                      ", ".join(f"{k} {v:,}" for k, v in sorted(r_["drops"].items())) + f", late {r_['late']:,}",
                      f"{r_['devices_over_lower_bound']:.3f}", f"{r_['devices_over_fresh_plan']:.3f}",
                      f"{r_['moves_per_epoch']:.1f}", f"{r_['plan_ms_mean']:.1f}")
    console.print(table)
    d, s = rows
    summary = {
        "miss_rate": d["miss_rate"],
        "miss_rate_over_nexus": round(d["miss_rate"] / NEXUS_MISS_RATE, 2),
        "devices_over_lower_bound": d["devices_over_lower_bound"],
        "devices_over_fresh_plan": d["devices_over_fresh_plan"],
        "moves_per_epoch": d["moves_per_epoch"],
        "moved_fraction_per_epoch": d["moved_fraction_per_epoch"],
        "plan_ms_mean": d["plan_ms_mean"],
        "step_reaction_s": s["reaction_s"],
        "step_miss_rate": s["miss_rate"],
    }
    console.print(f"summary: {summary}  ({time.perf_counter() - t0:.0f} s)")
    cfgs = {name: {k: v for k, v in vars(c).items()} for name, c in (("day", day), ("step", step))}
    return {"name": "cluster", "machine": machine_info(),
            "config": {"quick": quick, "runs": cfgs, "models": list(MODELS), "policy": "early_drop",
                       "nexus_miss_rate": NEXUS_MISS_RATE,
                       "profiles": {k: v.to_dict() for k, v in profiles.items()},
                       "notes": "Poisson arrivals; each segment (1 s) runs under the plan in force at its start, "
                                "devices start each segment idle; requests before the first plan are warm-up "
                                "(not counted); sessions no plan places yet are dropped as unplaced"},
            "results": rows, "summary": summary}
