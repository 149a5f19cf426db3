"""The worker role's frames over faust-streaming (``vidnexus worker --runtime faust``).

The same :class:`~vidnexus.roles.worker.WorkerRole` handles each frame (decode, chain, rows message
or dead letter), reports and follows the plan; only consumption differs: faust's agent reads the
frames topic, the rows go out through the role's bus (the configured driver's producer), and
frames are acknowledged in batches once a flush has the broker's acks for their rows (faust commits
the highest contiguous acknowledged offset), so a worker killed at any point loses no frame. A stall
watchdog (``stall_s``) restarts a worker whose faust consumer stopped delivering.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

from vidnexus.clock import MonotonicClock
from vidnexus.config import Settings
from vidnexus.connectors.bus import Message
from vidnexus.operators.chain import App
from vidnexus.errors import ConnectorError
from vidnexus.operators.engine import KeyedDispatcher

__all__ = ["run_faust_worker", "stall_suspected", "stalled"]

logger = logging.getLogger(__name__)


def stall_suspected(now: float, last_delivery: float, in_flight: int, stall_s: float) -> bool:
    """Pure: nothing reached the agent for ``stall_s`` and nothing is in flight (a busy worker whose
    frames all wait on executors is not stalled). Then the lag is worth reading (:func:`stalled`)."""
    return stall_s > 0 and in_flight == 0 and now - last_delivery >= stall_s


def stalled(lag: dict[int, int]) -> bool:
    """Pure: with a stall suspected, frames waiting on this worker's partitions mean its consumer
    stopped delivering them (a safety net: faust's consumer runs in a thread of its own, and a lost
    hand-over there would otherwise stop the app silently)."""
    return any(n > 0 for n in lag.values())


def run_faust_worker(app: App, settings: Settings, *, concurrency: int = 32, partitions: int = 8,
                     split: dict[str, float] | None = None, loglevel: str = "warning",
                     on_ready: Any = None, stall_s: float = 0.0, on_stall: Any = None,
                     on_summary: Any = None) -> None:
    """Run ``app`` as a faust worker until SIGTERM/SIGINT (blocking).

    ``stall_s`` > 0 arms a watchdog: when no frame reached the agent for that long, none is in
    flight, and the group still has uncommitted frames on this worker's partitions, ``on_stall``
    is called with the reason (the CLI restarts the process; frames are then re-read from the last
    commit, and the tables count them once)."""
    import faust

    from vidnexus.connectors.factory import open_bus
    from vidnexus.roles.worker import PLAN_EVERY_S, WorkerRole

    bus = open_bus(settings)  # raises a clear error when the broker is unreachable
    role = WorkerRole(settings, app, bus=bus, split=split, concurrency=concurrency, partitions=partitions)
    role.on_summary = on_summary
    topics = role.topics
    brokers = ";".join(f"kafka://{h}" for h in settings.kafka_bootstrap.split(","))
    (settings.work_dir / "faust").mkdir(parents=True, exist_ok=True)
    from vidnexus.roles.faust_transport import Transport

    class _App(faust.App):
        def _new_transport(self) -> Any:  # batched hand-over (faust_transport's docstring)
            return Transport(self.conf.broker_consumer, self)

    fapp = _App(
        role.group,
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
    src = fapp.topic(topics.frames, value_serializer="raw", key_serializer="raw")
    disp = KeyedDispatcher(concurrency)
    clock = MonotonicClock()
    delivery = [clock.now()]  # when a frame last reached the agent (or the worker became ready)
    # Fault injection for the watchdog's test: this process (not a restarted one: the variable is
    # removed from the environment) takes frames from faust and drops them unacknowledged, as the
    # stalled consumer did.
    swallow = os.environ.pop("VNX_FAULT_SWALLOW_FRAMES", "") == "1"
    # Rows go out through the role's bus (the configured driver: librdkafka by default), not faust's
    # producer; frames whose rows are queued wait here and are acknowledged together once a flush
    # has the broker's acks for everything queued before it (ack after publish, amortized).
    queued: list[tuple[Any, Any]] = []
    flushed = asyncio.Event()

    async def acknowledge() -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not queued:
                flushed.clear()
                await flushed.wait()
            batch, queued[:] = list(queued), []
            try:
                await loop.run_in_executor(None, bus.flush)
            except ConnectorError as e:  # the broker is away: the rows stay queued in the producer
                logger.warning("rows not acknowledged by the broker yet (%s); frames stay unacknowledged", e)
                queued[:0] = batch
                await asyncio.sleep(1.0)
                continue
            for stream, event in batch:
                await stream.ack(event)

    async def handle(stream: Any, event: Any) -> None:
        """Run the chain on one frame and queue its rows (or the dead letter); the frame is
        acknowledged once the broker has them, off this stream's critical path."""
        try:
            msg = event.message
            out = await role.handle(Message(msg.topic, msg.partition, msg.offset, event.key, event.value))
            if out is not None:
                bus.publish(out.topic, out.key, out.value, headers=out.headers)
        finally:
            queued.append((stream, event))
            flushed.set()

    @fapp.task  # type: ignore[untyped-decorator]  # faust: unannotated
    async def acker() -> None:
        await acknowledge()

    @fapp.agent(src, name=f"chain-{app.name}")
    async def chain(stream: Any) -> None:
        async for event in stream.noack().events():
            if swallow:
                continue
            delivery[0] = clock.now()
            key = event.key.decode("utf-8", "replace") if isinstance(event.key, bytes) else str(event.key)
            if not role.engine.ordered:  # no window in the chain: frames of a stream need not wait for each other
                key = f"{key}@{event.message.partition}:{event.message.offset}"
            await disp.submit(key, lambda ev=event: handle(stream, ev))

    if stall_s > 0:
        @fapp.timer(interval=min(5.0, stall_s / 2))  # type: ignore[untyped-decorator]  # faust: unannotated
        async def watchdog() -> None:
            if not stall_suspected(clock.now(), delivery[0], disp.in_flight, stall_s):
                return
            mine = sorted(tp.partition for tp in fapp.consumer.assignment() if tp.topic == topics.frames)
            if not mine:
                return
            try:
                lag = await asyncio.get_running_loop().run_in_executor(None, bus.group_lag, role.group,
                                                                       topics.frames, mine)
            except Exception as e:
                logger.warning("watchdog: cannot read the group's lag: %s", e)
                return
            # Still quiet after the broker answered (a frame may have arrived meanwhile)?
            if stalled(lag) and stall_suspected(clock.now(), delivery[0], disp.in_flight, stall_s):
                waiting = {p: n for p, n in lag.items() if n > 0}
                reason = (f"{sum(waiting.values())} frames wait on partitions {sorted(waiting)} of {topics.frames} "
                          f"and none reached the worker for {clock.now() - delivery[0]:.0f} s")
                logger.error("worker stalled: %s", reason)
                if on_stall is not None:
                    on_stall(reason)
                else:
                    delivery[0] = clock.now()  # no handler: report again after another stall_s

    @fapp.timer(interval=role.report_every_s)  # type: ignore[untyped-decorator]  # faust: unannotated
    async def report() -> None:
        """The app's DNN graph and measured fan-out for query analysis."""
        role.publish_report()
        role.summarize()

    @fapp.timer(interval=PLAN_EVERY_S)  # type: ignore[untyped-decorator]  # faust: unannotated
    async def plans() -> None:
        """The scheduler's newest plan: its routing, and the app's split."""
        role.follow_plan()

    if on_ready is not None:
        @fapp.task  # type: ignore[untyped-decorator]  # faust: unannotated
        async def started() -> None:
            delivery[0] = clock.now()
            on_ready()

    worker = faust.Worker(fapp, loglevel=loglevel, quiet=True, redirect_stdouts=False)
    # No startup spinner: it writes terminal escapes to stdout even when that is a file or a pipe,
    # and its log handler turns the root logger to DEBUG (every debug record built and handled).
    worker.spinner = None
    try:
        worker.execute_from_commandline()
    finally:
        role.close()
        bus.close()
