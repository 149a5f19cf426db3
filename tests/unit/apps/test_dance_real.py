"""The dance app on real people (VNX_DANCE_POSE=blazepose): the largest moving person's pose from
BlazePose (real weights, served by the executor), mapped to the app's 13 keypoints and scored
against the choreography like a rendered dancer's. The people in the real room video walk and
stand: their poses must look like the choreography's standing pose, not its arms-up one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[3]
VIDEO = (ROOT / ".." / "shared" / "data" / "real" / "one-by-one-person-detection.mp4").resolve()


@pytest.mark.timeout(300)
def test_the_dance_app_scores_the_poses_of_real_people(tmp_path):
    from vidnexus.apps.dance.render import MOVES, pose_keypoints, pose_similarity

    assert VIDEO.exists(), VIDEO
    data = tmp_path / "data"
    data.mkdir()
    env = dict(os.environ, VNX_DATA_DIR=str(data), VNX_BUS="memory", VNX_STORE="chdb", VNX_DANCE_POSE="blazepose")
    run = subprocess.run([sys.executable, "-m", "vidnexus", "run", "dance", "--stream", f"room={VIDEO}", "--fps", "5",
                          "--rate", "4", "--until", "50"], env=env, capture_output=True, text=True, timeout=280)
    assert run.returncode == 0, run.stderr[-3000:]
    q = subprocess.run([sys.executable, "-m", "vidnexus", "sql", "--format", "json",
                        "SELECT pts, kp_read, sim, sim_move FROM dance_frames FINAL ORDER BY pts"],
                       env=env, capture_output=True, text=True, timeout=120)
    assert q.returncode == 0, q.stderr[-2000:]
    rows = [json.loads(line) for line in q.stdout.splitlines()]
    f = subprocess.run([sys.executable, "-m", "vidnexus", "sql", "--format", "json",
                        "SELECT count() AS n, countIf(status = 'ok') AS ok FROM vnx_frames FINAL WHERE app = 'dance'"],
                       env=env, capture_output=True, text=True, timeout=120)
    frames = json.loads(f.stdout.splitlines()[0])
    # 50 s at 5 fps: every sampled frame is a row, with a person or without
    assert 250 <= int(frames["n"]) == int(frames["ok"]) == len(rows), (frames, len(rows))
    posed = [r for r in rows if r["kp_read"]]
    # Two people walk in during the first 50 s (6-20 s and 23-45 s, tests/data/hand_counts.json).
    assert len(posed) >= 150, len(posed)
    assert all(0.0 <= float(r["sim"]) <= 1.0 and 0.0 <= float(r["sim_move"]) <= 1.0 for r in posed)
    assert all(float(r["sim"]) == -1.0 for r in rows if not r["kp_read"])
    stand, arms_up = (pose_keypoints(np.array(MOVES[m], np.float64), 0.0, 0.0, 100.0) for m in ("stand", "arms_up"))
    kps = [np.array(r["kp_read"], np.float64).reshape(13, 2) for r in posed]
    standing = np.mean([pose_similarity(kp, stand) > pose_similarity(kp, arms_up) for kp in kps])
    upright = np.mean([kp[0, 1] < min(kp[11, 1], kp[12, 1]) for kp in kps])  # head above the ankles
    print(f"dance on real people: {len(posed)} of {len(rows)} frames posed; standing-like {standing:.3f}, "
          f"upright {upright:.3f}")
    assert standing >= 0.9 and upright >= 0.9, (standing, upright)
