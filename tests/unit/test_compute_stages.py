"""Optional compute-only DNN stages (vidnexus/apps/compute.py): the traffic app with SSDlite before
its recognizer, the dance app with Keypoint R-CNN before its pose regressor. Each runs in a fresh
interpreter because the apps read the switch when their chain is built (at import)."""

import json
import os
import re
import subprocess
import sys

import pytest


def _python(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True,
                          text=True, timeout=300)


GRAPH = ("import json; from vidnexus.apps import load_app; from vidnexus.operators.infer import stage_slos; "
         "a = load_app({app!r}); g = a.graph(); "
         "print(json.dumps({{'models': g.models, 'depth': g.depth(), 'slos': stage_slos(a)}}))")


@pytest.mark.parametrize("app, var, model, recognizer, slo", [
    ("traffic", "VNX_TRAFFIC_DETECTOR", "ssdlite", "car_colours", 400),
    ("dance", "VNX_DANCE_KEYPOINTS", "keypointrcnn", "dance_pose", 300),
])
def test_the_switch_puts_a_first_stage_before_the_recognizer(app, var, model, recognizer, slo):
    on = _python(GRAPH.format(app=app), **{var: model})
    assert on.returncode == 0, on.stderr
    got = json.loads(on.stdout)
    assert got["models"] == [model, recognizer] and got["depth"] == 2
    assert got["slos"] == {model: slo / 2, recognizer: slo / 2}  # the SLO is split over both stages
    off = _python(GRAPH.format(app=app), **{var: ""})
    assert json.loads(off.stdout)["models"] == [recognizer]


def test_a_model_of_the_wrong_task_is_a_clear_error():
    r = _python("from vidnexus.apps import load_app; load_app('traffic')", VNX_TRAFFIC_DETECTOR="resnet18")
    assert r.returncode != 0
    assert "VNX_TRAFFIC_DETECTOR=resnet18: a compute-only stage needs a zoo model with task detect" in r.stderr
    assert "ssdlite" in r.stderr


@pytest.mark.timeout(600)
def test_traffic_demo_with_the_detector_runs_every_frame_through_both_stages():
    r = subprocess.run([sys.executable, "-m", "vidnexus", "demo", "traffic", "--streams", "1", "--seconds", "6",
                        "--fast", "--slo-ms", "60000"], env={**os.environ, "VNX_TRAFFIC_DETECTOR": "ssdlite",
                                                             "COLUMNS": "200"},
                       capture_output=True, text=True, timeout=580)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-3000:]
    assert "terminate called" not in out
    sampled = int(re.search(r"sampled frames: (\d+), accounted in vnx_frames: (\d+)", out).group(1))
    accounted = re.search(r"accounted in vnx_frames: (\d+) \(([^)]*)\)", out)
    assert int(accounted.group(1)) == sampled and accounted.group(2) == f"ok {sampled}", out[-3000:]
    det = re.search(r"executor session ssdlite-30000ms: (\d+) requests", out)
    rec = re.search(r"executor session car_colours-30000ms: (\d+) requests", out)
    assert det and int(det.group(1)) == sampled, out[-3000:]  # every frame went through the detector
    assert rec and int(rec.group(1)) > 0  # and its objects on to the recognizer
    assert re.search(r"cam-1: counted \d+ vehicles; the generator sent \d+ into view", out)
