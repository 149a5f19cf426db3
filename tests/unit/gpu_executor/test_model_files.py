"""Bring your own model files (issue 23 item 1): ONNX models run with onnxruntime beside TorchScript,
and a repository with a store keeps the files in it, so a repository on another host (another
directory, the same store) loads them without the files."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from vidnexus.errors import ModelError
from vidnexus.gpu_executor.loading import build_runner
from vidnexus.gpu_executor.repository import ModelRepository, ModelSpec


def _net():
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                               torch.nn.Linear(4, 5)).eval()


def _onnx(path, dynamic=True):
    import torch

    torch.onnx.export(_net(), (torch.zeros(1, 3, 16, 16),), str(path), input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "n"}, "y": {0: "n"}} if dynamic else None, dynamo=False)
    return path


def _torchscript(path):
    import torch

    torch.jit.script(_net()).save(str(path))
    return path


def _expected(x):
    import torch

    with torch.inference_mode():
        return _net()(torch.from_numpy(np.stack(x))).numpy()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("files")
    return {"onnx": _onnx(d / "m.onnx"), "fixed": _onnx(d / "fixed.onnx", dynamic=False),
            "torchscript": _torchscript(d / "m.pt")}


def test_an_onnx_model_registers_and_runs_batches_like_torch(tmp_path, files):
    repo = ModelRepository(tmp_path)
    spec = repo.register(ModelSpec("mine", f"onnx:{files['onnx']}", (3, 16, 16)))
    assert spec.memory_bytes == files["onnx"].stat().st_size
    runner, _ = build_runner(ModelRepository(tmp_path), "mine", "cpu", None)
    x = [np.random.default_rng(k).random((3, 16, 16), dtype=np.float32) for k in range(3)]
    got = np.array(runner(x))
    assert got.shape == (3, 5)
    np.testing.assert_allclose(got, _expected(x), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kw, match", [
    (dict(task="detect"), "classify, embed or text"),
    (dict(input_shape=(3, 32, 32)), "does not take --input 3x32x32"),
    (dict(source="fixed"), "batch dimension is fixed"),
    (dict(source="missing"), "no ONNX file"),
])
def test_onnx_registration_names_what_is_wrong(tmp_path, files, kw, match):
    source = {"fixed": f"onnx:{files['fixed']}", "missing": f"onnx:{tmp_path / 'nope.onnx'}"}.get(
        kw.pop("source", ""), f"onnx:{files['onnx']}")
    with pytest.raises(ModelError, match=match):
        ModelRepository(tmp_path).register(ModelSpec("mine", source, kw.pop("input_shape", (3, 16, 16)), **kw))


def test_a_repository_with_a_store_shares_the_files_with_every_host(tmp_path, files):
    from vidnexus.connectors.chdb_store import ChdbStore

    store = ChdbStore(None)
    try:
        src = tmp_path / "registering-host"
        src.mkdir()
        onnx, ts = shutil.copy(files["onnx"], src), shutil.copy(files["torchscript"], src)
        here = ModelRepository(tmp_path / "a", store=store)
        assert here.register(ModelSpec("o", f"onnx:{onnx}", (3, 16, 16))).sha256
        assert here.register(ModelSpec("t", f"torchscript:{ts}", (3, 16, 16))).sha256
        shutil.rmtree(src)  # the files are gone from the host that registered them
        there = ModelRepository(tmp_path / "b", store=store)  # another host: its own directory, same store
        assert {m.name for m in there.list() if not m.builtin} == {"o", "t"}
        x = [np.random.default_rng(7).random((3, 16, 16), dtype=np.float32)]
        for name in ("o", "t"):
            runner, spec = build_runner(there, name, "cpu", None)
            np.testing.assert_allclose(np.array(runner(x)), _expected(x), rtol=1e-4, atol=1e-5)
            assert (tmp_path / "b" / "files").is_dir() and spec.sha256
        assert not (tmp_path / "b" / "registry.json").exists()  # the registry is the store's
        # A re-registration of the same version needs --overwrite; a new version is kept beside.
        with pytest.raises(ModelError, match="exists"):
            there.register(ModelSpec("o", f"onnx:{files['onnx']}", (3, 16, 16)))
        there.register(ModelSpec("o", f"onnx:{files['onnx']}", (3, 16, 16), version=2))
        assert here.get("o").version == 2 and here.get("o", 1).version == 1
        # A cached copy that does not match its hash (a write cut short) is fetched again.
        import hashlib
        from pathlib import Path

        spec = there.get("o")
        cached = Path(there.file_of(spec))
        cached.write_bytes(b"half a file")
        assert Path(there.file_of(spec)) == cached
        assert hashlib.sha256(cached.read_bytes()).hexdigest() == spec.sha256
        # A file the store no longer holds in full is an error that says so.
        store.execute("TRUNCATE TABLE vnx_model_files")
        fresh = ModelRepository(tmp_path / "c", store=store)
        with pytest.raises(ModelError, match="not complete in the store"):
            fresh.file_of(spec)
        # With a shared repository, a weights file of one host is refused.
        with pytest.raises(ModelError, match="names a file on this host only"):
            there.register(ModelSpec("z", "zoo:lenet5", (1, 28, 28), weights=str(files["torchscript"])))
    finally:
        store.close()
