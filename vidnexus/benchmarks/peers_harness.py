"""Peer side of ``vidnexus bench peers``: serves one TorchScript model with NVIDIA Triton (PyTriton) or
Ray Serve and replays open-loop arrival traces against it. Run by the peers' own interpreter (see
``scripts/peers-venv.sh``), never imported by vidnexus itself: it needs only the standard library,
numpy, torch and the peer.

Protocol: the driver starts ``python peers_harness.py SYSTEM --model F --threads T --max-batch B
--wait-s W --port P --copies N``
(N separately loaded copies of the model, ``m0`` … ``m<N-1>``, each with its own batcher); the harness prints ``ready`` once the server answers, then reads one JSON line
per probe from stdin, ``{"times": [arrival offsets in s], "models": [model index per arrival]}``,
sends one request per arrival at its time to model ``m<index>`` without waiting for replies, and prints ``{"lat": [...], "err": [...]}`` (client-side
latency in seconds per request, and the error of each failed one, empty when it succeeded).

Systems: ``triton`` (PyTriton's dynamic batcher, gRPC asyncio client), ``ray-handle``
(``@serve.batch`` through a DeploymentHandle), ``ray-http`` (the same deployment through Ray's HTTP
proxy, raw bytes in the body).

Every system receives the same uint8 image (224×224×3, BGR, 150 KB) and converts it on the serving
side (channel flip, C×H×W, float32 in [0, 1]: :func:`_to_tensor`, the conversion the vidnexus
executor runs on its CPU pool for a model registered with ``--images rgb``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from typing import Any, Awaitable, Callable, cast

SHAPE = (3, 224, 224)
IMAGE = (224, 224, 3)
"""What every client sends: a uint8 BGR image."""


def _to_tensor(xs: Any) -> Any:
    """uint8 BGR images (N×H×W×3) → the model's float32 N×3×H×W RGB in [0, 1]."""
    import numpy as np

    return np.ascontiguousarray(xs[..., ::-1].transpose(0, 3, 1, 2)).astype(np.float32) / np.float32(255)


def _load(path: str, threads: int) -> Any:
    import torch

    torch.set_num_threads(threads)
    m = torch.jit.load(path).eval()
    return m


def _forward(model: Any, xs: Any) -> Any:
    import torch

    with torch.inference_mode():
        return model(torch.from_numpy(xs)).numpy()


async def _replay(times: list[float], models: list[int],
                  send: Callable[[int], Awaitable[None]]) -> dict[str, list[Any]]:
    lat: list[float] = [-1.0] * len(times)
    err: list[str] = [""] * len(times)

    async def one(i: int) -> None:
        t0 = time.perf_counter()
        try:
            await send(models[i])
            lat[i] = time.perf_counter() - t0
        except Exception as e:  # a reject or an error is a miss, recorded with its reason
            err[i] = f"{type(e).__name__}: {e}"[:200]

    start = time.perf_counter()
    tasks = []
    for i, t in enumerate(times):
        wait = start + t - time.perf_counter()
        if wait > 0:
            await asyncio.sleep(wait)
        tasks.append(asyncio.ensure_future(one(i)))
    await asyncio.gather(*tasks)
    return {"lat": lat, "err": err}


# The protocol's stdout, kept apart from fd 1: servers started below (tritonserver, Ray's workers) inherit
# fd 1 and write their logs there, so fd 1 is pointed at stderr in main().
PROTO = sys.stdout


def _say(text: str) -> None:
    PROTO.write(text + "\n")
    PROTO.flush()


def _serve_probes(loop: asyncio.AbstractEventLoop, send: Callable[[int], Awaitable[None]], copies: int) -> None:
    for _ in range(3):  # warm-up: first calls at new batch sizes are slow everywhere
        out = loop.run_until_complete(_replay([0.001 * i for i in range(64)], [i % copies for i in range(64)], send))
    failed = [e for e in out["err"] if e]
    if failed:
        sys.exit(f"peers_harness: {len(failed)} of 64 warm-up requests failed: {failed[0]}")
    _say("ready")
    for line in sys.stdin:
        if not line.strip():
            continue
        doc = json.loads(line)
        out = loop.run_until_complete(_replay(doc["times"], doc["models"], send))
        _say(json.dumps(out))


def run_triton(a: argparse.Namespace) -> None:
    import numpy as np
    from pytriton.decorators import batch
    from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor
    from pytriton.triton import Triton, TritonConfig

    def infer_fn(model: Any) -> Callable[..., dict[str, Any]]:
        @batch  # type: ignore[untyped-decorator]  # pytriton lives in the peers venv: untyped here
        def infer(x: Any) -> dict[str, Any]:
            return {"y": _forward(model, _to_tensor(x)).astype(np.int64).reshape(-1, 1)}
        return cast("Callable[..., dict[str, Any]]", infer)  # @batch keeps the call signature

    cfg = TritonConfig(http_port=a.port, grpc_port=a.port + 1, metrics_port=a.port + 2, log_verbose=0)
    with Triton(config=cfg) as triton:
        for k in range(a.copies):
            triton.bind(model_name=f"m{k}", infer_func=infer_fn(_load(a.model, a.threads)),
                        inputs=[Tensor(name="x", dtype=np.uint8, shape=IMAGE)],
                        outputs=[Tensor(name="y", dtype=np.int64, shape=(1,))],
                        config=ModelConfig(max_batch_size=a.max_batch,
                                           batcher=DynamicBatcher(max_queue_delay_microseconds=int(a.wait_s * 1e6))),
                        strict=False)
        triton.run()
        from tritonclient.grpc.aio import InferenceServerClient, InferInput

        loop = asyncio.new_event_loop()
        x = np.random.default_rng(0).integers(0, 256, (1, *IMAGE), dtype=np.uint8)

        async def connect() -> Any:  # the aio channel belongs to the loop it is made on
            return InferenceServerClient(f"127.0.0.1:{a.port + 1}")

        client = loop.run_until_complete(connect())

        async def send(k: int) -> None:
            inp = InferInput("x", list(x.shape), "UINT8")
            inp.set_data_from_numpy(x)
            await client.infer(f"m{k}", [inp])

        try:
            _serve_probes(loop, send, a.copies)
        finally:
            loop.run_until_complete(client.close())


def run_ray(a: argparse.Namespace, http: bool) -> None:
    import numpy as np
    import ray
    from ray import serve

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    serve.start(http_options={"host": "127.0.0.1", "port": a.port}, logging_config={"log_level": "ERROR"})

    @serve.deployment(num_replicas=1, max_ongoing_requests=max(64, 4 * a.max_batch),
                      ray_actor_options={"num_cpus": 0})
    class Model:
        def __init__(self, path: str, threads: int, max_batch: int, wait_s: float) -> None:
            self.model = _load(path, threads)
            self.infer.set_max_batch_size(max_batch)
            self.infer.set_batch_wait_timeout_s(wait_s)

        # ray lives in the peers venv: untyped here.
        @serve.batch(max_batch_size=8, batch_wait_timeout_s=0.01)  # type: ignore[untyped-decorator]
        async def infer(self, xs: list[Any]) -> list[int]:
            return [int(v) for v in _forward(self.model, _to_tensor(np.stack(xs)))]

        async def __call__(self, request: Any) -> dict[str, int]:
            body = await request.body()
            return {"y": await self.infer(np.frombuffer(body, dtype=np.uint8).reshape(IMAGE))}

    deployment: Any = Model  # serve.deployment made it a Deployment (ray is in the peers venv: untyped here)
    handles = [serve.run(deployment.bind(a.model, a.threads, a.max_batch, a.wait_s), name=f"m{k}",
                         route_prefix=f"/m{k}")
               for k in range(a.copies)]
    x = np.random.default_rng(0).integers(0, 256, IMAGE, dtype=np.uint8)
    loop = asyncio.new_event_loop()
    if http:
        import aiohttp

        body = x.tobytes()
        state: dict[str, Any] = {}

        async def open_session() -> None:
            state["s"] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))

        loop.run_until_complete(open_session())

        async def send(k: int) -> None:
            async with state["s"].post(f"http://127.0.0.1:{a.port}/m{k}", data=body) as r:
                if r.status != 200:
                    raise RuntimeError(f"HTTP {r.status}")
                await r.read()
    else:
        async def send(k: int) -> None:
            await handles[k].infer.remote(x)

    try:
        _serve_probes(loop, send, a.copies)
    finally:
        if http:
            loop.run_until_complete(state["s"].close())
        serve.shutdown()
        ray.shutdown()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("system", choices=["triton", "ray-handle", "ray-http"])
    p.add_argument("--model", required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--max-batch", type=int, default=8)
    p.add_argument("--wait-s", type=float, default=0.005)
    p.add_argument("--port", type=int, default=18000)
    p.add_argument("--copies", type=int, default=1)
    a = p.parse_args()
    global PROTO
    PROTO = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    if a.system == "triton":
        run_triton(a)
    else:
        run_ray(a, http=a.system == "ray-http")


if __name__ == "__main__":
    main()
