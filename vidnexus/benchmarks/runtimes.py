"""Per-message cost of the worker: messages/s through the same 3-step CPU chain (map → filter →
map → sink) with

- the worker role on the in-memory bus, in this process (the chain engine and the rows messages:
  what embedded mode runs; the "local" figure),
- the same role in this process consuming the frames topic from the real Kafka broker,
- a ``vidnexus worker`` process over Kafka (the worker role: what distributed mode runs),
- a ``vidnexus worker --runtime faust`` process over Kafka (faust-streaming consuming the frames),

each on one core (the process pinned with sched_setaffinity; the broker runs beside it). Needs the
broker: ``vidnexus services up``. The per-message overhead of faust over the in-memory role is
``1/rate_faust - 1/rate_local``.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
import uuid
from typing import Any

from vidnexus.benchmarks.machine import machine_info
from vidnexus.errors import VidnexusError
from vidnexus.operators.chain import App, Stream
from vidnexus.contracts.frames import Frame

__all__ = ["run", "app"]

APP_REF = "vidnexus.benchmarks.runtimes:app"

app = App("bench3", slo_ms=60_000)
_rows = app.table("bench3_rows", {"w": "UInt32", "area": "UInt32"})


def _size(f: Frame) -> dict[str, int]:
    return {"w": f.width, "h": f.height}


def _keep(d: dict[str, int]) -> bool:
    return d["w"] > 0


def _area(d: dict[str, int]) -> dict[str, int]:
    return {"w": d["w"], "area": d["w"] * d["h"]}


@app.chain
def pipeline(frames: Stream) -> Stream:
    return frames.map(_size).filter(_keep).map(_area).sink(_rows)


def _frames(n: int, tag: str) -> list[bytes]:
    from vidnexus.clock import wall_time
    from vidnexus.contracts.frames import encode_frame

    now = wall_time()
    return [encode_frame(Frame(f"{tag}-{i % 16}", i, i / 10, now, now, 32, 24, "raw", bytes(32 * 24 * 3),
                               {"apps": "bench3"})) for i in range(n)]


def _pin() -> None:
    try:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    except (AttributeError, OSError):
        pass


def _in_process(bus: Any, settings: Any, msgs: list[bytes], label: str) -> dict[str, Any]:
    """Publish everything, then time the worker role draining it in this process (on one core)."""
    from vidnexus.contracts.topics import Topics
    from vidnexus.roles.worker import WorkerRole

    role = WorkerRole(settings, app, bus=bus, concurrency=256, worker_id=f"bench-{uuid.uuid4().hex[:6]}")
    for i, m in enumerate(msgs):
        bus.publish(Topics(settings.topic_prefix).frames, f"k{i % 16}".encode(), m)
    bus.flush()
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            if role.stats.frames >= len(msgs):
                stop.set()
            time.sleep(0.005)

    before = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    _pin()
    threading.Thread(target=watch, daemon=True).start()
    t0 = time.perf_counter()
    asyncio.run(role.run_async(stop, until_idle_s=30))
    wall = time.perf_counter() - t0
    stop.set()
    if before is not None:
        os.sched_setaffinity(0, before)
    if role.stats.frames < len(msgs):
        raise VidnexusError(f"{label}: only {role.stats.frames} of {len(msgs)} messages came through")
    return {"runtime": label, "messages": len(msgs), "wall_s": round(wall, 3),
            "msgs_per_s": round(len(msgs) / wall, 1), "rows": role.stats.rows}


def _process(bootstrap: str, warm: int, n: int, runtime: str) -> dict[str, Any]:
    """A ``vidnexus worker --runtime RUNTIME`` process over Kafka: frames in, rows messages out."""
    from vidnexus.config import Settings
    from vidnexus.connectors.factory import open_bus
    from vidnexus.contracts.topics import Topics

    prefix = f"bench{uuid.uuid4().hex[:8]}"
    settings = Settings(bus="kafka", kafka_bootstrap=bootstrap, topic_prefix=prefix)
    env = dict(os.environ, VNX_BUS="kafka", VNX_KAFKA_BOOTSTRAP=bootstrap, VNX_TOPIC_PREFIX=prefix)
    bus = open_bus(settings)
    topics = Topics(prefix)
    bus.create_topic(topics.frames, 8)
    bus.create_topic(topics.rows, 8)
    p = subprocess.Popen([sys.executable, "-m", "vidnexus", "worker", APP_REF, "--concurrency", "256",
                          "--runtime", runtime], env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                         preexec_fn=_pin)
    try:
        stderr = p.stderr
        assert stderr is not None  # stderr=PIPE
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = stderr.readline()
            if "started" in line:
                break
            if not line and p.poll() is not None:
                raise VidnexusError(f"the {runtime} worker exited before starting")
        threading.Thread(target=lambda: [None for _ in stderr], daemon=True).start()
        consumer = bus.subscribe([topics.rows], group=None, from_beginning=True)

        def pump(msgs: list[bytes], want: int) -> float:
            got = 0
            t0 = time.perf_counter()
            for i, m in enumerate(msgs):
                bus.publish(topics.frames, f"k{i % 16}".encode(), m)
            bus.flush()
            end = time.monotonic() + 180
            while got < want and time.monotonic() < end:
                got += len(consumer.poll(timeout_s=0.2, max_records=5000))
            if got < want:
                raise VidnexusError(f"{runtime} worker: only {got} of {want} rows messages arrived")
            return time.perf_counter() - t0

        pump(_frames(warm, "w"), warm)  # first partitions assigned, code paths warm
        wall = pump(_frames(n, "m"), n)
        consumer.close()
    finally:
        p.terminate()
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
        bus.close()
    label = "faust worker over Kafka" if runtime == "faust" else "worker role over Kafka (process)"
    return {"runtime": label, "messages": n, "wall_s": round(wall, 3), "msgs_per_s": round(n / wall, 1), "rows": n}


def run(quick: bool, console: Any) -> dict[str, Any]:
    from rich.table import Table

    from vidnexus.config import Settings, load_settings
    from vidnexus.connectors.factory import open_bus
    from vidnexus.connectors.memory_bus import MemoryBus

    n = 2000 if quick else 20000
    bootstrap = load_settings().kafka_bootstrap
    kafka = Settings(bus="kafka", kafka_bootstrap=bootstrap, topic_prefix=f"bench{uuid.uuid4().hex[:8]}")
    kbus = open_bus(kafka)  # a clear error now if the broker is down
    results = []
    mem = Settings(bus="memory", topic_prefix="bench")
    _in_process(MemoryBus(), mem, _frames(200, "w"), "warm-up")
    results.append(_in_process(MemoryBus(), mem, _frames(n, "m"), "worker role, in-memory bus"))
    results.append(_in_process(kbus, kafka, _frames(n, "m"), "worker role in-process, Kafka"))
    kbus.close()
    results.append(_process(bootstrap, 200, n, "bus"))
    results.append(_process(bootstrap, 200, n, "faust"))
    table = Table("runtime", "messages", "wall s", "messages/s", "µs per message",
                  title="3-step CPU chain (map → filter → map → sink), one core per runtime")
    for r in results:
        r["us_per_msg"] = round(1e6 / r["msgs_per_s"], 1)
        table.add_row(r["runtime"], str(r["messages"]), f"{r['wall_s']:.2f}", f"{r['msgs_per_s']:.0f}",
                      f"{r['us_per_msg']:.0f}")
    console.print(table)
    local, kafka_local, worker, faust = results
    summary = {
        "local_msgs_per_s": local["msgs_per_s"],
        "worker_kafka_msgs_per_s": worker["msgs_per_s"],
        "faust_msgs_per_s": faust["msgs_per_s"],
        "local_over_faust": round(local["msgs_per_s"] / faust["msgs_per_s"], 2),
        "faust_overhead_us_per_msg": round(faust["us_per_msg"] - local["us_per_msg"], 1),
    }
    console.print(f"summary: {summary}")
    return {"name": "runtimes", "machine": machine_info(),
            "config": {"quick": quick, "messages": n, "chain": "map → filter → map → sink", "frame": "32x24 raw",
                       "faust_concurrency": 256, "local_concurrency": 256, "pinned": "one core per runtime"},
            "results": results, "summary": summary}
