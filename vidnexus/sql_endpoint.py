"""A read-only SQL endpoint over HTTP, protected by a token (``vidnexus sql-server``).

Dashboards and notebooks query results without a ClickHouse account, and the embedded store (which
one process holds) becomes reachable from other processes. Requests:

    curl -H "Authorization: Bearer $TOKEN" --data "SELECT count() FROM hud_reads" http://127.0.0.1:8124/sql

The answer is JSON: ``columns``, ``types``, ``rows``, ``truncated`` and ``elapsed_ms``. Every query
passes :class:`~vidnexus.sql_guard.SqlGuard` (one statement, decided on ClickHouse's own parse
tree, deny by default: see docs/operators.md#sql) and runs with the engine's read-only mode and
limits. A missing or wrong token is 401, and after :attr:`AuthBackoff.free_failures` failures from
one address that address waits (429, ``Retry-After``) before it may try again; a refused
statement is 403, a failing query 400. The token is compared in constant time and never logged.

Example:
    >>> b = AuthBackoff(free_failures=2, max_block_s=60)
    >>> for t in (0, 1, 2):
    ...     b.failed("10.0.0.1", now=t)
    >>> b.blocked_for("10.0.0.1", now=2.5), b.blocked_for("10.0.0.2", now=2.5)
    (0.5, 0.0)
"""

from __future__ import annotations

import hmac
import json
import logging
import math
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from vidnexus.clock import Clock, MonotonicClock
from vidnexus.connectors.store import Store
from vidnexus.errors import ConnectorError, VidnexusError
from vidnexus.sql_guard import RefusedQuery, SqlGuard, SqlLimits

__all__ = ["RefusedQuery", "SqlEndpoint", "EndpointLimits", "AuthBackoff", "run_query"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EndpointLimits(SqlLimits):
    max_body_bytes: int = 100_000
    """Longest query accepted (bytes)."""


@dataclass
class AuthBackoff:
    """Failed-token bookkeeping per client address: after ``free_failures`` failures in a row, each
    further failure blocks the address for 1, 2, 4 … seconds, at most ``max_block_s``; a success
    clears it. At most ``max_clients`` addresses are remembered (the oldest are forgotten)."""

    free_failures: int = 5
    max_block_s: float = 300.0
    max_clients: int = 10_000
    _state: dict[str, tuple[int, float]] = field(default_factory=dict)  # address -> (failures, blocked until)

    def blocked_for(self, client: str, now: float) -> float:
        """Seconds ``client`` must still wait before its token is looked at (0: none)."""
        _, until = self._state.get(client, (0, 0.0))
        return max(0.0, until - now)

    def failed(self, client: str, now: float) -> None:
        n = self._state.pop(client, (0, 0.0))[0] + 1
        over = n - self.free_failures
        until = now + min(self.max_block_s, 2.0 ** (over - 1)) if over > 0 else 0.0
        self._state[client] = (n, until)
        while len(self._state) > self.max_clients:
            del self._state[next(iter(self._state))]

    def succeeded(self, client: str) -> None:
        self._state.pop(client, None)


def run_query(guard: SqlGuard, query: str, limits: SqlLimits, clock: Clock) -> tuple[int, dict[str, Any]]:
    """(HTTP status, JSON document) for one query through ``guard``: 200 with ``columns``, ``types``,
    ``rows``, ``truncated`` and ``elapsed_ms``; 403 refused; 400 failed. The SQL endpoint and the
    console's ``/sql`` both answer with it."""
    t0 = clock.now()
    try:
        checked = guard.check(query)
    except RefusedQuery as e:
        return 403, {"error": str(e)}
    try:
        res, cut = guard.run(checked, limits)
    except ConnectorError as e:
        return 400, {"error": str(e)}
    return 200, {"columns": list(res.columns), "types": list(res.types), "rows": [list(r) for r in res.rows],
                 "truncated": cut, "elapsed_ms": round((clock.now() - t0) * 1000, 2)}


class SqlEndpoint:
    """Serve ``store`` read-only at ``http://host:port/sql`` until :meth:`stop`."""

    def __init__(self, store: Store, token: str, host: str = "127.0.0.1", port: int = 8124,
                 limits: EndpointLimits = EndpointLimits(), *, clock: Clock | None = None,
                 backoff: AuthBackoff | None = None) -> None:
        if len(token) < 16:
            raise VidnexusError("the SQL endpoint token must be at least 16 characters")
        self.store, self.limits = store, limits
        self._token = token.encode()
        self._clock = clock or MonotonicClock()
        self._backoff = backoff or AuthBackoff()
        self._backoff_lock = threading.Lock()
        self.guard = SqlGuard(store)
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            server_version = "vidnexus-sql"

            def log_message(self, fmt: str, *args: Any) -> None:  # the request line only, never headers
                logger.debug("sql endpoint: " + fmt, *args)

            def do_GET(self) -> None:  # noqa: N802
                url = urlparse(self.path)
                if url.path == "/health":
                    return self._send(200, {"ok": True})
                q = parse_qs(url.query).get("query", [""])[0]
                self._handle(url.path, q)

            def do_POST(self) -> None:  # noqa: N802
                try:
                    n = int(self.headers.get("Content-Length") or 0)
                except ValueError:
                    return self._send(400, {"error": "bad Content-Length"})
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
                wait = endpoint.check_token(self.client_address[0], self.headers.get("Authorization", ""),
                                            self.headers.get("X-Vnx-Token", ""))
                if wait is None:
                    return self._send(401, {"error": "missing or wrong token (Authorization: Bearer TOKEN)"})
                if wait > 0:
                    return self._send(429, {"error": f"too many wrong tokens from this address; retry in "
                                                     f"{math.ceil(wait)} s"}, retry_after=math.ceil(wait))
                code, doc = endpoint.run(query)
                self._send(code, doc)

            def _send(self, code: int, doc: dict[str, Any], retry_after: int | None = None) -> None:
                data = json.dumps(doc, default=str).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if retry_after is not None:
                    self.send_header("Retry-After", str(retry_after))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        host_, port_ = self.httpd.server_address[:2]  # AF_INET: (host, port) with host a str
        self.address: tuple[str, int] = (host_ if isinstance(host_, str) else bytes(host_).decode(), port_)
        self._thread: threading.Thread | None = None

    def check_token(self, client: str, auth: str, header_token: str) -> float | None:
        """0 when the token is right, the seconds to wait when ``client`` is backing off, None when
        the token is missing or wrong (which counts as a failure)."""
        now = self._clock.now()
        with self._backoff_lock:
            wait = self._backoff.blocked_for(client, now)
            if wait > 0:
                return wait
        given = auth[7:].strip() if auth.lower().startswith("bearer ") else header_token
        ok = hmac.compare_digest(given.encode(), self._token)  # constant time, also for an empty token
        with self._backoff_lock:
            if ok:
                self._backoff.succeeded(client)
                return 0.0
            self._backoff.failed(client, now)
        return None

    def run(self, query: str) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON document) for one query."""
        return run_query(self.guard, query, self.limits, self._clock)

    def start(self) -> "SqlEndpoint":
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True, name="vnx-sql")
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        try:
            self.httpd.serve_forever()
        finally:
            self.guard.close()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.guard.close()
