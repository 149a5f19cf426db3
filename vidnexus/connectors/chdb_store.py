"""Store on chdb: the current ClickHouse engine embedded in this process.

chdb holds an exclusive lock on its data directory, so only one process can open it at a time
(DESIGN §9); a second opener gets a :class:`ConnectorError` saying so.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import threading
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from vidnexus.connectors.store import QueryResult, insert_batches, parse_version, quote
from vidnexus.contracts.schema import TableSchema
from vidnexus.errors import ConnectorError

__all__ = ["ChdbStore"]

_BATCH = 50_000


def _json_default(v: Any) -> Any:
    if isinstance(v, dt.datetime):
        return v.strftime("%Y-%m-%d %H:%M:%S.%f")
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, bytes):
        return v.decode("latin-1")
    if hasattr(v, "tolist"):
        return v.tolist()
    raise TypeError(f"cannot store a {type(v).__name__}")


def _untyped(t: Any) -> bool:
    """An Arrow type with a ``null`` inside (e.g. ``list<null>`` from empty lists only)."""
    import pyarrow as pa

    if pa.types.is_null(t):
        return True
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _untyped(t.value_type)
    if pa.types.is_struct(t):
        return any(_untyped(t.field(i).type) for i in range(t.num_fields))
    return False


def _arrow_table(batch: list[Sequence[Any]], width: int) -> Any:
    """``batch`` as a ``pyarrow.Table`` of columns ``c0..c{width-1}``, or None when a column's
    values have no common Arrow type or a value is None."""
    import pyarrow as pa

    try:
        arrays = [pa.array(col) for col in zip(*batch)]
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError, OverflowError):
        return None
    if not arrays or any(a.null_count or _untyped(a.type) for a in arrays):
        return None  # JSON rows: a null becomes the column's default, or NULL where it is Nullable
    return pa.table({f"c{i}": a for i, a in enumerate(arrays)})


def holder_pid(path: Path) -> int | None:
    """The PID of the process that holds the embedded store at ``path``, or None when it is free.

    The engine keeps an exclusive ``flock`` on ``path/status`` (which names its PID) while it runs;
    asking for the same lock tells, without opening the engine (which would print its own error).
    """
    import fcntl

    try:
        fd = os.open(path / "status", os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            m = re.search(rb"PID: (\d+)", os.read(fd, 256))
            pid = int(m.group(1)) if m else -1
            return None if pid == os.getpid() else pid  # this process: the engine decides
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


class ChdbStore:
    """Embedded store under ``path`` (``None``: in memory, gone at close); thread-safe (queries are
    serialized)."""

    embedded = True

    def __init__(self, path: str | Path | None) -> None:
        from chdb import session

        self.path = Path(path) if path is not None else None
        if self.path is not None:
            self.path.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        pid = holder_pid(self.path) if self.path is not None else None
        if pid is not None:
            who = f"PID {pid}" if pid > 0 else "another process"
            raise ConnectorError(
                f"the embedded store at {self.path} is in use by {who}: query it through that process's SQL "
                "endpoint, use the server store (VNX_STORE=clickhouse), or stop that process")
        try:
            self._s = session.Session(str(self.path) if self.path is not None else None)
            raw = self._s.query("SELECT version()", "CSV")
        except Exception as e:  # chdb raises RuntimeError subclasses with the engine's message
            msg = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise ConnectorError(f"cannot open the embedded store at {self.path or 'in memory'}: {msg}") from None
        self.version = parse_version(str(raw).strip().strip('"'))

    def _run(self, sql: str, fmt: str = "CSV", vnx_rows: Any = None) -> Any:
        """``vnx_rows``: an Arrow table that ``sql`` reads as ``Python(vnx_rows)`` (the engine finds
        it by that name in this frame)."""
        with self._lock:
            try:
                return self._s.query(sql, fmt)
            except RuntimeError as e:  # chdb's ChdbError carries the engine's message
                first = str(e).strip().splitlines()[0][:500]
                # chdb 4.4 leaves what a failed query had written (e.g. the JSON header of one cut
                # by max_execution_time) in front of the next result: read it out here.
                try:
                    self._s.query("SELECT 1", "CSV")
                except RuntimeError:
                    pass
                raise ConnectorError(f"query failed: {first}") from None

    def execute(self, sql: str) -> None:
        self._run(sql)

    def query(self, sql: str, settings: Mapping[str, Any] | None = None) -> QueryResult:
        if settings:
            sql += " SETTINGS " + ", ".join(f"{k} = {quote(v)}" for k, v in settings.items())
        res = self._run(sql, "JSONCompact")
        text = res.bytes().decode() if hasattr(res, "bytes") else str(res)
        if not text.strip():
            return QueryResult((), (), [])
        doc = json.loads(text)
        meta = doc.get("meta", [])
        return QueryResult(
            tuple(m["name"] for m in meta),
            tuple(m["type"] for m in meta),
            [tuple(r) for r in doc.get("data", [])],
        )

    def insert(self, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> int:
        """Rows go in as an Arrow table (columnar, no text round trip); a batch whose values Arrow
        cannot type (a column of mixed kinds, an unknown object) goes in as JSON rows."""
        cols = ", ".join(f"`{c}`" for c in columns)
        head = f"INSERT INTO {table} ({cols}) "

        def send(batch: list[Sequence[Any]]) -> None:
            arrow = _arrow_table(batch, len(columns))
            if arrow is not None:
                self._run(head + "SELECT * FROM Python(vnx_rows) "
                          "SETTINGS cast_string_to_date_time_mode='best_effort'", vnx_rows=arrow)
                return
            self._run(head + "SETTINGS date_time_input_format='best_effort' FORMAT JSONEachRow\n"
                      + "\n".join(json.dumps(dict(zip(columns, r)), default=_json_default) for r in batch))

        return insert_batches(table, columns, rows, _BATCH, send)

    def create_table(self, schema: TableSchema) -> None:
        self.execute(schema.create_sql(self.version))

    def close(self) -> None:
        with self._lock:
            try:
                self._s.close()
            except Exception:  # already closed
                pass
