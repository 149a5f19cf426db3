"""Running a batch of inputs through a torch model on one device (the only torch in the hot path)."""

from __future__ import annotations

import logging
import os
import threading
from typing import Any, Callable, Sequence

import numpy as np

from vidnexus.errors import BatchContractError, ModelError
from vidnexus.gpu_executor.allocator import keep_freed_memory
from vidnexus.gpu_executor.probing import FIRST_RUN_FACTOR

logger = logging.getLogger(__name__)

__all__ = ["GRAPH_SIZES", "GRAPH_FIRST_RUN_FACTOR", "TorchRunner", "OnnxRunner", "TfliteRunner", "file_runner", "model_bytes", "device_memory_bytes"]

GRAPH_SIZES = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)
"""Batch sizes a CUDA-graph runner captures (on first use); a batch runs in the next one up."""
GRAPH_FIRST_RUN_FACTOR = 5.0
"""A CUDA-graph runner's first batch of a size runs the model about this many times longer: two
warm-up runs, the capture, the graph's instantiation and its replay (the background prober budgets
a new size's first run by it)."""


class TorchRunner:
    """Stack inputs into a batch, run the module under ``inference_mode``, split the outputs.

    Args:
        module: a torch ``nn.Module`` or TorchScript module, already on ``device``.
        device: ``cpu`` or ``cuda:N``.
        postprocess: turns one row of the output (a tensor, or a dict for detection models) into a
            plain Python value.
        cuda_graphs: on a CUDA device, run batches through CUDA graphs captured per batch size (the
            next of :data:`GRAPH_SIZES` at or above the batch; the rows past it are padding, and
            a batch past the largest runs eagerly). One replay launches the whole model, where an
            eager run launches each kernel from Python while holding the GIL: a served executor's
            other threads (submits, replies) then slow the device down. Inputs are stacked into a
            pinned staging buffer and copied to the device without a pageable bounce. Only for
            models with a tensor batch in and a tensor out, whose shapes depend only on the batch.
    """

    def __init__(
        self,
        name: str,
        module: Any,
        device: str = "cpu",
        postprocess: Callable[[Any], Any] | None = None,
        list_input: bool = False,
        cuda_graphs: bool = False,
    ) -> None:
        import torch

        keep_freed_memory()  # before the first batch (see gpu_executor.allocator)
        self.name = name
        self.module = module.eval().to(device)
        self.device = device
        self.postprocess = postprocess or (lambda t: t.tolist() if hasattr(t, "tolist") else t)
        self.list_input = list_input
        self.cuda_graphs = cuda_graphs and device.startswith("cuda") and not list_input
        self.first_run_factor = GRAPH_FIRST_RUN_FACTOR if self.cuda_graphs else FIRST_RUN_FACTOR
        self._graphs: dict[tuple[Any, ...], tuple[Any, Any, Any]] = {}
        self._pool: Any = None
        self._host: Any = None
        self._torch = torch
        self._lock = threading.Lock()

    def _graph(self, size: int, shape: tuple[int, ...], dtype: Any) -> tuple[Any, Any, Any]:
        """The graph captured for batches of ``size`` (capturing it the first time): the graph and
        its static input and output on the device."""
        torch = self._torch
        key = (size, shape, str(dtype))
        if key not in self._graphs:
            x = torch.zeros((size, *shape), dtype=getattr(torch, str(dtype)), device=self.device)
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # warm-up runs off the capture stream, as CUDA graphs need
                for _ in range(2):
                    self.module(x)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            # One memory pool for every size: graphs replay one at a time and each output is copied
            # out before the next replay, so what one replay overwrites is dead.
            with torch.cuda.graph(graph, pool=self._pool):
                y = self.module(x)
            self._pool = graph.pool()
            self._graphs[key] = (graph, x, y)
        return self._graphs[key]

    def _staging(self, n: int, shape: tuple[int, ...], dtype: Any) -> Any:
        """A pinned host buffer for ``n`` inputs (one, grown to the largest batch so far)."""
        torch = self._torch
        have = self._host
        if have is None or have.shape[1:] != shape or have.dtype != getattr(torch, str(dtype)) or have.shape[0] < n:
            self._host = torch.empty((n, *shape), dtype=getattr(torch, str(dtype)), pin_memory=True)
        return self._host

    def _replay(self, inputs: Sequence[np.ndarray]) -> Any:
        n = len(inputs)
        size = next((b for b in GRAPH_SIZES if b >= n), None)
        if size is None:
            return None
        shape, dtype = tuple(inputs[0].shape), inputs[0].dtype
        try:
            graph, x, y = self._graph(size, shape, dtype)
        except Exception as e:  # a module that cannot be captured still runs, eagerly
            logger.warning("model %s: no CUDA graph (%s); running eagerly", self.name, e)
            self.cuda_graphs = False
            return None
        host = self._staging(size, shape, dtype)
        np.stack(inputs, out=host.numpy()[:n])
        x[:n].copy_(host[:n], non_blocking=True)
        graph.replay()
        return y[:n].cpu()

    def __call__(self, inputs: Sequence[np.ndarray]) -> list[Any]:
        torch = self._torch
        if not inputs:
            return []
        try:
            with self._lock, torch.inference_mode():
                if self.list_input:
                    # Inputs decoded from a message are read-only views of its bytes; torch warns on
                    # those (it could write through them). Copy only those.
                    batch = [torch.from_numpy(x if x.flags.c_contiguous and x.flags.writeable else np.array(x, order="C"))
                             .to(self.device) for x in inputs]
                    out = self.module(batch)
                else:
                    out = self._replay(inputs) if self.cuda_graphs else None
                    if out is None:
                        out = self.module(torch.from_numpy(np.stack(inputs)).to(self.device))
                if self.device.startswith("cuda"):
                    torch.cuda.synchronize()
        except Exception as e:
            raise ModelError(f"model {self.name} failed on a batch of {len(inputs)}: {e}") from e
        rows = list(out) if not isinstance(out, torch.Tensor) else list(out.cpu())
        if len(rows) != len(inputs):
            raise BatchContractError(
                f"model {self.name} returned {len(rows)} outputs for {len(inputs)} inputs"
            )
        return [self.postprocess(r) for r in rows]


class OnnxRunner:
    """Stack inputs into a batch and run an ONNX model with onnxruntime (its first input, its
    first output, split by rows). The model's batch dimension must be dynamic.

    Args:
        path: the ``.onnx`` file.
        device: ``cpu``, or ``cuda:N`` (onnxruntime's CUDA provider, when the installed
            onnxruntime has it).
        threads: onnxruntime's intra-op threads (0: its default).
    """

    def __init__(self, name: str, path: str, device: str = "cpu",
                 postprocess: Callable[[Any], Any] | None = None, threads: int = 0) -> None:
        import onnxruntime as ort

        keep_freed_memory()  # the batch stacked here, the outputs copied out (gpu_executor.allocator)

        self.name, self.path, self.device = name, path, device
        self.postprocess = postprocess or (lambda t: t.tolist() if hasattr(t, "tolist") else t)
        opts = ort.SessionOptions()
        opts.log_severity_level = 3  # errors only: no per-node warnings on stderr
        if threads:
            opts.intra_op_num_threads = threads
        # Its pool threads sleep between batches: by default they spin, taking a core from the
        # roles that share the host (embedded mode's ingest, worker and sink) while the device
        # thread waits for the next batch.
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        providers: list[Any] = ["CPUExecutionProvider"]
        if device.startswith("cuda"):
            providers.insert(0, ("CUDAExecutionProvider", {"device_id": int(device.partition(":")[2] or 0)}))
        try:
            self.session = ort.InferenceSession(path, sess_options=opts, providers=providers)
        except Exception as e:
            raise ModelError(f"model {name}: onnxruntime cannot load {path}: {e}") from None
        first = self.session.get_inputs()[0]
        self.input_name, self.input_shape = first.name, tuple(first.shape)
        self._lock = threading.Lock()

    def __call__(self, inputs: Sequence[np.ndarray]) -> list[Any]:
        if not inputs:
            return []
        try:
            with self._lock:
                out = self.session.run(None, {self.input_name: np.stack(inputs).astype(np.float32, copy=False)})[0]
        except Exception as e:
            raise ModelError(f"model {self.name} failed on a batch of {len(inputs)}: {e}") from e
        if len(out) != len(inputs):
            raise BatchContractError(f"model {self.name} returned {len(out)} outputs for {len(inputs)} inputs")
        return [self.postprocess(r) for r in out]


class TfliteRunner:
    """Stack inputs into a batch and run a TFLite model in the LiteRT interpreter (its first input,
    its first output, split by rows), on the CPU (XNNPACK).

    A TFLite file fixes its batch at 1; the interpreter resizes the input to each batch size, and
    one interpreter per size is kept (resizing costs an allocation per call). A model whose graph
    cannot take another batch (its reshapes fix the batch at 1: the output's first dimension stays
    1) is run one input after another instead (``batches`` turns False, said once in the log):
    such a model is still served, profiled and scheduled, but a batch costs b runs. Nothing runs
    on a GPU: on a ``cuda`` executor the model still runs on the host CPU.

    Args:
        path: the ``.tflite`` file.
        threads: the interpreter's threads (0: one).
    """

    def __init__(self, name: str, path: str, device: str = "cpu",
                 postprocess: Callable[[Any], Any] | None = None, threads: int = 0) -> None:
        keep_freed_memory()  # the batch stacked here, the outputs copied out (gpu_executor.allocator)
        try:
            from ai_edge_litert.interpreter import Interpreter
        except ImportError as e:
            raise ModelError(f"model {name}: TFLite models need the ai-edge-litert package ({e}); "
                             "`make bootstrap` installs it (requirements-files.lock)") from None
        self.name, self.path, self.device = name, path, device
        self.postprocess = postprocess or (lambda t: t.tolist() if hasattr(t, "tolist") else t)
        self._make: Callable[[], Any] = lambda: Interpreter(model_path=path, num_threads=threads or 1)
        try:
            first = self._make()
        except Exception as e:
            raise ModelError(f"model {name}: LiteRT cannot load {path}: {e}") from None
        detail = first.get_input_details()[0]
        self.input_index = detail["index"]
        self.input_shape = tuple(int(d) for d in detail["shape"])
        first.allocate_tensors()  # the file's own batch: kept, not loaded a second time
        self._by_size: dict[int, Any] = {self.input_shape[0]: first}
        self._lock = threading.Lock()
        self.batches = True
        """False once a batch came back with the wrong number of rows: inputs then run one by one."""

    def _interpreter(self, b: int) -> Any:
        it = self._by_size.get(b)
        if it is None:
            it = self._make()
            it.resize_tensor_input(self.input_index, [b, *self.input_shape[1:]])
            it.allocate_tensors()
            self._by_size[b] = it
        return it

    def __call__(self, inputs: Sequence[np.ndarray]) -> list[Any]:
        if not inputs:
            return []
        b = len(inputs)
        try:
            with self._lock:
                if self.batches:
                    out = self._run(np.stack(inputs))
                    if len(out) != b and b > 1:
                        self.batches = False
                        logger.warning("model %s: its TFLite graph does not take a batch of %d (it gave %d rows); "
                                       "running its inputs one by one", self.name, b, len(out))
                if not self.batches:
                    out = np.concatenate([self._run(x[None]) for x in inputs])
        except Exception as e:
            raise ModelError(f"model {self.name} failed on a batch of {b}: {e}") from e
        if len(out) != b:
            raise BatchContractError(f"model {self.name} returned {len(out)} outputs for {b} inputs")
        return [self.postprocess(r) for r in out]

    def _run(self, batch: np.ndarray) -> np.ndarray:
        it = self._interpreter(len(batch))
        it.set_tensor(self.input_index, batch.astype(np.float32, copy=False))
        it.invoke()
        out: np.ndarray = it.get_tensor(it.get_output_details()[0]["index"])
        return out


def file_runner(name: str, path: str, device: str = "cpu", postprocess: Callable[[Any], Any] | None = None,
                threads: int = 0) -> Any:
    """The runner for a model file: ``.tflite`` → :class:`TfliteRunner`, anything else (``.onnx``)
    → :class:`OnnxRunner`; ``threads`` its runtime's threads (0: the runtime's default)."""
    if str(path).endswith(".tflite"):
        return TfliteRunner(name, path, device, postprocess=postprocess, threads=threads)
    return OnnxRunner(name, path, device, postprocess=postprocess, threads=threads)


def model_bytes(runner: Any) -> int:
    """Memory a runner's model holds on its device, in bytes: a torch module's parameters and buffers
    (a prefix group's trunk and heads: ``prefix.held_bytes``), an ONNX file's size (its weights); 0
    when unknown."""
    if any(hasattr(getattr(runner, a, None), "parameters") for a in ("module", "trunk")):
        from vidnexus.gpu_executor.prefix import held_bytes

        return held_bytes([runner])
    path = getattr(runner, "path", None)
    if path is not None:
        try:
            return os.path.getsize(path)
        except OSError:
            return 0
    return 0


def device_memory_bytes(device: str) -> int:
    """Memory free for models on ``device`` now, in bytes: a GPU's free memory (CUDA), else the
    host's available memory (``MemAvailable``); 0 when it cannot be read."""
    if device.startswith("cuda"):
        try:
            import torch

            free, _ = torch.cuda.mem_get_info(int(device.partition(":")[2] or 0))
            return int(free)
        except Exception:  # no CUDA here, or a driver that does not say
            return 0
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0
