"""``vidnexus scheduler``: the epoch loop of the control plane.

It reads executor stats from ``<prefix>.stats`` (per-session recent rates, SLOs, model profiles)
and app reports from ``<prefix>.apps`` (each app's DNN graph and measured fan-out, published by the
workers), and every epoch — ``epoch_s`` (default 30 s), earlier when a session's rate moves by more than
``change`` or the set of live executors changes, but never more often than ``min_epoch_s`` — runs
the incremental squishy planner, maps its nodes onto live executors, and publishes the plan to the
compacted control topic ``<prefix>.control`` (key ``plan``), with each app's latency split (query
analysis: budgets per DNN stage from the measured fan-out and the profiles, next to the even split). Executors apply it (batch sizes and the
request topics they consume). The decisions are the pure functions of ``squishy``, ``epochs`` and
``plans``; this module only moves documents.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any, Callable, Iterator

from vidnexus.clock import Clock, MonotonicClock, wall_time
from vidnexus.config import Settings
from vidnexus.connectors.bus import Bus
from vidnexus.gpu_executor.epochs import assign_devices, replan
from vidnexus.gpu_executor.plans import assign_executors, cover_idle_sessions, loads_from_stats, plan_document
from vidnexus.gpu_executor.query_analysis import analyze_merged, merge_reports
from vidnexus.gpu_executor.service import session_name
from vidnexus.gpu_executor.squishy import Plan, SessionLoad, plan

__all__ = ["SchedulerService", "control_topic", "plan_documents"]

logger = logging.getLogger(__name__)


def control_topic(settings: Settings) -> str:
    return settings.topic("control")


def plan_documents(bus: Bus, settings: Settings, stop: threading.Event) -> Iterator[dict[str, Any]]:
    """The plans published on the control topic, newest epoch only, until ``stop`` is set (for the
    roles that follow plans: executors and workers)."""
    bus.create_topic(control_topic(settings), 1, compacted=True)
    consumer = bus.subscribe([control_topic(settings)], group=None, from_beginning=True)
    seen = 0
    try:
        while not stop.is_set():
            for m in consumer.poll(timeout_s=0.5):
                try:
                    doc = json.loads(m.value)
                    epoch = int(doc.get("epoch", 0))
                except (ValueError, TypeError, AttributeError):
                    continue
                if epoch > seen:
                    seen = epoch
                    yield doc
    finally:
        consumer.close()


class SchedulerService:
    def __init__(self, bus: Bus, settings: Settings, *, epoch_s: float = 30.0, min_epoch_s: float = 10.0,
                 change: float = 0.5, stale_s: float | None = None, clock: Clock | None = None,
                 on_plan: Callable[[dict[str, Any]], None] | None = None, retire_idle_s: float = 120.0) -> None:
        if min_epoch_s > epoch_s:
            raise ValueError(f"min_epoch_s ({min_epoch_s}) must not exceed epoch_s ({epoch_s})")
        self.bus, self.settings = bus, settings
        self.epoch_s, self.min_epoch_s, self.change = epoch_s, min_epoch_s, change
        self.stale_s = stale_s if stale_s is not None else max(3.0, min_epoch_s)
        self.retire_idle_s = retire_idle_s
        self.clock = clock or MonotonicClock()
        self.on_plan = on_plan
        self.latest: dict[str, tuple[float, dict[str, Any]]] = {}
        self.app_reports: dict[str, tuple[float, dict[str, Any]]] = {}
        self.report_rates: dict[str, float] = {}
        self.plan: Plan | None = None
        self.epoch = 0
        self.last_epoch_at = -1e18
        self.last_rates: dict[str, float] = {}
        self.last_alive: set[str] = set()
        self.stop = threading.Event()
        bus.create_topic(control_topic(settings), 1, compacted=True)
        bus.create_topic(settings.topic("stats"), 1)
        bus.create_topic(settings.topic("apps"), 1)

    def alive(self, now: float) -> list[str]:
        return sorted(e for e, (t, _) in self.latest.items() if now - t <= self.stale_s)

    def due(self, now: float) -> bool:
        since = now - self.last_epoch_at
        if since >= self.epoch_s:
            return True
        if since < self.min_epoch_s:
            return False
        alive = set(self.alive(now))
        if alive != self.last_alive:
            return True
        loads, _ = loads_from_stats([self.latest[e][1] for e in alive])
        for s in loads:
            old = self.last_rates.get(s.session_id, 0.0)
            if abs(s.rate - old) > self.change * max(old, 1.0):
                return True
        return False

    def split_loads(self, now: float, loads: list[SessionLoad],
                    profiles: dict[str, Any]) -> tuple[list[SessionLoad], dict[str, Any]]:
        """Query analysis: each app's split (10 ms steps, so stage SLOs do not churn), and one
        session per (model, stage SLO) at the app's frame rate × the model's calls per frame, added
        to the executors' loads (their measured rate wins when they already serve it)."""
        fresh = {k: v for k, v in self.app_reports.items() if now - v[0] <= max(3 * self.stale_s, 15.0)}
        totals = merge_reports([d for _, d in fresh.values()])
        splits = analyze_merged(totals, profiles, epsilon_s=0.01)
        frame_rate: dict[str, float] = {}
        for key, (_, d) in fresh.items():
            frame_rate[d["app"]] = frame_rate.get(d["app"], 0.0) + self.report_rates.get(key, 0.0)
        merged = {s.session_id: s for s in loads}
        for app, sp in splits.items():
            if not sp.ok:
                continue
            frames = max(1, totals[app]["fanout"]["frames"])
            for m, budget in sp.budgets_ms.items():
                sid = session_name(m, budget)
                rate = frame_rate.get(app, 0.0) * totals[app]["fanout"]["calls"].get(m, 0) / frames
                old = merged.get(sid)
                merged[sid] = SessionLoad(sid, m, budget / 1000, max(rate, old.rate if old else 0.0))
        return sorted(merged.values(), key=lambda s: s.session_id), {a: s.to_dict() for a, s in splits.items()}

    def run_epoch(self, now: float) -> dict[str, Any]:
        alive = self.alive(now)
        loads, profiles = loads_from_stats([self.latest[e][1] for e in alive])
        loads, splits = self.split_loads(now, loads, profiles)
        prev = self.plan
        if prev is not None:
            from dataclasses import replace

            prev = replace(prev, nodes=tuple(n for n in prev.nodes if n.device_id in alive))
        new = replan(prev, loads, profiles) if prev is not None else assign_devices(plan(loads, profiles), "new")
        new, short = assign_executors(new, alive)
        self.epoch += 1
        doc = cover_idle_sessions(plan_document(new, self.epoch, wall_time(), short),
                                  {e: self.latest[e][1] for e in alive}, self.retire_idle_s)
        doc["rates"] = {s.session_id: round(s.rate, 2) for s in loads}
        doc["splits"] = splits
        doc["executors"] = alive
        self.bus.publish(control_topic(self.settings), b"plan", json.dumps(doc).encode())
        self.bus.flush()
        self.plan, self.last_epoch_at = new, now
        self.last_rates = {s.session_id: s.rate for s in loads}
        self.last_alive = set(alive)
        logger.info("epoch %d: %d sessions on %d executors, %d moved", self.epoch, len(loads), new.devices, new.moved)
        if self.on_plan:
            self.on_plan(doc)
        return doc

    def receive(self, topic: str, value: bytes) -> None:
        """Take one stats or app-report message."""
        try:
            doc = json.loads(value)
            if topic == self.settings.topic("apps"):
                key, now = f"{doc['app']}/{doc['worker']}", self.clock.now()
                prev = self.app_reports.get(key)
                if prev is not None and now > prev[0]:  # frames/s of this worker between two reports
                    df = int(doc["fanout"]["frames"]) - int(prev[1]["fanout"]["frames"])
                    self.report_rates[key] = max(0.0, df / (now - prev[0]))
                self.app_reports[key] = (now, doc)
            else:
                self.latest[str(doc["executor"])] = (self.clock.now(), doc)
        except (ValueError, KeyError, TypeError) as e:
            logger.warning("ignoring a malformed message on %s: %s", topic, e)

    def run(self) -> None:
        stats, apps = self.settings.topic("stats"), self.settings.topic("apps")
        consumer = self.bus.subscribe([stats, apps], group=None, from_beginning=False)
        try:
            while not self.stop.is_set():
                for m in consumer.poll(timeout_s=0.5):
                    self.receive(m.topic, m.value)
                now = self.clock.now()
                if self.latest and self.due(now):
                    self.run_epoch(now)
        finally:
            consumer.close()
