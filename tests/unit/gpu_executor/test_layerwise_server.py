"""Layer-wise batching served for real: a staged model answers as the whole model does; a request
that arrives while another is part-way through runs its first groups, then joins the other at the
next group boundary (the paper's example: one batch for the last group); model-level batching keeps
a running batch to itself; requests that cannot make their deadline end as drops."""

import numpy as np
import pytest
import torch

from vidnexus.contracts.profile import Profile
from vidnexus.gpu_executor.layerwise_server import LayerwiseServer, StagedRunner, staged_zoo_model
from vidnexus.testing import FakeClock

H = [Profile.linear(0.001, 0.010, 8), Profile.linear(0.001, 0.010, 8)]  # h_k(b) = 10 ms + 1 ms · b


def _runner() -> StagedRunner:
    torch.manual_seed(0)
    return StagedRunner("tiny", [torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU()), torch.nn.Linear(8, 3)],
                        postprocess=lambda t: t.numpy())


def _x(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).random(4, dtype=np.float32)


def test_a_staged_model_answers_as_the_whole_model():
    runner = _runner()
    whole = torch.nn.Sequential(*runner.groups)
    server = LayerwiseServer(runner, H, clock=FakeClock())
    futs = [server.submit(_x(i), slo_s=1.0) for i in range(3)]
    while server.step():
        pass
    for i, f in enumerate(futs):
        r = f.result(timeout=1)
        with torch.inference_mode():
            expect = whole(torch.from_numpy(_x(i))[None])[0].numpy()
        assert r.ok and np.allclose(r.output, expect, atol=1e-6)


def test_a_request_joins_a_running_one_at_the_next_group():
    """A is in group 1 when B and C arrive: B and C run group 0 together, then all three run group 1
    as one batch (three steps, not four)."""
    server = LayerwiseServer(_runner(), H, clock=FakeClock())
    a = server.submit(_x(0), slo_s=1.0)
    assert server.step()                                    # A: group 0
    b, c = server.submit(_x(1), slo_s=1.0), server.submit(_x(2), slo_s=1.0)
    while server.step():
        pass
    assert server.steps == [(0, 1), (0, 2), (1, 3)]
    assert all(f.result(timeout=1).ok for f in (a, b, c))


def test_model_level_batching_keeps_a_running_batch_to_itself():
    server = LayerwiseServer(_runner(), H, policy="model", clock=FakeClock())
    server.submit(_x(0), slo_s=1.0)
    assert server.step()
    server.submit(_x(1), slo_s=1.0)
    while server.step():
        pass
    assert server.steps == [(0, 1), (1, 1), (0, 1), (1, 1)]


def test_requests_that_cannot_make_their_deadline_are_dropped():
    clock = FakeClock()
    server = LayerwiseServer(_runner(), H, clock=clock)
    gone = server.submit(_x(0), deadline=clock.now())              # already due
    kept = server.submit(_x(1), slo_s=1.0)
    while server.step():
        pass
    assert gone.result(timeout=1).reason == "deadline" and kept.result(timeout=1).ok
    model = LayerwiseServer(_runner(), H, policy="model", clock=clock)
    short = model.submit(_x(2), slo_s=0.015)                       # the whole model takes 22 ms even alone
    while model.step():
        pass
    assert short.result(timeout=1).reason == "early_drop"


def test_the_server_thread_answers_and_a_stop_ends_what_is_queued():
    server = LayerwiseServer(_runner(), H).start()
    try:
        assert all(f.result(timeout=10).ok for f in [server.submit(_x(i), slo_s=5.0) for i in range(5)])
    finally:
        server.stop()
    with pytest.raises(ValueError, match="policy"):
        LayerwiseServer(_runner(), H, policy="nope")


def test_a_zoo_cnn_cut_into_groups_runs_through_to_its_classifier():
    groups, shape = staged_zoo_model("resnet18", 5)
    assert len(groups) == 5 and shape == (3, 224, 224)
    torch.manual_seed(0)
    x = torch.rand(1, *shape)
    staged = x
    with torch.inference_mode():
        for g in groups:
            staged = g.eval()(staged)
    assert staged.shape == (1, 1000)
    with pytest.raises(ValueError, match="no layer groups"):
        staged_zoo_model("lenet5")


def test_a_stop_during_a_step_ends_the_requests_once():
    """A stop that lands while a group runs drops what was queued; the step that was running then
    answers nothing twice and raises nothing."""
    server = LayerwiseServer(_runner(), H, clock=FakeClock())
    fut = server.submit(_x(0), slo_s=1.0)
    real = server.runner.run_stage

    def stop_meanwhile(k, acts):
        server.stop()
        return real(k, acts)

    server.runner.run_stage = stop_meanwhile  # type: ignore[method-assign]
    assert server.step()
    assert fut.result(timeout=1).reason == "overload" and server.jobs == []
