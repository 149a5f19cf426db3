"""Where an app's ``infer`` steps go: executor sessions over the bus (in-memory in embedded mode,
Kafka in distributed mode), ``<model>-<stage SLO>ms``.

Each request carries its stage's deadline (:func:`stage_deadline`): the stage's budget from the
latency split — the executor's share, since the split reserved the bus hops and CPU steps apart —
plus the session's bus round trip as the client measured it, counted from when the stage is
issued, and never past the frame's end-to-end deadline less the CPU steps after the stage until
the next one or the sink (the engine measures those); then less the reply's trip back (the
client's ``reply_reserve_s``: half the round trip's median), since the executor must answer that
much earlier. A stage that spent its budget is
dropped there by the executor (early drop), as in Nexus, instead of passing its overrun on to the
next stage, which would then spend its own budget on a frame that can no longer make it.

A backfill frame's requests (``deadline_wall=math.inf``) carry no deadline: the executor runs them in
its real-time sessions' slack (their background twins); they time out after
``BACKGROUND_TIMEOUT_S``."""

from __future__ import annotations

import asyncio
import math
from typing import TYPE_CHECKING, Any, Sequence

from vidnexus.contracts.replies import Reply
from vidnexus.contracts.sessions import SessionKey
from vidnexus.operators.chain import App, Model

if TYPE_CHECKING:
    from vidnexus.gpu_executor.client import ExecutorClient

__all__ = ["stage_slos", "session_of", "stage_deadline", "RemoteBackend", "BACKGROUND_TIMEOUT_S"]

BACKGROUND_TIMEOUT_S = 600.0
"""How long a backfill frame's requests (no deadline) wait for replies before they end as
``timeout`` drops: they run only in the slack the real-time sessions leave, which can be none for a
while; an executor that died holding them is noticed after this long."""


def stage_slos(app: App, split: dict[str, float] | None = None) -> dict[str, float]:
    """Per-model SLO in ms: the latency split's budgets when given (from the scheduler's query
    analysis), else the app's SLO divided evenly over the depth of its DNN graph."""
    g = app.graph()
    even = app.slo_ms / max(1, g.depth())
    return {m: float((split or {}).get(m, even)) for m in g.models}


def session_of(model: str, slos: dict[str, float]) -> str:
    return str(SessionKey(model, slos[model]))


def stage_deadline(frame_deadline: float, issued: float, budget_s: float, reserve_s: float = 0.0) -> float:
    """Pure: the deadline a stage's requests carry (wall-clock seconds): ``budget_s`` from
    ``issued``, never past ``frame_deadline``, less ``reserve_s`` for the reply's trip back (the
    executor must answer that much earlier for the reply to arrive in time).
    :class:`RemoteBackend` passes as ``budget_s`` the stage's budget plus the session's bus round
    trip, and as ``frame_deadline`` the frame's deadline less the CPU steps after the stage.

    Example:
        >>> stage_deadline(frame_deadline=10.3, issued=10.0, budget_s=0.1)
        10.1
        >>> stage_deadline(frame_deadline=10.3, issued=10.25, budget_s=0.1, reserve_s=0.01)
        10.290000000000001
    """
    return min(frame_deadline, issued + budget_s) - reserve_s


class RemoteBackend:
    """``infer`` through executor services over the bus (:class:`ExecutorClient`)."""

    def __init__(self, app: App, client: "ExecutorClient", slos: dict[str, float], grace_s: float = 5.0) -> None:
        self.app, self.client, self.slos, self.grace_s = app, client, slos, grace_s
        self.variants: dict[str, str] = {}
        """Task → the variant the scheduler's plan chose (a task not named: its cheapest)."""

    def session(self, model: str) -> str:
        """The session a stage's requests go to: the model, or the variant that serves a task now,
        at the stage's SLO."""
        m = self.app.models.get(model)
        served = self.variants.get(model, m.served if m is not None else model)
        if m is not None and m.variants and served not in m.variants:
            served = m.served  # a plan naming a model the app does not list for the task
        return str(SessionKey(served, self.slos[model]))

    async def infer(self, model: Model, inputs: Sequence[Any], deadline_wall: float) -> list[Reply]:
        """``deadline_wall`` is the latest the replies are of use (the frame's deadline less the CPU
        steps after this stage); the requests carry their stage's (:func:`stage_deadline`, see the
        module docstring), all of them in one message (per 4 MB of inputs).
        Requests not answered by ``grace_s`` after the stage's deadline (no executor consumes the
        session, or one died holding them) end as drops with reason ``timeout``: the client gives
        up on them on its clock, so every future here ends."""
        sid = self.session(model.name)
        if deadline_wall == math.inf:  # a backfill frame: no deadline, and a long wait for the slack
            cfuts = self.client.submit_many(sid, list(inputs), deadline_wall=math.inf,
                                            expires_wall=self.client.wall() + BACKGROUND_TIMEOUT_S)
            return list(await asyncio.gather(*(asyncio.wrap_future(f) for f in cfuts)))
        trip = self.client.round_trip_s(sid)
        stage = stage_deadline(deadline_wall, self.client.wall(), self.slos[model.name] / 1000 + trip)
        sent = stage - self.client.reply_reserve_s(sid)
        expires = stage + self.grace_s
        cfuts = self.client.submit_many(sid, list(inputs), deadline_wall=sent, expires_wall=expires)
        return list(await asyncio.gather(*(asyncio.wrap_future(f) for f in cfuts)))
