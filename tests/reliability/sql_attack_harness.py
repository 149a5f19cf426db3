"""Shared pieces of the SQL attack tests: a canary file and URL, the HTTP call, and the verdict on
one response (refused, or cut by a limit, never the canary)."""

from __future__ import annotations

import json
import secrets
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

TOKEN = "t0ken-for-tests-0123456789"
# The engine's limits: ours (time, memory, result size) and its own caps on a function's output.
LIMIT_WORDS = ("Timeout exceeded", "memory limit", "Memory limit", "Limit for result", "too big",
               "TOO_MANY_ROWS", "TIMEOUT_EXCEEDED", "MEMORY_LIMIT_EXCEEDED", "greater than the allowed maximum",
               "TOO_LARGE")


@dataclass(frozen=True)
class Canary:
    token: str
    path: Path
    url: str

    def fill(self, query: str) -> str:
        return query.format(canary=self.path, url=self.url)


def canary_server(directory: Path) -> Iterator[Canary]:
    """A file holding a random token in ``directory`` and an HTTP server on loopback serving it."""
    token = "CANARY-" + secrets.token_hex(16)
    path = directory / "canary.txt"
    path.write_text(token + "\n")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            data = (token + "\n").encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *a: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield Canary(token, path, f"http://127.0.0.1:{httpd.server_address[1]}/canary")
    finally:
        httpd.shutdown()
        httpd.server_close()


def call(address: tuple[str, int], sql: str, token: str | None = TOKEN, timeout: float = 30) -> tuple[int, str, dict]:
    """(status, raw body, headers) of POST /sql."""
    req = urllib.request.Request(f"http://{address[0]}:{address[1]}/sql", data=sql.encode(), method="POST")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), dict(e.headers)


def http_verdict(category: str, status: int, body: str, max_rows: int) -> str | None:
    """None when the response is acceptable for a query of ``category``, else what is wrong."""
    if category != "exhaustion":
        return None if status == 403 else f"expected 403 (refused), got {status}: {body[:200]}"
    if status == 200:  # finished within the limits, with a bounded answer
        doc = json.loads(body)
        return None if len(doc["rows"]) <= max_rows else f"{len(doc['rows'])} rows returned"
    if status == 400 and any(w in body for w in LIMIT_WORDS):
        return None
    return f"expected a limit, got {status}: {body[:200]}"


def cli_verdict(category: str, rc: int, out: str, err: str) -> str | None:
    """Same for ``vidnexus sql``: exit 2 with one line, or cut by a limit."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    if category != "exhaustion":  # refused by the guard: one line, and not an engine error
        if rc == 2 and len(lines) == 1 and lines[0].startswith("error:") and "query failed" not in lines[0]:
            return None
        return f"expected a one-line refusal and exit 2, got {rc}: {err[:300]!r}"
    if rc == 0 and "--max-rows 0 prints all" in err:
        return None
    if rc == 2 and len(lines) == 1 and any(w in err for w in LIMIT_WORDS):
        return None
    return f"expected a limit, got {rc}: {err[:300]!r}"
