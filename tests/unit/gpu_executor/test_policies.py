"""Hand-built queues pin down exactly which requests each policy serves and drops."""

import pytest

from vidnexus.gpu_executor.batching import BatchDecision, drop_reason
from vidnexus.gpu_executor.policies import make_policy
from vidnexus.contracts.profile import Profile

# ℓ(b) = 10 ms · b + 10 ms: ℓ(1)=20, ℓ(2)=30, ℓ(3)=40, ℓ(4)=50 ms.
P = Profile.linear(0.010, 0.010, max_batch=8)


@pytest.mark.parametrize(
    "deadlines, now, target, expected",
    [
        # Window of 4 fits at the head: no drop.
        ([0.05, 0.06, 0.07, 0.08, 0.09], 0.0, 4, BatchDecision(0, 4)),
        # Head can't wait for ℓ(4)=50 ms; second can't either; third can (window shrinks to 3).
        ([0.04, 0.045, 0.06, 0.07, 0.08], 0.0, 4, BatchDecision(2, 3)),
        # The head could run alone (ℓ(1)=20 ms ≤ 25 ms) but not in the target window: early drop.
        ([0.025, 0.2, 0.2, 0.2, 0.2], 0.0, 4, BatchDecision(1, 4)),
        # Fewer requests than the target: the window is what is left.
        ([0.10, 0.10], 0.0, 8, BatchDecision(0, 2)),
        # Nobody can make it, not even alone.
        ([0.005, 0.01, 0.015], 0.0, 2, BatchDecision(3, 0)),
        # `now` matters: same queue, later clock.
        # (ℓ(4) = 50 ms ends at 70 ms: two heads go; the window shrinks to the 3 left, done at 60 ms.)
        ([0.05, 0.06, 0.07, 0.08, 0.09], 0.02, 4, BatchDecision(2, 3)),
        # Exactly on the deadline counts as meeting it.
        ([0.05], 0.0, 1, BatchDecision(0, 1)),
    ],
)
def test_early_drop(deadlines, now, target, expected):
    assert make_policy("early_drop").decide(deadlines, now, target, P) == expected


@pytest.mark.parametrize(
    "deadlines, now, target, expected",
    [
        # Only the expired head goes; the batch is sized by the oldest survivor's budget (35 ms → b=2).
        ([-0.01, 0.035, 0.2, 0.2], 0.0, 4, BatchDecision(1, 2)),
        # The head keeps a request that cannot make it (lazy): it runs alone and will be late.
        ([0.005, 0.2, 0.2], 0.0, 4, BatchDecision(0, 1)),
        # Large budget: as many as the queue holds, up to the profile's largest batch.
        ([1.0] * 12, 0.0, 2, BatchDecision(0, 8)),
        ([-2.0, -1.0], 0.0, 4, BatchDecision(2, 0)),
    ],
)
def test_lazy_drop(deadlines, now, target, expected):
    assert make_policy("lazy_drop").decide(deadlines, now, target, P) == expected


@pytest.mark.parametrize(
    "deadlines, target, expected",
    [([-1.0, 0.0, 5.0], 2, BatchDecision(0, 2)), ([0.1], 4, BatchDecision(0, 1)), ([], 3, BatchDecision(0, 0))],
)
def test_fifo_never_drops(deadlines, target, expected):
    assert make_policy("fifo").decide(deadlines, 0.0, target, P) == expected


def test_lazy_collapses_to_small_batches_where_early_drop_keeps_the_window():
    # A tight head request followed by relaxed ones: lazy serves the head alone (b = 1), early drop
    # sacrifices it and keeps the planned batch of 4.
    dl = [0.025, 0.2, 0.2, 0.2, 0.2]
    assert make_policy("lazy_drop").decide(dl, 0.0, 4, P) == BatchDecision(0, 1)
    assert make_policy("early_drop").decide(dl, 0.0, 4, P) == BatchDecision(1, 4)


def test_drop_reasons():
    assert drop_reason(0.015, 0.0, P) == "deadline"  # cannot finish even alone (ℓ(1) = 20 ms)
    assert drop_reason(0.025, 0.0, P) == "early_drop"


def test_unknown_policy_names_the_choices():
    with pytest.raises(ValueError, match="early_drop"):
        make_policy("nope")


@pytest.mark.parametrize(
    "deadlines, now, target, expected",
    [
        # The window fits at the head: the same batch as early drop.
        ([0.05, 0.06, 0.07, 0.08, 0.09], 0.0, 4, BatchDecision(0, 4)),
        # A short queue whose head cannot wait for all three (ℓ(3) = 40 ms > 35 ms): head and next as
        # a batch of 2 (done at 30 ms), the third alone after it (done at 50 ms ≤ 100 ms).
        ([0.035, 0.1, 0.1], 0.0, 4, BatchDecision(0, 2)),
        # The same head, but the request left behind a batch of 2 could not run after it (30 + 20 >
        # 45 ms): early drop's decision (the head goes, the other two run as one batch).
        ([0.035, 0.045, 0.045], 0.0, 4, BatchDecision(1, 2)),
        # A backlog (5 queued, target 4) with the same short head: Nexus's rule unchanged.
        ([0.025, 0.2, 0.2, 0.2, 0.2], 0.0, 4, BatchDecision(1, 4)),
        # A head that cannot make it even alone is dropped as before.
        ([0.015, 0.1], 0.0, 2, BatchDecision(1, 1)),
        # The head fits only alone (ℓ(1) = 20 ms ≤ 25 ms); the other runs after it (20 + 20 ≤ 60 ms).
        ([0.025, 0.06], 0.0, 2, BatchDecision(0, 1)),
    ],
)
def test_early_rescue_serves_a_short_head_when_no_backlog_stands_behind_it(deadlines, now, target, expected):
    assert make_policy("early_rescue").decide(deadlines, now, target, P) == expected


def test_early_rescue_only_rescues_when_the_whole_rest_then_makes_it():
    # Random short queues (no backlog): where early rescue decides otherwise than early drop, it
    # drops fewer, every request it takes meets its deadline, and every request left behind its
    # batch meets its own as one batch right after it: from the first request it keeps, all make it,
    # where early drop drops that one at least.
    import random

    rng = random.Random(7)
    rescued = 0
    for _ in range(2000):
        target = rng.randint(1, 6)
        n = rng.randint(1, target)
        deadlines = sorted(rng.uniform(0.0, 0.12) for _ in range(n))
        d = make_policy("early_rescue").decide(deadlines, 0.0, target, P)
        e = make_policy("early_drop").decide(deadlines, 0.0, target, P)
        if d == e:
            continue
        rescued += 1
        assert d.drop < e.drop
        assert deadlines[d.drop] >= P.latency(d.take)
        rest = n - d.drop - d.take
        assert rest >= 1 and deadlines[d.drop + d.take] >= P.latency(d.take) + P.latency(rest)
    assert rescued > 100
