"""A built-in app distributed over the real broker and ClickHouse server, each role its own process:
one executor, one worker and one sink (``vidnexus executor|worker|sink``), frames published by the
caller at the sources' real pace (so the app's own SLO applies), and every frame's outcome read
from ``vnx_frames``. The app integration tests (``tests/integration/app_harness.py``), their SLO
tool and ``vidnexus bench soak`` all run it.

Example (needs the broker and the server: ``vidnexus services up``):
    >>> d = deploy(bootstrap, url, "vidnexus.apps.traffic:app", ["car_colours:400"])  # doctest: +SKIP
    >>> feed(d, render(sources, 5.0, "traffic")).join(); teardown(d)  # doctest: +SKIP
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from vidnexus.errors import VidnexusError

__all__ = ["RoleProcess", "Deployment", "RenderedFrame", "Until", "demo_spec", "read_until_ready", "start_role",
           "stop_role", "stop_process", "deploy", "teardown", "render", "feed", "frames_done", "wait_frames"]

RenderedFrame = tuple[float, str, tuple[int, tuple[int, ...], bytes], dict[str, Any]]
"""A sampled frame ready to publish: (pts, stream id, (frame number, image shape, JPEG), tags)."""


def read_until_ready(p: subprocess.Popen[str], ready: str, timeout_s: float, before: list[str],
                     after: list[str] | None = None) -> bool:
    """Read ``p``'s stderr line by line into ``before`` until a line contains ``ready``; then keep
    draining it into ``after`` (default: ``before``) on a thread, and return True. False when the
    process exits first or ``timeout_s`` passes (the caller kills it and reports ``before``)."""
    stream = p.stderr
    if stream is None:
        raise VidnexusError("start the process with stderr=subprocess.PIPE to read its ready line")
    sink = before if after is None else after
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = stream.readline()
        before.append(line)
        if ready in line:
            def drain() -> None:
                for ln in stream:
                    sink.append(ln)
            threading.Thread(target=drain, daemon=True).start()
            return True
        if not line and p.poll() is not None:
            return False
    return False


@dataclass
class RoleProcess:
    """A ``vidnexus`` role running as a child process, with its stderr lines so far."""

    proc: subprocess.Popen[str]
    log: list[str] = field(default_factory=list)


def start_role(env: dict[str, str], *args: str, ready: str, timeout_s: float = 300) -> RoleProcess:
    """Start ``vidnexus ARGS`` and wait for a stderr line containing ``ready``.

    Raises:
        VidnexusError: the role exited or printed no ready line in ``timeout_s`` (with its log).
    """
    p = subprocess.Popen([sys.executable, "-m", "vidnexus", *args], env=env, stderr=subprocess.PIPE,
                         stdout=subprocess.DEVNULL, text=True)
    role = RoleProcess(p)
    if read_until_ready(p, ready, timeout_s, role.log):
        return role
    p.kill()
    p.wait(10)
    raise VidnexusError(f"`vidnexus {' '.join(args)}` did not start:\n{''.join(role.log[-30:])}")


def stop_process(proc: subprocess.Popen[Any], timeout_s: float = 30.0) -> None:
    """SIGTERM (a graceful stop), SIGKILL when it is still there after ``timeout_s``."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def stop_role(r: RoleProcess, timeout_s: float = 30.0) -> None:
    """:func:`stop_process` on a role's process."""
    stop_process(r.proc, timeout_s)


@dataclass
class Deployment:
    """The running roles, the settings they share (their topic prefix is the run's own), and the
    caller's bus (confluent-kafka) and store client."""

    settings: Any
    env: dict[str, str]
    bus: Any
    store: Any
    roles: dict[str, RoleProcess]

    def logs(self, n: int = 40) -> str:
        """The last ``n`` stderr lines of every role."""
        return "\n".join(f"--- {k}\n" + "".join(r.log[-n:]) for k, r in self.roles.items())


def _pythonpath() -> str:
    """The children's import path: this vidnexus first, then the cwd (apps defined in a checkout's
    tests), then the caller's own path."""
    here = str(Path(__file__).resolve().parents[2])
    parts = [here, os.getcwd(), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return os.pathsep.join(dict.fromkeys(parts))


def deploy(kafka_bootstrap: str, clickhouse_url: str, app: str, sessions: list[str], *,
           prefix: str | None = None) -> Deployment:
    """Start the executor (serving ``sessions``, ``MODEL:SLO_MS``), the sink and the worker of the
    app ``app`` (a ``module:attribute`` reference) under a topic prefix of their own."""
    from vidnexus.config import Settings
    from vidnexus.connectors.clickhouse_store import ClickHouseStore
    from vidnexus.connectors.confluent_bus import ConfluentBus

    prefix = prefix or f"app{uuid.uuid4().hex[:8]}"
    env = dict(os.environ, VNX_BUS="kafka", VNX_STORE="clickhouse", VNX_KAFKA_BOOTSTRAP=kafka_bootstrap,
               VNX_CLICKHOUSE_URL=clickhouse_url, VNX_TOPIC_PREFIX=prefix, PYTHONPATH=_pythonpath())
    settings = Settings(bus="kafka", store="clickhouse", kafka_bootstrap=kafka_bootstrap,
                        clickhouse_url=clickhouse_url, topic_prefix=prefix)
    roles: dict[str, RoleProcess] = {}
    args = [a for s in sessions for a in ("-s", s)]
    try:
        roles["executor"] = start_role(env, "executor", *args, "--threads", "1", ready="executor: serving")
        roles["sink"] = start_role(env, "sink", "--max-delay", "0.3", ready="sink:")
        roles["worker"] = start_role(env, "worker", app, ready="started")
        return Deployment(settings, env, ConfluentBus(kafka_bootstrap, timeout_s=10), ClickHouseStore(clickhouse_url),
                          roles)
    except BaseException:
        for r in roles.values():
            stop_role(r)
        raise


def teardown(d: Deployment) -> None:
    """Stop every role (gracefully) and close the caller's clients."""
    for r in d.roles.values():
        stop_role(r)
    d.bus.close()
    d.store.close()


def demo_spec(app_name: str) -> tuple[Any, Any]:
    """The built-in app's demo spec (:class:`~vidnexus.apps.spec.DemoSpec`) and the app."""
    import importlib

    from vidnexus.apps import APP_REFS, load_app

    return importlib.import_module(APP_REFS[app_name].partition(":")[0]).DEMO, load_app(app_name)


class Until:
    """A source's frames up to ``until_s`` (a demo's real video plays its first part); opens and
    closes the source around them."""

    def __init__(self, src: Any, until_s: float | None) -> None:
        self.src, self.until_s = src, until_s

    def frames(self) -> Any:
        self.src.open()
        try:
            for raw in self.src.frames():
                if self.until_s is not None and raw.pts > self.until_s:
                    return
                yield raw
        finally:
            self.src.close()


def render(sources: list[tuple[str, Any]], sample_fps: float, app: str) -> list[RenderedFrame]:
    """Pre-rendered sampled frames of ``(stream id, source)`` pairs, in time order across streams."""
    from vidnexus.streams.images import jpeg_encode
    from vidnexus.streams.sampling import FpsSampler

    out = []
    for sid, src in sources:
        sampler = FpsSampler(sample_fps)
        for raw in src.frames():
            if sampler.keep(raw.pts, raw.index):
                out.append((raw.pts, sid, raw, {**{k: str(v) for k, v in raw.truth.items()}, "apps": app}))
    out.sort(key=lambda t: t[0])
    return [(pts, sid, (raw.index, tuple(raw.image.shape), jpeg_encode(raw.image, quality=90)), tags)
            for pts, sid, raw, tags in out]


def feed(d: Deployment, frames: Iterable[RenderedFrame], *,
         on_publish: Callable[[str, int, float], None] | None = None,
         stop: threading.Event | None = None) -> threading.Thread:
    """Publish ``frames`` at their presentation times (ingest time stamped at publish), in a thread;
    ``on_publish(stream, frame number, ingest wall time)`` after each; ``stop`` ends it early."""
    from vidnexus.clock import wall_time
    from vidnexus.contracts.frames import Frame, encode_frame
    from vidnexus.contracts.topics import Topics

    topic = Topics(d.settings.topic_prefix).frames
    d.bus.create_topic(topic, 8)

    def run() -> None:
        t0 = time.monotonic()
        for pts, sid, (index, shape, jpeg), tags in frames:
            delay = t0 + pts - time.monotonic()
            if stop is not None:
                if stop.wait(max(0.0, delay)):
                    break
            elif delay > 0:
                time.sleep(delay)
            now = wall_time()
            f = Frame(sid, index, pts, now, now, shape[1], shape[0], "jpeg", jpeg, tags)
            d.bus.publish(topic, sid.encode(), encode_frame(f))
            if on_publish is not None:
                on_publish(sid, index, now)
        d.bus.flush()

    t = threading.Thread(target=run, daemon=True, name="vnx-feed")
    t.start()
    return t


def frames_done(d: Deployment, app: str, where: str) -> int:
    """Frames of ``app`` matching ``where`` that have their outcome row (0 before the table exists)."""
    try:
        return int(d.store.query(f"SELECT count() FROM vnx_frames FINAL WHERE app = '{app}' AND {where}").scalar())
    except Exception:  # the table appears with the first rows
        return 0


def wait_frames(d: Deployment, app: str, where: str, want: int, timeout_s: float) -> int:
    """Wait until ``want`` frames have their outcome row; the count reached.

    Raises:
        VidnexusError: fewer after ``timeout_s`` (with the roles' logs).
    """
    deadline = time.monotonic() + timeout_s
    got = 0
    while time.monotonic() < deadline:
        got = frames_done(d, app, where)
        if got >= want:
            return got
        time.sleep(1.0)
    raise VidnexusError(f"vnx_frames of {app} where {where} reached {got} rows, wanted {want}; role logs:\n{d.logs()}")
