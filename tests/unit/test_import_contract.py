"""Decisions are pure: policy modules import no torch, kafka, av, faust, chdb, asyncio, and only
vidnexus/clock.py reads the system clock (STYLE.md)."""

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "vidnexus"

PURE = [
    "gpu_executor/profile.py",
    "gpu_executor/batching.py",
    "gpu_executor/early_drop.py",
    "gpu_executor/lazy_drop.py",
    "gpu_executor/fifo.py",
    "gpu_executor/policies.py",
    "gpu_executor/backend.py",
    "gpu_executor/squishy.py",
    "gpu_executor/latency_split.py",
    "gpu_executor/query_analysis.py",
    "gpu_executor/weg.py",
    "gpu_executor/epochs.py",
    "gpu_executor/baselines.py",
    "streams/sampling.py",
    "streams/spec.py",
    "streams/media_verdicts.py",
    "errors.py",
    "operators/windows.py",
    "operators/tracking.py",
    "sim/loadgen.py",
    "sim/simulator.py",
    "sim/cluster.py",
]
FORBIDDEN = {"torch", "torchvision", "kafka", "aiokafka", "av", "faust", "chdb", "clickhouse_driver",
             "asyncio", "time", "threading", "cv2", "numpy"}


def imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("rel", PURE)
def test_policy_modules_are_pure(rel):
    bad = imported_roots(PKG / rel) & FORBIDDEN
    assert not bad, f"{rel} imports {sorted(bad)}"


def test_pure_modules_import_only_pure_vidnexus_modules():
    pure_mods = {"vidnexus." + p[:-3].replace("/", ".") for p in PURE}
    for rel in PURE:
        tree = ast.parse((PKG / rel).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("vidnexus"):
                assert node.module in pure_mods, f"{rel} imports {node.module}"


def test_only_clock_reads_the_system_clock_in_the_core():
    calls = ("time.time(", "time.monotonic(", "time.perf_counter(", "datetime.now(")
    allowed = {"clock.py", "services/base.py", "connectors/memory_bus.py", "connectors/kafka_bus.py",
               "connectors/sink.py", "gpu_executor/profiler.py", "training/digits.py",
               "training/glyphs.py", "training/specialize.py",
               "apps/traffic/models.py", "apps/dance/models.py"}  # training reports its own wall time
    offenders = []
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG).as_posix()
        if rel in allowed or rel.startswith("benchmarks/"):  # benchmarks measure wall time
            continue
        text = path.read_text()
        if any(c in text for c in calls):
            offenders.append(rel)
    assert offenders == []
