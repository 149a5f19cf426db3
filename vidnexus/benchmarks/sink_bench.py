"""Rows per second from the rows topic into the store: the sink role (what ``vidnexus sink`` runs)
draining a rows topic on the real Kafka broker into

- the ClickHouse server (``VNX_CLICKHOUSE_URL``, a database of the run's own, dropped after), and
- chdb (in-process ClickHouse, a temporary directory),

with the store's own insert rate beside each (the same rows handed to ``Store.insert`` in batches
of the sink's size: the ceiling the sink can reach). Every message is one frame's rows, as the
workers write them: ``ROWS_PER_FRAME`` detection rows of a traffic-like table plus the frame's
``vnx_frames`` row. The rows are published first, then the sink's drain is timed until every row
is in the table (counted in the store). Needs the broker and the server: ``vidnexus services up``.
"""

from __future__ import annotations

import tempfile
import threading
import time
import uuid
from typing import Any

from vidnexus.benchmarks.machine import machine_info
from vidnexus.contracts.schema import Column, TableSchema
from vidnexus.errors import VidnexusError

__all__ = ["run", "DETECTIONS", "ROWS_PER_FRAME"]

ROWS_PER_FRAME = 20

DETECTIONS = TableSchema(
    "bench_sink_dets",
    (
        Column("stream", "String"),
        Column("frame_no", "UInt64"),
        Column("row_idx", "UInt32"),
        Column("ts", "Float64"),
        Column("label", "LowCardinality(String)"),
        Column("score", "Float32"),
        Column("x1", "Float32"),
        Column("y1", "Float32"),
        Column("x2", "Float32"),
        Column("y2", "Float32"),
    ),
    order_by=("stream", "frame_no", "row_idx"),
)


def _messages(n: int, tag: str) -> list[bytes]:
    """``n`` rows messages (one per frame: ROWS_PER_FRAME detections and the vnx_frames row)."""
    from vidnexus.contracts.rows import encode_rows
    from vidnexus.operators.engine import FRAMES_TABLE

    schemas = {DETECTIONS.name: DETECTIONS, FRAMES_TABLE.name: FRAMES_TABLE}
    out = []
    labels = ("car", "bus", "truck", "person")
    for i in range(n):
        stream = f"{tag}-{i % 16}"
        ts = 1_700_000_000 + i / 10
        dets = [(stream, i, k, ts, labels[k % 4], 0.5 + k / 100, 10.0 * k, 20.0, 10.0 * k + 30, 80.0)
                for k in range(ROWS_PER_FRAME)]
        frame = ("bench", stream, i, "ok", "", ROWS_PER_FRAME, 0, 12.5, ts, 1 << 60)
        out.append(encode_rows({DETECTIONS.name: dets, FRAMES_TABLE.name: [frame]}, schemas))
    return out


def _count(store: Any, table: str) -> int:
    return int(store.query(f"SELECT count() FROM {table}").scalar())


def _drain(store: Any, label: str, msgs: list[bytes], bootstrap: str, max_rows: int) -> dict[str, Any]:
    """Publish ``msgs`` to a fresh rows topic, then time the sink role until the store has them."""
    from vidnexus.config import Settings
    from vidnexus.connectors.factory import open_bus
    from vidnexus.contracts.topics import Topics
    from vidnexus.roles.sink import SinkRole

    prefix = f"bsink{uuid.uuid4().hex[:8]}"
    settings = Settings(bus="kafka", kafka_bootstrap=bootstrap, topic_prefix=prefix)
    bus = open_bus(settings)
    try:
        topic = Topics(prefix).rows
        bus.create_topic(topic, 8)
        for i, m in enumerate(msgs):
            bus.publish(topic, f"k{i % 16}".encode(), m)
        bus.flush()
        role = SinkRole(settings, bus=bus, store=store, max_rows=max_rows)
        role.prepare()
        want = len(msgs) * (ROWS_PER_FRAME + 1)
        stop = threading.Event()
        thread = threading.Thread(target=role.run, args=(stop,), daemon=True)
        thread.start()
        # Timed from the first message read (the group join before it is not the sink's rate) until
        # every row is inserted. Once everything is read, the role is told to stop: it then inserts
        # what it holds at once instead of after --max-delay (a wait for more rows, not work).
        deadline = time.monotonic() + 600
        while role.stats.messages == 0 and time.monotonic() < deadline and thread.is_alive():
            time.sleep(0.001)
        t0 = time.perf_counter()
        while role.stats.messages < len(msgs) and time.monotonic() < deadline and thread.is_alive():
            time.sleep(0.005)
        stop.set()
        thread.join(120)
        wall = time.perf_counter() - t0
        if role.stats.rows < want:
            raise VidnexusError(f"sink into {label}: {role.stats.rows} of {want} rows after {wall:.0f} s")
        stored = _count(store, DETECTIONS.name)
        if stored != len(msgs) * ROWS_PER_FRAME:
            raise VidnexusError(f"sink into {label}: the table has {stored} rows, "
                                f"{len(msgs) * ROWS_PER_FRAME} were sent")
    finally:
        bus.close()
    return {"store": label, "path": "sink role (rows topic → store)", "messages": len(msgs), "rows": want,
            "inserts": role.stats.inserts, "wall_s": round(wall, 3), "rows_per_s": round(want / wall),
            "messages_per_s": round(len(msgs) / wall)}


def _direct(store: Any, label: str, msgs: list[bytes], batch: int) -> dict[str, Any]:
    """The same rows straight into ``Store.insert`` (decoded up front): the store's own rate."""
    from vidnexus.contracts.rows import decode_rows

    by: dict[str, list[tuple[Any, ...]]] = {}
    schemas: dict[str, TableSchema] = {}
    for m in msgs:
        rows, sch = decode_rows(m)
        schemas.update(sch)
        for t, rs in rows.items():
            by.setdefault(t, []).extend(rs)
    n = sum(len(rs) for rs in by.values())
    t0 = time.perf_counter()
    for t, rs in by.items():
        cols = schemas[t].column_names
        for i in range(0, len(rs), batch):
            store.insert(t, cols, rs[i:i + batch])
    wall = time.perf_counter() - t0
    return {"store": label, "path": "Store.insert alone", "messages": len(msgs), "rows": n,
            "inserts": sum((len(rs) + batch - 1) // batch for rs in by.values()), "wall_s": round(wall, 3),
            "rows_per_s": round(n / wall), "messages_per_s": round(len(msgs) / wall)}


def _fresh(store: Any) -> None:
    from vidnexus.connectors.store import ensure_table
    from vidnexus.operators.engine import FRAMES_TABLE

    for schema in (DETECTIONS, FRAMES_TABLE):
        store.execute(f"DROP TABLE IF EXISTS {schema.name}")
        ensure_table(store, schema)


def run(quick: bool, console: Any) -> dict[str, Any]:
    from rich.table import Table

    from vidnexus.config import SINK_MAX_ROWS, load_settings
    from vidnexus.connectors.chdb_store import ChdbStore
    from vidnexus.connectors.clickhouse_store import ClickHouseStore

    n = 2000 if quick else 20000
    max_rows = SINK_MAX_ROWS  # `vidnexus sink`'s default --max-rows
    settings = load_settings()
    msgs = _messages(n, f"b{uuid.uuid4().hex[:4]}")
    results = []

    db = f"vnx_bsink{uuid.uuid4().hex[:8]}"
    base = settings.clickhouse_url.rsplit("/", 1)[0]
    admin = ClickHouseStore(settings.clickhouse_url)
    admin.execute(f"CREATE DATABASE IF NOT EXISTS {db}")
    server = ClickHouseStore(f"{base}/{db}")
    try:
        _fresh(server)
        results.append(_drain(server, "clickhouse server", msgs, settings.kafka_bootstrap, max_rows))
        _fresh(server)
        results.append(_direct(server, "clickhouse server", msgs, max_rows))
        server_version = server.version
    finally:
        server.close()
        admin.execute(f"DROP DATABASE IF EXISTS {db}")
        admin.close()

    with tempfile.TemporaryDirectory(prefix="vnx-bsink-") as tmp:
        chdb = ChdbStore(f"{tmp}/chdb")
        try:
            _fresh(chdb)
            results.append(_drain(chdb, "chdb", msgs, settings.kafka_bootstrap, max_rows))
            _fresh(chdb)
            results.append(_direct(chdb, "chdb", msgs, max_rows))
        finally:
            chdb.close()

    table = Table("store", "path", "messages", "rows", "inserts", "wall s", "rows/s", "messages/s",
                  title=f"rows into the store ({ROWS_PER_FRAME} detection rows + 1 vnx_frames row per message)")
    for r in results:
        table.add_row(r["store"], r["path"], str(r["messages"]), str(r["rows"]), str(r["inserts"]),
                      f"{r['wall_s']:.2f}", f"{r['rows_per_s']:,}", f"{r['messages_per_s']:,}")
    console.print(table)
    sink_server, direct_server, sink_chdb, direct_chdb = results
    summary = {
        "server_rows_per_s": sink_server["rows_per_s"],
        "chdb_rows_per_s": sink_chdb["rows_per_s"],
        "server_store_rows_per_s": direct_server["rows_per_s"],
        "chdb_store_rows_per_s": direct_chdb["rows_per_s"],
        "server_sink_over_store": round(sink_server["rows_per_s"] / direct_server["rows_per_s"], 3),
        "chdb_sink_over_store": round(sink_chdb["rows_per_s"] / direct_chdb["rows_per_s"], 3),
    }
    console.print(f"summary: {summary}")
    return {"name": "sink", "machine": machine_info(),
            "config": {"quick": quick, "messages": n, "rows_per_message": ROWS_PER_FRAME + 1,
                       "sink_max_rows": max_rows, "broker": settings.kafka_bootstrap,
                       "clickhouse_server_version": str(server_version), "bus_driver": settings.kafka_driver},
            "results": results, "summary": summary}
