"""Real-time sessions and delay-tolerant work on one device (DeepQuery, MMSys'19): does the
background work get the device's slack without costing the real-time SLO?

Per real-time load (a share of the device: the real-time rate × ℓ(1)), three setups:

- **dedicated**: a device for each — the real-time stream alone on one, the background backlog alone
  on another (its throughput there is what a whole device gives it);
- **co-located, sized** (``SessionSpec.background``): both on one device; background batches run
  only when no real-time batch is ready and are sized by DeepQuery's rule to end before the next
  real-time batch must start (``gpu_executor.background``);
- **co-located, unsized**: both on one device, the background work as an ordinary session with a
  loose SLO (10 s) — what running a backfill beside live streams does without the rule.

Part 1, the real executor on this CPU: MobileNetV3-Small at 224 px (random weights: compute cost
only), profiled first, one torch thread; the real-time stream is periodic (a camera's sampled
frames) and, in full runs, also Poisson; the background is a closed-loop backlog (a stored video
being re-processed) that keeps 2 × the largest batch outstanding. Part 2, the simulator with the
same profile: the same policies at more loads, no noise.

Summary: ``colocate_rt_attainment`` (the least real-time share within SLO, co-located and sized),
``colocate_rt_attainment_dedicated`` and ``colocate_rt_attainment_unsized`` beside it, and
``colocate_background_share`` (background throughput co-located and sized ÷ on a dedicated device,
at half load; ``…_unsized`` beside it). ``rt_busy_dedicated`` is the device time the real-time
stream takes alone.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any, Literal

from vidnexus.benchmarks.machine import machine_info
from vidnexus.contracts.profile import Profile
from vidnexus.gpu_executor.backend import SessionSpec, local_targets
from vidnexus.sim.loadgen import arrivals, merge, uniform_arrivals
from vidnexus.sim.simulator import simulate

__all__ = ["run", "sim_row"]

UNSIZED_SLO_S = 10.0
SETUPS = ("dedicated", "sized", "unsized")


BACKLOG_QUEUE = 1_000_000


def _setup(setup: str, slo: float, prof: Profile) -> tuple[list[SessionSpec], dict[str, int]]:
    """The sessions of a setup and their batch sizes: real time at its own batch (as if alone); the
    unsized backlog at the profile's largest batch, its most efficient."""
    live = SessionSpec("live", "m", slo)
    targets = local_targets([live], {"m": prof})
    if setup == "sized":
        return [live, SessionSpec("old", "m", math.inf, max_queue=BACKLOG_QUEUE, background=True)], targets
    if setup == "unsized":
        return ([live, SessionSpec("old", "m", UNSIZED_SLO_S, max_queue=BACKLOG_QUEUE)],
                targets | {"old": prof.max_batch})
    return [live], targets


Kind = Literal["poisson", "uniform"]


def sim_row(prof: Profile, slo: float, load: float, kind: Kind, duration_s: float, t_sat: float) -> dict[str, Any]:
    """One load in the simulator: real-time attainment and background items/s per setup."""
    live = arrivals(kind, load * t_sat, duration_s - 1.0, "live", seed=1)  # all served before the end
    # A backlog far larger than the device can finish: what is left at the end is simply not done.
    backlog = uniform_arrivals(2 * t_sat, duration_s, "old")
    row: dict[str, Any] = {"part": "sim", "arrivals": kind, "load": load, "rt_rate": round(load * t_sat, 1)}
    alone_bg = simulate(_setup("sized", slo, prof)[0][1:], {"m": prof}, backlog, until_s=duration_s)
    row["dedicated_bg_per_s"] = round(alone_bg.replies / duration_s, 1)
    for setup in SETUPS:
        specs, targets = _setup(setup, slo, prof)
        r = simulate(specs, {"m": prof}, merge(live, backlog) if setup != "dedicated" else live, targets=targets,
                     until_s=duration_s)
        row[f"{setup}_rt_attainment"] = round(r.per_session["live"]["on_time"] / max(1, len(live)), 4)
        if setup != "dedicated":
            done = r.per_session["old"]["on_time"] + r.per_session["old"]["late"]
            row[f"{setup}_bg_per_s"] = round(done / duration_s, 1)
        else:
            row["rt_busy_dedicated"] = round(r.busy_s / (duration_s - 1.0), 3)
    _shares(row)
    return row


def _shares(row: dict[str, Any]) -> None:
    """Background throughput co-located as a share of a dedicated device's."""
    full = row["dedicated_bg_per_s"]
    for setup in ("sized", "unsized"):
        row[f"{setup}_bg_share"] = round(row[f"{setup}_bg_per_s"] / full, 3) if full else 0.0


class _Backlog:
    """Keeps ``window`` background requests outstanding on an executor until stopped; counts replies."""

    def __init__(self, ex: Any, x: Any, window: int) -> None:
        self.ex, self.x, self.done, self.dropped = ex, x, 0, 0
        self._slots = threading.Semaphore(window)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._feed, daemon=True)

    def _feed(self) -> None:
        while not self._stop.is_set():
            if not self._slots.acquire(timeout=0.1):
                continue
            self.ex.submit("old", self.x).add_done_callback(self._ended)

    def _ended(self, fut: Any) -> None:
        with self._lock:
            if fut.result().ok:
                self.done += 1
            else:
                self.dropped += 1
        self._slots.release()

    def __enter__(self) -> "_Backlog":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _real_part(quick: bool, console: Any) -> tuple[dict[str, Any], list[dict[str, Any]], Profile, float, float]:
    import numpy as np
    import torch

    from vidnexus.benchmarks.openloop import drive, good_fraction, warm_up
    from vidnexus.gpu_executor.executor import Executor
    from vidnexus.gpu_executor.profiler import profile_runner
    from vidnexus.gpu_executor.runner import TorchRunner
    from vidnexus.gpu_executor.zoo import random_init

    torch.set_num_threads(1)
    model_name = "mobilenet_v3_small"
    runner = TorchRunner(model_name, random_init(model_name), postprocess=lambda r: None)
    x = np.random.default_rng(0).random((3, 224, 224), dtype=np.float32)
    sizes = [1, 2, 4, 8, 16] if quick else [1, 2, 3, 4, 6, 8, 12, 16]
    warm_up(runner, x, sizes)
    prof, _ = profile_runner(runner, lambda: x, sizes, repeats=3 if quick else 5)
    # An SLO tighter than the largest background batch: an unsized backfill batch can hold a live
    # request past it, a sized one must not.
    slo = max(0.030, 2 * prof.latency(prof.max_batch // 2))
    # Loads are shares of the device at batch 1: a periodic stream served as it arrives runs alone
    # (on this CPU a batch of 1 costs almost as much per item as a batch of 16).
    t_sat = 1.0 / prof.latency(1)
    duration = 2.0 if quick else 10.0
    window = 2 * prof.max_batch
    console.print(f"  {model_name}: ℓ(1) {prof.latency(1) * 1000:.1f} ms, ℓ({prof.max_batch}) "
                  f"{prof.latency(prof.max_batch) * 1000:.1f} ms; SLO {slo * 1000:.0f} ms; batch-1 rate {t_sat:.0f} req/s")

    def executor(specs: list[SessionSpec], targets: dict[str, int] | None = None) -> Any:
        return Executor(specs, {"m": runner}, {"m": prof}, targets=targets, workers=1)

    # The background backlog alone on a device of its own.
    with executor(_setup("sized", slo, prof)[0][1:]) as ex, _Backlog(ex, x, window) as bg:
        time.sleep(duration)
        dedicated_bg = bg.done / duration
    console.print(f"  background alone: {dedicated_bg:.1f} items/s")

    loads: list[tuple[float, Kind]] = ([(0.5, "uniform")] if quick else
                                       [(0.25, "uniform"), (0.5, "uniform"), (0.75, "uniform"), (0.5, "poisson")])
    rows = []
    for load, kind in loads:
        trace = arrivals(kind, load * t_sat, duration, "live", seed=1)
        row: dict[str, Any] = {"part": "real", "arrivals": kind, "load": load, "rt_rate": round(load * t_sat, 1),
                               "rt_requests": len(trace), "dedicated_bg_per_s": round(dedicated_bg, 1)}
        for setup in SETUPS:
            with executor(*_setup(setup, slo, prof)) as ex:
                if setup == "dedicated":
                    res = drive(trace, lambda a: ex.submit("live", x))
                    bg_rate = 0.0
                else:
                    with _Backlog(ex, x, window) as bg:
                        t0 = time.monotonic()
                        res = drive(trace, lambda a: ex.submit("live", x))
                        took = time.monotonic() - t0
                    bg_rate = bg.done / took
            att = good_fraction(res, slo)
            row[f"{setup}_rt_attainment"] = round(att, 4)
            if setup != "dedicated":
                row[f"{setup}_bg_per_s"] = round(bg_rate, 1)
            else:
                row["rt_busy_dedicated"] = round(ex.stats()[0]["device_busy_fraction"], 3)
            console.print(f"  real {kind:7s} load {load:.2f} ({load * t_sat:5.1f} req/s) {setup:9s}: "
                          f"{100 * att:6.2f}% within SLO" + (f", background {bg_rate:.1f} items/s" if setup != "dedicated" else ""))
        _shares(row)
        rows.append(row)
    info = {"model": model_name, "torch_threads": 1, "slo_ms": round(slo * 1000, 1), "profile": prof.to_dict(),
            "batch1_rps": round(t_sat, 1), "probe_seconds": duration, "backlog_window": window}
    return info, rows, prof, slo, t_sat


def run(quick: bool, console: Any) -> dict[str, Any]:
    from rich.table import Table

    t0 = time.perf_counter()
    console.print("real executor on this CPU:")
    info, real, prof, slo, t_sat = _real_part(quick, console)
    sim_loads = (0.5,) if quick else (0.1, 0.25, 0.5, 0.75, 0.9)
    kinds: tuple[Kind, ...] = ("uniform", "poisson")
    sim = [sim_row(prof, slo, load, kind, 10.0 if quick else 60.0, t_sat) for kind in kinds for load in sim_loads]
    table = Table("part", "arrivals", "load", "rt dedicated", "rt sized", "rt unsized", "bg sized /s",
                  "bg unsized /s", "bg dedicated /s", "rt busy alone", "sized share", title="real-time + background on one device")
    for r in real + sim:
        table.add_row(r["part"], r["arrivals"], f"{r['load']:.2f}", *(f"{100 * r[f'{s}_rt_attainment']:.1f}%" for s in SETUPS),
                      f"{r['sized_bg_per_s']:.1f}", f"{r['unsized_bg_per_s']:.1f}", f"{r['dedicated_bg_per_s']:.1f}",
                      f"{100 * r['rt_busy_dedicated']:.0f}%", f"{r['sized_bg_share']:.2f}")
    console.print(table)
    half = next(r for r in real if r["load"] == 0.5 and r["arrivals"] == "uniform")
    summary = {
        "colocate_rt_attainment": min(r["sized_rt_attainment"] for r in real),
        "colocate_rt_attainment_dedicated": min(r["dedicated_rt_attainment"] for r in real),
        "colocate_rt_attainment_unsized": min(r["unsized_rt_attainment"] for r in real),
        "colocate_background_share": half["sized_bg_share"],
        "colocate_background_share_unsized": half["unsized_bg_share"],
        "sim_colocate_rt_attainment": min(r["sized_rt_attainment"] for r in sim),
        "sim_colocate_rt_attainment_unsized": min(r["unsized_rt_attainment"] for r in sim),
        "sim_colocate_background_share_half_load": next(r["sized_bg_share"] for r in sim
                                                        if r["load"] == 0.5 and r["arrivals"] == "uniform"),
    }
    console.print(f"summary: {summary}  ({time.perf_counter() - t0:.0f} s)")
    return {"name": "colocate", "machine": machine_info(),
            "config": {"quick": quick, **info, "unsized_slo_s": UNSIZED_SLO_S, "sim_loads": list(sim_loads)},
            "results": real + sim, "summary": summary}
