"""The managed Kafka broker's JVM options (collector, heap, collector threads) under the load of
``bench peers``' tightest cell: which broker flags let vnx-kafka keep the most requests on time.

Each option set (:data:`VARIANTS`) gets its own broker (``vidnexus services``' KafkaService on a
scratch port and directory, started with those flags) and its own ``vidnexus executor`` behind it
(``bench peers``' :class:`~vidnexus.benchmarks.peers.KafkaExecutor`: MobileNetV3-small, one thread,
150 KB uint8 requests through the executor client). Each broker is warmed until its JIT settles
(:func:`~vidnexus.benchmarks.peers.warm_broker`); then the brokers take turns probe by probe (rate
by rate, round by round, the order rotated each round), so that this VM's drifting speed falls on
every option set alike. A probe
is ``bench peers``' probe: uniform arrivals at a fixed rate, SLO 50 ms (its weakest cell for
vnx-kafka), 3 s or 200 requests. Per option set: probes under the 99% target, the requests missed
by why (late, or dropped and the reason), p99, CPU per request of the load generator and its
client, the executor and the broker (each read around its own probes), and the broker's collector
time over the run (``jstat``, where the JDK has it; the idle brokers collect little).

While a probe runs the other brokers and executors idle (their polls and heartbeats are in the
machine's noise for every option set alike).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from vidnexus.benchmarks.machine import machine_info
from vidnexus.benchmarks.openloop import misses, on_time, probe_seconds
from vidnexus.benchmarks.procstat import cpu_by_process
from vidnexus.gpu_executor.metrics import percentile

__all__ = ["VARIANTS", "run", "gc_totals", "rank"]

VARIANTS: dict[str, tuple[str, ...]] = {
    "g1": ("-Xms256m", "-Xmx768m", "-XX:+UseG1GC"),
    "g1-kafka": ("-Xms768m", "-Xmx768m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                 "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent"),
    "parallel-1": ("-Xms768m", "-Xmx768m", "-XX:+UseParallelGC", "-XX:ParallelGCThreads=1"),
}
"""The option sets compared: ``g1``, the managed broker's flags until 2026-12-02; ``g1-kafka``,
Kafka's own performance flags (``kafka-run-class.sh``: G1 with a 20 ms pause target) on a fixed
heap, the managed broker's flags since (:data:`~vidnexus.services.kafka.BROKER_JVM_OPTS`);
``parallel-1``, the throughput collector with one collector thread on a fixed heap."""

MIX = [(1.0, 0.050)]
"""One model, SLO 50 ms."""
SLOS = {"0": 0.050}


def gc_totals(pid: int) -> dict[str, float] | None:
    """The JVM's collections so far (``jstat -gc``): young and all collections' counts and
    seconds; None where the JDK has no ``jstat`` or it cannot read the process."""
    if shutil.which("jstat") is None:
        return None
    try:
        out = subprocess.run(["jstat", "-gc", str(pid)], capture_output=True, text=True, timeout=30).stdout.split("\n")
        d = dict(zip(out[0].split(), out[1].split()))
        return {"young": int(d["YGC"]), "young_s": float(d["YGCT"]), "all_s": float(d["GCT"])}
    except (OSError, subprocess.SubprocessError, IndexError, KeyError, ValueError):
        return None


def rank(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Pure: the option sets, fewest missed requests first (then fewest failed probes, then the least
    broker CPU per request).

    >>> rank([{"variant": "a", "missed": 9, "failed_probes": 1, "cpu_ms_per_request": {"broker": 1.5}},
    ...       {"variant": "b", "missed": 2, "failed_probes": 1, "cpu_ms_per_request": {"broker": 1.9}}])
    ['b', 'a']
    """
    return [r["variant"] for r in sorted(rows, key=lambda r: (r["missed"], r["failed_probes"],
                                                              r["cpu_ms_per_request"].get("broker", 0.0)))]


def _free_port_pair(start: int = 19300) -> int:
    """A port whose next one is free too (a KRaft broker's controller listens on port + 1)."""
    from vidnexus.services.base import port_open

    for port in range(start, start + 400, 2):
        if not port_open("127.0.0.1", port) and not port_open("127.0.0.1", port + 1):
            return port
    raise RuntimeError("no free pair of ports for a scratch broker")


def run(quick: bool, console: Any) -> dict[str, Any]:
    import torch

    from vidnexus.benchmarks import peers as P
    from vidnexus.config import Settings, load_settings
    from vidnexus.services.kafka import BROKER_JVM_OPTS, KafkaService

    torch.set_num_threads(1)
    t_start = time.perf_counter()
    settings = load_settings()
    work = Path(tempfile.mkdtemp(prefix="broker-jvm-", dir=settings.work_dir if settings.work_dir.exists() else None))
    w = P.load_generator(settings.data_dir)
    variants = dict(VARIANTS)
    default = next((k for k, v in variants.items() if v == BROKER_JVM_OPTS), None)
    if default is None:  # this machine's default is none of the compared sets (its core count): compare it too
        default, variants["default"] = "default", BROKER_JVM_OPTS
    # Quick (the test suite's smoke run): the default's broker alone, one short probe.
    names = [default] if quick else list(variants)
    rates, rounds = ([60.0], 1) if quick else ([130.0, 160.0, 190.0], 8)
    base_s, min_req, probe_max_s = (1.0, 30, 1.0) if quick else (3.0, 200, None)
    warm_max_s = 10.0 if quick else P.BROKER_WARM_MAX_S
    services: dict[str, KafkaService] = {}
    kafkas: dict[str, Any] = {}
    warm: dict[str, Any] = {}
    probes: list[dict[str, Any]] = []
    try:
        for name in names:
            svc = KafkaService(Settings(work_dir=work / name, cache_dir=settings.cache_dir,
                                        kafka_port=_free_port_pair(), kafka_jvm_opts=" ".join(variants[name])))
            services[name] = svc
            svc.start(lambda s: console.print(f"  {name}: {s}"))
            kafkas[name] = P.KafkaExecutor(w, [MIX], 1, work / name, copies=1, bootstrap=svc.address)
        for name in names:
            warm[name] = P.warm_broker(kafkas[name].replayer(MIX), MIX, 100.0, services[name].pid(), max_s=warm_max_s)
            console.print(f"  {name}: broker warm-up {warm[name]['seconds']:.0f} s")
        # Each option set's processes (client, executor, broker) and replay, once: the probes read them.
        pids = {n: {"client": os.getpid(), "executor": kafkas[n].proc.pid, "broker": services[n].pid()} for n in names}
        replays = {n: kafkas[n].replayer(MIX) for n in names}
        gc_before = {n: _gc_of(pids[n]) for n in names}
        cpu: dict[str, dict[str, float]] = {n: {} for n in names}  # each option set's processes' CPU in its own probes
        for rnd in range(rounds):
            for rate in rates:
                secs = probe_seconds(rate, base_s, min_req, probe_max_s)
                trace = P._trace(rate, secs, MIX, 11 + P.CONFIRM_SEED_STEP * rnd, "uniform")
                turn = rnd % len(names)  # the same trace for every option set, one after another, the order rotated each round
                for name in names[turn:] + names[:turn]:
                    c0 = cpu_by_process(pids[name])
                    res = replays[name](trace)
                    c1 = cpu_by_process(pids[name])
                    for k in c0.keys() & c1.keys():
                        cpu[name][k] = cpu[name].get(k, 0.0) + c1[k] - c0[k]
                    good, n = on_time(res, SLOS)
                    lat = [r.latency_s for _, r in res if r.ok]
                    probes.append({"variant": name, "round": rnd, "rate": rate, "requests": n, "on_time": good,
                                   **misses(res, SLOS),
                                   "p99_ms": round(percentile(lat, 0.99) * 1000, 1) if lat else None})
        gc_after = {n: _gc_of(pids[n]) for n in names}
    finally:
        topics_left: int | None = 0
        for kx in kafkas.values():
            kx.close()
            topics_left = None if topics_left is None or kx.topics_left is None else topics_left + kx.topics_left
        for svc in services.values():
            svc.stop()
    results = []
    for name in names:
        mine = [p for p in probes if p["variant"] == name]
        requests = sum(p["requests"] for p in mine)
        by_why = dict(sum((Counter({k: v for k, v in p.items() if k == "late" or k.startswith("dropped:")})
                           for p in mine), Counter()))
        gc0, gc1 = gc_before[name], gc_after[name]
        p99s = [p["p99_ms"] for p in mine if p["p99_ms"] is not None]
        row: dict[str, Any] = {
            "variant": name, "jvm_opts": list(variants[name]), "probes": len(mine),
            "failed_probes": sum(1 for p in mine if p["on_time"] < P.TARGET * p["requests"]),
            "requests": requests, "missed": requests - sum(p["on_time"] for p in mine), "missed_by_why": by_why,
            "mean_p99_ms": round(sum(p99s) / len(p99s), 1) if p99s else None,
            "cpu_ms_per_request": {k: round(1000 * v / requests, 3) for k, v in sorted(cpu[name].items())}
            if requests else {},
            "broker_warm_up": warm[name]}
        if gc0 is not None and gc1 is not None:
            row["broker_young_collections"] = gc1["young"] - gc0["young"]
            row["broker_gc_ms"] = round(1000 * (gc1["all_s"] - gc0["all_s"]), 1)
        results.append(row)
        console.print(f"  {name:11s} failed probes {row['failed_probes']}/{row['probes']}  missed {row['missed']}"
                      f"/{requests} {by_why}  mean p99 {row['mean_p99_ms']} ms  CPU ms/request "
                      f"{row['cpu_ms_per_request']}  GC {row.get('broker_gc_ms')} ms")
    order = rank(results)
    best = next(r for r in results if r["variant"] == order[0])
    summary: dict[str, Any] = {"best": order[0], "ranking": order, "default": default,
                               "default_is_best": default == order[0], "topics_left": topics_left,
                               "best_missed_share": round(best["missed"] / best["requests"], 5) if best["requests"] else None}
    for r in results:
        summary[f"{r['variant']}_missed"] = r["missed"]
        summary[f"{r['variant']}_failed_probes"] = r["failed_probes"]
        summary[f"{r['variant']}_broker_cpu_ms_per_request"] = r["cpu_ms_per_request"].get("broker")
    console.print(f"summary: {summary}  ({time.perf_counter() - t_start:.0f} s)")
    shutil.rmtree(work, ignore_errors=True)
    return {"name": "broker-jvm", "machine": machine_info(),
            "config": {"quick": quick, "variants": {n: list(variants[n]) for n in names}, "default": default,
                       "model": w.title, "slo_ms": 50, "arrivals": "uniform", "rates_rps": rates, "rounds": rounds,
                       "probe_seconds": base_s, "min_requests_per_probe": min_req, "probe_max_s": probe_max_s,
                       "target": P.TARGET,
                       "order": "each round, each rate: the same trace through every option set's broker in turn, "
                                "the order rotated by one each round"},
            "results": results, "probes": probes, "summary": summary}


def _gc_of(pids: dict[str, int | None]) -> dict[str, float] | None:
    """:func:`gc_totals` of the broker in ``pids`` (None without one)."""
    broker = pids.get("broker")
    return None if broker is None else gc_totals(broker)
