"""The executor role: serve (model, SLO) sessions from the bus on one device.

Requests arrive on each session's request topic in the ``<prefix>-executor`` consumer group, run
on the :class:`~vidnexus.gpu_executor.executor.Executor` (duty cycle, batching policy, early drop)
and are answered on their reply-to topics (:class:`~vidnexus.gpu_executor.service.ExecutorService`).
Every ``stats_every_s`` the role publishes :class:`~vidnexus.contracts.stats.ExecutorStats`; it
follows the scheduler's plans: the batch sizes, which sessions' requests it consumes, new sessions a
plan gives it (their model loaded first), and sessions a plan created and no longer assigns
(retired after ``retire_after_epochs`` plans and ``retire_after_s`` unassigned, their models unloaded).
"""

from __future__ import annotations

import logging
import math
import os
import re
import socket
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from vidnexus.clock import Clock, MonotonicClock
from vidnexus.config import Settings
from vidnexus.connectors.bus import Bus
from vidnexus.connectors.dead_letter import DeadLetters
from vidnexus.connectors.outage import Health, Outage
from vidnexus.contracts.plans import EpochPlan
from vidnexus.contracts.profile import Profile
from vidnexus.contracts.sessions import SessionKey
from vidnexus.contracts.stats import ExecutorStats, SessionStats, encode_stats
from vidnexus.contracts.topics import Topics
from vidnexus.errors import ConfigError, ConnectorError
from vidnexus.gpu_executor.backend import Order, SessionSpec
from vidnexus.gpu_executor.batching import PolicyName
from vidnexus.gpu_executor.executor import Executor
from vidnexus.gpu_executor.metrics import ExecutorMetrics
from vidnexus.gpu_executor.runner import device_memory_bytes, model_bytes
from vidnexus.gpu_executor.service import ExecutorService
from vidnexus.roles.heap import settle_heap
from vidnexus.roles.summary import PeriodicSummary
from vidnexus.roles.follow import PlanFollower

__all__ = ["ExecutorRole", "Models", "LoadModels", "repository", "repository_loader", "repository_inputs",
           "declared_prefixes"]

logger = logging.getLogger(__name__)

Models = tuple[dict[str, Any], dict[str, Profile]]
"""Runners and profiles by model name."""
LoadModels = Callable[[list[str]], Models]
"""Loads models by name (runners warmed up, profiles measured or cached)."""


def repository(settings: Settings) -> Any:
    """The model repository, with the apps' models in its catalogue: registered models in the
    ClickHouse server (``VNX_STORE=clickhouse``: shared by every role on every host, files
    included), else in the data directory's JSON registry (embedded, one process)."""
    from vidnexus.apps import model_catalog
    from vidnexus.gpu_executor.repository import ModelRepository

    store = None
    if settings.store == "clickhouse":
        from vidnexus.connectors.factory import open_store

        with _repo_lock:  # one connection per process and server, kept for the process's life
            store = _repo_stores.get(settings.clickhouse_url)
            if store is None:
                store = _repo_stores[settings.clickhouse_url] = open_store(settings)
    return ModelRepository(settings.data_dir / "models", extra=model_catalog(), store=store)


_repo_stores: dict[str, Any] = {}
_repo_lock = threading.Lock()


def repository_loader(settings: Settings, device: str, weights: dict[str, Path] | None = None,
                      progress: Callable[[str], None] | None = None, threads: int = 0,
                      cuda_graphs: bool = False) -> LoadModels:
    """Models from the repository (and the apps' own models), as ``vidnexus executor`` loads them;
    ``progress`` gets a line per step (loading, profiling, warming, ready); ``threads``: a model
    file's runtime threads (0: the runtime's default); ``cuda_graphs``: torch models on a CUDA
    device replay a CUDA graph per batch size."""
    from vidnexus.gpu_executor.loading import prepare_models

    return lambda names: prepare_models(settings, names, device, weights, repo=repository(settings), progress=progress,
                                        threads=threads, cuda_graphs=cuda_graphs)


def declared_prefixes(settings: Settings, models: Iterable[str]) -> dict[str, str]:
    """model → the prefix group it was registered with (``vidnexus models register --prefix``), for
    the repository's models among ``models`` (an app's own models declare none)."""
    repo = repository(settings)
    out = {}
    for m in models:
        try:
            prefix = repo.get(m).prefix
        except Exception:  # not a repository model
            continue
        if prefix:
            out[m] = prefix
    return out


def repository_inputs(settings: Settings) -> Callable[[str], Callable[[Any], Any] | None]:
    """Model name → the executor's per-request input conversion (run on its CPU pool: JPEG decode,
    the entry's ``prepare``, the shape check; :func:`~vidnexus.gpu_executor.preprocess.wire_input`),
    for every model the repository knows; None for a model it does not know (an app's own loader,
    a test's fake model), whose requests reach the runner as they came."""
    from vidnexus.errors import ModelError
    from vidnexus.gpu_executor.preprocess import ImageInput, wire_input

    repo = repository(settings)

    def inputs(model: str) -> Callable[[Any], Any] | None:
        try:
            spec = repo.get(model)
        except ModelError:
            return None
        entry = repo.catalog.get(model) if spec.builtin else None
        if entry is not None:
            prepare = entry.prepare
        elif spec.images is not None:  # a registered model whose clients send images
            c, h, w = spec.input_shape  # checked by ModelSpec: C×H×W
            prepare = ImageInput((c, h, w), spec.images)  # rgb, bgr or gray: checked by ModelSpec
        else:
            prepare = None
        return wire_input(model, spec.input_shape, prepare)

    return inputs


class ExecutorRole:
    """One executor. ``start`` loads the models and starts the device; ``step`` serves a poll of
    requests, publishes stats when due and applies a newer plan; ``run`` loops until stopped.

    Args:
        sessions: the sessions to serve from the start (never retired).
        load: how models are loaded (default: the repository, see :func:`repository_loader`).
        follow_plans: apply the scheduler's plans (off: serve ``sessions`` as started).
        inputs: model → its per-request input conversion, run on the executor's CPU pool (default:
            the repository's, :func:`repository_inputs`).
        order: which session's batch runs next on the device (``laxity`` or ``round_robin``,
            :class:`~vidnexus.gpu_executor.backend.DutyCycle`).
        allow_empty: start with no session (an embedded run of an app that calls no model).
        device_type, price: what the stats report for the planner to group executors by and to
            minimise Σ devices × price with (default: the device's name, 1.0).
        probe: measure larger batch sizes in idle time while a hosted session's SLO could use them
            (:mod:`~vidnexus.gpu_executor.probing`); the stats then carry the extended profile, so
            the scheduler's plans may use them. ``save_profile`` caches each extension.
        layerwise: model → layer groups, for models served layer-wise (a request joins a running
            batch at the next group boundary; :mod:`~vidnexus.gpu_executor.layerwise_server`),
            with ``layerwise_policy`` (``layerwise``: least total completion time;
            ``layerwise_tardy``: fewest late requests). Their groups are profiled at start.
    """

    def __init__(self, settings: Settings, sessions: Sequence[SessionKey], *, bus: Bus, clock: Clock | None = None,
                 device: str = "cpu", policy: PolicyName = "early_rescue", load: LoadModels | None = None,
                 executor_id: str | None = None, stats_every_s: float = 5.0, follow_plans: bool = True,
                 retire_after_epochs: int = 3, retire_after_s: float = 30.0, metrics: ExecutorMetrics | None = None, workers: int = 2,
                 inputs: Callable[[str], Callable[[Any], Any] | None] | None = None,
                 order: Order = "laxity", allow_empty: bool = False, device_type: str = "",
                 price: float = 1.0, probe: bool = False,
                 save_profile: Callable[[str, Profile], None] | None = None,
                 layerwise: Mapping[str, int] | None = None, layerwise_policy: str = "layerwise") -> None:
        if not sessions and not allow_empty:
            raise ConfigError("give at least one --session MODEL:SLO_MS")
        if not 0 < price < math.inf:
            raise ConfigError(f"--price {price}: a device's price must be positive and finite")
        self.device_type, self.price = device_type, price
        self.settings, self.bus = settings, bus
        self.clock = clock or MonotonicClock()
        self.device, self.policy = device, policy
        self.load = load or repository_loader(settings, device)
        self.inputs = inputs or repository_inputs(settings)
        self.id = executor_id or f"{socket.gethostname()}-{os.getpid()}"
        if not re.fullmatch(r"[A-Za-z0-9._-]{1,100}", self.id):
            raise ConfigError(f"--id {self.id!r}: use letters, digits, '.', '_' and '-' (it names the executor's "
                              "request topics)")
        self.topics = Topics(settings.topic_prefix)
        self.stats_every_s = stats_every_s
        self.follow_plans = follow_plans
        self.retire_after_epochs, self.retire_after_s = retire_after_epochs, retire_after_s
        self.metrics = metrics or ExecutorMetrics()
        self.workers = workers
        self.order: Order = order
        self.probe, self.save_profile = probe, save_profile
        from vidnexus.gpu_executor.layerwise_server import SERVED_POLICIES

        if layerwise_policy not in SERVED_POLICIES[:2]:
            raise ConfigError(f"--layerwise-policy {layerwise_policy!r}: choose layerwise or layerwise_tardy")
        self.layerwise, self.layerwise_policy = dict(layerwise or {}), layerwise_policy
        self.specs = {str(k): SessionSpec(str(k), k.model, k.slo_s, policy=policy) for k in sessions}
        self.static = set(self.specs)  # sessions the executor was started with are never retired
        self.executor: Executor | None = None
        self.service: ExecutorService | None = None
        self.groups: dict[str, str] = {}
        self.model_bytes: dict[str, int] = {}
        """Memory each loaded model holds on the device (reported with the stats; the planner's
        second capacity)."""
        self._follower: PlanFollower | None = None
        self._started = False  # every step of start() done
        self._unassigned: dict[str, tuple[int, float]] = {}  # session → (plans in a row without it, since)
        self._last_report: tuple[float, dict[str, int]] = (0.0, {})
        self._last_arrival: dict[str, float] = {}
        self._next_report = 0.0
        self._unknown_to_plans = False
        self._seen_executors: set[str] = set()
        """Every executor a plan listed as live: those gone since may have requests on their topics."""
        self._stop = threading.Event()
        self.outage = Outage(f"executor {self.id}", self.clock, give_up_s=settings.give_up_s)
        self.dead_letters = DeadLetters(bus, self.topics, f"executor {self.id}").expect("requests")
        self.summary = PeriodicSummary(f"executor {self.id}", "requests", start=self.clock.now())
        self.on_summary: Callable[[str, bool], None] | None = None
        """Called with each periodic summary line and whether it is a warning (the CLI prints it)."""

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> "ExecutorRole":
        """Load the models (warm, profiled), start the device and subscribe to the requests.

        Resumable: a broker that fails a step after the models are loaded (creating a topic,
        reading the control topic) raises here, and the next call picks up at that step, so
        :meth:`step` under :meth:`run` rides out a broker that restarts while the role starts."""
        if self._started:
            return self
        if self.executor is None:
            self.executor = self._start_device()
        if self.service is None:
            self.service = ExecutorService(self.executor, self.bus, self.settings, clock=self.clock,
                                           dead_letters=self.dead_letters, routed_as=self.id)
        self.bus.create_topic(self.topics.stats, 1)
        if self.follow_plans and self._follower is None:
            self._follower = PlanFollower(self.bus, self.topics, self.dead_letters)
        now = self.clock.now()
        self._last_report = (now, {})
        self._next_report = now + self.stats_every_s
        self._started = True
        return self

    def _start_device(self) -> Executor:
        """Load, warm and profile the models and start the executor's device thread."""
        from vidnexus.gpu_executor.loading import served_runners

        loaded, profiles = self.load(sorted({s.model for s in self.specs.values()}))
        self.model_bytes = {m: model_bytes(r) for m, r in loaded.items()}
        preprocess = {m: f for m in loaded if (f := self.inputs(m)) is not None}
        staged = {m: self._staged(m, loaded.pop(m), profiles.pop(m)) for m in list(loaded) if m in self.layerwise}
        # A group's members run through its PrefixRunner only: the trunk is held once.
        runners, self.groups, group_runners = served_runners(loaded, self.device,
                                                             declared_prefixes(self.settings, loaded))
        executor = Executor(list(self.specs.values()), runners, profiles, preprocess=preprocess,
                            clock=self.clock, metrics=self.metrics, prefix_groups=self.groups,
                            group_runners=group_runners, workers=self.workers, order=self.order,
                            probe=self.probe, on_profile=self.save_profile, staged=staged).start()
        settle_heap()  # models and profiles live as long as the process: full collections skip them
        return executor

    def health(self) -> Health:
        """The role's health, with its dead letters by source."""
        return replace(self.outage.health(), dead_letters=self.dead_letters.snapshot())

    def step(self, timeout_s: float = 0.05) -> int:
        """Serve one poll of requests; publish stats and follow the plan when due. Returns the
        requests read."""
        self.start()
        assert self.service is not None
        n = self.service.step(timeout_s=timeout_s)
        now = self.clock.now()
        if now >= self._next_report:
            self._next_report = now + self.stats_every_s
            seen = self.executor.stats() if self.executor is not None else []  # once for both
            self.report(now, seen)
            self.summarize(now, seen)
        if self._follower is not None:
            plan = self._follower.newest()
            if plan is not None:
                self.apply(plan)
        return n

    def run(self, stop: threading.Event | None = None) -> None:
        """:meth:`step` until ``stop`` (or :meth:`stop`) is set; then finish what was taken. A
        broker outage is ridden out (:class:`~vidnexus.connectors.outage.Outage`)."""
        stop = stop or self._stop
        try:
            self.outage.ride_out(self.step, stop, self._stop.is_set)
        finally:
            self.close()

    def stop(self) -> None:
        self._stop.set()
        if self.service is not None:
            self.service.stop()

    def close(self) -> None:
        """Commit what was answered, stop the device (queued requests end as drops), close the plan
        consumer."""
        if self.service is not None:
            self.service.close()
        if self.executor is not None:
            self.executor.stop()
        if self._follower is not None:
            self._follower.close()
            self._follower = None

    # -- stats ---------------------------------------------------------------------------------
    def stats(self, now: float, snapshot: list[dict[str, Any]]) -> ExecutorStats:
        """Every hosted session (also those with no request yet), with its rate since the last report;
        ``snapshot`` is the executor's own stats (``Executor.stats``), taken once per report."""
        assert self.executor is not None and self.service is not None
        seen = {st["session"]: st for st in snapshot}
        t0, counts = self._last_report
        sessions = []
        for sid, spec in self.specs.items():
            st = dict(seen.get(sid, {"session": sid}))
            arrivals = int(st.get("arrivals", 0))
            if arrivals > counts.get(sid, 0) or sid not in self._last_arrival:
                self._last_arrival[sid] = now
            st.update(model=spec.model, slo_ms=spec.slo_s * 1000, origin="static" if sid in self.static else "plan",
                      rate_recent=(arrivals - counts.get(sid, 0)) / max(1e-3, now - t0),
                      idle_s=round(now - self._last_arrival[sid], 1))
            sessions.append(SessionStats(**st))
        self._last_report = (now, {s.session: s.arrivals for s in sessions})
        free = device_memory_bytes(self.device)
        return ExecutorStats(self.id, self.device, self.clock.wall(), self.executor.targets(),
                             tuple(sorted(t.rsplit(".req.", 1)[-1] for t in self.service.topics)),
                             self.executor.profiles(), tuple(sessions), self.stats_every_s,
                             free + sum(self.model_bytes.values()) if free else 0, dict(self.model_bytes),
                             self.device_type, self.price, dict(self.groups))

    def summarize(self, now: float, snapshot: list[dict[str, Any]]) -> None:
        """The periodic summary line, when due: requests answered within their SLO (ok), late, and
        dropped by reason, over every session."""
        if self.on_summary is None or self.executor is None:
            return
        counts: dict[str, int] = {}
        for st in snapshot:
            ok = int(st.get("within_slo", 0))
            counts["ok"] = counts.get("ok", 0) + ok
            counts["late"] = counts.get("late", 0) + int(st.get("replies", 0)) - ok
            for reason, n in dict(st.get("drops", {})).items():
                counts[f"dropped {reason}"] = counts.get(f"dropped {reason}", 0) + int(n)
        out = self.summary.tick(now, counts)
        if out is not None:
            self.on_summary(*out)

    def report(self, now: float, snapshot: list[dict[str, Any]]) -> None:
        try:
            self.bus.publish(self.topics.stats, self.id.encode(), encode_stats(self.stats(now, snapshot)))
        except Exception as e:  # stats are advisory: a failed publish must not stop serving
            logger.warning("cannot publish stats: %s", e)

    # -- plans ---------------------------------------------------------------------------------
    def apply(self, plan: EpochPlan) -> None:
        """Batch sizes, the sessions to consume, new sessions to host, old ones to retire."""
        assert self.executor is not None and self.service is not None
        if self.id not in plan.executors:
            # The scheduler has not seen this executor (it just started, or returns after being
            # presumed dead): it keeps serving what it serves until a plan includes it.
            if not self._unknown_to_plans:
                # A normal start (the last scheduler's plan on the control topic predates us): info.
                logger.info("plan %d/%d does not know executor %s yet: serving %s until one does",
                               plan.generation, plan.epoch, self.id, sorted(self.service.sessions))
            self._unknown_to_plans = True
            return
        self._unknown_to_plans = False
        mine = plan.assignment_of(self.id)
        for sid in mine:
            if sid not in self.specs:
                self.host(sid)
        self.executor.set_targets(mine)
        # Requests clients routed to an executor the plans no longer list wait on its own topic:
        # the executors now given its sessions take them over (the group gives each topic to one).
        self._seen_executors.update(plan.executors)
        gone = sorted({(sid, e) for sid in mine for e in self._seen_executors - set(plan.executors)}
                      | {(sid, e) for sid in mine for e in plan.gone.get(sid, ()) if e != self.id})
        self.service.set_sessions(list(mine), gone)
        logger.info("plan %d/%d: serving %s", plan.generation, plan.epoch, mine or "nothing")
        # Retire sessions plans created and no longer assign here (``retire_after_epochs`` plans in
        # a row and ``retire_after_s``, so a session moving between executors is not reloaded back
        # and forth, and clients that route by an older plan find it served meanwhile).
        now = self.clock.now()
        for sid in [s for s in self.specs if s not in self.static]:
            if sid in mine:
                self._unassigned.pop(sid, None)
                continue
            n, since = self._unassigned.get(sid, (0, now))
            self._unassigned[sid] = (n + 1, since)
            if n + 1 >= self.retire_after_epochs and now - since >= self.retire_after_s:
                unloaded = self.executor.remove_session(sid)
                for m in unloaded:
                    self.model_bytes.pop(m, None)
                self.service.remove_session(sid)
                del self.specs[sid], self._unassigned[sid]
                logger.warning("retired session %s%s", sid, f", unloaded {', '.join(unloaded)}" if unloaded else "")

    def _staged(self, model: str, runner: Any, profile: Profile) -> Any:
        """``runner``'s model served layer-wise: its own module cut into groups, each profiled here
        at the loaded profile's sizes up to 32."""
        from vidnexus.gpu_executor.layerwise_server import staged_server

        module = getattr(runner, "module", None)
        if module is None:
            raise ConfigError(f"--layerwise {model}: only a torch model can be served layer-wise")
        try:
            shape = repository(self.settings).get(model).input_shape
        except Exception as e:
            raise ConfigError(f"--layerwise {model}: its input shape is not in the model repository ({e})") from e
        import numpy as np

        sizes = [b for b in profile.sizes if b <= 32] or [1]
        try:
            server = staged_server(model, module, np.zeros(shape, np.float32), device=self.device,
                                   groups=self.layerwise[model], policy=self.layerwise_policy,
                                   postprocess=runner.postprocess, sizes=sizes, clock=self.clock)
        except ValueError as e:  # an architecture whose layer order is not known
            raise ConfigError(f"--layerwise {model}: {e}") from None
        logger.info("serving %s layer-wise (%s) in %d groups: h_k(1) %s ms", model, self.layerwise_policy,
                    len(server.h), ", ".join(f"{1000 * p.latency(1):.1f}" for p in server.h))
        return server

    def host(self, sid: str) -> None:
        """A plan gave this executor a session it does not host (e.g. a stage SLO from the latency
        split): create it, loading the model first when it is new here."""
        assert self.executor is not None and self.service is not None
        try:
            key = SessionKey.parse(sid)
        except ConfigError:
            logger.warning("plan names session %s, which is not MODEL-SLOms; ignored", sid)
            return
        runner = prof = staged = None
        if not self.executor.hosts_model(key.model):
            try:
                runners, profiles = self.load([key.model])
                runner, prof = runners[key.model], profiles[key.model]
                if key.model in self.layerwise:
                    staged, runner = self._staged(key.model, runner, prof), None
            except Exception as e:  # an unknown or broken model must not stop the executor
                logger.error("cannot load model %s for session %s: %s", key.model, sid, e)
                return
            self.model_bytes[key.model] = model_bytes(runners[key.model])
            logger.info("loaded model %s for session %s", key.model, sid)
        spec = SessionSpec(sid, key.model, key.slo_s, policy=self.policy)
        new = runner is not None or staged is not None
        self.executor.add_session(spec, runner, prof, self.inputs(key.model) if new else None, staged=staged)
        self.specs[sid] = spec  # hosted from now on, even if its topics cannot be created yet
        try:
            self.service.add_session(sid)
        except ConnectorError as e:  # the rest of the plan applies; each step tries the topics again
            if e.retryable:
                logger.warning("session %s hosted, its request topics not created yet: %s", sid, e)
                return
            # The broker refuses its topics for good (a name Kafka rejects: too long, or colliding
            # with another's once '.' and '_' are taken alike): this session cannot be served, the
            # others can; it is not hosted, as a model that does not load.
            logger.error("cannot serve session %s: %s", sid, e)
            unloaded = self.executor.remove_session(sid)
            for m in unloaded:
                self.model_bytes.pop(m, None)
            self.service.remove_session(sid)
            del self.specs[sid]
