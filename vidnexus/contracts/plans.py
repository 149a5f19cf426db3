"""The plan the scheduler publishes each epoch on the compacted control topic (key ``plan``), and
what executors and workers read from it.

A plan is ordered by ``(generation, epoch)``: ``generation`` is when the scheduler process started
(wall-clock ms), so the plans of a restarted scheduler supersede the old one's at once, whatever
epoch the old one had reached.

Example:
    >>> p = EpochPlan(generation=1, epoch=7, ts=0.0, assignments={"ex-a": {"lenet5-100ms": 16}},
    ...               splits={"hud": LatencySplit(True, budgets_ms={"lenet5": 100.0})})
    >>> p.assignment_of("ex-a"), p.assignment_of("ex-b")
    ({'lenet5-100ms': 16}, {})
    >>> p.split_to_adopt("hud")
    {'lenet5': 100.0}
    >>> decode_plan(encode_plan(p)) == p, p.supersedes(EpochPlan(0, 99, 0.0))
    (True, True)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vidnexus.contracts.codec import from_json, to_json
from vidnexus.contracts.sessions import SessionKey
from vidnexus.errors import CodecError

__all__ = ["LatencySplit", "EpochPlan", "encode_plan", "decode_plan", "PLAN_VERSION"]

PLAN_VERSION = 1


@dataclass(frozen=True)
class LatencySplit:
    """An app's SLO split over its DNN stages (query analysis), or why there is none yet."""

    ok: bool
    reason: str = ""
    budgets_ms: dict[str, float] = field(default_factory=dict)
    even_ms: dict[str, float] = field(default_factory=dict)
    gamma: dict[str, float] = field(default_factory=dict)
    gain: float | None = None
    """Throughput of this split over the even split (None: unbounded)."""
    reserve_ms: dict[str, float] = field(default_factory=dict)
    """What the split reserved outside the executor before dividing the SLO (ms): per stage its
    bus round trip and the CPU steps after it, under ``frames`` the CPU steps before the first
    stage and the rows' encoding (:class:`~vidnexus.contracts.reports.Overheads`). Absent in
    an older scheduler's plan: nothing reserved."""


@dataclass(frozen=True)
class EpochPlan:
    """One epoch's plan."""

    generation: int
    epoch: int
    ts: float
    assignments: dict[str, dict[str, int]] = field(default_factory=dict)
    """Executor id → session → batch size."""
    routing: dict[str, dict[str, float]] = field(default_factory=dict)
    """Session → executor id → planned requests/s."""
    infeasible: tuple[tuple[str, str], ...] = ()
    """(session, reason) the planner could not place as asked."""
    moved: int = 0
    devices: int = 0
    rates: dict[str, float] = field(default_factory=dict)
    splits: dict[str, LatencySplit] = field(default_factory=dict)
    executors: tuple[str, ...] = ()
    retired: tuple[str, ...] = ()
    """Sessions a plan created that are idle and no longer assigned: executors retire them."""
    variants: dict[str, dict[str, str]] = field(default_factory=dict)
    """App → task → the variant (a repository model) that serves it this epoch (MCDNN's choice
    under the task's budget; :mod:`vidnexus.control.variants`). Absent in an older plan: none."""
    gone: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Session → executors that plans routed it to recently and that are no longer live: its
    executors now also read those executors' routed topics, where clients may have sent requests
    before the plans moved the session (an executor restarted under a new id never saw the old
    one in a plan). Absent in an older plan: none."""

    def supersedes(self, other: "EpochPlan | None") -> bool:
        return other is None or (self.generation, self.epoch) > (other.generation, other.epoch)

    def assignment_of(self, executor_id: str) -> dict[str, int]:
        """The sessions (→ batch size) this plan gives one executor."""
        return dict(self.assignments.get(executor_id, {}))

    def served(self) -> set[str]:
        """Every session some executor is assigned."""
        return {s for per in self.assignments.values() for s in per}

    def variants_to_adopt(self, app: str) -> dict[str, str]:
        """``app``'s task → variant, for the variants some executor is assigned (switching earlier
        would send requests nobody consumes; the others keep what the worker sends now)."""
        hosted = {s.rpartition("-")[0] for s in self.served()}
        return {t: m for t, m in self.variants.get(app, {}).items() if m in hosted}

    def split_to_adopt(self, app: str) -> dict[str, float] | None:
        """``app``'s stage SLOs, once every stage's session is assigned to an executor (switching
        earlier would send requests nobody consumes); None otherwise."""
        sp = self.splits.get(app)
        if sp is None or not sp.ok:
            return None
        served = self.served()
        chosen = self.variants.get(app, {})
        if any(str(SessionKey(chosen.get(m, m), b)) not in served for m, b in sp.budgets_ms.items()):
            return None
        return dict(sp.budgets_ms)


def encode_plan(p: EpochPlan) -> bytes:
    return to_json("plan", PLAN_VERSION, {
        "generation": p.generation, "epoch": p.epoch, "ts": p.ts, "assignments": p.assignments,
        "routing": p.routing, "infeasible": [list(x) for x in p.infeasible], "moved": p.moved,
        "devices": p.devices, "rates": p.rates, "executors": list(p.executors), "retired": list(p.retired),
        "variants": p.variants, "gone": {sid: list(es) for sid, es in p.gone.items()},
        "splits": {a: {"ok": s.ok, "reason": s.reason, "budgets_ms": s.budgets_ms, "even_ms": s.even_ms,
                       "gamma": s.gamma, "gain": s.gain, "reserve_ms": s.reserve_ms} for a, s in p.splits.items()}})


def decode_plan(raw: bytes) -> EpochPlan:
    """Raises CodecError on a malformed or unknown document."""
    d: dict[str, Any] = from_json(raw, "plan", PLAN_VERSION)
    try:
        splits = {str(a): LatencySplit(bool(s["ok"]), str(s.get("reason", "")),
                                       {str(k): float(v) for k, v in s.get("budgets_ms", {}).items()},
                                       {str(k): float(v) for k, v in s.get("even_ms", {}).items()},
                                       {str(k): float(v) for k, v in s.get("gamma", {}).items()},
                                       None if s.get("gain") is None else float(s["gain"]),
                                       {str(k): float(v) for k, v in s.get("reserve_ms", {}).items()})
                  for a, s in d.get("splits", {}).items()}
        return EpochPlan(
            int(d["generation"]), int(d["epoch"]), float(d["ts"]),
            {str(e): {str(s): int(b) for s, b in per.items()} for e, per in d.get("assignments", {}).items()},
            {str(s): {str(e): float(r) for e, r in per.items()} for s, per in d.get("routing", {}).items()},
            tuple((str(s), str(r)) for s, r in d.get("infeasible", [])), int(d.get("moved", 0)),
            int(d.get("devices", 0)), {str(s): float(r) for s, r in d.get("rates", {}).items()}, splits,
            tuple(str(e) for e in d.get("executors", [])), tuple(str(s) for s in d.get("retired", [])),
            {str(a): {str(t): str(m) for t, m in per.items()} for a, per in d.get("variants", {}).items()},
            {str(sid): tuple(str(e) for e in es) for sid, es in d.get("gone", {}).items()})
    except Exception as e:  # any shape the record may have: the role must go on
        raise CodecError(f"malformed plan document: {e}") from None
