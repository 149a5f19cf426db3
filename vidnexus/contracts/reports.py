"""What a worker reports about its app for query analysis: the DNN graph, the measured fan-out,
and the time its frames spend outside the executor (:class:`Overheads`), which the latency split
reserves before dividing the app's SLO. A report without ``overheads`` (an older worker's) decodes
with none measured.

Example:
    >>> fo = FanOut(frames=10, calls={"det": 10, "cls": 25}, ok={"det": 10}, edges={("frames", "det"): 10})
    >>> oh = Overheads(hop_ms={"det": 4.0}, cpu_ms={"frames": 1.5, "det": 2.0}, publish_ms=0.5)
    >>> r = AppReport("traffic", "w1", 400.0, ("det", "cls"), (("frames", "det"), ("det", "cls")), fo, ts=1.0,
    ...               overheads=oh)
    >>> decode_report(encode_report(r)) == r, fo.gamma("det", "cls")
    (True, 0.0)
    >>> oh.reserve_ms("det"), oh.reserve_ms("frames")
    (6.0, 2.0)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vidnexus.contracts.codec import from_json, to_json
from vidnexus.errors import CodecError

__all__ = ["FanOut", "Overheads", "AppReport", "encode_report", "decode_report", "REPORT_VERSION"]

REPORT_VERSION = 1


@dataclass(frozen=True)
class FanOut:
    """Counts since the worker started: frames, requests per model, answered requests per model, and
    requests per (parent, child) edge of the DNN graph (``frames`` is the root)."""

    frames: int = 0
    calls: dict[str, int] = field(default_factory=dict)
    ok: dict[str, int] = field(default_factory=dict)
    edges: dict[tuple[str, str], int] = field(default_factory=dict)

    def gamma(self, parent: str, child: str) -> float | None:
        """Child requests per answered parent request (dropped parents have no children)."""
        base = self.frames if parent == "frames" else self.ok.get(parent, 0)
        return self.edges.get((parent, child), 0) / base if base else None

    def __add__(self, other: "FanOut") -> "FanOut":
        def add(a: dict, b: dict) -> dict:  # type: ignore[type-arg]
            return {k: a.get(k, 0) + b.get(k, 0) for k in {*a, *b}}

        return FanOut(self.frames + other.frames, add(self.calls, other.calls), add(self.ok, other.ok),
                      add(self.edges, other.edges))


@dataclass(frozen=True)
class Overheads:
    """Where a worker's frames spend time outside the executor: 90th percentiles over its recent
    frames and requests, in ms; a key is absent until measured.

    ``frames`` stands for the frame itself (the root of the DNN graph), as in the graph's edges.
    """

    hop_ms: dict[str, float] = field(default_factory=dict)
    """Per model: the bus round trip of its requests (request and reply hops, less the
    executor's own time), as the worker's executor client measured it."""
    cpu_ms: dict[str, float] = field(default_factory=dict)
    """Per DNN node: the app's CPU steps after it until the next DNN stage or the sink (under
    ``frames``: those before the first stage), per frame."""
    publish_ms: float = 0.0
    """Encoding a frame's rows message for the sink (the bus's produce call only queues it)."""

    def reserve_ms(self, node: str) -> float:
        """What to reserve for ``node`` on every path through it: a model's round trip and the
        CPU steps after it; for ``frames``, the CPU steps before the first stage and the rows'
        encoding."""
        if node == "frames":
            return self.cpu_ms.get("frames", 0.0) + self.publish_ms
        return self.hop_ms.get(node, 0.0) + self.cpu_ms.get(node, 0.0)

    def worst(self, other: "Overheads") -> "Overheads":
        """The larger of the two per key: several workers of one app must each keep its SLO."""

        def mx(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
            return {k: max(a.get(k, 0.0), b.get(k, 0.0)) for k in {*a, *b}}

        return Overheads(mx(self.hop_ms, other.hop_ms), mx(self.cpu_ms, other.cpu_ms),
                         max(self.publish_ms, other.publish_ms))


@dataclass(frozen=True)
class AppReport:
    """One worker's view of its app."""

    app: str
    worker: str
    slo_ms: float
    models: tuple[str, ...]
    edges: tuple[tuple[str, str], ...]
    fanout: FanOut = FanOut()
    ts: float = 0.0
    overheads: Overheads = Overheads()
    variants: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Task → its variants, most accurate first (``app.model(task, variants=…)``). Absent in an
    older worker's report: none."""

    @property
    def key(self) -> str:
        return f"{self.app}/{self.worker}"


def encode_report(r: AppReport) -> bytes:
    fo = r.fanout
    return to_json("app", REPORT_VERSION, {
        "app": r.app, "worker": r.worker, "slo_ms": r.slo_ms, "ts": r.ts, "models": list(r.models),
        "edges": [list(e) for e in r.edges],
        "fanout": {"frames": fo.frames, "calls": fo.calls, "ok": fo.ok,
                   "edges": [[p, c, n] for (p, c), n in sorted(fo.edges.items())]},
        "overheads": {"hop_ms": r.overheads.hop_ms, "cpu_ms": r.overheads.cpu_ms,
                      "publish_ms": r.overheads.publish_ms},
        "variants": {t: list(vs) for t, vs in r.variants.items()}})


def decode_report(raw: bytes) -> AppReport:
    """Raises CodecError on a malformed or unknown document."""
    d = from_json(raw, "app", REPORT_VERSION)
    try:
        f = d.get("fanout", {})
        fo = FanOut(int(f.get("frames", 0)), {str(k): int(v) for k, v in f.get("calls", {}).items()},
                    {str(k): int(v) for k, v in f.get("ok", {}).items()},
                    {(str(p), str(c)): int(n) for p, c, n in f.get("edges", [])})
        o = d.get("overheads") or {}  # absent in an older worker's report: nothing measured
        oh = Overheads({str(k): float(v) for k, v in o.get("hop_ms", {}).items()},
                       {str(k): float(v) for k, v in o.get("cpu_ms", {}).items()}, float(o.get("publish_ms", 0.0)))
        return AppReport(str(d["app"]), str(d["worker"]), float(d["slo_ms"]), tuple(str(m) for m in d["models"]),
                         tuple((str(p), str(c)) for p, c in d["edges"]), fo, float(d.get("ts", 0.0)), oh,
                         {str(t): tuple(str(v) for v in vs) for t, vs in (d.get("variants") or {}).items()})
    except Exception as e:  # any shape the record may have: the role must go on
        raise CodecError(f"malformed app report: {e}") from None
