"""The latency split reserves the time outside the executor (bus hops, CPU steps) before it
divides the SLO, along each root→leaf path; the scheduler feeds it what the workers measured."""

from dataclasses import replace

import pytest

from vidnexus.contracts.profile import Profile
from vidnexus.contracts.reports import AppReport, FanOut, Overheads
from vidnexus.contracts.stats import ExecutorStats
from vidnexus.control.latency_split import Stage, even_split, split_latency, throughput_from_profile
from vidnexus.control.query_analysis import analyze_apps
from vidnexus.control.scheduler import Observed, SchedulerConfig, SchedulerState, observe_report, observe_stats, plan_epoch

DET, CLS = Profile.linear(0.012, 0.010, 32), Profile.linear(0.003, 0.004, 64)


def chain(r_det=0.0, r_cls=0.0, gamma=4.0):
    return Stage("det", 1.0, throughput_from_profile(DET),
                 (Stage("cls", gamma, throughput_from_profile(CLS), reserve_s=r_cls),), reserve_s=r_det)


def test_a_30_ms_reserve_leaves_slo_minus_30_to_divide_along_the_path():
    s = split_latency(chain(r_det=0.010, r_cls=0.012), 0.300, epsilon_s=0.001, reserve_s=0.008)
    assert sum(s.budgets.values()) == pytest.approx(0.270)
    # The same as splitting 270 ms with nothing reserved: the reserve is taken first, the rest divided.
    plain = split_latency(chain(), 0.270, epsilon_s=0.001)
    assert s.budgets == pytest.approx(plain.budgets) and s.devices == pytest.approx(plain.devices)
    assert sum(split_latency(chain(), 0.300, epsilon_s=0.001).budgets.values()) == pytest.approx(0.300)


def test_each_path_keeps_its_own_reserve():
    t = throughput_from_profile(CLS)
    root = Stage("det", 1.0, throughput_from_profile(DET),
                 (Stage("car", 2.0, t, reserve_s=0.040), Stage("face", 2.0, t)), reserve_s=0.005)
    s = split_latency(root, 0.300, epsilon_s=0.001)
    assert s.budgets["det"] + s.budgets["car"] == pytest.approx(0.300 - 0.005 - 0.040)
    assert s.budgets["det"] + s.budgets["face"] == pytest.approx(0.300 - 0.005)
    assert s.budgets["face"] - s.budgets["car"] == pytest.approx(0.040)


def test_off_grid_reserves_keep_budgets_on_the_grid_and_lose_less_than_a_step():
    s = split_latency(chain(r_det=0.0031, r_cls=0.0042), 0.300, epsilon_s=0.010, reserve_s=0.0017)
    total_ms = sum(s.budgets.values()) * 1000
    assert all(round(b * 1000, 6) % 10 == 0 for b in s.budgets.values())
    assert 300 - 9 - 10 < total_ms <= 300 - 9 + 1e-6


def test_a_reserve_that_leaves_too_little_is_an_error_that_says_so():
    with pytest.raises(ValueError, match="no split of 300 ms .* with up to 280 ms reserved outside the executor"):
        split_latency(chain(r_det=0.200, r_cls=0.080), 0.300, epsilon_s=0.001)


def test_the_even_baseline_divides_what_the_longest_path_leaves():
    s = even_split(chain(r_det=0.010, r_cls=0.020), 0.300, reserve_s=0.010)
    assert s.budgets == pytest.approx({"det": 0.130, "cls": 0.130})


def report(worker="w1", frames=100, overheads=Overheads()):
    return AppReport("traffic", worker, 300.0, ("det", "cls"), (("frames", "det"), ("det", "cls")),
                     FanOut(frames, {"det": frames, "cls": 4 * frames}), overheads=overheads)


def test_query_analysis_reserves_the_worst_workers_measurements():
    slow = Overheads(hop_ms={"det": 12.0, "cls": 8.0}, cpu_ms={"frames": 2.0, "det": 5.0, "cls": 1.0}, publish_ms=2.0)
    fast = Overheads(hop_ms={"det": 2.0, "cls": 2.0}, cpu_ms={"det": 1.0})
    r = analyze_apps([report("w1", 60, slow), report("w2", 60, fast)], {"det": DET, "cls": CLS})["traffic"]
    assert r.ok and r.reserve_ms == {"det": 17.0, "cls": 9.0, "frames": 4.0}
    assert sum(r.budgets_ms.values()) == pytest.approx(300 - 30)
    assert r.to_contract().reserve_ms == r.reserve_ms


def epoch(reports_by_time, state=None, cfg=SchedulerConfig(epoch_s=30, min_epoch_s=10)):
    ex = ExecutorStats("e1", "cpu", 0.0, profiles={"det": DET, "cls": CLS})
    seen = Observed()
    for t, rep in reports_by_time:
        seen = observe_report(observe_stats(seen, t, ex), t, rep)
    now = reports_by_time[-1][0]
    return plan_epoch(now, 0.0, seen, state or SchedulerState(1), cfg)


def test_the_scheduler_feeds_the_measured_reserves_into_the_split():
    oh = Overheads(hop_ms={"det": 10.0, "cls": 10.0}, cpu_ms={"det": 4.0, "frames": 3.0}, publish_ms=3.0)
    doc, state = epoch([(0.0, report(frames=100, overheads=oh)), (5.0, report(frames=150, overheads=oh))])
    sp = doc.splits["traffic"]
    assert sp.ok and sp.reserve_ms == {"det": 14.0, "cls": 10.0, "frames": 6.0}
    assert sum(sp.budgets_ms.values()) == pytest.approx(270)   # 300 ms less 30 ms reserved
    assert all(b % 10 == 0 for b in sp.budgets_ms.values())    # still on the 10 ms grid
    unreserved, _ = epoch([(0.0, report(frames=100)), (5.0, report(frames=150))])
    assert sum(unreserved.splits["traffic"].budgets_ms.values()) == pytest.approx(300)
    assert state.last_reserves == {"traffic": sp.reserve_ms}


def test_reserves_that_wobble_less_than_the_slack_keep_the_last_split():
    oh = Overheads(hop_ms={"det": 10.0, "cls": 10.0}, cpu_ms={"det": 4.0, "frames": 6.0})
    first, state = epoch([(0.0, report(frames=100, overheads=oh)), (5.0, report(frames=150, overheads=oh))])
    wobble = replace(oh, hop_ms={"det": 13.0, "cls": 8.0})    # each within 5 ms of what was reserved
    second, state2 = epoch([(40.0, report(frames=500, overheads=wobble)),
                            (45.0, report(frames=550, overheads=wobble))], state)
    assert second.splits["traffic"].budgets_ms == first.splits["traffic"].budgets_ms
    assert second.splits["traffic"].reserve_ms == first.splits["traffic"].reserve_ms
    grown = replace(oh, hop_ms={"det": 40.0, "cls": 10.0})     # the detector's hop grew by 30 ms
    third, _ = epoch([(80.0, report(frames=900, overheads=grown)),
                      (85.0, report(frames=950, overheads=grown))], state2)
    assert third.splits["traffic"].reserve_ms["det"] == 44.0
    assert sum(third.splits["traffic"].budgets_ms.values()) == pytest.approx(300 - 60)
