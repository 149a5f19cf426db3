"""Connectors: the message Bus (in-memory, Kafka) and the result Store (chdb, ClickHouse server)."""

from vidnexus.connectors.bus import Bus, Consumer, Message, open_bus
from vidnexus.connectors.store import Column, QueryResult, Store, TableSchema, open_store

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
