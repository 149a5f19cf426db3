"""``vidnexus demo|run … --save FILE.json``: a short real run writes its record (every frame
accounted, the command as typed, the machine), a bad path is refused before the run, and the write
is atomic."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from vidnexus.cli.saved_run import check_save_path, command_line, git_state, write_json
from vidnexus.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def _vnx(args: list[str], data: Path, model_cache_dir: Path) -> subprocess.CompletedProcess:
    """``python -m vidnexus ARGS`` with its own store in ``data`` and the shared trained models."""
    data.mkdir(exist_ok=True)
    model_cache_dir.mkdir(parents=True, exist_ok=True)
    (data / "models").symlink_to(model_cache_dir.resolve(), target_is_directory=True)
    env = dict(os.environ, VNX_DATA_DIR=str(data), VNX_BUS="memory", VNX_STORE="chdb", COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "vidnexus", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)


def _check_run(doc: dict, command: str) -> dict:
    assert doc["schema"] == "vidnexus.run/1" and doc["command"] == command
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", doc["started_utc"])
    m = doc["machine"]
    assert m["cores"] == os.cpu_count() and m["python"] == sys.version.split()[0]
    assert m["platform"] and isinstance(m["memory_gib"], float) and "cpu" in m
    assert re.fullmatch(r"[0-9a-f]{40}", doc["git"]["commit"])  # the tests run from the checkout
    r = doc["result"]
    assert r["published"] > 0 and r["accounted"] == r["published"] and r["all_accounted"]
    assert sum(r["status"].values()) == r["accounted"]
    assert sum(s["frames"] for s in r["per_stream"]) == r["accounted"]
    assert sum(s["published"] for s in r["ingest"]) == r["published"]
    assert {s["session"] for s in r["executor"]} == {"hud_digits-200ms"}
    assert r["models"]["hud_digits"]["l1_ms"] > 0 and r["stage_slos_ms"] == {"hud_digits": 200.0}
    assert r["tables"] == {"hud_reads": r["status"].get("ok", 0) + r["status"].get("partial", 0)}
    assert r["report"][0].startswith(f"sampled frames: {r['published']}, accounted in vnx_frames: {r['accounted']}")
    return r


@pytest.mark.timeout(300)
def test_demo_saves_what_it_measured(tmp_path, model_cache_dir):
    out = tmp_path / "x.json"
    args = ["demo", "hud", "--streams", "1", "--seconds", "3", "--fast", "--save", str(out)]
    p = _vnx(args, tmp_path / "data", model_cache_dir)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    assert f"saved the run to {out}" in p.stderr
    # A healthy demo prints no warning, traceback or native noise (issue 27: `make demo` runs it).
    noise = ("Traceback", "WARNING", "Warning:", "warning:", "leaked", "terminate called", "\x1b[")
    assert not [ln for ln in (p.stdout + p.stderr).splitlines() if any(n in ln for n in noise)], p.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["kind"] == "demo"
    _check_run(doc, "vidnexus " + " ".join(args))
    s = doc["settings"]
    assert (s["app"], s["slo_ms"], s["bus"], s["store"]) == ("hud", 200.0, "memory", "chdb")
    assert s["options"] == {"name": "hud", "streams": 1, "seconds": 3.0, "sample_fps": 5.0, "source_fps": 10.0,
                            "slo_ms": None, "fast": True}
    assert s["streams"] == [{"name": "cam-1", "url": "synthetic://hud?seed=1&fps=10&seconds=3", "fps": 5.0,
                             "every_n": None, "keyframes_only": False, "realtime": False, "speed": 1.0, "until_s": None,
                             "backfill": False}]
    d = doc["demo"]
    assert d["name"] == "hud" and "digit reader" in d["prepare"] and d["prepare_s"] >= 0
    per_stream = d["queries"][0]
    assert per_stream["title"] == "per stream" and per_stream["columns"][:3] == ["stream", "frames", "read"]
    assert per_stream["rows"][0][:2] == ["cam-1", doc["result"]["published"]]
    assert d["summary"] == [] and d["figures"] == {}  # hud has no summary
    assert not [f for f in tmp_path.iterdir() if f.name.endswith(".tmp")]


@pytest.mark.timeout(300)
def test_run_saves_its_streams_and_result(tmp_path, model_cache_dir):
    """With a backfill stream beside the live one: its frames go through the backfill worker, with no
    deadline, into the same tables; every frame of both is accounted; the executor's stats (what the
    planner sees) hold the live session only."""
    out = tmp_path / "run.json"
    args = ["run", "hud", "--stream", "cam=synthetic://hud?seed=2&fps=10&seconds=2",
            "--backfill", "old=synthetic://hud?seed=3&fps=10&seconds=2", "--fps", "5", "--save", str(out)]
    p = _vnx(args, tmp_path / "data", model_cache_dir)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    doc = json.loads(out.read_text())
    assert doc["kind"] == "run" and "demo" not in doc
    # shlex quoting: the command line can be pasted back into a shell
    r = _check_run(doc, "vidnexus run hud --stream 'cam=synthetic://hud?seed=2&fps=10&seconds=2' --backfill "
                   "'old=synthetic://hud?seed=3&fps=10&seconds=2' --fps 5 --save " + str(out))
    assert [(s["name"], s["backfill"]) for s in doc["settings"]["streams"]] == [("cam", False), ("old", True)]
    assert doc["settings"]["options"]["stream"] == ["cam=synthetic://hud?seed=2&fps=10&seconds=2"]
    published = {s["name"]: s["published"] for s in r["ingest"]}
    assert published["old"] > 0 and {s["stream"]: s["frames"] for s in r["per_stream"]} == published
    old = next(s for s in r["per_stream"] if s["stream"] == "old")
    assert "dropped" not in old["status"] and "error" not in old["status"], old  # no deadline to miss


@pytest.mark.parametrize("where, message", [
    ("no/such/folder/x.json", "folder {tmp}/no/such/folder does not exist"),
    ("", "is a folder"),
])
def test_a_path_that_cannot_be_written_is_refused(tmp_path, where, message):
    with pytest.raises(ConfigError, match=re.escape(message.format(tmp=tmp_path))):
        check_save_path(tmp_path / where)


def test_the_write_is_atomic_and_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "r.json"
    path.write_text("old")
    write_json(path, {"a": 1, "b": "ℓ(1)"})
    assert json.loads(path.read_text(encoding="utf-8")) == {"a": 1, "b": "ℓ(1)"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]
    with pytest.raises(ConfigError, match="cannot write it"):
        write_json(tmp_path / "gone" / "r.json", {"a": 1})
    with pytest.raises(ValueError):  # NaN is not JSON: the caller makes it null
        write_json(path, {"a": float("nan")})
    assert json.loads(path.read_text()) == {"a": 1, "b": "ℓ(1)"} and len(list(tmp_path.iterdir())) == 1


def test_the_command_line_is_quoted_as_typed_and_git_is_best_effort(tmp_path):
    assert command_line(["run", "my app:app", "--stream", "a&b"]) == "vidnexus run 'my app:app' --stream 'a&b'"
    assert git_state(tmp_path) is None  # not a checkout
    state = git_state()
    assert state is not None and re.fullmatch(r"[0-9a-f]{40}", state["commit"]) and state["dirty"] in (True, False)
