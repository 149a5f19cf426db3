"""Bus over Apache Kafka with confluent-kafka (librdkafka): producer, group consumers, topic admin.

The default Kafka driver (``VNX_KAFKA_DRIVER=confluent``). librdkafka implements the consumer group
protocol in C, rejoins after rebalances and broker restarts by itself, and batches produce requests
in its own threads; kafka-python (:mod:`vidnexus.connectors.kafka_bus`) stays a supported driver.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import deque
from typing import Any, Mapping, Sequence

from vidnexus.connectors.bus import (RECORD_BATCH_HEADROOM, Message, configs_to_alter, producer_acks, topic_configs,
                                     topic_error_retryable)
from vidnexus.errors import ConnectorError

__all__ = ["ConfluentBus", "ConfluentConsumer", "LingerSwitch"]

logger = logging.getLogger(__name__)


def _unreachable(what: str, bootstrap: str, exc: BaseException) -> ConnectorError:
    return ConnectorError(
        f"{what}: Kafka at {bootstrap!r} is not reachable ({exc}). "
        "Check VNX_KAFKA_BOOTSTRAP, or start the local broker with `vidnexus services up`.",
        retryable=True,
    )


def _headers(raw: Mapping[str, str | bytes | None] | Sequence[tuple[str, str | bytes | None]] | None,
             ) -> tuple[tuple[str, bytes], ...]:
    """A consumed record's headers as (name, bytes) pairs (librdkafka gives a list of (str, bytes | None))."""
    pairs = raw.items() if isinstance(raw, Mapping) else (raw or [])
    return tuple((k, v.encode() if isinstance(v, str) else v or b"") for k, v in pairs)


BATCH_LINGER_MS = 0.5
"""The batching producer's linger (librdkafka's own default since 1.5)."""

SWITCH_DRAIN_S = 0.5
"""How long the publish that makes a switch waits, at most, for the producer in use to drain.
Fed evenly, the eager producer always has records in flight, and above the rate it carries a
backlog that only a pause in the publishing would clear (probes at 3,000 records/s on the local
broker: 140-260 records by the time the switch is wanted, gone in 20-35 ms once nothing new
enters; on a broker started seconds before, drained at ~1,000 records/s, so a few hundred ms).
The wait is back-pressure on that one publish, and on every thread publishing on the bus
meanwhile. It ends early when no acknowledgement comes for ``SWITCH_STALL_S`` (a broker away) or
when, after that long, the drain rate so far says the rest would not fit; a wait that ends without
the drain is tried again after ``SWITCH_RETRY_S``, doubled each time up to ``SWITCH_RETRY_MAX_S``."""

SWITCH_SLICE_S = 0.02
SWITCH_STALL_S = 0.1
SWITCH_RETRY_S = 1.0
SWITCH_RETRY_MAX_S = 30.0

FETCH_WAIT_MS = 100
"""The longest the broker holds a consumer's fetch that found nothing (see ``_Consumer``)."""


class _QuietLog:
    """librdkafka's log lines, each distinct line at most once per ``every_s`` (a broker outage
    otherwise logs a line per connection attempt per client)."""

    def __init__(self, every_s: float = 30.0) -> None:
        self._now = time.monotonic
        self.every_s = every_s
        self._last: dict[str, float] = {}
        self._lock = threading.Lock()

    def log(self, level: int, fmt: str, *args: Any) -> None:
        text = fmt % args if args else fmt
        key = text.split("]", 1)[-1][:120]  # without the client's name and instance prefix
        now = self._now()
        with self._lock:
            if now - self._last.get(key, -1e18) < self.every_s:
                return
            self._last[key] = now
            if len(self._last) > 1000:
                self._last.clear()
        logger.log(min(level, logging.WARNING), "librdkafka: %s", text)


_LOG = _QuietLog()


class LingerSwitch:
    """Which of the bus's two producers a record goes to: the eager one (linger 0: each record sent
    at once) while the recent publish rate is low, the batching one above.

    librdkafka's linger costs about a millisecond per produce even when it is a fraction of one (only
    0 avoids it), so linger 0 halves a request's round trip. It sends a produce request per record,
    though, so the broker's CPU per record grows, and on a 2-core box that CPU becomes the tail at
    high rates. In ``bench/results/hop-2026-11-29-3.json`` (docs/benchmarks.md, hop), 20 KB
    requests, linger 0 against 0.5 ms, p50 / p99 ms: 1.63 / 3.79 against 4.33 / 5.68 at 100 req/s;
    1.66 / 14.85 against 3.08 / 9.98 at 1,000 (0.77 ms of broker CPU per request against 0.43);
    2.0 / 16.85 against 2.62 / 10.33 at 1,400; 2.88 / 44.5 against 2.84 / 14.58 at 2,000. Hence
    eager up to ~1,500 records/s. Hysteresis keeps a rate near the threshold from flapping. Pure:
    the caller gives ``now`` (seconds, monotonic).

        >>> s = LingerSwitch(up_rps=600, down_rps=400, window_s=0.1)
        >>> [s.want_eager(i / 1000) for i in range(0, 100, 10)][-1]   # 100/s: eager
        True
        >>> [s.want_eager(0.1 + i / 2000) for i in range(200)][-1]    # 2,000/s: batching
        False
        >>> s.switched(0.2)                                             # the bus switched to batching
        >>> s.want_eager(0.29), s.want_eager(0.5)                       # 210/s, but held for a window; quiet
        (False, True)
    """

    def __init__(self, up_rps: float = 1500.0, down_rps: float = 1100.0, window_s: float = 0.2) -> None:
        if not 0 < down_rps <= up_rps:
            raise ValueError(f"need 0 < down_rps <= up_rps, got {down_rps} and {up_rps}")
        self.up_rps, self.down_rps, self.window_s = up_rps, down_rps, window_s
        self.eager = True
        """The producer in use."""
        self._times: deque[float] = deque()
        self._hold_until = -1.0

    def switched(self, now: float) -> None:
        """The bus moved to the other producer at ``now``: that one is kept for at least a window,
        so that a pause in the publishing (the switch's own wait for the drain) does not read as a
        low rate and send records straight back."""
        self.eager = not self.eager
        self._hold_until = now + self.window_s

    def want_eager(self, now: float) -> bool:
        """Count a record published at ``now``; whether the eager producer should take records now."""
        times = self._times
        times.append(now)
        while times[0] < now - self.window_s:
            times.popleft()
        if now < self._hold_until:
            return self.eager
        rate = len(times) / self.window_s
        return rate < self.up_rps if self.eager else rate <= self.down_rps


class ConfluentBus:
    """A Bus on a Kafka cluster (confluent-kafka).

    Args:
        bootstrap: ``host:port[,host:port]``.
        timeout_s: how long connecting may take before :class:`ConnectorError` is raised.
        max_message_bytes: producer limit (the broker's ``message.max.bytes`` must allow it).
        linger_ms: the producer's ``linger.ms``; None (the default): two producers, records sent at
            once while the bus publishes fewer than ~1,500 a second and batched with a 0.5 ms linger
            above (:class:`LingerSwitch`). The publish that makes a switch blocks while the producer
            in use drains (``SWITCH_DRAIN_S`` at most), and so does any publish on the bus meanwhile.
    """

    def __init__(self, bootstrap: str, *, timeout_s: float = 5.0, max_message_bytes: int = 8 * 1024 * 1024,
                 linger_ms: float | None = None) -> None:
        from confluent_kafka import KafkaException, Producer
        from confluent_kafka.admin import AdminClient

        self.bootstrap = bootstrap
        self.timeout_s = timeout_s
        self.max_message_bytes = max_message_bytes
        self.linger_ms = BATCH_LINGER_MS if linger_ms is None else linger_ms
        """The batching producer's linger (with ``linger_ms=None`` the eager one's is 0)."""
        self._common: dict[str, Any] = {"bootstrap.servers": bootstrap, "logger": _LOG,
                                        "socket.connection.setup.timeout.ms": int(max(timeout_s, 1.0) * 1000),
                                        "reconnect.backoff.max.ms": 1000}

        def producer(linger: float, name: str) -> Any:
            return Producer({
                **self._common, "client.id": name, "acks": self.acks, "linger.ms": linger,
                "message.max.bytes": max_message_bytes + RECORD_BATCH_HEADROOM, "enable.idempotence": False,
                # Through a broker outage, records wait in the producer's queue (bounded: 256 MB)
                # until it is back, however long that takes; a full queue is back-pressure on
                # ``publish`` (a retryable error), never a record dropped behind the caller's back.
                "message.timeout.ms": 0, "queue.buffering.max.kbytes": 256 * 1024,
            })

        try:
            # Asking the metadata of a topic the broker does not know must not create it (with the
            # broker's default partitions and configs) where the broker allows auto-creation, as the
            # managed one does: librdkafka's admin asks for it by default (until 2026-12-02).
            self._admin = AdminClient({**self._common, "client.id": "vnx-admin", "allow.auto.create.topics": False})
            brokers = len(self._admin.list_topics(timeout=timeout_s).brokers)  # fails fast when the broker is not there
            self.acks = producer_acks(brokers)
            """The producers' ``acks`` (:func:`~vidnexus.connectors.bus.producer_acks`: "1" on a one-broker cluster)."""
            self._producer = producer(self.linger_ms, "vnx-producer")
            self._eager = producer(0.0, "vnx-producer-eager") if linger_ms is None else None
        except KafkaException as e:
            raise _unreachable("cannot connect", bootstrap, e.args[0] if e.args else e) from None
        self._producers = [p for p in (self._eager, self._producer) if p is not None]
        self._switch = LingerSwitch()  # consulted only when there is an eager producer
        self._plock = threading.Lock()  # picking the producer and producing, as one step
        self.switches = 0
        """How many times records moved from one producer to the other."""
        self._drain_next = 0.0  # when a wanted switch may next wait for the drain (monotonic)
        self._drain_wait = SWITCH_RETRY_S  # how long after a wait that did not drain
        self._failed: list[str] = []
        self._unpolled = 0  # publishes since the producer last served delivery callbacks
        self._flock = threading.Lock()

    # -- topics -------------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int = 4, *, compacted: bool = False,
                     retention_s: float | None = None) -> None:
        from confluent_kafka import KafkaError
        from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]  # re-exported without `as`

        config = topic_configs(self.max_message_bytes, compacted=compacted, retention_s=retention_s)
        fut = self._admin.create_topics([NewTopic(name, partitions, 1, config=config)],
                                        operation_timeout=self.timeout_s, request_timeout=self.timeout_s * 2)[name]
        if self._topic_answer(fut, "create", name, KafkaError.TOPIC_ALREADY_EXISTS):
            self._bring_up_to_date(name, config)
        self._wait_for_metadata(name)

    def _bring_up_to_date(self, name: str, wanted: dict[str, str]) -> None:
        """Give an existing topic the configs vidnexus creates it with (:func:`~vidnexus.connectors.bus.configs_to_alter`,
        incrementally: its other configs stay). A broker that cannot say or set them is logged, not
        raised: the topic works, with its old retention and rolling."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exported without `as`
            AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType)

        wait = self.timeout_s * 2 + 1
        try:
            res = ConfigResource(ResourceType.TOPIC, name)
            entries = self._admin.describe_configs([res], request_timeout=self.timeout_s)[res].result(timeout=wait)
            alter = configs_to_alter({k: e.value for k, e in entries.items()}, wanted)
            if not alter:
                return
            was = {k: entries[k].value if k in entries else None for k in alter}
            ops = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in alter.items()]
            for fut in self._admin.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, name, incremental_configs=ops)],
                                                             request_timeout=self.timeout_s).values():
                fut.result(timeout=wait)
        except (KafkaException, TimeoutError, KeyError) as e:
            logger.warning("topic %s exists; its configs were not brought up to date (%s)", name, e,
                           extra={"topic": name})
            return
        logger.info("topic %s existed with other configs: set %s (was %s)", name, alter, was, extra={"topic": name})

    def delete_topic(self, name: str) -> None:
        """Delete ``name``; a topic the broker does not know is no error. Waits at most twice
        ``timeout_s`` for the broker's answer."""
        from confluent_kafka import KafkaError

        fut = self._admin.delete_topics([name], operation_timeout=self.timeout_s,
                                        request_timeout=self.timeout_s * 2)[name]
        self._topic_answer(fut, "delete", name, KafkaError.UNKNOWN_TOPIC_OR_PART)

    def _topic_answer(self, fut: Any, action: str, name: str, fine: int) -> bool:
        """Wait at most twice ``timeout_s`` (and a second) for the admin's answer to creating or
        deleting topic ``name``; error code ``fine`` is no error (it exists already, it is gone
        already): True when that was the answer. A refusal is retryable unless permanent
        (``topic_error_retryable``); no answer is."""
        from confluent_kafka import KafkaException

        wait = self.timeout_s * 2 + 1
        try:
            fut.result(timeout=wait)
        except KafkaException as e:
            err = e.args[0] if e.args else None
            if _code(err) != fine:
                raise ConnectorError(f"cannot {action} topic {name!r}: {err or e}",
                                     retryable=topic_error_retryable(_code(err))) from None
            return True
        except TimeoutError:
            raise ConnectorError(f"cannot {action} topic {name!r}: no answer from Kafka at {self.bootstrap!r} "
                                 f"in {wait:g} s", retryable=True) from None
        return False

    def _wait_for_metadata(self, name: str) -> None:
        """Wait at most twice ``timeout_s`` until the broker lists ``name``. Not arriving is
        retryable: it is what a broker that went away just after the creation looks like."""
        deadline = time.monotonic() + self.timeout_s * 2
        last: ConnectorError | None = None
        while time.monotonic() < deadline:
            try:
                if self.partitions(name):
                    return
            except ConnectorError as e:
                last = e
            time.sleep(0.05)
        raise ConnectorError(f"topic {name!r} was created but its metadata never arrived"
                             + (f" ({last})" if last else ""), retryable=True)

    def partitions(self, topic: str) -> int:
        from confluent_kafka import KafkaError, KafkaException

        try:
            md = self._admin.list_topics(topic, timeout=self.timeout_s).topics.get(topic)
        except KafkaException as e:
            raise ConnectorError(f"cannot read topic {topic!r}: {e}", retryable=True) from None
        if md is not None and md.error is not None and md.error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
            # E.g. LEADER_NOT_AVAILABLE (its partitions have no leader yet: just created, or the
            # broker restarting): asking again later answers; a permanent error (rights) does not.
            raise ConnectorError(f"cannot read topic {topic!r}: {md.error}",
                                 retryable=topic_error_retryable(md.error.code()))
        if md is None or md.error is not None or not md.partitions:
            raise ConnectorError(f"unknown topic {topic!r}; create it first")
        return len(md.partitions)

    def group_lag(self, group: str, topic: str, partitions: Sequence[int]) -> dict[int, int]:
        """Records of ``topic``'s ``partitions`` that consumer group ``group`` has not committed yet
        (from the earliest offset where it committed nothing)."""
        from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
        from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]  # re-exported without `as`

        tps = [TopicPartition(topic, p) for p in partitions]
        # Each admin request is bounded (a watchdog asks from a role's loop: a broker that does not
        # answer must cost that step the bus's timeout, not block it).
        wait = self.timeout_s * 2 + 1
        try:
            res = self._admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group, tps)],
                                                          request_timeout=self.timeout_s)
            committed = {tp.partition: tp.offset for tp in res[group].result(timeout=wait).topic_partitions}
            ends = self._admin.list_offsets({tp: OffsetSpec.latest() for tp in tps}, request_timeout=self.timeout_s)
            starts = self._admin.list_offsets({tp: OffsetSpec.earliest() for tp in tps}, request_timeout=self.timeout_s)
            out = {}
            for tp in tps:
                end = ends[tp].result(timeout=wait).offset
                start = committed.get(tp.partition, -1)
                if start < 0:
                    start = starts[tp].result(timeout=wait).offset
                out[tp.partition] = end - start
            return out
        except (KafkaException, KeyError) as e:
            raise ConnectorError(f"cannot read the lag of group {group!r} on {topic!r}: {e}", retryable=True) from None
        except TimeoutError:
            raise ConnectorError(f"cannot read the lag of group {group!r} on {topic!r}: no answer from Kafka at "
                                 f"{self.bootstrap!r} in {wait:g} s", retryable=True) from None

    # -- produce ------------------------------------------------------------------------------
    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            with self._flock:
                if len(self._failed) < 100:
                    self._failed.append(f"{msg.topic()}: {err}")

    def publish(self, topic: str, key: bytes | None, value: bytes, headers: Sequence[tuple[str, bytes]] = ()) -> None:
        from confluent_kafka import KafkaException

        if len(value) > self.max_message_bytes:
            raise ConnectorError(
                f"message of {len(value)} bytes for topic {topic!r} exceeds the {self.max_message_bytes}-byte limit")
        with self._plock:
            producer = self._pick()
            for _ in range(100):
                try:
                    producer.produce(topic, value=value, key=key, headers=list(headers) or None,
                                     on_delivery=self._delivered)
                    break
                except BufferError:  # librdkafka's queue is full: let it send, then try again
                    producer.poll(0.05)
                except KafkaException as e:
                    raise ConnectorError(f"publish to {topic!r} failed: {e}", retryable=True) from None
            else:
                raise ConnectorError(f"publish to {topic!r} failed: the producer's queue stayed full", retryable=True)
            self._unpolled += 1
            if self._unpolled >= 64:  # serve delivery callbacks now and then (flush serves the rest): a
                self._unpolled = 0    # poll per message cost about as much as the produce
                producer.poll(0)

    def _pick(self) -> Any:
        """The producer for the next record (under ``_plock``). A switch waits until the producer in
        use has nothing queued or in flight, so records do not overtake each other across the two;
        the publish that wants it waits for that drain (bounded: ``SWITCH_DRAIN_S``)."""
        if self._eager is None:
            return self._producer
        switch = self._switch
        active = self._eager if switch.eager else self._producer
        now = time.monotonic()
        if switch.want_eager(now) != switch.eager:
            active.poll(0)  # serve its delivery reports, so that its count is current
            if len(active) and now >= self._drain_next:
                if self._drain(active):
                    self._drain_wait = SWITCH_RETRY_S
                else:  # try again later, backing off while the drain keeps failing
                    self._drain_next = time.monotonic() + self._drain_wait
                    self._drain_wait = min(2 * self._drain_wait, SWITCH_RETRY_MAX_S)
            if len(active) == 0:
                switch.switched(time.monotonic())
                self.switches += 1
                active = self._eager if switch.eager else self._producer
        return active

    @staticmethod
    def _drain(producer: Any) -> bool:
        """Wait while ``producer`` has records queued or in flight and keeps acknowledging them (no
        gap of ``SWITCH_STALL_S`` without one) at a rate that would empty it within
        ``SWITCH_DRAIN_S``; whether it emptied."""
        start = progress = time.monotonic()
        deadline = start + SWITCH_DRAIN_S
        first = left = len(producer)
        while left:
            now = time.monotonic()
            if now >= deadline:
                return False
            left_now = producer.flush(min(SWITCH_SLICE_S, deadline - now))
            now = time.monotonic()
            if left_now < left:
                progress = now
            elif now - progress >= SWITCH_STALL_S:  # no acknowledgement for a while: broker away
                return False
            done = first - left_now
            if now - start >= SWITCH_STALL_S and done and left_now * (now - start) / done > deadline - now:
                return False  # at the rate so far, the rest would not drain in time
            left = left_now
        return True

    @property
    def adaptive(self) -> bool:
        """Whether records go to a second, eager producer while the publish rate is low (:class:`LingerSwitch`)."""
        return self._eager is not None

    def flush(self, timeout_s: float = 10.0) -> None:
        deadline = time.monotonic() + timeout_s
        left = sum(p.flush(max(0.0, deadline - time.monotonic())) for p in self._producers)
        with self._flock:
            failed, self._failed = self._failed, []
        if left:
            raise ConnectorError(f"flush failed: {left} records not acknowledged after {timeout_s:g} s",
                                 retryable=True)
        if failed:
            raise ConnectorError(f"{len(failed)} records were not acknowledged: {failed[0]}", retryable=True)

    def delivered(self) -> bool:
        self._unpolled = 0
        for p in self._producers:
            p.poll(0)  # serve the delivery reports that arrived
        with self._flock:
            failed, self._failed = self._failed, []
        if failed:
            raise ConnectorError(f"{len(failed)} records were not acknowledged: {failed[0]}", retryable=True)
        return all(len(p) == 0 for p in self._producers)

    # -- consume ------------------------------------------------------------------------------
    def subscribe(self, topics: Sequence[str], group: str | None, *, from_beginning: bool = True) -> "ConfluentConsumer":
        return ConfluentConsumer(self, list(topics), group, from_beginning)

    def close(self) -> None:
        for p in self._producers:
            try:
                p.flush(self.timeout_s)
            except Exception:  # closing: nothing left to tell anyone
                pass


def _commit_result(err: Any, partitions: Any) -> None:
    """How a commit sent without waiting ended (served by the consumer's polls): a failure is
    logged; those records are read again after a rebalance or restart (at least once)."""
    if err is not None:
        logger.warning("a commit sent without waiting failed: %s", err)


class ConfluentConsumer:
    """A librdkafka consumer with manual commits (at-least-once). ``group=None`` reads every
    partition of the topics (as they are when it subscribes) and commits nothing."""

    def __init__(self, bus: ConfluentBus, topics: list[str], group: str | None, from_beginning: bool) -> None:
        from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaException, TopicPartition

        self.group = group
        self._bus = bus
        conf = {
            **bus._common,
            "group.id": group or f"vnx-reader-{uuid.uuid4().hex[:12]}",
            "client.id": f"vnx-{group or 'reader'}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest" if from_beginning else "latest",
            # A dead member's partitions move after the session timeout; 6 s is the broker's default
            # minimum. A rebalance waits at most max.poll.interval for members to rejoin.
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 1000,
            "max.poll.interval.ms": 60000,
            "fetch.max.bytes": bus.max_message_bytes * 2,
            "max.partition.fetch.bytes": bus.max_message_bytes + RECORD_BATCH_HEADROOM,
            # How long the broker holds a fetch that found nothing (it answers as soon as a record
            # arrives: fetch.min.bytes is 1). At 10 ms every idle consumer asked 100 times a second:
            # an idle executor and its client cost the broker 0.13-0.34 of a core on this 2-core box,
            # 0.04 at 100 ms; a bench hop round trip at 100 req/s also cost it 1.3 ms of CPU instead
            # of 1.8-2.7. A partition assigned meanwhile waits for the held fetch (at most this long).
            "fetch.wait.max.ms": FETCH_WAIT_MS,
            "on_commit": _commit_result,
        }
        try:
            self._c = Consumer(conf)
            if group is None:
                start = OFFSET_BEGINNING if from_beginning else OFFSET_END
                md = self._c.list_topics(timeout=bus.timeout_s).topics
                self._c.assign([TopicPartition(t, p, start) for t in topics if t in md for p in md[t].partitions])
            else:
                self._c.subscribe(topics)
        except KafkaException as e:
            raise _unreachable("cannot create consumer", bus.bootstrap, e) from None

    def poll(self, timeout_s: float = 1.0, max_records: int = 500) -> list[Message]:
        from confluent_kafka import KafkaError, KafkaException

        try:
            # librdkafka's consume(n, timeout) returns only when it has n messages or the timeout
            # has passed: a poll of one or two messages waited the whole timeout (every request
            # and reply hop took ~timeout/2 more). Wait for the first message, then take what is
            # already fetched without waiting.
            first = self._c.poll(timeout_s)
            msgs = [] if first is None else [first]
            if first is not None and max_records > 1:
                msgs += self._c.consume(num_messages=max_records - 1, timeout=0)
        except KafkaException as e:
            raise ConnectorError(f"consume failed: {e}", retryable=True) from None
        out: list[Message] = []
        for m in msgs:
            err = m.error()
            if err is not None:
                if err.code() != KafkaError._PARTITION_EOF:
                    logger.warning("consumer %s: %s", self.group, err)
                continue
            _, ts = m.timestamp()
            topic, partition, offset = m.topic(), m.partition(), m.offset()
            # A consumed message without an error always has its topic, partition and offset.
            assert topic is not None and partition is not None and offset is not None
            out.append(Message(topic, partition, offset, m.key(), m.value() or b"", ts, _headers(m.headers())))
        return out

    def commit(self, offsets: dict[tuple[str, int], int] | None = None, *, wait: bool = True) -> None:
        from confluent_kafka import KafkaError, KafkaException, TopicPartition

        if self.group is None:
            return
        try:
            if offsets is None:
                positions = [tp for tp in self._c.position(self._c.assignment()) if tp.offset >= 0]
                if positions:
                    self._commit(positions, wait)
            else:
                owned = {(tp.topic, tp.partition) for tp in self._c.assignment()}
                mine = [TopicPartition(t, p, o) for (t, p), o in offsets.items() if (t, p) in owned]
                if mine:
                    self._commit(mine, wait)
        except KafkaException as e:
            err = e.args[0] if e.args else None
            code = err.code() if err is not None else None
            if code == KafkaError._NO_OFFSET:
                return
            if code in (KafkaError.REBALANCE_IN_PROGRESS, KafkaError.ILLEGAL_GENERATION,
                        KafkaError.UNKNOWN_MEMBER_ID, KafkaError._ASSIGNMENT_LOST):
                # The group rebalanced; the new owner re-reads from the last commit (at-least-once).
                logger.warning("commit after rebalance ignored: %s", err)
                return
            raise ConnectorError(f"commit failed: {err or e}", retryable=True) from None

    def _commit(self, offsets: list[Any], wait: bool) -> None:
        if wait:
            self._c.commit(offsets=offsets, asynchronous=False)
        else:
            self._c.commit(offsets=offsets, asynchronous=True)

    def assignment(self) -> set[tuple[str, int]]:
        return {(tp.topic, tp.partition) for tp in self._c.assignment()}

    def wakeup(self) -> None:
        """Nothing to do: polls here are real-time waits of at most their timeout."""

    def close(self) -> None:
        try:
            self._c.close()
        except RuntimeError:  # already closed
            pass


def _code(err: Any) -> int | None:
    """The Kafka error code of a KafkaException's argument (None when it carries none)."""
    code = getattr(err, "code", None)
    return code() if callable(code) else None
