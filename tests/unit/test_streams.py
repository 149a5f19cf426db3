"""Sources, sampling, ingest workers and the registry, on the in-memory bus and chdb."""

import re
import threading
import time

import numpy as np
import pytest

from vidnexus.connectors.chdb_store import ChdbStore
from vidnexus.connectors.memory_bus import MemoryBus
from vidnexus.errors import StreamError
from vidnexus.streams.ingest import Backoff, StreamSpec, StreamStatus, StreamWorker
from vidnexus.streams.registry import StreamRegistry
from vidnexus.streams.sources import is_live, probe
from vidnexus.streams.supervisor import IngestSupervisor, in_shard
from vidnexus.testing import FakeClock

from .streams.media import CAR, frames_of, hls, http_server


def kept_bus(**kw) -> MemoryBus:
    """These tests read a stream's frames after it ran, with no reader while it ran: a bus that keeps
    them (the default lets go of what no live reader needs, beyond 4 MiB a partition)."""
    return MemoryBus(retain_bytes=1 << 40, **kw)


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
    bus = kept_bus()
    w = StreamWorker(StreamSpec("car", CAR, fps=2.0), bus, "f")
    st = w.run()
    assert st.state == "done" and st.decoded == 377
    frames = frames_of(bus)
    assert len(frames) == 61 and st.published == 61
    # a file's frame number is the frame's index in the source: the same frame, the same number, every run
    assert all(abs(f.frame_no / 12.5 - f.pts) < 1e-6 for f in frames)
    assert all(a.frame_no < b.frame_no for a, b in zip(frames, frames[1:])) and st.last_frame_no == frames[-1].frame_no
    assert all(abs(f.pts - k / 2) < 0.08 for k, f in enumerate(frames))
    # the in-process bus carries the decoder's planes as they are (nothing encoded or converted)
    assert frames[0].width == 768 and frames[0].encoding == "i420" and len(frames[0].data) == 768 * 432 * 3 // 2


def test_frames_on_the_in_process_bus_are_the_decoders_pixels_and_jpeg_over_kafka():
    """Uncompressed on the in-process bus: the worker's image is what swscale gives for the decoded
    frame (no JPEG loss); with ``uncompressed=False`` (Kafka, or VNX_FRAME_ENCODING=jpeg) a JPEG."""
    import av

    from vidnexus.streams.images import image_of

    with av.open(CAR) as c:
        ref = next(c.decode(video=0)).to_ndarray(format="bgr24").astype(np.int16)
    spec = StreamSpec("car", CAR, fps=None, every_n=400, until_s=1.0)  # the first frame only
    bus = kept_bus()
    assert StreamWorker(spec, bus, "f").run().published == 1
    jpeg_bus = kept_bus()
    assert StreamWorker(spec, jpeg_bus, "f", uncompressed=False).run().published == 1
    [raw], [jpg] = frames_of(bus), frames_of(jpeg_bus)
    assert (raw.encoding, jpg.encoding) == ("i420", "jpeg") and len(jpg.data) < len(raw.data) / 5
    exact, lossy = (np.abs(image_of(f).astype(np.int16) - ref) for f in (raw, jpg))
    assert exact.shape == ref.shape and exact.mean() < 1.5 and exact.mean() < lossy.mean()
    synthetic = kept_bus()
    StreamWorker(StreamSpec("s", "synthetic://hud?fps=5&seconds=1", every_n=1), synthetic, "f").run()
    assert {f.encoding for f in frames_of(synthetic)} == {"raw"}  # rendered BGR, as rendered


def test_keyframes_only_and_every_nth():
    bus = kept_bus()
    kf = StreamWorker(StreamSpec("k", CAR, fps=None, keyframes_only=True), bus, "k").run()
    assert 0 < kf.published < 40
    nth = StreamWorker(StreamSpec("n", "synthetic://hud?fps=10&seconds=2", fps=None, every_n=5), bus, "n").run()
    assert nth.published == 4


def test_bad_files_fail_alone(tmp_path):
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(np.random.default_rng(0).bytes(50_000))
    trunc = tmp_path / "trunc.mp4"
    trunc.write_bytes(open(CAR, "rb").read()[: 400_000])
    bus = kept_bus()
    st_junk = StreamWorker(StreamSpec("junk", str(junk), fps=2.0), bus, "f").run()
    assert st_junk.state == "failed" and "junk.mp4" in st_junk.reason
    st_trunc = StreamWorker(StreamSpec("trunc", str(trunc), fps=2.0), bus, "f").run()
    assert st_trunc.state == "failed" and "truncated" in st_trunc.reason and "of the 377 frames" in st_trunc.reason
    assert 0 < st_trunc.published < 61  # what was there before the cut was still ingested


def test_oversized_frames_are_rejected_not_truncated(caplog):
    bus = kept_bus(max_message_bytes=100_000)  # at quality 100 the frames are 51-114 KB
    with caplog.at_level("ERROR", logger="vidnexus.streams.ingest"):
        st = StreamWorker(StreamSpec("big", CAR, fps=0.5, jpeg_quality=100), bus, "f").run()
    assert st.state == "done" and st.rejected > 0 and st.published > 0 and st.published + st.rejected == st.sampled
    # the log names each rejected frame by its index in the source (it said "frame 0" for every one)
    named = [int(m[1]) for r in caplog.records if (m := re.search(r"source frame (\d+)", r.getMessage()))]
    assert len(named) == st.rejected and len(set(named)) == st.rejected and all(i % 25 == 0 for i in named)


def test_a_stream_whose_every_frame_is_rejected_fails():
    bus = kept_bus(max_message_bytes=2_000)
    st = StreamWorker(StreamSpec("big", "synthetic://hud?fps=5&seconds=1", every_n=1), bus, "f").run()
    assert (st.state, st.published, st.rejected) == ("failed", 0, 5)
    assert "all 5 sampled frames were rejected" in st.reason


def test_http_file_plays_once_and_live_hls_stays_live(tmp_path):
    hls(tmp_path / "vod", live=False)
    hls(tmp_path / "live", live=True)
    with http_server(tmp_path) as base:
        vod = StreamWorker(StreamSpec("vod", f"{base}/vod/index.m3u8", every_n=1), kept_bus(), "f")
        assert vod.run().state == "done" and vod.kind == "playlist" and vod.status.published == 75
        live = StreamWorker(StreamSpec("live", f"{base}/live/index.m3u8", every_n=1), kept_bus(), "f",
                            open_timeout_s=2.0)
        t = threading.Thread(target=live.run, daemon=True)
        t.start()
        deadline = time.monotonic() + 10
        while live.status.published == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        live.stop.set()
        t.join(timeout=15)
    assert live.kind == "live" and live.status.published > 0 and live.status.state == "stopped"


def test_live_source_reconnects_with_backoff():
    bus = kept_bus()
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


@pytest.fixture
def store(tmp_path):
    s = ChdbStore(tmp_path / "db")  # closed: chdb serves one data directory per process
    yield s
    s.close()


def test_registry_and_supervisor_follow_changes(store):
    reg = StreamRegistry(store)
    reg.add(StreamSpec("a", "synthetic://hud?fps=10&seconds=3&seed=1", fps=5.0, apps=("hud",), tags={"site": "x"}))
    reg.add(StreamSpec("b", "synthetic://hud?fps=10&seconds=3&seed=2", fps=5.0))
    with pytest.raises(StreamError, match="already exists"):
        reg.add(StreamSpec("a", "synthetic://hud", fps=1.0))
    reg.add(StreamSpec("a", "synthetic://hud?fps=10&seconds=3&seed=1", fps=5.0, apps=("hud",), tags={"site": "x"}),
            overwrite=True)  # registered anew (embedded runs do this with their streams)
    reg.pause("b")
    assert {r.spec.name: r.state for r in reg.list()} == {"a": "enabled", "b": "paused"}
    assert reg.get("a").spec.tags == {"site": "x"} and reg.get("a").probe["width"] == 320
    bus = kept_bus()
    sup = IngestSupervisor(reg, bus, "f", poll_s=0.05)
    sup.run(once=True)
    assert {s.name: s.state for s in sup.statuses()} == {"a": "done"}
    reg.resume("b")
    sup.run(once=True)
    assert {s.name: s.state for s in sup.statuses()} == {"a": "done", "b": "done"}
    frames = frames_of(bus)
    for name in ("a", "b"):
        nos = [f.frame_no for f in frames if f.stream_id == name]
        assert nos == list(range(0, 30, 2))  # source indices: 10 fps sampled at 5
    assert reg.status("a")["published"] == 15
    reg.remove("a")
    assert [r.spec.name for r in reg.list()] == ["b"]


def test_new_tags_reach_the_next_frames_and_frame_numbers_go_on(store):
    """`streams tags` / PUT …/tags while a stream is ingested: ingest restarts it with the new tags
    (its lines and zones) and continues after its last published frame — no frame twice, none lost."""
    reg = StreamRegistry(store)
    reg.add(StreamSpec("a", "synthetic://hud?fps=10&seconds=4&seed=1", fps=5.0, realtime=True, tags={"site": "x"}))
    bus = kept_bus()
    sup = IngestSupervisor(reg, bus, "f", poll_s=0.05)
    t = threading.Thread(target=lambda: sup.run(once=True), daemon=True)
    t.start()
    deadline = time.monotonic() + 10
    while sum(st.published for st in sup.statuses()) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    r = reg.set_tags("a", {"site": "x", "line.gate": "0,10,100,10"})
    assert r.state == "enabled" and r.spec.key == reg.get("a").spec.key  # the same registration
    t.join(timeout=30)
    frames = frames_of(bus)
    nos = [f.frame_no for f in frames]
    assert nos == list(range(0, 40, 2))  # every sampled frame once, in order
    tagged = ["line.gate" in f.tags for f in frames]
    assert tagged[0] is False and tagged[-1] is True and tagged == sorted(tagged)  # from one frame on
    assert reg.status("a")["published"] == 20
    with pytest.raises(StreamError, match="unknown stream"):
        reg.set_tags("nope", {})


def test_a_restarted_file_ingest_continues_after_its_last_published_frame():
    spec = StreamSpec("car", CAR, fps=2.0)
    full = kept_bus()
    StreamWorker(spec, full, "f").run()
    first = frames_of(full)
    # a process that published 30 frames and crashed: its last report is what the next one continues
    crashed = StreamStatus("car", state="running", sampled=30, published=30, spec_key=spec.key,
                           last_frame_no=first[29].frame_no, origin_wall=123.0)
    bus = kept_bus()
    st = StreamWorker(spec, bus, "f", resume=crashed).run()
    rest = frames_of(bus)
    assert [f.frame_no for f in rest] == [f.frame_no for f in first[30:]]  # no duplicate, no gap
    assert [f.pts for f in rest] == [f.pts for f in first[30:]] and [f.data for f in rest] == [f.data for f in first[30:]]
    assert (st.state, st.published, st.sampled, st.decoded, st.origin_wall) == ("done", 61, 61, 377, 123.0)
    # another registration's status (another key) is not continued
    other = StreamWorker(StreamSpec("car", CAR, fps=1.0), kept_bus(), "f", resume=crashed)
    assert other.status.published == 0 and other.status.last_frame_no == -1


def test_live_frame_numbers_never_repeat_after_a_restart(tmp_path):
    hls(tmp_path / "live", live=True)
    with http_server(tmp_path) as base:
        spec = StreamSpec("live", f"{base}/live/index.m3u8", every_n=1)
        clock = FakeClock(wall_start=5_000.0)
        # the previous process numbered frames up to a point past this clock's wall time (clocks differ)
        prev = StreamStatus("live", state="running", published=7, spec_key=spec.key,
                            last_frame_no=6_000_000_000, origin_wall=4_000.0)
        w = StreamWorker(spec, bus := kept_bus(), "f", open_timeout_s=2.0, resume=prev, clock=clock)
        t = threading.Thread(target=w.run, daemon=True)
        t.start()
        deadline = time.monotonic() + 10
        while w.status.published < 10 and time.monotonic() < deadline:
            time.sleep(0.05)
        w.stop.set()
        t.join(timeout=15)
    nos = [f.frame_no for f in frames_of(bus)]
    assert w.kind == "live" and len(nos) >= 3 and nos[0] == 6_000_000_001
    assert all(a < b for a, b in zip(nos, nos[1:])) and w.status.published == 7 + len(nos)
    # pts counts from the stream's first ingest, across processes
    assert all(f.pts == pytest.approx(1_000.0, abs=1.0) for f in frames_of(bus))


def test_a_restarted_supervisor_does_not_ingest_a_finished_file_again(store):
    reg = StreamRegistry(store)
    reg.add(StreamSpec("a", "synthetic://hud?fps=10&seconds=2&seed=1", fps=5.0))
    bus = kept_bus()
    IngestSupervisor(reg, bus, "f", poll_s=0.05).run(once=True)
    assert len(frames_of(bus)) == 10
    again = kept_bus()
    sup = IngestSupervisor(reg, again, "f", poll_s=0.05)
    sup.run(once=True)
    assert frames_of(again) == [] and {s.name: (s.state, s.published) for s in sup.statuses()} == {"a": ("done", 10)}
    # registering it anew is a new registration: ingested again, same frames, same numbers
    reg.add(StreamSpec("a", "synthetic://hud?fps=10&seconds=2&seed=1", fps=5.0), overwrite=True)
    assert reg.status("a") is None
    anew = kept_bus()
    IngestSupervisor(reg, anew, "f", poll_s=0.05).run(once=True)
    assert [f.frame_no for f in frames_of(anew)] == [f.frame_no for f in frames_of(bus)]


def test_shards_split_streams():
    names = [f"cam-{i}" for i in range(50)]
    parts = [{n for n in names if in_shard(n, i, 3)} for i in range(3)]
    assert set().union(*parts) == set(names) and sum(map(len, parts)) == 50


@pytest.mark.parametrize("rate, video_s_per_clock_s", [("realtime", 1.0), ("4", 4.0), ("0.5", 0.5)])
def test_a_paced_file_takes_its_duration_divided_by_its_speed(rate, video_s_per_clock_s):
    """`--rate realtime|FACTOR`: a file is published at its own pace times the factor (on a fake
    clock: the time it took is what the pacing slept); `max` does not wait at all."""
    from vidnexus.streams.spec import parse_rate

    realtime, speed = parse_rate(rate)
    clock = FakeClock()
    bus = kept_bus()
    spec = StreamSpec("s", "synthetic://hud?fps=10&seconds=4", fps=5.0, realtime=realtime, speed=speed)
    st = StreamWorker(spec, bus, "f", clock=clock).run()
    assert st.state == "done" and st.published == 20
    last_decoded_pts = (st.decoded - 1) / 10  # the pacing waits for every decoded frame's time, sampled or not
    assert clock.now() == pytest.approx(last_decoded_pts / video_s_per_clock_s, abs=1e-6)
    maxed = FakeClock()
    StreamWorker(StreamSpec("m", "synthetic://hud?fps=10&seconds=4", fps=5.0, realtime=False), kept_bus(), "f",
                 clock=maxed).run()
    assert maxed.now() < 0.5


def test_rate_values():
    from vidnexus.streams.spec import parse_rate, rate_text

    assert parse_rate("realtime") == (True, 1.0) and parse_rate("MAX") == (False, 1.0)
    assert parse_rate("2x") == (True, 2.0) and parse_rate("0.25") == (True, 0.25)
    for bad in ("fast", "0", "-1", "inf", "nan", "1e9", ""):
        with pytest.raises(StreamError, match="--rate"):
            parse_rate(bad)
    assert rate_text(StreamSpec("a", "x.mp4", realtime=True, speed=2.0)) == "2x"
    assert rate_text(StreamSpec("a", "x.mp4", realtime=True)) == "realtime"
    assert rate_text(StreamSpec("a", "x.mp4")) == "max"
    with pytest.raises(StreamError, match="speed"):
        StreamSpec("a", "x.mp4", realtime=True, speed=0.0)
