"""Roles that say what they do: every ``every_s``, one line of what a role did since its last line
(frames or requests by outcome, rows), and a warning when the share that did not end ``ok`` crosses
``warn_fraction``. Pure: the role passes ``now`` and its cumulative counters.

Example (a worker, 30 s apart):
    >>> s = PeriodicSummary("worker", "frames", every_s=30.0, start=0.0)
    >>> s.tick(10.0, {"ok": 100}) is None           # not due yet
    True
    >>> s.tick(30.0, {"ok": 290, "late": 10})
    ('worker: 300 frames in the last 30 s (ok 290, late 10)', False)
    >>> s.tick(60.0, {"ok": 300, "late": 30, "dead-lettered": 2})
    ('worker: 32 frames in the last 30 s (ok 10, dead-lettered 2, late 20); 69% did not end ok (warning above 5%)', True)
    >>> s.tick(95.0, {"ok": 300, "late": 30, "dead-lettered": 2})
    ('worker: 0 frames in the last 35 s', False)
"""

from __future__ import annotations

from typing import Mapping

__all__ = ["PeriodicSummary"]


class PeriodicSummary:
    """One summary line per ``every_s`` from a role's cumulative counters (see module docstring).

    ``ok_keys`` are the outcomes that count as served; every other key is a kind of drop or failure.
    ``extra`` counters (rows, inserts) are reported but not added to the total."""

    def __init__(self, role: str, unit: str, *, every_s: float = 30.0, warn_fraction: float = 0.05,
                 ok_keys: tuple[str, ...] = ("ok",), start: float = 0.0) -> None:
        if every_s <= 0:
            raise ValueError("every_s must be > 0")
        self.role, self.unit, self.every_s, self.warn_fraction, self.ok_keys = role, unit, every_s, warn_fraction, ok_keys
        self._since = start
        self._last: dict[str, int] = {}
        self._last_extra: dict[str, int] = {}

    def tick(self, now: float, counts: Mapping[str, int],
             extra: Mapping[str, int] | None = None) -> tuple[str, bool] | None:
        """The line and whether it is a warning, when one is due at ``now``; else None."""
        if now - self._since < self.every_s:
            return None
        span, self._since = now - self._since, now
        delta = {k: v - self._last.get(k, 0) for k, v in counts.items()}
        self._last = dict(counts)
        more = {k: v - self._last_extra.get(k, 0) for k, v in (extra or {}).items()}
        self._last_extra = dict(extra or {})
        total = sum(delta.values())
        ok = sum(delta.get(k, 0) for k in self.ok_keys)
        order = {k: i for i, k in enumerate(self.ok_keys)}
        parts = [f"{k} {v}" for k, v in sorted(delta.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])) if v]
        parts += [f"{k} {v}" for k, v in more.items() if v]
        line = f"{self.role}: {total} {self.unit} in the last {span:.0f} s" + (f" ({', '.join(parts)})" if parts else "")
        warn = total > 0 and (total - ok) / total > self.warn_fraction
        if warn:
            line += f"; {(total - ok) / total:.0%} did not end ok (warning above {self.warn_fraction:.0%})"
        return line, warn
