"""What ``ingest --once --wait`` (and ``vidnexus up --once``) waits for, on the embedded ClickHouse:
the frames of each stream's registration that have their ``vnx_frames`` row for the app."""

from __future__ import annotations

import pytest

from vidnexus.connectors.store import ensure_table
from vidnexus.operators.engine import FRAMES_TABLE
from vidnexus.roles.ingest import accounted, feeds
from vidnexus.streams.spec import StreamSpec


@pytest.fixture(scope="module")
def store():
    from vidnexus.connectors.chdb_store import ChdbStore

    s = ChdbStore(None)
    yield s
    s.close()


def test_feeds_names_or_no_app():
    assert feeds(StreamSpec("a", "synthetic://x", apps=("cars",)), ["cars"])
    assert not feeds(StreamSpec("a", "synthetic://x", apps=("hud",)), ["cars"])
    assert feeds(StreamSpec("a", "synthetic://x"), ["cars"])  # names none: every app takes it
    assert feeds(StreamSpec("a", "synthetic://x", apps=("hud", "cars")), ["cars", "game"])


def test_accounted_counts_this_registrations_frames_by_status(store):
    store.execute("DROP TABLE IF EXISTS vnx_frames")
    assert accounted(store, "cars", {"cam": 0.0}) == {}  # no vnx_frames yet: nothing accounted
    ensure_table(store, FRAMES_TABLE)
    cols = ("app", "stream", "frame_no", "status", "reasons", "rows", "drops", "latency_ms", "ingest_ts", "version")
    rows = [("cars", "cam", 0, "ok", "", 1, 0, 10.0, 100.0, 1),      # an earlier registration's frame
            ("cars", "cam", 1, "ok", "", 1, 0, 10.0, 200.0, 1),
            ("cars", "cam", 2, "dropped", "late:1", 0, 1, 10.0, 201.0, 1),
            ("cars", "cam", 2, "ok", "", 1, 0, 10.0, 201.0, 2),        # its replay answered: one frame, ok
            ("hud", "cam", 3, "ok", "", 1, 0, 10.0, 202.0, 1),         # another app's row
            ("cars", "cam2", 0, "error", "error:step", 0, 0, 1.0, 150.0, 1)]
    store.insert("vnx_frames", cols, rows)
    assert accounted(store, "cars", {"cam": 199.0}) == {"cam": {"ok": 2}}
    assert accounted(store, "cars", {"cam": 0.0, "cam2": 0.0}) == {"cam": {"ok": 3}, "cam2": {"error": 1}}
    assert accounted(store, "hud", {"cam": 0.0}) == {"cam": {"ok": 1}}
    assert accounted(store, "cars", {}) == {}
