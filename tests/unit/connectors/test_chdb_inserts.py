"""chdb inserts: rows go in as an Arrow table when Arrow can type every column, as JSON rows
otherwise; both paths store the same values."""

from __future__ import annotations

import datetime as dt

import pytest

from vidnexus.connectors import chdb_store
from vidnexus.connectors.chdb_store import ChdbStore, _arrow_table
from vidnexus.errors import ConnectorError

COLUMNS = ("s", "n", "f", "ts", "arr", "opt", "b")
CREATE = ("CREATE TABLE {t} (s LowCardinality(String), n UInt64, f Float32, ts DateTime64(3), arr Array(Float32), "
          "opt Nullable(Int32), b UInt8) ENGINE = MergeTree ORDER BY n")
ROWS = [
    ("cam-1", 1, 0.5, "2024-01-02T03:04:05Z", [1.0, 2.0], 7, True),
    ("cam-2", 2, 1.5, "2024-01-02 03:04:06", [], 8, False),
    ("cam-3", 3, 2, "2024-01-02 03:04:07.250", [3], 9, True),
]
DATETIMES = [("cam-4", 4, 1.0, dt.datetime(2024, 1, 2, 3, 4, 8, 500000), [1.0], 1, 0)]


@pytest.fixture()
def store(tmp_path):
    s = ChdbStore(tmp_path / "db")
    yield s
    s.close()


def _stored(store, table):
    return store.query(f"SELECT s, n, f, toString(ts), arr, opt, b FROM {table} ORDER BY n").rows


def test_arrow_and_json_rows_store_the_same_values(store, monkeypatch):
    for t in ("via_arrow", "via_json"):
        store.execute(CREATE.format(t=t))
    assert _arrow_table(ROWS, len(COLUMNS)) is not None and _arrow_table(DATETIMES, len(COLUMNS)) is not None
    store.insert("via_arrow", COLUMNS, ROWS)
    store.insert("via_arrow", COLUMNS, DATETIMES)
    monkeypatch.setattr(chdb_store, "_arrow_table", lambda batch, width: None)
    store.insert("via_json", COLUMNS, ROWS)
    store.insert("via_json", COLUMNS, DATETIMES)
    got = _stored(store, "via_arrow")
    assert got == _stored(store, "via_json")
    assert [r[1] for r in got] == [1, 2, 3, 4] and got[1][4] == []
    assert [r[3] for r in got] == ["2024-01-02 03:04:05.000", "2024-01-02 03:04:06.000", "2024-01-02 03:04:07.250",
                                   "2024-01-02 03:04:08.500"]


def test_nulls_empty_lists_and_mixed_kinds_take_the_json_path(store):
    store.execute(CREATE.format(t="t"))
    with_null = [("a", 1, 0.5, "2024-01-02 03:04:05", [1.0], None, 1)]
    only_empty = [("b", 2, 0.5, "2024-01-02 03:04:05", [], 3, 1)]
    mixed = [("c", 3, 0.5, "2024-01-02 03:04:05", [1.0], 3, 1), ("d", 4, "x", "2024-01-02 03:04:05", [1.0], 3, 1)]
    assert _arrow_table(with_null, 7) is None and _arrow_table(only_empty, 7) is None
    assert _arrow_table(mixed, 7) is None
    store.insert("t", COLUMNS, with_null + only_empty)
    assert store.query("SELECT n, opt, arr FROM t ORDER BY n").rows == [(1, None, [1.0]), (2, 3, [])]
    with pytest.raises(ConnectorError, match="query failed"):  # "x" is no Float32, as before
        store.insert("t", COLUMNS, mixed)


def test_a_row_of_the_wrong_width_sends_nothing(store):
    store.execute(CREATE.format(t="t"))
    with pytest.raises(ConnectorError, match="row has 2 values for 7 columns"):
        store.insert("t", COLUMNS, [*ROWS, ("x", 9)])
    assert store.query("SELECT count() FROM t").scalar() == 0
