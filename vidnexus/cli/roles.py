"""The commands that run roles: ``ingest``, ``worker``, ``executor``, ``scheduler``, ``sink`` (one
role per process, over Kafka), and ``run`` / ``demo`` (every role in one process, embedded)."""

from __future__ import annotations

import math
import signal
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Optional

import typer
from rich.markup import escape
from rich.table import Table

from vidnexus.cli.common import (console, console_tokens, err_console, finite, print_result, require_kafka, settings,
                                 write_private)
from vidnexus.config import SINK_MAX_ROWS
from vidnexus.errors import ConnectorError, VidnexusError

__all__ = ["register"]



@contextmanager
def _bus_and_store(cfg: Any) -> Iterator[tuple[Any, Any]]:
    """The configured store and bus, closed in reverse order on the way out."""
    from vidnexus.connectors.factory import open_bus, open_store

    store = open_store(cfg)
    try:
        bus = open_bus(cfg)
        try:
            yield bus, store
        finally:
            bus.close()
    finally:
        store.close()

def _stop_on_signals(stop: Any) -> None:
    """SIGTERM and SIGINT end the role gracefully (``stop``: an Event or a callable)."""
    handler = (lambda *a: stop.set()) if hasattr(stop, "set") else (lambda *a: stop())
    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def _shard(shard: str) -> tuple[int, int]:
    try:
        i, n = (int(v) for v in shard.split("/"))
    except ValueError:
        raise VidnexusError(f"--shard {shard!r}: expected i/n with 0 <= i < n, e.g. 0/2") from None
    if not 0 <= i < n:
        raise VidnexusError(f"--shard {shard!r}: expected i/n with 0 <= i < n, e.g. 0/2 and 1/2")
    return i, n


def _serve_health(cfg: Any, role: str, health: Any) -> Any:
    """``GET /health`` on ``VNX_HEALTH_PORT`` when set (None otherwise)."""
    if not cfg.health_port:
        return None
    from vidnexus.roles.health import HealthServer

    server = HealthServer(health, cfg.metrics_host, cfg.health_port).start()
    err_console.print(f"{role}: health on http://{cfg.metrics_host}:{server.port}/health", markup=False)
    return server


# -- ingest ------------------------------------------------------------------------------------
def ingest(
    shard: str = typer.Option("0/1", help="This process's shard of the streams, i/n."),
    once: bool = typer.Option(False, help="Exit when every stream has ended (files), instead of following changes."),
    poll: float = typer.Option(2.0, callback=finite, min=0.1, help="Seconds between registry checks."),
    app_: list[str] = typer.Option([], "--app", help="Only the streams that feed this app (an app's name, or "
                                   "APP as `vidnexus worker` takes it): those registered with it, or with no app; "
                                   "repeatable (default: every stream)."),
    wait: bool = typer.Option(False, "--wait", help="With --once and --app: once the streams have "
                              "ended, wait until every frame published has its vnx_frames row for each --app "
                              "(the pipeline has drained), print how the frames ended, and exit 1 when some "
                              "are still missing after --wait-timeout."),
    wait_timeout: float = typer.Option(300.0, callback=finite, min=1.0, help="Seconds --wait waits for the last "
                                       "frame after the streams ended."),
) -> None:
    """Ingest every enabled stream (of this shard) onto the frames topic, with live progress.

    Prometheus on VNX_METRICS_PORT when set (vnx_ingest_*, docs/metrics.md)."""
    from vidnexus.roles.ingest import IngestRole, feeds

    i, n = _shard(shard)
    if wait and not (once and app_):
        raise VidnexusError("--wait waits for the frames of --once to be accounted for each --app: give both")
    apps = [_app_name(a) for a in app_]
    cfg = settings()
    require_kafka(cfg, "ingest")
    with _bus_and_store(cfg) as (bus, store):
        role = IngestRole(cfg, bus=bus, store=store, shard=i, shards=n, poll_s=poll,
                          only=(lambda spec: feeds(spec, apps)) if apps else None)
        _serve_health(cfg, "ingest", role.health)
        if cfg.metrics_port:
            from vidnexus.roles.metrics import IngestCollector, serve

            serve(cfg.metrics_port, cfg.metrics_host, IngestCollector(role.statuses, role.clock.now))
        _follow_ingest(role, once, shard)
        if wait:
            if not _wait_accounted(store, role, apps, wait_timeout):
                raise typer.Exit(1)
    if once and any(s.state == "failed" for s in role.statuses()):
        raise typer.Exit(1)


def _app_name(ref: str) -> str:
    """An app's name from ``--app``: an import string (``cars:app``) is loaded for its name; a plain
    name (``cars``, a built-in's ``traffic``) is the name."""
    if ":" not in ref:
        return ref
    from vidnexus.apps import load_app

    return str(load_app(ref).name)


def _wait_accounted(store: Any, role: Any, apps: list[str], timeout_s: float) -> bool:
    """Wait until every frame ``role`` published has its ``vnx_frames`` row for each of ``apps``;
    print how they ended. Whether none is missing."""
    from vidnexus.roles.ingest import accounted

    streams = {s.name: s for s in role.statuses() if s.published}
    feeding = {r.spec.name: r.spec for r in role.registry.list()}
    stop = threading.Event()
    _stop_on_signals(stop)
    clock = role.clock
    deadline = clock.now() + timeout_s
    ok = True
    for app in apps:
        mine = {name: s for name, s in streams.items() if name in feeding and (not feeding[name].apps
                                                                              or app in feeding[name].apps)}
        want = sum(s.published for s in mine.values())
        since = {name: s.origin_wall - 0.001 for name, s in mine.items()}
        got: dict[str, dict[str, int]] = {}
        while True:
            got = accounted(store, app, since)
            done = sum(n for by in got.values() for n in by.values())
            if done >= want or stop.is_set() or clock.now() >= deadline:
                break
            stop.wait(0.5)
        status: dict[str, int] = {}
        for by in got.values():
            for k, n in by.items():
                status[k] = status.get(k, 0) + n
        how = ", ".join(f"{k} {n}" for k, n in sorted(status.items(), key=lambda kv: -kv[1])) or "none yet"
        err_console.print(f"ingest: app {app}: {want} frames published, {done} accounted in vnx_frames ({how})",
                          markup=False)
        if done < want:
            ok = False
            err_console.print(f"ingest: app {app}: {want - done} frames have no vnx_frames row "
                              f"{'yet (stopped)' if stop.is_set() else f'after {timeout_s:g} s'}: is the app's "
                              "worker running, and the sink?", markup=False)
    return ok


def _follow_ingest(role: Any, once: bool, shard: str) -> None:
    """Run ingest with a live table of every stream on stderr (a terminal), or one line per change
    of a stream's state (a log)."""
    from rich.live import Live

    _stop_on_signals(role.stop)
    # The ready line `vidnexus up` waits for, on a terminal too (FORCE_COLOR makes a pipe one).
    err_console.print(f"ingest: shard {shard}, following the registry", markup=False)
    if not err_console.is_terminal:
        seen: dict[str, str] = {}

        def changes(statuses: list[Any]) -> None:
            for s in statuses:
                if seen.get(s.name) != s.state:
                    seen[s.name] = s.state
                    why = f" ({s.reason[:200]})" if s.reason and s.state != "running" else ""
                    err_console.print(f"ingest: stream {s.name} {s.state}: {s.published} published{why}",
                                      markup=False)
        role.run(once=once, on_tick=changes)
        changes(role.statuses())
        return

    clock = role.clock  # the stream workers' clock: status times are on it

    def table(statuses: list[Any]) -> Table:
        t = Table("stream", "state", "decoded", "dec fps", "sampled", "smp fps", "published", "since last",
                  "stale", "corrupt", "errors", "reconnects", "reason")
        now = clock.now()
        for s in sorted(statuses, key=lambda s: s.name):
            up = max(1e-3, now - s.started) if s.started else 0.0
            since = f"{now - s.last_publish:.1f}s" if s.last_publish is not None and s.state == "running" else ""
            t.add_row(s.name, s.state, str(s.decoded), f"{s.decoded / up:.1f}" if up else "", str(s.sampled),
                      f"{s.sampled / up:.1f}" if up else "", str(s.published), since, str(s.stale),
                      str(s.corrupt), str(s.errors), str(s.reconnects), s.reason[:60])
        return t

    with Live(table([]), console=err_console, refresh_per_second=2) as live:
        role.run(once=once, on_tick=lambda st: live.update(table(st)))
        live.update(table(role.statuses()))


# -- executor ----------------------------------------------------------------------------------
def _app_sessions(ref: str) -> list[Any]:
    """``--app APP[@SLO_MS]``: the sessions the app's workers send to before the scheduler's split
    (the app's SLO, or SLO_MS, divided evenly over its DNN depth)."""
    from vidnexus.apps import load_app
    from vidnexus.contracts.sessions import SessionKey
    from vidnexus.operators.infer import stage_slos

    name, at, slo = ref.rpartition("@") if "@" in ref else (ref, "", "")
    slo_ms = None
    if at:
        try:
            slo_ms = float(slo)
        except ValueError:
            slo_ms = math.nan
        if not (math.isfinite(slo_ms) and slo_ms >= 1):
            raise VidnexusError(f"--app {ref!r}: the SLO after @ must be a number of ms >= 1")
    the_app = _with_slo(load_app(name), slo_ms)
    stages = stage_slos(the_app)
    if not stages:
        raise VidnexusError(f"--app {ref!r}: app {the_app.name} calls no model; there is nothing to serve")
    return [SessionKey(the_app.served_model(m), ms) for m, ms in sorted(stages.items())]


def executor(
    session: list[str] = typer.Option([], "--session", "-s",
                                      help="MODEL:SLO_MS to serve, repeatable (e.g. -s resnet18:100)."),
    app_: list[str] = typer.Option([], "--app", help="Serve the sessions an app's workers start with: each DNN "
                                   "stage at the app's SLO split evenly over its DNN depth. APP (a built-in name or "
                                   "package.module:attribute, found like `vidnexus run` finds it) or APP@SLO_MS "
                                   "when its workers run with --slo-ms; repeatable, with or without -s."),
    device: str = typer.Option("cpu", help="cpu or cuda:N"),
    policy: str = typer.Option("early_rescue", help="Batching policy: early_rescue (early drop that serves a "
                              "head it can still serve when no backlog stands behind it), early_drop (Nexus's), "
                              "lazy_drop or fifo."),
    order: str = typer.Option("laxity", help="Which session's batch runs next: laxity (the one whose head "
                              "request must start soonest) or round-robin (Nexus's duty cycle)."),
    weights: list[str] = typer.Option([], help="MODEL=PATH of a local state_dict with real weights."),
    threads: int = typer.Option(0, min=0, help="Compute threads: torch's intra-op threads, and a model file's "
                                "runtime threads (onnxruntime, LiteRT) (0 = each one's default)."),
    executor_id: Optional[str] = typer.Option(None, "--id", help="Executor id in stats and plans (default host-pid)."),
    stats_every: float = typer.Option(5.0, callback=finite, min=0.2, help="Seconds between stats reports."),
    device_type: str = typer.Option("", help="The kind of device, for the scheduler: executors of one type are "
                                    "planned as alike (default: the --device's name)."),
    price: float = typer.Option(1.0, callback=finite, help="The device's unit price: the scheduler puts each "
                                "session on the type with the most throughput per price and minimises "
                                "devices × price."),
    probe_batches: bool = typer.Option(False, "--probe-batches/--no-probe-batches", help="Measure batch sizes "
                                       "past the start-up profile (24 … 256) in idle time, while a session's SLO "
                                       "could use them, so plans may use them. Off by default: on an H100 and an "
                                       "H200 it served fewer requests within their SLO after a load step, not "
                                       "more (docs/control-plane.md, bench/results/device-h200-2026-11-27.json)."),
    cuda_graphs: bool = typer.Option(True, "--cuda-graphs/--no-cuda-graphs", help="On a cuda device, run torch "
                                     "models through a CUDA graph per batch size: one launch per batch instead of "
                                     "one per kernel from Python (a model that cannot be captured runs eagerly; "
                                     "detectors always do). No effect on cpu. See docs/models.md."),
    layerwise: list[str] = typer.Option([], "--layerwise", help="MODEL[:GROUPS], repeatable: serve this model's "
                                        "sessions layer-wise: cut into GROUPS layer groups (default 5), a request "
                                        "joins a running batch at the next group boundary instead of waiting for "
                                        "the whole model (edge-serving paper). CNNs with a features trunk "
                                        "(mobilenet_v3_small) and ResNets. On a 2-core CPU it answered sooner at "
                                        "light load and held less load on time at heavy load than whole-model "
                                        "batching: see docs/benchmarks.md (layerwise)."),
    layerwise_policy: str = typer.Option("layerwise", help="How --layerwise models pick the next group step: "
                                         "layerwise (least total completion time) or layerwise_tardy (fewest "
                                         "late requests, giving up those that would miss)."),
) -> None:
    """Serve model sessions over Kafka until SIGTERM (distributed mode).

    Requests arrive on <prefix>.req.<MODEL>-<SLO>ms; replies go to each request's reply-to topic;
    stats go to <prefix>.stats every 5 s; Prometheus on VNX_METRICS_PORT when set. The executor
    follows the scheduler's plans (batch sizes, sessions to serve, retirements)."""
    from vidnexus.connectors.factory import open_bus
    from vidnexus.contracts.sessions import SessionKey
    from vidnexus.gpu_executor.metrics import ExecutorMetrics
    from vidnexus.gpu_executor.backend import ORDERS
    from vidnexus.gpu_executor.policies import POLICIES
    from vidnexus.gpu_executor.loading import profile_saver
    from vidnexus.roles.executor import ExecutorRole, repository, repository_loader

    if policy not in POLICIES:
        raise VidnexusError(f"--policy {policy!r}: choose one of {', '.join(sorted(POLICIES))}")
    if order.replace("-", "_") not in ORDERS:
        raise VidnexusError(f"--order {order!r}: choose laxity or round-robin")
    wmap = {}
    for w in weights:
        m, sep, path = w.partition("=")
        if not sep:
            raise VidnexusError(f"--weights {w!r}: expected MODEL=PATH")
        wmap[m] = Path(path)
    sessions = [SessionKey.from_arg(s) for s in session]
    staged = dict(_layerwise_arg(x) for x in layerwise)
    cfg = settings()
    require_kafka(cfg, "executor")
    for ref in app_:
        sessions += [k for k in _app_sessions(ref) if k not in sessions]
    if not sessions:
        raise VidnexusError("give the sessions to serve: -s MODEL:SLO_MS, or --app APP for an app's sessions")
    if threads:
        import torch

        torch.set_num_threads(threads)
    registry = None
    if cfg.metrics_port:
        from prometheus_client import CollectorRegistry, start_http_server

        registry = CollectorRegistry()
        start_http_server(cfg.metrics_port, addr=cfg.metrics_host, registry=registry)
    bus = open_bus(cfg)
    role = ExecutorRole(cfg, sessions, bus=bus, device=device, policy=policy,  # type: ignore[arg-type]
                        load=repository_loader(cfg, device, wmap,
                                                          lambda line: err_console.print(f"executor: {line}", markup=False),
                                                          threads=threads, cuda_graphs=cuda_graphs),
                        executor_id=executor_id, stats_every_s=stats_every,
                        metrics=ExecutorMetrics(registry), order=order.replace("-", "_"),  # type: ignore[arg-type]
                        device_type=device_type, price=price,
                        probe=probe_batches,
                        save_profile=profile_saver(cfg, device, repository(cfg), cuda_graphs),
                        layerwise=staged, layerwise_policy=layerwise_policy)
    role.on_summary = _print_summary
    stop = threading.Event()
    _stop_on_signals(stop)
    try:
        try:
            role.start()
        except ConnectorError as e:  # the models are loaded: run() finishes the start once the broker answers
            if not e.retryable:
                raise
            err_console.print(f"executor: the broker did not answer ({e}); serving begins when it does")
        for gid in sorted(set(role.groups.values())):
            members = sorted(m for m, g in role.groups.items() if g == gid)
            err_console.print(f"executor: prefix batching: {', '.join(members)} share one trunk")
        for m, server in sorted((role.executor.staged if role.executor else {}).items()):
            err_console.print(f"executor: {m} served layer-wise ({layerwise_policy}) in {len(server.h)} groups, "
                              f"h_k(1) {', '.join(f'{1000 * p.latency(1):.1f}' for p in server.h)} ms")
        kind = f", device type {device_type} at price {price:g}" if device_type or price != 1.0 else ""
        err_console.print(f"executor: serving {', '.join(map(str, sessions))} (id {role.id}{kind})")
        _serve_health(cfg, "executor", role.health)
        role.run(stop)
    finally:
        bus.close()


def _layerwise_arg(text: str) -> tuple[str, int]:
    """``--layerwise MODEL[:GROUPS]`` → (model, groups)."""
    model, sep, groups = text.partition(":")
    if not model or (sep and not (groups.isdigit() and 1 <= int(groups) <= 64)):
        raise VidnexusError(f"--layerwise {text!r}: expected MODEL or MODEL:GROUPS with 1 <= GROUPS <= 64, "
                            "e.g. mobilenet_v3_small:5")
    return model, int(groups) if sep else 5


# -- scheduler ---------------------------------------------------------------------------------
def variant_budgets(specs: list[str], cfg: Any) -> tuple[dict[str, Any], dict[str, tuple[Any, ...]]]:
    """``--variant-budget TASK=DEVICE_S_PER_S[,MEMORY_MB]`` → (task → Budgets, task → catalog)."""
    from vidnexus.apps import task_catalog
    from vidnexus.apps.icons.models import CATALOG_BATCH
    from vidnexus.control.variants import Budgets, catalog_of
    from vidnexus.errors import ConfigError

    budgets: dict[str, Any] = {}
    catalogs: dict[str, tuple[Any, ...]] = {}
    for spec in specs:
        task, sep, rest = spec.partition("=")
        device, _, memory = rest.partition(",")
        try:
            d, mb = float(device), float(memory) if memory else math.inf
        except ValueError:
            d = mb = math.nan
        if not sep or not task or not (math.isfinite(d) and d > 0) or not mb > 0:
            raise VidnexusError(f"--variant-budget {spec!r}: expected TASK=DEVICE_S_PER_S[,MEMORY_MB] with numbers > 0")
        try:
            catalogs[task] = tuple(catalog_of(task_catalog(task, cfg.data_dir / "models"), CATALOG_BATCH))
        except ConfigError as e:
            raise VidnexusError(f"--variant-budget {spec!r}: {e}") from None
        budgets[task] = Budgets(d, mb * 1e6)
    return budgets, catalogs


def scheduler(
    epoch: float = typer.Option(30.0, callback=finite, min=0.5, help="Seconds between epochs."),
    min_epoch: float = typer.Option(10.0, callback=finite, min=0.1, help="Never re-plan more often than this."),
    change: float = typer.Option(0.5, callback=finite, min=0.0, help="Relative rate change that triggers an early epoch."),
    retire_idle: float = typer.Option(120.0, callback=finite, min=0.0, help="Seconds without a request after which a "
                                      "session a plan created is no longer assigned; executors then retire it (3 "
                                      "epochs later) and unload models no session uses."),
    variant_budget: list[str] = typer.Option([], help="TASK=DEVICE_S_PER_S[,MEMORY_MB]: what every session of a "
                                             "task with variants (e.g. glyph120, app icons) may use together, in "
                                             "device-seconds per second (1 = one whole device) and MB; each epoch "
                                             "each app gets the most accurate variant that fits its share at its "
                                             "rate (MCDNN; docs/control-plane.md). Repeatable. A task without one "
                                             "runs its most accurate variant."),
) -> None:
    """The control plane: every epoch, plan sessions onto live executors (squishy bin packing,
    incremental) from their stats, split each app's SLO over its DNN stages from the fan-out its
    workers measure, and publish the plan to <prefix>.control (distributed mode).

    Prometheus on VNX_METRICS_PORT when set (vnx_scheduler_*, docs/metrics.md)."""
    from vidnexus.connectors.factory import open_bus
    from vidnexus.control.scheduler import SchedulerConfig
    from vidnexus.roles.scheduler import SchedulerRole

    if min_epoch > epoch:
        raise VidnexusError(f"--min-epoch {min_epoch:g} is longer than --epoch {epoch:g}")
    cfg = settings()
    require_kafka(cfg, "scheduler")
    bus = open_bus(cfg)

    shown: dict[str, Any] = {"lines": None, "at": 0.0, "since": 0}

    def show(plan: Any) -> None:
        """A plan's lines, when they differ from the last plan's, else once per 30 s (a plan per
        epoch would bury everything else in the log)."""
        lines = [f"{plan.devices} executor(s), moved {plan.moved}, assignments {plan.assignments}, "
                 f"infeasible {list(plan.infeasible) or 'none'}" + (f", variants {plan.variants}" if plan.variants else "")]
        for a, sp in plan.splits.items():
            held = f"reserved {sp.reserve_ms} ms" if sp.reserve_ms else "nothing reserved"
            lines.append(f"app {a}: " + (f"split {sp.budgets_ms} ms (even {sp.even_ms}), γ {sp.gamma}, gain {sp.gain}, "
                                         f"{held}" if sp.ok else sp.reason))
        now = role.clock.now()
        if lines == shown["lines"] and now - shown["at"] < 30.0:
            return
        same = f" (the same since epoch {shown['since']})" if lines == shown["lines"] else ""
        if lines != shown["lines"]:
            shown["since"] = plan.epoch
        shown.update(lines=lines, at=now)
        err_console.print(f"scheduler: epoch {plan.epoch}{same}: {lines[0]}", markup=False)
        for line in lines[1:]:
            err_console.print(f"scheduler: {line}", markup=False)

    metrics = None
    if cfg.metrics_port:
        from vidnexus.roles.metrics import SchedulerMetrics, serve

        metrics = SchedulerMetrics(serve(cfg.metrics_port, cfg.metrics_host)[0])

    def measured(plan: Any) -> None:
        show(plan)
        if metrics is not None:
            metrics.planned(plan, role.state.wanted_devices)

    budgets, catalogs = variant_budgets(variant_budget, cfg)
    role = SchedulerRole(cfg, bus=bus, config=SchedulerConfig(epoch_s=epoch, min_epoch_s=min_epoch, change=change,
                                                              retire_idle_s=retire_idle, variant_budgets=budgets,
                                                              variant_catalogs=catalogs), on_plan=measured)
    stop = threading.Event()
    _stop_on_signals(stop)
    err_console.print(f"scheduler: running (generation {role.state.generation})")
    _serve_health(cfg, "scheduler", role.health)
    try:
        role.run(stop)
    finally:
        bus.close()


# -- worker ------------------------------------------------------------------------------------
def _stage_split(app: Any, split: list[str]) -> dict[str, float] | None:
    stage = {}
    for item in split:
        m, sep, ms = item.partition("=")
        try:
            stage[m] = float(ms)
        except ValueError:
            sep = ""
        if not sep or m not in app.models or not 0 < stage.get(m, 0) < float("inf"):
            raise VidnexusError(f"--split {item!r}: expected MODEL=MS with a model of app {app.name} "
                                f"({', '.join(app.models)}) and MS > 0")
    return stage or None


def _check_models(cfg: Any, app: Any) -> None:
    """Refuse an app whose infer steps call models the repository does not know (naming the steps)."""
    from vidnexus.errors import ModelError
    from vidnexus.roles.executor import repository
    from vidnexus.roles.worker import unknown_models

    repo = repository(cfg)

    def known(name: str) -> bool:
        try:
            repo.get(name)
            return True
        except ModelError:
            return False

    bad = unknown_models(app, known)
    if bad:
        raise VidnexusError(f"app {app.name}: {'; '.join(bad)}, which the model repository "
                            f"({repo.where()}) does not know; register it (`vidnexus models register`, with the "
                            f"same VNX_STORE) or see `vidnexus models list`")


def _print_summary(line: str, warn: bool) -> None:
    """A role's periodic summary line (roles/summary.py) on stderr; a warning says so."""
    err_console.print(("warning: " if warn else "") + line, markup=False, highlight=False)


def worker(
    app_ref: str = typer.Argument(..., metavar="APP",
                                  help="A built-in app name (hud) or package.module:attribute of an App."),
    concurrency: int = typer.Option(32, min=1, help="Frames in flight (one stream's frames stay in order "
                                                      "when the chain has a window)."),
    partitions: int = typer.Option(8, min=1, help="Partitions of the frames and rows topics if they are created."),
    split: list[str] = typer.Option([], help="MODEL=MS: pin a stage SLO (default: the app's SLO split evenly "
                                                "over its DNN depth, then the scheduler's latency split)."),
    runtime: str = typer.Option("bus", help="bus (the worker role on the configured Kafka driver) or faust "
                                "(faust-streaming consumes the frames)."),
    log_level: str = typer.Option("warning", help="faust log level (--runtime faust)."),
    stall_restart: float = typer.Option(30.0, callback=finite, min=0.0, help="--runtime faust: restart the worker "
                                        "process (same pid) when frames wait on its partitions and none reached "
                                        "it for this many seconds with none in flight; 0 disables."),
    check_models: bool = typer.Option(True, "--check-models/--no-check-models",
                                      help="Refuse to start when an infer step calls a model the model "
                                           "repository (VNX_DATA_DIR/models) does not know; turn off where the "
                                           "executors' repository is not visible from the worker."),
    slo_ms: Optional[float] = typer.Option(None, callback=finite, min=1.0, help="End-to-end SLO of the app's frames "
                                           "(default: the app's own); its stages' sessions follow from it."),
    backfill: bool = typer.Option(False, "--backfill", help="Process backfill streams' frames (<prefix>.backfill, "
                                  "group <prefix>-app-<APP>-backfill; `streams add --mode backfill`): their requests "
                                  "carry no deadline and run in the slack the live sessions leave (bus runtime)."),
) -> None:
    """Run an app's operator chain over Kafka (distributed mode): the same worker role embedded
    mode runs.

    Consumes <prefix>.frames in consumer group <prefix>-app-<APP> (start more workers to share
    the partitions), calls the executors over Kafka, publishes rows to <prefix>.rows for
    `vidnexus sink`, and reports the app's DNN graph and fan-out to <prefix>.apps. Prometheus on
    VNX_METRICS_PORT when set (vnx_worker_*, docs/metrics.md; bus runtime)."""
    from vidnexus.apps import load_app

    if runtime not in ("bus", "faust"):
        raise VidnexusError(f"--runtime {runtime!r}: use bus or faust")
    if backfill and runtime != "bus":
        raise VidnexusError("--backfill runs on the bus runtime only (--runtime bus)")
    cfg = settings()
    require_kafka(cfg, "worker")
    the_app = _with_slo(load_app(app_ref), slo_ms)
    stage = _stage_split(the_app, split)
    if check_models:
        _check_models(cfg, the_app)
    err_console.print(f"worker: app {the_app.name}, chain of {len(the_app.steps())} steps, "
                      f"models {', '.join(the_app.models) or 'none'}, "
                      + ("backfill (no deadlines)" if backfill else f"SLO {the_app.slo_ms:g} ms") + f" ({runtime} runtime)")
    if runtime == "faust":
        from vidnexus.roles.worker_faust import run_faust_worker

        def restart(reason: str) -> None:
            import os

            err_console.print(f"worker: stalled ({reason}); restarting")
            sys.stderr.flush()
            os.execv(sys.executable, [sys.executable, "-m", "vidnexus", *sys.argv[1:]])

        run_faust_worker(the_app, cfg, concurrency=concurrency, partitions=partitions, split=stage,
                         loglevel=log_level, on_ready=lambda: err_console.print(f"worker: app {the_app.name} started"),
                         stall_s=stall_restart, on_stall=restart, on_summary=_print_summary)
        return
    from vidnexus.connectors.factory import open_bus
    from vidnexus.roles.worker import WorkerRole

    bus = open_bus(cfg)
    role = WorkerRole(cfg, the_app, bus=bus, split=stage, concurrency=concurrency, partitions=partitions,
                      backfill=backfill)
    role.on_summary = _print_summary
    if cfg.metrics_port:
        from vidnexus.roles.metrics import WorkerCollector, serve

        serve(cfg.metrics_port, cfg.metrics_host, WorkerCollector(
            the_app.name, lambda: role.stats, lambda: role.dispatcher.in_flight if role.dispatcher else 0))
    stop = threading.Event()
    _stop_on_signals(stop)
    err_console.print(f"worker: app {the_app.name} started")
    _serve_health(cfg, "worker", role.health)
    try:
        st = role.run(stop)
        err_console.print(f"worker: stopped after {st.frames} frames ({st.status}), {st.dead} dead-lettered")
    finally:
        bus.close()


# -- sink --------------------------------------------------------------------------------------
def sink(
    max_rows: int = typer.Option(SINK_MAX_ROWS, min=1, help="Insert when this many rows are buffered."),
    max_delay: float = typer.Option(1.0, callback=finite, min=0.01, help="Insert rows buffered for this many seconds."),
    group: Optional[str] = typer.Option(None, help="Consumer group (default <prefix>-sink)."),
) -> None:
    """Write the rows workers publish on <prefix>.rows into the store (distributed mode).

    Batched by size and time; offsets are committed after each insert, so a crash replays rows,
    and app tables (ReplacingMergeTree on each row's identity) count them once. Prometheus on
    VNX_METRICS_PORT when set (vnx_sink_*, docs/metrics.md)."""
    from vidnexus.roles.sink import SinkRole

    cfg = settings()
    require_kafka(cfg, "sink")
    with _bus_and_store(cfg) as (bus, store):
        role = SinkRole(cfg, bus=bus, store=store, group=group, max_rows=max_rows, max_delay_s=max_delay)
        role.on_summary = _print_summary
        if cfg.metrics_port:
            from vidnexus.roles.metrics import SinkCollector, serve

            serve(cfg.metrics_port, cfg.metrics_host, SinkCollector(lambda: role.stats))
        stop = threading.Event()
        _stop_on_signals(stop)
        role.prepare()
        err_console.print(f"sink: {role.topic} → {cfg.store}")
        _serve_health(cfg, "sink", role.health)
        st = role.run(stop)
        err_console.print(f"sink: stopped after {st.rows} rows in {st.inserts} inserts ({st.dead} dead-lettered)")


# -- up: every role of an app on this machine --------------------------------------------------
def up(
    app_ref: str = typer.Argument(..., metavar="APP", help="A built-in app name or package.module:attribute of "
                                  "your own App (found like `vidnexus run` finds it: start in its folder)."),
    once: bool = typer.Option(False, "--once", help="Ingest the app's registered streams once, wait until every frame "
                              "published is accounted in vnx_frames, print how they ended, stop every role and "
                              "exit (1 when frames are missing): `vidnexus run` over Kafka."),
    slo_ms: Optional[float] = typer.Option(None, callback=finite, min=1.0, help="End-to-end SLO of the app's frames "
                                           "(default: the app's own); the executor serves the stages' sessions "
                                           "for it."),
    workers: int = typer.Option(1, min=1, max=64, help="Worker processes (they share the frames' partitions)."),
    ingest_: bool = typer.Option(True, "--ingest/--no-ingest", help="Also run ingest for the streams that feed "
                                 "the app (following the registry); --no-ingest when another ingest runs."),
    runtime: str = typer.Option("bus", help="The workers' runtime: bus or faust."),
    device: str = typer.Option("cpu", help="The executor's device: cpu or cuda:N."),
    threads: int = typer.Option(0, min=0, help="The executor's torch intra-op threads (0 = torch default)."),
    wait_timeout: float = typer.Option(300.0, callback=finite, min=1.0, help="--once: seconds to wait for the "
                                       "last frame after the streams ended."),
) -> None:
    """Run every role of an app on this machine over Kafka, one process each: scheduler, executor
    (the app's sessions), sink, workers (and one for backfill streams) and ingest, each started once
    the one before it is ready,
    their output interleaved under the role's name. A role that exits is restarted (1, 2, 4 … 30 s
    apart; up gives up after 6 exits in 5 minutes). Ctrl-C or SIGTERM stops them in order, ingest
    first. Needs VNX_STORE=clickhouse. With VNX_HEALTH_PORT or VNX_METRICS_PORT set, each role gets
    that port + its index (printed once they are up). Across machines, run the same commands one by
    one (docs/getting-started.md)."""
    from vidnexus.apps import load_app
    from vidnexus.roles.ingest import feeds
    from vidnexus.roles.launcher import Launcher, RoleCommand
    from vidnexus.streams.registry import StreamRegistry

    if runtime not in ("bus", "faust"):
        raise VidnexusError(f"--runtime {runtime!r}: use bus or faust")
    if once and not ingest_:
        raise VidnexusError("--once ingests the app's streams itself; --no-ingest is for an ingest that runs elsewhere")
    cfg = settings()
    require_kafka(cfg, "up")
    if cfg.store != "clickhouse":
        raise VidnexusError("vidnexus up runs the roles as processes that share the store: set VNX_STORE=clickhouse "
                            "(the embedded chdb store is one process's; `vidnexus run APP` runs every role in one)")
    the_app = _with_slo(load_app(app_ref), slo_ms)
    _check_models(cfg, the_app)
    if once:
        from vidnexus.connectors.factory import open_store

        store = open_store(cfg)
        try:
            mine = [r.spec.name for r in StreamRegistry(store).list()
                    if r.state == "enabled" and feeds(r.spec, [the_app.name])]
        finally:
            store.close()
        if not mine:
            raise VidnexusError(f"--once: no enabled stream feeds app {the_app.name}; register one first: "
                                f"vidnexus streams add NAME URL --app {app_ref}")
    slo = [] if slo_ms is None else ["--slo-ms", f"{slo_ms:g}"]
    commands = [RoleCommand("scheduler", ("scheduler",), ready="scheduler: running")]
    if the_app.models:
        executor_app = app_ref if slo_ms is None else f"{app_ref}@{slo_ms:g}"
        commands.append(RoleCommand("executor", ("executor", "--app", executor_app, "--device", device,
                                                 "--threads", str(threads)), ready="executor: serving"))
    from vidnexus.contracts.topics import Topics

    commands.append(RoleCommand("sink", ("sink",), ready=f"sink: {Topics(cfg.topic_prefix).rows}"))
    for k in range(workers):
        commands.append(RoleCommand(f"worker-{k + 1}" if workers > 1 else "worker",
                                    ("worker", app_ref, "--runtime", runtime, *slo),
                                    ready=f"worker: app {the_app.name} started"))
    # Backfill streams (`streams add --mode backfill`) have a worker of their own: no deadlines, their
    # requests run in the slack the live sessions leave.
    commands.append(RoleCommand("worker-backfill", ("worker", app_ref, "--backfill", *slo),
                                ready=f"worker: app {the_app.name} started"))
    if ingest_:
        wait = ["--once", "--wait", "--wait-timeout", f"{wait_timeout:g}"] if once else []
        commands.append(RoleCommand("ingest", ("ingest", "--app", the_app.name, *wait), ready="ingest: shard",
                                    final=once))
    width = max(len(c.name) for c in commands)

    def out(name: str, line: str) -> None:
        sys.stderr.write(f"{name:<{width}} | {line}\n")
        sys.stderr.flush()

    import os

    # The children import this very vidnexus (a checkout run through a script of another venv too);
    # their output is a pipe, and stays plain (no colour, no live tables) even where FORCE_COLOR is set.
    here = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(dict.fromkeys(
        [here, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])), TTY_COMPATIBLE="0")
    env.pop("FORCE_COLOR", None)
    # One health and one metrics port per process: each role gets the base port + its index.
    ports: dict[str, dict[str, str]] = {c.name: {} for c in commands}
    for var, base in (("VNX_HEALTH_PORT", cfg.health_port), ("VNX_METRICS_PORT", cfg.metrics_port)):
        env.pop(var, None)
        if base:
            for k, c in enumerate(commands):
                ports[c.name][var] = str(base + k)
    launcher = Launcher(commands, out=out, env=env, env_of=ports)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda *a: stop.set())
    code = 0
    try:
        launcher.start(stop)
        pids = ", ".join(f"{n} {pid}" + "".join(f" {v.split('_')[1].lower()}:{p}" for v, p in ports[n].items())
                         for n, pid in launcher.running().items())
        launcher.say(f"app {the_app.name} is up ({pids}); "
                     + ("ingesting its streams once" if once else "Ctrl-C stops every role"))
        code = launcher.watch(stop)
    except VidnexusError:
        if not stop.is_set():
            raise
    finally:
        launcher.stop()
        launcher.say("every role stopped")
    if code:
        raise typer.Exit(code)


# -- embedded: run and demo --------------------------------------------------------------------
def _embedded(app: Any, streams: Any, *, fresh: bool, realtime_note: str, timeout: float | None,
              sql_port: int | None, threads: int, console_port: int | None = None,
              variant_budget: list[str] | None = None) -> Any:
    """Run ``app`` embedded with a progress bar; returns (result, the Embedded run)."""
    from dataclasses import replace

    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from vidnexus.roles.embedded import EMBEDDED_SCHEDULER, Embedded

    if threads:
        import torch

        torch.set_num_threads(threads)
    cfg = settings(bus="memory")
    sql = None
    if sql_port is not None:
        import secrets

        token = cfg.sql_token or secrets.token_urlsafe(24)
        sql = ("127.0.0.1", sql_port, token)
    api = None
    if console_port is not None:
        api = ("127.0.0.1", console_port, console_tokens(cfg, "run"))
    budgets, catalogs = variant_budgets(variant_budget or [], cfg)
    scheduler = replace(EMBEDDED_SCHEDULER, variant_budgets=budgets, variant_catalogs=catalogs)
    run = Embedded(cfg, app, streams=streams, fresh=fresh, sql=sql, console=api, scheduler=scheduler)
    if run.console is not None:
        err_console.print(f"run: console at {run.console.url}/ (API: {run.console.url}/api/v1; tokens: VNX_CONSOLE_TOKEN and "
                          f"VNX_CONSOLE_ADMIN_TOKEN, or {cfg.data_dir}/console-token and console-admin-token)")
    if sql is not None and run.endpoint is not None:
        path = cfg.data_dir / "sql-token"
        where = "VNX_SQL_TOKEN" if cfg.sql_token else str(path)
        err_console.print(f"run: SQL at http://127.0.0.1:{run.endpoint.address[1]}/sql (token: {where})")
        if cfg.sql_token is None:
            write_private(path, sql[2] + "\n")
    stopping = threading.Event()

    def stop() -> None:
        stopping.set()
        run.stop()

    _stop_on_signals(stop)
    try:
        with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                      TimeElapsedColumn(), console=err_console, transient=False) as prog:
            task = prog.add_task(f"frames → rows{realtime_note}", total=None)

            def progress(done: int, published: int, ingesting: bool) -> None:
                prog.update(task, completed=done, total=max(published, done) if not ingesting else None)

            result = run.run(timeout_s=timeout, progress=progress)
    except BaseException:
        run.close()
        raise
    return result, run


def _report(result: Any, slo_ms: float) -> list[str]:
    """Print the run's report; returns its lines as plain text (for --save)."""
    lines = [f"sampled frames: {result.published}, accounted in vnx_frames: {result.accounted} "
             f"({', '.join(f'{k} {v}' for k, v in sorted(result.status.items())) or 'none'}); "
             f"each frame is a row in the app's tables or a drop with its reason (SLO {slo_ms:g} ms)"]
    failed = [s for s in result.streams if s.state == "failed"]
    for s in failed:
        lines.append(f"[red]stream {escape(s.name)} failed[/]: {escape(s.reason)}")
    for s in result.executor_stats:
        lines.append(f"executor session [bold]{escape(s['session'])}[/]: {s['arrivals']} requests, mean batch "
                     f"{s['mean_batch']:.1f}, p50 {s['latency_p50_ms']:.1f} ms, p99 {s['latency_p99_ms']:.1f} ms, "
                     f"drops {escape(str(s['drops'] or 'none'))}")
    if result.plans:
        last = result.plans[-1]
        sp = last.splits.get(result.app)
        what = (f"split {sp.budgets_ms} ms (γ {sp.gamma})" if sp and sp.ok else (sp.reason if sp else "no split"))
        n = len(result.plans)
        lines.append(escape(f"scheduler: {n} epoch{'s' if n != 1 else ''}; app {result.app}: {what}; worker's stage "
                            f"SLOs {result.stage_slos_ms} ms"))
    for line in lines:
        console.print(line)
    return [_plain_text(line) for line in lines]


def _plain_text(markup: str) -> str:
    """A line of rich markup as the plain text it prints."""
    from rich.text import Text

    return Text.from_markup(markup).plain


def _with_slo(app: Any, slo_ms: float | None) -> Any:
    """The app with another end-to-end SLO (--slo-ms)."""
    if slo_ms is None:
        return app
    import copy

    other = copy.copy(app)
    other.slo_ms = float(slo_ms)
    return other


SAVE_HELP = ("Write what the run measured to this JSON file (atomically): the command, machine, git commit, "
             "settings, streams, frames accounted by status, per-stream latency, executor stats, plans"
             "{extra}. Committed runs go to bench/results/{name}-APP-DATE.json.")


def _save_option(extra: str, name: str) -> Any:
    return typer.Option(None, "--save", metavar="FILE.json", dir_okay=False,
                        help=SAVE_HELP.format(extra=extra, name=name))


def _save(path: Path, result: Any, *, clock: Any, started: tuple[float, float], options: dict[str, Any],
          report: list[str], tables: dict[str, int], demo_output: Any = None) -> None:
    """Write the run's record to ``path`` (``--save``); ``started``: the command's (wall, now)."""
    from vidnexus.benchmarks.machine import machine_info
    from vidnexus.cli.saved_run import command_line, git_state, write_json
    from vidnexus.roles.run_record import run_record

    doc = run_record(result, command=command_line(), started_wall=started[0], duration_s=clock.now() - started[1],
                     machine=machine_info(), git=git_state(), settings=settings(bus="memory"), options=options,
                     report=report, tables=tables, demo=demo_output)
    write_json(path, doc)
    err_console.print(f"saved the run to {path}", markup=False, highlight=False)


def _table_rows(emb: Any, tables: Any) -> dict[str, int]:
    return {t: int(emb.query(f"SELECT count() FROM {t} FINAL").scalar()) for t in sorted(tables)}


def run(
    app_ref: str = typer.Argument(..., metavar="APP", help="A built-in app name or package.module:attribute of "
                                  "your own App (a file next to you: run from its folder, or set PYTHONPATH)."),
    stream: list[str] = typer.Option([], "--stream", help="[NAME=]URL to run on (file, rtsp://, http(s)://, "
                                     "synthetic://…), repeatable (default name APP-1, APP-2, …); default: the "
                                     "registered streams of APP."),
    backfill: list[str] = typer.Option([], "--backfill", help="[NAME=]URL of a stored video to re-process beside the "
                                       "--stream ones, repeatable: read as fast as it decodes, its requests carry no "
                                       "deadline and run only in the slack the live streams leave (DeepQuery)."),
    fps: float = typer.Option(1.0, callback=finite, min=0.001, max=1000.0, help="Sampling rate of the --stream URLs."),
    rate: str = typer.Option("max", help="How fast the --stream files are read: max (as fast as they decode), "
                             "realtime (at their own frame rate, as a camera sends them) or a factor of real time "
                             "(2 = twice as fast)."),
    until: Optional[float] = typer.Option(None, callback=finite, min=0.001, help="Only the first this many seconds "
                                          "of each --stream file."),
    slo_ms: Optional[float] = typer.Option(None, callback=finite, min=1.0, help="End-to-end SLO (default: the app's)."),
    timeout: Optional[float] = typer.Option(None, callback=finite, min=1.0, help="Stop after this many seconds."),
    sql_port: Optional[int] = typer.Option(None, min=0, max=65535, help="Serve the read-only SQL endpoint on this "
                                           "port while running (0: any free port)."),
    console_port: Optional[int] = typer.Option(None, min=0, max=65535, help="Serve the console's HTTP API "
                                               "(/api/v1: streams, apps, models, plan, drops, SQL; docs/api.md) on "
                                               "this port while running (0: any free port)."),
    threads: int = typer.Option(1, min=0, help="torch intra-op threads (0 = torch default)."),
    tag: list[str] = typer.Option([], help="k=v tag of the --stream streams, repeatable (e.g. a traffic counting "
                                  "line: line.gate=0,216,768,216)."),
    save: Optional[Path] = _save_option(", rows per table", "run"),
    variant_budget: list[str] = typer.Option([], help="TASK=DEVICE_S_PER_S[,MEMORY_MB]: the budget of a task with "
                                             "variants (the icons app's glyph120), as `vidnexus scheduler "
                                             "--variant-budget`; repeatable."),
) -> None:
    """Run an app embedded: every role (ingest, worker, executor, scheduler, sink) in this process,
    over the in-memory bus and the embedded store, until its file streams end and every frame is
    accounted (live streams: until Ctrl-C). Rows land in the app's tables and vnx_frames; query
    them with `vidnexus sql` afterwards (or through --sql-port while it runs)."""
    from vidnexus.apps import load_app
    from vidnexus.clock import MonotonicClock
    from vidnexus.cli.saved_run import check_save_path
    from vidnexus.streams.spec import StreamSpec, parse_rate

    from vidnexus.cli.streams import parse_tags

    realtime, speed = parse_rate(rate)
    tags = parse_tags(tag)
    if save is not None:
        check_save_path(save)
    clock = MonotonicClock()
    started = clock.wall(), clock.now()
    the_app = _with_slo(load_app(app_ref), slo_ms)
    specs = None
    if stream or backfill:
        import re

        specs = []
        for k, (text, old) in enumerate([(t, False) for t in stream] + [(t, True) for t in backfill]):
            named = re.fullmatch(r"([A-Za-z0-9_.-]{1,200})=(.+)", text)
            name, url = (named.group(1), named.group(2)) if named else (f"{the_app.name}-{k + 1}", text)
            specs.append(StreamSpec(name, url, fps=fps, realtime=realtime and not old, speed=speed, until_s=until,
                                    tags=dict(tags), backfill=old))
    result, emb = _embedded(the_app, specs, fresh=False, realtime_note="", timeout=timeout, sql_port=sql_port,
                            threads=threads, console_port=console_port, variant_budget=variant_budget)
    try:
        report = _report(result, the_app.slo_ms)
        tables = _table_rows(emb, the_app.tables)
        for t, n in tables.items():
            console.print(f"table {t}: {n} rows (vidnexus sql \"SELECT * FROM {t} FINAL LIMIT 10\")", markup=False)
        if save is not None:
            options = {"app": app_ref, "stream": list(stream), "backfill": list(backfill), "fps": fps, "rate": rate, "until": until,
                       "slo_ms": slo_ms, "timeout": timeout, "threads": threads, "tag": list(tag),
                       "variant_budget": list(variant_budget)}
            _save(save, result, clock=clock, started=started, options=options, report=report, tables=tables)
    finally:
        emb.close()


def demo(
    name: str = typer.Argument("hud", help="Which app: hud, game, traffic, dance, people, hudtext or icons."),
    streams: int = typer.Option(3, min=1, max=32, help="Number of synthetic camera streams."),
    seconds: float = typer.Option(20.0, callback=finite, min=1.0, max=3600.0,
                                  help="Length of each stream (seconds of video)."),
    sample_fps: Optional[float] = typer.Option(None, callback=finite, min=0.1, max=100.0,
                                               help="Sampling rate per stream (frames/s); default: the app's."),
    slo_ms: Optional[float] = typer.Option(None, callback=finite, min=1.0, help="End-to-end latency SLO (ingest to "
                                           "row); default: the app's."),
    fast: bool = typer.Option(False, help="Do not pace sources at real time."),
    save: Optional[Path] = _save_option(", the models' preparation, the SQL results and the summary with its "
                                        "figures", "demo"),
) -> None:
    """A built-in app end to end on the embedded default (`vidnexus run` with the app's synthetic
    streams): prints the SQL results."""
    import importlib
    from dataclasses import replace

    from vidnexus.apps import APP_REFS, load_app
    from vidnexus.clock import MonotonicClock
    from vidnexus.cli.saved_run import check_save_path
    from vidnexus.roles.run_record import DemoOutput, QueryRows

    if name not in APP_REFS:
        raise VidnexusError(f"unknown demo {name!r}; available: {', '.join(APP_REFS)}")
    if save is not None:
        check_save_path(save)
    clock = MonotonicClock()
    started = clock.wall(), clock.now()
    spec = importlib.import_module(APP_REFS[name].partition(":")[0]).DEMO
    cfg = settings(bus="memory")
    err_console.print("demo: training/loading models …")
    prepared = {what: str(text) for what, text in spec.prepare(cfg).items()}
    prepare_s = clock.now() - started[1]
    for what, text in prepared.items():
        console.print(f"[bold]{what}[/]: {text}")
    the_app = _with_slo(load_app(name), slo_ms or spec.slo_ms)
    specs = [replace(s, realtime=not fast) for s in spec.streams(streams, seconds, spec.source_fps,
                                                                  sample_fps or spec.sample_fps)]
    result, emb = _embedded(the_app, specs, fresh=True, realtime_note="" if fast else " (paced at real time)",
                            timeout=None, sql_port=None, threads=1)
    try:
        report = _report(result, the_app.slo_ms)
        queries = []
        for title, sql in spec.queries.items():
            console.print(f"\n[bold]SQL[/] ({title}):[dim]{sql}[/]")
            res = emb.query(sql)
            print_result(res)
            queries.append(QueryRows(title, sql, tuple(res.columns), tuple(tuple(r) for r in res.rows)))
        summary = spec.summary(emb.store, emb.executor.executor) if spec.summary is not None else None
        for line in summary.lines if summary is not None else ():
            console.print(line)
        if save is not None:
            out = DemoOutput(name, prepared, prepare_s, tuple(queries),
                             tuple(_plain_text(line) for line in summary.lines) if summary else (),
                             dict(summary.figures) if summary else {})
            options = {"name": name, "streams": streams, "seconds": seconds,
                       "sample_fps": sample_fps or spec.sample_fps, "source_fps": spec.source_fps,
                       "slo_ms": slo_ms, "fast": fast}
            _save(save, result, clock=clock, started=started, options=options, report=report,
                  tables=_table_rows(emb, the_app.tables), demo_output=out)
    finally:
        emb.close()


def register(app: typer.Typer) -> None:
    """Add the role commands to ``app``."""
    for fn, name in ((ingest, "ingest"), (worker, "worker"), (executor, "executor"), (scheduler, "scheduler"),
                     (sink, "sink"), (up, "up"), (run, "run"), (demo, "demo")):
        app.command(name)(fn)
