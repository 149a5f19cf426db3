"""The worker role end to end on the in-memory bus (no DNN, no services): frames in, rows messages
out to the sink role and the in-memory test store: rows, identities, the accounting table, windows
flushed at the end, bad messages dead-lettered, offsets committed after the rows."""

import asyncio
import threading

from vidnexus.config import Settings
from vidnexus.connectors.memory_bus import MemoryBus
from vidnexus.contracts.frames import encode_frame
from vidnexus.contracts.topics import Topics
from vidnexus.operators.chain import App
from vidnexus.operators.engine import FRAMES_TABLE
from vidnexus.roles.sink import SinkRole
from vidnexus.roles.worker import WorkerRole
from vidnexus.testing import MemoryStore, frame_factory

SETTINGS = Settings(bus="memory", topic_prefix="w")
TOPICS = Topics("w")


def run_worker(app, frames, bad=()):
    """Publish ``frames`` (and ``bad`` raw messages), run the worker until it has been idle, then the
    sink; returns (worker stats, store, bus)."""
    bus, store = MemoryBus(), MemoryStore()
    role = WorkerRole(SETTINGS, app, bus=bus, worker_id="t")
    for f in frames:
        bus.publish(TOPICS.frames, f.stream_id.encode(), encode_frame(f))
    for raw in bad:
        bus.publish(TOPICS.frames, b"bad", raw)
    stats = asyncio.run(role.run_async(threading.Event(), until_idle_s=0.5))
    sink = SinkRole(SETTINGS, bus=bus, store=store, max_delay_s=0.0)
    stop = threading.Event()
    stop.set()
    sink.run(stop)  # reads what is there, inserts it
    return stats, store, bus


def app_with_window():
    app = App("counts", slo_ms=1000)
    app.table("per_frame", {"n": "UInt32"})
    app.table("per_5s", {"n": "UInt32"})
    app.chain(lambda s: (s.filter(lambda f: f.frame_no % 4 != 3)              # every 4th frame: nothing
                         .map(lambda f: {"n": f.frame_no % 3, "t": f.pts})
                         .window(5.0, key=lambda d: "all", agg=lambda k, xs: {"n": sum(x["n"] for x in xs)},
                                 time=lambda d: d["t"])
                         .sink("per_5s")))
    return app


def test_worker_accounts_every_frame_and_flushes_windows():
    frames = [frame_factory(cam, i, fps=1.0, tags={"apps": "counts"}) for cam in ("a", "b")
              for i in range(12)] + [frame_factory("x", 0, tags={"apps": "other"})]
    stats, store, bus = run_worker(app_with_window(), frames, bad=[b"\x00 not a frame"])
    assert stats.frames == 24 and stats.skipped == 1 and stats.status == {"ok": 24} and stats.dead == 1
    accounting = store.rows[FRAMES_TABLE.name]
    assert len(accounting) == 24 and {r[3] for r in accounting} == {"ok"}
    per_5s = sorted(store.rows["per_5s"])
    # Windows [0,5), [5,10) close while frames arrive; [10,15) is flushed at the end of input.
    want = []
    for cam in ("a", "b"):
        for start in (0, 5, 10):
            n = sum(i % 3 for i in range(start, min(start + 5, 12)) if i % 4 != 3)
            want.append((cam, start * 1000, n))
    assert [(r[0], r[1], r[3]) for r in per_5s] == sorted(want)
    dead = bus.subscribe([TOPICS.dead_letter("frames")], group=None).poll(timeout_s=1.0)
    assert [m.value for m in dead] == [b"\x00 not a frame"]
    group = TOPICS.group("app-counts")
    assert sum(bus._groups[group].committed.values()) == 26  # every message read, committed once its rows are out
