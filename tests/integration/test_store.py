"""The Store on chdb (current engine) and on the ClickHouse server (18.16 from Debian)."""

import datetime as dt
import uuid

import pytest

from vidnexus.connectors.chdb_store import ChdbStore
from vidnexus.connectors.clickhouse_store import ClickHouseStore
from vidnexus.contracts.schema import Column, TableSchema
from vidnexus.errors import ConnectorError


@pytest.fixture(params=["chdb", "server"])
def store(request, tmp_path):
    if request.param == "chdb":
        s = ChdbStore(tmp_path / "chdb")
    else:
        s = ClickHouseStore(request.getfixturevalue("clickhouse_url"), timeout_s=5)
    yield s
    s.close()


def schema(name):
    return TableSchema(
        name,
        (Column("cam", "LowCardinality(String)"), Column("frame_no", "UInt32"), Column("ts", "DateTime"),
         Column("boxes", "Array(Float32)"), Column("labels", "Array(String)"), Column("score", "Float64")),
        order_by=("cam", "frame_no"),
    )


def test_engine_versions(store):
    if isinstance(store, ClickHouseStore):
        assert store.version[:2] == (18, 16)
    else:
        assert store.version >= (20, 1)


def test_create_insert_select_round_trip_with_arrays(store):
    t = f"rt_{uuid.uuid4().hex[:8]}"
    store.create_table(schema(t))
    store.create_table(schema(t))  # idempotent
    ts = dt.datetime(2026, 11, 22, 1, 2, 3)
    rows = [("cam-a", 1, ts, [0.5, 1.5], ["car", "person"], 0.9),
            ("cam-b", 2, ts, [], [], 0.1),
            ("cam-a", 3, ts, [2.25], ["it's"], 0.5)]
    assert store.insert(t, ["cam", "frame_no", "ts", "boxes", "labels", "score"], rows) == 3
    res = store.query(f"SELECT cam, frame_no, toString(ts), boxes, labels, score FROM {t} ORDER BY frame_no")
    assert res.columns == ("cam", "frame_no", "toString(ts)", "boxes", "labels", "score")
    got = [tuple(list(v) if isinstance(v, (list, tuple)) else v for v in r) for r in res.rows]
    assert got == [("cam-a", 1, "2026-11-22 01:02:03", [0.5, 1.5], ["car", "person"], 0.9),
                   ("cam-b", 2, "2026-11-22 01:02:03", [], [], 0.1),
                   ("cam-a", 3, "2026-11-22 01:02:03", [2.25], ["it's"], 0.5)]
    assert store.query(f"SELECT sum(length(boxes)) FROM {t}").scalar() == 3
    store.execute(f"DROP TABLE {t}")


def test_100k_row_batched_insert(store):
    t = f"big_{uuid.uuid4().hex[:8]}"
    store.create_table(schema(t))
    ts = dt.datetime(2026, 1, 1)
    n = 100_000
    rows = ((f"cam-{i % 16}", i, ts, [float(i % 7)], ["x"] * (i % 3), i / n) for i in range(n))
    assert store.insert(t, ["cam", "frame_no", "ts", "boxes", "labels", "score"], rows) == n
    res = store.query(f"SELECT count(), uniqExact(cam), sum(frame_no), sum(length(labels)) FROM {t}")
    assert tuple(res.rows[0]) == (n, 16, n * (n - 1) // 2, sum(i % 3 for i in range(n)))
    store.execute(f"DROP TABLE {t}")


def test_replacing_merge_tree_dedupes_replays(store):
    t = f"idem_{uuid.uuid4().hex[:8]}"
    store.create_table(TableSchema(t, (Column("cam", "String"), Column("frame_no", "UInt32"),
                                       Column("n", "UInt32")), order_by=("cam", "frame_no"),
                                   engine="ReplacingMergeTree()"))
    rows = [("a", i, 1) for i in range(10)]
    store.insert(t, ["cam", "frame_no", "n"], rows)
    store.insert(t, ["cam", "frame_no", "n"], rows[:5])  # a replay after a crash
    assert store.query(f"SELECT sum(n) FROM {t} FINAL").scalar() == 10
    store.execute(f"DROP TABLE {t}")


def test_bad_sql_is_a_connector_error(store):
    with pytest.raises(ConnectorError, match="query failed"):
        store.query("SELECT * FROM no_such_table_xyz")


def test_row_width_mismatch(store):
    with pytest.raises(ConnectorError, match="2 values for 3 columns"):
        store.insert("whatever", ["a", "b", "c"], [(1, 2)])
