"""The executor as a service over the Bus: per-session request topics in, reply-to topics out.

Requests are consumed in the ``<prefix>-executor`` consumer group: each session's shared topic
(the executors the plan gives it share its partitions) and, with ``routed_as``, this executor's own
topic of each session it hosts, where clients that follow the plan send it its share
(``Topics.routed_requests``, :meth:`~vidnexus.gpu_executor.client.ExecutorClient.route`), and each
session's background topic, where requests with no deadline go (``Topics.background_requests``: a
backfill's request waiting minutes for slack holds back no live request's commit, offsets being
per partition). Each input of a request message becomes an
:class:`~vidnexus.gpu_executor.executor.Executor` submission with the message's absolute deadline,
and once every input is answered (outputs or an accounted drop) one reply message, a reply per
input, is published to the request's ``reply_to`` topic keyed by request id; the requests a batch
answers together (:attr:`Executor.reply_scope`) share one message per reply topic
(:func:`~vidnexus.contracts.requests.encode_replies`). Offsets are committed only once every request
read so far has been answered (at-least-once). Malformed requests go to the dead-letter topic with
the reason.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future
from contextlib import contextmanager
from functools import partial
from typing import Any, Iterator, Sequence

from vidnexus.clock import Clock, MonotonicClock
from vidnexus.config import Settings
from vidnexus.connectors.bus import Bus
from vidnexus.connectors.dead_letter import DeadLetters
from vidnexus.connectors.watchdog import GroupWatchdog
from vidnexus.contracts.replies import Reply
from vidnexus.contracts.requests import decode_request, encode_replies, encode_reply
from vidnexus.contracts.topics import BACKGROUND_RETENTION_S, Topics, request_retention_s
from vidnexus.errors import CodecError, ConnectorError
from vidnexus.gpu_executor.executor import Executor

__all__ = ["ExecutorService"]

logger = logging.getLogger(__name__)

COMMIT_AT_LEAST_EVERY_S = 5.0
"""The serving loop commits without waiting while replies keep being acknowledged; past this long
without a commit it waits for them (a producer that never drains must not hold commits back)."""

MAX_REPLIES_MESSAGE_BYTES = 1 << 20
"""A batch's replies to one topic travel as one message up to this size (else one per request)."""

_Held = tuple[str, str, str, list[Reply], tuple[str, int], int]
"""A reply waiting for its batch's scope to end: reply topic, request id, session, replies, and the
request's partition and offset."""


class ExecutorService:
    """Serve ``executor``'s sessions from the bus until :meth:`stop`."""

    def __init__(self, executor: Executor, bus: Bus, settings: Settings, *, clock: Clock | None = None,
                 partitions: int = 4, dead_letters: DeadLetters | None = None, routed_as: str | None = None) -> None:
        self.executor, self.bus, self.settings = executor, bus, settings
        self.clock = clock or MonotonicClock()
        self.names = Topics(settings.topic_prefix)
        self.routed_as = routed_as
        self.sessions: Sequence[str] = [s.session_id for s in executor.sessions()]
        self._planned: Sequence[str] | None = None  # the plan's sessions for this executor (None: all)
        self._uncreated = {s: partitions for s in self.sessions}  # hosted, request topics not created yet
        self._adopted: Sequence[str] = ()  # routed topics of executors gone from the plans
        self._create_uncreated()
        self.topics = self._wanted()
        self.dead_letters = (dead_letters or DeadLetters(bus, self.names, "executor")).expect("requests")
        self._stop = threading.Event()
        self._resubscribe = False
        self._inflight = 0
        self._lock = threading.RLock()
        self._answered = threading.Condition(self._lock)  # notified when nothing is in flight
        # Per (topic, partition): offsets read and not answered yet, and the next offset to read.
        self._unanswered: dict[tuple[str, int], set[int]] = {}
        self._next: dict[tuple[str, int], int] = {}
        self._committed: dict[tuple[str, int], int] = {}
        self.served = 0
        self.reply_messages = 0
        """Reply messages published (fewer than the requests answered when batches share them)."""
        self._scope = threading.local()  # .held: replies of the batch being answered in this thread
        executor.reply_scope = self._batch_scope
        self._consumer: Any = None
        self._last_commit = self.clock.now()
        self.watchdog = GroupWatchdog(bus, self.names.group("executor"), lambda: list(self.topics), self.clock,
                                      stall_s=settings.watchdog_s, role="executor")

    @property
    def dead(self) -> int:
        """Request messages that could not be read (dead-lettered)."""
        return self.dead_letters.counts["requests"]

    def stop(self) -> None:
        self._stop.set()
        consumer = self._consumer
        if consumer is not None:
            consumer.wakeup()  # a poll waiting for requests returns now

    def add_session(self, session_id: str, partitions: int = 4) -> None:
        """A session the executor now hosts: its request topics are consumed from now on, and
        created (a broker that refuses raises here, and each :meth:`step` tries again: the session
        is hosted all the same, so requests clients route here meanwhile are not stranded)."""
        if session_id not in self.sessions:
            self.sessions = [*self.sessions, session_id]
            self._uncreated[session_id] = partitions
            self._follow()
        self._create_uncreated()

    def _create_uncreated(self) -> None:
        for sid, partitions in list(self._uncreated.items()):
            self._create_requests(sid, partitions)
            del self._uncreated[sid]

    def _create_requests(self, session_id: str, partitions: int) -> None:
        slo = next((s.slo_s for s in self.executor.sessions() if s.session_id == session_id), None)
        retention = request_retention_s(slo) if slo is not None else None
        self.bus.create_topic(self.names.requests(session_id), partitions, retention_s=retention)
        self.bus.create_topic(self.names.background_requests(session_id), partitions, retention_s=BACKGROUND_RETENTION_S)
        if self.routed_as:
            self.bus.create_topic(self.names.routed_requests(session_id, self.routed_as), 1, retention_s=retention)

    def _wanted(self) -> list[str]:
        """The shared and background request topics of the sessions the plan gives this executor
        (all it hosts until a plan does), and its own routed topic of every session it hosts: requests clients
        routed here before the plan moved a session away are still served."""
        planned = self.sessions if self._planned is None else [s for s in self._planned if s in self.sessions]
        out = [self.names.requests(s) for s in planned] + [self.names.background_requests(s) for s in planned]
        if self.routed_as:
            out += [self.names.routed_requests(s, self.routed_as) for s in self.sessions]
        return out + [t for t in self._adopted if t not in out]

    def _follow(self) -> None:
        wanted = self._wanted()
        with self._lock:
            if sorted(wanted) != sorted(self.topics):
                self.topics = wanted
                self._resubscribe = True

    def remove_session(self, session_id: str) -> None:
        """The executor no longer hosts this session: never consume its topics again."""
        self.sessions = [s for s in self.sessions if s != session_id]
        self._uncreated.pop(session_id, None)
        self._follow()

    def set_sessions(self, session_ids: Sequence[str], adopted: Sequence[tuple[str, str]] = ()) -> None:
        """Consume only these sessions' shared request topics from now on (the plan moved the others
        away), and the routed topics ``adopted`` — (session, executor) pairs of executors gone from
        the plan, for sessions among these — so that what clients routed to a dead executor is
        served. Requests already taken keep being served; the consumer group hands the partitions over."""
        self._planned = list(session_ids)
        adopt = [self.names.routed_requests(s, e) for s, e in adopted if s in self.sessions]
        failed: list[str] = []
        for t in sorted(set(adopt) - set(self._adopted)):  # it may never have been created (its executor died first)
            try:
                self.bus.create_topic(t, 1)
            except ConnectorError as e:
                if not e.retryable:
                    raise
                failed.append(t)
                logger.warning("cannot adopt %s yet (%s): the next plan tries again", t, e)
        self._adopted = [t for t in adopt if t not in failed]
        self._follow()

    def _reply_when_done(self, reply_to: str, request_id: str, session_id: str, tp: tuple[str, int], offset: int,
                         futs: list[Future[Reply]], left: list[int], _: Future[Reply]) -> None:
        """One input answered; the last one publishes the message's reply."""
        with self._lock:
            left[0] -= 1
            if left[0]:
                return
        self._publish_reply(reply_to, request_id, session_id, [f.result() for f in futs], tp, offset)

    def _publish_reply(self, reply_to: str, request_id: str, session_id: str, replies: list[Reply],
                       tp: tuple[str, int], offset: int) -> None:
        held: list[_Held] | None = getattr(self._scope, "held", None)
        if held is not None:  # inside a batch's scope: published with the batch's other replies
            held.append((reply_to, request_id, session_id, replies, tp, offset))
            return
        self._send(reply_to, [(request_id, session_id, replies)])
        self._mark_answered([(tp, offset, len(replies))])

    @contextmanager
    def _batch_scope(self) -> Iterator[None]:
        """The executor resolves a batch's futures in here: the replies their callbacks publish are
        held and sent when it ends, one message per reply topic."""
        if getattr(self._scope, "held", None) is not None:  # nested: the outer scope sends
            yield
            return
        held: list[_Held] = []
        self._scope.held = held
        try:
            yield
        finally:
            self._scope.held = None
            by_topic: dict[str, list[tuple[str, str, list[Reply]]]] = {}
            for reply_to, rid, sid, replies, _, _ in held:
                by_topic.setdefault(reply_to, []).append((rid, sid, replies))
            for reply_to, groups in by_topic.items():
                self._send(reply_to, groups)
            self._mark_answered([(tp, offset, len(replies)) for _, _, _, replies, tp, offset in held])

    def _send(self, reply_to: str, groups: list[tuple[str, str, list[Reply]]]) -> None:
        """Publish the replies of ``groups`` (request id, session, replies) to ``reply_to``: one
        message, or one per request when there is one or together they pass ``MAX_REPLIES_MESSAGE_BYTES``."""
        raw = encode_replies(groups) if len(groups) > 1 else None
        if raw is None or len(raw) > MAX_REPLIES_MESSAGE_BYTES:
            messages = [(rid, encode_reply(rid, sid, replies)) for rid, sid, replies in groups]
        else:
            messages = [(groups[0][0], raw)]
        for key, value in messages:
            try:
                self.bus.publish(reply_to, key.encode(), value)
            except Exception as e:  # a reply topic we cannot write to must not kill the executor
                what = key if value is not raw else f"{key} (and {len(groups) - 1} more)"
                logger.error("cannot publish reply %s to %s: %s", what, reply_to, e)
        with self._lock:
            self.reply_messages += len(messages)

    def _mark_answered(self, done: list[tuple[tuple[str, int], int, int]]) -> None:
        """Requests answered: (partition, offset, replies) each."""
        with self._lock:
            for tp, offset, n in done:
                self._inflight -= 1
                self.served += n
                self._unanswered.get(tp, set()).discard(offset)
            if self._inflight == 0:
                self._answered.notify_all()

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
        return self.bus.subscribe(topics, group=self.names.group("executor")) if topics else None

    def step(self, timeout_s: float = 0.05, commit_every_s: float = 0.5) -> int:
        """Read what arrived (waiting at most ``timeout_s``), submit it, and commit the answered
        offsets when ``commit_every_s`` has passed. Returns the requests read."""
        if self._uncreated:
            self._create_uncreated()
        if self._resubscribe or (self._consumer is None and self.topics):
            if self._consumer is not None:
                self._commit_when_answered(self._consumer)
                old, self._consumer = self._consumer, None  # a failed subscribe below: the next step tries again
                old.close()
            self._consumer = self._subscribe()
        if self._consumer is None:
            self.clock.wait(self._stop, min(timeout_s, 0.2))
            return 0
        # Once stopping, do not wait: stop() may have woken a consumer that was replaced since.
        msgs = self._consumer.poll(timeout_s=0.0 if self._stop.is_set() else timeout_s)
        for m in msgs:
            tp = (m.topic, m.partition)
            try:
                req = decode_request(m.value)
            except CodecError as e:
                self.dead_letters.send(m, str(e))
                self._read(tp, m.offset, answered=True)
                continue
            # Deadlines travel as wall-clock time; the executor runs on the monotonic reading.
            local_deadline = self.clock.now() + (req.deadline_wall - self.clock.wall())
            self._read(tp, m.offset, answered=False)
            futs = self.executor.submit_many(req.session_id, req.inputs, deadline=local_deadline)
            done = partial(self._reply_when_done, req.reply_to, req.request_id, req.session_id, tp, m.offset, futs,
                           [len(futs)])
            for fut in futs:
                fut.add_done_callback(done)
        if self.clock.now() - self._last_commit >= commit_every_s:
            if self._commit_answered(self._consumer, block=False):
                self._last_commit = self.clock.now()
        if not msgs and self.watchdog.check(self._consumer):
            with self._lock:
                self._resubscribe = True
        return len(msgs)

    def run(self, commit_every_s: float = 0.5) -> None:
        """:meth:`step` until :meth:`stop`; then commit what was answered (waiting up to 10 s)."""
        try:
            while not self._stop.is_set():
                self.step(commit_every_s=commit_every_s)
        finally:
            self.close()

    def close(self) -> None:
        if self._consumer is not None:
            self._commit_when_answered(self._consumer, timeout_s=10)
            self._consumer.close()
            self._consumer = None

    def _commit_answered(self, consumer: Any, *, block: bool = True) -> bool:
        """Commit, per partition, up to the first request not answered yet, once the replies of
        what it commits are on the broker. ``block=False`` (the serving loop): neither wait for
        the replies' acknowledgements nor for the commit's answer (each took up to 20 ms of the
        loop on a busy 2-core box, and requests waited meanwhile); while replies are still
        unacknowledged the commit waits for a later call, and only after
        ``COMMIT_AT_LEAST_EVERY_S`` without one does the loop wait for them. Whether it
        committed (or had nothing to commit)."""
        offsets = {tp: o for tp, o in self.committable().items() if self._committed.get(tp) != o}
        if not offsets:
            return True
        if block or self.clock.now() - self._last_commit >= COMMIT_AT_LEAST_EVERY_S:
            self.bus.flush()
        elif not self.bus.delivered():
            return False
        consumer.commit(offsets, wait=block)
        self._committed.update(offsets)
        return True

    def wait_answered(self, timeout_s: float) -> bool:
        """Wait (on the clock) until every request read so far has been answered; False on timeout."""
        with self._lock:
            return self.clock.wait_for(self._answered, lambda: self._inflight == 0, timeout_s)

    def _commit_when_answered(self, consumer: Any, timeout_s: float = 30.0) -> None:
        self.wait_answered(timeout_s)
        self._commit_answered(consumer)
