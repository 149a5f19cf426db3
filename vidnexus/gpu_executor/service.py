"""The executor as a service over the Bus: per-session request topics in, reply-to topics out.

Requests are consumed in the ``<prefix>-executor`` consumer group (more executors share the
partitions); each becomes an :class:`~vidnexus.gpu_executor.executor.Executor` submission with its
absolute deadline; the reply (outputs or an accounted drop) is published to the request's
``reply_to`` topic keyed by request id. Offsets are committed only once every request read so far has
been answered (at-least-once). Malformed requests go to the dead-letter topic with the reason.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Sequence

from vidnexus.clock import Clock, MonotonicClock, wall_time
from vidnexus.config import Settings
from vidnexus.connectors.bus import Bus
from vidnexus.errors import CodecError
from vidnexus.gpu_executor.executor import Executor, InferReply
from vidnexus.gpu_executor.wire import WireReply, decode_request, encode_reply

__all__ = ["ExecutorService", "request_topic", "session_name", "parse_session_name"]

logger = logging.getLogger(__name__)


def session_name(model: str, slo_ms: float) -> str:
    """Canonical session id of (model, SLO): ``resnet18-100ms``."""
    return f"{model}-{slo_ms:g}ms"


def parse_session_name(session_id: str) -> tuple[str, float] | None:
    """``resnet18-100ms`` → ``("resnet18", 100.0)``; None when it is not a canonical name."""
    model, sep, slo = session_id.rpartition("-")
    if not sep or not model or not slo.endswith("ms"):
        return None
    try:
        return model, float(slo[:-2])
    except ValueError:
        return None


def request_topic(settings: Settings, session_id: str) -> str:
    return settings.topic(f"req.{session_id}")


class ExecutorService:
    """Serve ``executor``'s sessions from the bus until :meth:`stop`."""

    def __init__(self, executor: Executor, bus: Bus, settings: Settings, *, clock: Clock | None = None,
                 partitions: int = 4) -> None:
        self.executor, self.bus, self.settings = executor, bus, settings
        self.clock = clock or MonotonicClock()
        self.sessions: Sequence[str] = [s.session_id for s in executor.core.sessions()]
        self.topics = [request_topic(settings, s) for s in self.sessions]
        self.dead_letter = settings.topic("dead-letter")
        for t in self.topics:
            bus.create_topic(t, partitions)
        bus.create_topic(self.dead_letter, 1)
        self._stop = threading.Event()
        self._resubscribe = False
        self._inflight = 0
        self._lock = threading.Lock()
        # Per (topic, partition): offsets read and not answered yet, and the next offset to read.
        self._unanswered: dict[tuple[str, int], set[int]] = {}
        self._next: dict[tuple[str, int], int] = {}
        self._committed: dict[tuple[str, int], int] = {}
        self.served = 0
        self.dead = 0

    def stop(self) -> None:
        self._stop.set()

    def add_session(self, session_id: str, partitions: int = 4) -> None:
        """A session the executor now hosts: its request topic exists and may be consumed."""
        if session_id not in self.sessions:
            self.bus.create_topic(request_topic(self.settings, session_id), partitions)
            self.sessions = [*self.sessions, session_id]

    def remove_session(self, session_id: str) -> None:
        """The executor no longer hosts this session: never consume its topic again."""
        self.sessions = [s for s in self.sessions if s != session_id]
        topic = request_topic(self.settings, session_id)
        with self._lock:
            if topic in self.topics:
                self.topics = [t for t in self.topics if t != topic]
                self._resubscribe = True

    def set_sessions(self, session_ids: Sequence[str]) -> None:
        """Consume only these sessions' request topics from now on (the plan moved the others away).
        Requests already taken keep being served; the consumer group hands the partitions over."""
        wanted = [request_topic(self.settings, s) for s in session_ids if s in self.sessions]
        with self._lock:
            if sorted(wanted) != sorted(self.topics):
                self.topics = wanted
                self._resubscribe = True

    def _publish_reply(self, reply_to: str, request_id: str, r: InferReply, tp: tuple[str, int], offset: int) -> None:
        wire = WireReply(request_id, r.session_id, r.ok, r.output, r.reason, r.latency_s, r.batch)
        try:
            self.bus.publish(reply_to, request_id.encode(), encode_reply(wire))
        except Exception as e:  # a reply topic we cannot write to must not kill the executor
            logger.error("cannot publish reply %s to %s: %s", request_id, reply_to, e)
        with self._lock:
            self._inflight -= 1
            self.served += 1
            self._unanswered.get(tp, set()).discard(offset)

    def _read(self, tp: tuple[str, int], offset: int, answered: bool) -> None:
        with self._lock:
            if not answered:
                self._inflight += 1
                self._unanswered.setdefault(tp, set()).add(offset)
            self._next[tp] = max(self._next.get(tp, 0), offset + 1)

    def committable(self) -> dict[tuple[str, int], int]:
        """Per partition, the offset to commit: the first unanswered request, else the next to read."""
        with self._lock:
            out = {}
            for tp, nxt in self._next.items():
                pending = self._unanswered.get(tp)
                out[tp] = min(pending) if pending else nxt
            return out

    def _subscribe(self) -> Any:
        with self._lock:
            self._resubscribe = False
            topics = list(self.topics)
        return self.bus.subscribe(topics, group=f"{self.settings.topic_prefix}-executor") if topics else None

    def run(self, commit_every_s: float = 0.5) -> None:
        consumer = self._subscribe()
        last_commit = self.clock.now()
        try:
            while not self._stop.is_set():
                if self._resubscribe:
                    if consumer is not None:
                        self._commit_when_answered(consumer)
                        consumer.close()
                    consumer = self._subscribe()
                if consumer is None:
                    self._stop.wait(0.2)
                    continue
                msgs = consumer.poll(timeout_s=0.05)
                for m in msgs:
                    tp = (m.topic, m.partition)
                    try:
                        req = decode_request(m.value)
                    except CodecError as e:
                        self.dead += 1
                        self.bus.publish(self.dead_letter, m.key, m.value,
                                         headers=[("reason", str(e).encode()), ("topic", m.topic.encode())])
                        self._read(tp, m.offset, answered=True)
                        continue
                    # Deadlines travel as wall-clock time; the executor runs on its own clock.
                    local_deadline = self.clock.now() + (req.deadline_wall - wall_time())
                    self._read(tp, m.offset, answered=False)
                    fut = self.executor.submit(req.session_id, req.input, deadline=local_deadline)
                    fut.add_done_callback(
                        lambda f, to=req.reply_to, rid=req.request_id, tp=tp, off=m.offset:
                        self._publish_reply(to, rid, f.result(), tp, off)
                    )
                if self.clock.now() - last_commit >= commit_every_s:
                    self._commit_answered(consumer)
                    last_commit = self.clock.now()
        finally:
            if consumer is not None:
                self._commit_when_answered(consumer, timeout_s=10)
                consumer.close()

    def _commit_answered(self, consumer: Any) -> None:
        """Commit, per partition, up to the first request not answered yet (never waits)."""
        offsets = {tp: o for tp, o in self.committable().items() if self._committed.get(tp) != o}
        if not offsets:
            return
        self.bus.flush()  # the replies of what we commit are on the broker first
        consumer.commit(offsets)
        self._committed.update(offsets)

    def _commit_when_answered(self, consumer: Any, timeout_s: float = 30.0) -> None:
        deadline = self.clock.now() + timeout_s
        while self.clock.now() < deadline:
            with self._lock:
                if self._inflight == 0:
                    break
            self.clock.sleep(0.002)
        self._commit_answered(consumer)
