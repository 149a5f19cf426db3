"""Piccolo's planning algorithms: cost-efficient serving on heterogeneous devices under latency
constraints. Pure.

A :class:`Config` is one profiled way to run a module: batch b, batch duration d, on a device type with
a unit price p; its throughput is t = b/d and its throughput-cost ratio t/p. A machine at partial load
is charged its occupancy (cost = Σ occupancy × price, Piccolo §III-A).

- **Throughput-cost dispatch** (§III-B, Theorem 1): machines ranked by t/p receive whole batches, the
  best-ranked first. Machine i's worst-case latency is d_i + b_i/w_i, w_i the request rate flowing to
  machines ranked at or below it (:func:`tc_dispatch_wcl`); round-robin's is about 2d
  (:func:`round_robin_wcl`). Figure 3: 8 req/s over A, B (b=6, d=2.0) and C (b=2, d=1.0): 2.75 s vs
  3.375 s.
- **Configuration generator** (Algorithm 1, :func:`generate_configs`): walk the configurations by t/p;
  while workload rw remains, put ⌊rw/t⌋ full machines on the best one whose d + b/rw meets the budget,
  then fall to the next; the last fraction runs on a partial machine. Note that the machines of one
  configuration do not share their inflow here: the partial machine is judged on the leftover alone,
  as the paper's example counts it (a rotation of batches among equals would see the whole rate).
- **Dummy requests** (§III-D, :func:`dummies`, :func:`generate_with_dummies`): a residual u below what
  a full batch of b needs within L is padded with b/(L − d) − u dummy requests when that is cheaper.
- **Latency splitter** (Algorithm 2, :func:`split_latency`): every module starts at its fastest
  configuration; the move of largest latency-cost efficiency LC = Δcost/ΔWCL that keeps the end-to-end
  latency within the SLO is applied until none is left; budgets are then scaled in proportion to WCL.

Example (Table I, module M1 at 285 req/s within 2.0 s: 2 × b100 + 1 × b20 + 0.1 × b5):
    >>> m1 = [Config(5, 0.1), Config(20, 0.25), Config(100, 1.0)]
    >>> plan = generate_configs(m1, 285, 2.0)
    >>> [(a.config.batch, round(a.machines, 2)) for a in plan.allocations], round(plan.cost, 2)
    ([(100, 2), (20, 1), (5, 0.1)], 3.1)
    >>> round(generate_with_dummies(m1, 285, 2.0).cost, 2)  # 15 dummy req/s: three b100 machines
    3.0
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence

from vidnexus.errors import PlacementError

__all__ = ["Config", "Allocation", "Plan", "worst_case_latency", "tc_dispatch", "tc_dispatch_wcl",
           "round_robin_wcl", "generate_configs", "two_config_plan", "dummies", "generate_with_dummies",
           "cost", "cost_over_single_type", "Module", "ModuleWCL", "tc_module_wcl", "rr_module_wcl",
           "latency_cost_efficiency", "cost_at_budgets", "LatencySplit", "split_latency"]

EPS = 1e-9


@dataclass(frozen=True)
class Config:
    """One profiled configuration: ``batch`` requests in ``latency_s`` seconds on ``device_type`` at
    ``price`` per machine and unit of time."""

    batch: int
    latency_s: float
    device_type: str = "gpu"
    price: float = 1.0

    def __post_init__(self) -> None:
        if self.batch < 1 or not self.latency_s > 0 or not self.price > 0:
            raise ValueError(f"config {self}: batch must be ≥ 1, latency_s and price > 0")

    @property
    def throughput(self) -> float:
        """t = b/d, requests/s of a fully loaded machine."""
        return self.batch / self.latency_s

    @property
    def tc(self) -> float:
        """Throughput-cost ratio t/p: requests/s per unit of price."""
        return self.throughput / self.price


def _rank_key(c: Config) -> tuple[float, float, int]:
    return (-c.tc, c.latency_s, c.batch)


def worst_case_latency(config: Config, inflow: float) -> float:
    """Theorem 1 for one machine: d + b/w, w the rate flowing to it and the machines ranked below it
    (its batch collects at w). Infinite when nothing flows.

    Example:
        >>> worst_case_latency(Config(6, 2.0), 8.0)
        2.75
    """
    return config.latency_s + config.batch / inflow if inflow > 0 else math.inf


@dataclass(frozen=True)
class Allocation:
    """``machines`` machines (a fraction for one at partial load) running ``config``, carrying
    ``rate`` req/s in all, with ``inflow`` req/s flowing to them and the machines ranked below."""

    config: Config
    machines: float
    rate: float
    inflow: float

    @property
    def wcl_s(self) -> float:
        return worst_case_latency(self.config, self.inflow)

    @property
    def cost(self) -> float:
        return self.machines * self.config.price


def cost(allocations: Iterable[Allocation]) -> float:
    """Σ occupancy × price (Piccolo §III-A: a machine at partial load is charged its occupancy).

    Example (the paper's two-configuration scheme for Table I's M1: 2 × b100 + 1.7 × b5):
        >>> cost([Allocation(Config(100, 1.0), 2, 200, 285), Allocation(Config(5, 0.1), 1.7, 85, 85)])
        3.7
    """
    return sum(a.cost for a in allocations)


@dataclass(frozen=True)
class Plan:
    """A module's configuration set, best throughput-cost first: ``rate`` req/s of real requests
    and ``dummy_rate`` of padding (§III-D), carried together by the allocations."""

    allocations: tuple[Allocation, ...]
    rate: float
    dummy_rate: float = 0.0

    @property
    def cost(self) -> float:
        return cost(self.allocations)

    @property
    def machines(self) -> float:
        return sum(a.machines for a in self.allocations)

    @property
    def carried(self) -> float:
        return sum(a.rate for a in self.allocations)

    @property
    def wcl_s(self) -> float:
        return max((a.wcl_s for a in self.allocations), default=0.0)


def tc_dispatch(machines: Sequence[Config], rate: float) -> tuple[Allocation, ...]:
    """Throughput-cost dispatch (§III-B): one :class:`Allocation` per machine, in rank order (t/p
    descending; the given order among equals), each filled to its throughput before the next gets
    any. ``inflow`` is w_i of Theorem 1: the rate to machines whose ratio is at most machine i's, so
    machines of equal ratio share it. Unloaded machines are left out. Raises PlacementError when the
    machines cannot carry ``rate``.

    Example (Figure 3: A, B at 3 req/s and C at 2; w = 8, 8, 2):
        >>> [(a.rate, a.inflow) for a in tc_dispatch([Config(6, 2.0), Config(6, 2.0), Config(2, 1.0)], 8)]
        [(3.0, 8.0), (3.0, 8.0), (2.0, 2.0)]
    """
    ranked = sorted(machines, key=_rank_key)
    capacity = sum(c.throughput for c in ranked)
    if rate > capacity * (1 + EPS):
        raise PlacementError(f"{len(ranked)} machines carry {capacity:g} req/s, not {rate:g}")
    loads: list[tuple[Config, float]] = []
    left = rate
    for c in ranked:
        f = min(c.throughput, left)
        if f <= EPS * max(1.0, rate):
            break
        loads.append((c, f))
        left -= f
    out = []
    for c, f in loads:
        w = sum(g for d, g in loads if d.tc <= c.tc * (1 + EPS))
        out.append(Allocation(c, f / c.throughput, f, w))
    return tuple(out)


def tc_dispatch_wcl(machines: Sequence[Config], rate: float) -> float:
    """The dispatcher's worst-case latency under throughput-cost dispatch: max_i d_i + b_i/w_i
    (Theorem 1).

    Example (Figure 3):
        >>> tc_dispatch_wcl([Config(6, 2.0), Config(6, 2.0), Config(2, 1.0)], 8)
        2.75
    """
    return max((a.wcl_s for a in tc_dispatch(machines, rate)), default=0.0)


def round_robin_wcl(machines: Sequence[Config], rate: float) -> float:
    """The baseline's worst-case latency when the k loaded machines of equal ratio take requests in
    turn (Figure 3, bottom): a machine's batch collects over (b − 1)·k + 1 arrivals at w, so its
    latency is d + ((b − 1)·k + 1)/w, about 2d when the group runs full. With k = 1 it is Theorem 1's.

    Example (Figure 3: A's batch is requests 1, 3, …, 11 at 8 req/s, then 2.0 s):
        >>> round_robin_wcl([Config(6, 2.0), Config(6, 2.0), Config(2, 1.0)], 8)
        3.375
    """
    loaded = tc_dispatch(machines, rate)
    worst = 0.0
    for a in loaded:
        k = sum(1 for o in loaded if math.isclose(o.config.tc, a.config.tc, rel_tol=EPS))
        c = a.config
        worst = max(worst, c.latency_s + ((c.batch - 1) * k + 1) / a.inflow)
    return worst


def generate_configs(configs: Sequence[Config], rate: float, budget_s: float) -> Plan:
    """Piccolo's configuration generator (Algorithm 1, see the module docstring): full machines of
    the best throughput-cost configuration whose d + b/rw meets ``budget_s`` (rw: the workload not
    yet placed), then the next; the last fraction on one partial machine. Raises PlacementError when
    the remaining workload fits no configuration.

    Example (Table I, M1 at 285 req/s within 2.0 s):
        >>> generate_configs([Config(5, 0.1), Config(20, 0.25), Config(100, 1.0)], 285, 2.0).machines
        3.1
    """
    if rate < 0:
        raise ValueError(f"rate must be ≥ 0, not {rate}")
    ranked = sorted(configs, key=_rank_key)
    out: list[Allocation] = []
    rw = float(rate)
    k = 0
    while rw > EPS * max(1.0, rate):
        while k < len(ranked) and worst_case_latency(ranked[k], rw) > budget_s * (1 + EPS):
            k += 1  # rw only falls, so a configuration that misses the budget never meets it again
        if k == len(ranked):
            raise PlacementError(f"{rw:g} of {rate:g} req/s fits no configuration within {budget_s:g} s")
        c = ranked[k]
        n = rw / c.throughput
        if n >= 1 - EPS:
            full = math.floor(n + EPS)
            out.append(Allocation(c, full, full * c.throughput, rw))
            rw = max(0.0, rw - full * c.throughput)
        else:
            out.append(Allocation(c, n, rw, rw))
            rw = 0.0
    return Plan(tuple(out), rate)


def two_config_plan(opt: Config, res: Config, rate: float) -> Plan:
    """The two-configuration scheme of earlier systems (§II): full machines of ``opt`` for
    ⌊T/t_opt⌋·t_opt, the rest on ``res`` machines charged fractionally. The configurations are the
    caller's choice; no latency is checked.

    Example (§II, M1 at 285 req/s: 2 × b100 and 1.7 × b5):
        >>> two_config_plan(Config(100, 1.0), Config(5, 0.1), 285).cost
        3.7
    """
    full = math.floor(rate / opt.throughput + EPS)
    rest = max(0.0, rate - full * opt.throughput)
    allocs = [Allocation(opt, full, full * opt.throughput, rate)] if full else []
    if rest > EPS * max(1.0, rate):
        allocs.append(Allocation(res, rest / res.throughput, rest, rest))
    return Plan(tuple(allocs), rate)


def dummies(residual_rate: float, config: Config, budget_s: float) -> float:
    """Dummy requests/s that let ``config`` take the residual within ``budget_s`` (§III-D):
    dum = b/(L − d) − u, the least inflow with d + b/w ≤ L, less what is there; 0 when the residual
    already suffices, infinite when d ≥ L.

    Example (M1's 85 req/s residual on b100 within 2.0 s):
        >>> dummies(85, Config(100, 1.0), 2.0)
        15.0
    """
    if budget_s <= config.latency_s:
        return math.inf
    return max(0.0, config.batch / (budget_s - config.latency_s) - residual_rate)


def generate_with_dummies(configs: Sequence[Config], rate: float, budget_s: float,
                          planner: Callable[[Sequence[Config], float, float], Plan] = generate_configs) -> Plan:
    """Algorithm 1 with Piccolo's dummy generator (§III-D): for each configuration c_i (by
    throughput-cost), u_i is the rate the plan puts on worse-ranked configurations; padding the
    module with dummies(u_i, c_i) lets c_i take that residual whole. The cheapest plan wins, the one
    without dummies on a tie (padding only adds work).

    Example (M1 at 285 req/s within 2.0 s: 15 dummy req/s, 3 machines instead of 3.1):
        >>> p = generate_with_dummies([Config(5, 0.1), Config(20, 0.25), Config(100, 1.0)], 285, 2.0)
        >>> p.dummy_rate, p.machines
        (15.0, 3)
    """
    best = planner(configs, rate, budget_s)
    for c in sorted(configs, key=_rank_key):
        u = sum(a.rate for a in best.allocations if _rank_key(a.config) > _rank_key(c))
        if u <= EPS * max(1.0, rate):
            continue
        dum = dummies(u, c, budget_s)
        if not 0 < dum < math.inf:
            continue
        try:
            cand = planner(configs, rate + dum, budget_s)
        except PlacementError:
            continue
        if cand.cost < best.cost - EPS * max(1.0, best.cost):
            best = Plan(cand.allocations, rate, dum)
    return best


def cost_over_single_type(configs: Sequence[Config], rate: float, budget_s: float,
                          planner: Callable[[Sequence[Config], float, float], Plan] = generate_configs) -> float:
    """How much more the cheapest single-device-type plan costs than the heterogeneous mix, as a
    fraction (Piccolo's "single hardware type" ablation reports +23.2% on its workloads): 0 when one
    type does as well, infinite when no single type can serve ``rate`` within ``budget_s``.

    Example (a fast pricey type and a slow cheap one: the mix saves 1/7 of its cost):
        >>> x = [Config(100, 1.0, "x", 1.0), Config(10, 0.2, "x", 1.0)]
        >>> round(cost_over_single_type(x + [Config(4, 0.1, "y", 0.5)], 250, 2.0), 4)
        0.1429
    """
    mix = planner(configs, rate, budget_s).cost
    single = math.inf
    for kind in sorted({c.device_type for c in configs}):
        try:
            single = min(single, planner([c for c in configs if c.device_type == kind], rate, budget_s).cost)
        except PlacementError:
            continue
    return single / mix - 1 if mix > 0 else 0.0


# Algorithm 2: the latency splitter.

ModuleWCL = Callable[[Config, float], float]
"""A module's worst-case latency on one configuration at a rate (Algorithm 2's GetWCL)."""


def tc_module_wcl(config: Config, rate: float) -> float:
    """GetWCL under throughput-cost dispatch: d + b/T (Theorem 1 with one configuration, all of the
    module's rate T flowing to it); the paper's latency-cost example uses it."""
    return worst_case_latency(config, rate)


def rr_module_wcl(config: Config, rate: float) -> float:
    """GetWCL under round-robin dispatch as earlier systems count it: 2d. Table II's budgets are 2d of
    the chosen batches."""
    return 2 * config.latency_s


def _module_cost(config: Config, rate: float) -> float:
    return rate / config.tc  # p × T/t: machines charged fractionally, as Algorithm 2 line 11 does


def latency_cost_efficiency(prev: Config, new: Config, rate: float, wcl: ModuleWCL = tc_module_wcl) -> float:
    """LC = (cost_prev − cost_new)/(WCL_new − WCL_prev): the cost a move saves per second of latency
    it spends (§III-C).

    Example (M1 at 100 req/s from b5: to b20 2.50, to b100 0.54):
        >>> b5, b20, b100 = Config(5, 0.1), Config(20, 0.25), Config(100, 1.0)
        >>> round(latency_cost_efficiency(b5, b20, 100), 2), round(latency_cost_efficiency(b5, b100, 100), 2)
        (2.5, 0.54)
    """
    dw = wcl(new, rate) - wcl(prev, rate)
    saved = _module_cost(prev, rate) - _module_cost(new, rate)
    return saved / dw if dw > 0 else (math.inf if saved > 0 else -math.inf)


@dataclass(frozen=True)
class Module:
    """A DNN module of an application: ``rate`` req/s reach it, ``configs`` are its profiles."""

    name: str
    rate: float
    configs: tuple[Config, ...]


@dataclass(frozen=True)
class LatencySplit:
    """Per-module latency budgets (they add up to the SLO along the longest path), the configuration
    Algorithm 2 settled on for each, their fractional cost and their end-to-end WCL."""

    budgets: Mapping[str, float]
    configs: Mapping[str, Config]
    cost: float
    latency_s: float


def _order(modules: Sequence[Module], edges: Sequence[tuple[str, str]] | None) -> dict[str, list[str]]:
    """Each module's predecessors; modules must come in a topological order."""
    names = [m.name for m in modules]
    if len(set(names)) != len(names):
        raise ValueError(f"module names repeat: {names}")
    if edges is None:
        edges = list(zip(names, names[1:]))
    pos = {n: i for i, n in enumerate(names)}
    preds: dict[str, list[str]] = {n: [] for n in names}
    for u, v in edges:
        if u not in pos or v not in pos:
            raise ValueError(f"edge {u!r} -> {v!r} names a module not in {names}")
        if pos[u] >= pos[v]:
            raise ValueError(f"edge {u!r} -> {v!r}: list modules upstream first")
        preds[v].append(u)
    return preds


def _path_latency(wcls: Mapping[str, float], preds: Mapping[str, list[str]]) -> float:
    dist: dict[str, float] = {}
    for n, ps in preds.items():  # insertion order is the topological order
        dist[n] = wcls[n] + max((dist[p] for p in ps), default=0.0)
    return max(dist.values(), default=0.0)


def cost_at_budgets(modules: Sequence[Module], budgets: Mapping[str, float], wcl: ModuleWCL = tc_module_wcl
                    ) -> float:
    """Σ over modules of the fractional cost of its best throughput-cost configuration whose WCL
    meets its budget (infinite when none does): how Table II prices a split.

    Example (Table II, strategy 2: M2 and M3 both at b4 for 0.40 and 0.50 s):
        >>> m2 = Module("M2", 50, (Config(2, 2 / 16), Config(4, 4 / 25), Config(8, 8 / 30)))
        >>> m3 = Module("M3", 40, (Config(2, 2 / 12), Config(4, 4 / 20), Config(8, 8 / 25)))
        >>> round(cost_at_budgets([m2, m3], {"M2": 0.40, "M3": 0.50}, rr_module_wcl), 2)
        4.0
    """
    total = 0.0
    for m in modules:
        ok = [c for c in m.configs if wcl(c, m.rate) <= budgets[m.name] * (1 + EPS)]
        total += min((_module_cost(c, m.rate) for c in ok), default=math.inf)
    return total


def _fastest(m: Module, wcl: ModuleWCL) -> Config:
    """Algorithm 2's default configuration: the least WCL, the cheaper on a tie."""
    return min(m.configs, key=lambda c: (wcl(c, m.rate), _module_cost(c, m.rate)))


def split_latency(modules: Sequence[Module], slo_s: float, edges: Sequence[tuple[str, str]] | None = None,
                  wcl: ModuleWCL = tc_module_wcl) -> LatencySplit:
    """Piccolo's latency splitter (Algorithm 2): start every module at its fastest configuration
    (the cheaper on a tie); apply the move of largest :func:`latency_cost_efficiency` that lowers the
    cost and keeps the longest path's WCL within ``slo_s``, until none is left; then scale each
    module's WCL by slo_s / end-to-end latency. ``edges`` (upstream, downstream) join the modules,
    listed upstream first; by default they run one after another. Raises PlacementError when even
    the fastest configurations miss the SLO.

    Example (Table II under 2d: 0.40/0.50 s, b4 and b4, 4.00 machines):
        >>> m2 = Module("M2", 50, (Config(2, 2 / 16), Config(4, 4 / 25), Config(8, 8 / 30)))
        >>> m3 = Module("M3", 40, (Config(2, 2 / 12), Config(4, 4 / 20), Config(8, 8 / 25)))
        >>> s = split_latency([m2, m3], 0.9, wcl=rr_module_wcl)
        >>> {k: round(v, 2) for k, v in s.budgets.items()}, round(s.cost, 2)
        ({'M2': 0.4, 'M3': 0.5}, 4.0)
    """
    preds = _order(modules, edges)
    for m in modules:
        if not m.configs or not m.rate > 0:
            raise ValueError(f"module {m.name}: needs configurations and a positive rate")
    chosen = {m.name: _fastest(m, wcl) for m in modules}
    wcls = {m.name: wcl(chosen[m.name], m.rate) for m in modules}
    if _path_latency(wcls, preds) > slo_s * (1 + EPS):
        raise PlacementError(f"modules {[m.name for m in modules]}: the fastest configurations take "
                             f"{_path_latency(wcls, preds):g} s, over the SLO of {slo_s:g} s")
    while True:
        best: tuple[float, str, Config, float] | None = None
        for m in modules:
            prev = chosen[m.name]
            prev_cost = _module_cost(prev, m.rate)
            for c in m.configs:
                if _module_cost(c, m.rate) >= prev_cost - EPS * max(1.0, prev_cost):
                    continue  # only moves that save: the cost falls strictly, so the loop ends
                lc = latency_cost_efficiency(prev, c, m.rate, wcl)
                if best is not None and lc <= best[0]:
                    continue
                w = wcl(c, m.rate)
                if _path_latency({**wcls, m.name: w}, preds) <= slo_s * (1 + EPS):
                    best = (lc, m.name, c, w)
        if best is None:
            break
        _, name, c, w = best
        chosen[name], wcls[name] = c, w
    lat = _path_latency(wcls, preds)
    budgets = {m.name: wcls[m.name] / lat * slo_s if lat > 0 else slo_s for m in modules}
    total = sum(_module_cost(chosen[m.name], m.rate) for m in modules)
    return LatencySplit(budgets, chosen, total, lat)
