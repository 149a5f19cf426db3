"""The scheduling core of one backend (one device): session queues, which session runs next, drops.

Pure: it takes ``now`` and returns plain dataclasses. The real executor (``executor.py``) and the
simulator (``vidnexus.sim``) drive the same object: ``step = core.schedule(now)``, run
``step.dispatch`` on the device, then ``core.observed(step.dispatch, seconds)``.

Example:
    >>> from vidnexus.contracts.profile import Profile
    >>> core = DutyCycle([SessionSpec("s", "m", slo_s=0.1)], {"m": Profile.linear(0.01, 0.01, 8)})
    >>> core.enqueue("s", request_id=1, deadline=0.1, now=0.0) is None
    True
    >>> step = core.schedule(now=0.0)
    >>> step.dispatch.request_ids, step.dropped
    ((1,), ())
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Literal, Mapping, Sequence

from vidnexus.gpu_executor.background import background_batch, expected_batch, latest_end, next_arrival, recent_rate
from vidnexus.gpu_executor.batching import BatchPolicy, PolicyName, drop_reason
from vidnexus.gpu_executor.policies import make_policy
from vidnexus.contracts.profile import Profile
from vidnexus.contracts.replies import DropReason

__all__ = ["SessionSpec", "Dropped", "Part", "Dispatch", "Step", "DutyCycle", "local_targets", "Order", "ORDERS"]

Order = Literal["laxity", "round_robin"]
"""Which session's batch runs next when the device frees (:class:`DutyCycle`)."""
ORDERS: tuple[str, ...] = ("laxity", "round_robin")


@dataclass(frozen=True)
class SessionSpec:
    """A (model, SLO) pair with its batching policy and queue bound.

    A ``background`` session holds delay-tolerant work (re-processing stored video, a backfill): its
    requests have no deadline (``slo_s`` may be ``math.inf``) and run only in the device's slack,
    in batches sized never to delay a real-time batch (DeepQuery; :class:`DutyCycle`)."""

    session_id: str
    model: str
    slo_s: float
    policy: PolicyName = "early_rescue"
    max_queue: int = 4096
    background: bool = False

    def __post_init__(self) -> None:
        if not self.slo_s > 0 or (math.isinf(self.slo_s) and not self.background):
            raise ValueError(f"session {self.session_id}: SLO must be a finite number > 0 "
                             f"(math.inf only for a background session), got {self.slo_s}")
        if self.max_queue < 1:
            raise ValueError(f"session {self.session_id}: max_queue must be >= 1")


@dataclass(frozen=True)
class Dropped:
    """A request that will not run, and why: early_drop, deadline, overload or error."""

    session_id: str
    request_id: int
    reason: DropReason


@dataclass(frozen=True)
class Part:
    """The requests of one session inside a (possibly merged) batch."""

    session_id: str
    model: str
    request_ids: tuple[int, ...]


@dataclass(frozen=True)
class Dispatch:
    """One batch to run now: the requests, in deadline order, and the expected latency.

    With prefix batching, ``group`` names the shared prefix and ``parts`` holds one entry per
    session merged into the batch (the prefix runs once on all of them, each suffix on its part).
    """

    session_id: str
    model: str
    request_ids: tuple[int, ...]
    expected_s: float
    parts: tuple[Part, ...] = ()
    group: str | None = None

    @property
    def batch(self) -> int:
        return len(self.request_ids)


@dataclass(frozen=True)
class Step:
    """What ``schedule`` decided: at most one batch, and the requests dropped on the way."""

    dispatch: Dispatch | None
    dropped: tuple[Dropped, ...] = ()


RESERVE_BATCHES = 2
"""Batches of device time a real-time session's next batch keeps clear of background work: its own,
and one more for a burst that arrives while the background batch runs. While background batches
were the largest that fit, one batch cost Poisson arrivals in ``bench colocate``'s simulator up to 2
points of attainment at 75% load and two 0.7; with the most efficient batch that fits, the
two settings gave the same results on the committed run's profile."""

ACTIVE_WINDOW_S = 1.0
"""Without a plan, a real-time session takes its turn in the others' duty cycle (:func:`local_targets`)
while it has requests queued or had one this recently; an idle session costs the others nothing."""

RETARGET_S = 1.0
"""Without a plan, batch sizes are chosen again at least this often (and whenever a session turns
active or idle), from the budgets requests arrive with (:meth:`DutyCycle.budget`)."""
BUDGETS_KEPT = 64
BUDGET_QUANTILE = 0.1
"""A session's budget is this quantile of its recent requests' (deadline − arrival): the SLO for a
request submitted here, less the bus hops (the one already taken, the reply's reserved) for one
that came over Kafka."""

PACE_WEIGHT = 0.1
PACE_RANGE = (0.25, 4.0)
SIZE_DECAY = 0.005
"""The online refresh of a model's profile (:meth:`DutyCycle.observed`). Each batch's time over what
the profile says for its size, clamped to ``PACE_RANGE`` (one stall of the process moves the
profile a bounded step), is folded, with ``PACE_WEIGHT``, into the model's *pace*, which scales the
whole measured profile, and into a correction for that size alone (what is left of the ratio once
the pace is taken out). Every batch moves the other sizes' corrections ``SIZE_DECAY`` of the way
back to 1. A device slowed by other work on its CPU (a broker's JIT, an overload's extra reads) is
slowed at every size: the pace carries that to the sizes it is not running, and brings them back
when the batches it does run are fast again; a size the measurement got wrong is corrected by its
own factor while it runs."""

GROW = True
"""Without a plan, a batch that takes its session's planned size while more of that session's
requests wait takes more of them, as long as the larger batch ends by its head's deadline, leaves
the other real-time sessions' next batches their time (:meth:`DutyCycle.rt_deadline`), and serves
at least as many requests a second as the planned size (on a profile where a larger batch costs
more per request, it does not grow there). Nexus runs the planned size and leaves the rest queued;
where a session's budget is a few batches long (a slow device at a 50 ms SLO, or requests that
spent part of it on the bus), a Poisson burst then waits through several batches one after
another, while one larger batch serves it sooner and at less device time. In the simulator, on
the profile bench peers' model had on a slow VM (2026-12-03: ℓ(1) 12.8 ms, ℓ(8) 54 ms), 99%
goodput at a 50 ms SLO went from 47.3 to 60.9 req/s over the fitted bus hop and from 74.7 to 78.8
in process; on ``PEERS_LIKE`` (ℓ(4) dearer per request than ℓ(3)) it does not change
(tests/sim/test_simulator.py). A plan's batch sizes (:meth:`DutyCycle.set_targets`) are kept as
given: the global scheduler's duty cycles count on them. ``DutyCycle(grow=False)`` is Nexus's rule
(bench drop-policies compares the paper's policies with it)."""

GAPS_KEPT = 16
"""Arrival gaps a real-time session remembers to expect its next request (:func:`next_arrival`)."""


@dataclass
class _Queue:
    spec: SessionSpec
    policy: BatchPolicy
    target: int
    deadlines: list[float] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)
    last_arrival: float | None = None
    gaps: deque[float] = field(default_factory=lambda: deque(maxlen=GAPS_KEPT))
    """Recent gaps between arrivals (requests arriving together — a frame's — are one arrival)."""
    counts: deque[int] = field(default_factory=lambda: deque(maxlen=GAPS_KEPT + 1))
    """Requests at each recent arrival (the last one's still counting)."""
    budgets: deque[float] = field(default_factory=lambda: deque(maxlen=BUDGETS_KEPT))
    """deadline − arrival of recent requests."""


def local_targets(
    sessions: Sequence[SessionSpec],
    profiles: Mapping[str, Profile],
    prefix_groups: Mapping[str, str] | None = None,
    order: Order = "round_robin",
) -> dict[str, int]:
    """Batch sizes for sessions sharing one device, until a global plan says otherwise.

    Each scheduling unit — a session, or all sessions of one prefix group, which run as one merged
    batch — starts at its saturated batch (the b with 2·ℓ(b) ≤ SLO that serves most: Nexus §6.1's
    largest such b where throughput grows with b, ``Profile.efficient_batch_within``); then, while some
    unit's worst case exceeds its SLO, the unit with the longest batch shrinks by one. Members of a
    group all get the group's batch size (the merge rule keeps the merged batch within it).

    The worst case depends on the device's ``order`` (:class:`DutyCycle`):

    - ``round_robin`` (Nexus §6.2): a full duty cycle Σℓ(b_j) plus its own batch ℓ(b_i).
    - ``laxity``: a request arrives just after the longest batch of any unit started (a batch is not
      preempted), waits for it, then for one batch of each other unit whose SLO is as tight or
      tighter (their requests can have less laxity), then runs in its own: max ℓ(b_j) + Σ_{SLO_j ≤
      SLO_i, j ≠ i} ℓ(b_j) + ℓ(b_i). A loose unit no longer waits its turn behind a tight one's
      every batch, so it keeps larger batches. With one unit both are Nexus's 2ℓ(b).

    Why: a three-model device (SLOs 50/100/200 ms) whose requests come over the bus has about 35 ms
    for its 50 ms session's; where four batches of 1 take longer than that, the round-robin bound
    shrank every session, the 200 ms one too, to batches of 1, under an order that never makes the
    50 ms session wait for all of them. ``tests/sim/test_simulator.py`` runs that device over the
    bus's fitted hops in the simulator: at 138 req/s the laxity bound keeps 99% on time and the
    round-robin bound does not.

    Example (ℓ(b) = 10b + 10 ms):
        >>> p = Profile.linear(alpha=0.010, beta=0.010, max_batch=32)
        >>> three = [SessionSpec(f"s{k}", f"m{k}", slo) for k, slo in enumerate((0.05, 0.1, 0.2))]
        >>> profiles = {f"m{k}": p for k in range(3)}
        >>> local_targets(three, profiles), local_targets(three, profiles, order="laxity")
        ({'s0': 1, 's1': 1, 's2': 1}, {'s0': 1, 's1': 2, 's2': 2})
    """
    groups = prefix_groups or {}
    units: dict[str, list[SessionSpec]] = {}
    background = {s.session_id: profiles[s.model].max_batch for s in sessions if s.background}
    for s in sessions:
        if s.background:
            continue
        units.setdefault(groups.get(s.model, "session:" + s.session_id), []).append(s)
    slo = {u: min(s.slo_s for s in members) for u, members in units.items()}
    prof = {u: profiles[members[0].model] for u, members in units.items()}
    b = {u: max(1, prof[u].efficient_batch_within(slo[u] / 2)) for u in units}

    def worst(u: str, lats: Mapping[str, float], cycle: float, longest: float) -> float:
        if order == "round_robin":
            return cycle + lats[u]
        return longest + sum(t for v, t in lats.items() if v != u and slo[v] <= slo[u]) + lats[u]

    while True:
        lats = {u: prof[u].latency(b[u]) for u in b}
        cycle, longest = sum(lats.values()), max(lats.values(), default=0.0)
        late = [u for u in b if worst(u, lats, cycle, longest) > slo[u]]
        shrinkable = [u for u in b if b[u] > 1]
        if not late or not shrinkable:
            break
        b[max(shrinkable, key=lats.__getitem__)] -= 1
    return {s.session_id: b[u] for u, members in units.items() for s in members} | background


class DutyCycle:
    """The sessions of one device (models never interleave on it), one batching policy per session.

    ``order`` picks which session's batch runs when the device frees:

    - ``laxity`` (default): least laxity first — the session whose head request must start soonest,
      its deadline less the latency of the batch it would take. A session with a loose SLO waits
      (and its batch grows) while a tight one's requests would otherwise miss. ``bench peers``'s
      three-model scenario (SLOs 50/100/200 ms on one device) measures both orders side by side.
    - ``round_robin``: Nexus's backend duty cycle (SOSP §6.2), each session in turn. On a device
      kept busy by its work-conserving loop it runs a loose session's batch ahead of a tight
      session's request that then misses.

    Background sessions (``SessionSpec.background``) run only when no real-time batch is ready,
    in turn, each batch as large as fits before the real-time work must start (DeepQuery's rule,
    ``gpu_executor.background``): every real-time session's next batch — its queued head, or a
    request expected from its recent arrival gaps — must start by its deadline less the latency of
    its planned batch (and one batch more, ``RESERVE_BATCHES``), one after another. A background
    batch that cannot fit even one item waits. Planning latencies (mean + std) size both sides.
    """

    def __init__(
        self,
        sessions: Sequence[SessionSpec],
        profiles: Mapping[str, Profile],
        targets: Mapping[str, int] | None = None,
        prefix_groups: Mapping[str, str] | None = None,
        order: Order = "laxity",
        grow: bool = GROW,
    ) -> None:
        """``prefix_groups`` maps a model to the name of the prefix it shares with other models;
        sessions of models in one group are batched together (Nexus §6.3, prefix batching)."""
        if order not in ORDERS:
            raise ValueError(f"order must be one of {', '.join(ORDERS)}, not {order!r}")
        self.order: Order = order
        self.grow = grow
        """Batches take more of their session's backlog when they can (:data:`GROW`)."""
        self._measured: dict[str, Profile] = dict(profiles)  # as profiled (at load, by a probe)
        self._pace: dict[str, float] = {}  # observed / measured batch time, all sizes (PACE_WEIGHT)
        self._sized: dict[str, dict[int, float]] = {}  # what the pace leaves, per batch size
        self._profiles: dict[str, Profile] = dict(profiles)  # measured, adjusted by both
        self._queues: dict[str, _Queue] = {}
        self._order: list[str] = []
        self._cursor = 0
        self._groups: dict[str, str] = dict(prefix_groups or {})
        for s in sessions:
            self.add_session(s)
        self._active: frozenset[str] | None = None  # sessions counted in local targets (None: all)
        self._retargeted = -math.inf
        self.set_targets(targets or local_targets(sessions, self._profiles, self._groups, order))
        self._planned = bool(targets)

    # -- plan ---------------------------------------------------------------------------------
    def add_session(self, spec: SessionSpec, target: int | None = None) -> None:
        """Host ``spec`` at batch ``target`` (default: 1; a background session: its profile's largest)."""
        if spec.model not in self._profiles:
            raise ValueError(f"session {spec.session_id}: no profile for model {spec.model!r}")
        if spec.session_id in self._queues:
            raise ValueError(f"session {spec.session_id} already exists")
        if target is None:
            target = self._profiles[spec.model].max_batch if spec.background else 1
        self._queues[spec.session_id] = _Queue(spec, make_policy(spec.policy), max(1, target))
        self._order.append(spec.session_id)

    def remove_session(self, session_id: str) -> tuple[Dropped, ...]:
        """Remove a session; its queued requests come back as drops (reason ``overload`` here; the
        executor that removed the session reports them ``retired``, ``Executor.remove_session``)."""
        q = self._queues.pop(session_id)
        self._order.remove(session_id)
        self._cursor = 0
        return tuple(Dropped(session_id, rid, "overload") for rid in q.ids)

    def set_targets(self, targets: Mapping[str, int]) -> None:
        """The plan's batch sizes; from then on a new profile leaves them to the next plan."""
        self._planned = True
        for sid, b in targets.items():
            if sid in self._queues:
                self._queues[sid].target = max(1, int(b))

    def targets(self) -> dict[str, int]:
        return {sid: q.target for sid, q in self._queues.items()}

    def prefix_groups(self) -> dict[str, str]:
        """model → prefix group, for models batched with a shared trunk."""
        return dict(self._groups)

    def sessions(self) -> list[SessionSpec]:
        return [self._queues[sid].spec for sid in self._order]

    def profile(self, model: str) -> Profile:
        return self._profiles[model]

    def profiles(self) -> dict[str, Profile]:
        """Every model's current profile (refreshed online from observed batches)."""
        return dict(self._profiles)

    # -- requests -----------------------------------------------------------------------------
    def enqueue(self, session_id: str, request_id: int, deadline: float, now: float) -> Dropped | None:
        """Queue a request; a full queue sheds it (reason ``overload``), an unknown session too
        (reason ``error``)."""
        q = self._queues.get(session_id)
        if q is None:
            return Dropped(session_id, request_id, "error")
        if not q.spec.background:
            if q.last_arrival is None or now > q.last_arrival:
                if q.last_arrival is not None:
                    q.gaps.append(now - q.last_arrival)
                q.last_arrival = now
                q.counts.append(1)
            else:  # with the last arrival (one frame's requests)
                q.counts[-1] += 1
            q.budgets.append(deadline - now)
        if len(q.ids) >= q.spec.max_queue:
            return Dropped(session_id, request_id, "overload")
        i = bisect.bisect_right(q.deadlines, deadline)
        q.deadlines.insert(i, deadline)
        q.ids.insert(i, request_id)
        return None

    def queued(self, session_id: str | None = None) -> int:
        if session_id is not None:
            return len(self._queues[session_id].ids)
        return sum(len(q.ids) for q in self._queues.values())

    def _decide(
        self, sid: str, now: float, profile: Profile, dropped: list[Dropped]
    ) -> tuple[tuple[int, ...], float]:
        """Apply the session's policy; pop drops and the taken requests. Returns (ids, min deadline)."""
        q = self._queues[sid]
        if not q.ids:
            return (), float("inf")
        d = q.policy.decide(q.deadlines, now, q.target, profile)
        if d.drop:
            dropped.extend(
                Dropped(sid, rid, drop_reason(dl, now, self._profiles[q.spec.model]))
                for dl, rid in zip(q.deadlines[: d.drop], q.ids[: d.drop])
            )
        take = d.take
        ids = tuple(q.ids[d.drop : d.drop + take])
        first = q.deadlines[d.drop] if take else float("inf")
        del q.ids[: d.drop + take]
        del q.deadlines[: d.drop + take]
        return ids, first

    def _laxity(self, sid: str) -> float:
        """When the session's head request must start: its deadline less its next batch's latency."""
        q = self._queues[sid]
        return q.deadlines[0] - self._profiles[q.spec.model].latency(min(q.target, len(q.ids)))

    def _ring(self) -> list[tuple[int, str]]:
        """(position, session) of every session in round-robin order from the cursor."""
        n = len(self._order)
        return [((self._cursor + k) % n, self._order[(self._cursor + k) % n]) for k in range(n)]

    def _candidates(self) -> list[tuple[int, str]]:
        """(position in the round-robin order, session) of every session with queued requests, in
        the order ``schedule`` tries them."""
        busy = [(i, sid) for i, sid in self._ring() if self._queues[sid].ids and not self._queues[sid].spec.background]
        if self.order == "laxity":
            busy.sort(key=lambda c: self._laxity(c[1]))  # stable: ties keep round-robin order
        return busy

    def schedule(self, now: float) -> Step:
        """The next batch (session by ``order``), plus every drop decided on the way."""
        self._retarget(now)
        dropped: list[Dropped] = []
        n = len(self._order)
        for i, sid in self._candidates():
            q = self._queues[sid]
            profile = self._profiles[q.spec.model]
            ids, first = self._decide(sid, now, profile, dropped)
            if not ids:
                continue
            self._cursor = (i + 1) % n
            group = self._groups.get(q.spec.model)
            if group is None:
                if self.grow and not self._planned and len(ids) >= q.target and q.ids:
                    ids = ids + self._grown(sid, now, profile, len(ids), first)
                return Step(Dispatch(sid, q.spec.model, ids, profile.latency(len(ids))), tuple(dropped))
            return Step(self._merge_group(group, sid, ids, first, now, profile, dropped), tuple(dropped))
        return Step(self._background(now), tuple(dropped))

    def _grown(self, sid: str, now: float, profile: Profile, taken: int, first: float) -> tuple[int, ...]:
        """Requests of ``sid``'s backlog that join the batch of ``taken`` just decided (its head's
        deadline ``first``; see :data:`GROW`): up to the largest size that ends by that deadline,
        leaves every other real-time session's next batch time to start (:meth:`rt_deadline`
        without ``sid``, one batch of reserve) and serves at least as many requests a second as a
        batch of ``taken``. Pops and returns them."""
        q = self._queues[sid]
        end = min(first, self.rt_deadline(now, exclude=sid, reserve=1))
        rate = taken / profile.latency(taken)
        b = best = taken
        while b - taken < len(q.ids) and b < profile.max_batch and now + profile.latency(b + 1) <= end:
            b += 1
            if b / profile.latency(b) >= rate:
                best = b
        more = tuple(q.ids[: best - taken])
        del q.ids[: best - taken]
        del q.deadlines[: best - taken]
        return more

    def rt_deadline(self, now: float, exclude: str | None = None, reserve: int = RESERVE_BATCHES) -> float:
        """The latest time the device may be busy until with background work: every real-time
        session's next batch (queued, or expected) still starts in time (:func:`latest_end`),
        keeping ``reserve`` batches of it clear; ``exclude``: one session not counted."""
        batches = []
        for sid, q in self._queues.items():
            if q.spec.background or sid == exclude:
                continue
            profile = self._profiles[q.spec.model]
            if q.ids:
                head, b = q.deadlines[0], min(q.target, len(q.ids))
            else:  # its next request, and those arriving at its recent rate until its batch starts
                arrive = next_arrival(now, q.last_arrival, q.gaps)
                head = arrive + q.spec.slo_s
                after_gaps = list(q.counts)[-len(q.gaps):] if q.gaps else []
                rate = recent_rate(now, q.last_arrival, q.gaps, after_gaps)
                first = math.ceil(sum(q.counts) / len(q.counts)) if q.counts else 1
                b = expected_batch(profile.planning_latency, q.spec.slo_s, rate, q.target, reserve, first)
            d = profile.planning_latency(b)
            batches.append((head - reserve * d, d))
        return latest_end(batches)

    def _background(self, now: float) -> Dispatch | None:
        """The next background batch, in turn among background sessions with work, sized to end by
        :meth:`rt_deadline`; None when there is none or none fits."""
        n = len(self._order)
        waiting = [(i, sid) for i, sid in self._ring() if self._queues[sid].spec.background and self._queues[sid].ids]
        if not waiting:
            return None
        end = self.rt_deadline(now)
        for i, sid in waiting:
            q = self._queues[sid]
            profile = self._profiles[q.spec.model]
            b = background_batch(now, [end], profile.planning_latency, pending=len(q.ids), max_batch=q.target)
            if b == 0:
                continue
            ids = tuple(q.ids[:b])
            del q.ids[:b]
            del q.deadlines[:b]
            self._cursor = (i + 1) % n
            group = self._groups.get(q.spec.model)
            parts = (Part(sid, q.spec.model, ids),) if group is not None else ()
            return Dispatch(sid, q.spec.model, ids, profile.latency(b), parts, group)
        return None

    def _merge_group(
        self, group: str, lead: str, ids: tuple[int, ...], first: float, now: float, profile: Profile,
        dropped: list[Dropped],
    ) -> Dispatch:
        """Add the other sessions of a prefix group to the lead's batch, as long as every request
        already in the merged batch still meets its deadline (ℓ of the merged batch ≤ budget)."""
        parts = [Part(lead, self._queues[lead].spec.model, ids)]
        total, earliest = len(ids), first
        limit = self._queues[lead].target  # the group's planned merged batch size
        for sid in self._order:
            q = self._queues[sid]
            if sid == lead or not q.ids or q.spec.background or self._groups.get(q.spec.model) != group:
                continue
            # Members join without dropping anything: take the longest head of their queue that
            # finishes in time inside the merged batch; what does not fit waits for its own turn,
            # where the member's own policy decides.
            room = 0
            while (total + room < limit and room < len(q.ids)
                   and now + profile.latency(total + room + 1) <= min(earliest, q.deadlines[0])):
                room += 1
            if room == 0:
                continue
            more = tuple(q.ids[:room])
            earliest = min(earliest, q.deadlines[0])
            del q.ids[:room]
            del q.deadlines[:room]
            parts.append(Part(sid, q.spec.model, more))
            total += room
        all_ids = tuple(rid for p in parts for rid in p.request_ids)
        return Dispatch(lead, parts[0].model, all_ids, profile.latency(total), tuple(parts), group)

    def expire(self, now: float) -> tuple[Dropped, ...]:
        """Drop every queued request that can no longer finish even alone (reason ``deadline``)."""
        out: list[Dropped] = []
        for sid, q in self._queues.items():
            limit = now + self._profiles[q.spec.model].latency(1)
            k = bisect.bisect_left(q.deadlines, limit)
            out.extend(Dropped(sid, rid, "deadline") for rid in q.ids[:k])
            del q.ids[:k]
            del q.deadlines[:k]
        return tuple(out)

    def observed(self, dispatch: Dispatch, seconds: float, weight: float = PACE_WEIGHT) -> None:
        """Fold a measured batch latency into the model's profile: its pace and this size's
        correction (online refresh, :data:`SIZE_DECAY`)."""
        model, b = dispatch.model, dispatch.batch
        if b < 1 or not (seconds > 0 and math.isfinite(seconds)):
            return
        measured = self._measured[model]
        lo, hi = PACE_RANGE
        ratio = min(hi, max(lo, seconds / measured.latency(b)))
        pace = self._pace.get(model, 1.0)
        pace += weight * (ratio - pace)
        self._pace[model] = pace
        sized = self._sized.setdefault(model, {})
        for k in sized:
            if k != b:
                sized[k] += SIZE_DECAY * (1.0 - sized[k])
        own = sized.get(b, 1.0)
        sized[b] = own + weight * (ratio / pace - own)
        self._profiles[model] = measured.adjusted(pace, sized)

    def pace(self, model: str) -> float:
        """How much longer than profiled the model's batches run lately (1: as profiled)."""
        return self._pace.get(model, 1.0)

    def with_profile(self, model: str, profile: Profile) -> None:
        """A new profile for ``model`` (a load, a background probe), used as given: its online
        refresh starts again. While no plan has set the batch sizes, they are chosen again from it
        (``local_targets``): a size measured in the background is used at once by an executor that
        serves without a scheduler."""
        self._measured[model] = self._profiles[model] = profile
        self._pace.pop(model, None)
        self._sized.pop(model, None)
        if not self._planned:
            self._local_targets()

    def _retarget(self, now: float) -> None:
        """Without a plan: the batch sizes again when the set of active sessions changed (a session
        with requests queued, or one within :data:`ACTIVE_WINDOW_S`), and every :data:`RETARGET_S`."""
        if self._planned:
            return
        active = frozenset(sid for sid, q in self._queues.items() if not q.spec.background and (
            q.ids or (q.last_arrival is not None and now - q.last_arrival <= ACTIVE_WINDOW_S)))
        if active != self._active or now - self._retargeted >= RETARGET_S:
            self._active, self._retargeted = active, now
            self._local_targets()

    def budget(self, session_id: str) -> float:
        """The time a request of ``session_id`` has here (:data:`BUDGET_QUANTILE` of its recent
        requests' deadline − arrival, at most its SLO; the SLO before any arrived)."""
        q = self._queues[session_id]
        if not q.budgets:
            return q.spec.slo_s
        # Inline (metrics.percentile's module is not pure); > 0: it becomes a SessionSpec's SLO, and
        # requests that arrived already expired would make it negative.
        ordered = sorted(q.budgets)
        return max(1e-6, min(q.spec.slo_s, ordered[int(BUDGET_QUANTILE * (len(ordered) - 1))]))

    def _local_targets(self) -> None:
        """:func:`local_targets` over the active sessions; an idle one gets the size it would have
        alone (its first request makes it active, and every size is chosen again)."""
        specs = [q.spec if q.spec.background else replace(q.spec, slo_s=self.budget(sid))
                 for sid, q in self._queues.items()]
        busy = [s for s in specs if self._active is None or s.background or s.session_id in self._active]
        targets = local_targets(busy, self._profiles, self._groups, self.order)
        for s in specs:
            b = targets.get(s.session_id) or local_targets([s], self._profiles, self._groups)[s.session_id]
            self._queues[s.session_id].target = max(1, b)

