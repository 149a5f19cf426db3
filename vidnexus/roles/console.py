"""The console role's HTTP API: streams, apps, models, the current plan, recent drops and read-only
SQL over one store, with an OpenAPI document (``vidnexus console``; docs/api.md).

Every path is under ``/api/v1`` and answers JSON. Reads take either token, changes (adding, pausing,
resuming, removing a stream) only the admin token; both come as ``Authorization: Bearer TOKEN``.
A missing or wrong token is 401 (and after a few from one address, 429 with ``Retry-After``: the
SQL endpoint's :class:`~vidnexus.sql_endpoint.AuthBackoff`); a read token on a change is 403.
Validation errors are 422 and name the field (``{"detail": [{"loc": ["body", "fps"], "msg": …}]}``);
an unknown stream, app or model is 404, a stream name already registered 409.

Every change goes through :class:`~vidnexus.streams.registry.StreamRegistry`, the code behind
``vidnexus streams …``; SQL goes through the same guard as ``vidnexus sql-server``.

Example:
    >>> Tokens("r" * 16, "a" * 16).role("Bearer " + "a" * 16)
    'admin'
    >>> Tokens("r" * 16, "a" * 16).role("Bearer nope") is None
    True
"""

from __future__ import annotations

import hmac
import json
import math
import threading
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Literal, Mapping, Optional

from fastapi import Body, Depends, FastAPI, HTTPException, Path, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from vidnexus.clock import Clock, MonotonicClock
from vidnexus.connectors.store import Store
from vidnexus.clock import wall_time as wall
from vidnexus.connectors.bus import Bus
from vidnexus.contracts.plans import EpochPlan, decode_plan, encode_plan
from vidnexus.contracts.reports import AppReport, FanOut, decode_report
from vidnexus.contracts.stats import ExecutorStats, decode_stats
from vidnexus.contracts.topics import Topics
from vidnexus.errors import CodecError, StreamError, VidnexusError

__all__ = ["API_PREFIX", "Tokens", "ControlWatcher", "ConsoleServer", "build_api", "openapi_document"]

API_PREFIX = "/api/v1"
MAX_BODY_BYTES = 200_000
"""Longest request body read (413 past it): a stream, or one SQL statement."""

Role = Literal["read", "admin"]


@dataclass(frozen=True)
class Tokens:
    """The read-only token and the admin token (each at least 16 characters, not the same)."""

    read: str = field(repr=False)
    admin: str = field(repr=False)

    def __post_init__(self) -> None:
        if len(self.read) < 16 or len(self.admin) < 16:
            raise VidnexusError("console tokens must be at least 16 characters")
        if hmac.compare_digest(self.read.encode(), self.admin.encode()):
            raise VidnexusError("the console's read token and admin token must differ")

    def role(self, authorization: str) -> Role | None:
        """Which token ``Authorization: Bearer …`` carries (constant-time compares), or None."""
        given = (authorization[7:].strip() if authorization.lower().startswith("bearer ") else "").encode()
        admin = hmac.compare_digest(given, self.admin.encode())
        read = hmac.compare_digest(given, self.read.encode())
        return "admin" if admin else "read" if read else None


class StreamIn(BaseModel):
    """A stream to register (the fields of ``vidnexus streams add``)."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,200}$", description="letters, digits, '-', '_', '.'")
    url: str = Field(min_length=1, max_length=4096, description="file path, rtsp://, http(s):// or synthetic://")
    fps: Optional[float] = Field(None, ge=0.001, le=1000.0, allow_inf_nan=False,
                                 description="sample this many frames per second")
    every_n: Optional[int] = Field(None, ge=1, le=2**32 - 1, description="or every n-th frame")
    keyframes: bool = False
    apps: list[str] = Field(default_factory=list, description="apps this stream feeds (names or module:attr)")
    tags: dict[str, str] = Field(default_factory=dict, description="k=v tags; line.NAME=x1,y1,x2,y2 counts, "
                                                                   "zone.NAME=x1,y1,x2,y2,x3,y3[,…] records dwell")
    quality: int = Field(85, ge=1, le=100)
    max_side: Optional[int] = Field(None, ge=16, le=16384)
    mode: Literal["live", "backfill"] = Field("live", description="live, or backfill: delay-tolerant re-processing "
                                              "of stored video in the slack the live streams leave (its frames "
                                              "need a backfill worker: `vidnexus worker APP --backfill`)")
    rate: Optional[str] = Field(None, description="realtime, max or a factor of real time (default realtime; max "
                                                   "for a backfill)")
    until: Optional[float] = Field(None, ge=0.001, allow_inf_nan=False,
                                   description="stop a file after this many seconds of video")
    skip_corrupt: bool = True
    probe: bool = Field(True, description="probe the URL before accepting it")
    timeout: float = Field(10.0, ge=0.1, le=60.0, allow_inf_nan=False, description="probe timeout (s)")


class TagsIn(BaseModel):
    """A stream's tags, all of them (what is not here is removed)."""

    model_config = ConfigDict(extra="forbid")
    tags: dict[str, str] = Field(description="k=v tags; line.NAME=x1,y1,x2,y2 counts crossings, "
                                             "zone.NAME=x1,y1,x2,y2,x3,y3[,…] records dwell")


class SqlIn(BaseModel):
    """One read-only statement."""

    model_config = ConfigDict(extra="forbid")
    query: str = Field(min_length=1)


def redact_url(url: str) -> str:
    """A URL with its password hidden (a camera's ``rtsp://user:secret@host`` is read-token readable).

    >>> redact_url("rtsp://cam:s3cret@10.0.0.5:554/live"), redact_url("/videos/a.mp4")
    ('rtsp://cam:***@10.0.0.5:554/live', '/videos/a.mp4')
    """
    from urllib.parse import urlsplit, urlunsplit

    try:
        u = urlsplit(url)
    except ValueError:
        return url
    if u.password is None:
        return url
    host = u.netloc.rpartition("@")[2]
    return urlunsplit(u._replace(netloc=f"{u.username or ''}:***@{host}"))


def _finite(v: float) -> float | None:
    return round(v, 2) if isinstance(v, (int, float)) and math.isfinite(v) else None


def _fanout(reports: list[AppReport]) -> dict[str, Any] | None:
    """The fan-out the app's workers measured (requests per parent call along each edge), summed
    over its workers; None before any report."""
    if not reports:
        return None
    ok: Counter[str] = Counter()
    edges: Counter[tuple[str, str]] = Counter()
    for r in reports:
        ok.update(r.fanout.ok)
        edges.update(r.fanout.edges)
    fo = FanOut(frames=sum(r.fanout.frames for r in reports), ok=dict(ok), edges=dict(edges))

    def gamma(parent: str, child: str) -> float | None:
        g = fo.gamma(parent, child)
        return None if g is None else round(g, 3)

    return {"workers": len(reports), "frames": fo.frames,
            "edges": [{"parent": p, "child": c, "requests": n, "gamma": gamma(p, c)}
                      for (p, c), n in sorted(fo.edges.items())]}


def _stream_doc(r: Any, status: dict[str, Any] | None = None) -> dict[str, Any]:
    from vidnexus.streams.spec import rate_text

    s = r.spec
    doc = {"name": s.name, "state": r.state, "problem": r.problem or None, "url": redact_url(s.url),
           "fps": s.fps, "every_n": s.every_n, "keyframes": bool(s.keyframes_only), "apps": list(s.apps),
           "tags": dict(s.tags), "quality": s.jpeg_quality, "max_side": s.max_side, "rate": rate_text(s),
           "until": s.until_s, "skip_corrupt": bool(s.skip_corrupt), "mode": "backfill" if s.backfill else "live",
           "probe": r.probe or None}
    if status is not None:
        doc["status"] = {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in status.items()}
    return doc


class ControlWatcher:
    """What the control plane says on the bus, read on demand: the scheduler's newest plan (the
    compacted control topic, from its beginning), each executor's latest stats and each worker's
    latest app report (from now on). An observer: malformed documents are counted and skipped (the
    scheduler, which acts on them, dead-letters them).

    Example:
        >>> from vidnexus.connectors.memory_bus import MemoryBus
        >>> from vidnexus.contracts.plans import encode_plan
        >>> bus, topics = MemoryBus(), Topics("doc")
        >>> w = ControlWatcher(bus, topics)
        >>> bus.publish(topics.control, b"plan", encode_plan(EpochPlan(1, 3, 0.0)))
        >>> bus.publish(topics.control, b"plan", b"not a plan")
        >>> w.plan().epoch, w.malformed
        (3, 1)
    """

    def __init__(self, bus: Bus, topics: Topics) -> None:
        for topic, compacted in ((topics.control, True), (topics.stats, False), (topics.apps, False)):
            bus.create_topic(topic, 1, compacted=compacted)
        self.topics = topics
        self._control = bus.subscribe([topics.control], group=None, from_beginning=True)
        self._live = bus.subscribe([topics.stats, topics.apps], group=None, from_beginning=False)
        self._lock = threading.Lock()
        self._plan: EpochPlan | None = None
        self._stats: dict[str, ExecutorStats] = {}
        self._reports: dict[str, AppReport] = {}
        self.malformed = 0

    def refresh(self) -> None:
        """Read what arrived since the last call (without waiting)."""
        with self._lock:
            for consumer in (self._control, self._live):
                while batch := consumer.poll(timeout_s=0.0):
                    for m in batch:
                        try:
                            if m.topic == self.topics.control:
                                p = decode_plan(m.value)
                                if p.supersedes(self._plan):
                                    self._plan = p
                            elif m.topic == self.topics.stats:
                                st = decode_stats(m.value)
                                self._stats[st.executor] = st
                            else:
                                r = decode_report(m.value)
                                self._reports[r.key] = r
                        except CodecError:
                            self.malformed += 1

    def plan(self) -> EpochPlan | None:
        self.refresh()
        return self._plan

    def stats(self) -> list[ExecutorStats]:
        self.refresh()
        return sorted(self._stats.values(), key=lambda s: s.executor)

    def reports(self, app: str) -> list[AppReport]:
        self.refresh()
        return [r for _, r in sorted(self._reports.items()) if r.app == app]

    def close(self) -> None:
        self._control.close()
        self._live.close()


def build_api(store: Store, tokens: Tokens, *, control: ControlWatcher | None = None,
              repository: Callable[[], Any] | None = None, apps: Mapping[str, Any] | None = None,
              sql_store: Store | None = None, clock: Clock | None = None, sql_limits: Any = None,
              tap: Any = None, pages: bool = True) -> Any:
    """The FastAPI application over ``store`` (served by :class:`ConsoleServer`).

    Args:
        control: the plans, executor stats and app reports on the bus (without it ``/plan`` and
            ``/sessions`` are 404 saying there is no bus to read them from).
        repository: the model repository (``vidnexus.roles.executor.repository``).
        apps: apps to show beside the built-in ones (an embedded run's own app), by name.
        sql_store: the store ``/sql`` reads through (``vidnexus console`` opens one as the
            server's read-only user, as ``vidnexus sql-server`` does); default ``store``.
        tap: a :class:`~vidnexus.roles.console_pages.FrameTap` for the streams page's thumbnails.
        pages: serve the web console's pages (:mod:`vidnexus.roles.console_pages`) beside the API.
    """
    from vidnexus.sql_endpoint import AuthBackoff, EndpointLimits, run_query
    from vidnexus.sql_guard import SqlGuard
    from vidnexus.streams.registry import StreamRegistry

    clock = clock or MonotonicClock()
    limits = sql_limits or EndpointLimits()
    extra_apps = dict(apps or {})
    made: dict[str, Any] = {}  # the registry and the SQL guard, made on first use (they touch the store)

    made_lock = threading.Lock()

    def registry_() -> StreamRegistry:
        with made_lock:
            if "registry" not in made:
                made["registry"] = StreamRegistry(store)
            return made["registry"]  # type: ignore[no-any-return]

    def guard_() -> SqlGuard:
        with made_lock:
            if "guard" not in made:
                made["guard"] = SqlGuard(sql_store if sql_store is not None else store)
            return made["guard"]  # type: ignore[no-any-return]

    backoff, backoff_lock = AuthBackoff(), threading.Lock()

    api = FastAPI(title="vidnexus console API", version="1",
                  description="Streams, apps, models, the current plan, recent drops and read-only SQL. "
                              "Authorization: Bearer TOKEN (read token for GET and SQL, admin token for changes).",
                  openapi_url=f"{API_PREFIX}/openapi.json", docs_url=None, redoc_url=None,  # no CDN pages
                  max_body_size=MAX_BODY_BYTES)

    def auth(need: Role) -> Callable[[Request], Role]:
        def check(request: Request) -> Role:
            client = request.client.host if request.client else "?"
            now = clock.now()
            with backoff_lock:
                wait = backoff.blocked_for(client, now)
            if wait > 0:
                raise HTTPException(429, f"too many wrong tokens from this address; retry in {math.ceil(wait)} s",
                                    headers={"Retry-After": str(math.ceil(wait))})
            role = tokens.role(request.headers.get("authorization", ""))
            with backoff_lock:
                if role is None:
                    backoff.failed(client, now)
                else:
                    backoff.succeeded(client)
            if role is None:
                raise HTTPException(401, "missing or wrong token (Authorization: Bearer TOKEN)",
                                    headers={"WWW-Authenticate": "Bearer"})
            if need == "admin" and role != "admin":
                raise HTTPException(403, "this change needs the admin token; the read token only reads")
            return role
        return check

    reader, admin = Depends(auth("read")), Depends(auth("admin"))

    def field_error(name: str, msg: str, code: int = 422) -> HTTPException:
        """An error in FastAPI's validation shape, naming the body field (``""``: the body as a whole)."""
        return HTTPException(code, [{"loc": ["body", name] if name else ["body"], "msg": msg, "type": "value_error"}])

    # -- health ---------------------------------------------------------------------------------
    @api.get(f"{API_PREFIX}/health", tags=["health"], summary="Liveness (no token)")
    def health() -> dict[str, Any]:
        return {"ok": True}

    # -- streams --------------------------------------------------------------------------------
    @api.get(f"{API_PREFIX}/streams", tags=["streams"], summary="Registered streams, with ingest's last status")
    def list_streams(all: bool = Query(False, description="include removed streams"),  # noqa: A002
                     _: Role = reader) -> list[dict[str, Any]]:
        rows = registry_().list(include_removed=all)
        statuses = {n: asdict(s) for n, s in registry_().statuses().items()}
        return [_stream_doc(r, statuses.get(r.spec.name)) for r in rows]

    def _get(name: str) -> Any:
        r = registry_().get(name, missing_ok=True)
        if r is None:
            raise HTTPException(404, f"unknown stream {name!r}")
        return r

    @api.get(f"{API_PREFIX}/streams/{{name}}", tags=["streams"], summary="One stream: registration, probe, status")
    def show_stream(name: str = Path(...), _: Role = reader) -> dict[str, Any]:
        r = _get(name)
        return _stream_doc(r, registry_().status(name))

    @api.post(f"{API_PREFIX}/streams", tags=["streams"], status_code=201,
              summary="Register a stream (probed first unless probe is false)")
    def add_stream(body: StreamIn = Body(...), _: Role = admin) -> dict[str, Any]:
        return _add(body)

    def _add(body: StreamIn) -> dict[str, Any]:
        from vidnexus.apps import APP_REFS
        from vidnexus.operators.zones import parse_geometry
        from vidnexus.streams.ingest import StreamSpec
        from vidnexus.streams.spec import parse_rate

        try:
            realtime, speed = parse_rate(body.rate or ("max" if body.mode == "backfill" else "realtime"))
        except StreamError as e:
            raise field_error("rate", str(e).replace("--rate ", "rate ")) from None
        try:
            parse_geometry(body.tags)
        except ValueError as e:
            raise field_error("tags", str(e)) from None
        apps = []
        for ref in body.apps:  # the apps this console knows: no importing of arbitrary modules over HTTP
            if ref not in APP_REFS and ref not in extra_apps:
                raise field_error("apps", f"unknown app {ref!r}; the apps: {', '.join(sorted({*APP_REFS, *extra_apps}))}")
            apps.append(ref)
        try:
            spec = StreamSpec(body.name, body.url, fps=body.fps, every_n=body.every_n, keyframes_only=body.keyframes,
                              apps=tuple(dict.fromkeys(apps)), tags=body.tags, jpeg_quality=body.quality,
                              max_side=body.max_side, realtime=realtime, speed=speed, skip_corrupt=body.skip_corrupt,
                              until_s=body.until, backfill=body.mode == "backfill")
        except StreamError as e:
            raise field_error("", str(e)) from None
        if registry_().get(body.name, missing_ok=True) is not None:
            raise field_error("name", f"stream {body.name!r} is already registered; remove it first", 409)
        try:  # probed outside any lock (up to its timeout); the registry refuses a name taken meanwhile
            r = registry_().add(spec, check=body.probe, timeout_s=body.timeout)
        except StreamError as e:
            taken = registry_().get(body.name, missing_ok=True) is not None
            raise field_error("name" if taken else "url", str(e), 409 if taken else 422) from None
        return _stream_doc(r)

    def _change(name: str, how: Callable[[str], Any]) -> dict[str, Any]:
        _get(name)
        try:
            return _stream_doc(how(name))
        except StreamError as e:
            raise HTTPException(409, str(e)) from None

    @api.post(f"{API_PREFIX}/streams/{{name}}/pause", tags=["streams"], summary="Stop ingesting a stream")
    def pause_stream(name: str, _: Role = admin) -> dict[str, Any]:
        return _change(name, lambda n: registry_().pause(n))

    @api.post(f"{API_PREFIX}/streams/{{name}}/resume", tags=["streams"], summary="Resume a paused stream")
    def resume_stream(name: str, _: Role = admin) -> dict[str, Any]:
        return _change(name, lambda n: registry_().resume(n))

    @api.put(f"{API_PREFIX}/streams/{{name}}/tags", tags=["streams"],
             summary="Replace a stream's tags: its counting lines (line.NAME) and zones (zone.NAME)")
    def set_tags(name: str, body: TagsIn = Body(...), _: Role = admin) -> dict[str, Any]:
        from vidnexus.operators.zones import parse_geometry

        _get(name)
        try:
            parse_geometry(body.tags)
        except ValueError as e:
            raise field_error("tags", str(e)) from None
        try:
            return _stream_doc(registry_().set_tags(name, body.tags))
        except StreamError as e:
            raise field_error("tags", str(e)) from None

    @api.delete(f"{API_PREFIX}/streams/{{name}}", tags=["streams"], summary="Remove a stream")
    def remove_stream(name: str, _: Role = admin) -> dict[str, Any]:
        return _change(name, lambda n: registry_().remove(n))

    # -- apps -----------------------------------------------------------------------------------
    @api.get(f"{API_PREFIX}/apps", tags=["apps"], summary="The built-in apps")
    def list_apps(_: Role = reader) -> list[dict[str, Any]]:
        return _apps()

    def _apps() -> list[dict[str, Any]]:
        from vidnexus.apps import known_apps

        listed = {**known_apps(), **{n: "" for n in extra_apps if n not in known_apps()}}
        return [{"name": n, "description": d} for n, d in sorted(listed.items())]

    @api.get(f"{API_PREFIX}/apps/{{name}}", tags=["apps"],
             summary="An app: SLO, DNN graph, tables, each stage's budget (the plan's split when there is one)")
    def show_app(name: str, _: Role = reader) -> dict[str, Any]:
        from vidnexus.apps import APP_REFS, known_apps, load_app
        from vidnexus.operators.infer import stage_slos

        if name not in APP_REFS and name not in extra_apps:
            raise HTTPException(404, f"unknown app {name!r}; the apps: {', '.join(sorted({*APP_REFS, *extra_apps}))}")
        a = extra_apps[name] if name in extra_apps else load_app(name)
        g = a.graph()
        doc: dict[str, Any] = {"name": a.name, "description": known_apps().get(name, ""), "slo_ms": a.slo_ms,
                               "ordered": a.ordered, "models": list(g.models), "edges": [list(e) for e in g.edges],
                               "tables": sorted(a.tables), "even_split_ms": stage_slos(a), "split": None}
        p = control.plan() if control is not None else None
        doc["fanout"] = _fanout(control.reports(name)) if control is not None else None
        if p is not None and name in p.splits:
            s = p.splits[name]
            doc["split"] = {"ok": s.ok, "reason": s.reason, "budgets_ms": s.budgets_ms, "even_ms": s.even_ms,
                            "gamma": s.gamma, "gain": s.gain, "reserve_ms": s.reserve_ms, "epoch": p.epoch}
        return doc

    # -- models ---------------------------------------------------------------------------------
    def _repo() -> Any:
        if repository is None:
            raise HTTPException(404, "this console has no model repository")
        return repository()

    def _model_doc(m: Any, repo: Any) -> dict[str, Any]:
        return {"name": m.name, "version": m.version, "task": m.task, "input_shape": list(m.input_shape),
                "source": m.source, "description": m.description, "builtin": m.builtin, "images": m.images,
                "prefix": m.prefix, "weights": repo.weights_of(m)}

    @api.get(f"{API_PREFIX}/models", tags=["models"], summary="The zoo, the apps' models and registered models")
    def list_models(_: Role = reader) -> list[dict[str, Any]]:
        repo = _repo()
        return [_model_doc(m, repo) for m in repo.list()]

    @api.get(f"{API_PREFIX}/models/{{name}}", tags=["models"], summary="One model and its stored profiles")
    def show_model(name: str, _: Role = reader) -> dict[str, Any]:
        from vidnexus.contracts.profile import Profile
        from vidnexus.errors import ModelError

        repo = _repo()
        try:
            m = repo.get(name)
        except ModelError as e:
            raise HTTPException(404, str(e)) from None
        profiles = []
        for path in sorted((repo.directory.parent / "profiles").glob(f"{name}@*.json")):
            prof = Profile.from_dict(json.loads(path.read_text()))
            a, b = prof.fit()
            profiles.append({"key": path.stem.split("@", 1)[1], "batches": list(prof.sizes),
                             "latency_ms": [round(prof.latency(s) * 1000, 3) for s in prof.sizes],
                             "fit_ms": {"per_item": round(a * 1000, 4), "fixed": round(b * 1000, 4)}})
        return {**_model_doc(m, repo), "profiles": profiles}

    # -- plan -----------------------------------------------------------------------------------
    def _control() -> ControlWatcher:
        if control is None:
            raise HTTPException(404, "this console reads no control plane (run it with VNX_BUS=kafka, or inside "
                                     "`vidnexus run --console-port`)")
        return control

    @api.get(f"{API_PREFIX}/plan", tags=["plan"],
             summary="The scheduler's newest plan: executors, sessions per executor and batch, rates, splits")
    def current_plan(_: Role = reader) -> dict[str, Any]:
        p = _control().plan()
        if p is None:
            raise HTTPException(404, "no plan yet: the scheduler has not published one")
        doc: dict[str, Any] = json.loads(encode_plan(p))
        return doc

    @api.get(f"{API_PREFIX}/sessions", tags=["plan"],
             summary="Every executor's sessions: planned and running batch, rate, latency, SLO attainment, drops")
    def sessions(_: Role = reader) -> dict[str, Any]:
        return _sessions(_control())

    def _sessions(c: ControlWatcher) -> dict[str, Any]:
        p = c.plan()
        now = wall()
        out = []
        for st in c.stats():
            planned = p.assignment_of(st.executor) if p is not None else {}
            out.append({"executor": st.executor, "device": st.device, "age_s": round(max(0.0, now - st.ts), 1),
                        "every_s": st.every_s, "serving": list(st.serving), "sessions": [
                            {"session": x.session, "model": x.model, "slo_ms": x.slo_ms, "origin": x.origin,
                             "batch": st.targets.get(x.session), "planned_batch": planned.get(x.session),
                             "rate": round(x.rate_recent, 2), "arrivals": x.arrivals, "replies": x.replies,
                             "within_slo": round(x.within_slo / x.arrivals, 4) if x.arrivals else None,
                             "drops": dict(x.drops), "mean_batch": round(x.mean_batch, 2),
                             "latency_p50_ms": _finite(x.latency_p50_ms), "latency_p99_ms": _finite(x.latency_p99_ms),
                             "queue_p50_ms": _finite(x.queue_p50_ms),
                             "device_busy": round(x.device_busy_fraction, 4)} for x in st.sessions]})
        return {"epoch": p.epoch if p is not None else None, "devices": p.devices if p is not None else None,
                "executors": out}

    # -- drops ----------------------------------------------------------------------------------
    @api.get(f"{API_PREFIX}/drops", tags=["results"],
             summary="Frames by outcome and drops by reason over the last minutes, per app")
    def drops(minutes: float = Query(10.0, gt=0, le=7 * 24 * 60), _: Role = reader) -> dict[str, Any]:
        return _drops(minutes)

    def _drops(minutes: float) -> dict[str, Any]:
        from vidnexus.operators.engine import FRAMES_TABLE, parse_reasons

        since = wall() - minutes * 60
        if not store.query(f"EXISTS TABLE {FRAMES_TABLE.name}").scalar():
            return {"minutes": minutes, "apps": {}}
        # A frame's row with the highest version: its best outcome, then its newest run.
        res = store.query(f"SELECT app, s, r, count() FROM (SELECT app, argMax(status, version) AS s, "
                          f"argMax(reasons, version) AS r FROM {FRAMES_TABLE.name} WHERE ingest_ts >= {since:.3f} "
                          f"GROUP BY app, stream, frame_no) GROUP BY app, s, r")
        apps: dict[str, dict[str, dict[str, int]]] = {}
        for app, status, reasons, frames in res.rows:
            a = apps.setdefault(str(app), {"frames": {}, "drops": {}})
            a["frames"][status] = a["frames"].get(status, 0) + int(frames)
            for reason, n in parse_reasons(str(reasons or "")).items():
                a["drops"][reason] = a["drops"].get(reason, 0) + n * int(frames)
        return {"minutes": minutes, "apps": apps}

    # -- sql ------------------------------------------------------------------------------------
    @api.post(f"{API_PREFIX}/sql", tags=["results"], summary="One read-only statement (the SQL endpoint's guard)")
    def sql(body: SqlIn, _: Role = reader) -> Any:
        if len(body.query.encode()) > limits.max_body_bytes:  # the SQL endpoint's limit
            raise field_error("query", f"query longer than {limits.max_body_bytes} bytes", 413)
        code, doc = _sql(body.query)
        return JSONResponse(doc, status_code=code)

    def _sql(query: str) -> tuple[int, dict[str, Any]]:
        code, doc = run_query(guard_(), query, limits, clock)
        return code, json.loads(json.dumps(doc, default=str))

    if pages:
        _mount_pages(api, tokens, backoff, backoff_lock, clock, registry_, _add, _sql, _apps, _sessions, _drops,
                     control, extra_apps, tap)
    api.state.store, api.state.control = store, control
    api.state.close = lambda: made["guard"].close() if "guard" in made else None
    return api


def _mount_pages(api: Any, tokens: Tokens, backoff: Any, backoff_lock: threading.Lock, clock: Clock,
                 registry_: Callable[[], Any], add: Callable[[StreamIn], dict[str, Any]],
                 sql: Callable[[str], tuple[int, dict[str, Any]]], apps: Callable[[], list[dict[str, Any]]],
                 sessions: Callable[[ControlWatcher], dict[str, Any]], drops: Callable[[float], dict[str, Any]],
                 control: ControlWatcher | None, extra_apps: Mapping[str, Any], tap: Any) -> None:
    """The web console's pages, doing what the API does through the same functions."""
    from pydantic import ValidationError

    from vidnexus.roles.console_pages import ConsoleOps, PageError, mount_pages

    def role_of(token: str, client: str, login: bool = False) -> str | None:
        now = clock.now()
        with backoff_lock:
            wait = backoff.blocked_for(client, now)
            if wait > 0:
                raise PageError(f"too many wrong tokens from this address; retry in {math.ceil(wait)} s")
            role = tokens.role(f"Bearer {token}")
            if role is None:
                backoff.failed(client, now)
            elif login:  # only signing in clears the count: a page's cookie must not reset it
                backoff.succeeded(client)
        return role

    def add_from_form(values: dict[str, Any]) -> dict[str, Any]:
        fields: dict[str, Any] = {"name": values.get("name", "").strip(), "url": values.get("url", "").strip()}
        if values.get("app"):
            fields["apps"] = [values["app"]]
        for key in ("fps", "rate", "mode"):
            if str(values.get(key, "")).strip():
                fields[key] = str(values[key]).strip()
        try:
            body = StreamIn(**fields)
        except ValidationError as e:
            raise PageError("; ".join(f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}"
                                      for err in e.errors())) from None
        try:
            return add(body)
        except HTTPException as e:
            detail = e.detail
            if isinstance(detail, list):
                raise PageError("; ".join(f"{(d.get('loc') or ['', ''])[-1] or 'stream'}: {d.get('msg')}"
                                          for d in detail)) from None
            raise PageError(str(detail)) from None

    def app_queries(name: str) -> dict[str, str] | None:
        import importlib

        from vidnexus.apps import APP_REFS

        if name not in APP_REFS and name not in extra_apps:
            return None
        own: dict[str, str] = {}
        if name in APP_REFS:
            own = dict(getattr(importlib.import_module(APP_REFS[name].split(":")[0]), "QUERIES", {}))
        frames = ("frames per minute by outcome", f"""
SELECT toUInt32(floor((ingest_ts - (SELECT min(ingest_ts) FROM vnx_frames WHERE app = '{name}')) / 60)) AS minute,
       status, count() AS frames
FROM vnx_frames FINAL WHERE app = '{name}' GROUP BY minute, status ORDER BY minute, status""")
        return {**own, frames[0]: frames[1]}

    ops = ConsoleOps(role_of=role_of, registry=registry_, add_stream=add_from_form, sql=sql, apps=apps,
                     app_queries=app_queries, sessions=lambda: sessions(control) if control is not None else None,
                     drops=drops)
    mount_pages(api, ops, tap=tap)


def openapi_document() -> dict[str, Any]:
    """The API's OpenAPI document (what ``/api/v1/openapi.json`` serves; committed as docs/openapi.json)."""
    unused: Any = None  # building the document touches no store
    return build_api(unused, Tokens("r" * 16, "a" * 16)).openapi()  # type: ignore[no-any-return]


class ConsoleServer:
    """Serve :func:`build_api` with uvicorn on ``host:port`` in a thread until :meth:`stop`."""

    def __init__(self, store: Store, tokens: Tokens, host: str = "127.0.0.1", port: int = 8125, *,
                 close_control: bool = False, **api_args: Any) -> None:
        """``api_args`` go to :func:`build_api`; with ``close_control`` :meth:`stop` closes its
        ``control`` watcher and its frame ``tap`` too."""
        import socket

        import uvicorn

        self.api = build_api(store, tokens, **api_args)
        self._control = api_args.get("control") if close_control else None
        self._tap = api_args.get("tap") if close_control else None
        self._sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, port))  # bound now: a taken port is an error here, and port 0 gets its number
        self.address: tuple[str, int] = self._sock.getsockname()[:2]
        # No proxy headers: X-Forwarded-For from a local client would defeat the per-address back-off.
        self.server = uvicorn.Server(uvicorn.Config(self.api, log_level="warning", access_log=False, lifespan="off",
                                                    proxy_headers=False, timeout_graceful_shutdown=5))
        self._thread: threading.Thread | None = None
        self._stopped = False

    @property
    def url(self) -> str:
        host = self.address[0]
        return f"http://[{host}]:{self.address[1]}" if ":" in host else f"http://{host}:{self.address[1]}"

    def start(self, timeout_s: float = 10.0) -> "ConsoleServer":
        self._thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self._sock]}, daemon=True,
                                        name="vnx-console")
        self._thread.start()
        clock = MonotonicClock()
        deadline = clock.now() + timeout_s
        while not self.server.started:
            if not self._thread.is_alive() or clock.now() > deadline:
                self.stop()
                raise VidnexusError(f"the console did not start on {self.url}")
            self._thread.join(0.01)
        return self

    def stop(self) -> None:
        """Stop serving: requests in progress get 5 s to finish, then the server is forced down.
        Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
            if self._thread.is_alive():
                self.server.force_exit = True
                self._thread.join(5)
            self._thread = None
        self._sock.close()
        self.api.state.close()
        if self._control is not None:
            self._control.close()
        if self._tap is not None:
            self._tap.close()


if __name__ == "__main__":  # python -m vidnexus.roles.console > docs/openapi.json
    print(json.dumps(openapi_document(), indent=1, sort_keys=True))
