"""The architecture, checked on every module's parse tree (imports anywhere in the file count,
also those inside functions):

- packages import only the packages below them (``ALLOWED`` is the layer map of docs/architecture.md,
  a DAG); in particular the data plane (streams, gpu_executor, operators) never imports control/,
  and nothing below apps/ imports apps/;
- no import cycles between modules;
- decisions are pure: the policy modules import no torch, Kafka client, PyAV, faust, ClickHouse
  client, asyncio, threading, time, OpenCV or numpy, and only other pure modules of vidnexus;
- only vidnexus/clock.py reads the system clock; the exceptions are listed with their reason.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "vidnexus"

_BASE = {"clock", "config", "errors"}
_CORE = _BASE | {"contracts"}
_IO = _CORE | {"connectors"}
_PLANES = _IO | {"streams", "gpu_executor", "training", "operators", "specialization", "control", "sim",
                 "sql_allowlist", "sql_guard", "sql_endpoint", "services"}

ALLOWED: dict[str, set[str]] = {
    "clock": set(),
    "errors": set(),
    "config": {"errors"},
    "contracts": {"errors", "config"},
    "connectors": _CORE,
    "services": _BASE,
    "streams": _IO,
    "gpu_executor": _IO,
    "control": {"contracts", "errors"},  # pure: it reads plans' inputs as contracts, writes a plan
    "sql_allowlist": set(),
    "sql_guard": _IO | {"sql_allowlist"},
    "sql_endpoint": _IO | {"sql_guard", "sql_allowlist"},
    "training": _IO | {"gpu_executor", "streams"},
    "operators": _IO | {"gpu_executor", "streams"},
    "specialization": _IO | {"gpu_executor", "operators", "training"},
    "sim": _CORE | {"gpu_executor", "control"},
    "apps": _PLANES - {"control", "sim", "services", "sql_guard", "sql_endpoint", "sql_allowlist"},
    "testing": _PLANES | {"apps"},
    "roles": _PLANES | {"apps"},
    "benchmarks": _PLANES | {"apps", "roles", "testing"},
    "cli": _PLANES | {"apps", "roles", "benchmarks"},
    "__init__": _PLANES | {"apps", "roles"},
    "__main__": {"cli"},
}

PURE = [
    "errors.py",
    "contracts/profile.py", "contracts/sessions.py", "contracts/replies.py", "contracts/codec.py",
    "contracts/plans.py", "contracts/stats.py", "contracts/reports.py", "contracts/topics.py",
    "gpu_executor/batching.py", "gpu_executor/policies.py", "gpu_executor/early_drop.py",
    "gpu_executor/lazy_drop.py", "gpu_executor/fifo.py", "gpu_executor/backend.py", "gpu_executor/routing.py", "gpu_executor/background.py", "gpu_executor/probing.py",
    "control/squishy.py", "control/packing.py", "control/latency_split.py", "control/query_analysis.py", "control/epochs.py",
    "control/baselines.py", "control/plans.py", "control/scheduler.py", "control/piccolo.py", "control/fleet.py",
    "control/variants.py",
    "specialization/weg.py",
    "streams/sampling.py", "streams/spec.py", "streams/media_verdicts.py",
    "operators/windows.py", "operators/tracking.py", "operators/frame_version.py", "operators/zones.py",
    "sim/loadgen.py", "sim/simulator.py", "sim/cluster.py", "sim/day.py",
    "roles/summary.py",
    "sql_allowlist.py",
]
FORBIDDEN = {"torch", "torchvision", "kafka", "aiokafka", "confluent_kafka", "av", "faust", "chdb",
             "clickhouse_driver", "asyncio", "time", "threading", "cv2", "numpy"}

# Reading the system clock outside vidnexus/clock.py, and why it is right there.
CLOCK_READERS = {
    "gpu_executor/profiler.py": "measures a model's latency: perf_counter around the device call",
    "gpu_executor/loading.py": "times one request and each model's start-up for the executor's progress lines (estimates)",
    "training/glyphs.py": "reports how long training took (wall time in the models' report)",
    "training/variants.py": "measures how long loading a variant's weights takes (the cost of switching to it)",
    "specialization/training.py": "measures how long WEG's retraining takes (the specializer's cost)",
    "services/base.py": "supervises local service processes: waits for ports with timeouts",
    "connectors/kafka_bus.py": "waits for topic metadata with the client's own timeout",
    "connectors/confluent_bus.py": "waits for topic metadata; rate-limits librdkafka's log lines",
}
_CLOCK_CALLS = {"time", "monotonic", "perf_counter", "time_ns", "monotonic_ns", "perf_counter_ns", "sleep",
                "now", "utcnow"}


def modules() -> dict[str, ast.Module]:
    return {p.relative_to(PKG).as_posix(): ast.parse(p.read_text()) for p in sorted(PKG.rglob("*.py"))}


MODULES = modules()


def _top(rel: str) -> str:
    return rel.split("/")[0].removesuffix(".py")


def _vnx_imports(tree: ast.Module) -> list[str]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module.startswith("vidnexus"):
            out.append(node.module)
            out.extend(f"{node.module}.{a.name}" for a in node.names)  # `from vidnexus.x import module`
        elif isinstance(node, ast.Import):
            out.extend(a.name for a in node.names if a.name.startswith("vidnexus"))
    return out


def test_the_layer_map_is_a_dag():
    state: dict[str, int] = {}

    def visit(n: str, path: tuple[str, ...]) -> None:
        assert state.get(n) != 1, f"the layer map has a cycle: {' -> '.join(path + (n,))}"
        if state.get(n) == 2:
            return
        state[n] = 1
        for m in ALLOWED[n]:
            visit(m, path + (n,))
        state[n] = 2

    for n in ALLOWED:
        visit(n, ())


@pytest.mark.parametrize("rel", sorted(MODULES))
def test_imports_go_down_the_layers(rel):
    top = _top(rel)
    assert top in ALLOWED, f"{rel}: package {top} is not in the layer map (add it to ALLOWED and docs/architecture.md)"
    bad = set()
    for m in _vnx_imports(MODULES[rel]):
        parts = m.split(".")
        target = parts[1] if len(parts) > 1 and parts[1] in ALLOWED else "__init__"  # `from vidnexus import X`
        if target not in ALLOWED[top] | {top}:
            bad.add(m)
    bad = sorted(bad)
    assert not bad, f"{rel} ({top}) imports {bad}, above or beside it: allowed {sorted(ALLOWED[top])}"


def _module_of(name: str) -> str | None:
    parts = name.split(".")[1:]
    for k in range(len(parts), 0, -1):
        rel = "/".join(parts[:k])
        if f"{rel}.py" in MODULES:
            return f"{rel}.py"
        if f"{rel}/__init__.py" in MODULES:
            return f"{rel}/__init__.py"
    return None


def test_no_import_cycles():
    graph: dict[str, set[str]] = defaultdict(set)
    for rel, tree in MODULES.items():
        for name in _vnx_imports(tree):
            m = _module_of(name)
            if m is not None and m != rel and not m.endswith("__init__.py"):
                graph[rel].add(m)
    state: dict[str, int] = {}
    cycles: list[str] = []

    def visit(n: str, path: list[str]) -> None:
        if state.get(n) == 1:
            cycles.append(" -> ".join(path[path.index(n):] + [n]))
            return
        if state.get(n) == 2:
            return
        state[n] = 1
        for m in sorted(graph[n]):
            visit(m, path + [n])
        state[n] = 2

    for n in sorted(MODULES):
        visit(n, [])
    assert cycles == []


@pytest.mark.parametrize("rel", PURE)
def test_policy_modules_are_pure(rel):
    roots = set()
    for node in ast.walk(MODULES[rel]):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    assert not roots & FORBIDDEN, f"{rel} imports {sorted(roots & FORBIDDEN)}"
    pure = {"vidnexus." + p[:-3].replace("/", ".") for p in PURE}
    impure = [m for m in _vnx_imports(MODULES[rel]) if _module_of(m) is not None
              and "vidnexus." + _module_of(m)[:-3].replace("/", ".") not in pure]
    assert not impure, f"{rel} imports {impure}, which are not pure"


def _clock_reads(tree: ast.Module) -> list[str]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in _CLOCK_CALLS and isinstance(node.value, ast.Name) \
                and node.value.id in ("time", "datetime", "dt"):
            out.append(f"{node.value.id}.{node.attr} (line {node.lineno})")
        elif isinstance(node, ast.ImportFrom) and node.module in ("time",) and any(
                a.name in _CLOCK_CALLS for a in node.names):
            out.append(f"from time import … (line {node.lineno})")
    return out


def test_only_clock_reads_the_system_clock():
    offenders = {rel: reads for rel, tree in MODULES.items()
                 if rel != "clock.py" and rel not in CLOCK_READERS and not rel.startswith("benchmarks/")
                 and (reads := _clock_reads(tree))}
    assert offenders == {}, "read time through a Clock (or `now`), or list the module with its reason"


def test_the_clock_exceptions_still_read_the_clock():
    stale = [rel for rel in CLOCK_READERS if rel not in MODULES or not _clock_reads(MODULES[rel])]
    assert stale == []
