"""The ``vidnexus`` command. Settings come from ``VNX_*`` environment variables (see
``vidnexus config``); options given on the command line take precedence."""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from pathlib import Path
from typing import Any, Iterator, Optional

import typer
from rich.console import Console
from rich.table import Table

from vidnexus.config import Settings, load_settings
from vidnexus.errors import VidnexusError

console = Console()
err_console = Console(stderr=True)

app = typer.Typer(
    name="vidnexus",
    help="Video analytics over Kafka with SLO-driven DNN batching and SQL over results.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
services_app = typer.Typer(help="Local Kafka broker and ClickHouse server for development and CI.",
                           no_args_is_help=True)
models_app = typer.Typer(help="The model repository: list, show, profile.", no_args_is_help=True)
streams_app = typer.Typer(help="Camera streams: add, list, show, pause, resume, remove.", no_args_is_help=True)
app.add_typer(services_app, name="services")
app.add_typer(models_app, name="models")
app.add_typer(streams_app, name="streams")


@app.callback()
def _global_options(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks instead of one-line errors "
                               "(anywhere on the command line) [env: VNX_DEBUG=1]."),
) -> None:
    """Video analytics over Kafka with SLO-driven DNN batching and SQL over results."""


def _finite(value: float | None) -> float | None:
    """Option callback: reject ``inf`` and ``nan`` (typer's float accepts them)."""
    import math

    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"{value} is not a finite number")
    return value


def _settings(**overrides: Any) -> Settings:
    return load_settings(**overrides)


def print_result(res: Any, fmt: str = "table", title: str | None = None) -> None:
    """Print a QueryResult as a rich table, CSV or JSON lines."""
    if fmt == "json":
        for row in res.dicts():
            print(json.dumps(row, default=str))
        return
    if fmt == "csv":
        import csv

        w = csv.writer(sys.stdout)
        w.writerow(res.columns)
        w.writerows(res.rows)
        return
    t = Table(title=title, show_lines=False)
    for c in res.columns:
        t.add_column(c)
    for r in res.rows:
        t.add_row(*[("" if v is None else str(v)) for v in r])
    console.print(t)


# -- services ----------------------------------------------------------------------------------
@services_app.command("up")
def services_up(
    only: Optional[str] = typer.Option(None, help="Start just one service: kafka or clickhouse."),
) -> None:
    """Install (cached) and start the services; wait until each answers. Idempotent."""
    from vidnexus.services import all_services

    services = all_services(_settings())
    if only is not None and only not in {svc.name for svc in services}:
        raise VidnexusError(f"--only {only!r}: use one of {', '.join(svc.name for svc in services)}")
    for svc in services:
        if only and svc.name != only:
            continue
        st = svc.start(progress=lambda m: err_console.print(f"[dim]services:[/] {m}"))
        console.print(f"{st.name}: running on {st.address} (pid {st.pid})")


@services_app.command("down")
def services_down() -> None:
    """Stop the services started by `services up`."""
    from vidnexus.services import all_services

    for svc in reversed(all_services(_settings())):
        console.print(f"{svc.name}: {'stopped' if svc.stop() else 'was not running'}")


@services_app.command("status")
def services_status() -> None:
    """Show whether each service is running; exit code 1 if any is not."""
    from vidnexus.services import all_services

    ok = True
    for svc in all_services(_settings()):
        st = svc.status()
        ok &= st.running
        state = "running" if st.running else st.detail
        console.print(f"{st.name}: {state} on {st.address}" + (f" (pid {st.pid})" if st.pid else ""))
    raise typer.Exit(0 if ok else 1)


# -- demo --------------------------------------------------------------------------------------
@app.command()
def demo(
    name: str = typer.Argument("hud", help="Which app: hud, game, traffic or dance."),
    streams: int = typer.Option(3, min=1, max=32, help="Number of synthetic camera streams."),
    seconds: float = typer.Option(20.0, callback=_finite, min=1.0, help="Length of each stream (seconds of video)."),
    sample_fps: Optional[float] = typer.Option(None, callback=_finite, min=0.1, help="Sampling rate per stream (frames/s); "
                                               "default: the app's (5 for hud and game)."),
    slo_ms: Optional[float] = typer.Option(None, callback=_finite, min=1.0, help="End-to-end latency SLO (ingest to row); "
                                           "default: the app's."),
    fast: bool = typer.Option(False, help="Do not pace sources at real time."),
) -> None:
    """Run an app end to end on the embedded default (in-process bus + chdb) and print SQL results."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from vidnexus.apps import APP_REFS
    from vidnexus.demo import DemoConfig, run_demo

    if name not in APP_REFS:
        raise VidnexusError(f"unknown demo {name!r}; available: {', '.join(APP_REFS)}")
    settings = _settings(bus="memory", store="chdb")
    cfg = DemoConfig(streams=streams, seconds=seconds, sample_fps=sample_fps, slo_ms=slo_ms, realtime=not fast)
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), console=err_console, transient=False) as prog:
        tasks: dict[str, Any] = {}

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                label = "training/loading models" if stage == "models" else "frames → rows"
                tasks[stage] = prog.add_task(label, total=total)
            prog.update(tasks[stage], completed=done, total=total)

        res = run_demo(settings, cfg, progress, app_name=name)
    for what, text in res.model_report.items():
        console.print(f"[bold]{what}[/]: {text}")
    console.print(f"sampled frames: {res.sampled}, accounted in vnx_frames: {res.rows} "
                  f"({', '.join(f'{k} {v}' for k, v in sorted(res.status.items())) or 'none'}); "
                  f"each frame is a row in the app's tables or a drop with its reason (SLO {res.slo_ms:g} ms)")
    for s in res.executor_stats:
        console.print(
            f"executor session [bold]{s['session']}[/]: {s['arrivals']} requests, mean batch "
            f"{s['mean_batch']:.1f}, p50 {s['latency_p50_ms']:.1f} ms, p99 {s['latency_p99_ms']:.1f} ms, "
            f"drops {s['drops'] or 'none'}"
        )
    for title, sql in res.queries.items():
        console.print(f"\n[bold]SQL[/] ({title}):[dim]{sql}[/]")
        print_result(res.tables[title])
    for line in res.summary:
        console.print(line)


# -- sql ---------------------------------------------------------------------------------------
@app.command()
def sql(
    query: str = typer.Argument(..., help="One statement. Read-only by default: SELECT/WITH, SHOW TABLES, "
                                           "SHOW CREATE TABLE, DESCRIBE, EXISTS, EXPLAIN."),
    fmt: str = typer.Option("table", "--format", help="table, csv or json"),
    store: Optional[str] = typer.Option(None, help="chdb or clickhouse [env: VNX_STORE]"),
    write: bool = typer.Option(False, "--write", help="Allow writes, DDL, SET, SYSTEM and KILL (the owner's "
                               "switch; on a server, as VNX_CLICKHOUSE_URL's user)."),
    max_rows: int = typer.Option(1000, min=0, help="Print at most this many rows (0: all)."),
    timeout: float = typer.Option(30.0, callback=_finite, min=1.0, max=86400.0, help="Seconds the query may run."),
) -> None:
    """Run one SQL statement against the configured store (embedded chdb by default, or the
    ClickHouse server). Read-only unless --write: the statement is checked on ClickHouse's own
    parse tree (docs/operators.md#sql) and runs with readonly=1 and limits."""
    from vidnexus.connectors.factory import open_store
    from vidnexus.sql_guard import SqlGuard, SqlLimits

    if fmt not in ("table", "csv", "json"):
        raise VidnexusError(f"--format {fmt!r}: use table, csv or json")
    s = open_store(_settings(store=store), reader=not write)
    guard = None
    try:
        guard = SqlGuard(s)
        res, cut = guard.run(guard.check(query, write=write), SqlLimits(max_rows=max_rows, timeout_s=timeout))
        if res.columns:
            print_result(res, fmt)
        if cut:
            err_console.print(f"(first {max_rows} rows; --max-rows 0 prints all)")
    finally:
        if guard is not None:
            guard.close()
        s.close()


# -- models ------------------------------------------------------------------------------------
def _repo() -> Any:
    """The model repository: the zoo, the built-in apps' models and the registered ones."""
    from vidnexus.apps import model_catalog
    from vidnexus.gpu_executor.repository import ModelRepository

    return ModelRepository(_settings().data_dir / "models", extra=model_catalog())


@models_app.command("list")
def models_list() -> None:
    """Zoo architectures (random weights: compute profiles only), the apps' models (trained by the
    project on first use) and registered models."""
    t = Table("name", "version", "task", "input", "source", "description")
    for m in _repo().list():
        t.add_row(m.name, str(m.version), m.task, "×".join(map(str, m.input_shape)), m.source,
                  m.description)
    console.print(t)


@models_app.command("show")
def models_show(name: str = typer.Argument(..., help="Model name."),
                version: Optional[int] = typer.Option(None, help="Version (default: latest).")) -> None:
    """Show one model and its stored profiles."""
    from dataclasses import asdict

    from vidnexus.gpu_executor.profile import Profile

    spec = _repo().get(name, version)
    for k, v in asdict(spec).items():
        console.print(f"{k:>13}: {v}")
    for path in sorted((_settings().data_dir / "profiles").glob(f"{name}@*.json")):
        prof = Profile.from_dict(json.loads(path.read_text()))
        a, b = prof.fit()
        console.print(f"      profile: {path.stem.split('@')[1]}: batches {prof.sizes[0]}…{prof.max_batch}, "
                      f"ℓ(b) ≈ {a * 1000:.3f}·b + {b * 1000:.3f} ms")


@models_app.command("register")
def models_register(
    name: str = typer.Argument(..., help="Name to register the model under."),
    source: str = typer.Option(..., "--from", help="zoo:ARCH, factory:pkg.module:function or torchscript:PATH"),
    input_shape: str = typer.Option(..., "--input", help="Input shape without batch, e.g. 3x224x224"),
    task: str = typer.Option("classify", help="classify, detect, pose or embed"),
    version: int = typer.Option(1, min=1, help="Version number."),
    weights: Optional[Path] = typer.Option(None, help="Local state_dict file with real weights."),
    prefix: Optional[str] = typer.Option(None, help="Declare a shared-prefix group (prefix batching)."),
    description: str = typer.Option("", help="Free text."),
    overwrite: bool = typer.Option(False, help="Replace an existing name+version."),
) -> None:
    """Register a model: it is loaded once and run on one input to check the shape."""
    from vidnexus.gpu_executor.repository import ModelSpec

    try:
        shape = tuple(int(d) for d in input_shape.lower().split("x"))
    except ValueError:
        raise VidnexusError(f"--input {input_shape!r}: expected dimensions like 3x224x224") from None
    if weights is not None and not weights.exists():
        raise VidnexusError(f"--weights {weights}: no such file")
    spec = ModelSpec(name, source, shape, task, version, str(weights) if weights else None, prefix,
                     description=description)
    spec = _repo().register(spec, overwrite=overwrite)
    console.print(f"registered {spec.name} v{spec.version} ({spec.memory_bytes / 2**20:.1f} MiB of parameters)")


@models_app.command("profile")
def models_profile(
    name: str = typer.Argument(..., help="A model from `vidnexus models list`."),
    device: str = typer.Option("cpu", help="cpu or cuda:N"),
    max_batch: int = typer.Option(16, min=1, max=256, help="Largest batch size to measure."),
    repeats: int = typer.Option(5, min=1, help="Timed runs per batch size."),
    threads: int = typer.Option(0, min=0, help="torch threads (0 = torch default)."),
) -> None:
    """Measure ℓ(b) for b = 1…max_batch, fit ℓ(b) = αb + β, store the profile, print a table."""
    from vidnexus.gpu_executor.profiler import profile_model, save_profile

    settings = _settings()
    prof, table = profile_model(_repo(), name, device=device, max_batch=max_batch, repeats=repeats,
                                threads=threads or None, progress=lambda b: err_console.print(f"[dim]b={b}[/]"))
    path = save_profile(settings.data_dir / "profiles", name, device, prof)
    t = Table("batch", "mean ms", "std ms", "req/s", title=f"{name} on {device}")
    for b, mean, std in table:
        t.add_row(str(b), f"{mean * 1000:.2f}", f"{std * 1000:.2f}", f"{b / mean:.1f}")
    console.print(t)
    a, bta = prof.fit()
    console.print(f"fit: ℓ(b) = {a * 1000:.3f}·b + {bta * 1000:.3f} ms   saved to {path}")


# -- streams -----------------------------------------------------------------------------------
@contextlib.contextmanager
def _registry() -> Iterator[Any]:
    """The stream registry on the configured store, closed after use."""
    from vidnexus.connectors.factory import open_store
    from vidnexus.streams.registry import StreamRegistry

    store = open_store(_settings())
    try:
        yield StreamRegistry(store)
    finally:
        store.close()


@streams_app.command("add")
def streams_add(
    name: str = typer.Argument(..., help="Stream name (letters, digits, '-', '_', '.')."),
    url: str = typer.Argument(..., help="File path, rtsp://, http(s):// (incl. HLS) or synthetic://hud?…"),
    fps: Optional[float] = typer.Option(None, callback=_finite, min=0.001, max=1000.0,
                                        help="Sample this many frames per second of video (default 1 when "
                                             "neither --every-n nor --keyframes is given)."),
    every_n: Optional[int] = typer.Option(None, min=1, max=2**32 - 1, help="Sample every n-th frame instead."),
    keyframes: bool = typer.Option(False, help="Decode and sample keyframes only (with --every-n: every n-th)."),
    app_: list[str] = typer.Option([], "--app", help="App this stream feeds (repeatable)."),
    tag: list[str] = typer.Option([], help="k=v tag (repeatable)."),
    quality: int = typer.Option(85, min=1, max=100, help="JPEG quality of published frames."),
    max_side: Optional[int] = typer.Option(None, min=16, max=16384,
                                           help="Downscale so the longer side is at most this."),
    realtime: bool = typer.Option(False, help="Pace a file at its own frame rate (as a camera would send it) "
                                  "instead of as fast as it decodes."),
    skip_corrupt: bool = typer.Option(True, help="Skip packets the decoder rejects and count them (the stream "
                                      "fails above 10% corrupt); --no-skip-corrupt ends it at the first."),
    no_probe: bool = typer.Option(False, help="Skip the reachability/probe check."),
    timeout: float = typer.Option(10.0, callback=_finite, min=0.1, max=3600.0, help="Probe timeout (s)."),
) -> None:
    """Register a stream: the URL is probed (codec, resolution, frame rate) before it is accepted."""
    from vidnexus.streams.ingest import StreamSpec

    tags = {}
    for t in tag:
        k, sep, v = t.partition("=")
        if not sep or not k:
            raise VidnexusError(f"--tag {t!r}: expected k=v")
        tags[k] = v
    spec = StreamSpec(name, url, fps=fps, every_n=every_n, keyframes_only=keyframes, apps=tuple(app_), tags=tags,
                      jpeg_quality=quality, max_side=max_side, realtime=realtime, skip_corrupt=skip_corrupt)
    with _registry() as reg:
        r = reg.add(spec, check=not no_probe, timeout_s=timeout)
    p = r.probe
    extra = f" ({p.get('kind', '?')}, {p['codec']} {p['width']}x{p['height']} @ {p['fps']:.2f} fps)" if p else ""
    console.print(f"added stream {name}{extra}")


@streams_app.command("list")
def streams_list(all_: bool = typer.Option(False, "--all", help="Include removed streams.")) -> None:
    """Registered streams."""
    t = Table("name", "state", "url", "sampling", "apps", "tags", "problem")
    with _registry() as reg:
        rows = reg.list(include_removed=all_)
    for r in rows:
        s = r.spec
        t.add_row(s.name, r.state, s.url, _sampling(s), ",".join(s.apps),
                  ",".join(f"{k}={v}" for k, v in s.tags.items()), r.problem)
    console.print(t)


def _sampling(s: Any) -> str:
    """How a stream is sampled, in words (works for rows that no longer validate)."""
    every = f"every {s.every_n}" if s.every_n else ""
    if s.keyframes_only:
        return f"keyframes{', ' + every if every else ''}"
    return every or (f"{s.fps:g} fps" if isinstance(s.fps, (int, float)) else str(s.fps))


@streams_app.command("show")
def streams_show(name: str = typer.Argument(...)) -> None:
    """One stream: registration, probe and the last status reported by ingest."""
    with _registry() as reg:
        r = reg.get(name)
        st = reg.status(name)
    console.print(f"name: {r.spec.name}\nstate: {r.state}" + (f" ({r.problem})" if r.problem else "")
                  + f"\nurl: {r.spec.url}\nsampling: {_sampling(r.spec)}\nprobe: {r.probe}", markup=False)
    if st:
        keys = ("state", "reason", "decoded", "sampled", "published", "rejected", "stale", "corrupt", "errors",
                "reconnects", "last_pts", "max_gap_s", "worker", "updated")
        console.print("ingest: " + ", ".join(f"{k}={st[k]}" for k in keys if st.get(k) not in ("", None)), markup=False)
    else:
        console.print("ingest: no status reported yet")


@streams_app.command("pause")
def streams_pause(name: str) -> None:
    """Stop ingesting a stream (running ingest workers pick this up)."""
    with _registry() as reg:
        reg.pause(name)
    console.print(f"paused {name}")


@streams_app.command("resume")
def streams_resume(name: str) -> None:
    """Resume a paused stream."""
    with _registry() as reg:
        reg.resume(name)
    console.print(f"resumed {name}")


@streams_app.command("remove")
def streams_remove(name: str) -> None:
    """Remove a stream."""
    with _registry() as reg:
        reg.remove(name)
    console.print(f"removed {name}")


@app.command()
def ingest(
    shard: str = typer.Option("0/1", help="This process's shard of the streams, i/n."),
    once: bool = typer.Option(False, help="Exit when every stream has ended (files), instead of following changes."),
    poll: float = typer.Option(2.0, callback=_finite, min=0.1, help="Seconds between registry checks."),
) -> None:
    """Ingest every enabled stream (of this shard) onto the frames topic, with live progress."""
    from vidnexus.connectors.factory import open_bus
    from vidnexus.streams.supervisor import IngestSupervisor

    try:
        i, n = (int(v) for v in shard.split("/"))
    except ValueError:
        raise VidnexusError(f"--shard {shard!r}: expected i/n with 0 <= i < n, e.g. 0/2") from None
    if not 0 <= i < n:
        raise VidnexusError(f"--shard {shard!r}: expected i/n with 0 <= i < n, e.g. 0/2 and 1/2")
    settings = _settings()
    with _registry() as registry:
        bus = open_bus(settings)
        topic = settings.topic("frames")
        bus.create_topic(topic, 8)
        sup = IngestSupervisor(registry, bus, topic, shard=i, shards=n, poll_s=poll)
        try:
            _follow_ingest(sup, once)
        finally:
            bus.close()
    failed = [s for s in sup.statuses() if s.state == "failed"]
    if failed and once:
        raise typer.Exit(1)


def _follow_ingest(sup: Any, once: bool) -> None:
    """Run the supervisor with a live table of every stream on stderr."""
    import signal

    from rich.live import Live

    from vidnexus.clock import MonotonicClock

    clock = MonotonicClock()  # the workers' clock: status times are on it

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

    signal.signal(signal.SIGTERM, lambda *a: sup.stop.set())
    with Live(table([]), console=err_console, refresh_per_second=2) as live:
        try:
            sup.run(once=once, on_tick=lambda st: live.update(table(st)))
        except KeyboardInterrupt:
            sup.stop.set()
        live.update(table(sup.statuses()))


# -- bench -------------------------------------------------------------------------------------
@app.command()
def bench(
    name: str = typer.Argument(..., help="Benchmark: drop-policies, prefix, multiplex, scheduler, latency-split, ingest, runtimes, weg or peers (needs scripts/peers-venv.sh)"),
    quick: bool = typer.Option(False, help="A reduced run (a few minutes) that checks the benchmark works."),
    json_path: Optional[Path] = typer.Option(None, "--json", help="Write the JSON result here."),
) -> None:
    """Run a benchmark: prints a table and writes JSON {name, machine, config, results, summary}."""
    from vidnexus.benchmarks import run_benchmark

    doc = run_benchmark(name, quick=quick, console=console)
    if json_path:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(doc, indent=2, default=str))
        console.print(f"wrote {json_path}")


@app.command()
def executor(
    session: list[str] = typer.Option(..., "--session", "-s",
                                      help="MODEL:SLO_MS to serve, repeatable (e.g. -s resnet18:100)."),
    device: str = typer.Option("cpu", help="cpu or cuda:N"),
    policy: str = typer.Option("early_drop", help="Batching policy: early_drop, lazy_drop or fifo."),
    weights: list[str] = typer.Option([], help="MODEL=PATH of a local state_dict with real weights."),
    threads: int = typer.Option(0, min=0, help="torch intra-op threads (0 = torch default)."),
    executor_id: Optional[str] = typer.Option(None, "--id", help="Executor id in stats and plans (default host-pid)."),
    stats_every: float = typer.Option(5.0, callback=_finite, min=0.2, help="Seconds between stats reports."),
) -> None:
    """Serve model sessions over Kafka (VNX_BUS=kafka) or the in-memory bus until SIGTERM.

    Requests arrive on <prefix>.req.<MODEL>-<SLO>ms; replies go to each request's reply-to topic;
    stats go to <prefix>.stats every 5 s; Prometheus on VNX_METRICS_PORT when set."""
    from vidnexus.gpu_executor.policies import POLICIES
    from vidnexus.gpu_executor.serve import parse_session, serve

    if policy not in POLICIES:
        raise VidnexusError(f"unknown policy {policy!r}; choose one of {sorted(POLICIES)}")
    wmap = {}
    for w in weights:
        m, sep, path = w.partition("=")
        if not sep:
            raise VidnexusError(f"--weights {w!r}: expected MODEL=PATH")
        wmap[m] = Path(path)
    if threads:
        import torch

        torch.set_num_threads(threads)
    sessions = [parse_session(s) for s in session]
    serve(_settings(), sessions, device=device, policy=policy, weights=wmap, executor_id=executor_id,
          stats_every_s=stats_every,
          ready=lambda: err_console.print(f"executor: serving {', '.join(s.session_id for s in sessions)}"))


@app.command()
def scheduler(
    epoch: float = typer.Option(30.0, callback=_finite, min=0.5, help="Seconds between epochs."),
    min_epoch: float = typer.Option(10.0, callback=_finite, min=0.1, help="Never re-plan more often than this."),
    change: float = typer.Option(0.5, callback=_finite, min=0.0, help="Relative rate change that triggers an early epoch."),
    retire_idle: float = typer.Option(120.0, callback=_finite, min=0.0, help="Seconds without a request after which a session a plan "
                                      "created is no longer assigned; executors then retire it (3 epochs later) "
                                      "and unload models no session uses."),
) -> None:
    """The control plane: every epoch, plan sessions onto live executors (squishy bin packing,
    incremental) from their stats, and publish the plan to <prefix>.control."""
    import signal

    from vidnexus.connectors.factory import open_bus
    from vidnexus.gpu_executor.scheduler import SchedulerService

    settings = _settings()
    bus = open_bus(settings)

    def show(doc: dict[str, Any]) -> None:
        err_console.print(f"scheduler: epoch {doc['epoch']}: {doc['devices']} executor(s), moved {doc['moved']}, "
                          f"assignments {doc['assignments']}, infeasible {doc['infeasible'] or 'none'}")
        for a, sp in doc.get("splits", {}).items():
            err_console.print(f"scheduler: app {a}: " + (f"split {sp['budgets_ms']} ms (even {sp['even_ms']}), "
                                                       f"γ {sp['gamma']}, gain {sp['gain']}" if sp["ok"] else sp["reason"]))

    svc = SchedulerService(bus, settings, epoch_s=epoch, min_epoch_s=min_epoch, change=change, on_plan=show,
                           retire_idle_s=retire_idle)
    signal.signal(signal.SIGTERM, lambda *a: svc.stop.set())
    signal.signal(signal.SIGINT, lambda *a: svc.stop.set())
    err_console.print("scheduler: running")
    svc.run()
    bus.close()


@app.command()
def worker(
    app_ref: str = typer.Argument(..., metavar="APP",
                                  help="A built-in app name (hud) or package.module:attribute of an App."),
    concurrency: int = typer.Option(32, min=1, help="Frames in flight (one stream's frames stay in order "
                                                      "when the chain has a window)."),
    partitions: int = typer.Option(8, min=1, help="Partitions of the frames and rows topics if they are created."),
    split: list[str] = typer.Option([], help="MODEL=MS: pin a stage SLO (default: the app's SLO split evenly "
                                                "over its DNN depth, then the scheduler's latency split)."),
    log_level: str = typer.Option("warning", help="faust log level."),
    stall_restart: float = typer.Option(30.0, callback=_finite, min=0.0, help="Restart the worker process (same pid) when frames "
                                        "wait on its partitions and none reached it for this many seconds "
                                        "with none in flight (a stalled consumer); 0 disables."),
) -> None:
    """Run an app's operator chain as a faust-streaming worker over Kafka (distributed mode).

    Consumes <prefix>.frames in consumer group <prefix>-app-<APP> (start more workers to share
    the partitions), calls the executors over Kafka, publishes rows to <prefix>.rows for
    `vidnexus sink`, and reports the app's DNN graph and fan-out to <prefix>.apps. A stalled
    consumer is restarted in place (see --stall-restart); frames resume from the last commit."""
    from vidnexus.operators.chain import load_app
    from vidnexus.operators.faust_runtime import run_worker

    settings = _settings()
    if settings.bus != "kafka":
        raise VidnexusError("vidnexus worker runs on Kafka: set VNX_BUS=kafka (the local runtime is `vidnexus demo`)")
    the_app = load_app(app_ref)
    stage = {}
    for item in split:
        m, sep, ms = item.partition("=")
        try:
            stage[m] = float(ms)
        except ValueError:
            sep = ""
        if not sep or m not in the_app.models:
            raise VidnexusError(f"--split {item!r}: expected MODEL=MS with a model of app {the_app.name} "
                                f"({', '.join(the_app.models)})")
    err_console.print(f"worker: app {the_app.name}, chain of {len(the_app.steps())} steps, "
                      f"models {', '.join(the_app.models) or 'none'}")

    def restart(reason: str) -> None:
        import os

        err_console.print(f"worker: stalled ({reason}); restarting")
        sys.stderr.flush()
        os.execv(sys.executable, [sys.executable, "-m", "vidnexus", *sys.argv[1:]])

    run_worker(the_app, settings, concurrency=concurrency, partitions=partitions, split=stage or None,
               loglevel=log_level, on_ready=lambda: err_console.print(f"worker: app {the_app.name} started"),
               stall_s=stall_restart, on_stall=restart)


@app.command()
def sink(
    max_rows: int = typer.Option(5000, min=1, help="Insert when this many rows are buffered."),
    max_delay: float = typer.Option(1.0, callback=_finite, min=0.01, help="Insert rows buffered for this many seconds."),
    group: Optional[str] = typer.Option(None, help="Consumer group (default <prefix>-sink)."),
) -> None:
    """Write the rows workers publish on <prefix>.rows into the store (distributed mode).

    Batched by size and time; offsets are committed after each insert, so a crash replays rows,
    and app tables (ReplacingMergeTree on each row's identity) count them once."""
    import signal
    import threading

    from vidnexus.connectors.factory import open_bus
    from vidnexus.connectors.factory import open_store
    from vidnexus.operators.sink_role import RowsSink

    settings = _settings()
    bus, store = open_bus(settings), open_store(settings)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: stop.set())
    signal.signal(signal.SIGINT, lambda *a: stop.set())
    role = RowsSink(bus, store, settings, group=group, max_rows=max_rows, max_delay_s=max_delay)
    err_console.print(f"sink: {role.topic} → {settings.store}")
    try:
        st = role.run(stop)
        err_console.print(f"sink: stopped after {st.rows} rows in {st.inserts} inserts ({st.dead} dead-lettered)")
    finally:
        store.close()
        bus.close()


@app.command("sql-server")
def sql_server(
    host: str = typer.Option("127.0.0.1", help="Address to bind."),
    port: int = typer.Option(8124, min=0, max=65535, help="Port (0: any free port, printed at start)."),
    token: Optional[str] = typer.Option(None, help="Bearer token clients must send (≥ 16 characters) "
                                                   "[env: VNX_SQL_TOKEN]; when absent one is generated into "
                                                   "<data dir>/sql-token (mode 600)."),
    max_rows: int = typer.Option(10_000, min=1, help="Rows returned at most per query."),
    timeout: float = typer.Option(10.0, callback=_finite, min=1.0, max=3600.0, help="Seconds a query may run."),
) -> None:
    """Serve the store read-only over HTTP: POST /sql with the query as the body.

    One statement, decided on ClickHouse's parse tree: SELECT/WITH, SHOW TABLES, SHOW CREATE
    TABLE, DESCRIBE, EXISTS, EXPLAIN over the project's tables, allow-listed functions only; the
    rest is refused (403). A wrong token is 401, repeated wrong tokens 429 (docs/operators.md#sql)."""
    from vidnexus.connectors.factory import open_store
    from vidnexus.sql_endpoint import EndpointLimits, SqlEndpoint

    settings = _settings()
    token = token or settings.sql_token
    if token is None:
        import os
        import secrets

        token = secrets.token_urlsafe(24)
        path = settings.data_dir / "sql-token"
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(token + "\n")
        err_console.print(f"sql-server: no token given (--token or VNX_SQL_TOKEN); generated one into {path}")
    store = open_store(settings, reader=True)
    ep = SqlEndpoint(store, token, host, port, EndpointLimits(max_rows=max_rows, timeout_s=timeout))
    err_console.print(f"sql-server: http://{ep.address[0]}:{ep.address[1]}/sql (read-only)")
    try:
        ep.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        store.close()


@app.command()
def config() -> None:
    """Show the effective settings and the environment variable for each."""
    s = _settings()
    t = Table("setting", "env", "value", "meaning")
    for name, f in Settings.model_fields.items():
        value = getattr(s, name)
        shown = "(set, hidden)" if name == "sql_token" and value else str(value)
        t.add_row(name, f"VNX_{name.upper()}", shown, (f.description or "").strip())
    console.print(t)


@app.command()
def version() -> None:
    """Print the vidnexus version."""
    from importlib.metadata import version as v

    console.print(v("vidnexus"))


def _error(message: str) -> None:
    """One line on stderr, never wrapped, no markup read from the message."""
    from rich.text import Text

    line = " ".join(str(message).split())
    err_console.print(Text("error: ", style="red") + Text(line), soft_wrap=True, highlight=False)


def run(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``) and return its exit code.

    Every usage or validation error is one line on stderr and exit code 2; an unexpected failure is
    one line and exit code 1; tracebacks only with ``--debug`` (anywhere on the line) or
    ``VNX_DEBUG=1``.
    """
    import os

    from typer._click import exceptions as typer_click

    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args or os.environ.get("VNX_DEBUG", "").strip().lower() in ("1", "true", "yes", "on")
    args = [a for a in args if a != "--debug"]
    try:
        rc = app(args=args, prog_name="vidnexus", standalone_mode=False)  # the code of a command's typer.Exit
        return rc if isinstance(rc, int) else 0
    except typer_click.NoArgsIsHelpError as e:  # `vidnexus streams` alone: its help
        e.show()
        return 0
    except typer_click.ClickException as e:  # usage errors: missing argument, bad value, unknown option
        if debug:
            raise
        hint = f" (see '{e.ctx.command_path} --help')" if isinstance(e, typer_click.UsageError) and e.ctx else ""
        _error(e.format_message() + hint)
        return 2
    except VidnexusError as e:
        if debug:
            raise
        _error(str(e))
        return 2
    except typer.Exit as e:
        return e.exit_code
    except (typer.Abort, KeyboardInterrupt):
        return 130
    except Exception as e:
        if debug:
            raise
        _error(f"unexpected {type(e).__name__}: {e} (run with --debug for the traceback)")
        return 1


def main() -> None:
    """Entry point: one-line errors for user mistakes, non-zero exit codes."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # Client libraries log connection failures with tracebacks; we report them in one line instead.
    for noisy in ("clickhouse_driver", "kafka"):
        logging.getLogger(noisy).setLevel(logging.CRITICAL)
    sys.exit(run())
