"""The console's HTTP API over a real uvicorn server and the embedded store: every endpoint, the two
tokens, auth failures, validation errors that name the field, and the committed OpenAPI document."""

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from vidnexus.clock import wall_time
from vidnexus.connectors.chdb_store import ChdbStore
from vidnexus.connectors.memory_bus import MemoryBus
from vidnexus.contracts.plans import EpochPlan, LatencySplit, encode_plan
from vidnexus.contracts.reports import AppReport, FanOut, encode_report
from vidnexus.contracts.stats import ExecutorStats, SessionStats, encode_stats
from vidnexus.contracts.topics import Topics
from vidnexus.roles.console import API_PREFIX, ConsoleServer, ControlWatcher, Tokens, openapi_document

READ, ADMIN = "read-token-0123456789", "admin-token-0123456789"
ROOT = Path(__file__).resolve().parents[3]


class Repo:
    """A model repository with one registered model and its profile beside it (the data dir layout)."""

    def __init__(self, data: Path) -> None:
        from vidnexus.apps import model_catalog
        from vidnexus.contracts.profile import Profile
        from vidnexus.gpu_executor.repository import ModelRepository, ModelSpec

        self.repo = ModelRepository(data / "models", extra=model_catalog())
        self.repo.register(ModelSpec("mine", "zoo:mobilenet_v3_small", (3, 64, 64), description="test model"))
        (data / "profiles").mkdir(parents=True, exist_ok=True)
        (data / "profiles" / "mine@cpu-test.json").write_text(json.dumps(Profile.linear(0.002, 0.001, 4).to_dict()))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    data = tmp_path_factory.mktemp("console")
    store = ChdbStore(data / "chdb")
    repo = Repo(data).repo
    bus, topics = MemoryBus(), Topics("console")
    srv = ConsoleServer(store, Tokens(READ, ADMIN), "127.0.0.1", 0, control=ControlWatcher(bus, topics),
                        repository=lambda: repo, close_control=True).start()
    srv.bus, srv.topics = bus, topics
    yield srv
    srv.stop()
    store.close()


def publish_control(srv):
    """A plan, an executor's stats and a worker's app report, as the scheduler, executor and worker
    publish them."""
    split = LatencySplit(True, "", {"car_colours": 120.0}, {"car_colours": 100.0}, {"car_colours": 1.0}, 1.2,
                         {"car_colours": 10.0})
    for epoch in (6, 7):
        srv.bus.publish(srv.topics.control, b"plan", encode_plan(EpochPlan(
            1, epoch, 0.0, assignments={"ex1": {"mine-50ms": 4}}, devices=1, executors=("ex1",),
            splits={"traffic": split})))
    srv.bus.publish(srv.topics.control, b"plan", b"{not a plan")
    sess = SessionStats("mine-50ms", "mine", 50.0, arrivals=200, replies=198, within_slo=190,
                        drops={"early_drop": 2}, mean_batch=3.5, rate_recent=40.0, latency_p50_ms=12.0,
                        latency_p99_ms=float("nan"), device_busy_fraction=0.5)
    srv.bus.publish(srv.topics.stats, b"ex1", encode_stats(ExecutorStats("ex1", "cpu", wall_time(), {"mine-50ms": 3},
                                                                         ("mine-50ms",), {}, (sess,), 5.0)))
    fo = FanOut(frames=10, calls={"car_colours": 30}, ok={"car_colours": 30}, edges={("frames", "car_colours"): 30})
    srv.bus.publish(srv.topics.apps, b"traffic/w1",
                    encode_report(AppReport("traffic", "w1", 400.0, ("car_colours",), (("frames", "car_colours"),), fo)))


def call(srv, method, path, body=None, token=READ):
    req = urllib.request.Request(srv.url + API_PREFIX + path, method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json",
                                          **({"Authorization": f"Bearer {token}"} if token else {})})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        body = e.read()
        try:
            return e.code, json.loads(body)
        except ValueError:
            return e.code, body.decode(errors="replace")


def test_health_needs_no_token(server):
    assert call(server, "GET", "/health", token=None) == (200, {"ok": True})


@pytest.mark.parametrize("token", [None, "wrong-token-0123456789", READ[:-1]])
def test_reads_need_a_right_token(server, token):
    code, doc = call(server, "GET", "/streams", token=token)
    assert code == 401 and "token" in doc["detail"]


def test_changes_need_the_admin_token(server):
    code, doc = call(server, "POST", "/streams", {"name": "cam", "url": "synthetic://hud?fps=5&seconds=1"})
    assert code == 403 and "admin token" in doc["detail"]
    assert call(server, "GET", "/streams/cam")[0] == 404  # nothing was registered
    assert call(server, "POST", "/streams", {"name": "cam0", "url": "synthetic://hud?fps=5&seconds=1"}, ADMIN)[0] == 201
    for method, path in [("POST", "/streams/cam0/pause"), ("POST", "/streams/cam0/resume"), ("DELETE", "/streams/cam0")]:
        assert call(server, method, path)[0] == 403
    assert call(server, "GET", "/streams/cam0")[1]["state"] == "enabled"
    assert call(server, "DELETE", "/streams/cam0", token=ADMIN)[0] == 200


def test_wrong_tokens_back_off_per_address(server):
    srv = ConsoleServer(server.api.state.store, Tokens(READ, ADMIN), "127.0.0.1", 0).start()  # its own back-off
    try:
        codes = [call(srv, "GET", "/streams", token="wrong-token-0123456789")[0] for _ in range(6)]
        assert codes == [401] * 6  # five free failures, the sixth starts a 1 s wait
        code, doc = call(srv, "GET", "/streams")  # even the right token waits now
        assert code == 429 and "retry in" in doc["detail"]
        assert repr(Tokens(READ, ADMIN)).count("token-0123456789") == 0  # never in a repr or a traceback
    finally:
        srv.stop()


def test_stream_lifecycle(server):
    code, doc = call(server, "POST", "/streams", {"name": "cam1", "url": "synthetic://hud?fps=5&seconds=1",
                                                  "every_n": 2, "apps": ["hud"], "tags": {"site": "a"}}, ADMIN)
    assert code == 201, doc
    assert doc["name"] == "cam1" and doc["state"] == "enabled" and doc["apps"] == ["hud"] and doc["every_n"] == 2
    assert (doc["mode"], doc["rate"]) == ("live", "realtime")
    code, old = call(server, "POST", "/streams", {"name": "old1", "url": "synthetic://hud?fps=5&seconds=1",
                                                  "mode": "backfill"}, ADMIN)
    assert code == 201 and (old["mode"], old["rate"]) == ("backfill", "max"), old  # a backfill reads at max
    assert call(server, "DELETE", "/streams/old1", token=ADMIN)[0] == 200
    code, listed = call(server, "GET", "/streams")
    assert code == 200 and [s["name"] for s in listed] == ["cam1"] and listed[0]["tags"] == {"site": "a"}
    assert call(server, "POST", "/streams", {"name": "cam1", "url": "synthetic://hud?fps=5&seconds=1"},
                ADMIN)[0] == 409
    assert call(server, "POST", "/streams/cam1/pause", token=ADMIN)[1]["state"] == "paused"
    assert call(server, "GET", "/streams/cam1")[1]["state"] == "paused"
    # Lines and zones are tags, replaced as a whole; the state and the rest stay.
    geometry = {"line.gate": "0,10,100,10", "zone.bay": "0,0,50,0,50,50"}
    assert call(server, "PUT", "/streams/cam1/tags", {"tags": geometry}) [0] == 403
    code, doc = call(server, "PUT", "/streams/cam1/tags", {"tags": geometry}, ADMIN)
    assert code == 200 and doc["tags"] == geometry and doc["state"] == "paused" and doc["every_n"] == 2
    code, doc = call(server, "PUT", "/streams/cam1/tags", {"tags": {"zone.bay": "0,0,50,0"}}, ADMIN)
    assert code == 422 and doc["detail"][0]["loc"] == ["body", "tags"] and "zone.bay" in doc["detail"][0]["msg"]
    assert call(server, "GET", "/streams/cam1")[1]["tags"] == geometry  # a refused change changes nothing
    assert call(server, "PUT", "/streams/nope/tags", {"tags": {}}, ADMIN)[0] == 404
    assert call(server, "POST", "/streams/cam1/resume", token=ADMIN)[1]["state"] == "enabled"
    assert call(server, "DELETE", "/streams/cam1", token=ADMIN)[1]["state"] == "removed"
    assert call(server, "GET", "/streams")[1] == []
    assert "cam1" in [s["name"] for s in call(server, "GET", "/streams?all=true")[1]]
    for method, path in [("GET", "/streams/nope"), ("POST", "/streams/nope/pause"), ("DELETE", "/streams/nope")]:
        assert call(server, method, path, token=ADMIN)[0] == 404


@pytest.mark.parametrize("body, field", [
    ({"name": "bad name!", "url": "synthetic://hud"}, "name"),
    ({"name": "c", "url": "synthetic://hud", "fps": 0}, "fps"),
    ({"name": "c", "url": "synthetic://hud", "quality": 101}, "quality"),
    ({"name": "c", "url": "synthetic://hud", "rate": "fast"}, "rate"),
    ({"name": "c", "url": "synthetic://hud", "mode": "later"}, "mode"),
    ({"name": "c", "url": "synthetic://hud", "apps": ["no_such_app"]}, "apps"),
    ({"name": "c", "url": "synthetic://hud", "tags": {"line.a": "1,2,3"}}, "tags"),
    ({"name": "c", "url": "synthetic://hud", "colour": "red"}, "colour"),
    ({"url": "synthetic://hud"}, "name"),
    ({"name": "c", "url": "synthetic://hud", "until": 0}, "until"),
    ({"name": "c", "url": "synthetic://hud", "apps": ["os:path"]}, "apps"),  # no imports over HTTP
])
def test_validation_errors_name_the_field(server, body, field):
    code, doc = call(server, "POST", "/streams", body, ADMIN)
    assert code == 422, doc
    assert any(field in d["loc"] for d in doc["detail"]), doc


def test_a_source_that_does_not_probe_is_refused(server, tmp_path):
    code, doc = call(server, "POST", "/streams", {"name": "gone", "url": str(tmp_path / "missing.mp4")}, ADMIN)
    assert code == 422 and doc["detail"][0]["loc"] == ["body", "url"] and "missing.mp4" in doc["detail"][0]["msg"]
    assert call(server, "GET", "/streams/gone")[0] == 404
    code, doc = call(server, "POST", "/streams", {"name": "both", "url": "synthetic://hud", "fps": 2, "every_n": 3},
                     ADMIN)
    assert code == 422 and doc["detail"][0]["loc"] == ["body"], doc  # the registry's own checks, in the same shape


def test_a_camera_password_is_not_shown(server):
    code, doc = call(server, "POST", "/streams", {"name": "ipcam", "url": "rtsp://cam:s3cret@10.0.0.5:554/live",
                                                  "probe": False}, ADMIN)
    assert code == 201 and doc["url"] == "rtsp://cam:***@10.0.0.5:554/live"
    assert "s3cret" not in json.dumps(call(server, "GET", "/streams")[1])
    call(server, "DELETE", "/streams/ipcam", token=ADMIN)


def test_a_body_past_the_limit_is_refused(server):
    code, _ = call(server, "POST", "/sql", {"query": "SELECT 1 -- " + "x" * 300_000})
    assert code == 413


def test_apps(server):
    publish_control(server)
    code, apps = call(server, "GET", "/apps")
    assert code == 200 and {"hud", "game", "traffic", "dance"} <= {a["name"] for a in apps}
    code, t = call(server, "GET", "/apps/traffic")
    assert code == 200 and t["slo_ms"] > 0 and "car_colours" in t["models"] and ["frames", "car_colours"] in t["edges"]
    assert "traffic_objects" in t["tables"] and t["even_split_ms"]["car_colours"] > 0
    assert t["split"]["budgets_ms"] == {"car_colours": 120.0} and t["split"]["epoch"] == 7
    assert t["fanout"] == {"workers": 1, "frames": 10, "edges": [
        {"parent": "frames", "child": "car_colours", "requests": 30, "gamma": 3.0}]}
    assert call(server, "GET", "/apps/nope")[0] == 404


def test_models(server):
    code, models = call(server, "GET", "/models")
    names = {m["name"] for m in models}
    assert code == 200 and {"mine", "hud_digits", "resnet18"} <= names
    code, m = call(server, "GET", "/models/mine")
    assert code == 200 and m["input_shape"] == [3, 64, 64] and m["description"] == "test model"
    (prof,) = m["profiles"]
    assert prof["key"] == "cpu-test" and prof["batches"] == [1, 2, 3, 4]
    assert prof["fit_ms"] == {"per_item": pytest.approx(2.0), "fixed": pytest.approx(1.0)}
    assert call(server, "GET", "/models/nope")[0] == 404


def test_plan_and_sessions(server):
    publish_control(server)
    code, p = call(server, "GET", "/plan")
    assert code == 200 and p["epoch"] == 7 and p["assignments"] == {"ex1": {"mine-50ms": 4}} and p["devices"] == 1
    assert server.api.state.control.malformed >= 1  # the broken document was skipped
    code, s = call(server, "GET", "/sessions")
    assert code == 200 and (s["epoch"], s["devices"]) == (7, 1)
    (ex,) = s["executors"]
    assert ex["executor"] == "ex1" and ex["serving"] == ["mine-50ms"] and ex["age_s"] < 60
    (sess,) = ex["sessions"]
    assert sess["batch"] == 3 and sess["planned_batch"] == 4 and sess["within_slo"] == 0.95
    assert sess["drops"] == {"early_drop": 2} and sess["latency_p50_ms"] == 12.0 and sess["latency_p99_ms"] is None


def test_drops_by_reason(server):
    from vidnexus.clock import wall_time
    from vidnexus.operators.engine import FRAMES_TABLE

    store = server.api.state.store
    store.create_table(FRAMES_TABLE)
    now = wall_time()
    cols = ["app", "stream", "frame_no", "status", "reasons", "rows", "drops", "latency_ms", "ingest_ts", "version"]
    store.insert(FRAMES_TABLE.name, cols, [
        ("hud", "s", 1, "ok", "", 1, 0, 5.0, now, 1),
        ("hud", "s", 2, "dropped", "early_drop:2,deadline:1", 0, 3, 5.0, now, 1),
        ("hud", "s", 3, "dropped", "late:1", 0, 1, 5.0, now, 1),
        ("hud", "s", 5, "partial", "flood:map[0]:40", 1, 40, 5.0, now, 1),
        ("hud", "s", 3, "ok", "", 1, 0, 5.0, now, 2),  # frame 3 replayed and answered: the newest row wins
        ("hud", "s", 4, "dropped", "deadline:1", 0, 1, 5.0, now - 3600, 1),  # an hour ago
    ])
    code, d = call(server, "GET", "/drops?minutes=10")
    assert code == 200 and d["apps"] == {"hud": {"frames": {"ok": 2, "dropped": 1, "partial": 1},
                                                 "drops": {"early_drop": 2, "deadline": 1, "flood:map[0]": 40}}}
    assert call(server, "GET", "/drops?minutes=0")[0] == 422


def test_sql_is_read_only(server):
    code, r = call(server, "POST", "/sql", {"query": "SELECT 1 + 1 AS two"})
    assert code == 200 and r["columns"] == ["two"] and r["rows"] == [[2]]
    code, r = call(server, "POST", "/sql", {"query": "DROP TABLE vnx_frames"}, ADMIN)
    assert code == 403
    code, r = call(server, "POST", "/sql", {"query": "SELECT no_such_column_xyz"})
    assert code == 400 and "no_such_column_xyz" in r["error"]


def test_tokens_are_checked():
    with pytest.raises(Exception, match="at least 16"):
        Tokens("short", ADMIN)
    with pytest.raises(Exception, match="must differ"):
        Tokens(ADMIN, ADMIN)


def test_the_committed_openapi_document_is_current(server):
    served = call(server, "GET", "/openapi.json", token=None)[1]
    assert served == openapi_document()
    committed = json.loads((ROOT / "docs" / "openapi.json").read_text())
    assert committed == served, "docs/openapi.json is stale: python -m vidnexus.roles.console > docs/openapi.json"
    assert {"/api/v1/streams", "/api/v1/streams/{name}/pause", "/api/v1/sql", "/api/v1/plan",
                                "/api/v1/sessions"} <= set(served["paths"])


def test_vidnexus_console_serves_until_sigterm(tmp_path):
    import os
    import re
    import signal
    import subprocess
    import sys
    import threading
    import time

    env = {k: v for k, v in os.environ.items() if not k.startswith("VNX_")}
    env.update(VNX_DATA_DIR=str(tmp_path / "data"), VNX_WORK_DIR=str(tmp_path), VNX_BUS="memory")
    p = subprocess.Popen([sys.executable, "-m", "vidnexus", "console", "--port", "0"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(p.stderr), daemon=True)
        reader.start()
        deadline = time.monotonic() + 120
        while not (m := re.search(r"console: (http://\S+)/ \(API: ", "".join(lines))):
            assert p.poll() is None and time.monotonic() < deadline, "".join(lines)
            time.sleep(0.1)
        assert any("generated a token" in x for x in lines)  # said, never printed
        read = (tmp_path / "data" / "console-token").read_text().strip()
        admin = (tmp_path / "data" / "console-admin-token").read_text().strip()
        assert read not in "".join(lines) and admin not in "".join(lines)
        assert oct((tmp_path / "data" / "console-admin-token").stat().st_mode)[-3:] == "600"

        class Srv:
            url = m.group(1)

        assert call(Srv, "GET", "/streams", token=read) == (200, [])
        assert call(Srv, "POST", "/streams", {"name": "c", "url": "synthetic://hud?fps=5&seconds=1"}, admin)[0] == 201
        assert call(Srv, "GET", "/plan", token=read)[0] == 404  # no bus to read a control plane from
        assert call(Srv, "GET", "/sessions", token=read)[0] == 404
        p.send_signal(signal.SIGTERM)
        assert p.wait(30) == 0
        reader.join(10)
        out = "".join(lines)
        assert "console: stopped" in out and read not in out and admin not in out
    finally:
        if p.poll() is None:
            p.kill()
