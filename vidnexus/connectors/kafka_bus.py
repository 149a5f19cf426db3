"""Bus over Apache Kafka with kafka-python (producer, group consumers, topic admin)."""

from __future__ import annotations

import logging
from typing import Any, Sequence

from vidnexus.connectors.bus import Message, configs_to_alter, producer_acks, topic_configs, topic_error_retryable
from vidnexus.errors import ConnectorError

__all__ = ["KafkaBus", "KafkaGroupConsumer"]

logger = logging.getLogger(__name__)


def _warn_without_c_crc() -> None:
    """kafka-python checks (and writes) a CRC-32C over every record batch. Without the ``crc32c``
    package it does so in pure Python: 174 ms of CPU per 600 KB request here (40 µs with it), which
    put a 2-stage app over Kafka seconds behind real time. ``crc32c`` is a dependency."""
    try:
        import crc32c  # noqa: F401
    except ImportError:
        logger.warning("the crc32c package is missing: kafka-python checks record CRCs in pure Python, "
                       "which is slow for frames; `pip install crc32c`")


def _kafka_error(what: str, bootstrap: str, exc: BaseException) -> ConnectorError:
    detail = str(exc) if type(exc).__name__ in str(exc) else f"{type(exc).__name__}: {exc}"
    return ConnectorError(
        f"{what}: Kafka at {bootstrap!r} is not reachable ({detail}). "
        "Check VNX_KAFKA_BOOTSTRAP, or start the local broker with `vidnexus services up`.",
        retryable=True,
    )


class KafkaBus:
    """A Bus on a Kafka cluster.

    Args:
        bootstrap: ``host:port[,host:port]``.
        timeout_s: how long connecting may take before :class:`ConnectorError` is raised.
        max_message_bytes: producer limit (the broker's ``message.max.bytes`` must allow it).
    """

    def __init__(
        self, bootstrap: str, *, timeout_s: float = 5.0, max_message_bytes: int = 8 * 1024 * 1024,
        linger_ms: float = 2.0,
    ) -> None:
        from kafka import KafkaAdminClient, KafkaProducer
        from kafka.errors import KafkaConfigurationError, KafkaError

        _warn_without_c_crc()
        self.bootstrap = bootstrap
        self.timeout_s = timeout_s
        self.max_message_bytes = max_message_bytes
        common: dict[str, Any] = dict(
            bootstrap_servers=bootstrap.split(","),
            request_timeout_ms=int(max(timeout_s, 1.0) * 1000) + 1000,
            bootstrap_timeout_ms=int(timeout_s * 1000),
            reconnect_backoff_max_ms=1000,
        )
        self._common = common
        self.linger_ms = linger_ms
        try:
            self._admin = KafkaAdminClient(client_id="vnx-admin", **common)
            self.acks = producer_acks(len(self._admin.describe_cluster().get("brokers") or ()))
            """The producer's ``acks`` (:func:`~vidnexus.connectors.bus.producer_acks`: "1" on a one-broker cluster)."""
            self._producer = KafkaProducer(
                client_id="vnx-producer",
                acks=1 if self.acks == "1" else "all",
                linger_ms=linger_ms,
                max_request_size=max_message_bytes,
                max_block_ms=int(timeout_s * 1000),
                **common,
            )
        except KafkaConfigurationError as e:
            raise ConnectorError(f"invalid Kafka client configuration: {e}") from None
        except (KafkaError, OSError, ValueError) as e:
            raise _kafka_error("cannot connect", bootstrap, e) from None
        self._pending: list[Any] = []

    def create_topic(self, name: str, partitions: int = 4, *, compacted: bool = False,
                     retention_s: float | None = None) -> None:
        from kafka.admin import NewTopic
        from kafka.errors import KafkaError, TopicAlreadyExistsError

        configs = topic_configs(self.max_message_bytes, compacted=compacted, retention_s=retention_s)
        try:
            self._admin.create_topics(
                [NewTopic(name, partitions, 1, topic_configs=configs)],
                timeout_ms=int(self.timeout_s * 1000),
            )
        except TopicAlreadyExistsError:
            self._bring_up_to_date(name, configs)
            return
        except (KafkaError, RuntimeError) as e:  # RuntimeError: "Failed to find active controller id!" mid-restart
            raise ConnectorError(f"cannot create topic {name!r}: {e}",
                                 retryable=topic_error_retryable(getattr(e, "errno", None))) from None
        self._wait_for_metadata(name)

    def _bring_up_to_date(self, name: str, wanted: dict[str, str]) -> None:
        """Give an existing topic the configs vidnexus creates it with (:func:`~vidnexus.connectors.bus.configs_to_alter`,
        incrementally on brokers from 2.3: its other configs stay). A broker that cannot say or set
        them is logged, not raised: the topic works, with its old retention and rolling."""
        from kafka.admin import ConfigResource, ConfigResourceType
        from kafka.errors import KafkaError

        try:
            described = self._admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name, configs=dict(wanted))],
                                                     config_filter="all")
            entries = described.get("topic", {}).get(name, {})
            alter = configs_to_alter({k: e.get("value") for k, e in entries.items()}, wanted)
            if not alter:
                return
            was = {k: entries.get(k, {}).get("value") for k in alter}
            answer = self._admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, name, configs=alter)])
            result = answer.get("topic", {}).get(name)
            if result != "OK":
                raise KafkaError(f"the broker answered {result!r}")
        except (KafkaError, RuntimeError, ValueError) as e:
            logger.warning("topic %s exists; its configs were not brought up to date (%s)", name, e,
                           extra={"topic": name})
            return
        logger.info("topic %s existed with other configs: set %s (was %s)", name, alter, was, extra={"topic": name})

    def delete_topic(self, name: str) -> None:
        """Delete ``name``; a topic the broker does not know is no error. Waits at most ``timeout_s``
        for the controller's answer (the admin client's request timeout bounds the rest)."""
        from kafka.errors import KafkaError, UnknownTopicOrPartitionError

        try:
            result = self._admin.delete_topics([name], timeout_ms=int(self.timeout_s * 1000), raise_errors=False)
        except (KafkaError, RuntimeError) as e:  # RuntimeError: no active controller found (mid-restart)
            raise ConnectorError(f"cannot delete topic {name!r}: {e}", retryable=True) from None
        for t in result.get("topics", []):
            code = t.get("error_code", 0) if isinstance(t, dict) else 0
            if code not in (0, UnknownTopicOrPartitionError.errno):
                raise ConnectorError(f"cannot delete topic {name!r}: error {code} "
                                     f"({t.get('error_message') or 'no message'})", retryable=topic_error_retryable(code))

    def _wait_for_metadata(self, name: str) -> None:
        """Wait at most twice ``timeout_s`` until the broker lists ``name``. Not arriving is
        retryable: it is what a broker that went away just after the creation looks like."""
        import time

        from kafka.errors import KafkaError

        deadline = time.monotonic() + self.timeout_s * 2
        last: KafkaError | None = None
        while time.monotonic() < deadline:
            try:
                if self._producer.partitions_for(name):
                    return
            except KafkaError as e:  # the metadata request timed out: the broker is away
                last = e
            time.sleep(0.05)
        raise ConnectorError(f"topic {name!r} was created but its metadata never arrived"
                             + (f" ({last})" if last else ""), retryable=True)

    def partitions(self, topic: str) -> int:
        """``topic``'s partition count, from a metadata request of the admin client. A topic the
        broker does not know raises at once, not retryable; a broker that does not answer, or a
        topic whose partitions have no leader yet, raises retryable. (The producer's
        ``partitions_for``, used until 2026-12-02, waited ``max_block_ms`` for an unknown topic and
        then raised the same timeout as for a broker away, which this called "unknown topic".)"""
        from kafka.errors import KafkaError, UnknownTopicOrPartitionError

        try:
            described = self._admin.describe_topics([topic])
        except (KafkaError, RuntimeError, OSError) as e:
            raise ConnectorError(f"cannot read topic {topic!r}: {e}", retryable=True) from None
        md = next((t for t in described if t.get("name") == topic), None)
        code = int(md.get("error_code") or 0) if md is not None else UnknownTopicOrPartitionError.errno
        if md is None or code == UnknownTopicOrPartitionError.errno:
            raise ConnectorError(f"unknown topic {topic!r}; create it first")
        if code:  # e.g. LEADER_NOT_AVAILABLE: just created, or its broker restarting
            raise ConnectorError(f"cannot read topic {topic!r}: error {code}", retryable=topic_error_retryable(code))
        if not md.get("partitions"):
            raise ConnectorError(f"cannot read topic {topic!r}: no partitions listed yet", retryable=True)
        return len(md["partitions"])

    def group_lag(self, group: str, topic: str, partitions: Sequence[int]) -> dict[int, int]:
        """Records of ``topic``'s ``partitions`` that consumer group ``group`` has not committed yet
        (from the earliest offset where it committed nothing)."""
        from kafka import TopicPartition
        from kafka.errors import KafkaError

        tps = [TopicPartition(topic, p) for p in partitions]
        try:
            committed = self._admin.list_group_offsets({group: tps}).get(group, {})
            ends = self._admin.list_partition_offsets({tp: -1 for tp in tps})
            missing = [tp for tp in tps if tp not in committed or committed[tp].offset < 0]
            starts = self._admin.list_partition_offsets({tp: -2 for tp in missing}) if missing else {}
        except KafkaError as e:
            raise ConnectorError(f"cannot read the lag of group {group!r} on {topic!r}: {e}", retryable=True) from None

        def offset(v: Any) -> int:
            return int(getattr(v, "offset", v))
        return {tp.partition: offset(ends[tp]) - (offset(starts[tp]) if tp in starts else committed[tp].offset)
                for tp in tps}

    def publish(
        self,
        topic: str,
        key: bytes | None,
        value: bytes,
        headers: Sequence[tuple[str, bytes]] = (),
    ) -> None:
        from kafka.errors import KafkaError, MessageSizeTooLargeError

        if len(value) > self.max_message_bytes:
            raise ConnectorError(
                f"message of {len(value)} bytes for topic {topic!r} exceeds the "
                f"{self.max_message_bytes}-byte limit"
            )
        try:
            fut = self._producer.send(topic, key=key, value=value, headers=list(headers) or None)
        except MessageSizeTooLargeError as e:
            raise ConnectorError(f"message for topic {topic!r} too large: {e}") from None
        except KafkaError as e:
            raise ConnectorError(f"publish to {topic!r} failed: {e}", retryable=True) from None
        self._pending.append(fut)
        if len(self._pending) > 10_000:
            self._pending = [f for f in self._pending if not f.is_done]

    def flush(self, timeout_s: float = 10.0) -> None:
        from kafka.errors import KafkaError

        try:
            self._producer.flush(timeout=timeout_s)
        except KafkaError as e:
            raise ConnectorError(f"flush failed: {e}", retryable=True) from None
        failed = [f for f in self._pending if f.is_done and f.failed()]
        self._pending = []
        if failed:
            raise ConnectorError(
                f"{len(failed)} records were not acknowledged: {failed[0].exception}", retryable=True
            )

    def delivered(self) -> bool:
        if not all(f.is_done for f in self._pending):
            return False
        failed = [f for f in self._pending if f.failed()]
        self._pending = []
        if failed:
            raise ConnectorError(
                f"{len(failed)} records were not acknowledged: {failed[0].exception}", retryable=True
            )
        return True

    def subscribe(
        self, topics: Sequence[str], group: str | None, *, from_beginning: bool = True
    ) -> "KafkaGroupConsumer":
        return KafkaGroupConsumer(self, list(topics), group, from_beginning)

    def close(self) -> None:
        try:
            self._producer.flush(timeout=self.timeout_s)
        finally:
            self._producer.close(timeout=self.timeout_s)
            self._admin.close()


class KafkaGroupConsumer:
    """A kafka-python consumer with manual commits (at-least-once)."""

    def __init__(
        self, bus: KafkaBus, topics: list[str], group: str | None, from_beginning: bool
    ) -> None:
        from kafka import KafkaConsumer
        from kafka.errors import KafkaError

        try:
            self._c = KafkaConsumer(
                *topics,
                group_id=group,
                client_id=f"vnx-{group or 'reader'}",
                enable_auto_commit=False,
                auto_offset_reset="earliest" if from_beginning else "latest",
                # A dead member's partitions move after the session timeout; 6 s is the broker's
                # default minimum. A rebalance waits at most max_poll_interval for members to rejoin.
                session_timeout_ms=6_000,
                heartbeat_interval_ms=1_000,
                max_poll_interval_ms=60_000,
                fetch_max_bytes=bus.max_message_bytes * 2,
                max_partition_fetch_bytes=bus.max_message_bytes,
                **bus._common,
            )
        except (KafkaError, OSError) as e:
            raise _kafka_error("cannot create consumer", bus.bootstrap, e) from None
        self.group = group
        if group is not None:
            # The topics' partitions in the consumer's metadata before its first JoinGroup. Without
            # them the leader assigns nothing (kafka-python's range assignor: "no partition metadata"),
            # the arriving metadata forces a second rebalance at once, and kafka-python 3.0.12
            # sometimes never finishes that one: the member then holds no partition until the
            # broker's rebalance timeout (60 s here), seen as `bench hop` answering nothing.
            try:
                for t in topics:
                    self._c.partitions_for_topic(t)
            except KafkaError:
                pass  # a topic not there yet joins later, as before

    def poll(self, timeout_s: float = 1.0, max_records: int = 500) -> list[Message]:
        from kafka.errors import IllegalStateError, KafkaError

        try:
            batches = self._c.poll(timeout_ms=int(timeout_s * 1000), max_records=max_records)
        except IllegalStateError:  # closed, or not subscribed: a caller's bug, not an outage
            raise
        except KafkaError as e:  # a coordinator or fetch error while the broker restarts
            raise ConnectorError(f"cannot poll (group {self.group}): {e}", retryable=True) from None
        out: list[Message] = []
        for tp, records in sorted(batches.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
            for r in records:
                out.append(
                    Message(
                        tp.topic,
                        tp.partition,
                        r.offset,
                        r.key,
                        r.value,
                        r.timestamp,
                        tuple((k, v) for k, v in (r.headers or [])),
                    )
                )
        return out

    def commit(self, offsets: dict[tuple[str, int], int] | None = None, *, wait: bool = True) -> None:
        from kafka.errors import CommitFailedError, KafkaError, RebalanceInProgressError
        from kafka.structs import OffsetAndMetadata, TopicPartition

        if self.group is None:
            return
        commit = self._c.commit if wait else self._c.commit_async
        try:
            if offsets is None:
                commit()
            else:
                owned = self._c.assignment()
                mine = {TopicPartition(t, p): OffsetAndMetadata(o, "", -1) for (t, p), o in offsets.items()
                        if TopicPartition(t, p) in owned}
                if mine:
                    commit(mine)
        except (CommitFailedError, RebalanceInProgressError) as e:
            # The group rebalanced; the new owner re-reads from the last commit (at-least-once).
            logger.warning("commit after rebalance ignored: %s", e)
        except KafkaError as e:
            raise ConnectorError(f"commit failed: {e}", retryable=True) from None

    def assignment(self) -> set[tuple[str, int]]:
        return {(tp.topic, tp.partition) for tp in self._c.assignment()}

    def wakeup(self) -> None:
        """Nothing to do: polls here are real-time waits of at most their timeout."""

    def close(self) -> None:
        self._c.close(autocommit=False)
