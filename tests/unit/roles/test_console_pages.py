"""The web console's pages over a real uvicorn server and the embedded store: signing in with either
token, the streams page (add through the form, validation that names the field, pause, remove, a
live thumbnail with the rows drawn on it), sessions, app pages with their charts, the SQL page."""

import http.cookiejar
import re
import time
import urllib.error
import urllib.parse
import urllib.request

import numpy as np
import pytest

from vidnexus.clock import wall_time
from vidnexus.connectors.chdb_store import ChdbStore
from vidnexus.connectors.memory_bus import MemoryBus
from vidnexus.contracts.frames import Frame, encode_frame
from vidnexus.contracts.rows import encode_rows
from vidnexus.contracts.schema import Column, TableSchema
from vidnexus.contracts.stats import ExecutorStats, SessionStats, encode_stats
from vidnexus.contracts.topics import Topics
from vidnexus.roles.console import ConsoleServer, ControlWatcher, Tokens
from vidnexus.roles.console_pages import COOKIE, FrameTap, chart_svg

READ, ADMIN = "read-token-0123456789", "admin-token-0123456789"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    data = tmp_path_factory.mktemp("pages")
    store = ChdbStore(data / "chdb")
    bus, topics = MemoryBus(), Topics("pages")
    srv = ConsoleServer(store, Tokens(READ, ADMIN), "127.0.0.1", 0, control=ControlWatcher(bus, topics),
                        tap=FrameTap(bus, topics, poll_s=0.02), close_control=True).start()
    srv.bus, srv.topics, srv.store = bus, topics, store
    yield srv
    srv.stop()
    store.close()


class Browser:
    """urllib with a cookie jar: what a browser keeps between pages."""

    def __init__(self, srv):
        self.srv = srv
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def go(self, path, form=None):
        data = None if form is None else urllib.parse.urlencode(form).encode()
        try:
            with self.opener.open(self.srv.url + path, data=data, timeout=30) as r:
                return r.status, r.geturl(), r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.geturl(), e.read()

    def sign_in(self, token):
        return self.go("/login", {"token": token})


def text(body: bytes) -> str:
    return body.decode()


def test_pages_need_a_token_and_either_token_signs_in(server):
    b = Browser(server)
    code, url, body = b.go("/streams")
    assert code == 200 and url.endswith("/login") and "Token" in text(body)  # sent to sign in first
    code, url, body = b.sign_in("wrong-token-0123456789")
    assert url.endswith("/login?error=wrong%20token") and "wrong token" in text(body)
    assert not any(c.name == COOKIE for c in b.jar)
    code, url, body = b.sign_in(READ)
    assert code == 200 and url.endswith("/streams") and "read token" in text(body)
    cookie = next(c for c in b.jar if c.name == COOKIE)
    assert cookie.has_nonstandard_attr("HttpOnly") and cookie.get_nonstandard_attr("SameSite").lower() == "strict"
    assert "Add a stream" not in text(body)  # the read token sees no change forms
    code, _, body = b.go("/streams", {"name": "x", "url": "synthetic://hud?fps=5&seconds=1", "app": "hud"})
    assert code == 403 and "admin token" in text(body)
    code, url, _ = b.go("/logout", {})
    assert url.endswith("/login") and not any(c.name == COOKIE for c in b.jar)


def test_admin_adds_pauses_and_removes_a_stream_through_the_forms(server):
    b = Browser(server)
    b.sign_in(ADMIN)
    code, _, body = b.go("/streams", {"name": "gate", "url": "synthetic://hud?fps=5&seconds=1", "app": "hud",
                                      "fps": "-3", "rate": ""})
    assert code == 422 and "fps" in text(body) and 'value="gate"' in text(body)  # the field named, the form kept
    code, _, body = b.go("/streams", {"name": "gate", "url": "synthetic://hud?fps=5&seconds=1", "app": "nope"})
    assert code == 422 and "apps" in text(body)  # an app the console does not know (the select was bypassed)
    code, _, body = b.go("/streams", {"name": "gate", "url": "synthetic://hud?fps=5&seconds=1", "app": "hud",
                                      "fps": "2"})
    assert code == 200 and "stream gate added" in text(body)
    assert re.search(r'data-stream="gate".*?state-enabled', text(body), re.S)
    code, _, body = b.go("/streams", {"name": "gate", "url": "synthetic://hud?fps=5&seconds=1", "app": "hud"})
    assert code == 422 and "already registered" in text(body)
    code, _, body = b.go("/streams/gate/pause", {})
    assert code == 200 and "stream gate paused" in text(body) and "state-paused" in text(body)
    code, _, body = b.go("/streams/gate/resume", {})
    assert "state-enabled" in text(body)
    code, _, body = b.go("/streams/gate/remove", {})
    assert code == 200 and "stream gate removed" in text(body) and 'data-stream="gate"' not in text(body)


def test_the_form_adds_a_backfill_stream_and_refuses_an_unknown_mode(server):
    b = Browser(server)
    b.sign_in(ADMIN)
    code, _, body = b.go("/streams")
    assert '<select name="mode">' in text(body) and 'value="backfill"' in text(body)
    code, _, body = b.go("/streams", {"name": "old", "url": "synthetic://hud?fps=5&seconds=1", "app": "hud",
                                      "mode": "someday"})
    assert code == 422 and "mode" in text(body) and 'value="old"' in text(body)
    code, _, body = b.go("/streams", {"name": "old", "url": "synthetic://hud?fps=5&seconds=1", "app": "hud",
                                      "mode": "backfill"})
    assert code == 200 and "stream old added" in text(body)
    assert re.search(r'data-stream="old".*?hud · backfill', text(body), re.S)  # the registry's spec says so
    code, _, body = b.go("/streams/old/remove", {})
    assert code == 200 and "stream old removed" in text(body)


def test_thumbnail_is_the_latest_frame_with_its_rows_drawn(server):
    import cv2

    b = Browser(server)
    b.sign_in(READ)
    assert b.go("/streams/cam/thumbnail.jpg")[0] == 404  # no frame yet
    img = np.zeros((120, 160, 3), np.uint8)
    server.bus.publish(server.topics.frames, b"cam", encode_frame(Frame("cam", 5, 0.2, wall_time(), wall_time(),
                                                                        160, 120, "raw", img.tobytes())))
    schema = TableSchema("objs", (Column("stream", "String"), Column("frame_no", "UInt64"), Column("track_id", "UInt32"),
                                  Column("x1", "Float32"), Column("y1", "Float32"), Column("x2", "Float32"),
                                  Column("y2", "Float32"), Column("colour", "String")), order_by=("stream",))
    server.bus.publish(server.topics.rows, b"cam", encode_rows({"objs": [("cam", 5, 7, 20, 30, 100, 90, "red")]},
                                                               {"objs": schema}))
    deadline = time.monotonic() + 10
    while True:
        code, _, body = b.go("/streams/cam/thumbnail.jpg")
        got = cv2.imdecode(np.frombuffer(body, np.uint8), cv2.IMREAD_COLOR) if code == 200 else None
        if got is not None and got[30, 60].max() > 100:  # the box's top edge is drawn
            break
        assert time.monotonic() < deadline, code
        time.sleep(0.05)
    assert got.shape[:2] == (120, 160) and got[60, 60].max() < 40  # inside the box: the frame's black


def test_sessions_page_shows_each_executor_and_its_sessions(server):
    b = Browser(server)
    b.sign_in(READ)
    sess = SessionStats("mine-50ms", "mine", 50.0, arrivals=200, replies=198, within_slo=190,
                        drops={"early_drop": 2}, mean_batch=3.5, rate_recent=40.0, latency_p50_ms=12.0,
                        latency_p99_ms=31.0, device_busy_fraction=0.5)
    server.bus.publish(server.topics.stats, b"ex1", encode_stats(
        ExecutorStats("ex1", "cpu", wall_time(), {"mine-50ms": 3}, ("mine-50ms",), {}, (sess,), 5.0)))
    code, _, body = b.go("/sessions")
    page = text(body)
    assert code == 200 and "executor ex1" in page and "mine-50ms" in page
    assert "95.0%" in page and "early_drop 2" in page and "No plan published yet" in page


def test_app_page_runs_the_apps_queries_and_charts_them(server):
    server.store.execute("CREATE TABLE IF NOT EXISTS traffic_objects (stream String, frame_no UInt64, row_idx UInt32, "
                         "version UInt64, pts Float64, track_id UInt32, counts UInt8, colour String, truth_car Int32, "
                         "truth_colour String) ENGINE = ReplacingMergeTree(version) ORDER BY (stream, frame_no, row_idx)")
    server.store.execute("INSERT INTO traffic_objects VALUES ('a', 1, 0, 1, 5, 1, 1, 'red', -1, ''), "
                         "('a', 2, 0, 1, 70, 2, 1, 'blue', -1, ''), ('b', 3, 0, 1, 10, 3, 1, 'red', -1, '')")
    b = Browser(server)
    b.sign_in(READ)
    code, _, body = b.go("/apps/traffic")
    page = text(body)
    assert code == 200 and 'data-query="vehicles per minute"' in page
    section = page.split('data-query="vehicles per minute"')[1].split("</section>")[0]
    assert section.count("<polyline") == 2  # one line per camera
    assert b.go("/apps/nope")[0] == 404


def test_sql_page_answers_with_a_table_and_a_chart_and_refuses_writes(server):
    b = Browser(server)
    b.sign_in(READ)
    code, _, body = b.go("/sql", {"query": "SELECT toString(number) AS k, number * 2 AS v FROM numbers(4)"})
    page = text(body)
    assert code == 200 and "<svg" in page and page.count("<rect") >= 4 and "<td>6</td>" in page
    code, _, body = b.go("/sql", {"query": "DROP TABLE traffic_objects"})
    assert 'class="err"' in text(body)


def test_chart_kinds():
    line = chart_svg(["second", "score", "kills"], ["UInt32", "Int32", "Int32"], [[0, 1, 0], [10, 5, 1]])
    assert line is not None and line.count("<polyline") == 2  # one line per number over time
    bars = chart_svg(["stream", "score"], ["String", "Float64"], [["a", 80.0], ["b", 60.5]])
    assert bars is not None and bars.count("<rect") >= 2 and "<polyline" not in bars
    assert chart_svg(["a", "b"], ["String", "String"], [["x", "y"]]) is None
    assert chart_svg(["n"], ["UInt8"], []) is None


def test_a_change_from_another_sites_page_is_refused(server):
    b = Browser(server)
    b.sign_in(ADMIN)
    data = urllib.parse.urlencode({"name": "csrf", "url": "synthetic://hud?fps=5&seconds=1", "app": "hud"}).encode()
    for headers in ({"Origin": "http://evil.example:8080"}, {"Sec-Fetch-Site": "cross-site"},
                    {"Sec-Fetch-Site": "same-site"}):
        req = urllib.request.Request(server.url + "/streams", data=data, headers=headers)
        try:
            b.opener.open(req, timeout=30)
            code = 200
        except urllib.error.HTTPError as e:
            code = e.code
        assert code == 403, headers
    assert 'data-stream="csrf"' not in text(b.go("/streams")[2])  # nothing was registered


def test_a_blocked_address_waits_with_429_and_a_stale_cookie_is_dropped(server):
    srv = ConsoleServer(server.store, Tokens(READ, ADMIN), "127.0.0.1", 0).start()  # its own back-off
    try:
        b = Browser(srv)
        b.sign_in(READ)
        good = next(c for c in b.jar if c.name == COOKIE)
        good.value = "stale-token-0123456789"  # the tokens changed since this browser signed in
        code, url, _ = b.go("/streams")
        assert url.endswith("/login") and not any(c.name == COOKIE for c in b.jar)
        for _ in range(5):
            b.sign_in("wrong-token-0123456789")
        code, _, body = b.go("/login", {"token": READ})  # even the right token waits now
        assert code == 429 and "retry in" in text(body)
    finally:
        srv.stop()


def test_overlays_skip_rows_without_a_usable_box():
    from vidnexus.roles.console_pages import draw_overlays

    img = draw_overlays(np.zeros((60, 80, 3), np.uint8),
                        {"t": [{"x1": float("nan"), "y1": 1, "x2": None, "y2": 4, "track_id": 1},
                               {"kp_read": (float("nan"), 3.0, 10.0, 10.0)}]})
    assert img.shape == (60, 80, 3)
