"""Build the bus and the store the settings name (kept out of the protocol modules, which the
drivers import).

Example:
    >>> from vidnexus.config import Settings
    >>> type(open_bus(Settings(bus="memory"))).__name__
    'MemoryBus'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vidnexus.connectors.bus import Bus
from vidnexus.connectors.store import Store

if TYPE_CHECKING:
    from vidnexus.config import Settings

__all__ = ["open_bus", "open_store"]


def open_bus(settings: "Settings") -> Bus:
    """The bus selected by ``settings.bus`` (and ``settings.kafka_driver``).

    Raises:
        ConnectorError: the Kafka broker cannot be reached within ``connect_timeout_s``.
    """
    if settings.bus == "kafka":
        # Unset: each driver's own default linger.
        linger: dict[str, Any] = {} if settings.kafka_linger_ms is None else {"linger_ms": settings.kafka_linger_ms}
        if settings.kafka_driver == "kafka-python":
            from vidnexus.connectors.kafka_bus import KafkaBus

            return KafkaBus(settings.kafka_bootstrap, timeout_s=settings.connect_timeout_s, **linger)
        from vidnexus.connectors.confluent_bus import ConfluentBus

        return ConfluentBus(settings.kafka_bootstrap, timeout_s=settings.connect_timeout_s, **linger)
    from vidnexus.connectors.memory_bus import MemoryBus

    return MemoryBus()


def open_store(settings: "Settings", *, reader: bool = False) -> Store:
    """The store selected by ``settings.store``; with ``reader``, on a ClickHouse server, as the
    read-only user of ``settings.clickhouse_reader_url`` (the embedded store has no users: the SQL
    guard and the engine's ``readonly`` setting protect it).

    Raises:
        ConnectorError: the server cannot be reached within ``connect_timeout_s``, the reader is
            refused, or the embedded store's directory is locked by another process.
    """
    if settings.store == "clickhouse":
        from vidnexus.connectors.clickhouse_store import ClickHouseStore, reader_url
        from vidnexus.errors import ConnectorError

        if not reader:
            return ClickHouseStore(settings.clickhouse_url, timeout_s=settings.connect_timeout_s)
        url = settings.clickhouse_reader_url or reader_url(settings.clickhouse_url)
        try:
            return ClickHouseStore(url, timeout_s=settings.connect_timeout_s)
        except ConnectorError as e:
            if e.retryable:
                raise
            raise ConnectorError(f"{e}; read-only SQL connects as a user with SELECT on the project's tables "
                                 "only: create it (docs/operators.md#sql) or set VNX_CLICKHOUSE_READER_URL") from None
    from vidnexus.connectors.chdb_store import ChdbStore

    return ChdbStore(settings.data_dir / "chdb")
