"""Open-loop load against a real serving system: submit at the trace's times, never wait for replies.

The submit callable returns a future of something with ``ok`` and ``latency_s`` (executor replies,
wire replies, or a peer's adapter).
"""

from __future__ import annotations

import concurrent.futures as cf
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping, Sequence

from vidnexus.clock import MonotonicClock
from vidnexus.roles.heap import settle_heap
from vidnexus.sim.loadgen import Arrival

__all__ = ["QUICK_LIMITS", "FULL_LIMITS", "drive", "good_fraction", "on_time", "confirmed_fraction", "CONFIRM_BAND",
           "probe_goodput", "warm_up", "best_of", "probe_seconds", "TurnOrder", "Turns", "in_turns", "misses"]

# Goodput searches of --quick runs are bounded whatever the machine's noise (they check the harness;
# figures come from full runs): probes of at most 6 s, 45 s per search, a 90% target. Full runs: 99%.
QUICK_LIMITS: dict[str, Any] = {"target": 0.90, "probe_max_s": 6.0, "search_budget_s": 45.0}
FULL_LIMITS: dict[str, Any] = {"target": 0.99, "probe_max_s": None, "search_budget_s": None}


def drive(trace: Sequence[Arrival], submit: Callable[[Arrival], "cf.Future[Any]"],
          timeout_s: float = 120.0) -> list[tuple[Arrival, Any]]:
    """Submit every arrival at its time (relative to now); return (arrival, reply) pairs."""
    # A full collection of a large heap (left by earlier parts of a benchmark) stalls every thread for
    # 100+ ms; collect now and freeze what survives so the run is not charged for it.
    settle_heap()
    clock = MonotonicClock()
    futs: list[tuple[Arrival, cf.Future[Any]]] = []
    t0 = clock.now()
    for a in trace:
        wait = t0 + a.t - clock.now()
        if wait > 0:
            time.sleep(wait)
        futs.append((a, submit(a)))
    return [(a, f.result(timeout=timeout_s)) for a, f in futs]


def good_fraction(results: Sequence[tuple[Arrival, Any]], slo_s: Mapping[str, float] | float) -> float:
    """Share of requests answered ok within their session's SLO (drops and errors are misses)."""
    good, n = on_time(results, slo_s)
    return good / n if n else 1.0


def on_time(results: Sequence[tuple[Arrival, Any]], slo_s: Mapping[str, float] | float) -> tuple[int, int]:
    """(requests answered ok within their session's SLO, requests) of one probe."""

    return sum(1 for a, r in results if r.ok and r.latency_s <= _slo_of(a, slo_s)), len(results)


def _slo_of(a: Arrival, slo_s: Mapping[str, float] | float) -> float:
    """``a``'s SLO: ``slo_s`` itself, or its session's entry."""
    return slo_s if isinstance(slo_s, (int, float)) else slo_s[a.session_id]


def misses(results: Sequence[tuple[Arrival, Any]], slo_s: Mapping[str, float] | float) -> dict[str, int]:
    """Pure: the requests of one probe that were not on time, by why: ``late`` (answered ok after
    the SLO) and each reason of a reply that was not ok (``dropped:<reason>``; a reply without one:
    ``dropped:error``). With :func:`on_time`'s count they add up to the probe's requests.

    Example:
        >>> from types import SimpleNamespace as R
        >>> a = Arrival(0.0, "0")
        >>> misses([(a, R(ok=True, latency_s=0.01, reason="")), (a, R(ok=True, latency_s=0.2, reason="")),
        ...         (a, R(ok=False, latency_s=0.0, reason="early_drop")), (a, R(ok=False, latency_s=0.0, reason=""))], 0.05)
        {'dropped:early_drop': 1, 'dropped:error': 1, 'late': 1}
    """
    out: dict[str, int] = {}
    for a, r in results:
        if not r.ok:
            key = f"dropped:{getattr(r, 'reason', '') or 'error'}"
        elif r.latency_s > _slo_of(a, slo_s):
            key = "late"
        else:
            continue
        out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items()))


CONFIRM_BAND = 0.02
"""How far below the target a probe may fall and still be run again (:func:`confirmed_fraction`)."""


def confirmed_fraction(probe: Callable[[int], tuple[int, int]], target: float, band: float = CONFIRM_BAND) -> float:
    """The share of requests on time at one rate: one probe's, or, when it fell short of ``target``
    by less than ``band``, that of it and a second probe (another trace: ``probe(1)``) pooled.

    ``probe(k)`` runs the k-th probe and returns (on time, requests). Why: a probe of a few hundred
    requests cannot tell 99% from 98.5% (at a true 0.5% of misses, 3 or more of 200 happen about one
    time in twelve), and a bisection that takes every failed probe at its word settles below a rate
    the system sustains, lower the more probes it makes. Near the target the rate is measured again
    on twice the requests; a clear failure (an overload, a stall that spoiled several percent) is
    not. Every system gets the same rule.

    Example (a first probe of 260 with 3 misses; the second with 0, then with 3):
        >>> confirmed_fraction(lambda k: [(257, 260), (260, 260)][k], 0.99)
        0.9942307692307693
        >>> round(confirmed_fraction(lambda k: [(257, 260), (257, 260)][k], 0.99), 4)
        0.9885
        >>> confirmed_fraction(lambda k: [(240, 260), (260, 260)][k], 0.99)  # 7.7% missed: not run again
        0.9230769230769231
    """
    good, n = probe(0)
    if n and target - band <= good / n < target:
        more, m = probe(1)
        good, n = good + more, n + m
    return good / n if n else 1.0


def probe_goodput(fraction_at: Callable[[float], float], lo: float, hi: float, tol: float, *,
                  target: float = 0.99, budget_s: float | None = None,
                  clock: Callable[[], float] = time.monotonic) -> float:
    """Highest rate in [lo, hi] at which ``fraction_at(rate) >= target``, by bisection to a relative
    ``tol`` (vidnexus.sim.simulator.goodput: a failed floor is probed up to three times, halving it). A result of 0 means even the lowest rate missed: on this shared 2-core VM that has
    been a stall (a full-suite run once saw it for a system that sustains 257 req/s alone), so the
    search runs once more; every system gets the same rule.

    ``budget_s`` bounds the wall time of the whole search (quick runs: a noisy machine made the floor
    search of one quick benchmark run past 900 s). Once spent, no new probe starts and the search
    returns the highest rate that passed so far (0 if none): a lower bound, never a guess."""
    from vidnexus.sim.simulator import goodput

    end = None if budget_s is None else clock() + budget_s

    def spent() -> bool:
        return end is not None and clock() >= end

    def search() -> float:
        return goodput(fraction_at, lo, hi, target=target, tol=tol, stop=spent)

    g = search()
    if g <= 0 and not spent():
        g = search()
    return g


def warm_up(run: Callable[[list[Any]], Any], x: Any, sizes: Sequence[int] = range(1, 33)) -> None:
    """Run a batch runner once at every batch size first: the first call at each new shape builds
    kernels and allocates (100+ ms on this CPU), and a benchmark should not charge that to requests."""
    for b in sizes:
        run([x] * b)


def best_of(n: int, run: Callable[[], float]) -> float:
    """The best of ``n`` runs of a probe. This shared 2-core VM has rare ~150 ms stalls that are
    not the system under test; every system and policy gets the same ``n``."""
    return max(run() for _ in range(max(1, n)))


def probe_seconds(rate: float, base_s: float, min_requests: int = 300, max_s: float | None = None) -> float:
    """Long enough for ``min_requests`` arrivals: with fewer, one late request is already over 1%
    and a 99% criterion measures noise. ``max_s`` caps it (quick runs: a floor search at low rates
    otherwise probes for minutes)."""
    s = max(base_s, min_requests / rate) if rate > 0 else base_s
    return min(s, max_s) if max_s is not None else s


class TurnOrder:
    """Pure: whose turn it is among searches that take turns, round robin in the order given; a
    search that ends leaves the order.

    Example (three searches; the second ends after its first turn):
        >>> o = TurnOrder(["inproc", "kafka", "kafka-linger"])
        >>> o.current()
        'inproc'
        >>> o.done("inproc"); o.done("kafka"); o.leave("kafka"); o.current()
        'kafka-linger'
        >>> o.done("kafka-linger"); o.current()
        'inproc'
        >>> o.leave("inproc"); o.leave("kafka-linger"); o.current() is None
        True
    """

    def __init__(self, names: Sequence[str]) -> None:
        if len(set(names)) != len(names):
            raise ValueError(f"turn names must differ: {list(names)}")
        self._queue = list(names)

    def current(self) -> str | None:
        return self._queue[0] if self._queue else None

    def done(self, name: str) -> None:
        """``name``'s turn ended: it goes to the back of the line."""
        if self._queue and self._queue[0] == name:
            self._queue.append(self._queue.pop(0))

    def leave(self, name: str) -> None:
        if name in self._queue:
            self._queue.remove(name)


class Turns:
    """Searches of several systems run in lock step: each in its own thread, one probe at a time,
    taking turns (:class:`TurnOrder`). Why: on this shared VM the machine's speed drifts over minutes
    (``bench peers``' speed checks: 30-60% within a run), so two goodputs searched one after the
    other compare two machines; searched in turns, probe by probe, both span the same minutes."""

    def __init__(self, names: Sequence[str]) -> None:
        self._order = TurnOrder(names)
        self._cv = threading.Condition()

    @contextmanager
    def turn(self, name: str) -> Iterator[None]:
        """Wait for ``name``'s turn, hold it for the block, then pass it on."""
        with self._cv:
            self._cv.wait_for(lambda: self._order.current() == name)
        try:
            yield
        finally:
            with self._cv:
                self._order.done(name)
                self._cv.notify_all()

    def leave(self, name: str) -> None:
        with self._cv:
            self._order.leave(name)
            self._cv.notify_all()


def in_turns(jobs: Mapping[str, Callable[[Turns], None]]) -> None:
    """Run each job in its own thread, taking turns (:class:`Turns`, in the mapping's order); a job
    leaves the turns when it returns or raises. Re-raises the first job's error, after every job ended.

    Example (each job records its probes; the turns interleave them):
        >>> log = []
        >>> def job(name, n):
        ...     def run(turns):
        ...         for k in range(n):
        ...             with turns.turn(name):
        ...                 log.append(f"{name}{k}")
        ...     return run
        >>> in_turns({"a": job("a", 3), "b": job("b", 1), "c": job("c", 2)})
        >>> log
        ['a0', 'b0', 'c0', 'a1', 'c1', 'a2']
    """
    turns = Turns(list(jobs))
    errors: list[BaseException] = []

    def run(name: str, job: Callable[[Turns], None]) -> None:
        try:
            job(turns)
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread below
            errors.append(e)
        finally:
            turns.leave(name)

    threads = [threading.Thread(target=run, args=(n, j), name=f"turns-{n}", daemon=True) for n, j in jobs.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
