import pytest
import torch
import torch.nn as nn

from vidnexus.errors import ModelError
from vidnexus.gpu_executor.catalog import ModelEntry
from vidnexus.gpu_executor.repository import ModelRepository, ModelSpec


def tiny():
    torch.manual_seed(0)
    return nn.Sequential(nn.Flatten(), nn.Linear(12, 3))


def test_zoo_is_listed_and_registration_persists(tmp_path):
    repo = ModelRepository(tmp_path)
    assert {"lenet5", "resnet18", "ssdlite"} <= {m.name for m in repo.list()}
    spec = repo.register(ModelSpec("tiny", f"factory:{__name__}:tiny", (3, 2, 2), description="t"))
    assert spec.memory_bytes == (12 * 3 + 3) * 4
    again = ModelRepository(tmp_path).get("tiny")
    assert again.source.endswith(":tiny") and again.input_shape == (3, 2, 2)
    with pytest.raises(ModelError, match="exists"):
        repo.register(ModelSpec("tiny", f"factory:{__name__}:tiny", (3, 2, 2)))
    repo.register(ModelSpec("tiny", f"factory:{__name__}:tiny", (3, 2, 2), version=2))
    assert repo.get("tiny").version == 2 and repo.get("tiny", 1).version == 1


def test_torchscript_and_local_weights(tmp_path):
    m = tiny()
    ts = tmp_path / "m.pt"
    torch.jit.script(m).save(str(ts))
    repo = ModelRepository(tmp_path)
    repo.register(ModelSpec("ts", f"torchscript:{ts}", (12,)))
    x = torch.ones(1, 12)
    assert torch.allclose(repo.load(repo.get("ts"))(x), m(x))
    w = tmp_path / "w.pt"
    torch.save(m.state_dict(), w)
    spec = ModelSpec("loaded", f"factory:{__name__}:fresh", (12,), weights=str(w))
    loaded = repo.load(spec)
    assert torch.allclose(loaded(x), m(x))


def fresh():
    torch.manual_seed(123)
    return nn.Sequential(nn.Flatten(), nn.Linear(12, 3))


@pytest.mark.parametrize("kw, match", [
    (dict(name="a b", source="zoo:lenet5", input_shape=(1,)), "letters"),
    (dict(name="x", source="http://m", input_shape=(1,)), "must start with"),
    (dict(name="x", source="zoo:lenet5", input_shape=(1,), task="dance"), "unknown task"),
    (dict(name="x", source="zoo:lenet5", input_shape=(0, 2)), "positive"),
])
def test_invalid_specs(kw, match):
    with pytest.raises(ModelError, match=match):
        ModelSpec(**kw)


def test_bad_shape_zoo_clash_and_unknown(tmp_path):
    repo = ModelRepository(tmp_path)
    with pytest.raises(ModelError, match="does not accept input shape"):
        repo.register(ModelSpec("bad", f"factory:{__name__}:tiny", (5,)))
    with pytest.raises(ModelError, match="built-in"):
        repo.register(ModelSpec("lenet5", "zoo:lenet5", (1, 28, 28)))
    with pytest.raises(ModelError, match="unknown model"):
        repo.get("nope")
    with pytest.raises(ModelError, match="cannot load"):
        repo.load(ModelSpec("x", "factory:no.such.module:f", (1,)))


def _entry(name="app_model", shape=(12,), description="an app's model", seen=None):
    def build(model_dir):
        if seen is not None:
            seen.append(model_dir)
        return tiny()

    return ModelEntry(name, build, shape, "classify", description)


def test_extra_entries_are_built_in_models_built_in_the_repository_directory(tmp_path):
    seen = []
    repo = ModelRepository(tmp_path, extra=[_entry(seen=seen)])
    spec = repo.get("app_model")
    assert (spec.source, spec.input_shape, spec.builtin, spec.description) == (
        "zoo:app_model", (12,), True, "an app's model")
    assert "app_model" in {m.name for m in repo.list()} and "lenet5" in {m.name for m in repo.list()}
    assert repo.load(spec)(torch.ones(1, 12)).shape == (1, 3) and seen == [tmp_path]
    with pytest.raises(ModelError, match="built-in"):
        repo.register(ModelSpec("app_model", f"factory:{__name__}:tiny", (3, 2, 2)))
    # A repository without the app's entries does not know the model, and says where to look.
    with pytest.raises(ModelError, match="unknown model 'app_model'"):
        ModelRepository(tmp_path).get("app_model")
    with pytest.raises(ModelError, match="no catalogue model 'app_model'"):
        ModelRepository(tmp_path).load(spec)


@pytest.mark.parametrize("extra, match", [
    ([_entry("resnet18")], "zoo architectures"),
    ([_entry(), _entry(description="another")], "two different models are named 'app_model'"),
])
def test_extra_entries_may_not_clash(tmp_path, extra, match):
    with pytest.raises(ModelError, match=match):
        ModelRepository(tmp_path, extra=extra)


@pytest.mark.parametrize("kw, match", [
    (dict(name="a b"), "letters"), (dict(task="dance"), "unknown task"), (dict(input_shape=(0, 2)), "positive"),
])
def test_bad_catalogue_entries(kw, match):
    args = dict(name="m", build=lambda d: tiny(), input_shape=(12,), task="classify", description="") | kw
    with pytest.raises(ModelError, match=match):
        ModelEntry(**args)
