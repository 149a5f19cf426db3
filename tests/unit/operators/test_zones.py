"""Counting lines (vidnexus/operators/zones.py): sides, directions, once per track and direction,
flicker that never counts; and on the real parking-lot video, through the traffic app, the crossings
of its middle row per direction against the hand count (tests/data/hand_counts.json)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vidnexus.operators.zones import Crossing, Line, LineCounter, parse_lines

ROOT = Path(__file__).resolve().parents[3]
VIDEO = ROOT.parent / "shared" / "data" / "real" / "car-detection.mp4"
HAND = json.loads((ROOT / "tests" / "data" / "hand_counts.json").read_text())["car-detection.mp4"]["line_mid"]


def test_sides_follow_the_line_as_drawn_on_the_image():
    gate = Line("g", 0, 100, 200, 100)  # left to right: below it (larger y) is its right-hand side
    assert gate.side(50, 150) == 1 and gate.side(50, 50) == -1 and gate.side(50, 100) == 0
    assert Line("g", 200, 100, 0, 100).side(50, 150) == -1  # drawn the other way: the sides swap


def test_parse_lines_reads_line_tags_and_names_a_bad_one():
    assert parse_lines({"line.gate": "0,216,768,216", "other": "x"}) == [Line("gate", 0, 216, 768, 216)]
    for bad in ({"line.gate": "0,216,768"}, {"line.gate": "1,1,1,1"}, {"line.": "0,0,1,1"}):
        with pytest.raises(ValueError, match="line"):
            parse_lines(bad)


def test_each_track_counts_once_per_direction_and_only_once_it_counts():
    lc = LineCounter([Line("g", 0, 100, 200, 100), Line("h", 100, 0, 100, 200)])
    assert lc.update(1, (50, 150)) == []
    # Up and to the right: across g upwards (out) and across h, drawn downwards, to its left (out).
    assert lc.update(1, (150, 50)) == [Crossing("g", 1, "out"), Crossing("h", 1, "out")]
    assert lc.update(1, (50, 150)) == [Crossing("g", 1, "in"), Crossing("h", 1, "in")]
    assert lc.update(1, (150, 50)) == []  # dithering: already counted both ways
    assert lc.update(2, (10, 90), counts=False) == [] and lc.update(2, (10, 120), counts=False) == []
    assert lc.update(2, (10, 130), counts=True) == [Crossing("g", 2, "in")]  # reported once it counts
    lc.forget({2})
    assert lc.update(1, (50, 150)) == []  # forgotten: a new start


@pytest.mark.timeout(300)
def test_the_traffic_app_counts_crossings_per_direction_like_a_person(tmp_path, model_cache_dir):
    assert VIDEO.exists(), VIDEO
    data = tmp_path / "data"
    data.mkdir()
    model_cache_dir.mkdir(parents=True, exist_ok=True)
    (data / "models").symlink_to(model_cache_dir.resolve(), target_is_directory=True)
    env = dict(os.environ, VNX_DATA_DIR=str(data), VNX_BUS="memory", VNX_STORE="chdb")
    line = ",".join(str(v) for v in HAND["line"])
    # The file is read as fast as it decodes; a generous SLO keeps a slow moment of this shared box from
    # dropping a frame as late (a dropped frame can lose a crossing): this counts, it does not time.
    run = subprocess.run([sys.executable, "-m", "vidnexus", "run", "traffic", "--stream", f"cam={VIDEO}", "--fps", "5",
                          "--slo-ms", "20000",
                          "--tag", f"line.mid={line}", "--tag", "zone.lower=0,216,768,216,768,432,0,432",
                          "--tag", "zone.corner=0,0,4,0,4,4"], env=env, capture_output=True, text=True, timeout=280)
    assert run.returncode == 0, run.stderr[-3000:]
    q = subprocess.run([sys.executable, "-m", "vidnexus", "sql", "--format", "json",
                        "SELECT splitByChar(':', c)[2] AS direction, count() AS n FROM traffic_objects FINAL "
                        "ARRAY JOIN crossings AS c WHERE splitByChar(':', c)[1] = 'mid' GROUP BY direction"],
                       env=env, capture_output=True, text=True, timeout=120)
    assert q.returncode == 0, q.stderr[-2000:]
    got = {d["direction"]: int(d["n"]) for d in map(json.loads, q.stdout.splitlines())}
    assert got == {"in": HAND["in"], "out": HAND["out"]}, got
    # Dwell per zone, by the app's own query: every car that crossed the middle line drove through
    # the lower half (the hand count: each drives the full height of the lot); none in the corner.
    from vidnexus.apps.traffic import QUERIES

    q = subprocess.run([sys.executable, "-m", "vidnexus", "sql", "--format", "json", QUERIES["dwell per zone"]],
                       env=env, capture_output=True, text=True, timeout=120)
    assert q.returncode == 0, q.stderr[-2000:]
    zones = {d["zone"]: d for d in map(json.loads, q.stdout.splitlines())}
    assert set(zones) == {"lower"}, zones
    assert int(zones["lower"]["vehicles"]) >= HAND["in"] + HAND["out"] and float(zones["lower"]["mean_dwell_s"]) > 0


def test_zones_hold_points_inside_and_on_the_border_and_refuse_bad_tags():
    from vidnexus.operators.zones import Zone, parse_geometry, parse_zones, zones_at

    tri = Zone("t", ((0, 0), (10, 0), (0, 10)))
    assert tri.contains(2, 2) and tri.contains(5, 5) and tri.contains(0, 4) and not tri.contains(6, 6)
    concave = parse_zones({"zone.u": "0,0,30,0,30,30,20,30,20,10,10,10,10,30,0,30"})[0]  # a U
    assert concave.contains(5, 20) and concave.contains(25, 20) and not concave.contains(15, 20)
    assert zones_at([tri, concave], (5, 5)) == ("t", "u")
    for bad in ("1,2,3,4", "1,2,3,4,5", "0,0,1,1,2,2", "a,b,c,d,e,f"):
        with pytest.raises(ValueError, match="zone.z"):
            parse_zones({"zone.z": bad})
    with pytest.raises(ValueError, match="line.x"):
        parse_geometry({"zone.ok": "0,0,1,0,0,1", "line.x": "1,1,1,1"})

