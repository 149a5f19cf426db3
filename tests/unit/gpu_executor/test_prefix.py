"""Prefix batching: the pure merge rule in the duty cycle, and the torch side (detection, runner)."""

import numpy as np
import pytest
import torch
import torch.nn as nn

from vidnexus.gpu_executor.backend import DutyCycle, SessionSpec
from vidnexus.gpu_executor.executor import Executor
from vidnexus.gpu_executor.prefix import (Headed, PrefixRunner, detect_prefix_groups, held_bytes, module_signature,
                                          parameter_bytes, split_prefix)
from vidnexus.contracts.profile import Profile

P = Profile.linear(0.010, 0.010, max_batch=16)  # ℓ(b) = 10b + 10 ms


def grouped_core(targets, order="laxity"):
    sessions = [SessionSpec(f"s{i}", f"m{i}", 1.0) for i in range(3)]
    return DutyCycle(sessions, {f"m{i}": P for i in range(3)}, targets,
                     prefix_groups={"m0": "g", "m1": "g", "m2": "g"}, order=order)


def test_group_sessions_merge_into_one_dispatch():
    c = grouped_core({"s0": 6, "s1": 6, "s2": 6})  # the group's merged batch: 6
    for i in range(3):
        for r in range(2):
            c.enqueue(f"s{i}", 10 * i + r, 1.0, 0.0)
    d = c.schedule(0.0).dispatch
    assert d.group == "g"
    assert [(p.session_id, p.request_ids) for p in d.parts] == [("s0", (0, 1)), ("s1", (10, 11)), ("s2", (20, 21))]
    assert d.request_ids == (0, 1, 10, 11, 20, 21)
    assert d.expected_s == pytest.approx(P.latency(6))


def test_merge_never_makes_the_lead_batch_late():
    c = grouped_core({"s0": 8, "s1": 8, "s2": 8})
    c.enqueue("s0", 1, 0.045, 0.0)  # lead: ℓ(1) = 20 ms; room for 2 more before 45 ms (ℓ(3) = 40)
    for r in range(8):
        c.enqueue("s1", 100 + r, 1.0, 0.0)
        c.enqueue("s2", 200 + r, 1.0, 0.0)
    d = c.schedule(0.0).dispatch
    assert d.batch == 3 and d.expected_s <= 0.045
    assert [len(p.request_ids) for p in d.parts] == [1, 2]


def test_merged_batch_stays_within_the_group_target():
    c = grouped_core({"s0": 4, "s1": 4, "s2": 4})
    for i in range(3):
        for r in range(4):
            c.enqueue(f"s{i}", 10 * i + r, 1.0, 0.0)
    d = c.schedule(0.0).dispatch
    assert d.batch == 4 and [p.session_id for p in d.parts] == ["s0"]


def test_models_outside_the_group_run_alone():
    c = DutyCycle([SessionSpec("a", "m0", 1.0), SessionSpec("b", "x", 1.0)], {"m0": P, "x": P},
                  prefix_groups={"m0": "g"})
    c.enqueue("a", 1, 1.0, 0.0)
    c.enqueue("b", 2, 1.0, 0.0)
    d1, d2 = c.schedule(0.0).dispatch, c.schedule(0.0).dispatch
    assert (d1.request_ids, d2.request_ids) == ((1,), (2,))
    assert d2.group is None


def variants(k, trunk=None):
    torch.manual_seed(0)
    trunk = trunk or nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten())
    return {f"v{i}": Headed(trunk, nn.Linear(4 * 6 * 6, 3)) for i in range(k)}


def test_detection_by_hashing_the_trunk():
    models = variants(3)
    torch.manual_seed(1)
    other = Headed(nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten()), nn.Linear(144, 3))
    groups = detect_prefix_groups({**models, "other": other, "plain": nn.ReLU()})
    assert set(groups) == {"v0", "v1", "v2"} and len(set(groups.values())) == 1
    assert module_signature(split_prefix(models["v0"])[0]) != module_signature(other.trunk)
    assert detect_prefix_groups({"a": other, "b": models["v0"]}, declared={"a": "x", "b": "x"}) == {
        "a": "prefix-x", "b": "prefix-x"}


def test_prefix_runner_matches_the_separate_models_and_holds_one_trunk():
    models = variants(4)
    runner = PrefixRunner.from_models(models)
    xs = [np.random.default_rng(i).random((1, 8, 8), dtype=np.float32) for i in range(5)]
    outs = runner.run_parts([("v0", xs[:2]), ("v3", xs[2:])])
    with torch.inference_mode():
        ref0 = models["v0"](torch.from_numpy(np.stack(xs[:2])))
        ref3 = models["v3"](torch.from_numpy(np.stack(xs[2:])))
    assert np.allclose(outs[0], ref0.numpy(), atol=1e-5) and np.allclose(outs[1], ref3.numpy(), atol=1e-5)
    separate = sum(parameter_bytes(m) for m in models.values())
    assert runner.memory_bytes() < separate


def test_executor_serves_a_prefix_group_end_to_end():
    models = variants(3)
    groups = detect_prefix_groups(models)
    runner = PrefixRunner.from_models(models)
    sessions = [SessionSpec(f"s-{m}", m, 5.0) for m in models]
    ex = Executor(sessions, {}, {m: Profile.linear(0.0005, 0.001, 32) for m in models},
                  prefix_groups=groups, group_runners={groups["v0"]: runner})
    x = np.ones((1, 8, 8), np.float32)
    with ex:
        futs = {m: [ex.submit(f"s-{m}", x) for _ in range(10)] for m in models}
        replies = {m: [f.result(timeout=10) for f in fs] for m, fs in futs.items()}
    with torch.inference_mode():
        for m, rs in replies.items():
            ref = models[m](torch.from_numpy(x[None]))[0].numpy()
            assert all(r.ok and np.allclose(r.output, ref, atol=1e-5) for r in rs)


def test_members_join_without_being_dropped():
    # Round-robin: s0 leads; s1's head cannot finish inside the merged batch: it is left queued (not
    # dropped) for s1's turn.
    c = grouped_core({"s0": 8, "s1": 8, "s2": 8}, order="round_robin")
    c.enqueue("s0", 1, 1.0, 0.0)
    c.enqueue("s1", 2, 0.025, 0.0)  # ℓ(2) = 30 ms > 25 ms
    c.enqueue("s2", 3, 1.0, 0.0)
    step = c.schedule(0.0)
    assert step.dropped == ()
    assert [p.request_ids for p in step.dispatch.parts] == [(1,), (3,)]
    assert c.queued("s1") == 1
    nxt = c.schedule(0.0).dispatch
    assert nxt.request_ids == (2,)


def test_the_tightest_member_leads_and_the_others_wait_for_room():
    # Least laxity first: s1's tight head leads; a member joining would make it late (ℓ(2) = 30 ms
    # > 25 ms), so s0 and s2 run next, merged, with nothing dropped.
    c = grouped_core({"s0": 8, "s1": 8, "s2": 8})
    c.enqueue("s0", 1, 1.0, 0.0)
    c.enqueue("s1", 2, 0.025, 0.0)
    c.enqueue("s2", 3, 1.0, 0.0)
    first = c.schedule(0.0)
    assert first.dropped == () and [p.request_ids for p in first.dispatch.parts] == [(2,)]
    second = c.schedule(first.dispatch.expected_s)
    assert second.dropped == () and sorted(p.request_ids for p in second.dispatch.parts) == [(1,), (3,)]


def trunk_a():
    torch.manual_seed(10)
    return Headed(nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten()), nn.Linear(144, 3))


def trunk_b():
    torch.manual_seed(11)  # other weights: hashing alone would not group a and b
    return Headed(nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten()), nn.Linear(144, 3))


def test_declared_prefixes_group_and_the_served_executor_holds_one_trunk(tmp_path):
    """Models registered with the same --prefix form a group on the served executor (hashing would
    not group these: their trunks' weights differ), and the executor keeps only the group's
    PrefixRunner for them: their own full copies are gone."""
    from vidnexus.config import Settings
    from vidnexus.connectors.memory_bus import MemoryBus
    from vidnexus.contracts.sessions import SessionKey
    from vidnexus.gpu_executor.repository import ModelRepository, ModelSpec
    from vidnexus.gpu_executor.runner import TorchRunner
    from vidnexus.roles.executor import ExecutorRole, declared_prefixes

    settings = Settings(data_dir=tmp_path, topic_prefix="pfx")
    repo = ModelRepository(tmp_path / "models")
    for name, fn in (("pa", "trunk_a"), ("pb", "trunk_b"), ("solo", "trunk_a")):
        repo.register(ModelSpec(name, f"factory:{__name__}:{fn}", (1, 8, 8),
                                prefix="shared" if name != "solo" else None))
    assert declared_prefixes(settings, ["pa", "pb", "solo", "not-a-model"]) == {"pa": "shared", "pb": "shared"}
    assert detect_prefix_groups({"pa": trunk_a(), "pb": trunk_b()}) == {}  # no group by hashing

    def load(names):
        runners = {n: TorchRunner(n, repo.load(repo.get(n)), postprocess=lambda t: t.tolist()) for n in names}
        return runners, {n: Profile.linear(0.0005, 0.001, 16) for n in names}

    keys = [SessionKey("pa", 5000), SessionKey("pb", 5000), SessionKey("solo", 5000)]
    role = ExecutorRole(settings, keys, bus=MemoryBus(), load=load, executor_id="e1", follow_plans=False)
    role.start()
    try:
        assert role.groups == {"pa": "prefix-shared", "pb": "prefix-shared"}
        ex = role.executor
        assert set(ex.runners) == {"solo"}                  # members' own copies dropped
        assert ex.hosts_model("pa") and ex.hosts_model("pb") and ex.hosts_model("solo")
        x = np.ones((1, 8, 8), np.float32)
        futs = [ex.submit(str(k), x) for k in keys]
        outs = [f.result(timeout=10) for f in futs]
        assert all(r.ok for r in outs)
        with torch.inference_mode():
            a = trunk_a()
            ref_pa = a(torch.from_numpy(x[None]))[0].numpy()
        assert np.allclose(outs[0].output, ref_pa, atol=1e-5)  # pa's own trunk and head (the group's first)
        # What the executor holds: one trunk (pa's) and two heads for the group, solo's full model.
        held = held_bytes([*ex.runners.values(), *ex.group_runners.values()])
        a, b = trunk_a(), trunk_b()
        assert held == (parameter_bytes(a.trunk) + parameter_bytes(a.head) + parameter_bytes(b.head)
                        + parameter_bytes(trunk_a()))
    finally:
        role.stop()
        role.close()


def test_held_bytes_counts_a_shared_tensor_once():
    from vidnexus.gpu_executor.runner import TorchRunner

    m = trunk_a()
    one, both = TorchRunner("a", m), [TorchRunner("a", m), TorchRunner("a2", m)]
    assert held_bytes([one]) == held_bytes(both) == parameter_bytes(m) > 0
    assert held_bytes([TorchRunner("a", m), TorchRunner("b", trunk_b())]) == 2 * parameter_bytes(m)


def test_sequential_models_share_their_longest_common_run_of_layers():
    """Nexus finds the common prefix layer by layer: two models fine-tuned from one base with
    different last two layers share the first three, whatever their heads; a third model that
    shares only the first layer does not pull the group down to one layer."""
    from vidnexus.gpu_executor.prefix import common_depth

    torch.manual_seed(0)
    base = [nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16)]
    a = nn.Sequential(*base, nn.Linear(16, 4))
    b = nn.Sequential(*base, nn.ReLU(), nn.Linear(16, 3))  # a two-layer head of its own
    c = nn.Sequential(base[0], nn.Tanh(), nn.Linear(16, 2))
    groups = detect_prefix_groups({"a": a, "b": b, "c": c})
    assert groups.get("a") == groups.get("b") is not None and "c" not in groups
    assert common_depth([a, b]) == 3 and common_depth([a, b, c]) == 1
    runner = PrefixRunner.from_models({"a": a, "b": b})
    assert len(runner.trunk) == 3 and len(runner.heads["b"]) == 2
    assert parameter_bytes(runner.trunk) == sum(parameter_bytes(m) for m in base)
    x = np.random.default_rng(0).random((8,), dtype=np.float32)
    with torch.no_grad():
        want_a, want_b = a(torch.from_numpy(x)[None])[0], b(torch.from_numpy(x)[None])[0]
    got_a, got_b = runner.run_parts([("a", [x]), ("b", [x])])
    assert np.allclose(got_a[0], want_a.numpy(), atol=1e-6) and np.allclose(got_b[0], want_b.numpy(), atol=1e-6)
    # Identical models: each keeps its last layer as its head.
    assert common_depth([a, nn.Sequential(*a)]) == 3


def test_layers_without_weights_are_no_shared_prefix():
    """Two unrelated models that both begin with a Flatten share no weights: no group."""
    torch.manual_seed(0)
    a = nn.Sequential(nn.Flatten(), nn.Linear(16, 4))
    b = nn.Sequential(nn.Flatten(), nn.Linear(16, 3))
    assert detect_prefix_groups({"a": a, "b": b}) == {}
