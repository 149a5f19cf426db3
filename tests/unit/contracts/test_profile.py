import pytest

from vidnexus.contracts.profile import Profile, fit_linear


def test_interpolates_between_measured_sizes():
    p = Profile((1, 4, 8), (0.010, 0.022, 0.030))
    assert p.latency(2) == pytest.approx(0.014)
    assert p.latency(6) == pytest.approx(0.026)
    assert p.latency(8) == pytest.approx(0.030)


def test_extrapolates_with_the_last_slope():
    p = Profile((1, 4, 8), (0.010, 0.022, 0.030))
    assert p.latency(12) == pytest.approx(0.038)


def test_fit_recovers_a_line():
    p = Profile.linear(0.003, 0.011, 16)
    a, b = p.fit()
    assert a == pytest.approx(0.003)
    assert b == pytest.approx(0.011)
    assert fit_linear([5], [0.2]) == (0.0, 0.2)


def test_max_batch_within_budget():
    p = Profile.linear(0.002, 0.010, 32)
    assert p.max_batch_within(0.050) == 20
    assert p.max_batch_within(0.009) == 0
    assert p.max_batch_within(1.0, cap=7) == 7


def test_an_adjusted_profile_scales_adds_sizes_and_stays_monotone():
    p = Profile((1, 2, 4), (0.010, 0.016, 0.030), (0.001, 0.002, 0.004))
    q = p.adjusted(2.0)
    assert q.sizes == p.sizes and q.latency(3) == pytest.approx(2 * p.latency(3))
    assert q.planning_latency(4) == pytest.approx(0.068)
    r = p.adjusted(1.0, {1: 2.0, 6: 1.0})
    assert r.sizes == (1, 2, 4, 6)
    assert list(r.mean_s) == sorted(r.mean_s) and r.latency(2) == pytest.approx(0.020)  # held at ℓ(1)
    for bad in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError):
            p.adjusted(bad)
        with pytest.raises(ValueError):
            p.adjusted(1.0, {2: bad})


@pytest.mark.parametrize("sizes, means", [((), ()), ((2, 1), (0.1, 0.2)), ((1,), (0.0,))])
def test_invalid_profiles_are_rejected(sizes, means):
    with pytest.raises(ValueError):
        Profile(sizes, means)


def test_round_trip_dict():
    p = Profile((1, 2), (0.01, 0.015), (0.001, 0.002))
    assert Profile.from_dict(p.to_dict()) == p
    assert p.planning_latency(2) == pytest.approx(0.017)
