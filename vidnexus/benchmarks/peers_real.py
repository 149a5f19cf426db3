"""``vidnexus bench peers-real``: ``vidnexus bench peers`` on the models that recognise real footage
with real weights, so its figures also hold for work that recognises something — ``hud_text``
(PaddleOCR's PP-OCRv4 text recogniser, ONNX in onnxruntime) and ``pose_landmarks`` (Google's
BlazePose GHUM landmarks, TFLite in LiteRT).

Every system loads the same model file from its package and receives the same uint8 BGR image (a
48×320 text line drawn over the real room video; a 256×256 square of it), converts it on the
serving side as the vidnexus executor does and answers the same way (the CTC-decoded text, the 33
landmarks). Same SLOs, arrival patterns, warm-up, bisection and knob grids as ``bench peers``; left
out (time): the three-model scenario (three copies of one app's model is the load generator's
question, not these models') and ray-http (ray-handle behind Ray's HTTP proxy, below ray-handle in
every cell of ``bench peers``). One runtime thread per server. Summary keys are the ``peers`` ones
prefixed with the model's name.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from vidnexus.benchmarks.machine import machine_info
from vidnexus.benchmarks.peers import _grids, _versions, measure_workload, peers_python, real_workload

__all__ = ["MODELS", "run"]

MODELS = ("hud_text", "pose_landmarks")


def run(quick: bool, console: Any) -> dict[str, Any]:
    from vidnexus.config import load_settings

    t_start = time.perf_counter()
    py = peers_python(("pytriton", "ray.serve", "onnxruntime", "ai_edge_litert.interpreter"))
    settings = load_settings()
    work = Path(tempfile.mkdtemp(prefix="peers-real-", dir=settings.work_dir if settings.work_dir.exists() else None))
    # ray-http is ray-handle behind Ray's HTTP proxy, below it in every cell of `bench peers`: left out (time).
    systems = [s for s in _grids(quick)[0] if s != "ray-http"]
    results: list[dict[str, Any]] = []
    best: list[dict[str, Any]] = []
    summary: dict[str, Any] = {}
    configs: dict[str, Any] = {}
    for name in MODELS:
        console.print(f"[bold]{name}[/bold]")
        out = measure_workload(real_workload(name), quick=quick, console=console, py=py, work=work,
                               systems=systems, multi=False)
        results += out["results"]
        best += out["best"]
        summary.update({f"{name}_{k}": v for k, v in out["summary"].items()})
        configs[name] = out["config"]
    console.print(f"summary: {summary}  ({time.perf_counter() - t_start:.0f} s)")
    shutil.rmtree(work / "data", ignore_errors=True)
    return {"name": "peers-real", "machine": {**machine_info(), "peers": _versions(py)},
            "config": {"quick": quick, "models": configs, "logs": str(work / "logs")},
            "results": results, "best": best, "summary": summary}
