"""A model served layer-wise inside the executor (``Executor(staged=...)``, ``vidnexus executor
--layerwise``): its requests are answered as the whole model answers them, beside whole-model
sessions on the same device thread; a group step runs only when it ends before the next whole-model
real-time batch must start, else after it; retiring its last session ends its requests in flight;
planners see the whole model's profile (Σ h_k)."""

import math

import numpy as np
import pytest
import torch

from vidnexus.contracts.profile import Profile
from vidnexus.gpu_executor.backend import SessionSpec
from vidnexus.gpu_executor.executor import Executor
from vidnexus.gpu_executor.layerwise_server import LayerwiseServer, StagedRunner, layer_groups, whole_profile
from vidnexus.testing import FakeClock

H = [Profile.linear(0.001, 0.010, 8), Profile.linear(0.001, 0.010, 8)]  # h_k(b) = 10 ms + 1 ms · b


def _server(clock=None) -> LayerwiseServer:
    torch.manual_seed(0)
    runner = StagedRunner("tiny", [torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU()),
                                   torch.nn.Linear(8, 3)], postprocess=lambda t: t.numpy())
    return LayerwiseServer(runner, H, clock=clock)


def _x(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).random(4, dtype=np.float32)


def _executor(server: LayerwiseServer, clock=None, slo_s: float = 1.0) -> Executor:
    return Executor([SessionSpec("tiny-1000ms", "tiny", slo_s), SessionSpec("double-500ms", "m", 0.5)],
                    runners={"m": lambda xs: [2 * x for x in xs]},
                    profiles={"m": Profile.linear(0.001, 0.001, 8)}, staged={"tiny": server}, clock=clock)


def test_layerwise_and_whole_model_sessions_are_answered_on_one_device():
    server = _server()
    whole = torch.nn.Sequential(*server.runner.groups)
    with _executor(server) as ex:
        staged = [ex.submit("tiny-1000ms", _x(i)) for i in range(6)]
        doubled = [ex.submit("double-500ms", i) for i in range(6)]
        replies = [f.result(timeout=10) for f in staged]
        assert [f.result(timeout=10).output for f in doubled] == [2 * i for i in range(6)]
    for i, r in enumerate(replies):
        with torch.inference_mode():
            expect = whole(torch.from_numpy(_x(i))[None])[0].numpy()
        assert r.ok and np.allclose(r.output, expect, atol=1e-6) and r.batch >= 1
    stats = {s["session"]: s for s in ex.stats()}
    assert stats["tiny-1000ms"]["arrivals"] == 6 and stats["tiny-1000ms"]["replies"] == 6
    assert sum(stats["tiny-1000ms"]["batch_sizes"].values()) >= 2  # one step per group at least
    assert server.steps and {k for k, _ in server.steps} == {0, 1}


def test_planners_see_the_whole_model_and_every_session():
    ex = _executor(_server())
    assert ex.profiles()["tiny"] == whole_profile(H)
    assert ex.profiles()["tiny"].latency(4) == pytest.approx(2 * (0.010 + 0.004))
    assert {s.session_id for s in ex.sessions()} == {"tiny-1000ms", "double-500ms"}
    assert ex.targets()["tiny-1000ms"] == 8 and ex.hosts_model("tiny")
    ex.stop()


def test_a_group_step_waits_for_a_whole_model_batch_that_must_start_first():
    """The whole-model session's head request must start by its deadline less two batches of
    ℓ(1) = 0.2 s: a group step (h(1) = 11 ms) that would end later waits; the batch runs; then the
    step runs."""
    clock = FakeClock()
    server = _server(clock)
    ex = Executor([SessionSpec("tiny-1000ms", "tiny", 1.0), SessionSpec("slow-450ms", "slow", 0.45)],
                  runners={"slow": lambda xs: list(xs)}, profiles={"slow": Profile.linear(0.1, 0.1, 8)},
                  staged={"tiny": server}, clock=clock)  # not started: the test runs the device's turns
    staged = ex.submit("tiny-1000ms", _x(0))
    ex.submit("slow-450ms", 1)  # latest start 0.45 - 2 · 0.2 = 0.05 s from now
    clock.advance(0.045)
    assert not ex._run_staged(before_rt=True)   # 45 + 11 ms > 50 ms: the group step waits
    assert ex._run_staged(before_rt=False)      # with no whole-model batch ready, it runs
    assert not staged.done()
    ex2 = _executor(_server(FakeClock()), FakeClock())
    ex2.submit("tiny-1000ms", _x(0))
    assert ex2._run_staged(before_rt=True)      # no whole-model request waits: the step runs
    ex.stop(drain_timeout_s=0), ex2.stop(drain_timeout_s=0)
    assert staged.result(timeout=1).reason == "overload"


def test_a_staged_step_that_would_end_too_late_does_not_run():
    clock = FakeClock()
    server = _server(clock)
    server.submit(_x(0), slo_s=1.0)
    assert server.step(until=clock.now() + 0.005) == []  # h_0(1) = 11 ms
    assert server.steps == []
    assert server.step(until=clock.now() + 0.011)         # it fits exactly
    assert server.steps == [(0, 1)]


def test_retiring_the_last_session_of_a_layerwise_model_ends_its_requests():
    clock = FakeClock()
    ex = _executor(_server(clock), clock)
    fut = ex.submit("tiny-1000ms", _x(0))
    assert ex.remove_session("tiny-1000ms") == ["tiny"]
    assert fut.result(timeout=1).reason == "retired"
    assert not ex.hosts_model("tiny") and "tiny" not in ex.profiles()
    assert ex.submit("tiny-1000ms", _x(0)).result(timeout=1).reason == "error"  # no longer hosted
    ex.add_session(SessionSpec("tiny-300ms", "tiny", 0.3), staged=_server(clock))  # a plan gives it back
    assert ex.hosts_model("tiny") and ex.targets()["tiny-300ms"] == 8
    ex.stop(drain_timeout_s=0)


def test_a_request_with_no_deadline_joins_the_layerwise_batches():
    server = _server()
    with _executor(server) as ex:
        r = ex.submit("tiny-1000ms", _x(0), deadline=math.inf).result(timeout=10)
    assert r.ok and "tiny-1000ms~bg" not in {s.session_id for s in ex.sessions()}


def test_layer_groups_of_a_resnet_run_as_the_whole_model():
    from vidnexus.gpu_executor.zoo import random_init

    model = random_init("resnet18").eval()
    groups = layer_groups("resnet18", model, 3)
    x = torch.zeros(1, 3, 64, 64)
    with torch.inference_mode():
        staged = x
        for g in groups:
            staged = g(staged)
        assert len(groups) == 3 and torch.allclose(staged, model(x), atol=1e-5)
    with pytest.raises(ValueError, match="lenet5: its layer groups are not known"):
        layer_groups("lenet5", random_init("lenet5"), 3)


def test_the_executor_role_refuses_a_model_it_cannot_cut_at_start(tmp_path):
    from vidnexus.config import Settings
    from vidnexus.connectors.memory_bus import MemoryBus
    from vidnexus.contracts.sessions import SessionKey
    from vidnexus.errors import ConfigError
    from vidnexus.gpu_executor.runner import TorchRunner
    from vidnexus.gpu_executor.zoo import random_init
    from vidnexus.roles.executor import ExecutorRole

    runner = TorchRunner("lenet5", random_init("lenet5"), "cpu")
    role = ExecutorRole(Settings(topic_prefix="lw", data_dir=tmp_path), [SessionKey("lenet5", 100)], bus=MemoryBus(),
                        executor_id="e1", follow_plans=False, layerwise={"lenet5": 3},
                        load=lambda names: ({"lenet5": runner}, {"lenet5": Profile.linear(0.001, 0.001, 8)}))
    with pytest.raises(ConfigError, match="--layerwise lenet5: model lenet5: its layer groups are not known"):
        role.start()
    with pytest.raises(ConfigError, match="--layerwise-policy 'fifo'"):
        ExecutorRole(Settings(topic_prefix="lw", data_dir=tmp_path), [SessionKey("lenet5", 100)], bus=MemoryBus(),
                     layerwise_policy="fifo")
