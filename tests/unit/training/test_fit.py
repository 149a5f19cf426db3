"""The shared train-on-first-use cache (vidnexus/training/fit.py): train once, then load; retrain when
the report is refused, unreadable or a file is missing; the training time comes from the clock."""

import json

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from vidnexus.testing import FakeClock
from vidnexus.training.fit import MODEL, WeightsCache, fit_minibatches, load_or_train, load_or_train_parts


def build():
    return nn.Linear(3, 2)


class Trainer:
    """Counts its calls; each call "takes" 2.5 s of the fake clock."""

    def __init__(self, clock):
        self.clock, self.calls = clock, 0

    def __call__(self):
        self.calls += 1
        torch.manual_seed(self.calls)
        self.clock.advance(2.5)
        return build(), {"heldout_accuracy": 0.5, "renderer": "r1"}


@pytest.fixture
def setup(tmp_path):
    clock = FakeClock()
    return WeightsCache.single(tmp_path, "toy-v1"), Trainer(clock), clock


def test_trains_once_then_loads_the_same_weights(setup, tmp_path):
    cache, train, clock = setup
    model, report = load_or_train(cache, build, train, clock=clock)
    assert train.calls == 1 and not model.training
    assert report == {"heldout_accuracy": 0.5, "renderer": "r1", "train_seconds": 2.5}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["toy-v1.json", "toy-v1.pt"]
    assert json.loads((tmp_path / "toy-v1.json").read_text()) == report
    again, report2 = load_or_train(cache, build, train, clock=clock)
    assert train.calls == 1 and report2 == report and not again.training
    assert torch.equal(again.weight, model.weight) and again is not model


@pytest.mark.parametrize("spoil, accept", [
    (lambda c: None, lambda r: r["renderer"] == "r2"),            # the caller refuses the saved weights
    (lambda c: c.report.write_text("{not json"), lambda r: True),  # an unreadable report
    (lambda c: c.report.write_text("[]"), lambda r: True),         # a report that is not an object
    (lambda c: c.parts[MODEL].unlink(), lambda r: True),           # a missing weights file
])
def test_retrains_what_it_cannot_trust(setup, spoil, accept):
    cache, train, clock = setup
    load_or_train(cache, build, train, clock=clock)
    spoil(cache)
    _, report = load_or_train(cache, build, train, accept=accept, clock=clock)
    assert train.calls == 2 and report["train_seconds"] == 2.5 and cache.exists()


def test_custom_report_name(tmp_path):
    cache = WeightsCache.single(tmp_path, "digits-v1", report_name="digits-v1.pt.json")
    assert (cache.report.name, cache.parts[MODEL].name) == ("digits-v1.pt.json", "digits-v1.pt")


def test_parts_are_saved_and_loaded_by_name(tmp_path):
    cache = WeightsCache(tmp_path / "set.json", {"a": tmp_path / "set-a.pt", "b": tmp_path / "set-b.pt"})
    archs = {"a": lambda: nn.Linear(2, 2), "b": lambda: nn.Linear(2, 5)}
    calls = []

    def train():
        calls.append(1)
        return {k: f() for k, f in archs.items()}, {"n": 2}

    models, report = load_or_train_parts(cache, lambda part: archs[part](), train, clock=FakeClock())
    loaded, report2 = load_or_train_parts(cache, lambda part: archs[part](), train, clock=FakeClock())
    assert len(calls) == 1 and report2 == report == {"n": 2, "train_seconds": 0.0}
    assert {k: m.out_features for k, m in loaded.items()} == {"a": 2, "b": 5}
    assert all(torch.equal(loaded[k].weight, models[k].weight) for k in archs)


def test_training_that_forgets_a_part_is_an_error(tmp_path):
    cache = WeightsCache(tmp_path / "set.json", {"a": tmp_path / "a.pt", "b": tmp_path / "b.pt"})
    with pytest.raises(ValueError, match=r"no \['b'\]"):
        load_or_train_parts(cache, lambda part: build(), lambda: ({"a": build()}, {}), clock=FakeClock())
    assert not cache.report.exists()


def test_single_part_helper_refuses_a_multi_part_cache(tmp_path):
    cache = WeightsCache(tmp_path / "set.json", {"a": tmp_path / "a.pt", "b": tmp_path / "b.pt"})
    with pytest.raises(ValueError, match="load_or_train_parts"):
        load_or_train(cache, build, lambda: (build(), {}))


def test_fit_minibatches_learns_and_steps_once_per_batch():
    torch.manual_seed(0)
    x = torch.randn(200, 3)
    y = (x[:, 0] > 0).long()
    model = nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0)  # counts steps, keeps the rate
    before = F.cross_entropy(model(x), y).item()
    fit_minibatches(model, x, y, F.cross_entropy, opt, epochs=3, batch_size=64, scheduler=sched)
    assert sched.last_epoch == 3 * 4  # ceil(200 / 64) = 4 steps per epoch
    assert not model.training
    assert F.cross_entropy(model(x), y).item() < before / 2


def test_training_runs_on_every_core_and_serving_keeps_its_threads(tmp_path):
    # `vidnexus run` serves with one torch thread; a model trained on first use trains on all cores.
    import os

    seen = []

    def train():
        seen.append(torch.get_num_threads())
        return build(), {}

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        load_or_train(WeightsCache.single(tmp_path, "m"), build, train)
        assert seen == [len(os.sched_getaffinity(0))] and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
