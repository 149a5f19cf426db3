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


def test_a_scaled_profile_scales_every_latency_and_spread():
    p = Profile((1, 4), (0.010, 0.025), (0.001, 0.002))
    q = p.scaled(1.5)
    assert q.sizes == p.sizes and q.latency(4) == pytest.approx(0.0375)
    assert q.planning_latency(1) == pytest.approx(0.0165)
    assert p.scaled(1.0) is p
    with pytest.raises(ValueError):
        p.scaled(0.0)


@pytest.mark.parametrize("sizes, means", [((), ()), ((2, 1), (0.1, 0.2)), ((1,), (0.0,))])
def test_invalid_profiles_are_rejected(sizes, means):
    with pytest.raises(ValueError):
        Profile(sizes, means)


def test_round_trip_dict():
    p = Profile((1, 2), (0.01, 0.015), (0.001, 0.002))
    assert Profile.from_dict(p.to_dict()) == p
    assert p.planning_latency(2) == pytest.approx(0.017)
