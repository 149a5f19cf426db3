"""The saved record of an embedded run (``vidnexus run|demo … --save FILE.json``): one JSON document
with what ran, where, and what it measured, so that a figure quoted in the docs names the file it
comes from (committed as ``bench/results/demo-APP-DATE.json``).

:func:`run_record` is pure: it takes the run's data (the machine and the git state gathered by the
caller) and returns the document; the CLI writes it.

Example:
    >>> from vidnexus.config import Settings
    >>> doc = run_record(RunResult("hud", published=2, status={"ok": 2}), command="vidnexus run hud",
    ...                  started_wall=0.0, duration_s=3.0, machine={"cores": 2}, git=None, settings=Settings(),
    ...                  options={})
    >>> doc["schema"], doc["started_utc"], doc["result"]["accounted"] == doc["result"]["published"]
    ('vidnexus.run/1', '1970-01-01T00:00:00Z', True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Mapping, Sequence

from vidnexus.config import Settings
from vidnexus.contracts.plans import EpochPlan
from vidnexus.contracts.profile import Profile
from vidnexus.roles.embedded import RunResult

__all__ = ["SCHEMA", "QueryRows", "DemoOutput", "run_record"]

SCHEMA = "vidnexus.run/1"
"""Bumped when a key changes meaning or goes away (new keys keep the version)."""

# StreamStatus fields on the run's monotonic clock: meaningless outside the process.
_PROCESS_TIMES = ("started", "last_publish")


@dataclass(frozen=True)
class QueryRows:
    """One SQL query a demo printed, with its result."""

    title: str
    sql: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]


@dataclass(frozen=True)
class DemoOutput:
    """What ``vidnexus demo`` printed besides the run's own report: the models' preparation
    (``prepare_s``: seconds it took, training included on a first run), the SQL results and the
    summary lines (plain text) with their figures."""

    name: str
    prepare: dict[str, str] = field(default_factory=dict)
    prepare_s: float = 0.0
    queries: tuple[QueryRows, ...] = ()
    summary: tuple[str, ...] = ()
    figures: dict[str, Any] = field(default_factory=dict)


def run_record(result: RunResult, *, command: str, started_wall: float, duration_s: float,
               machine: Mapping[str, Any], git: Mapping[str, Any] | None, settings: Settings,
               options: Mapping[str, Any],
               report: Sequence[str] = (), tables: Mapping[str, int] | None = None,
               demo: DemoOutput | None = None) -> dict[str, Any]:
    """The JSON document of one embedded run.

    Args:
        result: what :meth:`~vidnexus.roles.embedded.Embedded.run` returned.
        command: the command line as typed, starting with ``vidnexus``.
        started_wall: when the command started (seconds since the epoch).
        duration_s: how long the command had run when the record was made (model preparation and
            loading included; ``result.elapsed_s`` is the run itself).
        machine: platform, Python, CPU model and count, memory (``machine_info()``).
        git: ``{"commit": …, "dirty": …}`` of the package's checkout; None: key left out.
        settings: the effective settings (only those that shape the run are recorded).
        options: the command's options as given (``--streams``, ``--fps``, …).
        report: the run's report lines as printed (plain text).
        tables: rows per app table at the end.
        demo: for ``vidnexus demo``, its SQL results and summary.
    """
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "kind": "demo" if demo is not None else "run",
        "command": command,
        "started_utc": datetime.fromtimestamp(started_wall, timezone.utc).isoformat(timespec="seconds")
        .replace("+00:00", "Z"),
        "duration_s": round(duration_s, 2),
        "machine": {k: _plain(v) for k, v in machine.items() if k != "command"},
    }
    if git is not None:
        doc["git"] = {k: _plain(v) for k, v in git.items()}
    doc["settings"] = {
        "app": result.app,
        "slo_ms": result.slo_ms,
        "bus": settings.bus,
        "store": settings.store,
        "app_switches": {"game_specialize": settings.game_specialize, "traffic_detector": settings.traffic_detector,
                         "dance_keypoints": settings.dance_keypoints, "dance_pose": settings.dance_pose},
        "options": {k: _plain(v) for k, v in options.items()},
        "streams": [{"name": s.name, "url": s.url, "fps": s.fps, "every_n": s.every_n,
                     "keyframes_only": s.keyframes_only, "realtime": s.realtime, "speed": s.speed,
                     "until_s": s.until_s, "backfill": s.backfill}
                    for s in result.specs],
    }
    doc["result"] = _result(result, report, tables or {})
    if demo is not None:
        doc["demo"] = {
            "name": demo.name,
            "prepare": dict(demo.prepare),
            "prepare_s": round(demo.prepare_s, 2),
            "queries": [{"title": q.title, "sql": q.sql.strip(), "columns": list(q.columns),
                         "rows": [[_plain(v) for v in r] for r in q.rows]} for q in demo.queries],
            "summary": list(demo.summary),
            "figures": _plain(demo.figures),
        }
    return doc


def _result(r: RunResult, report: Sequence[str], tables: Mapping[str, int]) -> dict[str, Any]:
    return {
        "elapsed_s": round(r.elapsed_s, 2),
        "published": r.published,
        "processed": r.processed,
        "accounted": r.accounted,
        "all_accounted": r.accounted == r.published,
        "status": dict(sorted(r.status.items())),
        "reasons": dict(sorted(r.reasons.items())),
        "per_stream": [{"stream": s.stream, "frames": s.frames, "status": dict(sorted(s.status.items())),
                        "ok_within_slo": s.ok_within_slo, "ok_p50_ms": s.ok_p50_ms, "ok_p99_ms": s.ok_p99_ms}
                       for s in r.per_stream],
        "ingest": [{k: _plain(v) for k, v in s.as_dict().items() if k not in _PROCESS_TIMES}
                   for s in sorted(r.streams, key=lambda s: s.name)],
        "executor": [_plain(s) for s in r.executor_stats],
        "models": {m: _profile(p) for m, p in sorted(r.profiles.items())},
        "stage_slos_ms": dict(r.stage_slos_ms),
        "plans": [_plan(p, r.app) for p in r.plans],
        "tables": dict(sorted(tables.items())),
        "report": list(report),
    }


def _profile(p: Profile) -> dict[str, Any]:
    """ℓ(1), the fit ℓ(b) = αb + β and the mean latency of each measured batch size, in ms."""
    alpha, beta = p.fit()
    return {"l1_ms": round(p.latency(1) * 1000, 3), "alpha_ms": round(alpha * 1000, 4),
            "beta_ms": round(beta * 1000, 4), "max_batch": p.max_batch,
            "latency_ms": {str(b): round(m * 1000, 3) for b, m in zip(p.sizes, p.mean_s)}}


def _plan(p: EpochPlan, app: str) -> dict[str, Any]:
    sp = p.splits.get(app)
    split = None if sp is None else {"ok": sp.ok, "reason": sp.reason, "budgets_ms": sp.budgets_ms,
                                     "even_ms": sp.even_ms, "gamma": sp.gamma, "gain": sp.gain}
    return {"generation": p.generation, "epoch": p.epoch, "devices": p.devices, "moved": p.moved,
            "assignments": p.assignments, "infeasible": [list(i) for i in p.infeasible],
            "retired": list(p.retired), "split": _plain(split), "variants": dict(p.variants.get(app, {}))}


def _plain(v: Any) -> Any:
    """A JSON value: non-finite floats become null, tuples lists, anything else unknown its text.

    Example:
        >>> _plain({"a": (1, float("nan")), "b": {2: 0.5}})
        {'a': [1, None], 'b': {'2': 0.5}}
    """
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, Mapping):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, set, frozenset)):
        return [_plain(x) for x in v]
    return str(v)
