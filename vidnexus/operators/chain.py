"""The app API: an :class:`App` declares its models, tables and one end-to-end SLO, and a chain of
steps over the stream of sampled frames (DESIGN §1).

A chain is a list of steps built by :class:`Stream`'s methods. It is declarative, so the DNN dataflow
graph (which model feeds which) is known without running user code; the runtime measures the fan-out
on each edge. The same chain runs in the local runtime and in the faust workers.

Example:
    >>> app = App("tiny", slo_ms=200)
    >>> squares = app.table("squares", {"x": "Int64", "y": "Int64"})
    >>> @app.chain
    ... def pipeline(s: Stream) -> Stream:
    ...     return s.map(lambda f: {"x": f.frame_no}).map(lambda d: {**d, "y": d["x"] ** 2}).sink(squares)
    >>> [st.describe() for st in app.steps()]
    ['map[0] <lambda>', 'map[1] <lambda>', 'sink[2] squares']
"""

from __future__ import annotations

import collections.abc as cabc
import inspect
import typing
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, Callable, Iterable, Literal, Mapping, Sequence

from vidnexus.contracts.schema import Column, TableSchema
from vidnexus.errors import ConfigError

__all__ = [
    "App",
    "Stream",
    "Step",
    "Model",
    "Table",
    "Inferred",
    "DnnGraph",
    "IDENTITY_COLUMNS",
]

StepKind = Literal["map", "filter", "flat_map", "infer", "route", "window", "sink"]

MAX_FANOUT = 1000
"""Default bound on one frame's elements per step and DNN inputs per infer step (App.max_fanout)."""
IDENTITY_COLUMNS = (Column("stream", "String"), Column("frame_no", "UInt64"), Column("row_idx", "UInt32"))
"""Every app table starts with these: a row's identity. Tables are ``ReplacingMergeTree`` ordered by
them, so a frame processed twice (redelivery after a crash) still counts once under ``FINAL``."""


@dataclass(frozen=True)
class Model:
    """A DNN the app calls. ``name`` is the model's name on the executors (a repository model);
    ``loader`` builds the module in-process for the local runtime when the repository's weights are
    not the app's (e.g. a reader the project trains); ``decode`` turns the executor's output
    (a list for classifiers, a dict of lists for detectors) into what the chain works with."""

    name: str
    loader: Callable[[Any], Any] | None = None
    decode: Callable[[Any], Any] | None = None
    input_shape: tuple[int, ...] | None = None
    variants: tuple[str, ...] = ()
    """A task's variants (MCDNN): repository models that answer it alike, most accurate first.
    ``name`` is then the task's: the scheduler picks the variant each epoch within the task's budget
    (``vidnexus scheduler --variant-budget``, :mod:`vidnexus.control.variants`), and until a plan
    names one the cheapest (the last) serves."""

    @property
    def served(self) -> str:
        """The model that serves this name when no plan has chosen: itself, or a task's cheapest
        variant."""
        return self.variants[-1] if self.variants else self.name


@dataclass(frozen=True)
class Table:
    """An app table: the identity columns, then the app's columns, ``ReplacingMergeTree``."""

    name: str
    columns: tuple[Column, ...]
    order_by: tuple[str, ...] = ()

    @property
    def value_columns(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def schema(self) -> TableSchema:
        cols = IDENTITY_COLUMNS + self.columns
        key = tuple(self.order_by) + tuple(c.name for c in IDENTITY_COLUMNS)
        return TableSchema(self.name, cols, order_by=key, engine="ReplacingMergeTree()")


@dataclass(frozen=True)
class Inferred:
    """What ``infer`` passes on by default: the element and the model output(s)."""

    value: Any
    output: Any


@dataclass(frozen=True)
class Step:
    """One step of a chain. ``index`` is its position; branches of a route have their own steps."""

    kind: StepKind
    index: int
    fn: Callable[..., Any] | None = None
    models: tuple[Model, ...] = ()
    many: bool = False
    merge: Callable[..., Any] | None = None
    branches: tuple[tuple[str, tuple["Step", ...]], ...] = ()
    table: Table | None = None
    window_s: float = 0.0
    time_fn: Callable[[Any], float] | None = None
    path: str = ""

    @property
    def name(self) -> str:
        if self.kind == "infer":
            return "+".join(m.name for m in self.models)
        if self.kind == "sink" and self.table is not None:
            return self.table.name
        return getattr(self.fn, "__name__", type(self.fn).__name__) if self.fn is not None else ""

    def describe(self) -> str:
        return f"{self.kind}[{self.path}{self.index}] {self.name}"


class Stream:
    """A chain under construction. Every method returns a new Stream; the chain itself is data."""

    def __init__(self, app: "App", steps: tuple[Step, ...] = (), root: object | None = None,
                 path: str = "") -> None:
        self._app, self._steps, self._path = app, steps, path
        self._root = root if root is not None else object()

    def _add(self, kind: StepKind, **kw: Any) -> "Stream":
        if self._steps and self._steps[-1].kind == "sink":
            raise ConfigError(f"app {self._app.name}: no step may follow {self._steps[-1].describe()}")
        step = Step(kind, len(self._steps), path=self._path, **kw)
        return Stream(self._app, self._steps + (step,), self._root, self._path)

    def map(self, fn: Callable[[Any], Any]) -> "Stream":
        """One element in, one out."""
        return self._add("map", fn=_callable(fn, "map"))

    def filter(self, fn: Callable[[Any], bool]) -> "Stream":
        """Keep elements for which ``fn`` returns True (it must return a bool)."""
        return self._add("filter", fn=_callable(fn, "filter"))

    def flat_map(self, fn: Callable[[Any], Iterable[Any]]) -> "Stream":
        """One element in, any number out (e.g. one per detected box)."""
        return self._add("flat_map", fn=_callable(fn, "flat_map"))

    def infer(self, *models: Model | str, input: Callable[[Any], Any] | None = None, many: bool = False,
              merge: Callable[[Any, Any], Any] | None = None) -> "Stream":
        """Call DNNs, batched by the executor. ``input(element)`` gives the tensor (the element itself
        by default); with ``many=True`` it gives a list and every item is a separate request. Several
        models, and the items of ``many``, are requested at once and awaited together. ``merge(element,
        output)`` builds the next element (default :class:`Inferred`); with several models ``output``
        is a tuple in the order given. An element whose request is dropped leaves the chain, accounted
        with the drop reason."""
        if not models:
            raise ConfigError(f"app {self._app.name}: infer() needs at least one model")
        resolved = tuple(self._app._resolve_model(m, len(self._steps)) for m in models)
        return self._add("infer", models=resolved, fn=input, many=many, merge=merge)

    def route(self, key: Callable[[Any], str], **branches: Callable[["Stream"], "Stream"]) -> "Stream":
        """Send each element down the branch named by ``key(element)``; elements with no branch pass
        through unchanged. Branch outputs continue down the chain after the route."""
        if not branches:
            raise ConfigError(f"app {self._app.name}: route() needs at least one branch")
        built = []
        idx = len(self._steps)
        for name, make in branches.items():
            sub = Stream(self._app, (), None, f"{self._path}{idx}.{name}/")
            out = make(sub)
            if not isinstance(out, Stream) or out._root is not sub._root:
                raise ConfigError(
                    f"app {self._app.name}: branch {name!r} of route[{idx}] must return the stream it "
                    "was given, extended (a stream from elsewhere would make the chain a graph with cycles)"
                )
            if out._steps and out._steps[-1].kind == "sink":
                raise ConfigError(f"app {self._app.name}: branch {name!r} of route[{idx}] ends in a sink; "
                                  "sink after the route instead")
            built.append((name, out._steps))
        return self._add("route", fn=_callable(key, "route"), branches=tuple(built))

    def window(self, seconds: float, key: Callable[[Any], str], agg: Callable[[str, list[Any]], Any],
               time: Callable[[Any], float]) -> "Stream":
        """Tumbling event-time windows of ``seconds`` per (stream, ``key``): when an element's
        ``time`` passes a window's end, ``agg(key, elements)`` is emitted for the closed window.
        State lives in the worker that owns the stream's partition."""
        if seconds <= 0:
            raise ConfigError(f"app {self._app.name}: window seconds must be > 0, got {seconds}")
        return self._add("window", fn=_callable(agg, "window"), merge=_callable(key, "window key"),
                         window_s=float(seconds), time_fn=_callable(time, "window time"))

    def sink(self, table: Table | str) -> "Stream":
        """Write elements (mappings or dataclasses with the table's columns) to an app table."""
        t = self._app._resolve_table(table, len(self._steps))
        return self._add("sink", table=t)

    @property
    def steps(self) -> tuple[Step, ...]:
        return self._steps


def _callable(fn: Any, what: str) -> Callable[..., Any]:
    if not callable(fn):
        raise ConfigError(f"{what}: expected a function, got {type(fn).__name__}")
    return fn  # type: ignore[no-any-return]


class App:
    """An analysis app: models, tables, an end-to-end SLO and a chain.

    Args:
        name: the app's name (streams are registered for apps by name).
        slo_ms: end-to-end latency objective, from ingest to result; the system splits it across
            the DNN stages.
        ordered: run each stream's frames one at a time, in order (for per-stream state such as a
            tracker); implied by a ``window`` step. Otherwise a stream's frames run concurrently.
        max_fanout: the most elements of one frame a step takes (after a ``flat_map``), and the most
            DNN inputs one frame sends to an ``infer`` step; the rest are dropped, counted in the
            frame's ``vnx_frames`` row as ``flood:<step>`` (a step gone wrong — thousands of crops
            per frame — must not stall every stream behind it).
    """

    def __init__(self, name: str, slo_ms: float, *, ordered: bool = False, max_fanout: int = MAX_FANOUT) -> None:
        if slo_ms <= 0:
            raise ConfigError(f"app {name}: slo_ms must be > 0, got {slo_ms}")
        if max_fanout < 1:
            raise ConfigError(f"app {name}: max_fanout must be >= 1, got {max_fanout}")
        self.max_fanout = int(max_fanout)
        self.name, self.slo_ms = name, float(slo_ms)
        self.ordered = ordered
        self.models: dict[str, Model] = {}
        self.tables: dict[str, Table] = {}
        self._chain: Stream | None = None

    def model(self, name: str, *, loader: Callable[[Any], Any] | None = None,
              decode: Callable[[Any], Any] | None = None, input_shape: Sequence[int] | None = None,
              variants: Sequence[str] = ()) -> Model:
        """Declare a model the chain calls; with ``variants`` (repository models, most accurate
        first), ``name`` is a task that any of them answers (see :attr:`Model.variants`)."""
        vs = tuple(variants)
        if vs and (len(set(vs)) != len(vs) or name in vs or loader is not None):
            raise ConfigError(f"app {self.name}: task {name!r} needs distinct variants other than its own name, "
                              "and no loader (its variants are repository models)")
        m = Model(name, loader, decode, tuple(input_shape) if input_shape else None, vs)
        self.models[name] = m
        return m

    def served_model(self, name: str) -> str:
        """The repository model that serves ``name`` until a plan chooses (:attr:`Model.served`)."""
        m = self.models.get(name)
        return m.served if m is not None else name

    def table(self, name: str, columns: Mapping[str, str], order_by: Sequence[str] = ()) -> Table:
        reserved = {c.name for c in IDENTITY_COLUMNS} & set(columns)
        if reserved:
            raise ConfigError(f"app {self.name}: table {name} may not declare identity columns {sorted(reserved)}")
        t = Table(name, tuple(Column(k, v) for k, v in columns.items()), tuple(order_by))
        t.schema()  # validates names and the key
        self.tables[name] = t
        return t

    def chain(self, build: Callable[[Stream], Stream]) -> Callable[[Stream], Stream]:
        """Decorator: ``build(frames)`` returns the chain. It is built and checked right away."""
        out = build(Stream(self))
        if not isinstance(out, Stream):
            raise ConfigError(f"app {self.name}: the chain function must return a Stream")
        if not out.steps or out.steps[-1].kind != "sink":
            raise ConfigError(f"app {self.name}: the chain must end with .sink(table)")
        _check_types(self, out.steps)
        self._chain = out
        return build

    def steps(self) -> tuple[Step, ...]:
        if self._chain is None:
            raise ConfigError(f"app {self.name} has no chain (decorate a function with @app.chain)")
        return self._chain.steps

    def graph(self) -> "DnnGraph":
        return DnnGraph.of(self.steps())

    def _resolve_model(self, m: Model | str, index: int) -> Model:
        name = m if isinstance(m, str) else m.name
        if name not in self.models:
            raise ConfigError(f"app {self.name}: infer[{index}] uses model {name!r}, which the app does not "
                              f"declare (declared: {sorted(self.models)}); add app.model({name!r})")
        return self.models[name]

    def _resolve_table(self, t: Table | str, index: int) -> Table:
        name = t if isinstance(t, str) else t.name
        if name not in self.tables:
            raise ConfigError(f"app {self.name}: sink[{index}] writes table {name!r}, which the app does not "
                              f"declare (declared: {sorted(self.tables)}); add app.table({name!r}, …)")
        return self.tables[name]


# --- load-time type checks --------------------------------------------------------------------


def _hints(fn: Callable[..., Any]) -> tuple[Any, Any]:
    """(first parameter annotation, return annotation), ``None`` where absent or unresolvable."""
    try:
        target = fn if inspect.isfunction(fn) or inspect.ismethod(fn) else type(fn).__call__
        hints = typing.get_type_hints(target)
        params = [p for p in inspect.signature(fn).parameters.values()]
    except (TypeError, ValueError, NameError):
        return None, None
    first = hints.get(params[0].name) if params else None
    return first, hints.get("return")


def _is_iterable_type(tp: Any) -> bool:
    origin = typing.get_origin(tp) or tp
    return isinstance(origin, type) and issubclass(origin, cabc.Iterable) and origin not in (str, bytes)


def _compatible(produced: Any, expected: Any) -> bool:
    if produced is None or expected is None or expected is Any or produced is Any:
        return True
    p, e = typing.get_origin(produced) or produced, typing.get_origin(expected) or expected
    if e is typing.Union or p is typing.Union:
        return True  # unions are checked at run time
    if isinstance(p, type) and isinstance(e, type):
        return issubclass(p, e)
    return True


def _check_types(app: App, steps: Sequence[Step], produced: Any = None) -> Any:
    """Walk the chain with the annotated types; raise naming the first step that cannot accept its
    input or returns the wrong kind of value. Unannotated functions are checked at run time."""
    from vidnexus.contracts.frames import Frame

    if produced is None and not steps[0].path:
        produced = Frame
    for st in steps:
        if st.kind in ("map", "filter", "flat_map"):
            assert st.fn is not None
            arg, ret = _hints(st.fn)
            if not _compatible(produced, arg):
                raise ConfigError(f"app {app.name}: {st.describe()} takes {_tn(arg)} but the step before "
                                  f"produces {_tn(produced)}")
            if st.kind == "filter":
                if ret is not None and ret is not bool:
                    raise ConfigError(f"app {app.name}: {st.describe()} must return bool, is annotated {_tn(ret)}")
            elif st.kind == "flat_map":
                if ret is not None and not _is_iterable_type(ret):
                    raise ConfigError(f"app {app.name}: {st.describe()} must return an iterable, "
                                      f"is annotated {_tn(ret)}")
                args = typing.get_args(ret) if ret is not None else ()
                produced = args[0] if args else None
            else:
                produced = ret
        elif st.kind == "infer":
            produced = None if st.merge is not None else Inferred
            if st.merge is not None:
                produced = _hints(st.merge)[1]
        elif st.kind == "route":
            for _, sub in st.branches:
                if sub:
                    _check_types(app, sub, produced)
            produced = None
        elif st.kind == "window":
            produced = _hints(st.fn)[1] if st.fn is not None else None
        elif st.kind == "sink":
            assert st.table is not None
            if isinstance(produced, type) and is_dataclass(produced):
                have = {f.name for f in fields(produced)}
                missing = [c for c in st.table.value_columns if c not in have]
                if missing:
                    raise ConfigError(f"app {app.name}: {st.describe()} needs columns {missing}, which "
                                      f"{produced.__name__} (produced by the step before) lacks")
            elif isinstance(produced, type) and not issubclass(produced, cabc.Mapping):
                raise ConfigError(f"app {app.name}: {st.describe()} needs a mapping or a dataclass, the step "
                                  f"before produces {_tn(produced)}")
    return produced


def _tn(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp)


# --- the DNN dataflow graph ---------------------------------------------------------------------


@dataclass(frozen=True)
class DnnGraph:
    """Which model feeds which. ``edges`` are (parent, child) pairs where ``parent`` is ``"frames"``
    for a model fed by frames directly; the runtime counts calls per edge to measure fan-out."""

    models: tuple[str, ...]
    edges: tuple[tuple[str, str], ...] = field(default=())

    @staticmethod
    def of(steps: Sequence[Step]) -> "DnnGraph":
        models: list[str] = []
        edges: list[tuple[str, str]] = []

        def walk(seq: Sequence[Step], upstream: tuple[str, ...]) -> tuple[str, ...]:
            for st in seq:
                if st.kind == "infer":
                    for m in st.models:
                        if m.name not in models:
                            models.append(m.name)
                        for u in upstream:
                            if (u, m.name) not in edges:
                                edges.append((u, m.name))
                    upstream = tuple(m.name for m in st.models)
                elif st.kind == "route":
                    outs: list[str] = []
                    for _, sub in st.branches:
                        outs.extend(x for x in walk(sub, upstream) if x not in outs)
                    passthrough = list(upstream)
                    upstream = tuple(dict.fromkeys(outs + passthrough))
            return upstream

        walk(steps, ("frames",))
        return DnnGraph(tuple(models), tuple(edges))

    def children(self, parent: str) -> list[str]:
        return [c for p, c in self.edges if p == parent]

    def depth(self) -> int:
        """Number of models on the longest path from the frames."""
        memo: dict[str, int] = {}

        def d(n: str) -> int:
            if n not in memo:
                memo[n] = 1 + max((d(c) for c in self.children(n)), default=0)
            return memo[n]

        return max((d(c) for c in self.children("frames")), default=0)
