"""Where an app's ``infer`` steps go: executor sessions over the bus (in-memory in embedded mode,
Kafka in distributed mode), ``<model>-<stage SLO>ms``, with the request's deadline at the frame's
ingest time plus the app's end-to-end SLO, so a request that can no longer make it is dropped early
by the executor and accounted by the chain."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Sequence

from vidnexus.contracts.replies import Reply
from vidnexus.contracts.sessions import SessionKey
from vidnexus.operators.chain import App, Model

if TYPE_CHECKING:
    from vidnexus.gpu_executor.client import ExecutorClient

__all__ = ["stage_slos", "session_of", "RemoteBackend"]


def stage_slos(app: App, split: dict[str, float] | None = None) -> dict[str, float]:
    """Per-model SLO in ms: the latency split's budgets when given (from the scheduler's query
    analysis), else the app's SLO divided evenly over the depth of its DNN graph."""
    g = app.graph()
    even = app.slo_ms / max(1, g.depth())
    return {m: float((split or {}).get(m, even)) for m in g.models}


def session_of(model: str, slos: dict[str, float]) -> str:
    return str(SessionKey(model, slos[model]))


class RemoteBackend:
    """``infer`` through executor services over the bus (:class:`ExecutorClient`)."""

    def __init__(self, app: App, client: "ExecutorClient", slos: dict[str, float], grace_s: float = 5.0) -> None:
        self.app, self.client, self.slos, self.grace_s = app, client, slos, grace_s

    async def infer(self, model: Model, inputs: Sequence[Any], deadline_wall: float) -> list[Reply]:
        """Requests not answered by ``grace_s`` after their deadline (no executor consumes the
        session, or one died holding them) end as drops with reason ``timeout``: the client gives
        up on them on its clock, so every future here ends."""
        sid = session_of(model.name, self.slos)
        expires = deadline_wall + self.grace_s
        cfuts = [self.client.submit(sid, x, deadline_wall=deadline_wall, expires_wall=expires) for x in inputs]
        return list(await asyncio.gather(*(asyncio.wrap_future(f) for f in cfuts)))
