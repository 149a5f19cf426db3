"""What an executor reports every few seconds on the stats topic (and what the scheduler plans from).

Example:
    >>> s = SessionStats("lenet5-100ms", "lenet5", 100.0, arrivals=10, replies=9, drops={"early_drop": 1})
    >>> st = ExecutorStats("ex-1", "cpu", ts=1.0, sessions=(s,))
    >>> decode_stats(encode_stats(st)) == st
    True
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from vidnexus.contracts.codec import from_json, to_json
from vidnexus.contracts.profile import Profile
from vidnexus.errors import CodecError

__all__ = ["SessionStats", "ExecutorStats", "encode_stats", "decode_stats", "STATS_VERSION"]

STATS_VERSION = 1


@dataclass(frozen=True)
class SessionStats:
    """One session on one executor since it started (rates over the last report interval)."""

    session: str
    model: str
    slo_ms: float
    origin: Literal["static", "plan"] = "static"
    """``static``: the executor was started with it; ``plan``: a plan created it (and may retire it)."""
    arrivals: int = 0
    replies: int = 0
    within_slo: int = 0
    drops: dict[str, int] = field(default_factory=dict)
    batch_sizes: dict[str, int] = field(default_factory=dict)
    mean_batch: float = 0.0
    arrival_rate: float = 0.0
    rate_recent: float = 0.0
    """Requests/s over the last report interval (what the scheduler plans with)."""
    idle_s: float = 0.0
    """Seconds since the last request."""
    queue_p50_ms: float = 0.0
    latency_p50_ms: float = 0.0
    latency_p99_ms: float = 0.0
    device_busy_fraction: float = 0.0


@dataclass(frozen=True)
class ExecutorStats:
    """One executor's report: its sessions, the batch sizes it runs, the request topics it
    consumes, and the profiles of its models on its device."""

    executor: str
    device: str
    ts: float
    targets: dict[str, int] = field(default_factory=dict)
    serving: tuple[str, ...] = ()
    profiles: dict[str, Profile] = field(default_factory=dict)
    sessions: tuple[SessionStats, ...] = ()
    every_s: float = 0.0
    """Seconds between this executor's reports (0: not said; documents of older executors)."""
    memory_bytes: int = 0
    """What the executor's device can hold models in: its free memory plus what the models it holds
    use (0: not said). The planner's memory capacity per device is the least of these."""
    model_bytes: dict[str, int] = field(default_factory=dict)
    """Memory each of its models holds on its device (bytes)."""
    device_type: str = ""
    """The kind of device, as the planner groups executors (``vidnexus executor --device-type``;
    empty: ``device``): executors of one type are planned as alike, with one type's profiles."""
    price: float = 1.0
    """The device's unit price (per device and unit of time): the planner minimises Σ devices × price."""
    prefix_groups: dict[str, str] = field(default_factory=dict)
    """model → the prefix group it shares a trunk with (prefix batching): the executor runs a
    group's sessions as one merged batch, and the planner plans them as one load."""

    def __post_init__(self) -> None:
        if not 0 < self.price < float("inf"):
            raise ValueError(f"executor {self.executor}: price must be positive and finite, got {self.price}")

    @property
    def kind(self) -> str:
        """The device type the planner groups this executor under."""
        return self.device_type or self.device


def _nan_free(v: float) -> float | None:
    return None if v != v else v  # NaN (no samples yet) is not JSON


def _nan_back(fields: dict[str, Any]) -> dict[str, Any]:
    return {k: (float("nan") if v is None else v) for k, v in fields.items()}  # undoes _nan_free


def encode_stats(s: ExecutorStats) -> bytes:
    doc: dict[str, Any] = {
        "executor": s.executor, "device": s.device, "ts": s.ts, "targets": s.targets, "serving": list(s.serving),
        "profiles": {m: p.to_dict() for m, p in s.profiles.items()},
        "sessions": [{k: (_nan_free(v) if isinstance(v, float) else v) for k, v in asdict(x).items()}
                     for x in s.sessions],
        "every_s": s.every_s, "memory_bytes": s.memory_bytes, "model_bytes": s.model_bytes,
        "device_type": s.device_type, "price": s.price, "prefix_groups": s.prefix_groups,
    }
    return to_json("stats", STATS_VERSION, doc)


def decode_stats(raw: bytes) -> ExecutorStats:
    """Raises CodecError on a malformed or unknown document."""
    d = from_json(raw, "stats", STATS_VERSION)
    try:
        sessions = tuple(SessionStats(**_nan_back(x)) for x in d.get("sessions", []))
        return ExecutorStats(str(d["executor"]), str(d["device"]), float(d["ts"]),
                             {str(k): int(v) for k, v in d.get("targets", {}).items()},
                             tuple(str(x) for x in d.get("serving", [])),
                             {m: Profile.from_dict(p) for m, p in d.get("profiles", {}).items()}, sessions,
                             float(d.get("every_s", 0.0)), int(d.get("memory_bytes", 0)),
                             {str(k): int(v) for k, v in d.get("model_bytes", {}).items()},
                             str(d.get("device_type", "")), float(d.get("price", 1.0)),
                             {str(k): str(v) for k, v in d.get("prefix_groups", {}).items()})
    except Exception as e:  # any shape the record may have: the role must go on
        raise CodecError(f"malformed stats document: {e}") from None
