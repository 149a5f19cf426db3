"""A read-only SQL endpoint over HTTP, protected by a token (``vidnexus sql-server``).

Dashboards and notebooks query results without a ClickHouse account, and the embedded store (which
one process holds) becomes reachable from other processes. Requests:

    curl -H "Authorization: Bearer $TOKEN" --data "SELECT count() FROM hud_reads" http://127.0.0.1:8124/sql

The answer is JSON: ``columns``, ``types``, ``rows``, ``truncated`` and ``elapsed_ms``. Only one
statement per request, and only ``SELECT``/``WITH``/``SHOW``/``DESCRIBE``/``EXISTS``/``EXPLAIN``;
table functions that reach outside the store (``file``, ``url``, ``remote``, ``s3``, …) are refused.
SELECTs run with ``readonly=2``, a row limit and a time limit. A missing or wrong token is 401, a
refused statement 403, a failing query 400.

Example:
    >>> check_read_only("SELECT 1; DROP TABLE t")
    Traceback (most recent call last):
    ...
    vidnexus.sql_endpoint.RefusedQuery: one statement per request
    >>> check_read_only("  select stream, count() from hud_reads group by stream -- per stream\\n")
    'select stream, count() from hud_reads group by stream'
"""

from __future__ import annotations

import hmac
import json
import logging
import re
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from vidnexus.clock import MonotonicClock
from vidnexus.connectors.store import Store
from vidnexus.errors import ConnectorError, VidnexusError

__all__ = ["RefusedQuery", "check_read_only", "SqlEndpoint", "EndpointLimits"]

logger = logging.getLogger(__name__)

_READ_KEYWORDS = {"SELECT", "WITH", "SHOW", "DESCRIBE", "DESC", "EXISTS", "EXPLAIN"}
_OUTSIDE = ("file", "url", "remote", "remotesecure", "s3", "s3cluster", "hdfs", "mysql", "postgresql",
            "jdbc", "odbc", "input", "executable", "cluster", "clusterallreplicas", "azureblobstorage",
            "gcs", "mongodb", "redis", "sqlite", "urlcluster", "hdfscluster", "deltalake", "hudi", "iceberg")
_OUTSIDE_RE = re.compile(r"\b(" + "|".join(_OUTSIDE) + r")\s*\(", re.IGNORECASE)
_WRITE_RE = re.compile(r"\bINTO\s+OUTFILE\b|\bSETTINGS\b", re.IGNORECASE)


class RefusedQuery(VidnexusError):
    """The statement is not a single read-only query."""


def _strip(sql: str) -> str:
    """Remove comments and string literals' contents for the keyword checks."""
    out, i, n = [], 0, len(sql)
    while i < n:
        c = sql[i]
        if sql.startswith("--", i):
            j = sql.find("\n", i)
            i = n if j < 0 else j
        elif sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            if j < 0:
                raise RefusedQuery("unterminated comment")
            i = j + 2
            out.append(" ")
        elif c in "'\"`":
            j = i + 1
            while j < n and sql[j] != c:
                j += 2 if sql[j] == "\\" else 1
            if j >= n:
                raise RefusedQuery("unterminated quoted string")
            out.append(c + "x" * (j - i - 1) + c)  # keep lengths, hide contents
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def check_read_only(sql: str) -> str:
    """The statement, trimmed, if it is a single read-only query.

    Raises:
        RefusedQuery: several statements, a write, DDL, a SETTINGS clause (the endpoint sets the
            limits), ``INTO OUTFILE``, or a table function that reaches outside the store.
    """
    masked = _strip(sql)
    body = masked.strip().rstrip(";").strip()
    if not body:
        raise RefusedQuery("empty query")
    if ";" in body:
        raise RefusedQuery("one statement per request")
    first = re.match(r"[A-Za-z]+", body)
    keyword = first.group(0).upper() if first else ""
    if keyword not in _READ_KEYWORDS:
        raise RefusedQuery(f"{keyword or 'this statement'} is not allowed: the endpoint is read-only "
                           f"({', '.join(sorted(_READ_KEYWORDS))})")
    if m := _WRITE_RE.search(body):
        raise RefusedQuery(f"{m.group(0).split()[0].upper()} is not allowed here")
    if m := _OUTSIDE_RE.search(body):
        raise RefusedQuery(f"table function {m.group(1)}() is not allowed: it reaches outside the store")
    # Same span in the original text (masking kept the lengths); comments at the ends dropped.
    start = len(masked) - len(masked.lstrip())
    return sql[start : start + len(body)]


@dataclass(frozen=True)
class EndpointLimits:
    max_rows: int = 10_000
    """Rows returned at most (``truncated`` says when there were more)."""
    timeout_s: float = 10.0
    """Execution time limit per query."""
    max_body_bytes: int = 100_000


class SqlEndpoint:
    """Serve ``store`` read-only at ``http://host:port/sql`` until :meth:`stop`."""

    def __init__(self, store: Store, token: str, host: str = "127.0.0.1", port: int = 8124,
                 limits: EndpointLimits = EndpointLimits()) -> None:
        if len(token) < 16:
            raise VidnexusError("the SQL endpoint token must be at least 16 characters")
        self.store, self.token, self.limits = store, token, limits
        self._clock = MonotonicClock()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            server_version = "vidnexus-sql"

            def log_message(self, fmt: str, *args: Any) -> None:
                logger.debug("sql endpoint: " + fmt, *args)

            def do_GET(self) -> None:  # noqa: N802
                url = urlparse(self.path)
                if url.path == "/health":
                    return self._send(200, {"ok": True})
                q = parse_qs(url.query).get("query", [""])[0]
                self._handle(url.path, q)

            def do_POST(self) -> None:  # noqa: N802
                n = int(self.headers.get("Content-Length") or 0)
                if n > endpoint.limits.max_body_bytes:
                    return self._send(413, {"error": f"query longer than {endpoint.limits.max_body_bytes} bytes"})
                body = self.rfile.read(n).decode("utf-8", "replace")
                if self.headers.get("Content-Type", "").startswith("application/json"):
                    try:
                        body = str(json.loads(body).get("query", ""))
                    except (ValueError, AttributeError):
                        return self._send(400, {"error": 'expected JSON {"query": "..."}'})
                self._handle(urlparse(self.path).path, body)

            def _handle(self, path: str, query: str) -> None:
                if path != "/sql":
                    return self._send(404, {"error": "POST /sql (or GET /sql?query=…, GET /health)"})
                if not endpoint.authorized(self.headers.get("Authorization", ""), self.headers.get("X-Vnx-Token", "")):
                    return self._send(401, {"error": "missing or wrong token (Authorization: Bearer TOKEN)"})
                code, doc = endpoint.run(query)
                self._send(code, doc)

            def _send(self, code: int, doc: dict[str, Any]) -> None:
                data = json.dumps(doc, default=str).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self.address = self.httpd.server_address
        self._thread: threading.Thread | None = None

    def authorized(self, auth: str, header_token: str) -> bool:
        given = auth[7:].strip() if auth.lower().startswith("bearer ") else header_token
        return bool(given) and hmac.compare_digest(given.encode(), self.token.encode())

    def run(self, query: str) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON document) for one query."""
        try:
            sql = check_read_only(query)
        except RefusedQuery as e:
            return 403, {"error": str(e)}
        lim = self.limits
        keyword = sql.lstrip().split(None, 1)[0].upper()
        t0 = self._clock.now()
        try:
            if keyword in ("SELECT", "WITH"):
                settings = {"readonly": 2, "max_execution_time": max(1, int(lim.timeout_s)),
                            "max_result_rows": lim.max_rows + 1, "result_overflow_mode": "break"}
                res = self.store.query(f"SELECT * FROM ({sql}) LIMIT {lim.max_rows + 1}", settings=settings)
            else:
                res = self.store.query(sql)
        except ConnectorError as e:
            return 400, {"error": str(e)}
        rows = res.rows[: lim.max_rows]
        return 200, {"columns": list(res.columns), "types": list(res.types), "rows": [list(r) for r in rows],
                     "truncated": len(res.rows) > lim.max_rows,
                     "elapsed_ms": round((self._clock.now() - t0) * 1000, 2)}

    def start(self) -> "SqlEndpoint":
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True, name="vnx-sql")
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
