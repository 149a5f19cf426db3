"""Layer-wise batching (gpu_executor.layerwise): the dynamic program is the best FIFO segmentation
(Theorem 1, checked against enumerating every segmentation), segments respect the batch bound, the
tardy variant drops what cannot make it, and the simulator keeps every request accounted."""

import itertools
import math
import random

import pytest

from vidnexus.contracts.profile import Profile
from vidnexus.gpu_executor.layerwise import Job, next_step, plan_segments, segment_time, simulate_layerwise
from vidnexus.sim.loadgen import poisson_arrivals


def _all_segmentations(n):
    for cuts in itertools.product((False, True), repeat=n - 1):
        segs, start = [], 0
        for k, cut in enumerate(cuts, start=1):
            if cut:
                segs.append((start, k - 1))
                start = k
        segs.append((start, n - 1))
        yield segs


def _cost(layers, h, segs):
    n, total, t = len(layers), 0.0, 0.0
    for a, b in segs:
        run = segment_time(layers, h, a, b)
        t += run
        total += run * (n - a)  # every request from a on is still active while it runs
    return total


@pytest.mark.parametrize("seed", range(12))
def test_the_dynamic_program_finds_the_best_fifo_segmentation(seed):
    rng = random.Random(seed)
    g = rng.randint(2, 5)
    h = [Profile.linear(rng.uniform(0.0002, 0.003), rng.uniform(0.0, 0.01), 16) for _ in range(g)]
    n = rng.randint(1, 7)
    layers = sorted((rng.randrange(g) for _ in range(n)), reverse=True)  # earlier requests are deeper
    plan = plan_segments(layers, h)
    brute = min(_all_segmentations(n), key=lambda s: _cost(layers, h, s))
    assert plan.cost == pytest.approx(_cost(layers, h, brute))
    assert plan.cost == pytest.approx(_cost(layers, h, plan.segments))
    assert [a for a, _ in plan.segments] == sorted({a for a, _ in plan.segments}) and plan.segments[0][0] == 0


def test_joining_at_a_layer_beats_running_apart_when_the_batch_is_cheap():
    h = [Profile.linear(0.001, 0.010, 8)] * 2  # h_k(b) = 10 ms + 1 ms · b
    assert plan_segments([1, 0, 0], h).segments == ((0, 2),)  # 75 ms in all vs 81 ms apart
    # Per-item cost only (this CPU's shape): nothing to gain from batching, one at a time finishes sooner.
    assert plan_segments([1, 0, 0], [Profile.linear(0.010, 0.0, 8)] * 2).segments == ((0, 0), (1, 1), (2, 2))
    with pytest.raises(ValueError, match="non-increasing"):
        plan_segments([0, 1], h)


def test_segments_stay_within_the_batch_bound():
    h = [Profile.linear(0.0001, 0.010, 64)] * 3  # batching is almost free: one segment if it may
    assert plan_segments([0] * 6, h).segments == ((0, 5),)
    plan = plan_segments([0] * 6, h, max_batch=4)
    assert all(b - a + 1 <= 4 for a, b in plan.segments) and plan.segments[-1][1] == 5


def test_the_tardy_objective_gives_up_a_request_that_cannot_make_it_to_save_others():
    h = [Profile.linear(0.010, 0.0, 8)] * 2  # 10 ms per item per group: 20 ms a request
    deadlines = [0.015, 0.041, 0.041]
    jobs = [Job(k + 1, 0.0, deadline=d) for k, d in enumerate(deadlines)]
    # By time alone, request 1 runs first and is late (20 ms > 15 ms), and so is request 3 after it.
    assert next_step(jobs, h, 0.0) == ([1], [])
    ends = [0.020, 0.040, 0.060]
    assert sum(e > d for e, d in zip(ends, deadlines)) == 2
    # Fewest tardy: request 1 cannot finish by 15 ms in any plan; given up, 2 and 3 both make it.
    plan = plan_segments([0, 0, 0], h, deadlines=deadlines, objective="tardy")
    assert plan.dropped == (0,) and plan.tardy == 1
    assert next_step(jobs, h, 0.0, objective="tardy") == ([2], [1])
    with pytest.raises(ValueError, match="one deadline per request"):
        plan_segments([0, 0], h, objective="tardy")


@pytest.mark.parametrize("policy", ["layerwise", "layerwise_tardy", "model", "none"])
def test_every_request_ends_on_time_late_or_dropped(policy):
    h = [Profile.linear(0.0004, 0.002, 32)] * 5
    arrivals = [a.t for a in poisson_arrivals(250, 4.0, seed=3)]
    r = simulate_layerwise(h, arrivals, 0.100, policy=policy)
    assert r.requests == len(arrivals) == len(r.completion_s) + r.drops
    assert 0 <= r.on_time <= len(r.completion_s)


def test_with_a_fixed_cost_per_group_layerwise_batching_finishes_sooner_than_one_at_a_time():
    h = [Profile.linear(0.0002, 0.002, 64)] * 5  # a GPU's shape: 2 ms per group whatever the batch
    arrivals = [a.t for a in poisson_arrivals(200, 10.0, seed=1)]
    lw = simulate_layerwise(h, arrivals, 0.150, policy="layerwise")
    one = simulate_layerwise(h, arrivals, 0.150, policy="none")
    model = simulate_layerwise(h, arrivals, 0.150, policy="model")
    assert lw.on_time_fraction == 1.0 > 0.6 > one.on_time_fraction
    assert lw.mean_completion_s < model.mean_completion_s
    assert math.isfinite(lw.mean_completion_s)
