"""Incremental epochs: keep sessions in place, evict on overload, consolidate on load drops."""

import random

import pytest

from vidnexus.control.epochs import assign_devices, placement, replan
from vidnexus.contracts.profile import Profile
from vidnexus.control.squishy import SessionLoad, plan

P = {f"m{i}": Profile.linear(0.001 * (1 + i % 3), 0.010 + 0.005 * (i % 4), 64) for i in range(12)}


def loads(rates, slo=0.2):
    return [SessionLoad(f"s{i}", f"m{i}", slo, r) for i, r in enumerate(rates)]


def first(rates):
    return assign_devices(plan(loads(rates), P))


def test_same_load_moves_nothing():
    p0 = first([30, 50, 20, 10, 40, 25])
    p1 = replan(p0, loads([30, 50, 20, 10, 40, 25]), P)
    assert p1.moved == 0 and placement(p1) == placement(p0) and p1.check() == []


def test_a_rate_rise_moves_few_sessions_and_stays_valid():
    p0 = first([30, 50, 20, 10, 40, 25])
    rates = [30, 50, 20, 10, 40, 25]
    rates[1] = 400
    p1 = replan(p0, loads(rates), P)
    assert p1.check() == []
    assert p1.rate_of("s1") >= 400 - 1e-6
    assert p1.moved <= 3


def test_load_drop_releases_devices():
    p0 = first([300, 300, 300, 300])
    p1 = replan(p0, loads([5, 5, 5, 5]), P)
    assert p1.devices < p0.devices and p1.check() == []


def test_new_and_removed_sessions():
    p0 = first([30, 50, 20])
    p1 = replan(p0, loads([30, 50, 20, 15]), P)
    assert "s3" in placement(p1) and p1.moved == 0
    p2 = replan(p1, loads([30, 50])[:2], P)
    assert set(placement(p2)) == {"s0", "s1"} and p2.devices <= p1.devices


@pytest.mark.parametrize("seed", range(15))
def test_random_epochs_stay_valid(seed):
    rng = random.Random(seed)
    rates = [rng.uniform(1, 600) for _ in range(12)]
    p = first(rates)
    for _ in range(5):
        rates = [max(0.5, r * rng.uniform(0.3, 2.5)) for r in rates]
        p = replan(p, loads(rates), P)
        assert p.check() == []
        for i, r in enumerate(rates):
            assert p.rate_of(f"s{i}") >= r - 1e-6
        assert all(n.device_id for n in p.nodes)
        assert len({n.device_id for n in p.nodes}) == p.devices
