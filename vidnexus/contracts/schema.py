"""Table schemas: what a rows message carries so that a sink can create or migrate its table.

Schemas are written once with modern ClickHouse types and adapted to the engine: on servers older
than 20.1 (Debian's 18.16) ``LowCardinality(T)`` becomes ``T``, ``DateTime64(n)`` becomes
``DateTime`` and ``Bool`` becomes ``UInt8``.

Example:
    >>> t = TableSchema("events", (Column("cam", "LowCardinality(String)"), Column("n", "UInt32")),
    ...                 order_by=("cam",))
    >>> t.create_sql((18, 16, 1))
    'CREATE TABLE IF NOT EXISTS events (`cam` String, `n` UInt32) ENGINE = MergeTree() ORDER BY (`cam`)'
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

__all__ = ["Column", "TableSchema", "adapt_type", "column_sql", "modern", "schema_to_doc", "schema_from_doc"]

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


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


@dataclass(frozen=True)
class Column:
    """A column name and its ClickHouse type (modern spelling; adapted per engine version), and the
    SQL expression a row written without it gets (``None``: the type's zero). A ``default`` also fills
    the column when a table is migrated (added columns, rebuilt tables) and in rows from writers that
    do not know it yet."""

    name: str
    type: str
    default: str | None = None

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
        cols = ", ".join(column_sql(c, version) for c in self.columns)
        sql = f"CREATE TABLE IF NOT EXISTS {self.name} ({cols}) ENGINE = {self.engine}"
        if self.partition_by:
            sql += f" PARTITION BY {self.partition_by}"
        return sql + " ORDER BY (" + ", ".join(f"`{k}`" for k in self.order_by) + ")"

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)


def column_sql(c: Column, version: tuple[int, ...]) -> str:
    """A column's definition in CREATE TABLE and ADD COLUMN, adapted to an engine version.

    Example:
        >>> column_sql(Column("v", "UInt64", default="1 + 1"), (18, 16, 1))
        '`v` UInt64 DEFAULT 1 + 1'
    """
    sql = f"`{c.name}` {adapt_type(c.type, version)}"
    return sql if c.default is None else f"{sql} DEFAULT {c.default}"


def schema_to_doc(s: TableSchema) -> list[Any]:
    """A schema as it travels in a rows message: a column is ``[name, type]``, or
    ``[name, type, default]`` when it has a default."""
    cols = [[c.name, c.type] if c.default is None else [c.name, c.type, c.default] for c in s.columns]
    return [s.name, cols, list(s.order_by), s.engine, s.partition_by]


def schema_from_doc(d: Sequence[Any]) -> TableSchema:
    name, cols, order_by, engine, partition_by = d
    return TableSchema(name, tuple(Column(*c) for c in cols), tuple(order_by), engine, partition_by)
