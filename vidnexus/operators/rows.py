"""Result rows on their way to the store.

In distributed mode a worker publishes one message per frame to the rows topic: every row the frame
produced, for every table, with the tables' schemas (so the sink can create or migrate a table the
first time it sees it) and the frame's accounting row. The ``vidnexus sink`` role inserts them.
Messages are versioned msgpack.

Example:
    >>> from vidnexus.connectors.store import Column, TableSchema
    >>> t = TableSchema("t", (Column("a", "UInt8"),), order_by=("a",))
    >>> decode_rows(encode_rows({"t": [(1,), (2,)]}, {"t": t}))[0]
    {'t': [(1,), (2,)]}
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import msgpack

from vidnexus.connectors.store import Column, TableSchema
from vidnexus.errors import CodecError

__all__ = ["encode_rows", "decode_rows", "ROWS_VERSION", "schema_to_doc", "schema_from_doc"]

ROWS_VERSION = 1


def schema_to_doc(s: TableSchema) -> list[Any]:
    return [s.name, [[c.name, c.type] for c in s.columns], list(s.order_by), s.engine, s.partition_by]


def schema_from_doc(d: Sequence[Any]) -> TableSchema:
    name, cols, order_by, engine, partition_by = d
    return TableSchema(name, tuple(Column(n, t) for n, t in cols), tuple(order_by), engine, partition_by)


def encode_rows(rows: Mapping[str, Sequence[Sequence[Any]]], schemas: Mapping[str, TableSchema]) -> bytes:
    body = {t: [schema_to_doc(schemas[t]), [list(r) for r in rs]] for t, rs in rows.items() if rs}
    return msgpack.packb([ROWS_VERSION, body], use_bin_type=True)


def decode_rows(raw: bytes) -> tuple[dict[str, list[tuple[Any, ...]]], dict[str, TableSchema]]:
    """Raises CodecError on an unknown version or a malformed message."""
    try:
        v = msgpack.unpackb(raw, raw=False)
        if not isinstance(v, list) or len(v) != 2:
            raise ValueError("not a versioned record")
        if v[0] != ROWS_VERSION:
            raise CodecError(f"unknown rows message version {v[0]!r} (this build reads {ROWS_VERSION})")
        rows, schemas = {}, {}
        for table, (sdoc, rs) in v[1].items():
            schemas[table] = schema_from_doc(sdoc)
            width = len(schemas[table].columns)
            if any(len(r) != width for r in rs):
                raise ValueError(f"table {table}: a row does not have {width} values")
            rows[table] = [tuple(r) for r in rs]
        return rows, schemas
    except CodecError:
        raise
    except Exception as e:
        raise CodecError(f"malformed rows message: {e}") from None
