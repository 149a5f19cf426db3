"""The Store protocol (ClickHouse dialect) and the schema layer that adapts to the engine version.

Two implementations: :class:`~vidnexus.connectors.chdb_store.ChdbStore` (embedded, current engine)
and :class:`~vidnexus.connectors.clickhouse_store.ClickHouseStore` (a server over the native protocol,
including the 18.16 server Debian packages). Schemas are written once with modern types and adapted:
on servers older than 19.x ``LowCardinality(T)`` becomes ``T``, ``DateTime64(n)`` becomes
``DateTime`` and ``Bool`` becomes ``UInt8``.

Example:
    >>> t = TableSchema("events", (Column("cam", "LowCardinality(String)"), Column("n", "UInt32")),
    ...                 order_by=("cam",))
    >>> t.create_sql((18, 16, 1))
    'CREATE TABLE IF NOT EXISTS events (`cam` String, `n` UInt32) ENGINE = MergeTree() ORDER BY (`cam`)'
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence, runtime_checkable

__all__ = [
    "Column",
    "TableSchema",
    "QueryResult",
    "Store",
    "adapt_type",
    "quote",
    "parse_version",
    "insert_batches",
    "ensure_table",
]

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse_version(text: str) -> tuple[int, ...]:
    """``'18.16.1'`` → ``(18, 16, 1)``."""
    return tuple(int(p) for p in re.findall(r"\d+", text)[:4])


def modern(version: tuple[int, ...]) -> bool:
    """Whether the engine knows LowCardinality, DateTime64 and Bool (ClickHouse ≥ 20.1)."""
    return version >= (20, 1)


def adapt_type(ch_type: str, version: tuple[int, ...]) -> str:
    """Rewrite a column type for an engine version (see module docstring)."""
    if modern(version):
        return ch_type
    t = re.sub(r"LowCardinality\(([^()]*)\)", r"\1", ch_type)
    t = re.sub(r"DateTime64\(\s*\d+\s*(,[^)]*)?\)", "DateTime", t)
    t = re.sub(r"\bBool\b", "UInt8", t)
    return t


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
class Column:
    """A column name and its ClickHouse type (modern spelling; adapted per engine version)."""

    name: str
    type: str

    def __post_init__(self) -> None:
        if not _IDENT.fullmatch(self.name):
            raise ValueError(f"column name {self.name!r} is not a plain identifier")


@dataclass(frozen=True)
class TableSchema:
    """A MergeTree-family table. ``engine`` may be e.g. ``ReplacingMergeTree(version)`` for
    idempotent replays (rows with the same ``order_by`` key collapse to one)."""

    name: str
    columns: tuple[Column, ...]
    order_by: tuple[str, ...]
    engine: str = "MergeTree()"
    partition_by: str | None = None

    def __post_init__(self) -> None:
        if not _IDENT.fullmatch(self.name):
            raise ValueError(f"table name {self.name!r} is not a plain identifier")
        names = {c.name for c in self.columns}
        missing = [k for k in self.order_by if k not in names]
        if missing:
            raise ValueError(f"table {self.name}: order_by names unknown columns {missing}")

    def create_sql(self, version: tuple[int, ...]) -> str:
        cols = ", ".join(f"`{c.name}` {adapt_type(c.type, version)}" for c in self.columns)
        sql = f"CREATE TABLE IF NOT EXISTS {self.name} ({cols}) ENGINE = {self.engine}"
        if self.partition_by:
            sql += f" PARTITION BY {self.partition_by}"
        return sql + " ORDER BY (" + ", ".join(f"`{k}`" for k in self.order_by) + ")"

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)


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
