"""Run a built-in app distributed over the real broker and ClickHouse server: one executor, one
worker and one sink process, frames published by the test at the sources' real pace (so the
app's own SLO applies), and every frame waited for in ``vnx_frames``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.role_process import read_until_ready
from vidnexus.clock import wall_time
from vidnexus.config import Settings
from vidnexus.connectors.clickhouse_store import ClickHouseStore
from tests.integration.conftest import kafka_bus_of
from vidnexus.contracts.frames import Frame, encode_frame
from vidnexus.contracts.topics import Topics
from vidnexus.streams.images import jpeg_encode
from vidnexus.streams.sampling import FpsSampler


@dataclass
class Role:
    proc: subprocess.Popen
    log: list[str] = field(default_factory=list)


def start_role(env: dict[str, str], *args: str, ready: str, timeout_s: float = 300) -> Role:
    p = subprocess.Popen([sys.executable, "-m", "vidnexus", *args], env=env, stderr=subprocess.PIPE,
                         stdout=subprocess.DEVNULL, text=True)
    role = Role(p)
    if read_until_ready(p, ready, timeout_s, role.log):
        return role
    p.kill()
    pytest.fail(f"`vidnexus {' '.join(args)}` did not start:\n{''.join(role.log[-30:])}")


def stop_role(r: Role) -> None:
    if r.proc.poll() is None:
        r.proc.send_signal(signal.SIGTERM)
        try:
            r.proc.wait(30)
        except subprocess.TimeoutExpired:
            r.proc.kill()


@dataclass
class Deployment:
    settings: Settings
    env: dict[str, str]
    bus: Any
    store: ClickHouseStore
    roles: dict[str, Role]

    def logs(self, n: int = 40) -> str:
        return "\n".join(f"--- {k}\n" + "".join(r.log[-n:]) for k, r in self.roles.items())


def deploy(kafka_bootstrap: str, clickhouse_url: str, app: str, sessions: list[str]) -> Deployment:
    prefix = f"app{uuid.uuid4().hex[:8]}"
    env = dict(os.environ, VNX_BUS="kafka", VNX_STORE="clickhouse", VNX_KAFKA_BOOTSTRAP=kafka_bootstrap,
               VNX_CLICKHOUSE_URL=clickhouse_url, VNX_TOPIC_PREFIX=prefix, PYTHONPATH=os.getcwd())
    settings = Settings(bus="kafka", store="clickhouse", kafka_bootstrap=kafka_bootstrap,
                        clickhouse_url=clickhouse_url, topic_prefix=prefix)
    roles: dict[str, Role] = {}
    args = [a for s in sessions for a in ("-s", s)]
    roles["executor"] = start_role(env, "executor", *args, "--threads", "1", ready="executor: serving")
    roles["sink"] = start_role(env, "sink", "--max-delay", "0.3", ready="sink:")
    roles["worker"] = start_role(env, "worker", app, ready="started")
    return Deployment(settings, env, kafka_bus_of("confluent", kafka_bootstrap), ClickHouseStore(clickhouse_url), roles)


def teardown(d: Deployment) -> None:
    for r in d.roles.values():
        stop_role(r)
    d.bus.close()
    d.store.close()


def render(sources: list[tuple[str, Any]], sample_fps: float, app: str) -> list[tuple[float, str, Any, dict[str, Any]]]:
    """Pre-rendered sampled frames: (pts, stream id, JPEG, tags), in time order across streams."""
    out = []
    for sid, src in sources:
        sampler = FpsSampler(sample_fps)
        for raw in src.frames():
            if sampler.keep(raw.pts, raw.index):
                out.append((raw.pts, sid, raw, {**{k: str(v) for k, v in raw.truth.items()}, "apps": app}))
    out.sort(key=lambda t: t[0])
    return [(pts, sid, (raw.index, raw.image.shape, jpeg_encode(raw.image, quality=90)), tags)
            for pts, sid, raw, tags in out]


def feed(d: Deployment, frames: list[tuple[float, str, Any, dict[str, Any]]]) -> threading.Thread:
    """Publish frames at their presentation times (ingest time stamped at publish), in a thread."""
    topic = Topics(d.settings.topic_prefix).frames
    d.bus.create_topic(topic, 8)

    def run() -> None:
        t0 = time.monotonic()
        for pts, sid, (index, shape, jpeg), tags in frames:
            delay = t0 + pts - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            now = wall_time()
            f = Frame(sid, index, pts, now, now, shape[1], shape[0], "jpeg", jpeg, tags)
            d.bus.publish(topic, sid.encode(), encode_frame(f))
        d.bus.flush()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def wait_frames(d: Deployment, app: str, where: str, want: int, timeout_s: float) -> None:
    sql = f"SELECT count() FROM vnx_frames FINAL WHERE app = '{app}' AND {where}"
    deadline = time.monotonic() + timeout_s
    got = 0
    while time.monotonic() < deadline:
        try:
            got = d.store.query(sql).scalar()
        except Exception:  # the table appears with the first rows
            got = 0
        if got >= want:
            return
        time.sleep(1.0)
    pytest.fail(f"{sql} reached {got}, wanted {want}; role logs:\n{d.logs()}")
