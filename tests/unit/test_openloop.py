"""The goodput search of the open-loop benchmarks: the bisection finds the knee, and a time budget
stops it with the highest rate that passed (quick runs stay bounded on a noisy machine)."""

from vidnexus.benchmarks.openloop import probe_goodput, probe_seconds


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def system(knee: float, clock: FakeClock, probe_s: float = 10.0):
    """A system meeting the target below ``knee`` req/s; every probe costs ``probe_s`` seconds."""
    probed = []

    def frac(rate: float) -> float:
        probed.append(rate)
        clock.t += probe_s
        return 1.0 if rate <= knee else 0.5
    return frac, probed


def test_bisection_finds_the_knee_within_tolerance():
    clock = FakeClock()
    frac, _ = system(70.0, clock)
    g = probe_goodput(frac, 10.0, 150.0, tol=0.02, clock=clock)
    assert 70.0 * 0.98 <= g <= 70.0


def test_budget_stops_the_search_at_a_rate_that_passed():
    clock = FakeClock()
    frac, probed = system(70.0, clock)
    g = probe_goodput(frac, 10.0, 150.0, tol=0.001, budget_s=35.0, clock=clock)
    assert len(probed) == 4  # the floor, the top, two bisection steps: then 40 s > 35 s were spent
    assert g in probed and g <= 70.0 and frac(g) == 1.0


def test_a_failing_floor_is_halved_and_the_search_is_retried_once_unless_the_budget_is_spent():
    clock = FakeClock()
    frac, probed = system(0.0, clock)  # nothing ever passes
    assert probe_goodput(frac, 8.0, 100.0, tol=0.05, clock=clock) == 0.0
    assert probed == [8.0, 4.0, 2.0] * 2
    clock = FakeClock()
    frac, probed = system(0.0, clock)
    assert probe_goodput(frac, 8.0, 100.0, tol=0.05, budget_s=15.0, clock=clock) == 0.0
    assert probed == [8.0, 4.0]


def test_target_is_a_parameter():
    clock = FakeClock()

    def frac(rate: float) -> float:
        return 0.95 if rate <= 50 else 0.5
    assert probe_goodput(frac, 10.0, 100.0, tol=0.01, clock=clock) == 0.0
    assert 49.0 <= probe_goodput(frac, 10.0, 100.0, tol=0.01, target=0.9, clock=clock) <= 50.0


def test_probe_seconds_caps():
    assert probe_seconds(10.0, 2.0, 100) == 10.0
    assert probe_seconds(10.0, 2.0, 100, max_s=6.0) == 6.0
    assert probe_seconds(1000.0, 2.0, 100, max_s=6.0) == 2.0
