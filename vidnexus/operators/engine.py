"""Running a chain on one frame: the part both runtimes share.

:meth:`ChainEngine.run` takes a :class:`~vidnexus.contracts.frames.Frame` and returns a
:class:`FrameOutcome`: the rows for each table (identity columns first) and the frame's accounting
(``ok``, ``partial``, ``dropped`` or ``error``, with drop reasons). Only the DNN calls differ between
runtimes, behind :class:`InferBackend`. The engine also counts calls per DNN-graph edge, which is the
fan-out the latency split needs, and measures the app's CPU steps per frame after each DNN node
until the next DNN stage or the sink (:meth:`ChainEngine.cpu_after_s`: the 90th percentile over
the last 256 frames, the ``frames`` node standing for the steps before the first stage). The
latency split reserves them (reported by the worker); and a stage's requests carry the frame's
deadline less the CPU steps after that stage, since a reply arriving later could not make it.
"""

from __future__ import annotations

import asyncio
import math
import collections.abc as cabc
import logging
import zlib
from collections import Counter
from dataclasses import asdict, dataclass, field, is_dataclass
from typing import Any, Protocol, Sequence

from vidnexus.clock import Clock, MonotonicClock
from vidnexus.contracts.replies import Reply
from vidnexus.contracts.reports import FanOut as ReportedFanOut
from vidnexus.contracts.schema import Column, TableSchema
from vidnexus.operators.chain import App, Inferred, Model, Step
from vidnexus.operators.frame_version import frame_version, version_sql
from vidnexus.operators.windows import TumblingWindows
from vidnexus.contracts.frames import Frame
from vidnexus.gpu_executor.metrics import RecentTimes

__all__ = ["InferBackend", "FrameOutcome", "ChainEngine", "FRAMES_TABLE", "StepError", "FanOut", "parse_reasons",
           "KeyedDispatcher", "wants", "app_schemas"]

logger = logging.getLogger(__name__)

FRAMES_TABLE = TableSchema(
    "vnx_frames",
    (
        Column("app", "LowCardinality(String)"),
        Column("stream", "String"),
        Column("frame_no", "UInt64"),
        Column("status", "LowCardinality(String)"),
        Column("reasons", "String"),
        Column("rows", "UInt32"),
        Column("drops", "UInt32"),
        Column("latency_ms", "Float32"),
        Column("ingest_ts", "Float64"),
        Column("version", "UInt64", default=version_sql("status")),
    ),
    order_by=("app", "stream", "frame_no"),
    engine="ReplacingMergeTree(version)",
)
"""One row per sampled frame an app saw: every frame ends here as ``ok``/``partial`` (rows written)
or ``dropped``/``error`` with its reasons, e.g. ``early_drop:2,deadline:1``. ``late`` is the worker's
own drop: the frame (or a step's requests) was already past its deadline before the work started.

A frame run again (a replay after a worker died) gets a second row; of a frame's rows, the best
outcome wins, then the newest (``version``: see :mod:`vidnexus.operators.frame_version`), so a
replay dropped as ``late`` never hides the answered run."""


def parse_reasons(text: str) -> dict[str, int]:
    """A ``vnx_frames.reasons`` value (what :meth:`FrameOutcome.frames_row` writes) back as reason →
    count; the count is after the last ``:`` (a reason such as ``flood:map[0]`` has its own).

    >>> parse_reasons("early_drop:2,flood:map[0]:40"), parse_reasons("")
    ({'early_drop': 2, 'flood:map[0]': 40}, {})
    """
    out: dict[str, int] = {}
    for part in text.split(","):
        if not part:
            continue
        reason, _sep, n = part.rpartition(":")
        if not reason:
            reason, n = part, "1"
        out[reason] = out.get(reason, 0) + (int(n) if n.isdigit() else 1)
    return out


def app_schemas(app: App) -> dict[str, TableSchema]:
    """Every table an app's runtime writes: the app's tables and ``vnx_frames``."""
    schemas = {t.name: t.schema() for t in app.tables.values()}
    schemas[FRAMES_TABLE.name] = FRAMES_TABLE
    return schemas


class InferBackend(Protocol):
    """DNN calls: one reply per input, in order. Dropped requests are replies with a reason.

    ``deadline_wall`` is the latest the replies are of use: the frame's end-to-end deadline less
    the CPU steps measured after this stage until the next one (or the sink)."""

    async def infer(self, model: Model, inputs: Sequence[Any], deadline_wall: float) -> list[Reply]: ...


class StepError(Exception):
    """A user step failed or returned the wrong kind of value; the message names the step."""


@dataclass
class FrameOutcome:
    stream: str
    frame_no: int
    status: str = "ok"
    reasons: Counter[str] = field(default_factory=Counter)
    rows: dict[str, list[tuple[Any, ...]]] = field(default_factory=dict)
    latency_ms: float = 0.0
    ingest_ts: float = 0.0
    decided_wall: float = 0.0
    """When the outcome was decided (the engine's ``clock.wall()``): the time in its ``version``."""

    @property
    def drops(self) -> int:
        return sum(self.reasons.values())

    def row_count(self) -> int:
        return sum(len(r) for r in self.rows.values())

    def frames_row(self, app: str) -> tuple[Any, ...]:
        reasons = ",".join(f"{k}:{v}" for k, v in sorted(self.reasons.items()))
        return (app, self.stream, self.frame_no, self.status, reasons, self.row_count(), self.drops,
                self.latency_ms, self.ingest_ts, frame_version(self.status, self.decided_wall))

    def all_rows(self, app: str) -> dict[str, list[tuple[Any, ...]]]:
        """Rows per table to write for this outcome, with the frame's ``vnx_frames`` row (window
        rows flushed at the end of input belong to no frame and have none)."""
        if self.frame_no < 0:
            return self.rows
        return {**self.rows, FRAMES_TABLE.name: [self.frames_row(app)]}


@dataclass
class _Item:
    value: Any
    upstream: tuple[str, ...] = ("frames",)
    ident: tuple[str, int, int] | None = None
    """(stream, seq, first row_idx) of rows made from a window, instead of the frame's."""


@dataclass
class FanOut:
    """Calls per model and per (parent, child) edge; ``gamma`` is child calls per parent call."""

    frames: int = 0
    calls: Counter[str] = field(default_factory=Counter)
    ok: Counter[str] = field(default_factory=Counter)
    edges: Counter[tuple[str, str]] = field(default_factory=Counter)

    def gamma(self, parent: str, child: str) -> float | None:
        """Child requests per answered parent request (dropped parents have no children)."""
        base = self.frames if parent == "frames" else self.ok[parent]
        return self.edges[(parent, child)] / base if base else None

    def snapshot(self) -> ReportedFanOut:
        """The counts as they travel in an app report."""
        return ReportedFanOut(self.frames, dict(self.calls), dict(self.ok), dict(self.edges))


class ChainEngine:
    """Runs ``app``'s chain. One engine per worker; frames of one stream must reach the same engine
    (they do: frames are keyed by stream) for windows to see all of a stream's elements.

    ``clock.wall()`` is what frame deadlines (ingest time + the app's SLO), ``late`` drops and
    latencies are measured against."""

    def __init__(self, app: App, backend: InferBackend, *, clock: Clock | None = None, deadlines: bool = True) -> None:
        """``deadlines=False``: frames have none (a backfill worker's): never ``late``, and every
        infer step asks with ``deadline_wall=math.inf`` (no deadline: the executors run them in the
        slack of their real-time sessions)."""
        self.app, self.backend, self.deadlines = app, backend, deadlines
        self.clock = clock or MonotonicClock()
        self.steps = app.steps()
        self.fanout = FanOut()
        self.ordered = getattr(app, "ordered", False) or _has_window(self.steps)
        """Whether frames of one stream must be processed in order (the chain has a window)."""
        self._windows: dict[str, TumblingWindows] = {}
        self._errors_logged = 0
        self._has_dnn = bool(app.graph().models)
        self.cpu_times = RecentTimes(CPU_SAMPLES)
        """Per DNN node (``frames``: before the first stage), a frame's time in the CPU steps
        after it until the next DNN stage or the sink."""

    async def run(self, frame: Frame) -> FrameOutcome:
        out = FrameOutcome(frame.stream_id, frame.frame_no, ingest_ts=frame.ingest_ts)
        self.fanout.frames += 1
        deadline = frame.ingest_ts + self.app.slo_ms / 1000 if self.deadlines else math.inf
        now = self.clock.wall()
        if self._has_dnn and now >= deadline:
            # Already past its SLO before any work (a backlog behind an overloaded worker): its DNN
            # requests could only be dropped at their deadline, so drop it now and spend the CPU on
            # frames that can still make it — goodput stays near capacity instead of collapsing.
            out.reasons["late"] += 1
            out.status = "dropped"
            out.latency_ms = (now - frame.ingest_ts) * 1000
            out.decided_wall = now
            return out
        ctx = _Ctx(frame, out, deadline, Counter())
        items = await self._steps(self.steps, [_Item(frame)], ctx)
        for node, spent in ctx.cpu.items():
            self.cpu_times.add(node, spent)
        out.decided_wall = self.clock.wall()
        out.latency_ms = (out.decided_wall - frame.ingest_ts) * 1000  # ingest → outcome, bus hops included
        if out.reasons and any(r.startswith("error") for r in out.reasons):
            out.status = "error" if not out.row_count() else "partial"
        elif out.reasons:
            out.status = "partial" if out.row_count() or items else "dropped"
        return out

    def cpu_after_s(self, node: str) -> float:
        """The 90th percentile of a frame's time in the CPU steps after DNN node ``node`` (a model,
        or ``frames``) until the next DNN stage or the sink, over the last 256 frames that ran
        them; 0 until 20 did."""
        return self.cpu_times.quantile(node)

    def order_key(self, frame: Frame) -> str:
        """The dispatch key: the stream when order matters, else the frame (all run concurrently)."""
        return frame.stream_id if self.ordered else f"{frame.stream_id}#{frame.frame_no}"

    async def flush(self) -> list[FrameOutcome]:
        """Close all open windows (end of input): their rows, as outcomes of no frame."""
        outs = []
        for path, w in self._windows.items():
            st, rest = self._find(self.steps, path)
            for cw in w.flush():
                o = FrameOutcome(cw.stream, -1)
                ctx = _Ctx(None, o, 0.0, Counter())
                item = self._window_item(st, cw, ctx)
                if item is not None:
                    await self._steps(rest, [item], ctx)
                outs.append(o)
        return outs

    # -- the step interpreter --------------------------------------------------------------------

    async def _steps(self, steps: Sequence[Step], items: list[_Item], ctx: "_Ctx") -> list[_Item]:
        for st in steps:
            if not items:
                break
            if st.kind == "infer":
                items = await self._infer(st, items, ctx)
            elif st.kind == "route":
                items = await self._route(st, items, ctx)
            else:
                t0, after = self.clock.now(), _after(items)
                items = self._cpu(st, items, ctx)
                ctx.spent(after, self.clock.now() - t0)
            items = self._bound(st, items, ctx)
        return items

    def _bound(self, st: Step, items: list[_Item], ctx: "_Ctx") -> list[_Item]:
        """At most ``app.max_fanout`` of one frame's elements go on from ``st``; the rest are
        dropped as ``flood:<step>``."""
        cap = self.app.max_fanout
        if len(items) <= cap:
            return items
        self._flood(ctx, st, len(items) - cap, f"{st.describe()} gave {len(items)} elements")
        return items[:cap]

    def _flood(self, ctx: "_Ctx", st: Step, n: int, what: str) -> None:
        ctx.out.reasons[f"flood:{st.kind}[{st.path}{st.index}]"] += n
        if self._errors_logged < 20:
            self._errors_logged += 1
            where = f"{ctx.frame.stream_id}#{ctx.frame.frame_no}" if ctx.frame is not None else "window"
            logger.warning("app %s, frame %s: %s, more than max_fanout=%d; %d dropped", self.app.name, where, what,
                           self.app.max_fanout, n)

    def _cpu(self, st: Step, items: list[_Item], ctx: "_Ctx") -> list[_Item]:
        out: list[_Item] = []
        for it in items:
            try:
                out.extend(self._one(st, it, ctx))
            except StepError as e:
                self._error(ctx, st, str(e))
            except Exception as e:  # a user function raised: per-item failure, not a crashed worker
                self._error(ctx, st, f"{st.describe()} raised {type(e).__name__}: {e}")
        return out

    def _one(self, st: Step, it: _Item, ctx: "_Ctx") -> list[_Item]:
        assert st.fn is not None or st.kind == "sink"
        if st.kind == "map":
            return [_Item(st.fn(it.value), it.upstream, it.ident)]  # type: ignore[misc]
        if st.kind == "filter":
            keep = st.fn(it.value)  # type: ignore[misc]
            if not isinstance(keep, bool):
                raise StepError(f"{st.describe()} returned {type(keep).__name__}, expected bool")
            return [it] if keep else []
        if st.kind == "flat_map":
            res = st.fn(it.value)  # type: ignore[misc]
            if isinstance(res, (str, bytes)) or not isinstance(res, cabc.Iterable):
                raise StepError(f"{st.describe()} returned {type(res).__name__}, expected an iterable")
            return [_Item(v, it.upstream, it.ident) for v in res]
        if st.kind == "window":
            return self._window(st, it, ctx)
        if st.kind == "sink":
            self._sink(st, it, ctx)
            return []
        raise StepError(f"unknown step {st.describe()}")

    async def _infer(self, st: Step, items: list[_Item], ctx: "_Ctx") -> list[_Item]:
        t0, before = self.clock.now(), _after(items)  # input functions: CPU after the upstream node
        per_item: list[list[Any]] = []
        kept: list[_Item] = []
        for it in items:
            try:
                x = st.fn(it.value) if st.fn is not None else it.value
                xs = list(x) if st.many else [x]
            except Exception as e:
                self._error(ctx, st, f"{st.describe()} input function raised {type(e).__name__}: {e}")
                continue
            kept.append(it)
            per_item.append(xs)
            for m in st.models:
                self.fanout.calls[m.name] += len(xs)
                for u in it.upstream:
                    self.fanout.edges[(u, m.name)] += len(xs)
        total = sum(len(xs) for xs in per_item)
        if total > self.app.max_fanout:  # keep the first max_fanout inputs, item by item
            room, trimmed = self.app.max_fanout, []
            for xs in per_item:
                trimmed.append(xs[:room])
                room -= len(trimmed[-1])
            self._flood(ctx, st, total - self.app.max_fanout, f"{st.describe()} got {total} inputs")
            keep = [i for i, (xs, t) in enumerate(zip(per_item, trimmed)) if t or not xs]
            kept, per_item = [kept[i] for i in keep], [trimmed[i] for i in keep]
        flat = [x for xs in per_item for x in xs]
        ctx.spent(before, self.clock.now() - t0)
        late = bool(flat) and ctx.frame is not None and self.clock.wall() >= ctx.deadline
        if not flat or late:
            # Nothing to ask (or too late to: the executor could only drop them). Elements with no
            # inputs go on as they would beside others that had some: with empty outputs.
            if late:
                ctx.out.reasons["late"] += sum(1 for xs in per_item if xs)
            empty = [(it, xs) for it, xs in zip(kept, per_item) if st.many and not xs]
            kept, per_item = [it for it, _ in empty], [xs for _, xs in empty]
            replies: list[list[Any]] = [[] for _ in st.models]
        else:
            replies = list(await asyncio.gather(*(self.backend.infer(m, flat, ctx.deadline - self.cpu_after_s(m.name))
                                                  for m in st.models)))
        t1 = self.clock.now()  # decoding and merging the replies: CPU after this stage
        for m, rs in zip(st.models, replies):
            self.fanout.ok[m.name] += sum(1 for r in rs if r.ok)
        out: list[_Item] = []
        pos = 0
        upstream = tuple(m.name for m in st.models)
        for it, xs in zip(kept, per_item):
            n = len(xs)
            mine = [r[pos : pos + n] for r in replies]
            pos += n
            failed = [r for rs in mine for r in rs if not r.ok]
            if failed:
                ctx.out.reasons[failed[0].reason or "error"] += 1
                continue
            outputs = []
            for m, rs in zip(st.models, mine):
                vals = [m.decode(r.output) if m.decode else r.output for r in rs]
                outputs.append(vals if st.many else vals[0])
            output = outputs[0] if len(outputs) == 1 else tuple(outputs)
            try:
                value = st.merge(it.value, output) if st.merge is not None else Inferred(it.value, output)
            except Exception as e:
                self._error(ctx, st, f"{st.describe()} merge raised {type(e).__name__}: {e}")
                continue
            out.append(_Item(value, upstream, it.ident))
        ctx.spent(upstream, self.clock.now() - t1)
        return out

    async def _route(self, st: Step, items: list[_Item], ctx: "_Ctx") -> list[_Item]:
        assert st.fn is not None
        groups: dict[str, list[_Item]] = {name: [] for name, _ in st.branches}
        passthrough: list[_Item] = []
        for it in items:
            try:
                k = st.fn(it.value)
            except Exception as e:
                self._error(ctx, st, f"{st.describe()} key raised {type(e).__name__}: {e}")
                continue
            (groups[k] if isinstance(k, str) and k in groups else passthrough).append(it)
        branches = dict(st.branches)
        results = await asyncio.gather(*(self._steps(branches[name], g, ctx) for name, g in groups.items()))
        return [it for r in results for it in r] + passthrough

    def _window(self, st: Step, it: _Item, ctx: "_Ctx") -> list[_Item]:
        assert st.time_fn is not None and st.merge is not None
        path = f"{st.path}{st.index}"
        w = self._windows.setdefault(path, TumblingWindows(st.window_s))
        stream = ctx.frame.stream_id if ctx.frame is not None else ""
        key = st.merge(it.value)
        if not isinstance(key, str):
            raise StepError(f"{st.describe()} key returned {type(key).__name__}, expected str")
        t = float(st.time_fn(it.value))
        out = []
        for cw in w.add(stream, key, t, it.value):
            item = self._window_item(st, cw, ctx)
            if item is not None:
                out.append(item)
        return out

    def _window_item(self, st: Step, cw: Any, ctx: "_Ctx") -> _Item | None:
        assert st.fn is not None
        try:
            value = st.fn(cw.key, cw.items)
        except Exception as e:
            self._error(ctx, st, f"{st.describe()} aggregate raised {type(e).__name__}: {e}")
            return None
        # Rows of a window: frame_no = window start in ms, row_idx from the key (stable across replays).
        return _Item(value, ("frames",), (cw.stream, int(round(cw.start * 1000)), zlib.crc32(cw.key.encode())))

    def _sink(self, st: Step, it: _Item, ctx: "_Ctx") -> None:
        assert st.table is not None
        v = it.value
        if is_dataclass(v) and not isinstance(v, type):
            v = asdict(v)
        if not isinstance(v, cabc.Mapping):
            raise StepError(f"{st.describe()} got {type(v).__name__}, expected a mapping or a dataclass")
        missing = [c for c in st.table.value_columns if c not in v]
        if missing:
            raise StepError(f"{st.describe()} got an element without columns {missing}")
        if it.ident is not None:
            stream, seq, base = it.ident
        else:
            assert ctx.frame is not None
            stream, seq, base = ctx.frame.stream_id, ctx.frame.frame_no, 0
        idx = (base + ctx.idx[(st.table.name, stream, seq, base)]) & 0xFFFFFFFF
        ctx.idx[(st.table.name, stream, seq, base)] += 1
        row = (stream, seq, idx) + tuple(v[c] for c in st.table.value_columns)
        ctx.out.rows.setdefault(st.table.name, []).append(row)

    def _error(self, ctx: "_Ctx", st: Step, msg: str) -> None:
        ctx.out.reasons[f"error:{st.kind}[{st.path}{st.index}]"] += 1
        if self._errors_logged < 20:
            self._errors_logged += 1
            where = f"{ctx.frame.stream_id}#{ctx.frame.frame_no}" if ctx.frame is not None else "window"
            logger.warning("app %s, frame %s: %s", self.app.name, where, msg)

    def _find(self, steps: Sequence[Step], path: str, tail: Sequence[Step] = ()) -> tuple[Step, list[Step]]:
        for i, st in enumerate(steps):
            if f"{st.path}{st.index}" == path:
                return st, list(steps[i + 1 :]) + list(tail)
            for _, sub in st.branches:
                try:
                    return self._find(sub, path, list(steps[i + 1 :]) + list(tail))
                except KeyError:
                    pass
        raise KeyError(path)


def _has_window(steps: Sequence[Step]) -> bool:
    return any(st.kind == "window" or any(_has_window(sub) for _, sub in st.branches) for st in steps)


def _after(items: Sequence[_Item]) -> tuple[str, ...]:
    """The DNN nodes the items come from (their CPU steps count after each)."""
    return tuple({u: None for it in items for u in it.upstream})


CPU_SAMPLES = 256
"""Frames whose CPU time after each DNN node is kept (the newest)."""


@dataclass
class _Ctx:
    frame: Frame | None
    out: FrameOutcome
    deadline: float
    idx: Counter[tuple[str, str, int, int]]
    cpu: dict[str, float] = field(default_factory=dict)
    """Seconds in CPU steps after each DNN node, for this frame."""

    def spent(self, nodes: Sequence[str], seconds: float) -> None:
        if self.frame is None:  # a window flushed at the end of input: no frame's time
            return
        for n in nodes:
            self.cpu[n] = self.cpu.get(n, 0.0) + seconds


class KeyedDispatcher:
    """Run coroutines concurrently, at most ``limit`` at a time, but those with the same key (a
    stream) one after the other in submission order, so per-stream order holds for windows."""

    def __init__(self, limit: int) -> None:
        self._sem = asyncio.Semaphore(max(1, limit))
        self._tails: dict[str, asyncio.Task[Any]] = {}
        self.in_flight = 0  # submitted, not finished (waiting for a slot, its key, or running)

    async def submit(self, key: str, make: Any) -> "asyncio.Task[Any]":
        """Wait for a free slot, then start ``make()`` after the key's previous task."""
        self.in_flight += 1
        try:
            await self._sem.acquire()
        except BaseException:
            self.in_flight -= 1
            raise
        prev = self._tails.get(key)

        async def run() -> Any:
            try:
                if prev is not None:
                    await asyncio.wait([prev])
                return await make()
            finally:
                self._sem.release()
                self.in_flight -= 1

        task = asyncio.create_task(run())
        self._tails[key] = task

        def forget(t: asyncio.Task[Any]) -> None:
            if self._tails.get(key) is t:
                self._tails.pop(key, None)

        task.add_done_callback(forget)
        return task

    async def drain(self) -> None:
        while self._tails:
            await asyncio.wait(list(self._tails.values()))


def wants(app: App, frame: Frame) -> bool:
    """Whether ``frame`` is for ``app``: its stream feeds the app, or names no apps."""
    apps = frame.tags.get("apps", "")
    return not apps or app.name in apps.split(",")
