"""The registry's door and its rows: what add() stores, rows that no longer validate, and tables an
older version made; on a real chdb store."""

import datetime as dt
import logging
import math

import pytest

from vidnexus.connectors.memory_bus import MemoryBus
from vidnexus.contracts.schema import Column, TableSchema
from vidnexus.errors import StreamError
from vidnexus.streams.ingest import StreamStatus
from vidnexus.streams.registry import STREAMS_TABLE, StreamRegistry, registered_from_row
from vidnexus.streams.spec import StreamSpec
from vidnexus.streams.supervisor import IngestSupervisor

from .media import make_clip

HUD = "synthetic://hud?fps=5&seconds=1"
# name, url, fps, every_n, keyframes_only, apps, tag_keys, tag_values, state, probe, jpeg_quality, max_side,
# realtime, stop_on_corrupt, until_s, speed, backfill
GOOD = ("cam", HUD, 2.0, 0, 0, [], ["site"], ["lot"], "enabled", '{"width": 320}', 0, 0, 0, 0, 0.0, 0.0, 0)


def row(**changes):
    names = ("name", "url", "fps", "every_n", "keyframes_only", "apps", "tag_keys", "tag_values", "state", "probe",
             "jpeg_quality", "max_side", "realtime", "stop_on_corrupt", "until_s", "speed", "backfill")
    return tuple(changes.get(n, v) for n, v in zip(names, GOOD))


@pytest.mark.parametrize("name, raw, state, problem, check", [
    ("valid", row(), "enabled", "",
     lambda s: (s.fps, s.jpeg_quality, s.max_side, s.skip_corrupt) == (2.0, 85, None, True)),
    ("fps=inf read back by chdb as NULL", row(fps=None), "invalid", "stored fps is not a finite number",
     lambda s: math.isnan(s.fps)),
    ("fps=inf read back by a server", row(fps=math.inf), "invalid", "not a finite number", None),
    ("fps=nan", row(fps=math.nan), "invalid", "not a finite number", None),
    ("fps=-1 written by hand", row(fps=-1.0), "invalid", "fps=-1.0 is not allowed", lambda s: s.fps == -1.0),
    ("old row: every_n won over fps in ingest", row(every_n=5), "enabled", "",
     lambda s: (s.fps, s.every_n) == (None, 5)),
    ("old row: keyframes won over fps=inf", row(fps=None, keyframes_only=1), "enabled", "",
     lambda s: s.keyframes_only and s.fps is None),
    ("max_side below the range", row(max_side=5), "invalid", "max_side=5", lambda s: s.max_side == 5),
    ("quality stored", row(jpeg_quality=60, max_side=640, realtime=1, stop_on_corrupt=1), "enabled", "",
     lambda s: (s.jpeg_quality, s.max_side, s.realtime, s.speed, s.skip_corrupt) == (60, 640, True, 1.0, False)),
    ("a pace stored", row(realtime=1, speed=4.0), "enabled", "", lambda s: (s.realtime, s.speed) == (True, 4.0)),
    ("a backfill stream", row(backfill=1), "enabled", "", lambda s: s.backfill and not row()[-1]),
    ("a pace of 0 written by hand reads as real time", row(realtime=1, speed=0.0), "enabled", "",
     lambda s: s.speed == 1.0),
    ("a pace of -2 written by hand", row(realtime=1, speed=-2.0), "invalid", "speed=-2.0", None),
    ("bad name written by hand", row(name="a b"), "invalid", "stream name 'a b'", None),
    ("empty url", row(url=""), "invalid", "empty URL", None),
    ("paused and invalid", row(state="paused", fps=None), "invalid", "not a finite", None),
    ("removed and invalid stays removed", row(state="removed", fps=None), "removed", "not a finite", None),
    ("unreadable probe JSON is dropped", row(probe="{oops"), "enabled", "", None),
])
def test_registered_from_row_never_raises(name, raw, state, problem, check):
    r = registered_from_row(raw)
    assert r.state == state and problem in r.problem and (problem == "") == (r.problem == ""), name
    assert isinstance(r.probe, dict)
    if check:
        assert check(r.spec), name


def _insert(reg, **changes):
    values = dict(zip(STREAMS_TABLE.column_names, (None,) * len(STREAMS_TABLE.column_names)))
    values.update(name="old", url=HUD, fps=1.0, every_n=0, keyframes_only=0, apps=[], tag_keys=[], tag_values=[],
                  state="enabled", probe="{}", updated=dt.datetime(2024, 1, 1), version=1, jpeg_quality=0,
                  max_side=0, realtime=0, stop_on_corrupt=0, until_s=0.0, speed=0.0, backfill=0)
    values.update(changes)
    names = STREAMS_TABLE.column_names
    reg.store.insert(STREAMS_TABLE.name, names, [tuple(values[c] for c in names)])


def test_registry_lists_a_row_that_no_longer_validates_and_ingest_skips_it(store, caplog):
    reg = StreamRegistry(store)
    reg.add(StreamSpec("good", HUD, every_n=1))
    _insert(reg, name="old", fps=math.inf)  # as `--fps inf` stored it before
    listed = {r.spec.name: r for r in reg.list()}
    assert listed["old"].state == "invalid" and "not a finite number" in listed["old"].problem
    assert listed["good"].state == "enabled" and listed["good"].problem == ""
    assert reg.get("old").state == "invalid"
    with pytest.raises(StreamError, match="cannot be resumed: remove stream old and add it again"):
        reg.resume("old")
    assert reg.pause("old").state == "invalid"
    sup = IngestSupervisor(reg, MemoryBus(), "f", poll_s=0.05)
    _insert(reg, name="old", fps=math.inf, version=2)  # enabled again, behind the registry's back
    with caplog.at_level(logging.WARNING, logger="vidnexus.streams.supervisor"):
        sup.run(once=True)
        sup.run(once=True)
    states = {s.name: (s.state, s.reason) for s in sup.statuses()}
    assert states["good"] == ("done", "") and states["old"][0] == "failed" and "not a finite" in states["old"][1]
    assert len([r for r in caplog.records if "stream old skipped" in r.getMessage()]) == 1  # logged once
    assert reg.status("old")["state"] == "failed"
    reg.remove("old")
    assert [r.spec.name for r in reg.list()] == ["good"]
    removed = {r.spec.name: r for r in reg.list(include_removed=True)}["old"]
    assert removed.state == "removed" and removed.problem
    reg.add(StreamSpec("old", HUD, fps=2.0))  # added again, properly
    assert reg.get("old").state == "enabled"


def test_registry_keeps_every_option_and_stores_paths_absolute(store, tmp_path, monkeypatch):
    clip = make_clip(tmp_path / "my clip.mp4", frames=10)
    reg = StreamRegistry(store)
    monkeypatch.chdir(tmp_path)
    spec = StreamSpec("a", "my clip.mp4", every_n=2, jpeg_quality=60, max_side=32, realtime=True, skip_corrupt=False)
    added = reg.add(spec)
    assert added.spec.url == str(clip) and added.probe["kind"] == "file" and added.probe["frames"] == 10
    assert reg.get("a").spec == added.spec  # quality, max_side, realtime and skip_corrupt were dropped before
    reg.add(StreamSpec("b", "file://" + str(clip).replace(" ", "%20")))
    assert reg.get("b").spec.url == str(clip)


@pytest.mark.parametrize("timeout", [-1.0, 0.0, math.inf, math.nan, 3601.0])
def test_add_refuses_a_probe_timeout_out_of_range(store, timeout):
    reg = StreamRegistry(store)
    with pytest.raises(StreamError, match=r"stream a: probe timeout .* s is not allowed"):
        reg.add(StreamSpec("a", HUD), timeout_s=timeout)


def test_tables_of_an_older_version_are_migrated(store):
    old_streams = TableSchema("streams", STREAMS_TABLE.columns[:12], order_by=("name",),
                              engine="ReplacingMergeTree(version)")
    old_status = TableSchema("stream_status", tuple(Column(n, t) for n, t in [
        ("name", "String"), ("state", "String"), ("reason", "String"), ("decoded", "UInt64"), ("sampled", "UInt64"),
        ("published", "UInt64"), ("rejected", "UInt64"), ("stale", "UInt64"), ("errors", "UInt64"),
        ("reconnects", "UInt64"), ("last_pts", "Float64"), ("max_gap_s", "Float64"), ("worker", "String"),
        ("updated", "DateTime"), ("version", "UInt64")]), order_by=("name",), engine="ReplacingMergeTree(version)")
    store.create_table(old_streams)
    store.create_table(old_status)
    store.insert("streams", old_streams.column_names, [("old", HUD, 1.0, 0, 0, [], [], [], "enabled", "{}",
                                                         dt.datetime(2024, 1, 1), 1)])
    reg = StreamRegistry(store)
    old = reg.get("old")
    assert old.problem == "" and (old.spec.jpeg_quality, old.spec.max_side, old.spec.skip_corrupt) == (85, None, True)
    reg.report([StreamStatus("old", state="done", corrupt=3)], "w")
    assert reg.status("old")["corrupt"] == 3


def test_streams_list_and_show_print_a_row_that_no_longer_validates(tmp_path, monkeypatch, capsys):
    """`vidnexus streams list` (also `--all`) and `show` survive any row the registry can hold."""
    from vidnexus.cli import run
    from vidnexus.connectors.chdb_store import ChdbStore

    monkeypatch.setenv("VNX_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("VNX_STORE", "chdb")
    store = ChdbStore(tmp_path / "data" / "chdb")
    try:
        reg = StreamRegistry(store)
        reg.add(StreamSpec("good", HUD, every_n=1))
        _insert(reg, name="old", fps=math.inf)
    finally:
        store.close()
    for args in (["streams", "list"], ["streams", "list", "--all"], ["streams", "show", "old"]):
        assert run(args) == 0, capsys.readouterr().err
        out = capsys.readouterr().out
        assert "old" in out and "invalid" in out and "finite" in out
