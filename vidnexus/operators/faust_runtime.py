"""The distributed runtime: an app's chain as a faust-streaming agent over Kafka.

``vidnexus worker hud`` starts one worker; more workers with the same app join the same consumer
group (``<prefix>-app-<name>``) and share the frames topic's partitions. Each frame is processed by
the same :class:`~vidnexus.operators.engine.ChainEngine` the local runtime uses, its DNN calls go to
the executor services over the bus, and its rows (plus its ``vnx_frames`` accounting row) are
published as one message to the rows topic, where ``vidnexus sink`` inserts them.

Delivery: a frame's offset is acknowledged only after its rows message is acknowledged by the
broker (faust commits the highest contiguous acknowledged offset), so a worker killed at any point
loses no frame; frames in flight at the kill are processed again, and the sink's tables
(``ReplacingMergeTree`` keyed by the row's identity) count them once.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import threading
from typing import Any

from vidnexus.clock import MonotonicClock
from vidnexus.config import Settings
from vidnexus.errors import CodecError
from vidnexus.operators.chain import App
from vidnexus.connectors.store import TableSchema
from vidnexus.operators.engine import ChainEngine, FrameOutcome, KeyedDispatcher, app_schemas, wants
from vidnexus.operators.rows import encode_rows
from vidnexus.streams.frame import decode_frame

__all__ = ["run_worker", "rows_topic", "frames_topic", "apps_topic", "worker_group", "app_report", "outcome_message",
           "split_to_adopt", "stall_suspected", "stalled"]

logger = logging.getLogger(__name__)


def rows_topic(settings: Settings) -> str:
    return settings.topic("rows")


def frames_topic(settings: Settings) -> str:
    return settings.topic("frames")


def worker_group(settings: Settings, app: App) -> str:
    return f"{settings.topic_prefix}-app-{app.name}"


def apps_topic(settings: Settings) -> str:
    return settings.topic("apps")


def app_report(app: App, engine: ChainEngine, worker_id: str) -> dict[str, Any]:
    """What a worker tells the control plane: the app's SLO, DNN graph and measured call counts."""
    from vidnexus.clock import wall_time

    g = app.graph()
    return {"ts": wall_time(), "app": app.name, "worker": worker_id, "slo_ms": app.slo_ms,
            "models": list(g.models), "edges": [list(e) for e in g.edges], "fanout": engine.fanout.to_dict()}


def split_to_adopt(app: App, doc: dict[str, Any]) -> dict[str, float] | None:
    """The stage SLOs of ``app`` in a plan document, once every stage's session is assigned to an
    executor (switching earlier would send requests nobody consumes); None otherwise."""
    from vidnexus.gpu_executor.service import session_name

    sp = (doc.get("splits") or {}).get(app.name)
    if not sp or not sp.get("ok"):
        return None
    budgets = {m: float(b) for m, b in sp["budgets_ms"].items()}
    served = {sid for per in (doc.get("assignments") or {}).values() for sid in per}
    if any(session_name(m, b) not in served for m, b in budgets.items()):
        return None
    return budgets


def follow_splits(app: App, settings: Settings, bus: Any, backend: Any, stop: threading.Event) -> None:
    from vidnexus.gpu_executor.scheduler import plan_documents

    for doc in plan_documents(bus, settings, stop):
        budgets = split_to_adopt(app, doc)
        if budgets is not None and budgets != backend.slos:
            logger.warning("app %s: stage SLOs from the scheduler's split: %s ms", app.name, budgets)
            backend.slos = budgets


def outcome_message(app: App, o: FrameOutcome, schemas: dict[str, TableSchema] | None = None) -> bytes:
    """The rows message of one frame (``schemas``: :func:`app_schemas`, computed once per worker)."""
    return encode_rows(o.all_rows(app.name), schemas if schemas is not None else app_schemas(app))


def stall_suspected(now: float, last_delivery: float, in_flight: int, stall_s: float) -> bool:
    """Pure: nothing reached the agent for ``stall_s`` and nothing is in flight (a busy worker whose
    frames all wait on executors is not stalled). Then the lag is worth reading (:func:`stalled`)."""
    return stall_s > 0 and in_flight == 0 and now - last_delivery >= stall_s


def stalled(lag: dict[int, int]) -> bool:
    """Pure: with a stall suspected, frames waiting on this worker's partitions mean its consumer
    stopped delivering them (a safety net: faust's consumer runs in a thread of its own, and a lost
    hand-over there would otherwise stop the app silently)."""
    return any(n > 0 for n in lag.values())


def run_worker(app: App, settings: Settings, *, concurrency: int = 32, partitions: int = 8,
               split: dict[str, float] | None = None, loglevel: str = "warning",
               on_ready: Any = None, stall_s: float = 0.0, on_stall: Any = None) -> None:
    """Run ``app`` as a faust worker until SIGTERM/SIGINT (blocking).

    ``stall_s`` > 0 arms a watchdog: when no frame reached the agent for that long, none is in
    flight, and the group still has uncommitted frames on this worker's partitions, ``on_stall``
    is called with the reason (the CLI restarts the process; frames are then re-read from the last
    commit, and the tables count them once)."""
    import faust

    from vidnexus.connectors.factory import open_bus
    from vidnexus.gpu_executor.client import ExecutorClient
    from vidnexus.operators.infer import RemoteBackend, stage_slos

    bus = open_bus(settings)  # raises a clear error when the broker is unreachable
    # faust subscribes only to topics that exist when it starts: create them first.
    bus.create_topic(frames_topic(settings), partitions)
    bus.create_topic(rows_topic(settings), partitions)
    bus.create_topic(settings.topic("dead.frames"), 1)
    bus.create_topic(apps_topic(settings), 1)
    client = ExecutorClient(bus, settings)
    backend = RemoteBackend(app, client, stage_slos(app, split))
    engine = ChainEngine(app, backend)
    schemas = app_schemas(app)
    stop_follow = threading.Event()
    if split is None:  # stage SLOs given by hand stay; otherwise follow the scheduler's latency split
        threading.Thread(target=follow_splits, args=(app, settings, bus, backend, stop_follow),
                         daemon=True, name="vnx-splits").start()
    brokers = ";".join(f"kafka://{h}" for h in settings.kafka_bootstrap.split(","))
    (settings.work_dir / "faust").mkdir(parents=True, exist_ok=True)
    fapp = faust.App(
        worker_group(settings, app),
        broker=brokers,
        store="memory://",
        datadir=str(settings.work_dir / "faust" / "{conf.name}-data"),  # not ./<id>-data in the cwd
        web_enabled=False,
        topic_replication_factor=1,
        topic_partitions=partitions,
        consumer_auto_offset_reset="earliest",
        broker_commit_every=50,
        broker_commit_interval=1.0,
        producer_acks=-1,
        producer_max_request_size=8 * 1024 * 1024,
        broker_session_timeout=10.0,
        broker_heartbeat_interval=1.0,
        stream_buffer_maxsize=4 * concurrency,
    )
    src = fapp.topic(frames_topic(settings), value_serializer="raw", key_serializer="raw")
    out = fapp.topic(rows_topic(settings), value_serializer="raw", key_serializer="raw")
    dead = fapp.topic(settings.topic("dead.frames"), value_serializer="raw", key_serializer="raw")
    disp = KeyedDispatcher(concurrency)
    clock = MonotonicClock()
    delivery = [clock.now()]  # when a frame last reached the agent (or the worker became ready)
    # Fault injection for the watchdog's test: this process (not a restarted one: the variable is
    # removed from the environment) takes frames from faust and drops them unacknowledged, as the
    # stalled consumer did.
    swallow = os.environ.pop("VNX_FAULT_SWALLOW_FRAMES", "") == "1"

    acks: set[Any] = set()

    async def ack_when_sent(stream: Any, event: Any, sent: Any) -> None:
        try:
            if sent is not None:
                await sent  # the broker has the rows (acks=all): now the frame may be committed
        finally:
            await stream.ack(event)

    async def handle(stream: Any, event: Any) -> None:
        """Run the chain on one frame (frames of a stream one after the other) and queue its rows;
        the frame is acknowledged once the broker has them, off this stream's critical path."""
        sent = None
        try:
            try:
                frame = decode_frame(event.value)
            except CodecError as e:
                logger.warning("app %s: bad frame message to dead-letter: %s", app.name, e)
                sent = await dead.send(key=event.key, value=event.value)
                return
            if not wants(app, frame):
                return
            outcome = await engine.run(frame)
            sent = await out.send(key=frame.stream_id.encode(), value=outcome_message(app, outcome, schemas))
        finally:
            task = asyncio.ensure_future(ack_when_sent(stream, event, sent))
            acks.add(task)
            task.add_done_callback(acks.discard)

    @fapp.agent(src, name=f"chain-{app.name}")
    async def chain(stream: Any) -> None:
        async for event in stream.noack().events():
            if swallow:
                continue
            delivery[0] = clock.now()
            key = event.key.decode("utf-8", "replace") if isinstance(event.key, bytes) else str(event.key)
            if not engine.ordered:  # no window in the chain: frames of a stream need not wait for each other
                key = f"{key}@{event.message.partition}:{event.message.offset}"
            await disp.submit(key, lambda ev=event: handle(stream, ev))

    worker_id = f"{socket.gethostname()}-{os.getpid()}"

    if stall_s > 0:
        topic, group = frames_topic(settings), worker_group(settings, app)

        @fapp.timer(interval=min(5.0, stall_s / 2))
        async def watchdog() -> None:
            if not stall_suspected(clock.now(), delivery[0], disp.in_flight, stall_s):
                return
            mine = sorted(tp.partition for tp in fapp.consumer.assignment() if tp.topic == topic)
            if not mine:
                return
            try:
                lag = await asyncio.get_running_loop().run_in_executor(None, bus.group_lag, group, topic, mine)
            except Exception as e:
                logger.warning("watchdog: cannot read the group's lag: %s", e)
                return
            # Still quiet after the broker answered (a frame may have arrived meanwhile)?
            if stalled(lag) and stall_suspected(clock.now(), delivery[0], disp.in_flight, stall_s):
                waiting = {p: n for p, n in lag.items() if n > 0}
                reason = (f"{sum(waiting.values())} frames wait on partitions {sorted(waiting)} of {topic} and "
                          f"none reached the worker for {clock.now() - delivery[0]:.0f} s")
                logger.error("worker stalled: %s", reason)
                if on_stall is not None:
                    on_stall(reason)
                else:
                    delivery[0] = clock.now()  # no handler: report again after another stall_s

    @fapp.timer(interval=5.0)
    async def report() -> None:
        """The app's DNN graph and measured fan-out, for the scheduler's query analysis."""
        try:
            bus.publish(apps_topic(settings), f"{app.name}/{worker_id}".encode(),
                        json.dumps(app_report(app, engine, worker_id)).encode())
        except Exception as e:
            logger.warning("cannot publish the app report: %s", e)

    if on_ready is not None:
        @fapp.task
        async def started() -> None:
            delivery[0] = clock.now()
            on_ready()

    worker = faust.Worker(fapp, loglevel=loglevel, quiet=True, redirect_stdouts=False)
    try:
        worker.execute_from_commandline()
    finally:
        stop_follow.set()
        client.close()
        bus.close()
