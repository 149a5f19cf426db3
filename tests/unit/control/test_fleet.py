"""Several device types (control.fleet, Piccolo's throughput-cost rank) and the scheduler's epoch
over executors that report a device type and a price."""

from dataclasses import replace

import pytest

from vidnexus.contracts.profile import Profile
from vidnexus.contracts.stats import ExecutorStats, SessionStats, decode_stats, encode_stats
from vidnexus.control.fleet import DeviceType, plan_fleet, rank, single_type_cost
from vidnexus.control.plans import device_types
from vidnexus.control.scheduler import Observed, SchedulerConfig, SchedulerState, plan_epoch
from vidnexus.control.squishy import SessionLoad
from vidnexus.errors import CodecError

FAST = Profile.linear(0.001, 0.004, 16)   # ℓ(b) = 1 ms · b + 4 ms
SLOW = Profile.linear(0.002, 0.016, 16)   # ℓ(b) = 2 ms · b + 16 ms


def types(fast_count=None, slow_count=None, fast_price=3.0):
    return [DeviceType("fast", fast_price, {"m": FAST}, count=fast_count),
            DeviceType("slow", 1.0, {"m": SLOW}, count=slow_count)]


def test_each_session_ranks_the_types_that_meet_its_slo_by_price_per_throughput():
    tight, loose = SessionLoad("t", "m", 0.025, 10.0), SessionLoad("l", "m", 0.4, 10.0)
    # Tight: the slow type's ℓ(1) = 18 ms cannot run a batch twice within 25 ms.
    assert [name for _, name in rank(tight, types())] == ["fast"]
    # Loose: 1 / (16 / 48 ms) = 3 ms of price per req/s on the slow type, 3 / (16 / 20 ms) = 3.75 on the fast.
    (c_slow, n1), (c_fast, n2) = rank(loose, types())
    assert (n1, n2) == ("slow", "fast") and c_slow == pytest.approx(0.003) and c_fast == pytest.approx(0.00375)
    # At price 2 the fast type is the cheaper throughput.
    assert [name for _, name in rank(loose, types(fast_price=2.0))] == ["fast", "slow"]
    # A model a type has no profile of, or memory it cannot hold, rules it out.
    assert rank(SessionLoad("x", "other", 0.4, 1.0), types()) == []
    small = [DeviceType("fast", 3.0, {"m": FAST}, memory_bytes=1 << 20)]
    assert rank(SessionLoad("big", "m", 0.4, 1.0, memory_bytes=2 << 20), small) == []


def test_a_mix_costs_less_than_the_cheapest_single_type():
    loads = [SessionLoad("t", "m", 0.025, 100.0)] + [SessionLoad(f"l{i}", "m", 0.4, 330.0) for i in range(4)]
    fleet = plan_fleet(loads, types())
    assert fleet.home == {"t": "fast", **{f"l{i}": "slow" for i in range(4)}}
    for name, p in fleet.plans.items():
        assert p.check() == [], name
        assert all(n.device_id and n.device_id.startswith(name) for n in p.nodes)
    assert fleet.cost == 3.0 * fleet.plans["fast"].devices + fleet.plans["slow"].devices
    single = single_type_cost(loads, types())
    assert single is not None and single[1] == "fast"  # the slow type cannot serve the tight session
    assert single[0] > fleet.cost


def test_whole_devices_can_make_the_faster_type_cheaper_than_the_rank_says():
    """Loads of 250 req/s fill 3/4 of a slow device each (no two share one): four slow devices cost
    4; two fast ones carry all four loads and the tight session for 6 — but the tight session needs
    a fast device anyway, so 1 fast + 4 slow costs 7 and all-fast wins."""
    loads = [SessionLoad("t", "m", 0.025, 100.0)] + [SessionLoad(f"l{i}", "m", 0.4, 250.0) for i in range(4)]
    fleet = plan_fleet(loads, types())
    assert set(fleet.home.values()) == {"fast"} and fleet.cost == 6.0
    assert single_type_cost(loads, types()) == (6.0, "fast")


def test_a_full_type_sheds_the_sessions_that_cost_least_to_move_until_it_fits():
    loads = [SessionLoad(f"l{i}", "m", 0.4, 250.0 + i) for i in range(4)]
    assert plan_fleet(loads, types()).plans["slow"].devices == 4
    fleet = plan_fleet(loads, types(slow_count=2))
    assert fleet.plans["slow"].devices <= 2
    assert sorted(s for s, t in fleet.home.items() if t == "fast") == ["l2", "l3"]  # the largest loads move
    # Nowhere to go: the type keeps everything, over its count (the scheduler runs it overloaded).
    crowded = plan_fleet([SessionLoad(f"c{i}", "m", 0.4, 250.0) for i in range(8)], types(fast_count=1, slow_count=1))
    assert crowded.devices > 2


def test_sessions_no_type_serves_are_reported_with_the_reason():
    fleet = plan_fleet([SessionLoad("t", "m", 0.020, 10.0), SessionLoad("idle", "m", 0.020, 0.0)],
                       [DeviceType("slow", 1.0, {"m": SLOW})])
    assert [sid for sid, _ in fleet.infeasible] == ["t"]
    assert "no device type (slow) serves m within 20 ms" in fleet.infeasible[0][1]
    assert single_type_cost([SessionLoad("t", "m", 0.020, 10.0)], types()) == (3.0, "fast")


def test_an_unchanged_load_keeps_every_session_where_it_was():
    loads = [SessionLoad("t", "m", 0.025, 100.0)] + [SessionLoad(f"l{i}", "m", 0.4, 120.0) for i in range(5)]
    first = plan_fleet(loads, types())
    again = plan_fleet(loads, types(), previous=first.plans)
    assert again.moved == 0 and again.devices == first.devices
    assert {t: sorted(n.device_id for n in p.nodes) for t, p in again.plans.items()} == \
           {t: sorted(n.device_id for n in p.nodes) for t, p in first.plans.items()}


def test_device_types_need_a_positive_price_and_distinct_names():
    with pytest.raises(ValueError, match="price"):
        DeviceType("x", 0.0, {})
    with pytest.raises(ValueError, match="distinct"):
        plan_fleet([], [DeviceType("x", 1.0, {}), DeviceType("x", 2.0, {})])


def test_stats_carry_device_type_and_price_and_refuse_a_bad_price():
    st = ExecutorStats("e1", "cpu", 1.0, device_type="2-thread", price=2.5, prefix_groups={"a": "prefix-1"})
    back = decode_stats(encode_stats(st))
    assert (back.device_type, back.price, back.kind, back.prefix_groups) == ("2-thread", 2.5, "2-thread",
                                                                             {"a": "prefix-1"})
    old = decode_stats(encode_stats(ExecutorStats("e0", "cuda:0", 1.0)))
    assert (old.device_type, old.price, old.kind, old.prefix_groups) == ("", 1.0, "cuda:0", {})
    raw = encode_stats(st).replace(b'"price":2.5', b'"price":-1')
    assert raw != encode_stats(st)
    with pytest.raises(CodecError, match="price"):
        decode_stats(raw)


def _report(eid, kind, price, profile, rates, slo_ms=400):
    return ExecutorStats(eid, "cpu", 0.0, profiles={"m": profile}, device_type=kind, price=price,
                         sessions=tuple(SessionStats(sid, "m", slo_ms, rate_recent=r) for sid, r in rates.items()))


def test_the_epoch_puts_sessions_on_the_cheaper_types_executors_and_rehomes_them_there():
    """Two slow executors at price 1 and one fast at price 3: the loose sessions go to the slow ones;
    when one slow executor dies and the load triples, the survivor keeps what it carries (about 333
    req/s at 400 ms) and the rest moves to the fast one (about 800 req/s), none overloaded."""
    rates = {"m-400ms": 200.0, "n-400ms": 0.0}
    seen = Observed(stats={"s1": (0.0, _report("s1", "slow", 1.0, SLOW, rates)),
                           "s2": (0.0, _report("s2", "slow", 1.0, SLOW, {})),
                           "f1": (0.0, _report("f1", "fast", 3.0, FAST, {}))})
    assert [(t.name, t.price, t.count) for t in device_types({e: st for e, (_, st) in seen.stats.items()})] == \
           [("fast", 3.0, 1), ("slow", 1.0, 2)]
    cfg = SchedulerConfig()
    doc, state = plan_epoch(0.0, 0.0, seen, SchedulerState(generation=1), cfg)
    assert doc.assignment_of("f1") == {} and set(doc.routing["m-400ms"]) <= {"s1", "s2"}
    grown = {"m-400ms": 320.0, "m2-400ms": 320.0, "m3-400ms": 320.0}
    seen = Observed(stats={"s2": (30.0, _report("s2", "slow", 1.0, SLOW, grown)),
                           "f1": (30.0, _report("f1", "fast", 3.0, FAST, {}))})
    doc, state = plan_epoch(30.0, 30.0, seen, state, cfg)
    assert doc.executors == ("f1", "s2")
    homes = {sid: set(per) for sid, per in doc.routing.items()}
    assert sorted(tuple(h) for h in homes.values()) == [("f1",), ("f1",), ("s2",)]  # a session runs on one type
    assert not [r for _, r in doc.infeasible if "overloaded" in r]
    assert state.wanted_devices == 2
    # All three on the fast type would need two fast executors: more than are alive.
    assert plan_fleet([SessionLoad(s, "m", 0.4, r) for s, r in grown.items()],
                      [DeviceType("fast", 3.0, {"m": FAST})]).devices == 2


def test_one_type_plans_as_before():
    seen = Observed(stats={e: (0.0, _report(e, "", 1.0, SLOW, {"m-400ms": 100.0} if e == "a" else {}))
                           for e in ("a", "b")})
    doc, state = plan_epoch(0.0, 0.0, seen, SchedulerState(generation=1), SchedulerConfig())
    assert doc.devices == 1 and sum(len(doc.assignment_of(e)) for e in ("a", "b")) >= 1
    assert replace(state).packing is not None and state.packing.devices == 1
