"""docker-compose.yml starts (issue 23 item 4), without a Docker engine: every vidnexus service that
``docker compose up`` starts runs its command as a plain process on loopback, against the suite's
broker and server, in the order its ``depends_on`` gives, and each answers its health check (the
URL its compose healthcheck probes, on a port of its own here) within its start period; then each
stops on SIGTERM with exit code 0."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
import yaml

from tests.role_process import free_port, stop_process

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _order(services: dict) -> list[str]:
    """Services in an order that starts each after what it depends on (compose's order)."""
    done: list[str] = []

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, f"depends_on cycle: {path + (name,)}"
        if name in done:
            return
        deps = services[name].get("depends_on") or {}
        for d in (deps if isinstance(deps, list) else list(deps)):
            visit(d, path + (name,))
        done.append(name)

    for name in services:
        visit(name, ())
    return done


def _probe_url(svc: dict) -> tuple[str, int]:
    """The (path, port) the service's compose healthcheck requests."""
    test = " ".join(svc["healthcheck"]["test"])
    m = re.search(r"http://127\.0\.0\.1:(\d+)(/\S*?)['\"]", test)
    assert m, f"healthcheck {test!r} requests no http://127.0.0.1:PORT/PATH"
    return m.group(2), int(m.group(1))


@pytest.mark.timeout(600)
def test_compose_services_start_in_order_and_answer_their_health_checks(kafka_bootstrap, clickhouse_url, tmp_path):
    doc = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = {n: s for n, s in doc["services"].items() if not s.get("profiles")}  # what `up` starts
    ours = [n for n in _order(services) if str(services[n].get("image", "")).startswith("vidnexus")]
    assert set(ours) >= {"ingest", "executor", "scheduler", "worker", "sink", "sql-server"}, ours
    assert _order(services).index("kafka") < min(_order(services).index(n) for n in ours)
    prefix = f"compose{uuid.uuid4().hex[:8]}"
    procs: list[tuple[str, subprocess.Popen[str], Path]] = []
    try:
        for name in ours:
            svc = services[name]
            env = dict(os.environ)
            env.update({k: str(v) for k, v in (svc.get("environment") or {}).items() if v is not None})
            path, inner_port = _probe_url(svc)
            port = free_port()
            # compose's addresses are the containers' own: here, the suite's services on loopback.
            env.update(VNX_KAFKA_BOOTSTRAP=kafka_bootstrap, VNX_CLICKHOUSE_URL=clickhouse_url,
                       VNX_TOPIC_PREFIX=prefix, VNX_DATA_DIR=os.environ.get("VNX_DATA_DIR", str(tmp_path / "data")),
                       VNX_METRICS_HOST="127.0.0.1", VNX_SQL_TOKEN="compose-test-token-0123456789")
            argv = [*(svc.get("entrypoint") or []), *(svc.get("command") or [])]
            assert argv[0] == "vidnexus", argv
            if env.get("VNX_HEALTH_PORT") == str(inner_port):
                env["VNX_HEALTH_PORT"] = str(port)
            elif "--port" in argv and argv[argv.index("--port") + 1] == str(inner_port):
                argv[argv.index("--port") + 1] = str(port)
                argv[argv.index("--host") + 1] = "127.0.0.1"
            else:
                pytest.fail(f"{name}: its healthcheck's port {inner_port} is neither VNX_HEALTH_PORT nor --port")
            if "VNX_METRICS_PORT" in env:
                env["VNX_METRICS_PORT"] = str(free_port())
            log = tmp_path / f"{name}.log"
            with log.open("w") as out:
                p = subprocess.Popen([sys.executable, "-m", "vidnexus", *argv[1:]], env=env, stdout=out,
                                     stderr=subprocess.STDOUT, text=True)
            procs.append((name, p, log))
            start = float(str(svc["healthcheck"].get("start_period", "120s")).rstrip("s"))
            deadline = time.monotonic() + start + 60
            while True:
                assert p.poll() is None, f"{name} exited {p.returncode}:\n{log.read_text()[-3000:]}"
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=3) as r:
                        body = json.loads(r.read())
                        assert r.status == 200, (name, r.status)
                        break
                except OSError:
                    assert time.monotonic() < deadline, f"{name}: no health answer:\n{log.read_text()[-3000:]}"
                    time.sleep(0.5)
            assert isinstance(body, dict) and body, (name, body)
    finally:
        for name, p, log in reversed(procs):
            stop_process(p)
    for name, p, log in procs:
        assert p.returncode == 0, f"{name} exited {p.returncode} on SIGTERM:\n{log.read_text()[-3000:]}"
        text = log.read_text()
        assert "Traceback" not in text, f"{name}:\n{text[-3000:]}"
