"""Connectors: the message Bus (in-memory, Kafka with confluent-kafka or kafka-python) and the
result Store (chdb, ClickHouse server); one file per driver, ``factory`` picks them from the settings."""

from vidnexus.connectors.bus import Bus, Consumer, Message
from vidnexus.connectors.factory import open_bus, open_store
from vidnexus.contracts.schema import Column, TableSchema
from vidnexus.connectors.store import QueryResult, Store

__all__ = [
    "Bus",
    "Consumer",
    "Message",
    "open_bus",
    "Column",
    "QueryResult",
    "Store",
    "TableSchema",
    "open_store",
]
