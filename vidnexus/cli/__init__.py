"""The ``vidnexus`` command. Settings come from ``VNX_*`` environment variables (see
``vidnexus config``); options given on the command line take precedence."""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table

from vidnexus.benchmarks import BENCHMARKS
from vidnexus.cli import roles
from vidnexus.cli.common import (RepeatFilter, console, console_tokens, err_console, finite, print_result, settings,
                                 write_private)
from vidnexus.cli.streams import streams_app
from vidnexus.config import Settings
from vidnexus.errors import VidnexusError

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
app.add_typer(services_app, name="services")
app.add_typer(models_app, name="models")
app.add_typer(streams_app, name="streams")
roles.register(app)


@app.callback()
def _global_options(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks instead of one-line errors "
                               "(anywhere on the command line) [env: VNX_DEBUG=1]."),
) -> None:
    """Video analytics over Kafka with SLO-driven DNN batching and SQL over results."""


# -- services ----------------------------------------------------------------------------------
@services_app.command("up")
def services_up(
    only: Optional[str] = typer.Option(None, help="Start just one service: kafka or clickhouse."),
) -> None:
    """Install (cached) and start the services; wait until each answers. Idempotent."""
    from vidnexus.services import all_services

    services = all_services(settings())
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

    for svc in reversed(all_services(settings())):
        console.print(f"{svc.name}: {'stopped' if svc.stop() else 'was not running'}")


@services_app.command("status")
def services_status() -> None:
    """Show whether each service is running; exit code 1 if any is not."""
    from vidnexus.services import all_services

    ok = True
    for svc in all_services(settings()):
        st = svc.status()
        ok &= st.running
        state = "running" if st.running else st.detail
        console.print(f"{st.name}: {state} on {st.address}" + (f" (pid {st.pid})" if st.pid else ""))
    raise typer.Exit(0 if ok else 1)




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
    timeout: float = typer.Option(30.0, callback=finite, min=1.0, max=86400.0, help="Seconds the query may run."),
) -> None:
    """Run one SQL statement against the configured store (embedded chdb by default, or the
    ClickHouse server). Read-only unless --write: the statement is checked on ClickHouse's own
    parse tree (docs/operators.md#sql) and runs with readonly=1 and limits."""
    from vidnexus.connectors.factory import open_store
    from vidnexus.sql_guard import SqlGuard, SqlLimits

    if fmt not in ("table", "csv", "json"):
        raise VidnexusError(f"--format {fmt!r}: use table, csv or json")
    s = open_store(settings(store=store), reader=not write)
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
    """The model repository: the zoo, the built-in apps' models and the registered ones (in the
    ClickHouse server with VNX_STORE=clickhouse, shared by every host; else in the data directory)."""
    from vidnexus.roles.executor import repository

    return repository(settings())


@models_app.command("list")
def models_list() -> None:
    """Every model the executors can serve, with where its weights come from: zoo architectures
    (random weights: load generators for benchmarks, they recognise nothing), the apps' models
    (trained by the project on first use, or shipped in a package) and registered models."""
    repo = _repo()
    t = Table("name", "version", "task", "input", "source", "description", "weights")
    for m in repo.list():
        t.add_row(m.name, str(m.version), m.task, "×".join(map(str, m.input_shape)), m.source,
                  m.description, repo.weights_of(m))
    console.print(t)


@models_app.command("show")
def models_show(name: str = typer.Argument(..., help="Model name."),
                version: Optional[int] = typer.Option(None, help="Version (default: latest).")) -> None:
    """Show one model and its stored profiles."""
    from dataclasses import asdict

    from vidnexus.contracts.profile import Profile

    repo = _repo()
    spec = repo.get(name, version)
    for k, v in asdict(spec).items():
        console.print(f"{k:>13}: {v}")
    console.print(f"{'weights from':>13}: {repo.weights_of(spec)}")
    for path in sorted((settings().data_dir / "profiles").glob(f"{name}@*.json")):
        prof = Profile.from_dict(json.loads(path.read_text()))
        a, b = prof.fit()
        console.print(f"      profile: {path.stem.split('@')[1]}: batches {prof.sizes[0]}…{prof.max_batch}, "
                      f"ℓ(b) ≈ {a * 1000:.3f}·b + {b * 1000:.3f} ms")


@models_app.command("variants")
def models_variants(
    name: str = typer.Argument(..., help="A task with a variant catalog: glyph120 (the game app's 120-class icon task)."),
    rate: list[float] = typer.Option([], help="A session's request rate (req/s); repeat for each session. With "
                                     "rates, prints the variant each session gets under the budgets."),
    device_budget: Optional[float] = typer.Option(None, callback=finite, help="Device-seconds per second all the "
                                                  "sessions may use (1 = one whole device; default: unbounded)."),
    memory_budget_mb: Optional[float] = typer.Option(None, callback=finite, help="Megabytes of model memory all the "
                                                     "sessions may hold (default: unbounded)."),
    batch: int = typer.Option(16, min=1, help="The batch the cost per request is read at (ℓ(b)/b)."),
) -> None:
    """The task's model variants (MCDNN): held-out accuracy, cost per request, memory and load time,
    measured once on this machine (the first call trains the glyph models if they are not cached: about
    two minutes). With --rate, the most accurate variant each session can run within its share of
    the budgets (shares in proportion to rate)."""
    from vidnexus.control.variants import Budgets, TaskSession, catalog_of, choose_variants, shares
    from vidnexus.training.variants import TASK, load_or_measure

    if name != TASK:
        raise VidnexusError(f"no variant catalog for {name!r}; tasks with one: {TASK}")
    if any(not (0 <= r < float("inf")) for r in rate):
        raise VidnexusError("--rate: a request rate must be ≥ 0 and finite")
    if any(b is not None and b <= 0 for b in (device_budget, memory_budget_mb)):
        raise VidnexusError("--device-budget and --memory-budget-mb must be > 0")
    measured = load_or_measure(settings().data_dir / "models")
    t = Table("variant", "architecture", "precision", "held-out accuracy", f"ms/request (b={batch})", "memory MB",
              "load ms", title=f"{TASK}: variants measured on this machine (one torch thread)")
    for m in measured:
        t.add_row(m.name, m.arch, m.precision, f"{m.accuracy:.4f}", f"{1000 * m.cost_s(batch):.3f}",
                  f"{m.memory_bytes / 1e6:.2f}", f"{1000 * m.load_s:.1f}")
    console.print(t)
    if not rate:
        return
    catalog = catalog_of(measured, batch)
    sessions = [TaskSession(f"s{i}", TASK, r) for i, r in enumerate(rate)]
    budgets = Budgets(device_budget if device_budget is not None else float("inf"),
                      memory_budget_mb * 1e6 if memory_budget_mb is not None else float("inf"))
    share = shares(sessions, budgets)
    c = Table("session", "req/s", "device share", "memory share MB", "variant", "accuracy", "fits",
              title="the most accurate variant within each session's share")
    for s, ch in zip(sessions, choose_variants({TASK: catalog}, sessions, budgets)):
        dev, mem = share[s.session_id]
        c.add_row(s.session_id, f"{s.rate:g}", f"{dev:.4g}", f"{mem / 1e6:.4g}", ch.variant, f"{ch.accuracy:.4f}",
                  "yes" if ch.fits else "no (the cheapest runs)")
    console.print(c)


@models_app.command("layerwise")
def models_layerwise(
    name: str = typer.Argument("mobilenet_v3_small", help="A zoo CNN cut into layer groups: mobilenet_v3_small or "
                               "resnet18 (random weights: compute cost)."),
    rate: float = typer.Option(100.0, callback=finite, min=0.1, help="Poisson arrivals per second."),
    deadline_ms: float = typer.Option(150.0, callback=finite, min=1.0, help="Each request's deadline after arrival."),
    seconds: float = typer.Option(5.0, callback=finite, min=0.5, max=600.0, help="Length of the trace."),
    groups: int = typer.Option(5, min=1, max=16, help="Layer groups to cut the model into."),
    max_batch: int = typer.Option(16, min=1, max=256, help="The largest batch a group runs (and is profiled at)."),
    device: str = typer.Option("cpu", help="cpu or cuda[:N]."),
    threads: int = typer.Option(1, min=0, help="torch intra-op threads (0 = torch default)."),
) -> None:
    """Layer-wise batching served for real on this machine (the edge-serving paper): the model's
    layer groups are profiled (h_k(b)), then the same Poisson trace is served with each policy —
    layer-wise (requests join a running batch at the next group), layer-wise tardy-aware, and
    model-level batches with early drop — and the share on time and the mean completion are
    printed (docs/control-plane.md#layer-wise-batching)."""
    import numpy as np

    from vidnexus.benchmarks.openloop import drive
    from vidnexus.gpu_executor.layerwise_server import SERVED_POLICIES, LayerwiseServer, StagedRunner, staged_zoo_model
    from vidnexus.sim.loadgen import poisson_arrivals

    if threads:
        import torch

        torch.set_num_threads(threads)
    try:
        mods, shape = staged_zoo_model(name, groups)
    except ValueError as e:
        raise VidnexusError(str(e)) from None
    runner = StagedRunner(name, mods, device, postprocess=lambda t: None)
    x = np.random.default_rng(0).random(shape, dtype=np.float32)
    sizes = sorted({1, 2, 4, 8, max_batch} & set(range(1, max_batch + 1)))
    err_console.print(f"profiling {len(runner)} layer groups of {name} at batches {sizes} …")
    h = runner.profile(x, sizes)
    t = Table("group", *(f"h({b}) ms" for b in sizes), title=f"{name}: layer groups on {device}")
    for k, p in enumerate(h):
        t.add_row(str(k), *(f"{1000 * p.latency(b):.2f}" for b in sizes))
    console.print(t)
    trace = poisson_arrivals(rate, seconds, seed=1)
    out = Table("policy", "requests", "on time", "dropped", "mean completion ms",
                title=f"{len(trace)} requests at {rate:g}/s, deadline {deadline_ms:g} ms")
    for policy in SERVED_POLICIES:
        server = LayerwiseServer(runner, h, policy=policy).start()
        try:
            res = drive(trace, lambda a: server.submit(x, slo_s=deadline_ms / 1000))
        finally:
            server.stop()
        ok = [r for _, r in res if r.ok]
        on_time = sum(1 for r in ok if r.latency_s <= deadline_ms / 1000)
        mean = 1000 * sum(r.latency_s for r in ok) / len(ok) if ok else float("nan")
        out.add_row(policy, str(len(res)), f"{on_time / max(1, len(res)):.3f}", str(len(res) - len(ok)), f"{mean:.2f}")
    console.print(out)


@models_app.command("register")
def models_register(
    name: str = typer.Argument(..., help="Name to register the model under."),
    source: str = typer.Option(..., "--from", help="zoo:ARCH, factory:pkg.module:function, torchscript:PATH or "
                               "onnx:PATH (classify, embed or text; a dynamic batch dimension). With VNX_STORE=clickhouse "
                               "the file is copied into the server: every executor and worker on every host sees "
                               "the model."),
    input_shape: str = typer.Option(..., "--input", help="Input shape without batch, e.g. 3x224x224"),
    task: str = typer.Option("classify", help="classify, detect, pose, embed or text (a row of per-step scores per input)"),
    version: int = typer.Option(1, min=1, help="Version number."),
    weights: Optional[Path] = typer.Option(None, help="Local state_dict file with real weights."),
    prefix: Optional[str] = typer.Option(None, help="Declare a shared-prefix group (prefix batching)."),
    images: Optional[str] = typer.Option(None, help=("Clients send uint8 images or JPEG frames: rgb, bgr or gray "
                                                     "(the executor resizes them to --input and scales to [0, 1]); "
                                                     "default: float tensors of --input.")),
    description: str = typer.Option("", help="Free text."),
    overwrite: bool = typer.Option(False, help="Replace an existing name+version."),
) -> None:
    """Register a model: it is loaded once and run on one input to check the shape (an ONNX model
    also a batch of two)."""
    from vidnexus.gpu_executor.repository import ModelSpec

    try:
        shape = tuple(int(d) for d in input_shape.lower().split("x"))
    except ValueError:
        raise VidnexusError(f"--input {input_shape!r}: expected dimensions like 3x224x224") from None
    if weights is not None and not weights.exists():
        raise VidnexusError(f"--weights {weights}: no such file")
    kind, sep, ref = source.partition(":")
    if kind in ("torchscript", "onnx") and sep:
        if not Path(ref).is_file():
            raise VidnexusError(f"--from {source!r}: no such file")
        source = f"{kind}:{Path(ref).resolve()}"
    spec = ModelSpec(name, source, shape, task, version, str(weights) if weights else None, prefix,
                     description=description, images=images)
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
    """Measure ℓ(b) for b = 1…max_batch, fit ℓ(b) = αb + β, store the profile, print a table.

    Executors on this data directory with the same device, CPU, library versions and thread count
    (give them the same --threads) use it instead of measuring batches 1-8 themselves, and plans
    may then use batches up to max_batch."""
    from vidnexus.gpu_executor.profiler import profile_env, profile_model, save_profile

    repo = _repo()
    prof, table = profile_model(repo, name, device=device, max_batch=max_batch, repeats=repeats,
                                threads=threads or None, progress=lambda b: err_console.print(f"[dim]b={b}[/]"))
    # Keyed as the executor looks it up: with the model's version.
    path = save_profile(settings().data_dir / "profiles", name, device, prof, profile_env(device, repo.get(name).version))
    t = Table("batch", "mean ms", "std ms", "req/s", title=f"{name} on {device}")
    for b, mean, std in table:
        t.add_row(str(b), f"{mean * 1000:.2f}", f"{std * 1000:.2f}", f"{b / mean:.1f}")
    console.print(t)
    a, bta = prof.fit()
    console.print(f"fit: ℓ(b) = {a * 1000:.3f}·b + {bta * 1000:.3f} ms   saved to {path}")


# -- bench -------------------------------------------------------------------------------------
@app.command()
def bench(
    name: str = typer.Argument(..., help=(f"Benchmark: {', '.join(BENCHMARKS)} (runtimes, hop, sink, soak, apps and "
                                         "peers need the broker, sink, soak and apps also the server: "
                                         "vidnexus services up; broker-jvm starts brokers of its own; "
                                         "peers and peers-real need scripts/peers-venv.sh)")),
    quick: bool = typer.Option(False, help="A reduced run (a few minutes) that checks the benchmark works."),
    json_path: Optional[Path] = typer.Option(None, "--json", help="Write the JSON result here."),
) -> None:
    """Run a benchmark: prints a table and writes JSON {name, machine, config, results, summary}."""
    from vidnexus.benchmarks import run_benchmark

    # SIGTERM ends the run as Ctrl-C does, through every ``finally``: the servers and processes a
    # benchmark started (a peer's Triton server, an executor, an echo) are stopped, not left running.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    doc = run_benchmark(name, quick=quick, console=console)
    if json_path:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(doc, indent=2, default=str))
        console.print(f"wrote {json_path}")


@app.command("sql-server")
def sql_server(
    host: str = typer.Option("127.0.0.1", help="Address to bind."),
    port: int = typer.Option(8124, min=0, max=65535, help="Port (0: any free port, printed at start)."),
    token: Optional[str] = typer.Option(None, help="Bearer token clients must send (≥ 16 characters) "
                                                   "[env: VNX_SQL_TOKEN]; when absent one is generated into "
                                                   "<data dir>/sql-token (mode 600)."),
    max_rows: int = typer.Option(10_000, min=1, help="Rows returned at most per query."),
    timeout: float = typer.Option(10.0, callback=finite, min=1.0, max=3600.0, help="Seconds a query may run."),
) -> None:
    """Serve the store read-only over HTTP: POST /sql with the query as the body.

    One statement, decided on ClickHouse's parse tree: SELECT/WITH, SHOW TABLES, SHOW CREATE
    TABLE, DESCRIBE, EXISTS, EXPLAIN over the project's tables, allow-listed functions only; the
    rest is refused (403). A wrong token is 401, repeated wrong tokens 429 (docs/operators.md#sql)."""
    from vidnexus.connectors.factory import open_store
    from vidnexus.sql_endpoint import EndpointLimits, SqlEndpoint

    cfg = settings()
    token = token or cfg.sql_token
    if token is None:
        import secrets

        token = secrets.token_urlsafe(24)
        path = cfg.data_dir / "sql-token"
        # Said before the file appears: whoever finds the file has the line too.
        err_console.print(f"sql-server: no token given (--token or VNX_SQL_TOKEN); generated one into {path}")
        write_private(path, token + "\n")
    elif len(token) < 16:
        raise VidnexusError("the SQL endpoint token must be at least 16 characters")
    store = open_store(cfg, reader=True)
    try:
        ep = SqlEndpoint(store, token, host, port, EndpointLimits(max_rows=max_rows, timeout_s=timeout))
        err_console.print(f"sql-server: http://{ep.address[0]}:{ep.address[1]}/sql (read-only)")
        # SIGTERM (docker stop, Kubernetes) and Ctrl-C end it cleanly: requests in progress finish.
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *a: stop.set())
        ep.start()
        while not stop.wait(0.5):
            pass
        ep.stop()
        err_console.print("sql-server: stopped")
    finally:
        store.close()


@app.command("console")
def console_(
    host: str = typer.Option("127.0.0.1", help="Address to bind."),
    port: int = typer.Option(8125, min=0, max=65535, help="Port (0: any free port, printed at start)."),
) -> None:
    """Serve the console's HTTP API over the store: streams (add, list, show, pause, resume, remove),
    apps, models, the scheduler's current plan (with VNX_BUS=kafka), recent drops by reason and
    read-only SQL, under /api/v1 (OpenAPI document at /api/v1/openapi.json; docs/api.md).

    Reads take the read token or the admin token, changes only the admin token (Authorization:
    Bearer TOKEN); the tokens come from VNX_CONSOLE_TOKEN and VNX_CONSOLE_ADMIN_TOKEN, else from
    <data dir>/console-token and console-admin-token (generated there, mode 600, when absent).
    With the embedded store, serve it from the process that holds it: `vidnexus run --console-port`."""
    from vidnexus.connectors.factory import open_bus, open_store
    from vidnexus.roles.console import ConsoleServer
    from vidnexus.roles.executor import repository

    cfg = settings()
    tokens = console_tokens(cfg, "console")
    store = open_store(cfg)
    watcher, bus, sql_store, tap = None, None, None, None
    try:
        if cfg.store == "clickhouse":  # /sql as the server's read-only user, like `vidnexus sql-server`
            sql_store = open_store(cfg, reader=True)
        if cfg.bus == "kafka":
            from vidnexus.contracts.topics import Topics
            from vidnexus.roles.console import ControlWatcher
            from vidnexus.roles.console_pages import FrameTap

            bus = open_bus(cfg)
            watcher = ControlWatcher(bus, Topics(cfg.topic_prefix))
            tap = FrameTap(bus, Topics(cfg.topic_prefix))
        srv = ConsoleServer(store, tokens, host, port, control=watcher, repository=lambda: repository(cfg),
                            sql_store=sql_store, tap=tap).start()
        err_console.print(f"console: {srv.url}/ (API: {srv.url}/api/v1, OpenAPI: {srv.url}/api/v1/openapi.json)")
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *a: stop.set())
        while not stop.wait(0.5):
            pass
        srv.stop()
        err_console.print("console: stopped")
    finally:
        if watcher is not None:
            watcher.close()
        if tap is not None:
            tap.close()
        if bus is not None:
            bus.close()
        if sql_store is not None:
            sql_store.close()
        store.close()


@app.command()
def config() -> None:
    """Show the effective settings and the environment variable for each."""
    s = settings()
    t = Table("setting", "env", "value", "meaning")
    for name, f in Settings.model_fields.items():
        value = getattr(s, name)
        shown = "(set, hidden)" if name.endswith("token") and value else str(value)
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
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        handler.addFilter(RepeatFilter())
    # Client libraries log connection failures with tracebacks; we report them in one line instead.
    for noisy in ("clickhouse_driver", "kafka"):
        logging.getLogger(noisy).setLevel(logging.CRITICAL)
    sys.exit(run())
