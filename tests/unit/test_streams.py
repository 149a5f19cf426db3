"""Sources, sampling, ingest workers and the registry, on the in-memory bus and chdb."""

import os
import threading

import numpy as np
import pytest

from vidnexus.connectors.chdb_store import ChdbStore
from vidnexus.connectors.memory_bus import MemoryBus
from vidnexus.errors import StreamError
from vidnexus.streams.frame import decode_frame
from vidnexus.streams.ingest import Backoff, StreamSpec, StreamWorker
from vidnexus.streams.registry import StreamRegistry
from vidnexus.streams.sources import is_live, probe
from vidnexus.streams.supervisor import IngestSupervisor, in_shard

REAL = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data", "real")
CAR = os.path.abspath(os.path.join(REAL, "car-detection.mp4"))


def frames_of(bus, topic="f"):
    c = bus.subscribe([topic], group=None)
    out = []
    while batch := c.poll(timeout_s=0.2):
        out += [decode_frame(m.value) for m in batch]
    return out


def test_probe_real_file():
    info = probe(CAR)
    assert (info.codec, info.width, info.height, round(info.fps, 2)) == ("h264", 768, 432, 12.5)
    assert info.duration_s == pytest.approx(30.16, abs=0.05)


@pytest.mark.parametrize("url, match", [("ftp://x/y.mp4", "unsupported URL scheme"),
                                        ("/no/such/file.mp4", "no such file"),
                                        ("synthetic://nope", "unsupported synthetic")])
def test_probe_errors(url, match):
    with pytest.raises(StreamError, match=match):
        probe(url)


def test_live_detection():
    assert is_live("rtsp://127.0.0.1/x") and is_live("https://h/x.m3u8") and not is_live(CAR)


def test_file_at_2fps_gives_61_frames_in_order_with_pts():
    bus = MemoryBus()
    w = StreamWorker(StreamSpec("car", CAR, fps=2.0), bus, "f")
    st = w.run()
    assert st.state == "done" and st.decoded == 377
    frames = frames_of(bus)
    assert len(frames) == 61 and st.published == 61
    assert [f.frame_no for f in frames] == list(range(61))
    assert all(abs(f.pts - k / 2) < 0.08 for k, f in enumerate(frames))
    assert frames[0].width == 768 and frames[0].encoding == "jpeg"


def test_keyframes_only_and_every_nth():
    bus = MemoryBus()
    kf = StreamWorker(StreamSpec("k", CAR, fps=None, keyframes_only=True), bus, "k").run()
    assert 0 < kf.published < 40
    nth = StreamWorker(StreamSpec("n", "synthetic://hud?fps=10&seconds=2", fps=None, every_n=5), bus, "n").run()
    assert nth.published == 4


def test_bad_files_fail_alone(tmp_path):
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(np.random.default_rng(0).bytes(50_000))
    trunc = tmp_path / "trunc.mp4"
    trunc.write_bytes(open(CAR, "rb").read()[: 400_000])
    bus = MemoryBus()
    st_junk = StreamWorker(StreamSpec("junk", str(junk), fps=2.0), bus, "f").run()
    assert st_junk.state == "failed" and "junk.mp4" in st_junk.reason
    st_trunc = StreamWorker(StreamSpec("trunc", str(trunc), fps=2.0), bus, "f").run()
    assert st_trunc.state == "failed" and "truncated" in st_trunc.reason and "of the 377 frames" in st_trunc.reason
    assert 0 < st_trunc.published < 61  # what was there before the cut was still ingested


def test_oversized_frames_are_rejected_not_truncated():
    bus = MemoryBus(max_message_bytes=20_000)
    st = StreamWorker(StreamSpec("big", CAR, fps=0.5, jpeg_quality=95), bus, "f").run()
    assert st.rejected > 0 and st.published + st.rejected == st.sampled


def test_live_source_reconnects_with_backoff():
    bus = MemoryBus()
    w = StreamWorker(StreamSpec("cam", "rtsp://127.0.0.1:1/none", fps=1.0), bus, "f",
                     backoff=Backoff(initial_s=0.01, max_s=0.05), open_timeout_s=0.5)
    t = threading.Thread(target=w.run, daemon=True)
    t.start()
    t.join(timeout=4)
    w.stop.set()
    t.join(timeout=10)
    assert w.status.reconnects >= 2 and w.status.state == "stopped" and "rtsp://127.0.0.1:1" in w.status.reason


def test_backoff_grows_and_caps():
    b = Backoff(0.5, 4.0)
    assert [b.next() for _ in range(5)] == [0.5, 1.0, 2.0, 4.0, 4.0]
    b.reset()
    assert b.next() == 0.5


def test_registry_and_supervisor_follow_changes(tmp_path):
    reg = StreamRegistry(ChdbStore(tmp_path / "db"))
    reg.add(StreamSpec("a", "synthetic://hud?fps=10&seconds=3&seed=1", fps=5.0, apps=("hud",), tags={"site": "x"}))
    reg.add(StreamSpec("b", "synthetic://hud?fps=10&seconds=3&seed=2", fps=5.0))
    with pytest.raises(StreamError, match="already exists"):
        reg.add(StreamSpec("a", "synthetic://hud", fps=1.0))
    with pytest.raises(StreamError, match="unknown app"):
        reg.add(StreamSpec("c", "synthetic://hud", fps=1.0, apps=("nope",)))
    reg.pause("b")
    assert {r.spec.name: r.state for r in reg.list()} == {"a": "enabled", "b": "paused"}
    assert reg.get("a").spec.tags == {"site": "x"} and reg.get("a").probe["width"] == 320
    bus = MemoryBus()
    sup = IngestSupervisor(reg, bus, "f", poll_s=0.05)
    sup.run(once=True)
    assert {s.name: s.state for s in sup.statuses()} == {"a": "done"}
    reg.resume("b")
    sup.run(once=True)
    assert {s.name: s.state for s in sup.statuses()} == {"a": "done", "b": "done"}
    frames = frames_of(bus)
    for name in ("a", "b"):
        nos = [f.frame_no for f in frames if f.stream_id == name]
        assert nos == list(range(15))
    assert reg.status("a")["published"] == 15
    reg.remove("a")
    assert [r.spec.name for r in reg.list()] == ["b"]


def test_shards_split_streams():
    names = [f"cam-{i}" for i in range(50)]
    parts = [{n for n in names if in_shard(n, i, 3)} for i in range(3)]
    assert set().union(*parts) == set(names) and sum(map(len, parts)) == 50
