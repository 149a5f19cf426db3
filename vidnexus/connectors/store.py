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
import logging
import re
import uuid
import zlib
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence, runtime_checkable

from vidnexus.contracts.schema import TableSchema, adapt_type, column_sql

__all__ = [
    "QueryResult",
    "Store",
    "quote",
    "parse_version",
    "insert_batches",
    "ensure_table",
    "same_layout",
    "why_not_rebuilt",
]

logger = logging.getLogger(__name__)


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
    """Check every row's width (before anything is sent) and hand ``send`` batches of at most
    ``batch`` rows; the count sent."""
    from vidnexus.errors import ConnectorError

    rows = rows if isinstance(rows, list) else list(rows)
    wrong = set(map(len, rows)) - {len(columns)}
    if wrong:
        raise ConnectorError(f"insert into {table}: row has {min(wrong)} values for {len(columns)} columns")
    for i in range(0, len(rows), batch):
        send(rows[i:i + batch])
    return len(rows)


def _engine_head(engine: str) -> str:
    """The engine and its arguments, normalized: ``'ReplacingMergeTree() ORDER BY …'`` and
    ``'ReplacingMergeTree'`` are both ``'ReplacingMergeTree()'``."""
    text = engine.strip()
    m = re.match(r"\w+", text)
    if not m:
        return re.sub(r"[\s`]", "", text)
    head, depth, end = m.group(0), 0, m.end()
    rest = text[end:].lstrip()
    if rest.startswith("("):
        for i, ch in enumerate(rest):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0:
                return head + re.sub(r"[\s`]", "", rest[: i + 1])
    return head + "()"


def same_layout(schema: TableSchema, engine_full: str, sorting_key: str) -> bool:
    """Whether a table with ``engine_full`` and ``sorting_key`` (as ``system.tables`` shows them on
    chdb and on the 18.16 server) has ``schema``'s engine and ``ORDER BY``.

    Example:
        >>> from vidnexus.contracts.schema import Column
        >>> t = TableSchema("t", (Column("a", "UInt8"), Column("v", "UInt64")), ("a",), "ReplacingMergeTree(v)")
        >>> same_layout(t, "ReplacingMergeTree(v) ORDER BY a SETTINGS index_granularity = 8192", "a")
        True
        >>> same_layout(t, "ReplacingMergeTree ORDER BY a SETTINGS index_granularity = 8192", "a")
        False
    """
    key = re.sub(r"[\s`()]", "", sorting_key)
    return _engine_head(engine_full) == _engine_head(schema.engine) and key == ",".join(schema.order_by)


_OWN_ENGINES = re.compile(r"(Replacing|Summing|Aggregating|Collapsing|VersionedCollapsing)?MergeTree")


def why_not_rebuilt(schema: TableSchema, columns: Iterable[str], engine_full: str) -> str | None:
    """Why a table with ``columns`` and ``engine_full``, whose layout differs from ``schema``'s,
    must be left as it is (None: rebuild it). A schema that lacks some of the table's columns is an
    older one (a writer not yet upgraded): rebuilding would take the table back. An engine vidnexus
    never declares (``Replicated…``, ``Distributed``, …) was chosen by hand.

    Example:
        >>> from vidnexus.contracts.schema import Column
        >>> t = TableSchema("t", (Column("a", "UInt8"), Column("v", "UInt64")), ("a",), "ReplacingMergeTree(v)")
        >>> why_not_rebuilt(t, ["a"], "ReplacingMergeTree ORDER BY a") is None
        True
        >>> why_not_rebuilt(t, ["a", "b"], "ReplacingMergeTree ORDER BY a")
        'the table has columns the schema lacks (b): the schema is an older one'
    """
    extra = sorted(set(columns) - set(schema.column_names))
    if extra:
        return f"the table has columns the schema lacks ({', '.join(extra)}): the schema is an older one"
    m = re.match(r"\w+", engine_full.strip())
    if not m or not _OWN_ENGINES.fullmatch(m.group(0)):
        return f"its engine {m.group(0) if m else engine_full!r} was chosen by hand"
    return None


def _layout(store: Store, name: str) -> tuple[str, str] | None:
    rows = store.query(
        "SELECT engine_full, sorting_key FROM system.tables WHERE database = currentDatabase() "
        f"AND name = {quote(name)}"
    ).rows
    return (str(rows[0][0]), str(rows[0][1])) if rows else None


def ensure_table(store: Store, schema: TableSchema) -> list[str]:
    """Create ``schema``'s table, or migrate an existing one: add the columns it lacks, or, when its
    engine or ``ORDER BY`` differs from the schema's, rebuild it (:func:`_rebuild`: the rows are
    copied into a new table, the old one is kept as ``<name>_backup_<hash>``, one line is logged).
    A table is never rebuilt back to an older schema, nor away from an engine chosen by hand
    (:func:`why_not_rebuilt`; a warning says so). Returns the columns added. Changing a column's type
    is not done silently.

    Raises:
        ConfigError: an existing column has another type, or a rebuild's backup name is taken.
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
    for c in schema.columns:
        want = adapt_type(c.type, store.version)
        if c.name in have and have[c.name] != want:
            raise ConfigError(
                f"table {schema.name}: column {c.name} is {have[c.name]} in the store but the app declares "
                f"{want}; rename the column or migrate the table by hand"
            )
    added = [c.name for c in schema.columns if c.name not in have]
    layout = _layout(store, schema.name)
    if layout is not None and not same_layout(schema, *layout):
        why = why_not_rebuilt(schema, have, layout[0])
        if why is None:
            _rebuild(store, schema, have, layout)
            return added
        logger.warning("table %s is %s, not ENGINE = %s ORDER BY (%s), and is left as it is: %s",
                       schema.name, layout[0], schema.engine, ", ".join(schema.order_by), why)
    for c in schema.columns:
        if c.name in added:
            store.execute(f"ALTER TABLE {schema.name} ADD COLUMN {column_sql(c, store.version)}")
    return added


def _rebuild(store: Store, schema: TableSchema, have: Mapping[str, str], layout: tuple[str, str]) -> None:
    """Rebuild ``schema``'s table with its engine and key: create it under a temporary name, copy
    every row (unmerged parts included, so a ``ReplacingMergeTree`` picks its winners again under
    the new rule; columns the old table lacks get their defaults), then swap the names in one RENAME.

    Works on chdb and on the 18.16 server (no EXCHANGE, no ``CREATE … AS SELECT`` with an engine).
    Two processes rebuilding at once both copy; the second RENAME fails (the backup name is taken)
    and that process drops its copy and finds the table rebuilt. Rows another process inserts into
    the old table while the copy runs stay in the backup.
    """
    from vidnexus.errors import ConfigError, ConnectorError

    name = schema.name
    backup = f"{name}_backup_{zlib.crc32(layout[0].encode()):08x}"
    target = f"{schema.engine} ORDER BY ({', '.join(schema.order_by)})"
    if _layout(store, backup) is not None:
        raise ConfigError(
            f"table {name} must be rebuilt for ENGINE = {target} (it is {layout[0]}), but its backup name "
            f"{backup} is taken: DROP TABLE {backup} (or rename it) and start again")
    tmp = f"{name}_rebuild_{uuid.uuid4().hex[:8]}"
    store.execute(replace(schema, name=tmp).create_sql(store.version))
    cols = ", ".join(f"`{c}`" for c in schema.column_names if c in have)
    try:
        store.execute(f"INSERT INTO {tmp} ({cols}) SELECT {cols} FROM {name}")
        store.execute(f"RENAME TABLE {name} TO {backup}, {tmp} TO {name}")
    except ConnectorError:
        store.execute(f"DROP TABLE IF EXISTS {tmp}")
        now = _layout(store, name)
        if now is not None and same_layout(schema, *now):
            return  # another process rebuilt it meanwhile
        raise
    n = store.query(f"SELECT count() FROM {backup}").scalar()
    logger.warning("table %s: rebuilt for ENGINE = %s (it was %s); %s rows copied, the old table kept as %s",
                   name, target, layout[0], n, backup)
