"""The icons app: a task with variants served end to end on the embedded default. Under a budget
that the int8 oracle fits and the float32 oracle does not (memory), the scheduler's plans
name the int8 variant, an executor hosts it, the worker's requests go to it, and every frame ends
as a row or an accounted drop."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from vidnexus.apps import task_catalog

STREAMS, FPS, SECONDS = 2, 5, 30


def test_the_plan_serves_the_task_with_the_variant_its_budget_allows(tmp_path, model_cache_dir):
    catalog = {v.name: v for v in task_catalog("glyph120", model_cache_dir)}  # trained and measured once
    rate = STREAMS * FPS
    # Memory binds: the int8 oracle's weights fit and the float32 oracle's (~4x larger) do not, a
    # bound no CPU contention moves. Device time is 3x what the float32 oracle needs: a device-time
    # bound between the two (1.9x apart here) broke in CI twice, once when the executor's contended
    # profile put int8 over it, once when a first plan's rate was 0 (since fixed in the scheduler).
    oracle, int8 = catalog["glyph120_oracle"], catalog["glyph120_oracle_int8"]
    memory_mb = (oracle.memory_bytes + int8.memory_bytes) / 2 / 1e6
    assert int8.memory_bytes < memory_mb * 1e6 < oracle.memory_bytes, catalog  # the premise
    budget = f"{rate * 3 * oracle.cost_s(16):.6f},{memory_mb:.6f}"
    data = tmp_path / "data"
    data.mkdir()
    (data / "models").symlink_to(model_cache_dir.resolve(), target_is_directory=True)
    env = dict(os.environ, VNX_DATA_DIR=str(data), VNX_BUS="memory", VNX_STORE="chdb")
    streams = [f"s{g}=synthetic://game?game={g}&seed={g}&fps=10&seconds={SECONDS}" for g in range(STREAMS)]
    saved = tmp_path / "run.json"
    run = subprocess.run([sys.executable, "-m", "vidnexus", "run", "icons", *sum((["--stream", s] for s in streams), []),
                          "--fps", str(FPS), "--rate", "1", "--variant-budget",
                          f"glyph120={budget}", "--save", str(saved)],
                         env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(saved.read_text())["result"]
    chosen = [p["variants"].get("glyph120") for p in result["plans"] if p["variants"]]
    assert chosen and chosen[0] == "glyph120_oracle_int8", chosen  # while the streams send: the int8 one
    served: dict[str, int] = {}
    for s in result["executor"]:
        model = s["session"].rpartition("-")[0]
        served[model] = served.get(model, 0) + s["replies"]
    frames = STREAMS * FPS * SECONDS
    # Until the first plan the cheapest variant serves; then the int8 one. The float32 oracle never
    # fits the memory budget.
    assert served.get("glyph120_oracle_int8", 0) >= 0.3 * frames, served
    assert "glyph120_oracle" not in served and set(chosen) == {"glyph120_oracle_int8"}, (served, chosen)
    assert result["all_accounted"] and result["published"] == frames, result["status"]
    ok = result["status"].get("ok", 0)
    assert ok >= 0.95 * frames, (result["status"], result["reasons"])
    assert result["tables"]["icon_reads"] == ok
    q = subprocess.run([sys.executable, "-m", "vidnexus", "sql", "--format", "json",
                        "SELECT avg(item_read = item_truth) AS acc, countIf(item_truth < 0) AS untold FROM icon_reads FINAL"],
                       env=env, capture_output=True, text=True, timeout=120)
    assert q.returncode == 0, q.stderr[-2000:]
    row = json.loads(q.stdout.splitlines()[0])
    assert int(row["untold"]) == 0 and float(row["acc"]) >= 0.85, row  # the variants read 0.88–0.97 held out
