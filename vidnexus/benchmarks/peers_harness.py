"""Peer side of ``vidnexus bench peers`` and ``peers-real``: serves one model file with NVIDIA Triton
(PyTriton) or Ray Serve and replays open-loop arrival traces against it. Run by the peers' own
interpreter (see ``scripts/peers-venv.sh``), never imported by vidnexus itself: it needs only the
standard library, numpy, the model's runtime (torch, onnxruntime or LiteRT) and the peer.

Protocol: the driver starts ``python peers_harness.py SYSTEM --model F --kind K --input X.npy
--threads T --max-batch B --wait-s W --port P --copies N``
(N separately loaded copies of the model, ``m0`` … ``m<N-1>``, each with its own batcher); the harness prints ``ready`` once the server answers, then reads one JSON line
per probe from stdin, ``{"times": [arrival offsets in s], "models": [model index per arrival]}``,
sends one request per arrival at its time to model ``m<index>`` without waiting for replies, and prints ``{"lat": [...], "err": [...]}`` (client-side
latency in seconds per request, and the error of each failed one, empty when it succeeded).

Systems: ``triton`` (PyTriton's dynamic batcher, gRPC asyncio client), ``ray-handle``
(``@serve.batch`` through a DeploymentHandle), ``ray-http`` (the same deployment through Ray's HTTP
proxy, raw bytes in the body).

Every request carries the same uint8 BGR image (``--input``, the one the vidnexus systems get) and
the serving side converts it and answers as the vidnexus executor does for that model (``--kind``,
:data:`KINDS`): ``argmax`` — the TorchScript load generator (MobileNetV3-small ending in argmax):
RGB, C×H×W float32 in [0, 1], the class index; ``text`` — PP-OCRv4's recogniser (ONNX): a 48-high
text line, RGB, C×H×W scaled to [-1, 1], the CTC-decoded text; ``pose`` — BlazePose's landmarks
(TFLite): RGB, H×W×C in [0, 1], the 33 ``[x, y, visibility]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from typing import Any, Awaitable, Callable, cast

KINDS = ("argmax", "text", "pose")


def _convert(kind: str, xs: Any) -> Any:
    """uint8 BGR images (N×H×W×3) → the model's float32 batch (see the module's doc)."""
    import numpy as np

    rgb = xs[..., ::-1]
    if kind == "pose":
        return np.ascontiguousarray(rgb).astype(np.float32) / np.float32(255)
    chw = np.ascontiguousarray(rgb.transpose(0, 3, 1, 2)).astype(np.float32)
    if kind == "text":
        return chw * np.float32(2 / 255) - np.float32(1)
    return chw / np.float32(255)


class Served:
    """One loaded copy of the model file: ``__call__`` takes the requests' uint8 images and returns
    one answer per request."""

    def __init__(self, path: str, kind: str, threads: int) -> None:
        self.kind = kind
        self.chars: list[str] = []
        if path.endswith(".onnx"):
            import onnxruntime as ort

            opts = ort.SessionOptions()
            opts.intra_op_num_threads = threads
            opts.log_severity_level = 3
            sess = ort.InferenceSession(path, sess_options=opts, providers=["CPUExecutionProvider"])
            name = sess.get_inputs()[0].name
            self.forward: Callable[[Any], Any] = lambda xs: sess.run(None, {name: xs})[0]
            if kind == "text":  # PP-OCR's table: the CTC blank, the file's characters, a space
                self.chars = ["", *sess.get_modelmeta().custom_metadata_map["character"].splitlines(), " "]
        elif path.endswith(".tflite"):
            from ai_edge_litert.interpreter import Interpreter

            by_size: dict[int, Any] = {}

            def forward(xs: Any) -> Any:  # one interpreter per batch size, the input resized to it
                it = by_size.get(len(xs))
                if it is None:
                    it = Interpreter(model_path=path, num_threads=threads)
                    d = it.get_input_details()[0]
                    it.resize_tensor_input(d["index"], [len(xs), *d["shape"][1:]])
                    it.allocate_tensors()
                    by_size[len(xs)] = it
                it.set_tensor(it.get_input_details()[0]["index"], xs)
                it.invoke()
                return it.get_tensor(it.get_output_details()[0]["index"])
            self.forward = forward
        else:
            import torch

            torch.set_num_threads(threads)
            module = torch.jit.load(path).eval()

            def forward_torch(xs: Any) -> Any:
                with torch.inference_mode():
                    return module(torch.from_numpy(xs)).numpy()
            self.forward = forward_torch

    def __call__(self, images: Any) -> list[Any]:
        import numpy as np

        out = self.forward(_convert(self.kind, images))
        if len(out) != len(images):
            raise RuntimeError(f"the model gave {len(out)} rows for a batch of {len(images)}")
        if self.kind == "text":  # greedy CTC: best class per step, repeats and blanks removed
            answers: list[Any] = []
            for row in out:
                best = row.argmax(-1)
                keep = (best != 0) & np.concatenate(([True], best[1:] != best[:-1]))
                answers.append("".join(self.chars[i] for i in best[keep]))
            return answers
        if self.kind == "pose":  # 39 × (x, y, z, visibility, presence): the 33 body landmarks
            lm = out.reshape(len(out), -1, 5)[:, :33]
            vis = 1 / (1 + np.exp(-lm[..., 3]))
            return [np.stack([r[:, 0] / 256, r[:, 1] / 256, v], 1).tolist() for r, v in zip(lm, vis)]
        return [int(v) for v in out]


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

    x = np.load(a.input)[None]
    # The answer as a Triton tensor per request: the class index, the text as bytes, the landmarks.
    answers: dict[str, tuple[Any, tuple[int, ...], Callable[[list[Any]], Any]]] = {
        "argmax": (np.int64, (1,), lambda ys: np.asarray(ys, np.int64).reshape(-1, 1)),
        "text": (np.bytes_, (1,), lambda ys: np.array([[y.encode()] for y in ys], dtype=np.object_)),
        "pose": (np.float32, (33, 3), lambda ys: np.asarray(ys, np.float32)),
    }
    dtype, shape, pack = answers[a.kind]

    def infer_fn(model: Served) -> Callable[..., dict[str, Any]]:
        @batch  # type: ignore[untyped-decorator]  # pytriton lives in the peers venv: untyped here
        def infer(x: Any) -> dict[str, Any]:
            return {"y": pack(model(x))}
        return cast("Callable[..., dict[str, Any]]", infer)  # @batch keeps the call signature

    cfg = TritonConfig(http_port=a.port, grpc_port=a.port + 1, metrics_port=a.port + 2, log_verbose=0)
    with Triton(config=cfg) as triton:
        for k in range(a.copies):
            triton.bind(model_name=f"m{k}", infer_func=infer_fn(Served(a.model, a.kind, a.threads)),
                        inputs=[Tensor(name="x", dtype=np.uint8, shape=x.shape[1:])],
                        outputs=[Tensor(name="y", dtype=dtype, shape=shape)],
                        config=ModelConfig(max_batch_size=a.max_batch,
                                           batcher=DynamicBatcher(max_queue_delay_microseconds=int(a.wait_s * 1e6))),
                        strict=False)
        triton.run()
        from tritonclient.grpc.aio import InferenceServerClient, InferInput

        loop = asyncio.new_event_loop()

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

    x = np.load(a.input)

    @serve.deployment(num_replicas=1, max_ongoing_requests=max(64, 4 * a.max_batch),
                      ray_actor_options={"num_cpus": 0})
    class Model:
        def __init__(self, path: str, kind: str, threads: int, max_batch: int, wait_s: float) -> None:
            self.model = Served(path, kind, threads)
            self.infer.set_max_batch_size(max_batch)
            self.infer.set_batch_wait_timeout_s(wait_s)

        # ray lives in the peers venv: untyped here.
        @serve.batch(max_batch_size=8, batch_wait_timeout_s=0.01)  # type: ignore[untyped-decorator]
        async def infer(self, xs: list[Any]) -> list[Any]:
            return self.model(np.stack(xs))

        async def __call__(self, request: Any) -> dict[str, Any]:
            body = await request.body()
            return {"y": await self.infer(np.frombuffer(body, dtype=np.uint8).reshape(x.shape))}

    deployment: Any = Model  # serve.deployment made it a Deployment (ray is in the peers venv: untyped here)
    handles = [serve.run(deployment.bind(a.model, a.kind, a.threads, a.max_batch, a.wait_s), name=f"m{k}",
                         route_prefix=f"/m{k}")
               for k in range(a.copies)]
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
    p.add_argument("--model", required=True, help="the model file: .pt (TorchScript), .onnx or .tflite")
    p.add_argument("--kind", choices=KINDS, default="argmax", help="how requests are converted and answered")
    p.add_argument("--input", required=True, help="the uint8 BGR image every request carries (.npy)")
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
