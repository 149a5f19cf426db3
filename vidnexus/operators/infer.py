"""Where an app's ``infer`` steps go: the in-process executor (local runtime) or executor services
over the bus (distributed runtime). Both ask the same kind of session: ``<model>-<stage SLO>ms``,
with the request's deadline at the frame's ingest time plus the app's end-to-end SLO, so a request
that can no longer make it is dropped early by the executor and accounted by the chain."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Sequence

from vidnexus.clock import Clock, MonotonicClock, wall_time
from vidnexus.gpu_executor.service import session_name
from vidnexus.operators.chain import App, Model
from vidnexus.operators.engine import Reply

if TYPE_CHECKING:
    from vidnexus.config import Settings
    from vidnexus.gpu_executor.client import ExecutorClient
    from vidnexus.gpu_executor.executor import Executor

__all__ = ["stage_slos", "LocalBackend", "RemoteBackend", "build_local_executor"]


def stage_slos(app: App, split: dict[str, float] | None = None) -> dict[str, float]:
    """Per-model SLO in ms: the latency split's budgets when given (from the scheduler's query
    analysis), else the app's SLO divided evenly over the depth of its DNN graph."""
    g = app.graph()
    even = app.slo_ms / max(1, g.depth())
    return {m: float((split or {}).get(m, even)) for m in g.models}


def session_of(model: str, slos: dict[str, float]) -> str:
    return session_name(model, round(slos[model], 3))


def build_local_executor(app: App, settings: "Settings", *, device: str = "cpu", workers: int = 2,
                         clock: Clock | None = None) -> tuple["Executor", dict[str, float]]:
    """An in-process executor serving one session per model of ``app`` (models loaded, profiled
    and warmed up). Returns it (started) and the stage SLOs it serves."""
    from vidnexus.gpu_executor.backend import SessionSpec
    from vidnexus.gpu_executor.executor import Executor
    from vidnexus.gpu_executor.serve import prefix_batching, prepare_models

    slos = stage_slos(app)
    models = list(slos)
    loaders = {m: app.models[m].loader for m in models if app.models[m].loader is not None}
    shapes = {m: app.models[m].input_shape for m in loaders}
    missing = [m for m in loaders if shapes[m] is None]
    if missing:
        raise ValueError(f"app {app.name}: models {missing} have a loader but no input_shape")
    runners, profiles = prepare_models(settings, models, device, loaders=loaders,  # type: ignore[arg-type]
                                       shapes=shapes)  # type: ignore[arg-type]
    specs = [SessionSpec(session_of(m, slos), m, slos[m] / 1000) for m in models]
    groups, group_runners = prefix_batching(runners, device)
    ex = Executor(specs, runners, profiles, clock=clock or MonotonicClock(), workers=workers,
                  prefix_groups=groups, group_runners=group_runners).start()
    return ex, slos


class LocalBackend:
    """``infer`` through an in-process :class:`~vidnexus.gpu_executor.executor.Executor`."""

    def __init__(self, app: App, executor: "Executor", slos: dict[str, float], clock: Clock | None = None) -> None:
        self.app, self.executor, self.slos = app, executor, slos
        self.clock = clock or executor.clock

    async def infer(self, model: Model, inputs: Sequence[Any], deadline_wall: float) -> list[Reply]:
        sid = session_of(model.name, self.slos)
        # The executor's deadlines are on its monotonic clock; convert the wall-clock deadline once.
        deadline = self.clock.now() + (deadline_wall - wall_time())
        futs = [asyncio.wrap_future(self.executor.submit(sid, x, deadline)) for x in inputs]
        return [Reply(r.ok, r.output, r.reason) for r in await asyncio.gather(*futs)]


class RemoteBackend:
    """``infer`` through executor services over the bus (:class:`ExecutorClient`)."""

    def __init__(self, app: App, client: "ExecutorClient", slos: dict[str, float], grace_s: float = 5.0) -> None:
        self.app, self.client, self.slos, self.grace_s = app, client, slos, grace_s

    async def infer(self, model: Model, inputs: Sequence[Any], deadline_wall: float) -> list[Reply]:
        """Requests not answered by ``grace_s`` after their deadline (no executor consumes the
        session, or one died holding them) end as drops with reason ``timeout``."""
        sid = session_of(model.name, self.slos)
        cfuts = [self.client.submit(sid, x, deadline_wall=deadline_wall) for x in inputs]
        futs = [asyncio.wrap_future(f) for f in cfuts]
        wait_s = max(0.0, deadline_wall - wall_time()) + self.grace_s
        done, pending = await asyncio.wait(futs, timeout=wait_s)
        for f, cf in zip(futs, cfuts):
            if f in pending:
                cf.cancel()
                f.cancel()
        out = []
        for f in futs:
            if f in done and not f.cancelled():
                r = f.result()
                out.append(Reply(r.ok, r.output, r.reason))
            else:
                out.append(Reply(False, reason="timeout"))
        return out
