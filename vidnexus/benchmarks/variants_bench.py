"""MCDNN's variant catalog under a tightening budget: accuracy delivered by choosing per session the
most accurate variant that fits its share, against "always the best model" and "always the cheapest".

The task is the project's 120-class glyph task; its catalog (:mod:`vidnexus.training.variants`)
holds four real models with their held-out accuracy, ℓ(b) on one thread and memory. Four sessions
of the task ask 400, 200, 100 and 50 requests a second of held-out renders. The device-time budget
goes from 1.5× down to 0.05× what "always the best" needs (Σ rate × its cost per request at batch
16). Each policy then runs for real: for ``period`` seconds of requests, each session's images go
through its chosen model on this CPU (one torch thread, batches of 16), each batch's wall time
charged to the session's share of the budget (the budget split in proportion to rate, MCDNN's
equal per-request budget); once a session's share is spent its remaining requests are dropped.
Delivered accuracy = correct answers / requests (a dropped request is not a correct one).

- ``mcdnn``: :func:`vidnexus.control.variants.choose_variants` (most accurate variant that fits);
- ``best``: every session on the most accurate variant, whatever the budget (it drops when over);
- ``cheapest``: every session on the cheapest variant.

A second run steps the load (every rate ×2, then back) at 1.1× the first load's best-model budget
and reports the switches the chooser makes, each paid with the variant's measured load time.

Summary: ``variants_accuracy_at_half_budget_vs_best`` (mcdnn ÷ best at 0.5×),
``variants_accuracy_at_half_budget_vs_cheapest``, ``variants_accuracy_full_budget_vs_best`` (1.0:
nothing to trade when the budget holds the best), ``variants_step_switches``.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

from vidnexus.benchmarks.machine import machine_info
from vidnexus.control.variants import Budgets, TaskSession, catalog_of, choose_variants, shares

RATES = (400.0, 200.0, 100.0, 50.0)
FRACTIONS = (1.5, 1.0, 0.75, 0.5, 0.25, 0.1, 0.05)
BATCH = 16


def _serve(models: dict[str, Any], choice: dict[str, str], sessions: Sequence[TaskSession], budget: Budgets,
           period: float, xs: Any, ys: Any) -> dict[str, Any]:
    """Run ``period`` seconds of every session's requests through its chosen model, each batch's
    wall time charged to its share of ``budget``; correct answers, drops and device time."""
    import torch

    import numpy as np

    share = shares(sessions, budget)
    correct = dropped = total = 0
    used = 0.0
    offset = 0
    order = np.random.default_rng(0).permutation(len(ys))  # the held-out set is stored class by class
    for s in sessions:
        n = int(round(s.rate * period))
        idx = order[[(offset + k) % len(ys) for k in range(n)]]
        offset += n
        total += n
        left = share[s.session_id][0] * period
        model = models[choice[s.session_id]]
        for k in range(0, n, BATCH):
            part = idx[k:k + BATCH]
            if left <= 0:
                dropped += n - k
                break
            t0 = time.perf_counter()
            with torch.inference_mode():
                pred = model(torch.from_numpy(xs[part])).argmax(1).numpy()
            took = time.perf_counter() - t0
            left -= took
            used += took
            correct += int((pred == ys[part]).sum())
    return {"accuracy": round(correct / total, 4), "served": round((total - dropped) / total, 4),
            "device_s_per_s": round(used / period, 4), "requests": total}


def run(quick: bool, console: Any) -> dict[str, Any]:
    import torch

    from vidnexus.config import load_settings
    from vidnexus.gpu_executor.profiler import torch_threads
    from vidnexus.training.variants import held_out, load_or_measure, variant_models

    t0 = time.perf_counter()
    model_dir = load_settings().data_dir / "models"
    measured = load_or_measure(model_dir)
    models = variant_models(model_dir)
    xs, ys = held_out()
    catalog = catalog_of(measured, BATCH)
    console.print("catalog (held-out accuracy, one thread, batch 16):")
    for v in catalog:
        console.print(f"  {v.name:12s} accuracy {v.accuracy:.4f}  {1000 * v.cost_s:7.3f} ms/request  "
                      f"{v.memory_bytes / 1e6:6.2f} MB  load {1000 * v.load_s:5.1f} ms")
    best = max(catalog, key=lambda v: (v.accuracy, -v.cost_s))
    cheapest = min(catalog, key=lambda v: (v.cost_s, -v.accuracy))
    sessions = [TaskSession(f"s{i}", measured[0].task, r) for i, r in enumerate(RATES)]
    need = sum(s.rate for s in sessions) * best.cost_s
    period = 0.5 if quick else 4.0
    fractions = (1.0, 0.5, 0.1) if quick else FRACTIONS
    rows = []
    with torch_threads(1):
        with torch.inference_mode():  # first batches build kernels: not charged to any budget
            for m in models.values():
                for _ in range(5):
                    m(torch.from_numpy(xs[:BATCH]))
        for f in fractions:
            budget = Budgets(device_s_per_s=f * need)
            picks = {"mcdnn": {c.session_id: c.variant for c in choose_variants({best.task: catalog}, sessions, budget)},
                     "best": {s.session_id: best.name for s in sessions},
                     "cheapest": {s.session_id: cheapest.name for s in sessions}}
            row: dict[str, Any] = {"budget_fraction": f, "device_s_per_s": round(f * need, 5)}
            for policy, choice in picks.items():
                r = _serve(models, choice, sessions, budget, period, xs, ys)
                row[policy] = {**r, "variants": choice}
            rows.append(row)
            console.print(f"  budget {f:4.2f}× best's need: accuracy mcdnn {row['mcdnn']['accuracy']:.3f} "
                          f"({', '.join(sorted(set(picks['mcdnn'].values())))}), best {row['best']['accuracy']:.3f} "
                          f"(served {row['best']['served']:.2f}), cheapest {row['cheapest']['accuracy']:.3f}")
        # A load step at a fixed budget (1.1× what the best needs at the first load): the chooser
        # switches down when the load doubles, and back up when it returns and loading pays.
        budget = Budgets(device_s_per_s=1.1 * need)
        previous: dict[str, str] = {}
        step: list[dict[str, Any]] = []
        switches = 0
        for k, scale in enumerate((1.0, 2.0, 2.0, 1.0, 1.0)):
            load = [TaskSession(s.session_id, s.task, s.rate * scale) for s in sessions]
            chosen = choose_variants({best.task: catalog}, load, budget, previous=previous)
            switched = [c.session_id for c in chosen if c.switched]
            load_s = sum(next(v.load_s for v in catalog if v.name == c.variant) for c in chosen if c.switched)
            previous = {c.session_id: c.variant for c in chosen}
            switches += len(switched)
            step.append({"epoch": k, "load_scale": scale, "variants": dict(previous), "switched": switched,
                         "load_s": round(load_s, 5), "fits": all(c.fits for c in chosen)})
            console.print(f"  load ×{scale:4.2f}: {', '.join(f'{c.session_id}={c.variant}' for c in chosen)}"
                          f"{'  (switched ' + ', '.join(switched) + ')' if switched else ''}")

    def at(f: float) -> dict[str, Any]:
        return next(r for r in rows if r["budget_fraction"] == f)

    def ratio(a: float, b: float) -> float:
        return round(a / b, 3) if b else 0.0

    half, full = at(0.5), at(1.0)
    summary: dict[str, Any] = {
        "variants_accuracy_at_half_budget_vs_best": ratio(half["mcdnn"]["accuracy"], half["best"]["accuracy"]),
        "variants_accuracy_at_half_budget_vs_cheapest": ratio(half["mcdnn"]["accuracy"], half["cheapest"]["accuracy"]),
        "variants_accuracy_full_budget_vs_best": ratio(full["mcdnn"]["accuracy"], full["best"]["accuracy"]),
        "variants_step_switches": switches,
    }
    console.print(f"summary: {summary}  ({time.perf_counter() - t0:.0f} s)")
    return {"name": "variants", "machine": machine_info(),
            "config": {"quick": quick, "task": best.task, "rates": list(RATES), "period_s": period, "batch": BATCH,
                       "torch_threads": 1, "held_out": int(len(ys)), "best": best.name, "cheapest": cheapest.name,
                       "best_need_device_s_per_s": round(need, 5),
                       "catalog": [m.to_dict() for m in measured]},
            "results": {"budgets": rows, "load_step": step}, "summary": summary}
