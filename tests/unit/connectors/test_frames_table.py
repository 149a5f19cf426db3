"""``vnx_frames`` keeps one outcome per frame (issue 29): an answered frame replayed and dropped as
``late`` still reads ``ok`` under FINAL and after OPTIMIZE … FINAL, whatever the order of the writes;
a table made before the version column is rebuilt by ``ensure_table`` with its rows.

Here on chdb (the current engine); the same checks run on the 18.16 server in
``tests/integration/test_frames_table_server.py``, which imports the ``check_*`` helpers below.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import replace
from typing import Any

import pytest

from vidnexus.connectors.chdb_store import ChdbStore
from vidnexus.connectors.store import ensure_table, same_layout, why_not_rebuilt
from vidnexus.contracts.schema import Column, TableSchema
from vidnexus.errors import ConfigError
from vidnexus.operators.engine import FRAMES_TABLE, FrameOutcome

T0 = 1_770_000_000.0
OLD_ENGINE = "ReplacingMergeTree()"


def frames_schema() -> TableSchema:
    """``vnx_frames`` under a name of its own (the server's database is shared)."""
    return replace(FRAMES_TABLE, name=f"vnx_frames_t{uuid.uuid4().hex[:8]}")


def old_frames_schema(name: str) -> TableSchema:
    """``vnx_frames`` as it was before the version column: the last write won."""
    assert FRAMES_TABLE.columns[-1].name == "version"
    return replace(FRAMES_TABLE, name=name, columns=FRAMES_TABLE.columns[:-1], engine=OLD_ENGINE)


def outcome(frame_no: int, status: str, wall: float, reason: str = "", latency_ms: float = 0.0) -> FrameOutcome:
    o = FrameOutcome("cam", frame_no, status=status, latency_ms=latency_ms, ingest_ts=T0 - 1, decided_wall=wall)
    if reason:
        o.reasons[reason] += 1
    return o


def write(store: Any, schema: TableSchema, outcomes: list[FrameOutcome], *, one_batch: bool) -> None:
    rows = [o.frames_row("app")[: len(schema.columns)] for o in outcomes]
    for batch in ([rows] if one_batch else [[r] for r in rows]):
        store.insert(schema.name, schema.column_names, batch)


def final(store: Any, table: str) -> dict[int, tuple[str, str, float]]:
    """frame_no → (status, reasons, latency_ms) under FINAL."""
    rows = store.query(f"SELECT frame_no, status, reasons, latency_ms FROM {table} FINAL ORDER BY frame_no").rows
    return {int(n): (str(s), str(r), float(ms)) for n, s, r, ms in rows}


def tables_like(store: Any, prefix: str) -> list[str]:
    rows = store.query("SELECT name FROM system.tables WHERE database = currentDatabase() "
                       f"AND startsWith(name, '{prefix}') ORDER BY name").rows
    return [str(r[0]) for r in rows]


def drop_all(store: Any, prefix: str) -> None:
    for t in tables_like(store, prefix):
        store.execute(f"DROP TABLE IF EXISTS {t}")


# (written in this order, as (status, decided at, reason)) → the index of the row that must stand;
# latency_ms tells the rows apart.
CASES = {
    "ok then replayed late": ([("ok", T0, ""), ("dropped", T0 + 30, "late")], 0),
    "dropped then ok": ([("dropped", T0, "late"), ("ok", T0 + 30, "")], 1),
    "two drops: the newest": ([("dropped", T0, "late"), ("dropped", T0 + 30, "deadline")], 1),
    "two drops, the newer written first": ([("dropped", T0 + 30, "deadline"), ("dropped", T0, "late")], 0),
    "partial then replayed late": ([("partial", T0, "early_drop"), ("dropped", T0 + 30, "late")], 0),
    "ok, late, late": ([("ok", T0, ""), ("dropped", T0 + 30, "late"), ("dropped", T0 + 60, "late")], 0),
}


def check_one_outcome_per_frame(store: Any, case: str, one_batch: bool) -> None:
    writes, winner = CASES[case]
    schema = frames_schema()
    try:
        assert ensure_table(store, schema) == []
        outs = [outcome(7, s, wall, reason, latency_ms=float(i + 1)) for i, (s, wall, reason) in enumerate(writes)]
        write(store, schema, outs, one_batch=one_batch)
        s, wall, reason = writes[winner]
        want = {7: (s, f"{reason}:1" if reason else "", float(winner + 1))}
        assert final(store, schema.name) == want
        store.execute(f"OPTIMIZE TABLE {schema.name} FINAL")
        assert final(store, schema.name) == want
        assert store.query(f"SELECT count() FROM {schema.name}").scalar() == 1  # merged to the one outcome
    finally:
        store.execute(f"DROP TABLE IF EXISTS {schema.name}")


def check_rebuild_keeps_rows(store: Any, caplog: Any) -> None:
    """An old-engine table is rebuilt with every row; the copy re-picks winners under the new rule, so
    an answered frame the old rule had turned into a drop (both rows still in unmerged parts) reads
    ``ok`` again; the old table stays as the backup; a second ensure_table does nothing."""
    schema = frames_schema()
    name = schema.name
    try:
        store.create_table(old_frames_schema(name))
        store.execute(f"SYSTEM STOP MERGES {name}")  # keep the two rows of frame 1 apart
        old = old_frames_schema(name)
        write(store, old, [outcome(1, "ok", T0, latency_ms=11.0), outcome(2, "dropped", T0, "early_drop", 12.0),
                           outcome(3, "ok", T0, latency_ms=13.0), outcome(4, "partial", T0, "deadline", 14.0)],
              one_batch=True)
        write(store, old, [outcome(1, "dropped", T0 + 30, "late", 21.0)], one_batch=True)  # the replay
        assert final(store, name)[1][0] == "dropped"  # the bug: the last write won
        raw = store.query(f"SELECT count() FROM {name}").scalar()
        assert raw == 5

        with caplog.at_level(logging.WARNING, logger="vidnexus.connectors.store"):
            assert ensure_table(store, schema) == ["version"]
        assert final(store, name) == {1: ("ok", "", 11.0), 2: ("dropped", "early_drop:1", 12.0),
                                      3: ("ok", "", 13.0), 4: ("partial", "deadline:1", 14.0)}
        engine_full = store.query("SELECT engine_full FROM system.tables WHERE database = currentDatabase() "
                                  f"AND name = '{name}'").scalar()
        assert str(engine_full).startswith("ReplacingMergeTree(version)")
        backups = tables_like(store, f"{name}_backup_")
        assert len(backups) == 1 and store.query(f"SELECT count() FROM {backups[0]}").scalar() == raw
        assert not tables_like(store, f"{name}_rebuild_")
        lines = [r.getMessage() for r in caplog.records if r.name == "vidnexus.connectors.store"]
        assert len(lines) == 1 and f"5 rows copied, the old table kept as {backups[0]}" in lines[0], lines

        assert ensure_table(store, schema) == []  # rebuilt once
        assert tables_like(store, f"{name}_backup_") == backups
        # From now on a replay cannot undo an answer: frame 3 replayed late stays ok.
        write(store, schema, [outcome(3, "dropped", T0 + 60, "late", 31.0)], one_batch=True)
        store.execute(f"OPTIMIZE TABLE {name} FINAL")
        assert final(store, name)[3] == ("ok", "", 13.0)
    finally:
        drop_all(store, name)


def check_older_schema_leaves_table(store: Any) -> None:
    """A writer that still sends the old schema does not rebuild the table back; its rows get the
    version's DEFAULT (the rank at time 0), so its late drop loses to the answer."""
    schema = frames_schema()
    try:
        ensure_table(store, schema)
        write(store, schema, [outcome(5, "ok", T0)], one_batch=True)
        old = old_frames_schema(schema.name)
        assert ensure_table(store, old) == []
        assert not tables_like(store, f"{schema.name}_backup_")
        write(store, old, [outcome(5, "dropped", T0 + 30, "late")], one_batch=True)
        store.execute(f"OPTIMIZE TABLE {schema.name} FINAL")
        assert final(store, schema.name)[5][0] == "ok"
    finally:
        drop_all(store, schema.name)


def check_taken_backup_name_is_a_config_error(store: Any) -> None:
    schema = frames_schema()
    try:
        store.create_table(old_frames_schema(schema.name))
        ensure_table(store, schema)
        (backup,) = tables_like(store, f"{schema.name}_backup_")
        store.execute(f"DROP TABLE {schema.name}")
        store.create_table(old_frames_schema(schema.name))  # an old writer made it again
        with pytest.raises(ConfigError, match=f"DROP TABLE {backup}"):
            ensure_table(store, schema)
        assert not tables_like(store, f"{schema.name}_rebuild_")
    finally:
        drop_all(store, schema.name)


class RacingStore:
    """A store on which another process finishes the same rebuild just before our RENAME."""

    def __init__(self, inner: Any, schema: TableSchema) -> None:
        self.inner, self.schema = inner, schema
        self.version, self.embedded = inner.version, inner.embedded
        self.raced = False

    def execute(self, sql: str) -> None:
        if sql.startswith("RENAME") and not self.raced:
            self.raced = True
            ensure_table(self.inner, self.schema)  # the other process wins
        self.inner.execute(sql)

    def query(self, sql: str, settings: Any = None) -> Any:
        return self.inner.query(sql, settings)

    def insert(self, *a: Any) -> int:
        return int(self.inner.insert(*a))

    def create_table(self, schema: TableSchema) -> None:
        self.inner.create_table(schema)

    def close(self) -> None:
        pass


def check_concurrent_rebuild(store: Any) -> None:
    schema = frames_schema()
    try:
        old = old_frames_schema(schema.name)
        store.create_table(old)
        write(store, old, [outcome(i, "ok", T0) for i in range(10)], one_batch=True)
        racing = RacingStore(store, schema)
        assert ensure_table(racing, schema) == ["version"]
        assert racing.raced
        assert len(tables_like(store, f"{schema.name}_backup_")) == 1
        assert not tables_like(store, f"{schema.name}_rebuild_")  # the loser dropped its copy
        assert store.query(f"SELECT count() FROM {schema.name} FINAL").scalar() == 10
    finally:
        drop_all(store, schema.name)


@pytest.fixture(scope="module")
def chdb():
    s = ChdbStore(None)
    yield s
    s.close()


@pytest.mark.parametrize("one_batch", [False, True], ids=["inserts", "one_insert"])
@pytest.mark.parametrize("case", list(CASES))
def test_one_outcome_per_frame(chdb, case, one_batch):
    check_one_outcome_per_frame(chdb, case, one_batch)


def test_rebuild_of_an_old_table_keeps_its_rows(chdb, caplog):
    check_rebuild_keeps_rows(chdb, caplog)


def test_an_older_schema_never_rebuilds_the_table_back(chdb):
    check_older_schema_leaves_table(chdb)


def test_a_taken_backup_name_is_a_config_error(chdb):
    check_taken_backup_name_is_a_config_error(chdb)


def test_two_processes_rebuilding_at_once(chdb):
    check_concurrent_rebuild(chdb)


V = "ReplacingMergeTree(version)"


@pytest.mark.parametrize(
    "engine_full, sorting_key, engine, order_by, same",
    [
        # as system.tables shows them on chdb (26.x) and on the 18.16 server
        ("ReplacingMergeTree ORDER BY (app, n) SETTINGS index_granularity = 8192", "app, n", OLD_ENGINE,
         ("app", "n"), True),
        ("ReplacingMergeTree() ORDER BY (app, n) SETTINGS index_granularity = 8192", "app, n", OLD_ENGINE,
         ("app", "n"), True),
        ("ReplacingMergeTree(version) ORDER BY (app, n) SETTINGS index_granularity = 8192", "app, n", V,
         ("app", "n"), True),
        ("ReplacingMergeTree() ORDER BY (app, n) SETTINGS index_granularity = 8192", "app, n", V,
         ("app", "n"), False),
        ("ReplacingMergeTree(version) ORDER BY (app, n) SETTINGS index_granularity = 8192", "app, n", OLD_ENGINE,
         ("app", "n"), False),
        ("MergeTree PARTITION BY toYYYYMM(ts) ORDER BY n SETTINGS index_granularity = 8192", "n", "MergeTree()",
         ("n",), True),
        ("MergeTree ORDER BY (app, n) SETTINGS index_granularity = 8192", "app, n", "MergeTree()", ("n",), False),
    ],
)
def test_same_layout(engine_full, sorting_key, engine, order_by, same):
    cols = (Column("app", "String"), Column("n", "UInt64"), Column("version", "UInt64"), Column("ts", "DateTime"))
    assert same_layout(TableSchema("t", cols, order_by, engine), engine_full, sorting_key) is same


def test_tables_that_match_their_schema_are_left_alone(chdb):
    check_declared_tables_match(chdb)


def check_declared_tables_match(store: Any) -> None:
    """Every table the package declares reads as matching once created (no rebuild on every start)."""
    from vidnexus.streams.registry import STATUS_TABLE, STREAMS_TABLE

    app_table = TableSchema("t", (Column("stream", "String"), Column("frame_no", "UInt64"),
                                  Column("row_idx", "UInt32")), ("stream", "frame_no", "row_idx"),
                            engine="ReplacingMergeTree()")
    for s in (FRAMES_TABLE, STREAMS_TABLE, STATUS_TABLE, app_table):
        t = replace(s, name=f"{s.name}_m{uuid.uuid4().hex[:6]}")
        try:
            assert ensure_table(store, t) == []
            assert ensure_table(store, t) == []
            assert not tables_like(store, f"{t.name}_backup_")
        finally:
            drop_all(store, t.name)


@pytest.mark.parametrize(
    "columns, engine_full, why",
    [
        (["app", "n"], "ReplacingMergeTree ORDER BY (app, n)", None),
        (["app", "n", "version"], "MergeTree() ORDER BY n", None),
        (["app", "n", "extra"], "ReplacingMergeTree ORDER BY (app, n)", "columns the schema lacks (extra)"),
        (["app", "n"], "ReplicatedReplacingMergeTree('/ch/t', '{replica}') ORDER BY (app, n)", "chosen by hand"),
        (["app", "n"], "SharedReplacingMergeTree ORDER BY (app, n)", "chosen by hand"),
        (["app", "n"], "Distributed(c, default, t)", "chosen by hand"),
    ],
)
def test_what_is_never_rebuilt(columns, engine_full, why):
    cols = (Column("app", "String"), Column("n", "UInt64"), Column("version", "UInt64"))
    got = why_not_rebuilt(TableSchema("t", cols, ("app", "n"), V), columns, engine_full)
    assert (got is None) if why is None else (why in (got or "")), got
