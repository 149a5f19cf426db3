"""A generated corpus of bad and valid inputs, registered as a user would (``StreamSpec`` + the
registry's ``add`` with its probe, or ``--no-probe``) and all ingested together by one supervisor
(``ingest --once``) on a real chdb store and the in-memory bus.

Every bad input must be isolated with its reason (refused at the door, or ended ``failed`` with the
reason, or handled and counted), and every valid input must end ``done`` with exactly its frames while
the bad ones run beside it. The test prints ``isolated_with_reason / bad_inputs_tried`` and
``valid_inputs_ok / valid_inputs_tried``; both must be 100%.
"""

from __future__ import annotations

import math
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from urllib.parse import quote

import numpy as np

from vidnexus.connectors.memory_bus import MemoryBus
from vidnexus.errors import StreamError
from vidnexus.streams.ingest import Backoff, StreamWorker
from vidnexus.streams.registry import STREAMS_TABLE, StreamRegistry
from vidnexus.streams.spec import StreamSpec
from vidnexus.streams.supervisor import IngestSupervisor

from .media import (CAR, PERSON, corrupt_packets, cut_copy, fifo, frames_of, hls, http_server, make_clip, packets,
                    silent_server, truncate)

FFMPEG = shutil.which("ffmpeg")
BUS_LIMIT = 50_000  # bytes per message: a 768x432 frame is ~20 KB at quality 85 and ~90 KB at 100


class Media:
    """Builds the corpus's files on demand in one directory, each once."""

    def __init__(self, root: Path, base_url: str, silent_port: int) -> None:
        self.root, self.http, self.silent = root, base_url, silent_port
        self._made: dict[str, Path] = {}

    def file(self, name: str, make: Callable[[Path], Any]) -> str:
        if name not in self._made:
            path = self.root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            make(path)
            self._made[name] = path
        return str(self._made[name])

    def clip(self, ext: str, **kw: Any) -> str:
        codec = "libvpx" if ext == "webm" else "libx264"
        opts = kw.pop("options", None)
        tag = "-fs" if opts else ""
        return self.file(f"clip{tag}.{ext}", lambda p: make_clip(p, codec=codec, options=opts, **kw))

    def ffmpeg(self, name: str, *args: str) -> str:
        """The output of ``ffmpeg -y <args> <name>``."""
        return self.file(name, lambda p: subprocess.run([FFMPEG, "-v", "error", "-y", *args, str(p)], check=True))

    def car_cut(self, faststart: bool = False) -> str:
        opts = {"movflags": "+faststart"} if faststart else None
        return self.file(f"car-cut{'-fs' if faststart else ''}.mp4", lambda p: cut_copy(CAR, p, 6.0, 5.0, opts))

    def ts_cut_inside_frame(self) -> str:
        src = self.clip("ts")
        pos, size, _ = next(p for p in packets(src)[40:] if p[2])  # a keyframe spans several 188-byte TS packets
        return self.file("cut-in-frame.ts", lambda p: truncate(src, p, (pos + size // 2) // 188 * 188))


@dataclass(frozen=True)
class Case:
    name: str
    how: str
    url: Callable[[Media], str]
    expect: str | int | dict[str, Any]
    """Bad input: a substring of the reason (or counters of a handled one); valid input: frames published."""
    spec: dict[str, Any] = field(default_factory=dict)
    bad: bool = True
    probe: bool = True
    timeout_s: float = 5.0
    stored: dict[str, Any] | None = None
    """Insert this row directly (as an older version could have) instead of registering."""
    live: bool = False
    """A live source: only its registration (probe kind) is checked; it is paused before ingest."""


def _synthetic(q: str) -> Callable[[Media], str]:
    return lambda m: f"synthetic://{q}"


CASES = [
    # -- refused at the door (StreamSpec + registry.add) -----------------------------------------
    Case("fps-inf", "--fps inf", lambda m: m.clip("mp4"), "fps=inf", {"fps": math.inf}),
    Case("fps-nan", "--fps nan", lambda m: m.clip("mp4"), "fps=nan", {"fps": math.nan}),
    Case("fps-zero", "--fps 0", lambda m: m.clip("mp4"), "fps=0", {"fps": 0.0}),
    Case("fps-huge", "--fps 1e6", lambda m: m.clip("mp4"), "<= 1000", {"fps": 1e6}),
    Case("every-n-wraps", "--every-n 4294967297 (wrapped to 1 in a UInt32)", lambda m: m.clip("mp4"),
         "every_n=4294967297", {"every_n": 2**32 + 1}),
    Case("every-n-zero", "--every-n 0", lambda m: m.clip("mp4"), "every_n=0", {"every_n": 0}),
    Case("fps-and-every-n", "--fps 2 --every-n 3", lambda m: m.clip("mp4"), "both given", {"fps": 2.0, "every_n": 3}),
    Case("fps-and-keyframes", "--fps 2 --keyframes", lambda m: m.clip("mp4"), "both given",
         {"fps": 2.0, "keyframes_only": True}),
    Case("quality-0", "--quality 0", lambda m: m.clip("mp4"), "jpeg_quality=0", {"jpeg_quality": 0}),
    Case("quality-101", "--quality 101", lambda m: m.clip("mp4"), "jpeg_quality=101", {"jpeg_quality": 101}),
    Case("max-side-1", "--max-side 1", lambda m: m.clip("mp4"), "max_side=1", {"max_side": 1}),
    Case("empty-url", "URL ''", lambda m: "", "empty URL"),
    Case("blank-url", "URL '  '", lambda m: "  ", "empty URL"),
    Case("bad-name", "name 'a b'", lambda m: m.clip("mp4"), "stream name 'a b'", {"name": "a b"}),
    Case("scheme-ftp", "ftp://h/v.mp4", lambda m: "ftp://h/v.mp4", "unsupported URL scheme 'ftp'"),
    Case("timeout-negative", "--timeout -1", lambda m: m.clip("mp4"), "probe timeout -1", timeout_s=-1),
    Case("timeout-inf", "--timeout inf", lambda m: m.clip("mp4"), "probe timeout inf", timeout_s=math.inf),
    Case("synthetic-fps-inf", "synthetic://hud?fps=inf", _synthetic("hud?fps=inf"), "fps='inf' is not a finite"),
    Case("synthetic-fps-nan", "synthetic://hud?fps=nan", _synthetic("hud?fps=nan"), "fps='nan' is not a finite"),
    Case("synthetic-seconds-1e400", "synthetic://hud?seconds=1e400", _synthetic("hud?seconds=1e400"),
         "seconds='1e400' is not a finite"),
    Case("synthetic-width-abc", "synthetic://hud?width=abc", _synthetic("hud?width=abc"), "width='abc' is not a whole"),
    Case("synthetic-width-10", "synthetic://hud?width=10", _synthetic("hud?width=10"), "10x180 is not allowed"),
    Case("synthetic-width-huge", "synthetic://hud?width=100000", _synthetic("hud?width=100000"), "at most 4096"),
    Case("synthetic-game-fps-inf", "synthetic://game?fps=inf", _synthetic("game?fps=inf"), "fps='inf'"),
    Case("synthetic-unknown", "synthetic://nope", _synthetic("nope"), "known generators"),
    Case("missing-file", "a path that does not exist", lambda m: str(m.root / "nope.mp4"), "no such file"),
    Case("file-url-host", "file://host/v.mp4", lambda m: "file://host/v.mp4", "not host 'host'"),
    Case("junk-bytes", "50 KB of random bytes (seed 0) named .mp4",
         lambda m: m.file("junk.mp4", lambda p: p.write_bytes(np.random.default_rng(0).bytes(50_000))), "cannot open"),
    Case("text-as-video", "a text file named .mkv",
         lambda m: m.file("notes.mkv", lambda p: p.write_text("not a video\n" * 100)), "cannot open"),
    Case("fifo-probe", "mkfifo, streams add (used to hang)", lambda m: m.file("pipe.mp4", fifo), "a named pipe"),
    Case("directory", "a directory", lambda m: str(m.root), "a directory"),
    Case("device", "/dev/null", lambda m: "/dev/null", "a device"),
    Case("mp4-index-at-end-truncated", "MP4 (moov at end) cut at 50%",
         lambda m: m.file("t-end.mp4", lambda p: truncate(m.clip("mp4"), p, 0.5)), "cannot open"),
    Case("rtsp-silent", "rtsp:// to a server that never answers, --timeout 1",
         lambda m: f"rtsp://127.0.0.1:{m.silent}/cam", "no answer within 1 s", timeout_s=1.0),
    Case("http-silent", "http:// to a server that never answers, --timeout 1",
         lambda m: f"http://127.0.0.1:{m.silent}/v.mp4", "no answer within 1 s", timeout_s=1.0),
    Case("http-404", "http:// to a missing file", lambda m: f"{m.http}/nope.mp4", "404"),
    # -- registered, failing at ingest with the reason ---------------------------------------------
    Case("fifo-no-probe", "mkfifo, --no-probe (sat 'running' forever)", lambda m: m.file("pipe2.mp4", fifo),
         "a named pipe", probe=False),
    Case("missing-no-probe", "a missing path, --no-probe", lambda m: str(m.root / "gone.mp4"), "no such file",
         probe=False),
    Case("truncated-mp4", "MP4 with moov first (faststart) cut at 40%",
         lambda m: m.file("t-fs.mp4", lambda p: truncate(m.clip("mp4", options={"movflags": "+faststart"}), p, 0.4)),
         "of the 125 frames its header declares"),
    Case("truncated-real-mp4", "car-detection.mp4 cut at 400 KB", lambda m: m.file("t-car.mp4",
         lambda p: truncate(CAR, p, 400_000)), "of the 377 frames its header declares", {"fps": 2.0}),
    Case("truncated-mkv", "MKV cut at 30% (ended 'done')", lambda m: m.file("t.mkv",
         lambda p: truncate(m.clip("mkv"), p, 0.3)), "its video ends at"),
    Case("truncated-webm", "WebM (VP8) cut at 30%", lambda m: m.file("t.webm",
         lambda p: truncate(m.clip("webm"), p, 0.3)), "its video ends at"),
    Case("truncated-ts-mid-packet", "MPEG-TS cut at byte 188*100+77 (ended 'done')",
         lambda m: m.file("t.ts", lambda p: truncate(m.clip("ts"), p, 188 * 100 + 77)),
         "ends inside a container packet"),
    Case("truncated-ts-in-frame", "MPEG-TS cut at a TS packet boundary inside a keyframe",
         lambda m: m.ts_cut_inside_frame(), "is incomplete"),
    Case("truncated-avi", "AVI cut at 30%", lambda m: m.file("t.avi",
         lambda p: truncate(m.clip("avi"), p, 0.3)), "of the 125 frames its header declares"),
    Case("corrupt-no-skip", "car-detection.mp4, packet 87 noise, skip_corrupt=False (old behaviour)",
         lambda m: m.file("corrupt1.mp4", lambda p: corrupt_packets(CAR, p, [87])),
         "decoding failed after 87 frames", {"skip_corrupt": False, "fps": 1.0}),
    Case("corrupt-heavy", "car-detection.mp4, every 2nd packet from 100 on is noise",
         lambda m: m.file("corrupt-heavy.mp4", lambda p: corrupt_packets(CAR, p, list(range(100, 377, 2)))),
         "packets are corrupt (more than 10%)", {"fps": 1.0}),
    Case("http-mp4-index-at-end", "MP4 (moov at end, 228 KB) over HTTP without byte ranges (retried forever)",
         lambda m: f"{m.http}/{Path(m.car_cut()).name}", "byte ranges"),
    Case("http-404-no-probe", "http:// to a missing file, --no-probe", lambda m: f"{m.http}/gone.mp4",
         "gave up after 5 attempts without a frame", probe=False),
    Case("all-rejected", "1280x720 noise at quality 100 over a 50 KB bus limit (ended 'done', 0 published)",
         _synthetic("hud?fps=2&seconds=1&width=1280&height=720&noise=80"),
         "all 2 sampled frames were rejected as oversized", {"jpeg_quality": 100, "every_n": 1}),
    Case("stored-fps-inf", "a row with fps=inf written by an older version", lambda m: m.clip("mp4"),
         "not a finite number", stored={"fps": math.inf}),
    Case("stored-max-side-5", "a row with max_side=5 written by hand", lambda m: m.clip("mp4"), "max_side=5",
         stored={"max_side": 5}),
    # -- handled and counted -----------------------------------------------------------------------
    Case("corrupt-one-packet", "car-detection.mp4, packet 87 noise (ended at 87 of 377)",
         lambda m: m.file("corrupt1.mp4", lambda p: corrupt_packets(CAR, p, [87])),
         {"state": "done", "corrupt": 1, "decoded": 376}, {"every_n": 10}),
    # -- valid inputs ------------------------------------------------------------------------------
    Case("clip-mp4", "64x64 H.264 MP4, 125 frames", lambda m: m.clip("mp4"), 125, {"every_n": 1}, bad=False),
    Case("clip-mkv", "64x64 H.264 MKV, 125 frames", lambda m: m.clip("mkv"), 125, {"every_n": 1}, bad=False),
    Case("clip-ts", "64x64 H.264 MPEG-TS, 125 frames", lambda m: m.clip("ts"), 125, {"every_n": 1}, bad=False),
    Case("clip-avi", "64x64 H.264 AVI, 125 frames", lambda m: m.clip("avi"), 125, {"every_n": 1}, bad=False),
    Case("clip-webm", "64x64 VP8 WebM, 125 frames", lambda m: m.clip("webm"), 125, {"every_n": 1}, bad=False),
    Case("cut-car-edit-list", "car-detection.mp4 -ss 6 -t 5 -c copy (failed: '50 of 63')",
         lambda m: m.car_cut(), 63, {"every_n": 1, "max_side": 128}, bad=False),
    Case("cut-person-edit-list", "one-by-one-person-detection.mp4 -ss 3.3 -t 12.5 -c copy ('125 of 157')",
         lambda m: m.file("person-cut.mp4", lambda p: cut_copy(PERSON, p, 3.3, 12.5)), 125,
         {"every_n": 1, "max_side": 128}, bad=False),
    Case("real-car-2fps", "car-detection.mp4 at 2 fps", lambda m: CAR, 61, {"fps": 2.0}, bad=False),
    Case("real-person-every-50", "one-by-one-person-detection.mp4, every 50th frame", lambda m: PERSON, 28,
         {"every_n": 50}, bad=False),
    Case("real-car-keyframes", "car-detection.mp4 --keyframes", lambda m: CAR, 7, {"keyframes_only": True},
         bad=False),
    Case("real-car-keyframes-every-2", "car-detection.mp4 --keyframes --every-n 2", lambda m: CAR, 4,
         {"keyframes_only": True, "every_n": 2}, bad=False),
    Case("synthetic-hud", "synthetic://hud?fps=5&seconds=2", _synthetic("hud?fps=5&seconds=2"), 10,
         {"every_n": 1}, bad=False),
    Case("relative-path", "rel/clip.mp4 added in one directory, ingested from another",
         lambda m: (m.file("rel/clip.mp4", make_clip), "rel/clip.mp4")[1], 125, {"every_n": 1}, bad=False),
    Case("file-url-percent", "file:// URL of 'my clip.mp4' (space as %20)",
         lambda m: "file://" + quote(m.file("my clip.mp4", make_clip)), 125, {"every_n": 1}, bad=False),
    Case("http-mp4-faststart", "the car cut (moov first) over HTTP (replayed forever)",
         lambda m: f"{m.http}/{Path(m.car_cut(faststart=True)).name}", 63, {"every_n": 1, "max_side": 128},
         bad=False),
    Case("http-ts", "MPEG-TS over HTTP (no duration, a length)", lambda m: f"{m.http}/{Path(m.clip('ts')).name}", 125,
         {"every_n": 1}, bad=False),
    Case("http-mkv", "MKV over HTTP", lambda m: f"{m.http}/{Path(m.clip('mkv')).name}", 125, {"every_n": 1},
         bad=False),
    Case("hls-vod", "HLS with #EXT-X-ENDLIST over HTTP", lambda m: (hls(m.root / "vod", live=False),
         f"{m.http}/vod/index.m3u8")[1], 75, {"every_n": 1}, bad=False),
    Case("hls-live", "HLS without #EXT-X-ENDLIST over HTTP: stays live", lambda m: (hls(m.root / "live", live=True),
         f"{m.http}/live/index.m3u8")[1], "live", bad=False, live=True),
]


if FFMPEG:  # the issue's reproductions, with the real tool
    CASES += [
        Case("ffmpeg-cut-car", "ffmpeg -ss 6 -t 4 -i car-detection.mp4 -c copy (failed: '50 of 65')",
             lambda m: m.ffmpeg("ff-car.mp4", "-ss", "6", "-t", "4", "-i", CAR, "-c", "copy", "-an"), 50,
             {"every_n": 1, "max_side": 128}, bad=False),
        Case("ffmpeg-cut-person", "ffmpeg -ss 3.3 -t 12.5 -i one-by-one-person-detection.mp4 -c copy",
             lambda m: m.ffmpeg("ff-person.mp4", "-ss", "3.3", "-t", "12.5", "-i", PERSON, "-c", "copy", "-an"), 126,
             {"every_n": 1, "max_side": 128}, bad=False),
        Case("ffmpeg-truncated-mkv", "ffmpeg -t 10 -c copy to MKV, cut at 40% (ended 'done')",
             lambda m: m.file("ff-t.mkv", lambda p: truncate(
                 m.ffmpeg("ff-car.mkv", "-i", CAR, "-t", "10", "-c", "copy"), p, 0.4)), "its video ends at"),
        Case("ffmpeg-truncated-ts", "ffmpeg -t 10 -c copy to MPEG-TS, cut at 40% (ended 'done')",
             lambda m: m.file("ff-t.ts", lambda p: truncate(
                 m.ffmpeg("ff-car.ts", "-i", CAR, "-t", "10", "-c", "copy"), p, 0.4)),
             "ends inside a container packet"),
    ]


def _register(reg: StreamRegistry, case: Case, url: str) -> str | None:
    """Register like `vidnexus streams add` does; the refusal's message, or None."""
    opts = dict(case.spec)
    name = opts.pop("name", case.name)
    try:
        spec = StreamSpec(name, url, **opts)
        reg.add(spec, check=case.probe, timeout_s=case.timeout_s)
    except StreamError as e:
        return str(e)
    return None


def _store_row(reg: StreamRegistry, case: Case, url: str) -> None:
    row = {"name": case.name, "url": url, "fps": 1.0, "every_n": 0, "keyframes_only": 0, "apps": [], "tag_keys": [],
           "tag_values": [], "state": "enabled", "probe": "{}", "updated": __import__("datetime").datetime(2024, 1, 1),
           "version": 1, "jpeg_quality": 85, "max_side": 0, "realtime": 0, "stop_on_corrupt": 0, "until_s": 0.0, "speed": 0.0,
           "backfill": 0,
           **(case.stored or {})}
    names = STREAMS_TABLE.column_names
    reg.store.insert(STREAMS_TABLE.name, names, [tuple(row[c] for c in names)])


def test_bad_media_corpus(store, tmp_path, monkeypatch, record_property):
    t_start = time.perf_counter()
    media_dir, elsewhere = tmp_path / "media", tmp_path / "elsewhere"
    media_dir.mkdir()
    elsewhere.mkdir()
    reg = StreamRegistry(store)
    outcome: dict[str, str] = {}
    ok: dict[str, bool] = {}
    with http_server(media_dir) as base, silent_server() as port:
        m = Media(media_dir, base, port)
        monkeypatch.chdir(media_dir)  # where `streams add` runs
        for case in CASES:
            url = case.url(m)
            if case.stored is not None:
                _store_row(reg, case, url)
                continue
            t0 = time.perf_counter()
            refused = _register(reg, case, url)
            limit = case.timeout_s + 3 if 0 < case.timeout_s < 60 else 8  # nothing blocks: a FIFO used to hang
            assert time.perf_counter() - t0 < limit, case.name
            if refused is not None:
                outcome[case.name] = f"refused: {refused}"
                ok[case.name] = case.bad and isinstance(case.expect, str) and case.expect in refused
            elif case.live:
                kind = reg.get(case.name).probe.get("kind")
                outcome[case.name] = f"registered, kind {kind}"
                ok[case.name] = kind == case.expect
                reg.pause(case.name)

        # Everything registered is ingested together, from another directory, as `ingest --once`.
        monkeypatch.chdir(elsewhere)
        listed = {r.spec.name: r for r in reg.list()}  # never raises, whatever the rows hold
        assert {c.name for c in CASES if c.stored} <= {n for n, r in listed.items() if r.state == "invalid"}
        # The frames are read after the run, with no reader during it: a bus that keeps them all.
        bus = MemoryBus(max_message_bytes=BUS_LIMIT, retain_bytes=1 << 40)
        sup = IngestSupervisor(reg, bus, "f", poll_s=0.05, worker_factory=lambda spec, resume=None: StreamWorker(
            spec, bus, "f", backoff=Backoff(0.05, 0.2), open_timeout_s=5.0, resume=resume))
        runner = threading.Thread(target=sup.run, kwargs={"once": True}, daemon=True)
        runner.start()
        runner.join(timeout=120)
        running = [s for s in sup.statuses() if s.state != "done"]
        assert not runner.is_alive(), f"ingest --once did not return: {running}"

    statuses = {s.name: s for s in sup.statuses()}
    published: dict[str, list[int]] = {}
    for f in frames_of(bus):
        published.setdefault(f.stream_id, []).append(f.frame_no)
    for case in CASES:
        if case.name in outcome:
            continue
        st = statuses[case.name]
        outcome[case.name] = f"{st.state} ({st.published} published, {st.corrupt} corrupt): {st.reason}"
        if isinstance(case.expect, int):
            nos = published.get(case.name, [])  # frame numbers: source indices, strictly increasing
            ok[case.name] = (st.state == "done" and st.published == case.expect == len(nos)
                             and all(a < b for a, b in zip(nos, nos[1:])) and st.last_frame_no == nos[-1])
        elif isinstance(case.expect, dict):
            ok[case.name] = all(getattr(st, k) == v for k, v in case.expect.items())
        else:
            ok[case.name] = st.state == "failed" and case.expect in st.reason

    assert reg.status("corrupt-one-packet")["corrupt"] == 1  # the counter reaches stream_status
    assert reg.get("relative-path").spec.url == str(media_dir / "rel" / "clip.mp4")
    bad = [c for c in CASES if c.bad]
    valid = [c for c in CASES if not c.bad]
    isolated = sum(ok[c.name] for c in bad)
    valid_ok = sum(ok[c.name] for c in valid)
    print(f"\n{'case':32} {'ok':3} outcome")
    for case in CASES:
        print(f"{case.name:32} {'yes' if ok[case.name] else 'NO':3} {outcome[case.name][:150]}")
    print(f"isolated_with_reason / bad_inputs_tried = {isolated}/{len(bad)} = {isolated / len(bad):.0%}")
    print(f"valid_inputs_ok / valid_inputs_tried = {valid_ok}/{len(valid)} = {valid_ok / len(valid):.0%}")
    record_property("bad_inputs", {"isolated": isolated, "tried": len(bad), "valid_ok": valid_ok,
                                   "valid_tried": len(valid), "failing": [c.name for c in CASES if not ok[c.name]]})
    print(f"corpus time: {time.perf_counter() - t_start:.1f} s")
    wrong = {c.name: (c.expect, outcome[c.name]) for c in CASES if not ok[c.name] or "\n" in outcome[c.name]}
    assert not wrong
    assert isolated == len(bad) and valid_ok == len(valid)

