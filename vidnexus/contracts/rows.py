"""Result rows on their way to the store (the rows topic, read by the sink role).

One message per frame: every row the frame produced, for every table, with the tables' schemas (so
the sink can create or migrate a table the first time it sees it) and the frame's accounting row.

Example:
    >>> from vidnexus.contracts.schema import Column, TableSchema
    >>> t = TableSchema("t", (Column("a", "UInt8"),), order_by=("a",))
    >>> decode_rows(encode_rows({"t": [(1,), (2,)]}, {"t": t}))[0]
    {'t': [(1,), (2,)]}
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from vidnexus.contracts.codec import pack, unpack_versions
from vidnexus.contracts.schema import TableSchema, schema_from_doc, schema_to_doc
from vidnexus.errors import CodecError

__all__ = ["encode_rows", "decode_rows", "ROWS_VERSION"]

ROWS_VERSION = 2
"""2: ``[2, "rows", {table: [schema, rows]}]``."""


def encode_rows(rows: Mapping[str, Sequence[Sequence[Any]]], schemas: Mapping[str, TableSchema]) -> bytes:
    body = {t: [schema_to_doc(schemas[t]), [list(r) for r in rs]] for t, rs in rows.items() if rs}
    return pack("rows", ROWS_VERSION, [body])


_SCHEMAS: dict[Any, TableSchema] = {}
"""Schemas decoded before, by their document's text: a worker sends the same few schemas with every
message, and building one (with its checks) costs more than the rows."""


def _schema(sdoc: Any) -> TableSchema:
    key = sdoc if isinstance(sdoc, tuple) else repr(sdoc)  # tuples all the way down: hashable
    schema = _SCHEMAS.get(key)
    if schema is None:
        schema = schema_from_doc(sdoc)
        if len(_SCHEMAS) >= 1024:  # a bound, in case schemas keep changing
            _SCHEMAS.clear()
        _SCHEMAS[key] = schema
    return schema


def decode_rows(raw: bytes) -> tuple[dict[str, list[tuple[Any, ...]]], dict[str, TableSchema]]:
    """Raises CodecError on an unknown version or a malformed message."""
    # Read as tuples (rows need no conversion, schema documents are their own cache key); array
    # values arrive as tuples too, which every store takes as it takes lists.
    (body,) = unpack_versions(raw, "rows", {ROWS_VERSION: 1}, use_list=False)[1]
    try:
        rows, schemas = {}, {}
        for table, (sdoc, rs) in body.items():
            schemas[table] = _schema(sdoc)
            width = len(schemas[table].columns)
            if set(map(len, rs)) - {width}:
                raise ValueError(f"table {table}: a row does not have {width} values")
            rows[table] = list(rs)
        return rows, schemas
    except Exception as e:
        raise CodecError(f"malformed rows message: {e}") from None
