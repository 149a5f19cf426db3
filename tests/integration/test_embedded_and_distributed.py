"""One pipeline, two deployments: a user's app in a file outside the package (tests/integration/apps)
runs embedded with `vidnexus run` — every role in one process over the in-memory bus and chdb — on
synthetic streams and a real video file, and distributed, unchanged, as separate role processes
over the real broker and ClickHouse server; both write the same rows. Embedded mode also plans
(the scheduler role) and applies the app's latency split."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_operators_kafka import start, stop, wait_count
from vidnexus.connectors.chdb_store import ChdbStore
from vidnexus.connectors.clickhouse_store import ClickHouseStore
from vidnexus.roles.console import Tokens

ROOT = Path(__file__).resolve().parents[2]
APP_REF = "tests.integration.apps.hud_patient:app"
COMPARED = "stream, frame_no, row_idx, pts, score_read, kills_read, score_truth, kills_truth, digits"
REAL = ROOT.parent / "shared" / "data" / "real" / "car-detection.mp4"


def _streams(tag: str) -> list[str]:
    return [f"{tag}-cam0=synthetic://hud?seed=100&fps=10&seconds=4",
            f"{tag}-cam1=synthetic://hud?seed=101&fps=10&seconds=4",
            f"{tag}-lot={REAL}"]


@pytest.fixture(scope="module")
def trained_reader():
    from vidnexus.config import Settings
    from vidnexus.training.digits import load_or_train

    load_or_train(Settings().data_dir / "models")


@pytest.mark.timeout(600)
def test_a_user_app_writes_the_same_rows_embedded_and_distributed(kafka_bootstrap, clickhouse_url, tmp_path,
                                                                   trained_reader):
    assert REAL.exists(), REAL
    tag = f"e{uuid.uuid4().hex[:6]}"
    streams = _streams(tag)
    data = Path(os.environ.get("VNX_DATA_DIR", ".vnx/data")).resolve()
    base = dict(os.environ, PYTHONPATH=str(ROOT), VNX_DATA_DIR=str(data))

    # Embedded: `vidnexus run`, its own chdb store (a data directory with the models and a store of its own).
    emb_data = tmp_path / "embedded"
    emb_data.mkdir()
    (emb_data / "models").symlink_to(data / "models", target_is_directory=True)
    if (data / "profiles").exists():
        (emb_data / "profiles").symlink_to(data / "profiles", target_is_directory=True)
    args = [sys.executable, "-m", "vidnexus", "run", APP_REF, "--fps", "5", "--until", "3"]
    # One stream is a backfill (re-processing stored video): its frames take the backfill topic and
    # worker and carry no deadline; its rows are the same.
    def backfill(s: str) -> bool:
        return s.startswith(f"{tag}-cam1=")

    for s in streams:
        args += ["--backfill" if backfill(s) else "--stream", s]
    # Frames go over Kafka as JPEG and, by default, uncompressed on the in-memory bus: the same app reads
    # slightly different pixels of the real video (a digit can flip). Same bytes, same rows: JPEG here too.
    p = subprocess.run(args, env=dict(base, VNX_BUS="memory", VNX_STORE="chdb", VNX_DATA_DIR=str(emb_data),
                                      VNX_FRAME_ENCODING="jpeg"),
                       capture_output=True, text=True, timeout=400, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "accounted in vnx_frames" in p.stdout, p.stdout
    emb = ChdbStore(emb_data / "chdb")
    try:
        where = f"stream LIKE '{tag}-%'"
        emb_frames = emb.query(f"SELECT count() FROM vnx_frames FINAL WHERE app = 'hud_patient' AND {where}").scalar()
        emb_rows = emb.query(f"SELECT {COMPARED} FROM hud_patient_reads FINAL WHERE {where} "
                             "ORDER BY stream, frame_no, row_idx").rows
    finally:
        emb.close()
    assert emb_frames == len(emb_rows) > 40  # 2 × 20 synthetic frames and the video's first 3 s at 5 fps
    assert {r[0] for r in emb_rows} == {f"{tag}-cam0", f"{tag}-cam1", f"{tag}-lot"}

    # Distributed: the same app, unchanged, as role processes over Kafka and the ClickHouse server
    # (a database of its own: ingest --once runs every stream of its registry).
    prefix = f"dist{uuid.uuid4().hex[:8]}"
    admin = ClickHouseStore(clickhouse_url)
    admin.execute(f"CREATE DATABASE IF NOT EXISTS {prefix}")
    admin.close()
    url = clickhouse_url.rsplit("/", 1)[0] + f"/{prefix}"
    env = dict(base, VNX_BUS="kafka", VNX_STORE="clickhouse", VNX_KAFKA_BOOTSTRAP=kafka_bootstrap,
               VNX_CLICKHOUSE_URL=url, VNX_TOPIC_PREFIX=prefix)
    log: list[str] = []
    procs = []
    store = ClickHouseStore(url)
    try:
        procs.append(start(env, "executor", "-s", "hud_digits:600000", "--threads", "1",
                           ready="executor: serving", log=log))
        procs.append(start(env, "sink", "--max-delay", "0.3", ready="sink:", log=log))
        procs.append(start(env, "worker", APP_REF, ready="started", log=log))
        procs.append(start(env, "worker", APP_REF, "--backfill", ready="started", log=log))
        for s in streams:
            name, url = s.split("=", 1)
            subprocess.run([sys.executable, "-m", "vidnexus", "streams", "add", name, url, "--fps", "5",
                            "--until", "3", "--rate", "max", "--app", APP_REF,
                            "--mode", "backfill" if backfill(s) else "live"],
                           env=env, check=True, capture_output=True, timeout=60)
        ingest = subprocess.run([sys.executable, "-m", "vidnexus", "ingest", "--once", "--poll", "0.5"], env=env,
                                capture_output=True, text=True, timeout=300)
        assert ingest.returncode == 0, ingest.stderr[-2000:]
        where = f"stream LIKE '{tag}-%'"
        wait_count(store, f"SELECT count() FROM vnx_frames FINAL WHERE app = 'hud_patient' AND {where}",
                   emb_frames, 240, log)
        wait_count(store, f"SELECT count() FROM hud_patient_reads FINAL WHERE {where}", len(emb_rows), 60, log)
        dist_rows = store.query(f"SELECT {COMPARED} FROM hud_patient_reads FINAL WHERE {where} "
                                "ORDER BY stream, frame_no, row_idx").rows
    finally:
        for q in procs:
            stop(q)
        store.execute(f"DROP DATABASE IF EXISTS {prefix}")
        store.close()
    assert dist_rows == emb_rows


@pytest.mark.timeout(600)
def test_embedded_mode_plans_and_applies_the_latency_split(tmp_path, trained_reader):
    """The two-stage app (a frame classifier, then the digit reader on 6 cells per frame) in one
    process: the scheduler role splits its 1 s SLO from the fan-out the worker measures (γ = 6), the
    executor hosts the split's sessions and the worker moves its requests to them."""
    from vidnexus.apps import load_app
    from vidnexus.config import Settings
    from vidnexus.roles.embedded import Embedded
    from vidnexus.streams.spec import StreamSpec

    data = Path(os.environ.get("VNX_DATA_DIR", ".vnx/data")).resolve()
    emb_data = tmp_path / "data"
    emb_data.mkdir()
    (emb_data / "models").symlink_to(data / "models", target_is_directory=True)
    settings = Settings(bus="memory", store="chdb", data_dir=emb_data, topic_prefix="split")
    app = load_app("tests.integration.apps.two_stage:app")
    # 30 s of a live-paced camera at 8 frames/s: long enough for a few epochs.
    stream = StreamSpec("cam", "synthetic://hud?seed=7&fps=8&seconds=30", fps=8, realtime=True)
    adopted = threading.Event()
    tokens = Tokens("read-token-0123456789", "admin-token-0123456789")
    run = Embedded(settings, app, streams=[stream], console=("127.0.0.1", 0, tokens))
    seen: dict[str, Any] = {}  # what the console's API answered while the run went on
    try:
        def watch(done: int, published: int, ingesting: bool) -> None:
            plan = run.plans[-1] if run.plans else None
            if plan is not None and plan.split_to_adopt("two_stage") == run.worker.backend.slos:
                adopted.set()
            if plan is not None and "two_stage" in plan.splits and plan.splits["two_stage"].ok and not seen:
                try:
                    seen["epoch"] = plan.epoch
                    seen["plan"] = api_get(run.console.url, "/plan", tokens.read)
                    seen["app"] = api_get(run.console.url, "/apps/two_stage", tokens.read)
                    seen["streams"] = api_get(run.console.url, "/streams", tokens.read)
                    seen["sessions"] = api_get(run.console.url, "/sessions", tokens.read)
                except Exception as e:  # failed below, not inside the run
                    seen["error"] = repr(e)

        result = run.run(progress=watch, timeout_s=240)
    finally:
        run.close()
    splits = [p.splits["two_stage"] for p in result.plans if "two_stage" in p.splits]
    ok = [sp for sp in splits if sp.ok]
    assert ok, [sp.reason for sp in splits]
    sp = ok[-1]
    assert 5.0 <= sp.gamma["mobilenet_v3_small->hud_digits"] <= 7.0
    assert sum(sp.budgets_ms.values()) <= 1000
    assert adopted.is_set() and result.stage_slos_ms == sp.budgets_ms, (result.stage_slos_ms, sp)
    split_sessions = {f"{m}-{b:g}ms" for m, b in sp.budgets_ms.items()}
    served = {s["session"]: s["arrivals"] for s in result.executor_stats}
    assert all(served.get(s, 0) > 0 for s in split_sessions), served  # requests went to the split's sessions
    assert result.accounted == result.published > 100  # every frame a row or an accounted drop
    # The console served this run's plans, app and stream while it ran (`vidnexus run --console-port`).
    assert seen, "no plan with a split came while the run went on"
    assert "error" not in seen, seen["error"]
    assert {x["executor"] for x in seen["sessions"]["executors"]} == {"embedded"}
    assert seen["plan"]["epoch"] >= seen["epoch"] and "two_stage" in seen["plan"]["splits"]
    assert seen["app"]["models"] == ["mobilenet_v3_small", "hud_digits"] and seen["app"]["split"]["ok"]
    assert [s["name"] for s in seen["streams"]] == ["cam"] and seen["streams"][0]["apps"] == ["two_stage"]


def api_get(url: str, path: str, token: str) -> Any:
    import json
    import urllib.request

    req = urllib.request.Request(f"{url}/api/v1{path}", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


@pytest.mark.timeout(300)
def test_embedded_without_ingest_processes_the_frames_a_caller_publishes(tmp_path, trained_reader):
    """`Embedded(ingest=False)` (what `vidnexus bench apps` runs): no stream registered, no ingest;
    frames published on its bus's frames topic get their rows until it is stopped."""
    from vidnexus.apps import load_app
    from vidnexus.benchmarks.app_deployment import Deployment, Until, feed, frames_done, render
    from vidnexus.config import Settings
    from vidnexus.roles.embedded import Embedded
    from vidnexus.streams.sources import open_source

    data = Path(os.environ.get("VNX_DATA_DIR", ".vnx/data")).resolve()
    emb_data = tmp_path / "data"
    emb_data.mkdir()
    (emb_data / "models").symlink_to(data / "models", target_is_directory=True)
    app = load_app("hud")
    run = Embedded(Settings(bus="memory", store="chdb", data_dir=emb_data, topic_prefix="noingest"), app,
                   streams=[], ingest=False)
    done: list = []
    t = threading.Thread(target=lambda: done.append(run.run(until_done=True)), daemon=True)
    t.start()
    try:
        frames = render([("fed-cam", Until(open_source("synthetic://hud?seed=3&fps=10&seconds=3"), None))], 5.0, "hud")
        d = Deployment(run.settings, {}, run.bus, run.store, {})
        feed(d, frames).join()
        for _ in range(120):
            if frames_done(d, app.name, "stream = 'fed-cam'") >= len(frames):
                break
            threading.Event().wait(0.5)
        assert t.is_alive()  # without ingest it runs until stopped, even with until_done
        assert frames_done(d, app.name, "stream = 'fed-cam'") == len(frames) > 10
    finally:
        run.stop()
        t.join(60)
        run.close()
    assert done and done[0].processed == len(frames) and done[0].published == 0
