"""One outcome per frame: the ``version`` of a ``vnx_frames`` row, so that a replay never turns an
answered frame into a drop.

``vnx_frames`` is a ``ReplacingMergeTree(version)`` keyed by ``(app, stream, frame_no)``: of the rows
a frame got (the first run and any replays after a crash or a redelivery), the one with the highest
``version`` is the frame's outcome. The version is the outcome's rank in the high bits and the
outcome's wall-clock time in µs in the low bits, so the better outcome wins and, among equal ranks,
the newest. The ranks (``ok`` > ``partial`` > ``error`` > ``dropped``) order outcomes by what they
tell: ``ok`` wrote all of the frame's rows; ``partial`` wrote some; ``error`` ran the chain and a step
failed (no rows; a replay that reaches the step fails again); ``dropped`` says only that the work was
not done in time, which for a replay (read again after a worker died, so ``late``) says nothing about
the frame. A result row and a drop for the same frame therefore cannot both stand: the answered run
wins whatever the order of the writes.

Rows written without a version (by an older worker, or copied when an old table is rebuilt) get the
rank with time 0 from the column's ``DEFAULT`` (:func:`version_sql`): they lose to any newer write of
the same rank and still win over a worse one.

Example:
    >>> ok, late = frame_version("ok", 1_700_000_000.0), frame_version("dropped", 1_800_000_000.0)
    >>> ok > late
    True
    >>> frame_version("dropped", 2.0) > frame_version("dropped", 1.0)
    True
    >>> frame_version("ok", 0.0) == STATUS_RANK["ok"] << TIME_BITS
    True
"""

from __future__ import annotations

from typing import Mapping

__all__ = ["STATUS_RANK", "TIME_BITS", "frame_version", "version_sql"]

STATUS_RANK: Mapping[str, int] = {"ok": 3, "partial": 2, "error": 1, "dropped": 0}
"""Outcome ranks, highest wins (an unknown status ranks as ``dropped``)."""

TIME_BITS = 60
"""Bits of the version that hold the outcome's time in µs (2^60 µs is ~36,000 years); the rank sits
above them, and 3 << 60 still fits a UInt64."""

_TIME_MASK = (1 << TIME_BITS) - 1


def frame_version(status: str, wall: float) -> int:
    """The ``vnx_frames.version`` of an outcome with ``status`` decided at ``wall`` (seconds since
    the epoch; times before the epoch count as 0)."""
    us = min(max(int(wall * 1_000_000), 0), _TIME_MASK)
    return (STATUS_RANK.get(status, 0) << TIME_BITS) | us


def version_sql(status_column: str = "status") -> str:
    """The ClickHouse expression for a version with time 0 from the status column (the column's
    ``DEFAULT``); it works on the 18.16 server and on chdb's current engine.

    Example:
        >>> version_sql()
        "toUInt64(multiIf(status = 'ok', 3, status = 'partial', 2, status = 'error', 1, 0)) * 1152921504606846976"
    """
    ranked = sorted(((r, s) for s, r in STATUS_RANK.items() if r), reverse=True)
    cases = ", ".join(f"{status_column} = '{s}', {r}" for r, s in ranked)
    return f"toUInt64(multiIf({cases}, 0)) * {1 << TIME_BITS}"
