"""The Store protocol (ClickHouse dialect), SQL literals, batched inserts and table migration.

Two implementations: :class:`~vidnexus.connectors.chdb_store.ChdbStore` (embedded, current engine)
and :class:`~vidnexus.connectors.clickhouse_store.ClickHouseStore` (a server over the native protocol,
including the 18.16 server Debian packages); tables are :class:`~vidnexus.contracts.schema.TableSchema`
(adapted to the engine's version there).

Example:
    >>> print(quote("it's"), quote([1, "a"]), parse_version("18.16.1"))
    'it\\'s' [1, 'a'] (18, 16, 1)
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence, runtime_checkable

from vidnexus.contracts.schema import TableSchema, adapt_type

__all__ = [
    "QueryResult",
    "Store",
    "quote",
    "parse_version",
    "insert_batches",
    "ensure_table",
]



def parse_version(text: str) -> tuple[int, ...]:
    """``'18.16.1'`` → ``(18, 16, 1)``."""
    return tuple(int(p) for p in re.findall(r"\d+", text)[:4])


def quote(value: Any) -> str:
    """A SQL literal for ``value`` (strings escaped; lists become arrays)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, dt.datetime):
        return "'" + value.strftime("%Y-%m-%d %H:%M:%S") + "'"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(quote(v) for v in value) + "]"
    s = str(value).replace("\\", "\\\\").replace("'", "\\'")
    return f"'{s}'"


@dataclass(frozen=True)
class QueryResult:
    """Columns, their types, and the rows of a SELECT."""

    columns: tuple[str, ...]
    types: tuple[str, ...]
    rows: list[tuple[Any, ...]] = field(default_factory=list)

    def dicts(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, r)) for r in self.rows]

    def scalar(self) -> Any:
        """The single value of a one-row, one-column result."""
        if len(self.rows) != 1 or len(self.columns) != 1:
            raise ValueError(f"expected one value, got {len(self.rows)} rows × {len(self.columns)}")
        return self.rows[0][0]


@runtime_checkable
class Store(Protocol):
    """SQL over a ClickHouse engine."""

    version: tuple[int, ...]
    """Engine version, e.g. (18, 16, 1) or (26, 9, 2, 1)."""

    embedded: bool
    """Whether the engine runs in this process (chdb) rather than on a server."""

    def execute(self, sql: str) -> None:
        """Run a statement that returns no rows (DDL)."""
        ...

    def query(self, sql: str, settings: Mapping[str, Any] | None = None) -> QueryResult:
        """Run a SELECT, with ClickHouse query-level ``settings`` (appended as a SETTINGS clause on
        the embedded engine, so pass them only with a plain SELECT)."""
        ...

    def insert(self, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> int:
        """Insert rows (tuples in ``columns`` order) in batches; returns the number inserted."""
        ...

    def create_table(self, schema: TableSchema) -> None:
        """Create the table if it does not exist, adapting types to :attr:`version`."""
        ...

    def close(self) -> None:
        """Release the engine or the connection."""
        ...


def insert_batches(
    table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]], batch: int,
    send: Callable[[list[Sequence[Any]]], None],
) -> int:
    """Check every row's width and hand ``send`` batches of at most ``batch`` rows; the count sent."""
    from vidnexus.errors import ConnectorError

    n = 0
    buf: list[Sequence[Any]] = []
    for row in rows:
        if len(row) != len(columns):
            raise ConnectorError(f"insert into {table}: row has {len(row)} values for {len(columns)} columns")
        buf.append(row)
        if len(buf) >= batch:
            send(buf)
            n += len(buf)
            buf = []
    if buf:
        send(buf)
        n += len(buf)
    return n


def ensure_table(store: Store, schema: TableSchema) -> list[str]:
    """Create ``schema``'s table, or migrate an existing one by adding the columns it lacks.
    Returns the columns added. Changing a column's type or the key is not done silently.

    Raises:
        ConfigError: an existing column has another type, or the table's key differs.
    """
    from vidnexus.errors import ConfigError

    found = store.query(
        "SELECT name, type FROM system.columns WHERE database = currentDatabase() "
        f"AND table = {quote(schema.name)}"
    ).rows
    if not found:
        store.create_table(schema)
        return []
    have = {str(n): str(t) for n, t in found}
    added = []
    for c in schema.columns:
        want = adapt_type(c.type, store.version)
        if c.name not in have:
            store.execute(f"ALTER TABLE {schema.name} ADD COLUMN `{c.name}` {want}")
            added.append(c.name)
        elif have[c.name] != want:
            raise ConfigError(
                f"table {schema.name}: column {c.name} is {have[c.name]} in the store but the app declares "
                f"{want}; rename the column or migrate the table by hand"
            )
    return added
