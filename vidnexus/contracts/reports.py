"""What a worker reports about its app for query analysis: the DNN graph and measured fan-out.

Example:
    >>> fo = FanOut(frames=10, calls={"det": 10, "cls": 25}, ok={"det": 10}, edges={("frames", "det"): 10})
    >>> r = AppReport("traffic", "w1", 400.0, ("det", "cls"), (("frames", "det"), ("det", "cls")), fo, ts=1.0)
    >>> decode_report(encode_report(r)) == r, fo.gamma("det", "cls")
    (True, 0.0)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vidnexus.contracts.codec import from_json, to_json
from vidnexus.errors import CodecError

__all__ = ["FanOut", "AppReport", "encode_report", "decode_report", "REPORT_VERSION"]

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
class AppReport:
    """One worker's view of its app."""

    app: str
    worker: str
    slo_ms: float
    models: tuple[str, ...]
    edges: tuple[tuple[str, str], ...]
    fanout: FanOut = FanOut()
    ts: float = 0.0

    @property
    def key(self) -> str:
        return f"{self.app}/{self.worker}"


def encode_report(r: AppReport) -> bytes:
    fo = r.fanout
    return to_json("app", REPORT_VERSION, {
        "app": r.app, "worker": r.worker, "slo_ms": r.slo_ms, "ts": r.ts, "models": list(r.models),
        "edges": [list(e) for e in r.edges],
        "fanout": {"frames": fo.frames, "calls": fo.calls, "ok": fo.ok,
                   "edges": [[p, c, n] for (p, c), n in sorted(fo.edges.items())]}})


def decode_report(raw: bytes) -> AppReport:
    """Raises CodecError on a malformed or unknown document."""
    d = from_json(raw, "app", REPORT_VERSION)
    try:
        f = d.get("fanout", {})
        fo = FanOut(int(f.get("frames", 0)), {str(k): int(v) for k, v in f.get("calls", {}).items()},
                    {str(k): int(v) for k, v in f.get("ok", {}).items()},
                    {(str(p), str(c)): int(n) for p, c, n in f.get("edges", [])})
        return AppReport(str(d["app"]), str(d["worker"]), float(d["slo_ms"]), tuple(str(m) for m in d["models"]),
                         tuple((str(p), str(c)) for p, c in d["edges"]), fo, float(d.get("ts", 0.0)))
    except Exception as e:  # any shape the record may have: the role must go on
        raise CodecError(f"malformed app report: {e}") from None
