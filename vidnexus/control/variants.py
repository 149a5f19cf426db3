"""Model variants under budgets (MCDNN, dissertation ch. 4; ../shared/reference/specialization.md):
a task has a catalog of variants trading accuracy for cost; each session of the task gets the most
accurate variant that fits its share of the budgets, the shares split in proportion to request rate.

Pure: catalogs, sessions and budgets in, a choice per session out; the previous choice is given so
that a switch can be weighed against the cost of loading the new variant.

MCDNN's split: a budget e over a period T is shared so that each request gets the same e_i with
Σ_i e_i · f_i · T = e — a session's share is proportional to its request rate f_i. Here the budgets
are device time (device-seconds per second, e.g. 0.5 of one device) and memory (bytes, held while a
variant is loaded); a variant fits a session when its cost per request × the session's rate is
within the session's device-time share and its memory within its memory share.

Example (one task, two sessions at 30 and 10 req/s, half a device and 1 GB to share, so ¾ and ¼ of
each; the big variant costs 10 ms a request and 600 MB, the small one 2 ms and 100 MB: the busy
session's share holds the big one (0.3 of 0.375 device-s/s, 600 of 750 MB), the quiet one's memory
share (250 MB) does not):
    >>> cat = [Variant("big", "cls", 0.90, 0.010, 600_000_000), Variant("small", "cls", 0.80, 0.002, 100_000_000)]
    >>> out = choose_variants({"cls": cat}, [TaskSession("a", "cls", 30.0), TaskSession("b", "cls", 10.0)],
    ...                       Budgets(device_s_per_s=0.5, memory_bytes=1_000_000_000))
    >>> [(c.session_id, c.variant, c.fits) for c in out]
    [('a', 'big', True), ('b', 'small', True)]
    >>> out = choose_variants({"cls": cat}, [TaskSession("a", "cls", 30.0), TaskSession("b", "cls", 10.0)],
    ...                       Budgets(device_s_per_s=2.0, memory_bytes=4_000_000_000))
    >>> [(c.session_id, c.variant) for c in out]
    [('a', 'big'), ('b', 'big')]
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from vidnexus.contracts.profile import Profile

__all__ = ["Variant", "TaskSession", "Budgets", "Choice", "choose_variants", "shares", "catalog_of"]


@dataclass(frozen=True)
class Variant:
    """One variant of a task's model: its measured accuracy on the task's held-out set, device
    seconds per request (from its profile at the batch it runs), memory while loaded, and the
    seconds it takes to load."""

    name: str
    task: str
    accuracy: float
    cost_s: float
    memory_bytes: int
    load_s: float = 0.0
    profile: Profile | None = None
    """ℓ(b) as the catalog measured it: what a planner assumes until an executor that loaded the
    variant reports its own."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.accuracy <= 1.0:
            raise ValueError(f"variant {self.name}: accuracy must be in [0, 1], got {self.accuracy}")
        if not (math.isfinite(self.cost_s) and self.cost_s > 0):
            raise ValueError(f"variant {self.name}: cost per request must be > 0, got {self.cost_s}")
        if self.memory_bytes < 0 or self.load_s < 0:
            raise ValueError(f"variant {self.name}: memory and load time must be ≥ 0")


def catalog_of(measured: Sequence[Any], batch: int) -> list[Variant]:
    """The catalog rows of measured variants (``training.variants.MeasuredVariant``: name, task,
    accuracy, ``cost_s(batch)``, memory, load time, profile), each costed at ``batch``."""
    return [Variant(m.name, m.task, m.accuracy, m.cost_s(batch), m.memory_bytes, m.load_s, getattr(m, "profile", None))
            for m in measured]


@dataclass(frozen=True)
class TaskSession:
    """A session declared by task (not by model) with its request rate."""

    session_id: str
    task: str
    rate: float


@dataclass(frozen=True)
class Budgets:
    """What every session together may use: device-seconds per second (1.0 = one whole device) and
    bytes of memory (``math.inf``: not bounded)."""

    device_s_per_s: float = math.inf
    memory_bytes: float = math.inf


@dataclass(frozen=True)
class Choice:
    """The variant a session runs; ``fits`` is False when even the cheapest variant of its task is
    over its share (it runs the cheapest, and the plan says so)."""

    session_id: str
    variant: str
    accuracy: float
    fits: bool
    switched: bool = False


def shares(sessions: Sequence[TaskSession], budgets: Budgets) -> dict[str, tuple[float, float]]:
    """Each session's (device-seconds per second, bytes) share: the budgets split in proportion to
    request rates (MCDNN's equal per-request budget); an idle session gets an even share of nothing
    but still one request's worth of room (rate 0 counts as the least positive rate present, or 1)."""
    rates = {s.session_id: s.rate for s in sessions}
    floor = min((r for r in rates.values() if r > 0), default=1.0)
    weights = {sid: max(r, floor) for sid, r in rates.items()}
    total = sum(weights.values()) or 1.0
    return {sid: (budgets.device_s_per_s * w / total, budgets.memory_bytes * w / total) for sid, w in weights.items()}


def choose_variants(catalogs: Mapping[str, Sequence[Variant]], sessions: Sequence[TaskSession], budgets: Budgets,
                    *, previous: Mapping[str, str] | None = None, epoch_s: float = 30.0,
                    load_share: float = 0.1) -> list[Choice]:
    """Per session, the most accurate variant of its task that fits its share (device time: cost per
    request × rate; memory); ties by lower cost. A session already running a variant (``previous``)
    moves to a more accurate one only when loading it takes at most ``load_share`` of its share of
    the device over an epoch (``epoch_s``) — MCDNN loads cost 2–5× a run, so a switch must pay for
    itself — and moves down at once when its current variant no longer fits. A session with no
    requests (its streams ended) keeps its current variant: loading another would serve nothing.

    Raises:
        ValueError: a session's task has no catalog, or an empty one.
    """
    previous = previous or {}
    share = shares(sessions, budgets)
    out = []
    for s in sessions:
        cat = list(catalogs.get(s.task, ()))
        if not cat:
            raise ValueError(f"session {s.session_id}: no variants for task {s.task!r}")
        kept = next((v for v in cat if v.name == previous.get(s.session_id)), None)
        if s.rate <= 0 and kept is not None:
            out.append(Choice(s.session_id, kept.name, kept.accuracy, True, False))
            continue
        device, memory = share[s.session_id]
        fitting = [v for v in cat if v.cost_s * s.rate <= device + 1e-12 and v.memory_bytes <= memory]
        if not fitting:
            cheapest = min(cat, key=lambda v: (v.cost_s, v.memory_bytes))
            out.append(Choice(s.session_id, cheapest.name, cheapest.accuracy, False,
                              cheapest.name != previous.get(s.session_id, cheapest.name)))
            continue
        best = max(fitting, key=lambda v: (v.accuracy, -v.cost_s))
        now = next((v for v in fitting if v.name == previous.get(s.session_id)), None)
        if now is not None and best.name != now.name and best.accuracy > now.accuracy:
            # An upgrade: worth its load only if loading fits within a share of the epoch's device time.
            if best.load_s > load_share * device * epoch_s:
                best = now
        out.append(Choice(s.session_id, best.name, best.accuracy, True,
                          s.session_id in previous and previous[s.session_id] != best.name))
    return out
