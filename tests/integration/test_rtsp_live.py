"""Live RTSP ingest: a loopback RTSP server streams a real video; it is killed and restarted;
ingest reconnects with backoff and continues, and the outage shows in the stream's metrics."""

import os
import subprocess
import threading
import time
import uuid

import pytest

from vidnexus.contracts.frames import decode_frame
from vidnexus.streams.ingest import Backoff, StreamSpec, StreamWorker

from tests.role_process import free_port

HERE = os.path.dirname(__file__)
VIDEO = os.path.abspath(os.path.join(HERE, "..", "..", "..", "shared", "data", "real", "car-detection.mp4"))
SYSTEM_PYTHON = "/usr/bin/python3"


def start_server(port: int) -> subprocess.Popen:
    p = subprocess.Popen([SYSTEM_PYTHON, os.path.join(HERE, "tools", "rtsp_server.py"), VIDEO, str(port)],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    line = p.stdout.readline()
    if "serving" not in line:
        p.kill()
        pytest.fail(f"the RTSP test server did not start (make test installs python3-gi and GStreamer's "
                    f"RTSP server): {line}{p.stdout.read() if p.poll() is not None else ''}")
    return p


def wait_for(cond, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what}")


def test_rtsp_reconnects_after_the_server_restarts(kafka_bus):
    port = free_port()
    topic = f"vnx-rtsp-{uuid.uuid4().hex[:8]}"
    kafka_bus.create_topic(topic, 2)
    server = start_server(port)
    w = StreamWorker(StreamSpec("live-cam", f"rtsp://127.0.0.1:{port}/live", fps=2.0), kafka_bus, topic,
                     backoff=Backoff(initial_s=0.2, max_s=1.0), open_timeout_s=3.0)
    t = threading.Thread(target=w.run, daemon=True)
    t.start()
    try:
        wait_for(lambda: w.status.published >= 6, 60, "frames from the live source")
        before = w.status.published
        server.kill()
        server.wait()
        outage_start = time.monotonic()
        wait_for(lambda: w.status.state == "reconnecting" and w.status.reconnects >= 1, 30, "a reconnect attempt")
        time.sleep(2.0)
        server = start_server(port)
        wait_for(lambda: w.status.published >= before + 6, 60, "frames after the server came back")
        outage = time.monotonic() - outage_start
        assert w.status.reconnects >= 1
        assert w.status.max_gap_s >= 2.0 and w.status.max_gap_s <= outage + 10
        assert "rtsp://127.0.0.1" in w.status.reason  # why it reconnected is kept
    finally:
        w.stop.set()
        t.join(timeout=20)
        server.kill()
    assert w.status.state == "stopped"
    kafka_bus.flush()
    c = kafka_bus.subscribe([topic], group=None)
    frames, idle = [], time.monotonic()
    while time.monotonic() - idle < 3:
        batch = c.poll(timeout_s=0.5)
        if batch:
            idle = time.monotonic()
            frames += [decode_frame(m.value) for m in batch]
    c.close()
    # every published frame arrived, in order, numbered by capture time in µs (never reused after a restart)
    assert len(frames) == w.status.published and frames[-1].frame_no == w.status.last_frame_no
    assert all(b.frame_no > a.frame_no for a, b in zip(frames, frames[1:]))
    assert all(abs(f.frame_no / 1e6 - f.capture_ts) < 1.0 for f in frames)
    assert all(b.pts > a.pts for a, b in zip(frames, frames[1:]))  # wall-clock sampling continues
