"""How a DNN request ends: one :class:`Reply`, with its output or a drop reason.

Every request a chain sends ends as exactly one reply, in process or over the bus, and every frame
ends as result rows or an accounted drop (``vnx_frames``), so the reasons below are the whole
vocabulary of loss.

Example:
    >>> Reply.dropped("early_drop").reason, Reply.answer([1, 2], batch=4).ok
    ('early_drop', True)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

__all__ = ["DropReason", "DROP_REASONS", "Reply"]

DropReason = Literal["early_drop", "deadline", "overload", "error", "late", "timeout", "retired"]
"""Why a request did not run or its answer came too late:

- ``early_drop``: sacrificed to keep the planned batch within the SLO (Nexus's sliding window, §6.3);
- ``deadline``: could not have finished even alone (its deadline minus ℓ(1) had passed);
- ``overload``: shed at admission (queue full) or left when the executor stopped;
- ``error``: the model, its input or a user step failed (the log names which);
- ``late``: the worker dropped it before any work because its frame or stage budget was spent;
- ``timeout``: no reply arrived by the deadline plus a grace (no executor serves the session);
- ``retired``: the session was retired by the plan while the request waited.
"""

DROP_REASONS: tuple[str, ...] = get_args(DropReason)


@dataclass(frozen=True)
class Reply:
    """The end of one request: ``ok`` with ``output``, or dropped with ``reason``.

    ``latency_s`` is what whoever made the reply measured (the executor: arrival to answer; a client:
    submit to reply, bus hops included); ``batch`` the size of the batch it ran in.
    """

    ok: bool
    output: Any = None
    reason: DropReason | None = None
    latency_s: float = 0.0
    batch: int = 0

    def __post_init__(self) -> None:
        if self.ok == (self.reason is not None):
            raise ValueError(f"a reply is ok without a reason, or dropped with one (ok={self.ok}, reason={self.reason})")
        if self.reason is not None and self.reason not in DROP_REASONS:
            raise ValueError(f"unknown drop reason {self.reason!r}; one of {', '.join(DROP_REASONS)}")

    @classmethod
    def answer(cls, output: Any, *, latency_s: float = 0.0, batch: int = 0) -> "Reply":
        return cls(True, output, None, latency_s, batch)

    @classmethod
    def dropped(cls, reason: DropReason, *, latency_s: float = 0.0) -> "Reply":
        return cls(False, None, reason, latency_s)
