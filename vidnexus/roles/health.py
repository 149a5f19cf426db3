"""A role's health endpoint: ``GET /health`` answers its :class:`~vidnexus.connectors.outage.Health`."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

from vidnexus.connectors.outage import Health

__all__ = ["HealthServer"]


class HealthServer:
    """``GET /health`` → the role's :class:`Health` as JSON, on a daemon thread. The status is 200
    whether ``ok`` or ``degraded``: a degraded role is alive and recovering by itself, and a
    liveness probe that restarted it would only lose what it buffers. Port 0 picks a free port
    (see :attr:`port`)."""

    def __init__(self, health: Callable[[], Health], host: str = "127.0.0.1", port: int = 0) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server API
                if self.path.split("?", 1)[0] != "/health":
                    self.send_error(404, "GET /health")
                    return
                h = health()
                body = json.dumps(h.as_dict()).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet
                return

        self._server = ThreadingHTTPServer((host, port), Handler)
        self.port = int(self._server.server_address[1])

    def start(self) -> "HealthServer":
        threading.Thread(target=self._server.serve_forever, name="vnx-health", daemon=True).start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
