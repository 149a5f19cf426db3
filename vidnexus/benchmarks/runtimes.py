"""Per-message cost of the runtimes: messages/s through the same 3-step CPU chain (map → filter →
map → sink) in

- the local runtime on the in-memory bus (the chain engine and the table sink alone),
- the local runtime consuming the frames topic from the real Kafka broker (adds the Kafka consumer),
- a faust worker (`vidnexus worker`) over Kafka, rows published to the rows topic (what distributed
  mode runs),

each on one core (the process pinned with sched_setaffinity; the broker runs beside it). Needs the
broker: ``vidnexus services up``. The per-message overhead of faust over the local runtime is
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
from vidnexus.streams.frame import Frame

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
    from vidnexus.streams.frame import encode_frame

    now = wall_time()
    return [encode_frame(Frame(f"{tag}-{i % 16}", i, i / 10, now, now, 32, 24, "raw", bytes(32 * 24 * 3),
                               {"apps": "bench3"})) for i in range(n)]


def _pin() -> None:
    try:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    except (AttributeError, OSError):
        pass


def _local(bus: Any, topic: str, msgs: list[bytes], label: str) -> dict[str, Any]:
    """Publish everything, then time the local runtime draining it (on one core)."""
    from vidnexus.operators.local import LocalRuntime
    from vidnexus.testing import MemoryStore

    for i, m in enumerate(msgs):
        bus.publish(topic, f"k{i % 16}".encode(), m)
    bus.flush()
    rt = LocalRuntime(app, MemoryStore(), None, concurrency=256, max_rows=5000)
    stop = threading.Event()
    done = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            if rt.stats.frames >= len(msgs):
                stop.set()
                done.set()
            time.sleep(0.005)

    before = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    _pin()
    threading.Thread(target=watch, daemon=True).start()
    t0 = time.perf_counter()
    asyncio.run(rt.consume(bus, topic, stop, group=f"bench-{uuid.uuid4().hex[:6]}", idle_stop_s=30))
    wall = time.perf_counter() - t0
    rt.close()
    if before is not None:
        os.sched_setaffinity(0, before)
    if not done.is_set():
        raise VidnexusError(f"{label}: only {rt.stats.frames} of {len(msgs)} messages came through")
    return {"runtime": label, "messages": len(msgs), "wall_s": round(wall, 3),
            "msgs_per_s": round(len(msgs) / wall, 1), "rows": rt.stats.rows}


def _faust(bootstrap: str, warm: int, n: int) -> dict[str, Any]:
    from vidnexus.config import Settings
    from vidnexus.connectors.factory import open_bus

    prefix = f"bench{uuid.uuid4().hex[:8]}"
    settings = Settings(bus="kafka", kafka_bootstrap=bootstrap, topic_prefix=prefix)
    env = dict(os.environ, VNX_BUS="kafka", VNX_KAFKA_BOOTSTRAP=bootstrap, VNX_TOPIC_PREFIX=prefix)
    bus = open_bus(settings)
    frames_topic, rows_topic = settings.topic("frames"), settings.topic("rows")
    bus.create_topic(frames_topic, 8)
    bus.create_topic(rows_topic, 8)
    p = subprocess.Popen([sys.executable, "-m", "vidnexus", "worker", APP_REF, "--concurrency", "256"],
                         env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                         preexec_fn=_pin)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = p.stderr.readline()
            if "started" in line:
                break
            if not line and p.poll() is not None:
                raise VidnexusError("the faust worker exited before starting")
        threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
        consumer = bus.subscribe([rows_topic], group=None, from_beginning=True)

        def pump(msgs: list[bytes], want: int) -> float:
            got = 0
            t0 = time.perf_counter()
            for i, m in enumerate(msgs):
                bus.publish(frames_topic, f"k{i % 16}".encode(), m)
            bus.flush()
            end = time.monotonic() + 180
            while got < want and time.monotonic() < end:
                got += len(consumer.poll(timeout_s=0.2, max_records=5000))
            if got < want:
                raise VidnexusError(f"faust worker: only {got} of {want} rows messages arrived")
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
    return {"runtime": "faust worker over Kafka", "messages": n, "wall_s": round(wall, 3),
            "msgs_per_s": round(n / wall, 1), "rows": n}


def run(quick: bool, console: Any) -> dict[str, Any]:
    from rich.table import Table

    from vidnexus.config import Settings, load_settings
    from vidnexus.connectors.factory import open_bus
    from vidnexus.connectors.memory_bus import MemoryBus

    n = 2000 if quick else 20000
    bootstrap = load_settings().kafka_bootstrap
    kbus = open_bus(Settings(bus="kafka", kafka_bootstrap=bootstrap))  # a clear error now if the broker is down
    results = []
    mem = MemoryBus()
    mem.create_topic("frames", 8)
    _local(mem, "frames", _frames(200, "w"), "warm-up")
    results.append(_local(mem, "frames", _frames(n, "m"), "local, in-memory bus"))
    topic = f"bench-frames-{uuid.uuid4().hex[:8]}"
    kbus.create_topic(topic, 8)
    results.append(_local(kbus, topic, _frames(n, "m"), "local, Kafka consumer"))
    kbus.close()
    results.append(_faust(bootstrap, 200, n))
    table = Table("runtime", "messages", "wall s", "messages/s", "µs per message",
                  title="3-step CPU chain (map → filter → map → sink), one core per runtime")
    for r in results:
        r["us_per_msg"] = round(1e6 / r["msgs_per_s"], 1)
        table.add_row(r["runtime"], str(r["messages"]), f"{r['wall_s']:.2f}", f"{r['msgs_per_s']:.0f}",
                      f"{r['us_per_msg']:.0f}")
    console.print(table)
    local, kafka_local, faust = results
    summary = {
        "local_msgs_per_s": local["msgs_per_s"],
        "faust_msgs_per_s": faust["msgs_per_s"],
        "local_over_faust": round(local["msgs_per_s"] / faust["msgs_per_s"], 2),
        "faust_overhead_us_per_msg": round(faust["us_per_msg"] - local["us_per_msg"], 1),
    }
    console.print(f"summary: {summary}")
    return {"name": "runtimes", "machine": machine_info(),
            "config": {"quick": quick, "messages": n, "chain": "map → filter → map → sink", "frame": "32x24 raw",
                       "faust_concurrency": 256, "local_concurrency": 256, "pinned": "one core per runtime"},
            "results": results, "summary": summary}
