"""Ingest over the real broker with the registry in the real ClickHouse server."""

import os
import subprocess
import sys
import time
import uuid

import numpy as np

from tests.integration.conftest import kafka_bus_of
from vidnexus.contracts.frames import decode_frame

REAL = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data", "real"))


def vnx(env, *args, timeout=300):
    return subprocess.run([sys.executable, "-m", "vidnexus", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_register_and_ingest_real_and_synthetic_streams(kafka_bootstrap, clickhouse_url, tmp_path):
    prefix = f"ing{uuid.uuid4().hex[:8]}"
    db = f"vnx_{prefix}"
    from vidnexus.connectors.clickhouse_store import ClickHouseStore

    admin = ClickHouseStore(clickhouse_url)
    admin.execute(f"CREATE DATABASE IF NOT EXISTS {db}")
    env = dict(os.environ, VNX_BUS="kafka", VNX_STORE="clickhouse", VNX_KAFKA_BOOTSTRAP=kafka_bootstrap,
               VNX_CLICKHOUSE_URL=clickhouse_url.rsplit("/", 1)[0] + "/" + db, VNX_TOPIC_PREFIX=prefix)
    junk = tmp_path / "random.mp4"
    junk.write_bytes(np.random.default_rng(1).bytes(200_000))
    trunc = tmp_path / "truncated.mp4"
    trunc.write_bytes(open(os.path.join(REAL, "car-detection.mp4"), "rb").read()[:300_000])
    for args in (["car", os.path.join(REAL, "car-detection.mp4"), "--fps", "2", "--tag", "site=lot"],
                 ["room", os.path.join(REAL, "one-by-one-person-detection.mp4"), "--fps", "2"],
                 ["synth", "synthetic://hud?fps=10&seconds=6&seed=4", "--fps", "5", "--app", "hud"],
                 ["junk", str(junk), "--fps", "2", "--no-probe"],
                 ["trunc", str(trunc), "--fps", "2", "--no-probe"]):
        p = vnx(env, "streams", "add", *args, "--rate", "max")  # backfill: as fast as they decode
        assert p.returncode == 0, p.stderr
    bad = vnx(env, "streams", "add", "nofile", "/no/such.mp4", "--fps", "2")
    assert bad.returncode == 2 and "no such file" in bad.stderr
    bad = vnx(env, "streams", "add", "x", str(junk), "--fps", "2")
    assert bad.returncode == 2 and "random.mp4" in bad.stderr  # the probe refuses undecodable input
    p = vnx(env, "ingest", "--once", "--poll", "0.5", timeout=600)
    assert p.returncode == 1, p.stderr[-3000:]  # junk and trunc failed; the others completed

    bus = kafka_bus_of("confluent", kafka_bootstrap)
    c = bus.subscribe([f"{prefix}.frames"], group=f"g-{prefix}")
    frames, idle = [], time.monotonic()
    while time.monotonic() - idle < 5:
        batch = c.poll(timeout_s=0.5)
        if batch:
            idle = time.monotonic()
            frames += [decode_frame(m.value) for m in batch]
    c.close()
    bus.close()
    by = {}
    for f in frames:
        by.setdefault(f.stream_id, []).append(f)
    car = by["car"]
    assert 59 <= len(car) <= 61
    # A file's frame number is the frame's index in the source (12.5 frames/s sampled at 2/s).
    assert [f.frame_no for f in car] == sorted({f.frame_no for f in car})
    assert all(f.frame_no == round(f.pts * 12.5) for f in car)
    assert all(abs(f.pts - k / 2) < 0.08 for k, f in enumerate(car))
    assert car[0].tags["site"] == "lot"
    room = by["room"]
    assert len(room) in (278, 279, 280) and [f.frame_no for f in room] == list(range(0, 5 * len(room), 5))
    synth = by["synth"]  # 10 frames/s sampled at 5/s
    assert [f.frame_no for f in synth] == list(range(0, 60, 2)) and synth[0].tags["apps"] == "hud"
    assert "junk" not in by

    show = vnx(env, "streams", "show", "junk")
    assert "state=failed" in show.stdout and "random.mp4" in show.stdout
    show = vnx(env, "streams", "show", "trunc")
    assert "state=failed" in show.stdout and "truncated" in show.stdout
    show = vnx(env, "streams", "show", "car")
    assert "state=done" in show.stdout and "published=61" in show.stdout
    rows = admin.query(f"SELECT name, state FROM {db}.stream_status FINAL ORDER BY name").rows
    assert dict(rows)["synth"] == "done" and dict(rows)["junk"] == "failed"
    admin.execute(f"DROP DATABASE {db}")
    admin.close()
