"""Query analysis in the control plane: from the app reports workers publish (DNN graph, calls per
model and per edge) and the models' profiles, split each app's SLO across its DNN stages with the
latency-split dynamic program, next to the even split. Pure.

The rate of a stage is its calls per frame (the γ products measured at run time, γ being child
requests per answered parent request); the split only depends on relative rates, so no frame rate
is needed. A model fed by several parents is placed
under the first one (the dynamic program works on trees). Apps whose models have no profile yet, or
whose SLO no split can meet, are reported with the reason. So are apps whose fan-out has not been
measured on enough requests yet (``min_answered`` answered parent requests per edge): a split made
from a worker's first few frames, when children are still in flight, would plan a γ near 0.

Before dividing the SLO, the split reserves the time the app's frames spend outside the
executor, as its workers measured it (:class:`~vidnexus.contracts.reports.Overheads`, the worst
worker's per key, :func:`reserves_of`): each stage's bus round trip and the CPU steps after it on
the paths through it, the CPU steps before the first stage and the rows' encoding on every path
(:mod:`vidnexus.control.latency_split`). The split's ``reserve_ms`` says what was reserved.

Example (Nexus Figure 4 shape: a detector feeding a classifier at γ = 2):
    >>> from vidnexus.contracts.profile import Profile
    >>> from vidnexus.contracts.reports import AppReport, FanOut
    >>> profs = {"det": Profile.linear(0.010, 0.005, 32), "cls": Profile.linear(0.002, 0.003, 64)}
    >>> rep = AppReport("a", "w1", 200, ("det", "cls"), (("frames", "det"), ("det", "cls")),
    ...                 FanOut(frames=100, calls={"det": 100, "cls": 200}))
    >>> r = analyze_apps([rep], profs)["a"]
    >>> r.ok, sorted(r.budgets_ms), r.gain >= 1.0
    (True, ['cls', 'det'], True)

The same app whose requests spend 20 ms on the bus and 10 ms in CPU steps along the path:
    >>> from dataclasses import replace
    >>> from vidnexus.contracts.reports import Overheads
    >>> oh = Overheads(hop_ms={"det": 8.0, "cls": 12.0}, cpu_ms={"det": 6.0}, publish_ms=4.0)
    >>> r = analyze_apps([replace(rep, overheads=oh)], profs)["a"]
    >>> r.reserve_ms, sum(r.budgets_ms.values())
    ({'det': 14.0, 'cls': 12.0, 'frames': 4.0}, 170.0)
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

from vidnexus.contracts.plans import LatencySplit
from vidnexus.contracts.profile import Profile
from vidnexus.contracts.reports import AppReport
from vidnexus.control.latency_split import Stage, even_split, split_latency, throughput_from_profile

__all__ = ["AppSplit", "merge_reports", "reserves_of", "settle_reserves", "analyze_apps", "analyze_merged"]


@dataclass(frozen=True)
class AppSplit:
    app: str
    ok: bool
    reason: str = ""
    budgets_ms: dict[str, float] = field(default_factory=dict)
    even_ms: dict[str, float] = field(default_factory=dict)
    gamma: dict[str, float] = field(default_factory=dict)
    devices_per_frame_s: float = 0.0
    even_devices_per_frame_s: float = 0.0
    reserve_ms: dict[str, float] = field(default_factory=dict)
    """What was reserved outside the executor (see :func:`reserves_of`)."""

    @property
    def gain(self) -> float:
        """Throughput of the analyzed split over the even split (≥ 1)."""
        if not self.ok or self.devices_per_frame_s <= 0:
            return 1.0
        return self.even_devices_per_frame_s / self.devices_per_frame_s

    def to_contract(self) -> LatencySplit:
        g = self.gain
        return LatencySplit(self.ok, self.reason, dict(self.budgets_ms), dict(self.even_ms), dict(self.gamma),
                            round(g, 4) if g != float("inf") else None, dict(self.reserve_ms))


def merge_reports(reports: Sequence[AppReport]) -> dict[str, AppReport]:
    """One report per app: counts summed over its workers' latest reports, overheads the worst
    worker's per key."""
    out: dict[str, AppReport] = {}
    for r in reports:
        prev = out.get(r.app)
        out[r.app] = r if prev is None else replace(prev, fanout=prev.fanout + r.fanout,
                                                    overheads=prev.overheads.worst(r.overheads))
    return out


def reserves_of(r: AppReport) -> dict[str, float]:
    """Pure: the ms to reserve per DNN node of ``r``'s app (``frames``: on every path), from its
    measured overheads (:meth:`~vidnexus.contracts.reports.Overheads.reserve_ms`); nodes with
    nothing measured are left out.

    Example:
        >>> from vidnexus.contracts.reports import Overheads
        >>> r = AppReport("a", "w", 200, ("det",), (("frames", "det"),),
        ...               overheads=Overheads({"det": 3.0}, {"frames": 1.0, "det": 0.5}))
        >>> reserves_of(r)
        {'det': 3.5, 'frames': 1.0}
    """
    out = {n: round(r.overheads.reserve_ms(n), 3) for n in (*r.models, "frames")}
    return {n: v for n, v in out.items() if v > 0}


def settle_reserves(measured: Mapping[str, float], previous: Mapping[str, float] | None,
                    slack_ms: float) -> dict[str, float]:
    """Pure: the reserves to split with: ``previous`` (the last epoch's) while every measured
    reserve stays within ``slack_ms`` of it, else ``measured``. A percentile that wobbles around
    an ε step would otherwise move the stage SLOs, and so their sessions, every epoch.

    Example:
        >>> settle_reserves({"det": 12.0}, {"det": 9.5}, slack_ms=5.0)
        {'det': 9.5}
        >>> settle_reserves({"det": 16.0}, {"det": 9.5}, slack_ms=5.0)
        {'det': 16.0}
    """
    if previous is not None and all(abs(measured.get(k, 0.0) - previous.get(k, 0.0)) <= slack_ms
                                    for k in {*measured, *previous}):
        return dict(previous)
    return dict(measured)


def _tree(models: Sequence[str], edges: Sequence[Sequence[str]], rate: Mapping[str, float],
          profiles: Mapping[str, Profile], reserve_ms: Mapping[str, float]) -> list[Stage]:
    parent: dict[str, str] = {}
    for p, c in edges:
        parent.setdefault(c, p)  # first parent wins: the DP needs a tree

    def build(name: str) -> Stage:
        kids = tuple(build(c) for c in models if parent.get(c) == name)
        return Stage(name, rate[name], throughput_from_profile(profiles[name]), kids,
                     reserve_ms.get(name, 0.0) / 1000)

    return [build(m) for m in models if parent.get(m) == "frames"]


MIN_ANSWERED = 50
"""Answered parent requests an edge needs before its γ is trusted (and frames before a root's)."""


def analyze_apps(reports: Sequence[AppReport], profiles: Mapping[str, Profile],
                 epsilon_s: float = 0.001, min_answered: int = MIN_ANSWERED) -> dict[str, AppSplit]:
    """Latency split per app (see the module docstring)."""
    return analyze_merged(merge_reports(reports), profiles, epsilon_s, min_answered)


def analyze_merged(merged: Mapping[str, AppReport], profiles: Mapping[str, Profile],
                   epsilon_s: float = 0.001, min_answered: int = MIN_ANSWERED,
                   reserves: Mapping[str, Mapping[str, float]] | None = None) -> dict[str, AppSplit]:
    """:func:`analyze_apps` on reports already summed per app by :func:`merge_reports`;
    ``reserves`` (app → :func:`reserves_of`'s form) replaces the reports' measured ones."""
    out: dict[str, AppSplit] = {}
    for name, r in merged.items():
        frames = r.fanout.frames
        calls = r.fanout.calls
        missing = [m for m in r.models if m not in profiles]
        if not r.models:
            out[name] = AppSplit(name, False, "no DNN stages")
            continue
        if missing:
            out[name] = AppSplit(name, False, f"no profile yet for {missing}")
            continue
        if frames <= 0:
            out[name] = AppSplit(name, False, "no frames seen yet")
            continue
        rate = {m: calls.get(m, 0) / frames for m in r.models}
        answered = r.fanout.ok or calls  # reports with calls only: every call answered
        parent = {c: p for p, c in reversed(r.edges)}
        gamma = {}
        thin: list[str] = []
        for m in r.models:
            p = parent.get(m, "frames")
            base = frames if p == "frames" else answered.get(p, 0)
            gamma[f"{p}->{m}"] = round(calls.get(m, 0) / base, 4) if base > 0 else 0.0
            if base < min_answered:
                thin.append(f"{p}->{m} ({base} of {min_answered})")
        if thin:
            out[name] = AppSplit(name, False, f"fan-out not measured on enough requests yet: {', '.join(thin)}",
                                 gamma=gamma)
            continue
        slo_s = r.slo_ms / 1000
        held = dict(reserves[name]) if reserves is not None and name in reserves else reserves_of(r)
        app_reserve_s = held.get("frames", 0.0) / 1000
        budgets: dict[str, float] = {}
        even: dict[str, float] = {}
        cost = even_cost = 0.0
        try:
            for root in _tree(r.models, r.edges, rate, profiles, held):
                s = split_latency(root, slo_s, epsilon_s, reserve_s=app_reserve_s)
                e = even_split(root, slo_s, reserve_s=app_reserve_s)
                budgets.update({k: round(v * 1000, 3) for k, v in s.budgets.items()})
                even.update({k: round(v * 1000, 3) for k, v in e.budgets.items()})
                cost += s.devices
                even_cost += e.devices
        except ValueError as err:
            out[name] = AppSplit(name, False, str(err), gamma=gamma, reserve_ms=held)
            continue
        out[name] = AppSplit(name, True, "", budgets, even, gamma, cost, even_cost, held)
    return out
