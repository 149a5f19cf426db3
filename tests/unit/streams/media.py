"""Media for the stream tests, generated at test time with PyAV (no ffmpeg binary needed): small
clips in several containers, clips cut like ``ffmpeg -ss S -t T -c copy``, truncated and corrupted
copies, and local servers (HTTP without byte ranges, a TCP peer that never answers)."""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import socket
import threading
from pathlib import Path
from typing import Iterator

import av
import numpy as np

from vidnexus.contracts.frames import decode_frame

REAL = Path(__file__).resolve().parents[4] / "shared" / "data" / "real"
CAR = str(REAL / "car-detection.mp4")  # h264 768x432, 12.5 fps, 377 frames, a keyframe every 60
PERSON = str(REAL / "one-by-one-person-detection.mp4")  # h264 768x432, 10 fps, 1394 frames


def frames_of(bus, topic="f"):
    """Every frame published on ``topic`` of a MemoryBus, decoded."""
    c = bus.subscribe([topic], group=None)
    out = []
    while batch := c.poll(timeout_s=0.2):
        out += [decode_frame(m.value) for m in batch]
    return out


def make_clip(path: Path, *, fmt: str | None = None, codec: str = "libx264", frames: int = 125, fps: int = 25,
              size: int = 64, gop: int = 25, options: dict[str, str] | None = None, pix_fmt: str = "yuv420p") -> Path:
    """A ``frames``-frame clip of moving bars (deterministic)."""
    out = av.open(str(path), "w", format=fmt, options=options or {})
    s = out.add_stream(codec, rate=fps)
    s.width = s.height = size
    s.pix_fmt = pix_fmt
    s.codec_context.gop_size = gop
    rng = np.random.default_rng(0)
    for i in range(frames):
        img = rng.integers(0, 30, (size, size, 3), dtype=np.uint8)
        img[:, :, 0] += np.uint8((i * 7) % 200)
        img[(i * 3) % size, :, 1] = 255
        for p in s.encode(av.VideoFrame.from_ndarray(img, format="bgr24")):
            out.mux(p)
    for p in s.encode():
        out.mux(p)
    out.close()
    return path


def cut_copy(src: str | Path, dst: Path, start_s: float, seconds: float, options: dict[str, str] | None = None) -> Path:
    """What ``ffmpeg -ss start_s -t seconds -i src -c copy dst`` does: copy packets from the keyframe
    before ``start_s`` with timestamps shifted so that ``start_s`` is 0; the MP4 muxer writes an edit
    list, and the pre-roll before ``start_s`` is never shown."""
    i = av.open(str(src))
    s = i.streams.video[0]
    o = av.open(str(dst), "w", options=options or {})
    os_ = o.add_stream_from_template(s)
    start, end = int(start_s / s.time_base), int((start_s + seconds) / s.time_base)
    i.seek(start, stream=s, backward=True, any_frame=False)
    for p in i.demux(s):
        if p.dts is None or (p.pts is not None and p.pts >= end):
            if p.pts is not None and p.is_keyframe:
                break
            continue
        p.pts -= start
        p.dts -= start
        p.stream = os_
        o.mux(p)
    o.close()
    i.close()
    return dst


def truncate(src: str | Path, dst: Path, keep: float | int) -> Path:
    """The first ``keep`` bytes (an int) or fraction (a float) of ``src``."""
    data = Path(src).read_bytes()
    dst.write_bytes(data[: keep if isinstance(keep, int) else int(len(data) * keep)])
    return dst


def packets(path: str | Path) -> list[tuple[int, int, bool]]:
    """(byte position, size, keyframe) of every video packet."""
    c = av.open(str(path))
    out = [(p.pos, p.size, p.is_keyframe) for p in c.demux(c.streams.video[0]) if p.size]
    c.close()
    return out


def corrupt_packets(src: str | Path, dst: Path, which: list[int], seed: int = 1) -> Path:
    """``src`` with the payload of the given video packets replaced by noise (the 4-byte NAL length
    prefix kept, so the container still parses)."""
    data = bytearray(Path(src).read_bytes())
    rng = np.random.default_rng(seed)
    pk = packets(src)
    for k in which:
        pos, size, _ = pk[k]
        data[pos + 4: pos + size] = rng.bytes(size - 4)
    dst.write_bytes(bytes(data))
    return dst


def hls(directory: Path, *, live: bool) -> Path:
    """An HLS playlist of 1 s segments; ``live`` drops #EXT-X-ENDLIST (a live playlist still growing)."""
    directory.mkdir(parents=True, exist_ok=True)
    m3u8 = directory / "index.m3u8"
    make_clip(m3u8, fmt="hls", frames=75, options={"hls_time": "1", "hls_list_size": "0",
                                                    "hls_playlist_type": "vod"})
    if live:
        m3u8.write_text(m3u8.read_text().replace("#EXT-X-ENDLIST\n", "").replace("#EXT-X-PLAYLIST-TYPE:VOD\n", ""))
    return m3u8


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def http_server(directory: Path) -> Iterator[str]:
    """Serve ``directory`` over HTTP (Python's server: no byte ranges); yields the base URL."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(directory)))
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


@contextlib.contextmanager
def silent_server() -> Iterator[int]:
    """A TCP port that accepts connections and never says a word; yields the port."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        s.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(s.accept()[0])
            except OSError:
                continue

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        yield s.getsockname()[1]
    finally:
        stop.set()
        t.join()
        for c in held:
            c.close()
        s.close()


def fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path
