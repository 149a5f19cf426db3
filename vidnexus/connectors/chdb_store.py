"""Store on chdb: the current ClickHouse engine embedded in this process.

chdb holds an exclusive lock on its data directory, so only one process can open it at a time
(DESIGN §9); a second opener gets a :class:`ConnectorError` saying so.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from vidnexus.connectors.store import QueryResult, TableSchema, insert_batches, parse_version, quote
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


class ChdbStore:
    """Embedded store under ``path``; thread-safe (queries are serialized)."""

    def __init__(self, path: str | Path) -> None:
        from chdb import session

        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._s = session.Session(str(self.path))
            raw = self._s.query("SELECT version()", "CSV")
        except Exception as e:  # chdb raises RuntimeError subclasses with the engine's message
            msg = str(e).splitlines()[0] if str(e) else type(e).__name__
            hint = (
                " (another process holds this data directory: query it through that process's "
                "SQL endpoint, or stop it)"
                if "lock" in msg.lower()
                else ""
            )
            raise ConnectorError(f"cannot open the embedded store at {self.path}: {msg}{hint}")
        self.version = parse_version(str(raw).strip().strip('"'))

    def _run(self, sql: str, fmt: str = "CSV") -> Any:
        with self._lock:
            try:
                return self._s.query(sql, fmt)
            except RuntimeError as e:  # chdb's ChdbError carries the engine's message
                first = str(e).strip().splitlines()[0][:500]
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
        cols = ", ".join(f"`{c}`" for c in columns)
        head = (
            f"INSERT INTO {table} ({cols}) SETTINGS date_time_input_format='best_effort' "
            "FORMAT JSONEachRow\n"
        )

        def send(batch: list[Sequence[Any]]) -> None:
            self._run(head + "\n".join(json.dumps(dict(zip(columns, r)), default=_json_default) for r in batch))

        return insert_batches(table, columns, rows, _BATCH, send)

    def create_table(self, schema: TableSchema) -> None:
        self.execute(schema.create_sql(self.version))

    def close(self) -> None:
        with self._lock:
            try:
                self._s.close()
            except Exception:  # already closed
                pass
