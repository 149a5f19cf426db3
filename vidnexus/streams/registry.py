"""The stream registry, persisted in the Store (table ``streams``, queryable with SQL), and the
ingest status table ``stream_status`` that running ingest workers keep up to date.

Both are ``ReplacingMergeTree(version)`` tables keyed by stream name and read with ``FINAL``, so every
change is an insert and the newest row wins (this works on ClickHouse 18.16 and on chdb).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from vidnexus.clock import wall_time
from vidnexus.connectors.store import Column, Store, TableSchema, quote
from vidnexus.errors import StreamError
from vidnexus.streams.ingest import StreamSpec, StreamStatus
from vidnexus.streams.sources import ProbeInfo, probe

__all__ = ["StreamRegistry", "RegisteredStream", "STREAMS_TABLE", "STATUS_TABLE"]

STREAMS_TABLE = TableSchema(
    "streams",
    (Column("name", "String"), Column("url", "String"), Column("fps", "Float64"), Column("every_n", "UInt32"),
     Column("keyframes_only", "UInt8"), Column("apps", "Array(String)"), Column("tag_keys", "Array(String)"),
     Column("tag_values", "Array(String)"), Column("state", "String"), Column("probe", "String"),
     Column("updated", "DateTime"), Column("version", "UInt64")),
    order_by=("name",),
    engine="ReplacingMergeTree(version)",
)

STATUS_TABLE = TableSchema(
    "stream_status",
    (Column("name", "String"), Column("state", "String"), Column("reason", "String"), Column("decoded", "UInt64"),
     Column("sampled", "UInt64"), Column("published", "UInt64"), Column("rejected", "UInt64"),
     Column("stale", "UInt64"), Column("errors", "UInt64"), Column("reconnects", "UInt64"),
     Column("last_pts", "Float64"), Column("max_gap_s", "Float64"), Column("worker", "String"),
     Column("updated", "DateTime"), Column("version", "UInt64")),
    order_by=("name",),
    engine="ReplacingMergeTree(version)",
)

STATES = ("enabled", "paused", "removed")


def _version() -> int:
    return time.time_ns() // 1000


@dataclass(frozen=True)
class RegisteredStream:
    spec: StreamSpec
    state: str
    probe: dict[str, Any]


class StreamRegistry:
    """Add, list, pause, resume and remove streams in a Store."""

    def __init__(self, store: Store) -> None:
        self.store = store
        store.create_table(STREAMS_TABLE)
        store.create_table(STATUS_TABLE)

    def _write(self, spec: StreamSpec, state: str, probe_doc: dict[str, Any]) -> None:
        import datetime as dt

        self.store.insert(STREAMS_TABLE.name, STREAMS_TABLE.column_names, [(
            spec.name, spec.url, float(spec.fps or 0.0), int(spec.every_n or 0), int(spec.keyframes_only),
            list(spec.apps), list(spec.tags), list(spec.tags.values()), state, json.dumps(probe_doc),
            dt.datetime.fromtimestamp(int(wall_time())), _version())])

    def add(self, spec: StreamSpec, *, check: bool = True, timeout_s: float = 10.0) -> RegisteredStream:
        """Validate and register. Raises StreamError naming what is wrong."""
        from vidnexus.apps import known_apps

        if not spec.name or not all(c.isalnum() or c in "-_." for c in spec.name):
            raise StreamError(f"stream name {spec.name!r}: use letters, digits, '-', '_' and '.'")
        unknown = [a for a in spec.apps if a not in known_apps()]
        if unknown:
            raise StreamError(f"stream {spec.name}: unknown app(s) {unknown}; known: {sorted(known_apps())}")
        existing = self.get(spec.name, missing_ok=True)
        if existing is not None:
            raise StreamError(f"stream {spec.name} already exists ({existing.spec.url}); remove it first")
        info: dict[str, Any] = {}
        if check:
            p: ProbeInfo = probe(spec.url, timeout_s=timeout_s)
            info = dict(p.__dict__)
        self._write(spec, "enabled", info)
        return RegisteredStream(spec, "enabled", info)

    def list(self, include_removed: bool = False) -> list[RegisteredStream]:
        where = "" if include_removed else "WHERE state != 'removed'"
        res = self.store.query(
            "SELECT name, url, fps, every_n, keyframes_only, apps, tag_keys, tag_values, state, probe "
            f"FROM {STREAMS_TABLE.name} FINAL {where} ORDER BY name")
        out = []
        for name, url, fps, every_n, kf, apps, keys, values, state, pr in res.rows:
            spec = StreamSpec(name, url, fps=fps or None, every_n=every_n or None, keyframes_only=bool(kf),
                              apps=tuple(apps), tags=dict(zip(keys, values)))
            out.append(RegisteredStream(spec, state, json.loads(pr or "{}")))
        return out

    def get(self, name: str, missing_ok: bool = False) -> RegisteredStream | None:
        for r in self.list():
            if r.spec.name == name:
                return r
        if missing_ok:
            return None
        raise StreamError(f"unknown stream {name!r}; see `vidnexus streams list`")

    def set_state(self, name: str, state: str) -> RegisteredStream:
        if state not in STATES:
            raise StreamError(f"unknown stream state {state!r}")
        r = self.get(name)
        assert r is not None
        self._write(r.spec, state, r.probe)
        return RegisteredStream(r.spec, state, r.probe)

    def pause(self, name: str) -> RegisteredStream:
        return self.set_state(name, "paused")

    def resume(self, name: str) -> RegisteredStream:
        return self.set_state(name, "enabled")

    def remove(self, name: str) -> RegisteredStream:
        return self.set_state(name, "removed")

    # -- status written by ingest workers -------------------------------------------------------
    def report(self, statuses: list[StreamStatus], worker: str) -> None:
        import datetime as dt

        now = dt.datetime.fromtimestamp(int(wall_time()))
        v = _version()
        self.store.insert(STATUS_TABLE.name, STATUS_TABLE.column_names, [
            (s.name, s.state, s.reason[:1000], s.decoded, s.sampled, s.published, s.rejected, s.stale, s.errors,
             s.reconnects, s.last_pts, s.max_gap_s, worker, now, v) for s in statuses])

    def status(self, name: str) -> dict[str, Any] | None:
        res = self.store.query(f"SELECT * FROM {STATUS_TABLE.name} FINAL WHERE name = {quote(name)}")
        return res.dicts()[0] if res.rows else None
