"""Bring your own model, across hosts (issue 23 item 1): a user registers an ONNX file and a
TorchScript file once (`vidnexus models register` with VNX_STORE=clickhouse), deletes them, and
two executors, each with a data directory of its own (two hosts that never saw the files), serve
both over the real broker; a worker of an app that names the models starts on a third, and one
that names an unknown model does not."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import numpy as np
import pytest

from tests.integration.conftest import kafka_bus_of
from tests.role_process import read_until_ready, stop_process
from vidnexus.config import Settings
from vidnexus.gpu_executor.client import ExecutorClient

pytestmark = pytest.mark.integration

APP = """
from vidnexus.operators.chain import App

app = App("byo{tag}", slo_ms=5000)
a, b = app.model("{onnx}"), app.model("{ts}")
app.table("t", {{"n": "UInt8"}})
app.chain(lambda s: s.infer(a).infer(b).map(lambda e: {{"n": 1}}).sink("t"))
"""


def _net():
    import torch

    torch.manual_seed(1)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                               torch.nn.Linear(4, 3)).eval()


@pytest.mark.timeout(600)
def test_models_registered_once_are_served_by_executors_on_other_hosts(kafka_bootstrap, clickhouse_url, tmp_path):
    import torch

    from vidnexus.connectors.clickhouse_store import ClickHouseStore

    tag = uuid.uuid4().hex[:6]
    db = f"byo{tag}"
    admin = ClickHouseStore(clickhouse_url)
    admin.execute(f"CREATE DATABASE IF NOT EXISTS {db}")
    admin.close()
    url = clickhouse_url.rsplit("/", 1)[0] + f"/{db}"
    prefix = f"byo{tag}"
    onnx_name, ts_name = f"mine_onnx_{tag}", f"mine_ts_{tag}"
    files = tmp_path / "downloads"
    files.mkdir()
    torch.onnx.export(_net(), (torch.zeros(1, 3, 16, 16),), str(files / "m.onnx"), input_names=["x"],
                      output_names=["y"], dynamic_axes={"x": {0: "n"}, "y": {0: "n"}}, dynamo=False)
    torch.jit.script(_net()).save(str(files / "m.pt"))

    def env(host: str) -> dict[str, str]:
        return dict(os.environ, VNX_BUS="kafka", VNX_STORE="clickhouse", VNX_KAFKA_BOOTSTRAP=kafka_bootstrap,
                    VNX_CLICKHOUSE_URL=url, VNX_CLICKHOUSE_READER_URL=url, VNX_TOPIC_PREFIX=prefix,
                    VNX_DATA_DIR=str(tmp_path / host))

    for name, src in ((onnx_name, f"onnx:{files / 'm.onnx'}"), (ts_name, f"torchscript:{files / 'm.pt'}")):
        r = subprocess.run([sys.executable, "-m", "vidnexus", "models", "register", name, "--from", src,
                            "--input", "3x16x16"], env=env("laptop"), capture_output=True, text=True, timeout=180)
        assert r.returncode == 0, r.stderr[-2000:]
    for f in files.iterdir():
        f.unlink()  # the files exist nowhere but in the store now

    procs = []
    try:
        for host in ("gpu0", "gpu1"):
            p = subprocess.Popen([sys.executable, "-m", "vidnexus", "executor", "--id", host, "--threads", "1",
                                  "-s", f"{onnx_name}:2000", "-s", f"{ts_name}:2000"], env=env(host),
                                 stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
            log: list[str] = []
            procs.append((p, log))
            assert read_until_ready(p, "executor: serving", 240, log), "".join(log[-40:])
        for host in ("gpu0", "gpu1"):
            assert list((tmp_path / host / "models" / "files").iterdir()), f"{host} cached no model file"
        bus = kafka_bus_of("confluent", kafka_bootstrap)
        settings = Settings(bus="kafka", kafka_bootstrap=kafka_bootstrap, topic_prefix=prefix)
        client = ExecutorClient(bus, settings, "byo")
        x = np.random.default_rng(3).random((3, 16, 16), dtype=np.float32)
        with torch.inference_mode():
            want = _net()(torch.from_numpy(x[None]))[0].numpy()
        futs = [client.submit(f"{m}-2000ms", x, slo_s=30.0, frame_no=i) for i in range(8) for m in (onnx_name, ts_name)]
        bus.flush()
        for f in futs:
            r = f.result(timeout=120)
            assert r.ok, r.reason
            np.testing.assert_allclose(np.array(r.output), want, rtol=1e-4, atol=1e-5)
        client.close()
        bus.close()

        # A worker on a third host checks the app's models against the same shared repository.
        app_dir = tmp_path / "app"
        app_dir.mkdir()
        (app_dir / f"byo{tag}.py").write_text(APP.format(tag=tag, onnx=onnx_name, ts=ts_name))
        w = subprocess.Popen([sys.executable, "-m", "vidnexus", "worker", f"byo{tag}:app"], env=env("cpu-box"),
                             cwd=app_dir, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        wlog: list[str] = []
        procs.append((w, wlog))
        assert read_until_ready(w, "started", 120, wlog), "".join(wlog[-40:])
        (app_dir / f"bad{tag}.py").write_text(APP.format(tag=tag, onnx=onnx_name, ts="nobody_registered_this"))
        r = subprocess.run([sys.executable, "-m", "vidnexus", "worker", f"bad{tag}:app"], env=env("cpu-box"),
                           cwd=app_dir, capture_output=True, text=True, timeout=120)
        assert r.returncode != 0 and "nobody_registered_this" in r.stderr, r.stderr[-2000:]
    finally:
        for p, _ in reversed(procs):
            stop_process(p)
        admin = ClickHouseStore(clickhouse_url)
        admin.execute(f"DROP DATABASE IF EXISTS {db}")
        admin.close()
