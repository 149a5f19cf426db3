"""Prefix batching: k variants of ResNet-18 (64×64 input) that differ only in the last layer, each its
own session at one SLO. Goodput (Poisson total rate split evenly) and parameter memory with prefix
batching (one trunk, merged batches) vs without (k full models in the same duty cycle)."""

from __future__ import annotations

import time
from typing import Any, Callable

from vidnexus.benchmarks.machine import machine_info
from vidnexus.benchmarks.openloop import FULL_LIMITS, QUICK_LIMITS, best_of, drive, good_fraction, probe_goodput, probe_seconds, warm_up

__all__ = ["run"]

SHAPE = (3, 64, 64)


def _system(k: int, prefix: bool, prof: Any, slo: float) -> tuple[Callable[[], Any], list[str], int]:
    """Build the models and runners once; return a factory of fresh executors over them, and the
    model memory those executors hold.

    Each model is its own copy, as an executor loads each model file on its own. With prefix
    batching the runners go through :func:`~vidnexus.gpu_executor.loading.served_runners`, what
    ``vidnexus executor`` does (equal trunks detected, one PrefixRunner per group, the members' own
    copies dropped); memory is :func:`~vidnexus.gpu_executor.prefix.held_bytes` of the runners the
    executor is given — the product's executor, not a model of it."""
    import numpy as np

    from vidnexus.benchmarks.models import headed_variants, separate_copies
    from vidnexus.gpu_executor.backend import SessionSpec
    from vidnexus.gpu_executor.executor import Executor
    from vidnexus.gpu_executor.loading import served_runners
    from vidnexus.gpu_executor.prefix import held_bytes
    from vidnexus.gpu_executor.runner import TorchRunner

    copies = separate_copies(headed_variants(k))
    sessions = [SessionSpec(f"s-{m}", m, slo) for m in copies]
    profiles = {m: prof for m in copies}
    x = np.zeros(SHAPE, np.float32)
    loaded = {m: TorchRunner(m, mod, postprocess=lambda t: None) for m, mod in copies.items()}
    runners, groups, group_runners = served_runners(loaded) if prefix else (loaded, {}, {})
    mem = held_bytes([*runners.values(), *group_runners.values()])
    for r in runners.values():
        warm_up(r, x)
    for gid, g in group_runners.items():
        g.postprocess = lambda t: None  # as the single models' runners: no outputs kept
        members = sorted(m for m, of in groups.items() if of == gid)
        lead = members[0]

        def trunk_at(xs: Any, g: Any = g, lead: str = lead) -> Any:
            return g.run_parts([(lead, xs)])

        warm_up(trunk_at, x)  # the trunk at every batch size
        for m in members:
            g.run_parts([(m, [x])])
    return (lambda: Executor(sessions, runners, profiles, prefix_groups=groups, group_runners=group_runners,
                             workers=1)), list(copies), mem


def run(quick: bool, console: Any) -> dict[str, Any]:
    import numpy as np
    from rich.table import Table

    from vidnexus.benchmarks.models import profile_resnet18_variant
    from vidnexus.sim.loadgen import arrivals, merge

    t_start = time.perf_counter()
    x = np.random.default_rng(0).random(SHAPE, dtype=np.float32)
    prof = profile_resnet18_variant(x)
    slo = max(0.100, 4 * prof.latency(1))
    ks = (8,) if quick else (1, 4, 8, 16)  # quick: the summary's k only (four goodput searches took 2 min)
    duration = 2.0 if quick else 6.0
    min_requests = 100 if quick else 300  # per probe (see probe_seconds); quick only checks the harness
    limits = QUICK_LIMITS if quick else FULL_LIMITS
    reps = 1 if quick else 2  # runs per probe, the best counts (quick: the harness only)
    t_sat = prof.throughput(max(1, prof.max_batch_within(slo / 2)))
    results = []
    table = Table("k", "prefix batching", "goodput req/s", "param MiB", title=f"prefix batching (SLO {slo * 1000:.0f} ms)")
    for k in ks:
        row: dict[str, Any] = {"k": k}
        for prefix in (True, False):
            make, names, mem = _system(k, prefix, prof, slo)

            def frac(rate: float, make: Callable[[], Any] = make, names: list[str] = names) -> float:
                secs = probe_seconds(rate, duration, min_requests, limits["probe_max_s"])
                trace = merge(*[arrivals("poisson", rate / k, secs, f"s-{n}", seed=i) for i, n in enumerate(names)])
                with make() as ex:
                    res = drive(trace, lambda a: ex.submit(a.session_id, x))
                return good_fraction(res, slo)

            g = probe_goodput(lambda r: best_of(reps, lambda: frac(r)), 0.05 * t_sat, 1.5 * t_sat,
                              tol=0.2 if quick else 0.03, target=limits["target"], budget_s=limits["search_budget_s"])
            key = "pb" if prefix else "no_pb"
            row[f"goodput_{key}"] = round(g, 1)
            row[f"param_mib_{key}"] = round(mem / 2**20, 2)
            table.add_row(str(k), "yes" if prefix else "no", f"{g:.0f}", f"{mem / 2**20:.1f}")
            console.print(f"  k={k} prefix={'yes' if prefix else 'no '}: goodput {g:.0f} req/s, {mem / 2**20:.1f} MiB")
        row["goodput_ratio"] = round(row["goodput_pb"] / row["goodput_no_pb"], 3) if row["goodput_no_pb"] else None
        row["memory_ratio"] = round(row["param_mib_no_pb"] / row["param_mib_pb"], 3)
        results.append(row)
    console.print(table)
    k8 = next(r for r in results if r["k"] == 8)
    if not k8["goodput_ratio"]:
        raise RuntimeError(f"no goodput ratio at k=8: a goodput search found no rate meeting {limits['target']:.0%} "
                           f"within the SLO ({k8}); is the machine busy?")
    summary = {"goodput_ratio_k8": k8["goodput_ratio"], "memory_ratio_k8": k8["memory_ratio"]}
    console.print(f"summary: {summary}  ({time.perf_counter() - t_start:.0f} s)")
    return {"name": "prefix", "machine": machine_info(),
            "config": {"quick": quick, "model": "resnet18 trunk + Linear(512,10) heads", "input": list(SHAPE),
                       "slo_ms": round(slo * 1000, 1), "probe_seconds": duration, "min_requests_per_probe": min_requests, "runs_per_probe_best_of": reps, **limits, "ks": list(ks),
                       "torch_threads": 2, "profile": prof.to_dict()},
            "results": results, "summary": summary}
