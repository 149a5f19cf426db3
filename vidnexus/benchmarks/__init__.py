"""Benchmarks behind ``vidnexus bench NAME``: each prints a table and returns the JSON document
``{"name", "machine", "config", "results", "summary"}``. Results of reported runs are kept in the
repository's ``bench/results/``."""

from __future__ import annotations

import importlib
from typing import Any

from vidnexus.errors import VidnexusError

__all__ = ["run_benchmark", "BENCHMARKS"]

BENCHMARKS: dict[str, str] = {
    "drop-policies": "vidnexus.benchmarks.drop_policies",
    "prefix": "vidnexus.benchmarks.prefix_bench",
    "multiplex": "vidnexus.benchmarks.multiplex",
    "scheduler": "vidnexus.benchmarks.scheduler_bench",
    "cluster": "vidnexus.benchmarks.cluster_bench",
    "latency-split": "vidnexus.benchmarks.latency_split_bench",
    "ingest": "vidnexus.benchmarks.ingest_bench",
    "runtimes": "vidnexus.benchmarks.runtimes",
    "weg": "vidnexus.benchmarks.weg_bench",
    "peers": "vidnexus.benchmarks.peers",
    "peers-real": "vidnexus.benchmarks.peers_real",
    "sink": "vidnexus.benchmarks.sink_bench",
    "hop": "vidnexus.benchmarks.hop",
    "broker-jvm": "vidnexus.benchmarks.broker_jvm",
    "soak": "vidnexus.benchmarks.soak",
    "preprocess": "vidnexus.benchmarks.preprocess_bench",
    "apps": "vidnexus.benchmarks.apps_bench",
    "apps-real": "vidnexus.benchmarks.apps_real",
    "colocate": "vidnexus.benchmarks.colocate",
    "layerwise": "vidnexus.benchmarks.layerwise_bench",
    "variants": "vidnexus.benchmarks.variants_bench",
    "device": "vidnexus.benchmarks.device_bench",
}
"""Benchmark name → module with ``run(quick, console)`` (imported only when that benchmark runs)."""


def run_benchmark(name: str, *, quick: bool, console: Any) -> dict[str, Any]:
    try:
        module = BENCHMARKS[name]
    except KeyError:
        raise VidnexusError(f"unknown benchmark {name!r}; available: {', '.join(sorted(BENCHMARKS))}") from None
    result: dict[str, Any] = importlib.import_module(module).run(quick=quick, console=console)
    return result
