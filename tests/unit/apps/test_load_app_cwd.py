"""`vidnexus run myapp:app` from the folder that holds myapp.py: the `vidnexus` console script does
not put the current directory on sys.path (python -m does), so load_app looks there itself, after
everything else (a file in the current directory never shadows an installed package)."""

import os
import subprocess
import sys
from pathlib import Path

APP = '''
from vidnexus.operators.chain import App, Stream

app = App("mine", slo_ms=1000)
rows = app.table("mine_rows", {"w": "UInt32"})


@app.chain
def pipeline(frames: Stream) -> Stream:
    return frames.map(lambda f: {"w": f.width}).sink(rows)
'''


def test_a_users_app_is_found_in_the_current_directory(tmp_path):
    (tmp_path / "mine.py").write_text(APP)
    script = Path(sys.executable).with_name("vidnexus")  # the console script a user runs
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",) and not k.startswith("VNX_")}
    env.update(VNX_DATA_DIR=str(tmp_path / "data"), VNX_WORK_DIR=str(tmp_path / "work"))
    ok = subprocess.run([str(script), "streams", "add", "cam", "synthetic://hud?fps=5&seconds=1", "--app",
                         "mine:app"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr[-2000:]
    missing = subprocess.run([str(script), "streams", "add", "cam2", "synthetic://hud", "--app", "nothere:app"],
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert missing.returncode == 2
    assert "No module named 'nothere' (looked on sys.path and in the current directory)" in missing.stderr
