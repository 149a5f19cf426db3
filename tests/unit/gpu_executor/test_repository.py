import pytest
import torch
import torch.nn as nn

from vidnexus.errors import ModelError
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
