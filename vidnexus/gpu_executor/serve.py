"""``vidnexus executor``: build runners for zoo models, profile them, serve sessions over the bus,
publish stats to the stats topic and (optionally) a Prometheus endpoint."""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from vidnexus.clock import MonotonicClock, wall_time
from vidnexus.config import Settings
from vidnexus.connectors.factory import open_bus
from vidnexus.errors import ConfigError
from vidnexus.gpu_executor.backend import SessionSpec
from vidnexus.gpu_executor.executor import Executor
from vidnexus.gpu_executor.metrics import ExecutorMetrics
from vidnexus.gpu_executor.service import ExecutorService, session_name

__all__ = ["SessionArg", "parse_session", "build_runner", "prepare_models", "prefix_batching", "serve"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SessionArg:
    model: str
    slo_ms: float

    @property
    def session_id(self) -> str:
        return session_name(self.model, self.slo_ms)


def parse_session(text: str) -> SessionArg:
    """``MODEL:SLO_MS`` → SessionArg (e.g. ``resnet18:100``)."""
    model, sep, slo = text.partition(":")
    try:
        slo_ms = float(slo)
    except ValueError:
        slo_ms = -1.0
    if not sep or not model or slo_ms <= 0:
        raise ConfigError(f"--session {text!r}: expected MODEL:SLO_MS with SLO_MS > 0, e.g. resnet18:100")
    return SessionArg(model, slo_ms)


def build_runner(settings: Settings, model: str, device: str, weights: Path | None) -> Any:
    """A TorchRunner for a repository model; real weights from a local state_dict file when given."""
    from dataclasses import replace

    from vidnexus.gpu_executor.repository import ModelRepository
    from vidnexus.gpu_executor.runner import TorchRunner

    repo = ModelRepository(settings.data_dir / "models")
    spec = repo.get(model)
    if weights is not None:
        spec = replace(spec, weights=str(weights))
    module = repo.load(spec, device)
    detection = spec.task in ("detect", "pose")
    post: Callable[[Any], Any] = (lambda r: {k: v.tolist() for k, v in r.items()}) if detection else (lambda t: t.tolist())
    return TorchRunner(model, module, device, postprocess=post, list_input=detection), spec


def prepare_models(
    settings: Settings, models: list[str], device: str = "cpu", weights: dict[str, Path] | None = None,
    loaders: dict[str, Callable[[Settings], Any]] | None = None,
    shapes: dict[str, tuple[int, ...]] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Runners and profiles for ``models``, every batch size warmed up.

    A model comes from the repository (with local ``weights`` if given), or from ``loaders[name]``
    (a function returning a torch module, with its input shape in ``shapes[name]``). Profiles are
    measured once per (model, device) and cached under the data directory."""
    import numpy as np

    from vidnexus.gpu_executor.profiler import load_profile, profile_runner, save_profile
    from vidnexus.gpu_executor.runner import TorchRunner

    runners: dict[str, Any] = {}
    profiles: dict[str, Any] = {}
    for name in dict.fromkeys(models):
        if loaders and name in loaders:
            module = loaders[name](settings)
            runners[name] = TorchRunner(name, module, device, postprocess=lambda t: t.tolist())
            shape = (shapes or {})[name]
        else:
            runners[name], spec = build_runner(settings, name, device, (weights or {}).get(name))
            shape = spec.input_shape
        x = np.zeros(shape, np.float32)
        prof = load_profile(settings.data_dir / "profiles", name, device)
        if prof is None:
            prof, _ = profile_runner(runners[name], lambda x=x: x, [1, 2, 4, 8], repeats=2, warmup=1)
            save_profile(settings.data_dir / "profiles", name, device, prof)
        profiles[name] = prof
        # The first batch of each new size builds kernels (100+ ms on a CPU): do it before serving,
        # for every batch size a plan may choose (plans stay within the profile).
        for b in range(1, prof.max_batch + 1):
            runners[name]([x] * b)
    return runners, profiles


def prefix_batching(runners: dict[str, Any], device: str = "cpu") -> tuple[dict[str, str], dict[str, Any]]:
    """Models among ``runners`` whose trunks are equal (structure and weights) → prefix groups and
    one :class:`~vidnexus.gpu_executor.prefix.PrefixRunner` per group (the trunk run once per merged
    batch, each model's head on its slice)."""
    from vidnexus.gpu_executor.prefix import PrefixRunner, detect_prefix_groups

    modules = {m: r.module for m, r in runners.items() if getattr(r, "module", None) is not None
               and not getattr(r, "list_input", False)}
    groups = detect_prefix_groups(modules)
    group_runners = {}
    for gid in set(groups.values()):
        members = {m: modules[m] for m, g in groups.items() if g == gid}
        group_runners[gid] = PrefixRunner.from_models(members, device)
        logger.info("prefix batching: %s share one trunk (%s)", sorted(members), gid)
    return groups, group_runners


def serve(settings: Settings, sessions: list[SessionArg], *, device: str = "cpu", policy: str = "early_drop",
          weights: dict[str, Path] | None = None, stats_every_s: float = 5.0,
          ready: Callable[[], None] | None = None, executor_id: str | None = None,
          follow_plans: bool = True, retire_after_epochs: int = 3) -> None:
    """Run until SIGTERM/SIGINT."""
    if not sessions:
        raise ConfigError("give at least one --session MODEL:SLO_MS")
    runners, profiles = prepare_models(settings, [s.model for s in sessions], device, weights)
    specs = [SessionSpec(s.session_id, s.model, s.slo_ms / 1000, policy=policy) for s in sessions]  # type: ignore[arg-type]
    registry = None
    if settings.metrics_port:
        from prometheus_client import CollectorRegistry, start_http_server

        registry = CollectorRegistry()
        start_http_server(settings.metrics_port, addr=settings.metrics_host, registry=registry)
    metrics = ExecutorMetrics(registry)
    clock = MonotonicClock()
    bus = open_bus(settings)
    groups, group_runners = prefix_batching(runners, device)
    executor = Executor(specs, runners, profiles, clock=clock, metrics=metrics, prefix_groups=groups,
                        group_runners=group_runners).start()
    service = ExecutorService(executor, bus, settings, clock=clock)
    stats_topic = settings.topic("stats")
    bus.create_topic(stats_topic, 1)
    stop = threading.Event()

    def on_signal(*_: Any) -> None:
        stop.set()
        service.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    import os
    import socket

    eid = executor_id or f"{socket.gethostname()}-{os.getpid()}"
    by_session = {sp.session_id: sp for sp in specs}
    static = set(by_session)  # sessions the executor was started with are never retired
    last_arrival: dict[str, float] = {}

    def report() -> None:
        last: dict[str, tuple[float, int]] = {}
        while not stop.wait(stats_every_s):
            now = clock.now()
            sessions_doc = []
            seen = {st["session"]: st for st in executor.stats()}
            for sid in list(by_session):  # every hosted session, also those that had no request yet
                st = seen.get(sid, {"session": sid, "arrivals": 0, "replies": 0, "drops": {}})
                t0, n0 = last.get(sid, (now - stats_every_s, 0))
                st["rate_recent"] = (st["arrivals"] - n0) / max(1e-3, now - t0)
                last[sid] = (now, st["arrivals"])
                if st["arrivals"] > n0 or sid not in last_arrival:
                    last_arrival[sid] = now
                st["origin"] = "static" if sid in static else "plan"
                st["idle_s"] = round(now - last_arrival[sid], 1)
                st["model"], st["slo_ms"] = by_session[sid].model, by_session[sid].slo_s * 1000
                sessions_doc.append(st)
            doc = {"ts": wall_time(), "executor": eid, "device": device, "targets": executor.targets(),
                   "serving": sorted(t.rsplit(".req.", 1)[-1] for t in service.topics),
                   "profiles": {m: p.to_dict() for m, p in executor.core.profiles().items()},
                   "sessions": sessions_doc}
            try:
                bus.publish(stats_topic, eid.encode(), json.dumps(doc, default=str).encode())
            except Exception as e:
                logger.warning("cannot publish stats: %s", e)

    def host(sid: str) -> None:
        """A plan gave this executor a session it does not host (e.g. a stage SLO from the latency
        split): create it, loading the model first when it is new here."""
        from vidnexus.gpu_executor.service import parse_session_name

        parsed = parse_session_name(sid)
        if parsed is None:
            logger.warning("plan names session %s, which is not MODEL-SLOms; ignored", sid)
            return
        model, slo_ms = parsed
        runner = prof = None
        if not executor.hosts_model(model):
            try:
                r, p = prepare_models(settings, [model], device, weights)
            except Exception as e:  # an unknown or broken model must not stop the executor
                logger.error("cannot load model %s for session %s: %s", model, sid, e)
                return
            runner, prof = r[model], p[model]
            logger.info("loaded model %s for session %s", model, sid)
        spec = SessionSpec(sid, model, slo_ms / 1000, policy=policy)  # type: ignore[arg-type]
        executor.add_session(spec, runner, prof)
        service.add_session(sid)
        by_session[sid] = spec

    def follow() -> None:
        """Apply the scheduler's plans: batch sizes, and which sessions' requests to consume."""
        from vidnexus.gpu_executor.plans import assignment_of
        from vidnexus.gpu_executor.scheduler import plan_documents

        unassigned: dict[str, int] = {}
        for doc in plan_documents(bus, settings, stop):
            mine = assignment_of(doc, eid)
            for sid in mine:
                if sid not in by_session:
                    host(sid)
            executor.set_targets(mine)
            service.set_sessions(list(mine))
            logger.info("plan epoch %d: serving %s", doc["epoch"], mine or "nothing")
            # Retire sessions plans created and no longer assign here (3 epochs in a row, so a
            # session moving between executors is not reloaded back and forth).
            for sid in [s for s in by_session if s not in static]:
                unassigned[sid] = 0 if sid in mine else unassigned.get(sid, 0) + 1
                if unassigned[sid] >= retire_after_epochs:
                    unloaded = executor.remove_session(sid)
                    service.remove_session(sid)
                    del by_session[sid], unassigned[sid]
                    print(f"executor: retired session {sid}" + (f", unloaded {', '.join(unloaded)}" if unloaded else ""),
                          file=sys.stderr, flush=True)

    threading.Thread(target=report, daemon=True, name="vnx-stats").start()
    if follow_plans:
        threading.Thread(target=follow, daemon=True, name="vnx-plans").start()
    # Long-lived startup objects (models, profiles) need no garbage collection: freeze them so
    # collections stay short while serving.
    import gc

    gc.collect()
    gc.freeze()
    if ready:
        ready()
    for gid in sorted(set(groups.values())):
        members = sorted(m for m, g in groups.items() if g == gid)
        print(f"executor: prefix batching: {', '.join(members)} share one trunk", file=sys.stderr, flush=True)
    try:
        service.run()
    finally:
        stop.set()
        executor.stop()
        bus.close()
