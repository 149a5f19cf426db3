"""The local runtime end to end on a ListSource of frames into the in-memory test store (no DNN,
no services, no sleeps): rows, identities, the accounting table, windows flushed at the end."""

import asyncio

from vidnexus.operators.chain import App
from vidnexus.operators.engine import FRAMES_TABLE
from vidnexus.operators.local import LocalRuntime
from vidnexus.testing import ListSource, MemoryStore, frame_factory


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


def test_local_runtime_accounts_every_frame_and_flushes_windows():
    store = MemoryStore()
    rt = LocalRuntime(app_with_window(), store, backend=None, max_delay_s=0.0)
    frames = ListSource([frame_factory(cam, i, fps=1.0, tags={"apps": "counts"}) for cam in ("a", "b")
                         for i in range(12)] + [frame_factory("x", 0, tags={"apps": "other"})])
    stats = asyncio.run(rt.process(frames))
    rt.close()
    assert stats.frames == 24 and stats.skipped == 1 and stats.status == {"ok": 24}
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
