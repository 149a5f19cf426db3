"""Query analysis reproduces Nexus's Figure 4 latency-split table."""

import pytest

from vidnexus.control.latency_split import (Stage, even_split, split_latency, throughput_from_profile, throughput_from_table)
from vidnexus.contracts.profile import Profile

TX = throughput_from_table({0.040: 200, 0.050: 250, 0.060: 300})
TY = throughput_from_table({0.040: 300, 0.050: 400, 0.060: 500})


def query(gamma):
    return Stage("X", 1.0, TX, (Stage("Y", gamma, TY),))


# (γ, best X/Y split in ms, per-device throughput at that split)
@pytest.mark.parametrize("gamma, best, rps", [(0.1, (60, 40), 272.7), (1, (50, 50), 153.8), (10, (40, 60), 40.0)])
def test_figure4_best_split(gamma, best, rps):
    s = split_latency(query(gamma), 0.100, epsilon_s=0.010)
    assert (round(s.budgets["X"] * 1000), round(s.budgets["Y"] * 1000)) == best
    assert s.per_device_throughput(1.0) == pytest.approx(rps, abs=0.05)


@pytest.mark.parametrize("split_ms, expected", [
    (40, (192.3, 142.9, 40.0)), (50, (235.3, 153.8, 34.5)), (60, (272.7, 150.0, 27.3)),
])
def test_figure4_every_cell(split_ms, expected):
    for gamma, rps in zip((0.1, 1, 10), expected):
        devices = 1 / TX(split_ms / 1000) + gamma / TY((100 - split_ms) / 1000)
        assert 1 / devices == pytest.approx(rps, abs=0.05)


def test_even_split_is_the_baseline():
    s = even_split(query(1), 0.100)
    assert s.budgets == {"X": 0.05, "Y": 0.05}
    assert s.per_device_throughput(1.0) == pytest.approx(153.8, abs=0.05)
    assert split_latency(query(10), 0.1, 0.01).devices < even_split(query(10), 0.1).devices


def test_tree_with_two_children_shares_the_parent_budget():
    p = Profile.linear(0.002, 0.010, 64)
    root = Stage("det", 10, throughput_from_profile(p),
                 (Stage("car", 30, throughput_from_profile(p)), Stage("face", 5, throughput_from_profile(p))))
    s = split_latency(root, 0.3, 0.005)
    assert s.budgets["det"] + max(s.budgets["car"], s.budgets["face"]) <= 0.3 + 1e-9
    assert s.devices <= even_split(root, 0.3).devices + 1e-9


def test_impossible_slo_is_an_error():
    with pytest.raises(ValueError, match="no split"):
        split_latency(query(1), 0.070, 0.010)


def test_a_stage_costs_what_the_packer_will_give_it():
    """The split prices a stage at budget k with the batch a saturated device runs within k under
    squishy packing (2ℓ(b) ≤ k: a request that just misses a batch waits one), not with the paper's
    ℓ(b) ≤ k: the budgets become the sessions' SLOs and the packer never runs a larger batch for them,
    so pricing with ℓ(b) ≤ k would promise throughput no device delivers (docs/control-plane.md)."""
    from vidnexus.contracts.profile import Profile
    from vidnexus.control.latency_split import throughput_from_profile
    from vidnexus.control.packing import latency_table, saturated_batch

    p = Profile.linear(0.004, 0.010, max_batch=64)          # ℓ(b) = 4b + 10 ms
    priced = throughput_from_profile(p)
    for k in (0.040, 0.060, 0.100, 0.200, 0.300):
        b = saturated_batch(latency_table(p, k_std=0.0), k)
        assert priced(k) == pytest.approx(p.throughput(b))   # what the packer delivers
        paper_b = p.max_batch_within(k)                        # ℓ(b) ≤ k
        assert paper_b > b and p.throughput(paper_b) > priced(k)   # what the paper's form would promise
