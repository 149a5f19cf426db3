"""Ingest cost: frames per CPU-second for decode + sample + publish at 1 fps, 5 fps and every frame,
next to `ffmpeg -threads 1` decoding the same file to nothing. Two encodings of the published frames:
what embedded mode puts on its in-process bus (the decoder's planes, uncompressed: the default
there) and what goes over Kafka (JPEG; the same code with ``uncompressed=False``)."""

from __future__ import annotations

import resource
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from vidnexus.benchmarks.machine import machine_info
from vidnexus.errors import VidnexusError

__all__ = ["run", "default_video"]


def default_video() -> Path:
    """The shared real video (cars), found next to the repository checkout."""
    here = Path(__file__).resolve()
    for base in [Path.cwd(), *here.parents]:
        cand = base.parent / "shared" / "data" / "real" / "car-detection.mp4"
        if cand.exists():
            return cand
    raise VidnexusError("cannot find ../shared/data/real/car-detection.mp4; set VNX_BENCH_VIDEO to a video file")


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _vnx(video: Path, fps: float | None, every_n: int | None, uncompressed: bool) -> dict[str, Any]:
    from vidnexus.connectors.memory_bus import MemoryBus
    from vidnexus.streams.ingest import StreamSpec, StreamWorker

    # As if a worker kept up: the bus keeps what its retention keeps, not every frame for a reader
    # that never comes (which it would otherwise hold, up to dormant_bytes).
    bus = MemoryBus(dormant_bytes=0)
    spec = StreamSpec("bench", str(video), fps=fps, every_n=every_n)
    c0, t0 = _cpu(), time.perf_counter()
    st = StreamWorker(spec, bus, "frames", uncompressed=uncompressed).run()
    cpu, wall = _cpu() - c0, time.perf_counter() - t0
    return {"decoded": st.decoded, "published": st.published, "cpu_s": round(cpu, 3), "wall_s": round(wall, 3),
            "decoded_per_cpu_s": round(st.decoded / cpu, 1), "state": st.state}


def _ffmpeg(video: Path) -> dict[str, Any]:
    exe = shutil.which("ffmpeg")
    if exe is None:
        raise VidnexusError("ffmpeg is not installed (Debian: apt-get install ffmpeg); it is the baseline here")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([exe, "-v", "error", "-threads", "1", "-i", str(video), "-f", "null", "-"], check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"cpu_s": round(cpu, 3), "wall_s": round(wall, 3)}


def run(quick: bool, console: Any) -> dict[str, Any]:
    import av
    from rich.table import Table

    from vidnexus.config import load_settings

    chosen = load_settings().bench_video
    video = Path(chosen) if chosen else default_video()
    frames = av.open(str(video)).streams.video[0].frames
    repeats = 1 if quick else 3
    modes = {"1 fps": (1.0, None), "5 fps": (5.0, None), "every frame": (None, 1)}
    encodings = {"uncompressed (in-process bus)": True, "JPEG (Kafka)": False}
    for unc in encodings.values():  # untimed: first-use costs (codec, JPEG encoder, imports) are not ingest
        _vnx(video, 1.0, None, unc)
    results = []
    best: dict[tuple[str, str], dict[str, Any]] = {}
    for enc, unc in encodings.items():
        for name, (fps, n) in modes.items():
            runs = [_vnx(video, fps, n, unc) for _ in range(repeats)]
            best[(enc, name)] = min(runs, key=lambda r: r["cpu_s"])
            results.append({"system": "vidnexus", "frames as": enc, "mode": name, **best[(enc, name)]})
    ff = min((_ffmpeg(video) for _ in range(repeats)), key=lambda r: r["cpu_s"])
    ff["decoded_per_cpu_s"] = round(frames / ff["cpu_s"], 1)
    results.append({"system": "ffmpeg -threads 1 (decode only)", "frames as": "-", "mode": "every frame",
                    "decoded": frames, **ff})
    table = Table("system", "frames as", "mode", "frames decoded", "published", "CPU s", "decoded frames / CPU s",
                  title=f"ingest cost on {video.name} ({frames} frames)")
    for r in results:
        table.add_row(r["system"], r["frames as"], r["mode"], str(r["decoded"]), str(r.get("published", "")),
                      f"{r['cpu_s']:.2f}", f"{r['decoded_per_cpu_s']:.0f}")
    console.print(table)
    emb, kafka = (best[(enc, "every frame")] for enc in encodings)
    summary = {
        "decode_all_vs_ffmpeg": round(emb["decoded_per_cpu_s"] / ff["decoded_per_cpu_s"], 3),
        "decode_all_vs_ffmpeg_jpeg": round(kafka["decoded_per_cpu_s"] / ff["decoded_per_cpu_s"], 3),
        "sample_1fps_speedup_over_decode_all": round(
            kafka["cpu_s"] / best[("JPEG (Kafka)", "1 fps")]["cpu_s"], 3),
    }
    console.print(f"summary: {summary}")
    return {"name": "ingest", "machine": machine_info(),
            "config": {"quick": quick, "video": video.name, "frames": frames, "repeats_best_of": repeats,
                       "jpeg_quality": 85, "bus": "memory", "encodings": list(encodings)},
            "results": results, "summary": summary}
