"""The stream registry, persisted in the Store (table ``streams``, queryable with SQL), and the
ingest status table ``stream_status`` that running ingest workers keep up to date.

Both are ``ReplacingMergeTree(version)`` tables keyed by stream name and read with ``FINAL``, so every
change is an insert and the newest row wins (this works on ClickHouse 18.16 and on chdb). Opening the
registry adds the columns newer versions need to tables an older version made
(:func:`~vidnexus.connectors.store.ensure_table`).

The registry is the door: :meth:`StreamRegistry.add` validates the spec (``StreamSpec``), stores local
paths absolute and ``file://`` URLs decoded, and probes the source. Reading never fails on a row:
one that no longer validates (written by an older version) is listed with ``state='invalid'`` and the
reason in ``problem``, and ingest skips it.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

from vidnexus.clock import wall_time
from vidnexus.contracts.schema import Column, TableSchema
from vidnexus.connectors.store import Store, ensure_table, quote
from vidnexus.errors import StreamError
from vidnexus.streams.ingest import StreamStatus
from vidnexus.streams.sources import ProbeInfo, probe
from vidnexus.streams.spec import StreamSpec, normalize_url

__all__ = ["StreamRegistry", "RegisteredStream", "STREAMS_TABLE", "STATUS_TABLE"]

STREAMS_TABLE = TableSchema(
    "streams",
    (Column("name", "String"), Column("url", "String"), Column("fps", "Float64"), Column("every_n", "UInt32"),
     Column("keyframes_only", "UInt8"), Column("apps", "Array(String)"), Column("tag_keys", "Array(String)"),
     Column("tag_values", "Array(String)"), Column("state", "String"), Column("probe", "String"),
     Column("updated", "DateTime"), Column("version", "UInt64"),
     # Added later (ensure_table migrates older tables; their rows read as 0: the defaults below).
     Column("jpeg_quality", "UInt8"),  # 0: the default, 85
     Column("max_side", "UInt32"),  # 0: no downscaling
     Column("realtime", "UInt8"),
     Column("stop_on_corrupt", "UInt8"),  # not skip_corrupt, so that rows from before it skip by default
     Column("until_s", "Float64"),  # 0: the whole file
     Column("speed", "Float64"),  # 0: 1.0 (a realtime file at its own pace)
     Column("backfill", "UInt8")),  # 0: live
    order_by=("name",),
    engine="ReplacingMergeTree(version)",
)

STATUS_TABLE = TableSchema(
    "stream_status",
    (Column("name", "String"), Column("state", "String"), Column("reason", "String"), Column("decoded", "UInt64"),
     Column("sampled", "UInt64"), Column("published", "UInt64"), Column("rejected", "UInt64"),
     Column("stale", "UInt64"), Column("errors", "UInt64"), Column("corrupt", "UInt64"), Column("reconnects", "UInt64"),
     Column("last_pts", "Float64"), Column("max_gap_s", "Float64"), Column("worker", "String"),
     Column("updated", "DateTime"), Column("version", "UInt64"),
     # Added later (a restarted ingest continues a registration's counters and frame numbers).
     Column("spec_key", "UInt64"), Column("last_frame_no", "Int64"), Column("origin_wall", "Float64"),
     Column("undelivered", "UInt64")),
    order_by=("name",),
    engine="ReplacingMergeTree(version)",
)

STATES = ("enabled", "paused", "removed")
MAX_PROBE_TIMEOUT_S = 3600.0  # as `streams add --timeout` allows
_COLUMNS = ("name", "url", "fps", "every_n", "keyframes_only", "apps", "tag_keys", "tag_values", "state", "probe",
            "jpeg_quality", "max_side", "realtime", "stop_on_corrupt", "until_s", "speed", "backfill")


_last_version = 0


def _version() -> int:
    """Microseconds of wall-clock time, strictly increasing within this process (the newest row of a
    ReplacingMergeTree wins, so two writes in one microsecond must not tie)."""
    global _last_version
    _last_version = max(_last_version + 1, int(wall_time() * 1_000_000))
    return _last_version


@dataclass(frozen=True)
class RegisteredStream:
    """A registry row. ``state`` is ``enabled``, ``paused``, ``removed``, or ``invalid`` when the row no
    longer validates (``problem`` says why; ``spec`` then holds the stored values unchecked)."""

    spec: StreamSpec
    state: str
    probe: dict[str, Any]
    problem: str = ""


def registered_from_row(row: Sequence[Any]) -> RegisteredStream:
    """A stored row (columns ``_COLUMNS``) as a RegisteredStream; never raises.

    Rows keep meaning what ingest did with them when they were written: ``every_n`` or keyframes win
    over a stored ``fps``, and 0 in a column added later means its default.
    """
    name, url, fps, every_n, kf, apps, keys, values, state, pr, quality, max_side, realtime, stop, until, speed, bf = row
    problem = ""
    if every_n or kf:
        fps = None
    elif fps is None or (isinstance(fps, float) and not math.isfinite(fps)):
        # chdb returns a stored inf or nan as NULL
        problem = (f"stream {name}: the stored fps is not a finite number (inf or nan, written by an older "
                   "version); use a finite number > 0")
        fps = math.nan
    fields: dict[str, Any] = dict(
        name=name, url=url, fps=fps or None, every_n=every_n or None, keyframes_only=bool(kf), apps=tuple(apps or ()),
        tags=dict(zip(keys or (), values or ())), jpeg_quality=quality or 85, max_side=max_side or None,
        realtime=bool(realtime), speed=speed or 1.0, skip_corrupt=not stop, until_s=until or None, backfill=bool(bf))
    try:
        spec = StreamSpec(**fields, check=not problem)
    except Exception as e:  # StreamError, or a TypeError from a value no version should have written
        problem = str(e)
        spec = StreamSpec(**fields, check=False)
    try:
        probe_doc = json.loads(pr or "{}")
    except ValueError:
        probe_doc = {}
    if not isinstance(probe_doc, dict):
        probe_doc = {}
    if problem and state != "removed":
        state = "invalid"
    return RegisteredStream(spec, state, probe_doc, problem)


class StreamRegistry:
    """Add, list, pause, resume and remove streams in a Store."""

    def __init__(self, store: Store) -> None:
        self.store = store
        ensure_table(store, STREAMS_TABLE)
        ensure_table(store, STATUS_TABLE)

    def _write(self, spec: StreamSpec, state: str, probe_doc: dict[str, Any]) -> None:
        import datetime as dt

        row = {
            "name": spec.name, "url": spec.url, "fps": float(spec.fps or 0.0), "every_n": int(spec.every_n or 0),
            "keyframes_only": int(spec.keyframes_only), "apps": list(spec.apps), "tag_keys": list(spec.tags),
            "tag_values": list(spec.tags.values()), "state": state, "probe": json.dumps(probe_doc),
            "updated": dt.datetime.fromtimestamp(int(wall_time())), "version": _version(),
            "jpeg_quality": spec.jpeg_quality, "max_side": spec.max_side or 0, "realtime": int(spec.realtime),
            "stop_on_corrupt": int(not spec.skip_corrupt), "until_s": float(spec.until_s or 0.0),
            "speed": float(spec.speed), "backfill": int(spec.backfill)}
        names = STREAMS_TABLE.column_names
        self.store.insert(STREAMS_TABLE.name, names, [tuple(row[c] for c in names)])

    def add(self, spec: StreamSpec, *, check: bool = True, timeout_s: float = 10.0,
            overwrite: bool = False) -> RegisteredStream:
        """Validate and register: a local path is stored absolute (relative to this process's working
        directory) and a ``file://`` URL decoded; with ``check`` the source is probed first.

        ``spec.apps`` are app names, checked by the caller (the CLI loads each app). With ``overwrite``
        a stream of the same name is registered anew instead of refused.

        Raises:
            StreamError: one line naming the stream and what is wrong.
        """
        ok = isinstance(timeout_s, (int, float)) and math.isfinite(timeout_s)
        if not (ok and 0 < timeout_s <= MAX_PROBE_TIMEOUT_S):
            raise StreamError(f"stream {spec.name}: probe timeout {timeout_s!r} s is not allowed; use a number of "
                              f"seconds > 0 and <= {MAX_PROBE_TIMEOUT_S:g}")
        try:
            spec = replace(spec, url=normalize_url(spec.url, os.getcwd()))
        except StreamError as e:
            raise StreamError(f"stream {spec.name}: {e}") from None
        existing = self.get(spec.name, missing_ok=True)
        if existing is not None and not overwrite:
            raise StreamError(f"stream {spec.name} already exists ({existing.spec.url}); remove it first")
        info: dict[str, Any] = {}
        if check:
            try:
                p: ProbeInfo = probe(spec.url, timeout_s=timeout_s)
            except StreamError as e:
                raise StreamError(f"stream {spec.name}: {e}") from None
            info = dict(p.__dict__)
        self._write(spec, "enabled", info)
        # A registration starts afresh: an ingest (re)started later does not continue the counters
        # and frame numbers of the registration this one replaces.
        self.report([StreamStatus(spec.name, state="registered")], "")
        return RegisteredStream(spec, "enabled", info)

    def list(self, include_removed: bool = False) -> list[RegisteredStream]:
        """Every stream (but removed ones unless asked), including rows that no longer validate
        (``state='invalid'``)."""
        where = "" if include_removed else "WHERE state != 'removed'"
        res = self.store.query(f"SELECT {', '.join(_COLUMNS)} FROM {STREAMS_TABLE.name} FINAL {where} ORDER BY name")
        return [registered_from_row(row) for row in res.rows]

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
        if r.problem and state == "enabled":
            raise StreamError(f"{r.problem}; it cannot be resumed: remove stream {name} and add it again")
        self._write(r.spec, state, r.probe)
        shown = "invalid" if r.problem and state != "removed" else state
        return RegisteredStream(r.spec, shown, r.probe, r.problem)

    def set_tags(self, name: str, tags: Mapping[str, str]) -> RegisteredStream:
        """Replace a stream's tags (its counting lines and zones among them), keeping its state,
        probe and ingest's counters: a running ingest restarts the stream with the new tags and
        continues its frame numbers (the tags are not part of :attr:`StreamSpec.key`).

        Raises:
            StreamError: an unknown stream, or tags that do not validate.
        """
        r = self.get(name)
        assert r is not None
        spec = replace(r.spec, tags=dict(tags))  # validated by StreamSpec
        self._write(spec, r.state if r.state in STATES else "enabled", r.probe)
        return RegisteredStream(spec, r.state, r.probe, r.problem)

    def pause(self, name: str) -> RegisteredStream:
        return self.set_state(name, "paused")

    def resume(self, name: str) -> RegisteredStream:
        return self.set_state(name, "enabled")

    def remove(self, name: str) -> RegisteredStream:
        return self.set_state(name, "removed")

    # -- status written by ingest workers -------------------------------------------------------
    def report(self, statuses: Sequence[StreamStatus], worker: str) -> None:
        import datetime as dt

        now = dt.datetime.fromtimestamp(int(wall_time()))
        v = _version()
        self.store.insert(STATUS_TABLE.name, STATUS_TABLE.column_names, [
            (s.name, s.state, s.reason[:1000], s.decoded, s.sampled, s.published, s.rejected, s.stale, s.errors,
             s.corrupt, s.reconnects, s.last_pts, s.max_gap_s, worker, now, v, s.spec_key, s.last_frame_no,
             s.origin_wall, s.undelivered) for s in statuses])

    def statuses(self) -> dict[str, StreamStatus]:
        """The last status ingest reported for every stream (what a restarted ingest continues)."""
        res = self.store.query(f"SELECT name, state, reason, decoded, sampled, published, rejected, stale, errors, "
                               f"corrupt, reconnects, last_pts, max_gap_s, spec_key, last_frame_no, origin_wall, "
                               f"undelivered "
                               f"FROM {STATUS_TABLE.name} FINAL")
        out = {}
        for (name, state, reason, decoded, sampled, published, rejected, stale, errors, corrupt, reconnects, last_pts,
             max_gap_s, key, last_no, origin, undelivered) in res.rows:
            out[name] = StreamStatus(name, state, reason, decoded=decoded, sampled=sampled, published=published,
                                     rejected=rejected, stale=stale, errors=errors, corrupt=corrupt,
                                     reconnects=reconnects, last_pts=last_pts or 0.0, max_gap_s=max_gap_s or 0.0,
                                     spec_key=int(key or 0), last_frame_no=-1 if last_no is None else int(last_no),
                                     origin_wall=float(origin or 0.0), undelivered=int(undelivered or 0))
        return out

    def status(self, name: str) -> dict[str, Any] | None:
        """The last status ingest reported (None before it has reported on this registration)."""
        res = self.store.query(f"SELECT * FROM {STATUS_TABLE.name} FINAL WHERE name = {quote(name)} "
                               f"AND state != 'registered'")
        return res.dicts()[0] if res.rows else None
