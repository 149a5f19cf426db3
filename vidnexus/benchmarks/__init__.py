"""Benchmarks behind ``vidnexus bench NAME``: each prints a table and returns the JSON document
``{"name", "machine", "config", "results", "summary"}``. Results of reported runs are kept in the
repository's ``bench/results/``."""

from __future__ import annotations

from typing import Any, Callable

from vidnexus.errors import VidnexusError

__all__ = ["run_benchmark", "BENCHMARKS"]


def _drop_policies(quick: bool, console: Any) -> dict[str, Any]:
    from vidnexus.benchmarks.drop_policies import run

    return run(quick=quick, console=console)


def _prefix(quick: bool, console: Any) -> dict[str, Any]:
    from vidnexus.benchmarks.prefix_bench import run

    return run(quick=quick, console=console)


def _multiplex(quick: bool, console: Any) -> dict[str, Any]:
    from vidnexus.benchmarks.multiplex import run

    return run(quick=quick, console=console)


def _scheduler(quick: bool, console: Any) -> dict[str, Any]:
    from vidnexus.benchmarks.scheduler_bench import run

    return run(quick=quick, console=console)


def _latency_split(quick: bool, console: Any) -> dict[str, Any]:
    from vidnexus.benchmarks.latency_split_bench import run

    return run(quick=quick, console=console)


def _ingest(quick: bool, console: Any) -> dict[str, Any]:
    from vidnexus.benchmarks.ingest_bench import run

    return run(quick=quick, console=console)


BENCHMARKS: dict[str, Callable[[bool, Any], dict[str, Any]]] = {
    "ingest": _ingest,
    "latency-split": _latency_split,
    "scheduler": _scheduler,
    "drop-policies": _drop_policies,
    "prefix": _prefix,
    "multiplex": _multiplex,
}


def run_benchmark(name: str, *, quick: bool, console: Any) -> dict[str, Any]:
    try:
        fn = BENCHMARKS[name]
    except KeyError:
        raise VidnexusError(f"unknown benchmark {name!r}; available: {', '.join(sorted(BENCHMARKS))}") from None
    return fn(quick, console)
