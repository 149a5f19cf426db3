"""Store on a ClickHouse server through clickhouse-driver (native protocol)."""

from __future__ import annotations

import re
import threading
from typing import Any, Iterable, Mapping, Sequence
from urllib.parse import unquote, urlparse

from vidnexus.connectors.store import QueryResult, insert_batches, parse_version
from vidnexus.contracts.schema import TableSchema
from vidnexus.errors import ConnectorError

__all__ = ["ClickHouseStore", "parse_clickhouse_url", "reader_url", "READER_USER"]

READER_USER = "vnx_reader"
"""The read-only user `vidnexus services up` creates (SELECT on the project's database only)."""

_BATCH = 20_000


def parse_clickhouse_url(url: str) -> dict[str, Any]:
    """``clickhouse://user:password@host:port/db`` → connection keyword arguments."""
    u = urlparse(url)
    if u.scheme not in ("clickhouse", "tcp"):
        raise ConnectorError(
            f"ClickHouse URL {url!r} must start with clickhouse:// (native protocol), "
            "e.g. clickhouse://default:@127.0.0.1:9000/default"
        )
    if not u.hostname:
        raise ConnectorError(f"ClickHouse URL {url!r} has no host")
    return dict(
        host=u.hostname,
        port=u.port or 9000,
        user=unquote(u.username or "default"),
        password=unquote(u.password or ""),
        database=(u.path or "/default").lstrip("/") or "default",
    )


def reader_url(url: str) -> str:
    """``url`` with the read-only user :data:`READER_USER` (no password) in place of its user.

    Example:
        >>> reader_url("clickhouse://default:secret@127.0.0.1:19000/default")
        'clickhouse://vnx_reader:@127.0.0.1:19000/default'
    """
    u = urlparse(url)
    host = u.hostname or "127.0.0.1"
    netloc = f"{READER_USER}:@{'[' + host + ']' if ':' in host else host}" + (f":{u.port}" if u.port else "")
    return u._replace(netloc=netloc).geturl()


class ClickHouseStore:
    """A store on a ClickHouse server. One connection, serialized by a lock."""

    embedded = False

    def __init__(self, url: str, *, timeout_s: float = 5.0) -> None:
        from clickhouse_driver import Client
        from clickhouse_driver import errors as cherr

        self.url = url
        params = parse_clickhouse_url(url)
        self._where = f"{params['host']}:{params['port']}"
        self._lock = threading.Lock()
        self._client = Client(
            **params,
            connect_timeout=timeout_s,
            send_receive_timeout=max(30.0, timeout_s),
            sync_request_timeout=timeout_s,
            client_name="vidnexus",
        )
        try:
            raw = self._client.execute("SELECT version()")[0][0]
        except (cherr.NetworkError, cherr.SocketTimeoutError, OSError, EOFError) as e:
            raise ConnectorError(
                f"ClickHouse server at {self._where} is not reachable ({type(e).__name__}: {e}). "
                "Check VNX_CLICKHOUSE_URL, or start the local server with `vidnexus services up`.",
                retryable=True,
            ) from None
        except cherr.ServerException as e:
            raise ConnectorError(f"ClickHouse server at {self._where} refused us: {e.message}")
        self.version = parse_version(str(raw))

    def _run(self, sql: str, data: Any = None, **kw: Any) -> Any:
        from clickhouse_driver import errors as cherr

        with self._lock:
            try:
                if data is None:
                    return self._client.execute(sql, **kw)
                return self._client.execute(sql, data, **kw)
            except cherr.ServerException as e:
                first = (e.message or str(e)).strip().splitlines()[0][:500]
                raise ConnectorError(f"query failed: {first}") from None
            except (cherr.NetworkError, cherr.SocketTimeoutError, OSError, EOFError) as e:
                self._client.disconnect()
                raise ConnectorError(
                    f"lost the ClickHouse server at {self._where}: {e}", retryable=True
                ) from None
            except cherr.Error as e:
                raise ConnectorError(f"query failed: {e}") from None

    def execute(self, sql: str) -> None:
        if re.match(r"\s*INSERT\b", sql, re.I) and not re.search(r"\b(SELECT|WITH)\b", sql, re.I):
            # The native protocol sends INSERT data as blocks after the query: inline VALUES would
            # leave the server waiting for them.
            raise ConnectorError("INSERT … VALUES with the rows in the statement is not supported on the "
                                 "server store: use INSERT … SELECT (or the embedded store)")
        self._run(sql)

    def query(self, sql: str, settings: Mapping[str, Any] | None = None) -> QueryResult:
        rows, types = self._run(sql, with_column_types=True, settings=dict(settings or {}))
        return QueryResult(tuple(n for n, _ in types), tuple(t for _, t in types), list(rows))

    def insert(self, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> int:
        sql = f"INSERT INTO {table} (" + ", ".join(f"`{c}`" for c in columns) + ") VALUES"
        return insert_batches(table, columns, rows, _BATCH, lambda batch: self._run(sql, batch))

    def create_table(self, schema: TableSchema) -> None:
        self.execute(schema.create_sql(self.version))

    def close(self) -> None:
        with self._lock:
            self._client.disconnect()
